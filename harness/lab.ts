// Host-side helpers for the qemu lab (harness/lab/: build.sh, run.sh) shared by the kernel-interop scenario and the
// interop suites.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { CLI_NODE_ARGS, REPO_ROOT } from './nvme.js';

/** The lab's scripts: build.sh, build-newest-kernel.sh, run.sh and the guest's init and helpers (docs/testing.md). */
export function labDir(): string {
  return path.join(REPO_ROOT, 'harness', 'lab');
}

/** A TCP port free on 127.0.0.1 right now (for qemu hostfwd, which needs a number up front). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a !== null ? a.port : 0));
    });
  });
}

/** Throws with the fix when the 6.1 guest (LAB_OUT) or qemu is missing. */
export function checkLabReady(lab: string): void {
  const out = process.env.LAB_OUT ?? '/var/tmp/nvme-lab';
  for (const f of ['vmlinuz', 'initramfs.cpio.gz']) {
    if (!existsSync(path.join(out, f))) throw new Error(`kernel lab not built: ${path.join(out, f)} is missing; run "bash ${path.join(lab, 'build.sh')}" first (it installs qemu and builds the guest)`);
  }
  const pathDirs = (process.env.PATH ?? '').split(path.delimiter);
  if (!pathDirs.some((d) => existsSync(path.join(d, 'qemu-system-x86_64')))) {
    throw new Error(`qemu-system-x86_64 is not installed; run "bash ${path.join(lab, 'build.sh')}" (it apt-installs qemu-system-x86)`);
  }
}

export interface StepResult {
  status: 'PASS' | 'FAIL' | 'SKIP';
  output: string;
}

/** Splits the guest output at the @@STEP markers. */
export function parseSteps(out: string): Map<string, StepResult> {
  const steps = new Map<string, StepResult>();
  let current: { name: string; lines: string[] } | undefined;
  for (const line of out.split('\n')) {
    const m = /^@@STEP (\S+) (BEGIN|PASS|FAIL|SKIP)\b/.exec(line);
    if (!m) {
      current?.lines.push(line);
      continue;
    }
    const [, name = '', what] = m;
    if (what === 'BEGIN') current = { name, lines: [] };
    else {
      steps.set(name, { status: what as StepResult['status'], output: [...(current?.name === name ? current.lines : []), line].join('\n') });
      current = undefined;
    }
  }
  return steps;
}

const LAB_BOOT = path.join(REPO_ROOT, 'harness', 'lab-boot.sh');

/** Signal the process group of a lab run (run.sh, qemu, its socats) unless it already ended. */
export function killLabGroup(child: ChildProcess | undefined, signal: NodeJS.Signals = 'SIGTERM'): void {
  if (child?.pid === undefined || child.exitCode !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

/**
 * Runs `bash ARGS` (run.sh and its options) in its own process group, so stopLab can end run.sh, qemu and the
 * per-connection socats together; collects stdout and stderr. `onStdout` sees each stdout chunk as it arrives, with
 * everything collected so far (a guest asking the host to act mid-run). It goes through lab-boot.sh, which boots again a guest whose kernel died
 * before the script began.
 */
export function runLabScript(
  args: string[],
  onStdout?: (chunk: string, out: string) => void,
  env?: NodeJS.ProcessEnv,
  onStderr?: (chunk: string) => void,
): { child: ChildProcess; done: Promise<{ code: number | null; out: string }> } {
  const child = spawn('bash', [LAB_BOOT, ...args], { stdio: ['ignore', 'pipe', 'pipe'], detached: true, ...(env === undefined ? {} : { env: { ...process.env, ...env } }) });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    const chunk = d.toString();
    out += chunk;
    onStdout?.(chunk, out);
  });
  child.stderr?.on('data', (d: Buffer) => {
    const chunk = d.toString();
    out += chunk;
    onStderr?.(chunk);
  });
  const done = new Promise<{ code: number | null; out: string }>((resolve) => child.once('exit', (code) => resolve({ code, out })));
  return { child, done };
}

/** A runLabScript `onStdout` that calls `onLine` with each whole stdout line, trimmed (a guest's requests and markers). */
export function byLine(onLine: (line: string) => void): (chunk: string) => void {
  let pending = '';
  return (chunk) => {
    pending += chunk;
    let i;
    while ((i = pending.indexOf('\n')) >= 0) {
      onLine(pending.slice(0, i).trim());
      pending = pending.slice(i + 1);
    }
  };
}

/** Ends a suite's lab run: the qemu process group, then the target child (SIGKILL after 10 s), then its temp dir. */
export async function stopLab(
  labChild: ChildProcess | undefined,
  target: { child: ChildProcess; exited: Promise<unknown> } | undefined,
  dir: string | undefined,
): Promise<void> {
    killLabGroup(labChild);
    if (target && target.child.exitCode === null) {
      target.child.kill('SIGTERM');
      const t = setTimeout(() => target?.child.kill('SIGKILL'), 10_000);
      await target.exited;
      clearTimeout(t);
    }
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
}

/** A guest that serves the host and then blocks in lab-wait-host (the kernel target side of a suite). */
export interface WaitingLab {
  child: ChildProcess;
  /** Everything the guest and run.sh printed so far. */
  out(): string;
  /** Releases lab-wait-host through the control port, waits up to 60 s for the guest to end, else ends its process group. */
  release(): Promise<void>;
}

/**
 * Boots `bash ARGS` (run.sh with a `--hostfwd CTL:5999` control forward and a guest script ending in lab-wait-host)
 * and resolves once the guest printed ===LAB-READY===; rejects with the output when it ends first or takes longer
 * than `readyTimeoutMs` (default 300 s), after ending it.
 */
export async function startWaitingLab(args: string[], o: { ctlPort: number; env?: NodeJS.ProcessEnv; readyTimeoutMs?: number }): Promise<WaitingLab> {
  const { child, done } = runLabScript(args, undefined, o.env);
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const kill = (): void => killLabGroup(child);
  const lab: WaitingLab = {
    child,
    out: () => out,
    release: async () => {
      if (child.exitCode !== null) return;
      await new Promise<void>((resolve) => {
        const s = net.connect(o.ctlPort, '127.0.0.1', () => s.end());
        s.once('close', () => resolve());
        s.once('error', () => resolve());
      });
      const ended = await Promise.race([done.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 60_000))]);
      if (!ended) kill();
    },
  };
  const deadline = Date.now() + (o.readyTimeoutMs ?? 300_000);
  while (!out.includes('===LAB-READY===')) {
    if (child.exitCode !== null) throw new Error(`lab ended before READY (rc ${String(child.exitCode)}):\n${out}`);
    if (Date.now() > deadline) {
      kill();
      throw new Error(`lab not ready within ${Math.round((o.readyTimeoutMs ?? 300_000) / 1000)} s:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return lab;
}

/** The guest kernel of a lab directory (lab.env KVER; default LAB_OUT), so a suite's title says which kernel ran. */
export function labKernel(labOut: string = process.env['LAB_OUT'] ?? '/var/tmp/nvme-lab'): string {
  try {
    return /^KVER=(.*)$/m.exec(readFileSync(path.join(labOut, 'lab.env'), 'utf8'))?.[1] ?? '?';
  } catch {
    return '(lab not built)';
  }
}

/** `nvme-tcp target` started by an interop suite as a user would (a child process), and what it logged. */
export interface CliTarget {
  child: ChildProcess;
  /** The first port it listens on. */
  port: number;
  /** The management API's port when `--api` was given. */
  apiPort: number | undefined;
  /** Every stdout and stderr line so far (the suites grep it for warnings and debug lines). */
  log: string[];
  exited: Promise<number | null>;
}

/**
 * Starts `node [nodeArgs] CLI_NODE_ARGS target ARGS` and resolves once it prints where it listens (and,
 * with `--api`, the API's address); rejects with its log when it exits first or takes over 30 s. `log` may be a
 * list the caller keeps across restarts.
 */
export async function startCliTarget(args: readonly string[], o: { nodeArgs?: readonly string[]; log?: string[]; /** the whole environment (default: this process's) */ env?: NodeJS.ProcessEnv; onSpawn?: (child: ChildProcess) => void } = {}): Promise<CliTarget> {
  const argv = [...(o.nodeArgs ?? []), ...CLI_NODE_ARGS, 'target', ...args];
  const child = spawn(process.execPath, argv, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'], ...(o.env === undefined ? {} : { env: o.env }) });
  o.onSpawn?.(child);
  const log = o.log ?? [];
  const wantApi = args.includes('--api');
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const ports = await new Promise<{ port: number; apiPort: number | undefined }>((resolve, reject) => {
    let buf = '';
    let port: number | undefined;
    let apiPort: number | undefined;
    const timer = setTimeout(() => reject(new Error(`target did not start within 30 s:\n${log.join('\n')}`)), 30_000);
    child.stdout?.on('data', (d: Buffer) => {
      buf += d.toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        log.push(line);
        port ??= Number(/^nvme-tcp target: listening on 127\.0\.0\.1:(\d+)/.exec(line)?.[1] ?? NaN) || undefined;
        apiPort ??= Number(/^nvme-tcp target: management API on http:\/\/127\.0\.0\.1:(\d+)/.exec(line)?.[1] ?? NaN) || undefined;
        if (port !== undefined && (!wantApi || apiPort !== undefined)) {
          clearTimeout(timer);
          resolve({ port, apiPort });
        }
      }
    });
    child.stderr?.on('data', (d: Buffer) => log.push(...d.toString().trimEnd().split('\n')));
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`target exited with ${String(code)} before listening:\n${log.join('\n')}`));
    });
  });
  return { child, ...ports, log, exited };
}
