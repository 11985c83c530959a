// TLS 1.3 interop with the Linux host (TP 8011): a trixie guest (test/interop/tls-lab.sh: tlshd, nvme-cli 2.13,
// keyutils, Debian's 6.12 kernel) inserts our configured PSK with `nvme check-tls-key --insert`, connects to our
// target with `nvme connect --tls`, runs fio verify, reconnects after the target restarts, disconnects. Whether the
// kernel host accepts the NewSessionTicket a Node TLS server sends after the handshake is answered by the connect step.
import { spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { Buffer } from 'node:buffer';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, labDir, labKernel, killLabGroup, parseSteps, runLabScript, startCliTarget, startWaitingLab, type CliTarget, type StepResult, type WaitingLab } from '../../harness/lab.js';
import { connect } from '../../initiator/index.js';
import { deriveTlsPsk, formatTlsKey, parseTlsKey, type HkdfLabelEncoding } from '../../protocol/tls/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const LAB_OUT = process.env['LAB_TLS_OUT'] ?? '/var/tmp/nvme-lab-tls';
const SUBNQN = 'nqn.2024-01.io.nvme-tcp-ts:tls-interop';
const HOSTID = '6c61622d-6e76-6d65-7463-700000000201';
const HOSTNQN = `nqn.2014-08.org.nvmexpress:uuid:${HOSTID}`;
const GUEST_ADDR = '10.0.2.100';
const GUEST_PORT = 4420;
const KEY = formatTlsKey(1, randomBytes(32));
const ROOT = path.resolve(here, '..', '..');
const NO_TICKETS = path.join(ROOT, 'target', 'transport', 'tcp', 'openssl-no-tickets.cnf');


function ensureLab(): void {
  const r = spawnSync('bash', [path.join(here, 'tls-lab.sh')], { encoding: 'utf8', env: { ...process.env, LAB_TLS_OUT: LAB_OUT } });
  if (r.status !== 0) throw new Error(`tls-lab.sh failed (rc ${String(r.status)}): ${r.stderr.slice(-3000)}`);
}

/** libnvme before its 2025 HKDF-Expand-Label fix (1.16) derives with the old encoding (docs/tls.md). */
function labEncoding(): HkdfLabelEncoding {
  const env = readFileSync(path.join(LAB_OUT, 'lab.env'), 'utf8');
  const v = /^LIBNVME=(\d+)\.(\d+)/m.exec(env);
  if (!v) return 'rfc8446';
  return Number(v[1]) === 1 && Number(v[2]) < 16 ? 'pre-2025' : 'rfc8446';
}

describe(`TLS: Linux host (tlshd, nvme-cli --tls, kernel ${labKernel(LAB_OUT)}) → our target`, () => {
  let target: CliTarget | undefined;
  let dir: string | undefined;
  let lab: ChildProcess | undefined;
  let out = '';
  let steps = new Map<string, StepResult>();
  const logs: string[] = [];
  let encoding: HkdfLabelEncoding = 'rfc8446';

  /**
   * The target as its own process, started with openssl-no-tickets.cnf: OpenSSL's configuration is read once at process
   * start, and without NumTickets = 0 the NewSessionTicket breaks the kernel host (docs/tls.md).
   */
  async function startTarget(port: number, dir: string): Promise<CliTarget> {
    const cfg = path.join(dir, 'target.json');
    writeFileSync(
      cfg,
      JSON.stringify({
        ports: [{ id: 1, addr: '127.0.0.1', port, tls: 'required', advertiseAddr: GUEST_ADDR, advertisePort: GUEST_PORT }],
        subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '64M' } }] }],
        hosts: [{ nqn: HOSTNQN, tlsKey: KEY, tlsHkdf: encoding }],
      }),
      { mode: 0o600 },
    );
    return startCliTarget(['--config', cfg, '--log-level', 'debug'], { nodeArgs: [`--openssl-config=${NO_TICKETS}`], log: logs });
  }

  beforeAll(async () => {
    ensureLab();
    encoding = labEncoding();
    dir = mkdtempSync(path.join(tmpdir(), 'nvme-tls-interop-'));
    target = await startTarget(0, dir);
    const port = target.port;
    const args = [path.join(labDir(), 'run.sh'), '--timeout', '400', '--mem', '2048', '--hostfwd', 'none', '--guestfwd', `${GUEST_ADDR}:${GUEST_PORT}:${port}`];
    for (const [k, v] of Object.entries({ SUBNQN, HOSTNQN, HOSTID, KEY })) args.push('--env', `${k}=${v}`);
    args.push(path.join(here, 'guest-tls', 'kernel-host-tls.sh'));
    let restarted = false;
    const run = runLabScript(
      args,
      (_chunk, seen) => {
        if (restarted || !seen.includes('@@RESTART-TARGET')) return;
        restarted = true;
        const old = target;
        void (async () => {
          old?.child.kill('SIGTERM');
          await old?.exited;
          target = await startTarget(port, dir as string);
        })();
      },
      { LAB_OUT },
    );
    lab = run.child;
    out = (await run.done).out;
    steps = parseSteps(out);
    const dump = process.env['TLS_INTEROP_DUMP'];
    if (dump !== undefined) writeFileSync(path.join(dump, 'tls-kernel-host.log'), `${out}\n---- target log ----\n${logs.join('\n')}`);
  }, 600_000);

  afterAll(async () => {
    killLabGroup(lab);
    if (target !== undefined && target.child.exitCode === null) {
      target.child.kill('SIGTERM');
      await target.exited;
    }
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  const step = (name: string): StepResult | undefined => steps.get(name);
  const why = (): string => `lab output tail:\n${out.slice(-5000)}\ntarget log tail:\n${logs.slice(-30).join('\n')}`;

  it('nvme-cli derives the same identity as protocol/tls (version 1, its HKDF encoding)', () => {
    const line = /^IDENTITY1 (.*)$/m.exec(out)?.[1];
    if (line === undefined || !/NVMe1R01/.test(line)) return; // this nvme-cli cannot print it; the connect below still checks the PSK
    const ours = deriveTlsPsk(parseTlsKey(KEY), HOSTNQN, SUBNQN, 1, encoding).identity;
    expect(line).toContain(ours);
  });

  it('nvme gen-tls-key output parses (interchange format and CRC)', () => {
    const k = /^GENKEY (NVMeTLSkey-1:\S+)/m.exec(out)?.[1];
    expect(k, why()).toBeDefined();
    expect(parseTlsKey(k as string).length).toBe(32);
  });

  it('the key goes into the .nvme keyring and tlshd runs', () => {
    expect(step('insert')?.status, why()).toBe('PASS');
    expect(step('tlshd')?.status, why()).toBe('PASS');
  });

  it('nvme connect --tls: every queue handshakes (with NumTickets = 0: no NewSessionTicket reaches kTLS)', () => {
    expect(step('connect')?.status, why()).toBe('PASS');
  });

  it('fio verify over TLS', () => {
    expect(step('fio')?.status, why()).toBe('PASS');
  });

  it('reconnects after a target restart with new handshakes, verify passes', () => {
    expect(step('restart')?.status, why()).toBe('PASS');
    expect(step('disconnect')?.status, why()).toBe('PASS');
  });

  it('lab exists', () => {
    expect(existsSync(path.join(LAB_OUT, 'initramfs.cpio'))).toBe(true);
  });
});

describe('TLS: our initiator → Linux nvmet with a TLS-required port (tlshd server side)', () => {
  const OUR_HOST = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000202';
  let lab: WaitingLab | undefined;
  const out = (): string => lab?.out() ?? '';
  let dataPort = 0;
  let ctlPort = 0;

  beforeAll(async () => {
    ensureLab();
    dataPort = await freePort();
    ctlPort = await freePort();
    const args = [path.join(labDir(), 'run.sh'), '--timeout', '400', '--mem', '2048', '--hostfwd', `${dataPort}:4420`, '--hostfwd', `${ctlPort}:5999`, '--guestfwd', 'none'];
    for (const [k, v] of Object.entries({ SUBNQN, HOSTNQN: OUR_HOST, KEY, WAIT_S: '300' })) args.push('--env', `${k}=${v}`);
    args.push(path.join(here, 'guest-tls', 'nvmet-tls.sh'));
    lab = await startWaitingLab(args, { ctlPort, env: { LAB_OUT } });
  }, 600_000);

  afterAll(async () => {
    await lab?.release();
    const dump = process.env['TLS_INTEROP_DUMP'];
    if (dump !== undefined) writeFileSync(path.join(dump, 'tls-nvmet.log'), out());
  }, 120_000);

  it('connects over TLS (2 I/O queues), verifies 4 KiB and 128 KiB writes, disconnects', async () => {
    const c = await connect({ traddr: '127.0.0.1', trsvcid: dataPort, nqn: SUBNQN, hostnqn: OUR_HOST, nr_io_queues: 2, tls_key: KEY, tls_hkdf: labEncoding(), io_timeout: 60, admin_timeout: 60 });
    try {
      const ns = c.namespace(1);
      // nvmet's file backend on tmpfs reports 4096-byte blocks: count in the namespace's own block size.
      for (const [lba, len] of [[0, 4096], [64, 131072]] as const) {
        const data = Buffer.alloc(len);
        for (let i = 0; i < len; i++) data[i] = (i * 13 + Number(lba)) & 0xff;
        await ns.write(lba, data);
        expect((await ns.read(lba, len / ns.blockSize)).equals(data)).toBe(true);
      }
    } finally {
      await c.disconnect();
    }
  }, 300_000);
});
