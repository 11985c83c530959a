// The initiator's verbs as commands (a child process each, as a user runs them) against a real target on 127.0.0.1
// port 0: discover, connect-all --hold, list, disconnect-all, each in -o json and -o normal, the two compared. The
// children get their own TMPDIR (held-connection state), XDG_STATE_HOME and /etc/nvme stand-in, so nothing here sees
// or touches another run's held connections.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { TargetService } from '../../target/index.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';
import { until } from '../../harness/until.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const NQNS = ['nqn.2024-01.io.example:held-a', 'nqn.2024-01.io.example:held-b'];
const cleanups = cleanupAfterEach();

interface Child {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exit: Promise<number | null>;
}

function start(args: string[], env: NodeJS.ProcessEnv): Child {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'cli', 'main.ts'), ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  cleanups.push(() => (child.exitCode === null && child.signalCode === null ? child.kill('SIGKILL') : undefined));
  return { child, out: () => out, err: () => err, exit };
}

/** Runs a verb to its end: stdout, with exit 0 and nothing on stderr checked. */
async function run(args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  const c = start(args, env);
  expect(await c.exit, `${args.join(' ')}: ${c.err()}`).toBe(0);
  expect(c.err()).toBe('');
  return c.out();
}

describe('nvme-tcp discover, connect-all --hold, list, disconnect-all against a local target', () => {
  it('list and disconnect-all see what connect-all --hold connected; json and normal agree', async () => {
    const t = new TargetService();
    cleanups.push(() => t.stop());
    const { port } = await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 });
    for (const nqn of NQNS) await t.addSubsystem({ nqn, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] });
    const dir = await mkdtemp(path.join(tmpdir(), 'nvme-tcp-held-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const env = { ...process.env, TMPDIR: dir, XDG_STATE_HOME: path.join(dir, 'state'), NVME_TCP_ETC_NVME: path.join(dir, 'etc-nvme') };
    const at = ['-a', '127.0.0.1', '-s', String(port)];

    // discover: the same records both ways.
    const disc = JSON.parse(await run(['discover', ...at, '-o', 'json'], env)) as { records: { subnqn: string; subtype: string; trsvcid: number }[] };
    const discNormal = await run(['discover', ...at], env);
    expect(discNormal).toMatch(new RegExp(`^Discovery Log Number of Records ${disc.records.length}\\n`));
    for (const r of disc.records) expect(discNormal).toContain(`subtype: ${r.subtype}\ntreq:`);
    expect(disc.records.filter((r) => r.subtype === 'nvme subsystem').map((r) => r.subnqn).sort()).toEqual(NQNS);
    expect([...discNormal.matchAll(/^subnqn: {2}(\S+)$/gm)].map((m) => m[1])).toEqual(disc.records.map((r) => r.subnqn));

    // connect-all --hold keeps both controllers in one process.
    const holder = start(['connect-all', ...at, '-i', '1', '--hold'], env);
    await until(() => /holding 2 connection\(s\)/.test(holder.out()) || holder.child.exitCode !== null, 30_000, 'connect-all --hold');
    expect(holder.out(), holder.err()).toMatch(/holding 2 connection\(s\)/);
    const pid = holder.child.pid ?? 0;

    // list: json and normal name the same controllers.
    const listed = JSON.parse(await run(['list', '-o', 'json'], env)) as { pid: number; subnqn: string; cntlid: number; queues: number }[];
    expect(listed.map((x) => [x.pid, x.subnqn]).sort()).toEqual(NQNS.map((n) => [pid, n]));
    const listNormal = (await run(['list'], env)).trim().split('\n');
    expect(listNormal[0]).toMatch(/^pid\s+subnqn\s+address\s+cntlid\s+hostnqn\s+queues$/);
    const rows = listNormal.slice(1).map((l) => l.split(/\s{2,}/));
    expect(rows.map((r) => [Number(r[0]), r[1], r[2], Number(r[3]), Number(r[5])]).sort()).toEqual(
      listed.map((x) => [x.pid, x.subnqn, `tcp traddr=127.0.0.1,trsvcid=${port}`, x.cntlid, x.queues]).sort(),
    );

    // disconnect-all ends both; the holder exits 0 and list is empty (json and normal).
    expect(JSON.parse(await run(['disconnect-all', '-o', 'json'], env))).toEqual({ disconnected: 2, pids: [pid, pid] });
    expect(await holder.exit).toBe(0);
    expect(holder.err()).toBe('');
    expect(JSON.parse(await run(['list', '-o', 'json'], env))).toEqual([]);
    expect(await run(['list'], env)).toBe('no held connections (start one with "nvme-tcp connect ... --hold")\n');
    expect(await run(['disconnect-all'], env)).toBe('disconnected 0 controller(s)\n');
  }, 120_000);

  it('connect-all: a referral to a dead port is one line naming it, exit 1; disconnect of nothing says why', async () => {
    const t = new TargetService();
    cleanups.push(() => t.stop());
    const { port } = await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 });
    await t.addSubsystem({ nqn: NQNS[0] as string, allowAnyHost: true, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] });
    // A port that was bound a moment ago and is closed now: nothing listens there.
    const srv = createServer();
    const dead = await new Promise<number>((r) => srv.listen(0, '127.0.0.1', () => r((srv.address() as { port: number }).port)));
    await new Promise((r) => srv.close(r));
    t.addReferral(1, { addr: '127.0.0.1', port: dead });
    const dir = await mkdtemp(path.join(tmpdir(), 'nvme-tcp-held-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const env = { ...process.env, TMPDIR: dir, XDG_STATE_HOME: path.join(dir, 'state'), NVME_TCP_ETC_NVME: path.join(dir, 'etc-nvme') };

    const c = start(['connect-all', '-a', '127.0.0.1', '-s', String(port), '-i', '1'], env);
    expect(await c.exit).toBe(1);
    expect(c.out()).toMatch(new RegExp(`^controller \\d+ subsystem ${NQNS[0] ?? ''} `));
    expect(c.err()).toMatch(new RegExp(`^nvme-tcp connect-all: referral to discovery controller at 127\\.0\\.0\\.1:${dead}: .*ECONNREFUSED.*\\n$`));

    const d = start(['disconnect', '-n', 'nqn.2024-01.io.example:none'], env);
    expect(await d.exit).toBe(1);
    expect(d.out()).toBe('disconnected 0 controller(s)\n');
    expect(d.err()).toBe('nvme-tcp disconnect: no held connection matches -n nqn.2024-01.io.example:none (0 held; "nvme-tcp list" shows them)\n');
  }, 60_000);
});
