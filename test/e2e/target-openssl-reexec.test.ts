// `nvme-tcp target` with a TLS port and no OpenSSL configuration restarts itself under openssl-no-tickets.cnf
// (cli/openssl-reexec.ts), so no TLS session sends a NewSessionTicket (which the Linux host refuses, docs/tls.md).
// Real processes: the CLI as a user starts it, a TLS 1.3 PSK client that watches for tickets ('session' events), and
// SIGTERM passed on to the restarted child (exit 0, no child left). NVME_TCP_OPENSSL_REEXEC=0 is the control: the
// process stays as started, warns, and its sessions do send tickets.
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import tls from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { startCliTarget, type CliTarget } from '../../harness/lab.js';
import { deriveTlsPsk, formatTlsKey, parseTlsKey } from '../../protocol/tls/index.js';

const NQN = 'nqn.2024-01.io.test:reexec';
const HOST = 'nqn.2014-08.org.nvmexpress:uuid:5e5e5e5e-0000-4000-8000-000000000005';
const KEY = formatTlsKey(1, Buffer.alloc(32, 0x33));

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

/** The CLI as a user starts it, without OPENSSL_CONF (plus ENV), one TLS-allowed port with the host's key. */
function startTarget(env: NodeJS.ProcessEnv): Promise<CliTarget> {
  const { OPENSSL_CONF: _drop, ...clean } = process.env;
  const args = ['--listen', '127.0.0.1:0', '--nqn', NQN, '--ram', '4M', '--tls', 'allowed', '--tls-key', `${HOST}=${KEY}`];
  return startCliTarget(args, { env: { ...clean, ...env }, onSpawn: (c) => children.push(c) });
}

/** One TLS 1.3 PSK session as our host would open it; counts NewSessionTickets ('session' events) for 500 ms. */
async function ticketsSeen(port: number): Promise<number> {
  const cred = deriveTlsPsk(parseTlsKey(KEY), HOST, NQN, 0);
  return new Promise<number>((resolve, reject) => {
    let tickets = 0;
    const s = tls.connect({
      host: '127.0.0.1',
      port,
      minVersion: 'TLSv1.3',
      ciphers: 'TLS_AES_128_GCM_SHA256',
      checkServerIdentity: () => undefined,
      pskCallback: () => ({ psk: cred.psk, identity: cred.identity }),
    });
    s.on('session', () => tickets++);
    s.on('error', reject);
    s.once('secureConnect', () =>
      setTimeout(() => {
        s.destroy();
        resolve(tickets);
      }, 500),
    );
  });
}

/** PIDs of a process's children (Linux /proc). */
function childPids(pid: number): number[] {
  const out: number[] = [];
  const dir = `/proc/${pid}/task`;
  if (!existsSync(dir)) return out;
  for (const t of readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/)) if (t !== '') out.push(Number(t));
  return out;
}

describe('target CLI: NewSessionTicket setting is automatic', { timeout: 60_000 }, () => {
  it('restarts itself under openssl-no-tickets.cnf: no warning, no ticket; SIGTERM reaches the child, exit 0', async () => {
    const t = await startTarget({});
    expect(t.log.some((l) => l.includes('warning: TLS sessions send a NewSessionTicket'))).toBe(false);
    expect(await ticketsSeen(t.port)).toBe(0);
    const kids = childPids(t.child.pid as number);
    expect(kids.length).toBe(1);
    t.child.kill('SIGTERM');
    expect(await t.exited).toBe(0);
    for (const k of kids) expect(existsSync(`/proc/${k}`)).toBe(false);
  });

  it(`control: with NVME_TCP_OPENSSL_REEXEC=0 it stays as started, warns, and sends tickets`, async () => {
    const t = await startTarget({ NVME_TCP_OPENSSL_REEXEC: '0' });
    expect(t.log.some((l) => l.includes('warning: TLS sessions send a NewSessionTicket'))).toBe(true);
    expect(await ticketsSeen(t.port)).toBeGreaterThan(0);
    expect(childPids(t.child.pid as number)).toEqual([]);
    t.child.kill('SIGTERM');
    expect(await t.exited).toBe(0);
  });
});
