// Host identity as nvme-cli finds it: flags, else NVME_TCP_ETC_NVME's (/etc/nvme) files, else one kept per user;
// proven with real files in a temporary directory, and with two bin runs that must be the same host to a target.
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TargetService } from '../target/index.js';
import { main } from './main.js';
import { identityFile, resolveHostIdentity } from './host-identity.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
let dir = '';
let env: NodeJS.ProcessEnv = {};

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'nvme-tcp-hostid-'));
  env = { NVME_TCP_ETC_NVME: path.join(dir, 'etc'), XDG_STATE_HOME: path.join(dir, 'state') };
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('resolveHostIdentity', () => {
  it('no flags, no files: one identity made once and kept in the state file', async () => {
    const a = resolveHostIdentity({}, env);
    const b = resolveHostIdentity({}, env);
    expect(b).toEqual(a);
    expect(a.hostnqn).toBe(`nqn.2014-08.org.nvmexpress:uuid:${a.hostid}`);
    expect(JSON.parse(await readFile(identityFile(env), 'utf8'))).toEqual({ hostnqn: a.hostnqn, hostid: a.hostid });
  });

  it('reads hostnqn and hostid from the /etc/nvme-style directory; flags win', async () => {
    const { mkdir } = await import('node:fs/promises');
    await mkdir(path.join(dir, 'etc'));
    await writeFile(path.join(dir, 'etc', 'hostnqn'), 'nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555\n');
    await writeFile(path.join(dir, 'etc', 'hostid'), '66666666-7777-8888-9999-000000000000\n');
    expect(resolveHostIdentity({}, env)).toMatchObject({ hostnqn: 'nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555', hostid: '66666666-7777-8888-9999-000000000000' });
    expect(resolveHostIdentity({ hostnqn: 'nqn.x:host-a' }, env)).toMatchObject({ hostnqn: 'nqn.x:host-a', hostid: '66666666-7777-8888-9999-000000000000' });
    await writeFile(path.join(dir, 'etc', 'hostid'), 'not-a-uuid\n');
    expect(() => resolveHostIdentity({}, env)).toThrow(/hostid: "not-a-uuid" is not a UUID/);
  });

  it('-q without -I: the same host ID on every run for that NQN, another for another NQN', () => {
    const a = resolveHostIdentity({ hostnqn: 'nqn.x:host-a' }, env);
    expect(resolveHostIdentity({ hostnqn: 'nqn.x:host-a' }, env).hostid).toBe(a.hostid);
    expect(resolveHostIdentity({ hostnqn: 'nqn.x:host-b' }, env).hostid).not.toBe(a.hostid);
    expect(() => resolveHostIdentity({ hostid: 'nope' }, env)).toThrow(/--hostid nope: not a UUID/);
  });
});

function bin(args: string[], e: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'cli', 'main.ts'), ...args], { cwd: repoRoot, env: { ...process.env, ...e }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((r) => child.once('exit', (code) => r({ code, out, err })));
}

describe('two runs of the bin are one host', () => {
  it('resv-register then resv-acquire from separate runs succeed; both print the same host NQN (-o json)', async () => {
    const t = new TargetService();
    try {
      const port = (await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 })).port;
      await t.addSubsystem({ nqn: 'testnqn', allowAnyHost: true, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] });
      const conn = ['-a', '127.0.0.1', '-s', String(port), '-n', 'testnqn'];
      const [c1, c2] = [await bin(['connect', ...conn, '-o', 'json'], env), await bin(['connect', ...conn, '-o', 'json'], env)];
      expect(c1.err).toBe('');
      const h1 = (JSON.parse(c1.out) as { hostnqn: string }).hostnqn;
      expect(h1).toMatch(/^nqn\.2014-08\.org\.nvmexpress:uuid:/);
      expect((JSON.parse(c2.out) as { hostnqn: string }).hostnqn).toBe(h1);
      const resvConn = ['--traddr', '127.0.0.1', '-s', String(port), '--nqn', 'testnqn'];
      expect(await bin(['resv-register', ...resvConn, '--nrkey', '0xa1'], env)).toMatchObject({ code: 0, err: '' });
      expect(await bin(['resv-acquire', ...resvConn, '--crkey', '0xa1', '--rtype', '1'], env)).toMatchObject({ code: 0, err: '' });
      expect(t.reservationStatus('testnqn', 1).registrants).toHaveLength(1);
    } finally {
      await t.stop();
    }
  }, 60_000);
});

describe('docs/target.md reservation example', () => {
  it('runs as written (-q nqn.x:host-a, no -I): register, acquire, report', async () => {
    const saved = { ...process.env };
    Object.assign(process.env, env);
    const t = new TargetService();
    try {
      const port = (await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 })).port;
      await t.addSubsystem({ nqn: 'nqn.x:sub', allowAnyHost: true, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] });
      const doc = await readFile(path.join(repoRoot, 'docs', 'target.md'), 'utf8');
      const lines = doc.split('\n').filter((l) => l.startsWith('nvme-tcp resv-'));
      expect(lines).toHaveLength(3);
      let out = '';
      let err = '';
      const io = { stdout: (s: string) => void (out += s), stderr: (s: string) => void (err += s) };
      for (const l of lines) expect(await main(l.replace('-s 4420', `-s ${port}`).split(/\s+/).slice(1), io), l).toBe(0);
      expect(err).toBe('');
      expect(out).toMatch(/rcsts   : 1\n  rkey    : a1/);
    } finally {
      await t.stop();
      for (const k of Object.keys(env)) {
        if (saved[k] === undefined) delete process.env[k];
        else process.env[k] = saved[k];
      }
    }
  });
});
