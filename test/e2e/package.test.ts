// The published package as another project sees it: `npm pack` (which builds dist/ through `prepare`), the tarball
// installed into a fresh project, then an ESM consumer that imports `nvme-tcp-ts`, `nvme-tcp-ts/target` and
// `nvme-tcp-ts/harness`, starts a target on 127.0.0.1:0, connects, writes and reads back; a TypeScript consumer
// type-checked against the shipped declaration files; and the installed `nvme-tcp` bin, which must run without tsx
// (a devDependency, absent from a consumer's tree).
import { execFile, spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const NPM_ENV = { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false', npm_config_loglevel: 'error' };

const CONSUMER_MJS = `
import { connect, discover } from 'nvme-tcp-ts';
import { TargetService } from 'nvme-tcp-ts/target';
import { controllerBlockTarget, parseJobFile, resolveJobs, runJobs } from 'nvme-tcp-ts/harness';

const nqn = 'nqn.2024-01.io.example:consumer';
const t = new TargetService();
try {
  const { port } = await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 });
  await t.addSubsystem({ nqn, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '4M' } }] });
  const entries = await discover({ traddr: '127.0.0.1', trsvcid: port });
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn, nr_io_queues: 1 });
  const ns = c.namespace(1);
  const data = Buffer.alloc(8192);
  for (let i = 0; i < data.length; i++) data[i] = (i * 7 + 3) & 0xff;
  await ns.write(16, data);
  const back = await ns.read(16, data.length / 512);
  // A verify job through the harness engine: crc32c-stamped random writes, each block read back and checked.
  const bt = controllerBlockTarget(c);
  const jobs = resolveJobs(parseJobFile('[v]\\nrw=randwrite\\nbs=4k\\nsize=256k\\niodepth=4\\nverify=crc32c\\n'), { blockSize: bt.blockSize, capacityBlocks: bt.capacityBlocks });
  const run = await runJobs(bt, jobs);
  await c.disconnect();
  console.log(JSON.stringify({ entries: entries.map((e) => e.subnqn), same: back.equals(data), writes: run.totals.writeIos, errors: run.totals.errors, verify: run.verify }));
} finally {
  await t.stop();
}
`;

const CONSUMER_TS = `
import { connect, type ConnectOptions, type Controller } from 'nvme-tcp-ts';
import { TargetService, type SubsystemConfig } from 'nvme-tcp-ts/target';
import { parseJobFile, type ParsedJobFile } from 'nvme-tcp-ts/harness';

const sub: SubsystemConfig = { nqn: 'nqn.2024-01.io.example:typed', namespaces: [{ nsid: 1, backend: { type: 'ram', size: '4M' } }] };
const opts: ConnectOptions = { traddr: '127.0.0.1', trsvcid: 4420, nqn: sub.nqn };
export async function run(t: TargetService): Promise<number> {
  await t.addSubsystem(sub);
  const c: Controller = await connect(opts);
  const job: ParsedJobFile = parseJobFile('[j]\\nrw=read\\n');
  const b: Buffer = await c.namespace(1).read(0, 1);
  return b.length + job.jobs.length;
}
// @ts-expect-error: a wrong option type must not type-check (proves the declarations are really read).
export const bad: ConnectOptions = { traddr: 1, nqn: 'x' };
`;

const run = promisify(execFile);
let dir = '';
let proj = '';

// Asynchronous: a synchronous minute-long child would block vitest's worker and trip its RPC timeout.
beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'nvme-tcp-pkg-'));
  proj = path.join(dir, 'consumer');
  // `npm pack` runs `prepare` (the build), so the tarball holds what a clean clone's `npm ci` would build. It packs a
  // copy of the tree (node_modules linked), so the build never rewrites this checkout's dist/ under other tests.
  const src = path.join(dir, 'src');
  for (const p of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'README.md', 'bin', 'protocol', 'connection', 'target', 'initiator', 'harness', 'cli']) {
    cpSync(path.join(ROOT, p), path.join(src, p), { recursive: true, filter: (f) => !f.endsWith('.test.ts') });
  }
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(src, 'node_modules'));
  const packed = (await run('npm', ['pack', '--pack-destination', dir], { cwd: src, env: NPM_ENV, maxBuffer: 16 << 20 })).stdout;
  const tgz = readdirSync(dir).find((f) => f.endsWith('.tgz'));
  if (tgz === undefined) throw new Error(`npm pack left no tarball: ${packed}`);
  mkdirSync(proj);
  writeFileSync(path.join(proj, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  // Dependencies come from the npm registry (or npm's cache); the tarball itself needs none.
  await run('npm', ['install', '--prefer-offline', '--no-package-lock', path.join(dir, tgz)], { cwd: proj, env: NPM_ENV, maxBuffer: 16 << 20 });
}, 240_000);

afterAll(() => {
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

describe('the packed package, installed into a fresh project', () => {
  it('ships compiled JavaScript and declarations, not the sources or tests', () => {
    const pkg = path.join(proj, 'node_modules', 'nvme-tcp-ts');
    for (const f of ['dist/initiator/index.js', 'dist/initiator/index.d.ts', 'dist/target/index.d.ts', 'dist/harness/index.d.ts', 'dist/cli/main.js', 'bin/nvme-tcp.mjs']) {
      expect(existsSync(path.join(pkg, f)), f).toBe(true);
    }
    // Test-only modules stay in the repository: fixtures, testing/ builders and fakes, the fuzzer (tsconfig.build.json).
    const testOnly = ['dist/test', 'dist/protocol/testing', 'dist/target/core/testing', 'dist/harness/fuzz', 'dist/harness/kernel-host/fake-tools.js', 'dist/harness/peers/fake-controller.js', 'dist/harness/peers/raw-peer.js'];
    for (const f of ['cli/main.ts', 'test', 'dist/initiator/connect.test.js', 'node_modules/tsx', ...testOnly]) expect(existsSync(path.join(pkg, f)), f).toBe(false);
    expect(existsSync(path.join(proj, 'node_modules', 'tsx')), 'tsx is a devDependency').toBe(false);
  });

  it('imports nvme-tcp-ts, /target and /harness from ESM: target on 127.0.0.1:0, connect, write, read back', () => {
    writeFileSync(path.join(proj, 'consumer.mjs'), CONSUMER_MJS);
    const r = spawnSync(process.execPath, ['consumer.mjs'], { cwd: proj, encoding: 'utf8', timeout: 30_000 });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as { entries: string[]; same: boolean; writes: number; errors: number; verify: { enabled: boolean; checkedBlocks: number; mismatchCount: number } };
    expect(out.entries).toEqual(['nqn.2014-08.org.nvmexpress.discovery', 'nqn.2024-01.io.example:consumer']);
    expect(out.same).toBe(true);
    expect(out.writes).toBe(64);
    expect(out.errors).toBe(0);
    expect(out.verify.enabled).toBe(true);
    expect(out.verify.mismatchCount).toBe(0);
    expect(out.verify.checkedBlocks).toBeGreaterThan(0);
  });

  it('type-checks a TypeScript consumer against the shipped declarations (tsc --noEmit)', () => {
    writeFileSync(path.join(proj, 'consumer.ts'), CONSUMER_TS);
    const tsconfig = {
      compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, skipLibCheck: true, types: ['node'], typeRoots: [path.join(ROOT, 'node_modules', '@types')] },
      files: ['consumer.ts'],
    };
    writeFileSync(path.join(proj, 'tsconfig.json'), JSON.stringify(tsconfig));
    const r = spawnSync(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], { cwd: proj, encoding: 'utf8', timeout: 60_000 });
    expect(r.stdout + r.stderr).toBe('');
    expect(r.status).toBe(0);
  }, 60_000);

  it('runs the installed nvme-tcp bin from dist/ (no tsx in the tree)', () => {
    const r = spawnSync(path.join(proj, 'node_modules', '.bin', 'nvme-tcp'), ['--help'], { cwd: proj, encoding: 'utf8', timeout: 30_000 });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/nvme-tcp/);
  });

  it('the installed bin\'s target: stdout holds only the start-up lines, the JSON log goes to stderr', async () => {
    const child = spawn(path.join(proj, 'node_modules', '.bin', 'nvme-tcp'), ['target', '--listen', '127.0.0.1:0', '--ram', '1M'], { cwd: proj, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      const deadline = Date.now() + 20_000;
      while (!/^nvme connect /m.test(out) && child.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      const lines = out.trimEnd().split('\n');
      expect(lines[0], out + err).toMatch(/^nvme-tcp target: listening on 127\.0\.0\.1:\d+, port id 1$/);
      expect(lines.filter((l) => l.startsWith('nvme ')).length).toBe(2);
      for (const l of lines) expect(l).toMatch(/^(nvme-tcp target: |nvme (discover|connect) )/);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    const records = err.trimEnd().split('\n').map((l) => JSON.parse(l) as { msg?: string });
    expect(records.map((r) => r.msg)).toEqual(expect.arrayContaining(['listening', 'target started', 'stopping', 'target stopped']));
  }, 30_000);

  it('the installed bin\'s target on a terminal: the log is pretty-printed (pino-pretty is a dependency)', () => {
    // script(1) gives the target a pseudo-terminal for stdout and stderr; timeout(1) stops it with SIGTERM.
    const bin = path.join(proj, 'node_modules', '.bin', 'nvme-tcp');
    const r = spawnSync('script', ['-qec', `timeout -s TERM 4 ${bin} target --listen 127.0.0.1:0 --ram 1M`, '/dev/null'], { cwd: proj, encoding: 'utf8', timeout: 30_000 });
    expect(r.stdout).toMatch(/^nvme discover -t tcp -a 127\.0\.0\.1 -s \d+\r?$/m);
    expect(r.stdout).toMatch(/INFO.*target started/);
    expect(r.stdout).not.toContain('"level":');
  }, 30_000);
});
