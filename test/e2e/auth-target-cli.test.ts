// `nvme-tcp target --dhchap-key/--dhchap-ctrl-key` as a real child process at log level trace: hosts must
// authenticate with exactly those keys, and no secret given on the command line (or later through the API) ever
// shows up on stdout (start-up lines) or stderr (JSON logs, error lines) — including the error path for a bad key.
import { Buffer } from 'node:buffer';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { AuthenticationRequiredError, DhchapAuthError, connect, type Controller } from '../../initiator/index.js';
import { generateDhchapKey } from '../../protocol/auth/index.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const SUBNQN = 'nqn.2024-01.io.test:auth-cli';
const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-4908-8706-0504030201bb';
const OTHER = 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-4908-8706-0504030201cc';
const KEY = generateDhchapKey({ hmac: 2, hostnqn: HOSTNQN }).format();
const CKEY = generateDhchapKey({ hmac: 1, hostnqn: SUBNQN }).format();
const OTHER_KEY = generateDhchapKey({ hmac: 0 }).format();
const API_KEY = generateDhchapKey({ hmac: 3, hostnqn: OTHER }).format();
/** Key material of a secret: what must never be printed. */
const material = (k: string): string[] => {
  const b64 = k.slice(10, -1);
  return [b64, b64.slice(0, 16), Buffer.from(b64, 'base64').toString('hex').slice(0, 32)];
};

const cleanups = cleanupAfterEach();

interface Child {
  child: ChildProcess;
  out: string[];
  err: string[];
  exited: Promise<number | null>;
}

function run(args: string[]): Child {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'cli', 'main.ts'), 'target', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const out: string[] = [];
  const err: string[] = [];
  child.stdout?.on('data', (d: Buffer) => out.push(d.toString()));
  child.stderr?.on('data', (d: Buffer) => err.push(d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  return { child, out, err, exited };
}

async function started(c: Child): Promise<{ port: number; api: string }> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const text = c.out.join('');
    const port = /nvme-tcp target: listening on 127\.0\.0\.1:(\d+)/.exec(text)?.[1];
    const api = /management API on (http:\/\/\S+)/.exec(text)?.[1];
    if (port !== undefined && api !== undefined && /nvme connect /.test(text)) return { port: Number(port), api };
    if (c.child.exitCode !== null) throw new Error(`target exited ${c.child.exitCode}: ${c.err.join('')}`);
    if (Date.now() > deadline) throw new Error(`target did not start: ${text}${c.err.join('')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function host(port: number, hostnqn: string, extra: Record<string, unknown> = {}): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: SUBNQN, hostnqn, nr_io_queues: 1, duplicate_connect: true, ...extra });
  cleanups.push(() => c.disconnect());
  return c;
}

describe('nvme-tcp target with --dhchap-key / --dhchap-ctrl-key', () => {
  it('requires those keys from those hosts and never prints a secret on stdout, stderr or in the trace log', async () => {
    const t = run([
      '--listen', '127.0.0.1:0', '--nqn', SUBNQN, '--ram', '4M',
      '--allow-host', OTHER,
      '--dhchap-key', `${HOSTNQN}=${KEY}`, '--dhchap-ctrl-key', `${HOSTNQN}=${CKEY}`,
      '--dhchap-key', `${OTHER}=${OTHER_KEY}`,
      '--api', '127.0.0.1:0', '--log-level', 'trace',
    ]);
    const { port, api } = await started(t);
    const text = t.out.join('');
    expect(text).toContain(`nvme-tcp target: host ${HOSTNQN} must authenticate (DH-HMAC-CHAP, bidirectional)`);
    expect(text).toContain(`hosts ${OTHER} ${HOSTNQN}`); // --allow-host was used, so the keyed host joined the allow list

    // Bidirectional with the flag keys: every queue authenticates and I/O works.
    const c = await host(port, HOSTNQN, { dhchap_secret: KEY, dhchap_ctrl_secret: CKEY });
    expect(c.authInfo?.bidirectional).toBe(true);
    const data = Buffer.alloc(4096, 0x5a);
    await c.namespace(1).write(0, data);
    expect((await c.namespace(1).read(0, 8)).equals(data)).toBe(true);
    // Refusals: wrong host key, no key, and the controller key of another host.
    await expect(host(port, HOSTNQN, { dhchap_secret: OTHER_KEY })).rejects.toBeInstanceOf(DhchapAuthError);
    await expect(host(port, HOSTNQN)).rejects.toBeInstanceOf(AuthenticationRequiredError);
    await expect(host(port, OTHER, { dhchap_secret: OTHER_KEY, dhchap_ctrl_secret: CKEY })).rejects.toBeInstanceOf(DhchapAuthError);
    expect((await host(port, OTHER, { dhchap_secret: OTHER_KEY })).authenticatedQueues).toBeGreaterThan(0);

    // The API shows them redacted, and a key set through it is not logged either.
    const hosts = (await (await fetch(`${api}/hosts`)).json()) as Array<{ hostnqn: string; hostKey: string; ctrlKey?: string }>;
    expect(hosts).toEqual([
      { hostnqn: HOSTNQN, hostKey: '<redacted>', ctrlKey: '<redacted>' },
      { hostnqn: OTHER, hostKey: '<redacted>' },
    ]);
    const put = await fetch(`${api}/hosts/${encodeURIComponent(OTHER)}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ dhchapKey: API_KEY }) });
    expect(put.status).toBe(200);
    const cfg = await (await fetch(`${api}/config`)).text();

    t.child.kill('SIGTERM');
    expect(await t.exited).toBe(0);
    const all = t.out.join('') + t.err.join('') + cfg;
    // The trace log did record the authentication work, by host NQN only.
    expect(all).toMatch(/"hostnqn":"nqn\.2014-08\.org\.nvmexpress:uuid:0f0e0d0c-0b0a-4908-8706-0504030201bb"/);
    expect(all).toContain('host authentication keys set');
    for (const k of [KEY, CKEY, OTHER_KEY, API_KEY]) for (const m of material(k)) expect(all).not.toContain(m);
  }, 60_000);

  it('a malformed key on the command line exits 2 naming the flag and host, not the secret', async () => {
    const bad = KEY.replace(/[A-Za-z](?=[^:]*:$)/, (ch) => (ch === 'A' ? 'B' : 'A'));
    const t = run(['--listen', '127.0.0.1:0', '--dhchap-key', `${HOSTNQN}=${bad}`, '--log-level', 'trace']);
    expect(await t.exited).toBe(2);
    expect(t.err.join('')).toBe(
      `nvme-tcp target: --dhchap-key ${HOSTNQN}=<secret>: DH-HMAC-CHAP secret CRC-32 mismatch (corrupted or mistyped secret); use the "DHHC-1:<hh>:<base64>:" form that nvme gen-dhchap-key prints\n`,
    );
    expect(t.out.join('')).toBe('');
  }, 30_000);
});
