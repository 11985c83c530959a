// Secure channel concatenation interop (TP 8018) with the Linux host: the newest Debian kernel (trixie-backports 7.x)
// with the trixie userland (tls7-lab.sh: tlshd, nvme-cli 2.13) runs `nvme connect --concat --dhchap-secret` against our
// target (a TLS 'required' port with tlsConcat, the host's DH-HMAC-CHAP key, no TLS key): DH-HMAC-CHAP NEWTLSPSK in
// cleartext, TLS on the generated PSK, fio verify, re-authentication (REPLACETLSPSK), `nvme reset` (new PSK, new
// handshakes), disconnect. Then our
// initiator (concat) against the guest's nvmet offering concatenation, with verify.
import { spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { Buffer } from 'node:buffer';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, labDir, killLabGroup, parseSteps, runLabScript, startCliTarget, startWaitingLab, type StepResult, type WaitingLab } from '../../harness/lab.js';
import { connect } from '../../initiator/index.js';
import { generateDhchapKey } from '../../protocol/auth/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const LAB_OUT = process.env['LAB_TLS7_OUT'] ?? '/var/tmp/nvme-lab-tls7';
const SUBNQN = 'nqn.2024-01.io.nvme-tcp-ts:concat-interop';
const HOSTID = '6c61622d-6e76-6d65-7463-700000000301';
const HOSTNQN = `nqn.2014-08.org.nvmexpress:uuid:${HOSTID}`;
const SECRET = generateDhchapKey({ hmac: 1, hostnqn: HOSTNQN }).format();
const GUEST_ADDR = '10.0.2.100';
const GUEST_PORT = 4420;
const ROOT = path.resolve(here, '..', '..');
const NO_TICKETS = path.join(ROOT, 'target', 'transport', 'tcp', 'openssl-no-tickets.cnf');

function ensureLab(): void {
  const r = spawnSync('bash', [path.join(here, 'tls7-lab.sh')], { encoding: 'utf8', env: { ...process.env, LAB_TLS7_OUT: LAB_OUT } });
  if (r.status !== 0) throw new Error(`tls7-lab.sh failed (rc ${String(r.status)}): ${r.stderr.slice(-3000)}`);
}

describe('secure channel concatenation: Linux 7.x host (nvme connect --concat, tlshd) → our target', () => {
  let child: ChildProcess | undefined;
  let exited: Promise<number | null> | undefined;
  let dir: string | undefined;
  let lab: ChildProcess | undefined;
  let out = '';
  let steps = new Map<string, StepResult>();
  const logs: string[] = [];

  beforeAll(async () => {
    ensureLab();
    dir = mkdtempSync(path.join(tmpdir(), 'nvme-concat-interop-'));
    const cfg = path.join(dir, 'target.json');
    writeFileSync(
      cfg,
      JSON.stringify({
        ports: [{ id: 1, addr: '127.0.0.1', port: 0, tls: 'required', tlsConcat: true, advertiseAddr: GUEST_ADDR, advertisePort: GUEST_PORT }],
        subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '64M' } }] }],
        hosts: [{ nqn: HOSTNQN, dhchapKey: SECRET }],
      }),
      { mode: 0o600 },
    );
    const t = await startCliTarget(['--config', cfg, '--log-level', 'debug'], { nodeArgs: [`--openssl-config=${NO_TICKETS}`], log: logs });
    child = t.child;
    exited = t.exited;
    const port = t.port;
    const args = [path.join(labDir(), 'run.sh'), '--timeout', '480', '--mem', '2048', '--hostfwd', 'none', '--guestfwd', `${GUEST_ADDR}:${GUEST_PORT}:${port}`];
    for (const [k, v] of Object.entries({ SUBNQN, HOSTNQN, HOSTID, SECRET })) args.push('--env', `${k}=${v}`);
    args.push(path.join(here, 'guest-tls', 'kernel-host-concat.sh'));
    const run = runLabScript(args, undefined, { LAB_OUT });
    lab = run.child;
    out = (await run.done).out;
    steps = parseSteps(out);
    const dump = process.env['TLS_INTEROP_DUMP'];
    if (dump !== undefined) writeFileSync(path.join(dump, 'tls-concat-kernel-host.log'), `${out}\n---- target log ----\n${logs.join('\n')}`);
  }, 600_000);

  afterAll(async () => {
    killLabGroup(lab);
    if (child !== undefined && child.exitCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  const why = (): string => `lab output tail:\n${out.slice(-6000)}\ntarget log tail:\n${logs.slice(-40).join('\n')}`;
  const installs = (): number => logs.filter((l) => l.includes('generated TLS PSK installed')).length;

  it('the kernel takes concat and nvme-cli has --concat; tlshd runs', () => {
    expect(steps.get('features')?.status, why()).toBe('PASS');
    expect(steps.get('tlshd')?.status, why()).toBe('PASS');
  });

  it('nvme connect --concat: DH-HMAC-CHAP NEWTLSPSK in cleartext, then every queue inside TLS on the generated PSK', () => {
    expect(steps.get('connect')?.status, why()).toBe('PASS');
    expect(installs(), why()).toBeGreaterThanOrEqual(1);
  });

  it('fio verify over the concatenated TLS channel', () => {
    expect(steps.get('fio')?.status, why()).toBe('PASS');
  });

  it('re-authentication inside TLS (dhchap_secret written): REPLACETLSPSK, a new PSK installed, I/O goes on', () => {
    expect(steps.get('reauth')?.status, why()).toBe('PASS');
    expect(logs.some((l) => l.includes('generated TLS PSK installed') && l.includes('"scC":3')), why()).toBe(true);
  });

  it('nvme reset: a new DH-HMAC-CHAP transaction, a new PSK, new handshakes; verify passes', () => {
    expect(steps.get('reset')?.status, why()).toBe('PASS');
    expect(installs(), why()).toBeGreaterThanOrEqual(3);
    expect(steps.get('disconnect')?.status, why()).toBe('PASS');
  });

  it('lab exists', () => {
    expect(existsSync(path.join(LAB_OUT, 'initramfs.cpio'))).toBe(true);
  });
});

describe('secure channel concatenation: our initiator (concat) → Linux 7.x nvmet (tlshd server side)', () => {
  const OUR_HOST = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000302';
  const OUR_SECRET = generateDhchapKey({ hmac: 1, hostnqn: OUR_HOST }).format();
  let lab: WaitingLab | undefined;
  const out = (): string => lab?.out() ?? '';
  let dataPort = 0;
  let ctlPort = 0;

  beforeAll(async () => {
    ensureLab();
    dataPort = await freePort();
    ctlPort = await freePort();
    const args = [path.join(labDir(), 'run.sh'), '--timeout', '400', '--mem', '2048', '--hostfwd', `${dataPort}:4420`, '--hostfwd', `${ctlPort}:5999`, '--guestfwd', 'none'];
    for (const [k, v] of Object.entries({ SUBNQN, HOSTNQN: OUR_HOST, SECRET: OUR_SECRET, WAIT_S: '300' })) args.push('--env', `${k}=${v}`);
    args.push(path.join(here, 'guest-tls', 'nvmet-concat.sh'));
    lab = await startWaitingLab(args, { ctlPort, env: { LAB_OUT } });
  }, 600_000);

  afterAll(async () => {
    await lab?.release();
    const dump = process.env['TLS_INTEROP_DUMP'];
    if (dump !== undefined) writeFileSync(path.join(dump, 'tls-concat-nvmet.log'), out());
  }, 120_000);

  it('connects with concat (NEWTLSPSK in cleartext, then TLS on the generated PSK), verifies 4 KiB and 128 KiB, disconnects', async () => {
    const c = await connect({ traddr: '127.0.0.1', trsvcid: dataPort, nqn: SUBNQN, hostnqn: OUR_HOST, nr_io_queues: 2, dhchap_secret: OUR_SECRET, concat: true, io_timeout: 60, admin_timeout: 60 }).catch((e: unknown) => {
      throw new Error(`${String(e)}\nlab output tail:\n${out().slice(-4000)}`);
    });
    try {
      expect(c.authInfo).toMatchObject({ hash: 'hmac(sha256)' });
      const ns = c.namespace(1);
      for (const [lba, len] of [[0, 4096], [64, 131072]] as const) {
        const data = Buffer.alloc(len);
        for (let i = 0; i < len; i++) data[i] = (i * 17 + Number(lba)) & 0xff;
        await ns.write(lba, data);
        expect((await ns.read(lba, len / ns.blockSize)).equals(data)).toBe(true);
      }
    } finally {
      await c.disconnect();
    }
  }, 300_000);
});
