// The bin as users run it: a child process per case (node --import tsx cli/main.ts ...).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { connect, createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { main, USAGE } from './main.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const children: ChildProcess[] = [];

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function run(args: string[], nodeArgs: string[] = []): Run {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', path.join(repoRoot, 'cli', 'main.ts'), ...args], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once('exit', (code, signal) => r({ code, signal })));
  return { child, stdout: () => out, stderr: () => err, exit };
}

async function waitFor(r: Run, re: RegExp, ms = 20_000): Promise<RegExpExecArray> {
  const deadline = Date.now() + ms;
  for (;;) {
    const m = re.exec(r.stdout());
    if (m) return m;
    if (r.child.exitCode !== null || Date.now() > deadline) throw new Error(`no ${String(re)} in stdout:\n${r.stdout()}\nstderr:\n${r.stderr()}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

describe('nvme-tcp target (child process)', () => {
  it('prints the connect lines for the port it listens on, accepts TCP there, exits 0 on SIGTERM', async () => {
    const r = run(['target', '--listen', '127.0.0.1:0', '--ram', '1M', '--nqn', 'nqn.2024-01.io.example:cli-test', '--log-level', 'warn']);
    const m = await waitFor(r, /^nvme connect -t tcp -a 127\.0\.0\.1 -s (\d+) -n nqn\.2024-01\.io\.example:cli-test$/m);
    const port = Number(m[1]);
    expect(r.stdout()).toContain(`nvme discover -t tcp -a 127.0.0.1 -s ${port}\n`);
    await new Promise<void>((resolve, reject) => {
      const s = connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve();
      });
      s.on('error', reject);
    });
    r.child.kill('SIGTERM');
    expect(await r.exit).toEqual({ code: 0, signal: null });
    expect(r.stderr()).toBe('');
  });

  it('a port in use: one plain line on stderr; the JSON log beside it names the failure without a stack', async () => {
    const busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    try {
      const port = (busy.address() as AddressInfo).port;
      const r = run(['target', '--listen', `127.0.0.1:${port}`, '--ram', '1M']);
      expect(await r.exit).toEqual({ code: 1, signal: null });
      expect(r.stdout()).toBe('');
      const lines = r.stderr().trimEnd().split('\n');
      expect(lines.filter((l) => !l.startsWith('{'))).toEqual([`nvme-tcp target: --listen: 127.0.0.1:${port} is already in use; stop the other listener or pick another port`]);
      const records = lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(records.map((x) => x['msg'])).toEqual(['start failed', 'stopping', 'target stopped']);
      expect(r.stderr()).not.toMatch(/"stack"|\bat \S+ \(|listener error/);
    } finally {
      await new Promise((r) => busy.close(r));
    }
  });

  it('a bad flag: one line on stderr naming it, exit 2', async () => {
    const r = run(['target', '--block-size', '1000']);
    expect(await r.exit).toEqual({ code: 2, signal: null });
    expect(r.stderr()).toBe('nvme-tcp target: --block-size 1000: not supported; use 512 or 4096\n');
    expect(r.stdout()).toBe('');
  });
});

describe('dispatcher', () => {
  function io() {
    const out: string[] = [];
    const err: string[] = [];
    return { out, err, io: { stdout: (s: string) => void out.push(s), stderr: (s: string) => void err.push(s) } };
  }

  it('no arguments or --help print the usage with every subcommand', async () => {
    for (const argv of [[], ['--help'], ['-h']]) {
      const c = io();
      expect(await main(argv, c.io)).toBe(0);
      expect(c.out.join('')).toBe(USAGE);
    }
    for (const cmd of ['target', 'discover', 'connect', 'connect-all', 'disconnect', 'disconnect-all', 'io', 'queues', 'check-host', 'resv-report', 'bench']) expect(USAGE).toMatch(new RegExp(`^  ${cmd} `, 'm'));
  });

  it('--version prints the package version; "help VERB" is "VERB --help"', async () => {
    const { version } = JSON.parse(await readFile(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string };
    for (const argv of [['--version'], ['-V']]) {
      const c = io();
      expect(await main(argv, c.io)).toBe(0);
      expect(c.out.join('')).toBe(`${version}\n`);
    }
    const c = io();
    expect(await main(['help', 'queues'], c.io)).toBe(0);
    expect(c.out.join('')).toMatch(/^Usage: nvme-tcp queues \[options\]/);
    expect(USAGE).not.toMatch(/^  (frobnicate) /m);
  });

  it('an unknown subcommand: one line with a hint, exit 2', async () => {
    const c = io();
    expect(await main(['targt'], c.io)).toBe(2);
    expect(c.err).toEqual(['nvme-tcp: unknown command "targt" (did you mean target?); run "nvme-tcp --help" for the list\n']);
  });

  // Start-up time (docs/testing.md): the target's modules take ~800 ms to load, so only `nvme-tcp target` loads them.
  // A resolve hook ahead of tsx's records every module URL the child resolves.
  it('--version, --help and an initiator verb load no target module (the value parsers live in protocol/values)', async () => {
    const hook = `import{registerHooks}from'node:module';registerHooks({resolve(s,c,n){const r=n(s,c);process.stderr.write('RESOLVED '+r.url+'\\n');return r;}});`;
    const loadedTarget = async (args: string[]): Promise<string[]> => {
      const r = run(args, ['--import', `data:text/javascript,${encodeURIComponent(hook)}`]);
      expect(await r.exit).toEqual({ code: 0, signal: null });
      const urls = [...r.stderr().matchAll(/^RESOLVED (\S+)$/gm)].map((m) => m[1] ?? '');
      expect(urls).toContain(pathToFileURL(path.join(repoRoot, 'cli', 'args.ts')).href);
      expect(urls).toContain(pathToFileURL(path.join(repoRoot, 'protocol', 'values', 'index.ts')).href);
      return urls.filter((u) => u.startsWith(pathToFileURL(path.join(repoRoot, 'target')).href + '/'));
    };
    expect(await loadedTarget(['--version'])).toEqual([]);
    expect(await loadedTarget(['--help'])).toEqual([]);
    expect(await loadedTarget(['discover', '--help'])).toEqual([]);
    // The check can fail: the target verb does load them.
    expect(await loadedTarget(['target', '--help'])).toContain(pathToFileURL(path.join(repoRoot, 'target', 'index.ts')).href);
  });

  it('the bin exits with the subcommand status', async () => {
    const r = run(['frobnicate']);
    expect(await r.exit).toEqual({ code: 2, signal: null });
    expect(r.stderr()).toBe('nvme-tcp: unknown command "frobnicate"; run "nvme-tcp --help" for the list\n');
  });
});
