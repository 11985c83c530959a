// Parent side of harness/fuzz/target-child.ts: fork it (tsx loader, --expose-gc), wait for its ports, sample its
// memory and leak counts, count error log lines, and notice when it dies.
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TargetConfig } from '../../target/model/config.js';
import type { ChildSample, ChildToParent, ParentToChild } from './protocol.js';

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'target-child.ts');

export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ChildTarget {
  readonly pid: number;
  readonly ports: number[];
  /** Resolves when the process exits, for whatever reason. */
  readonly exited: Promise<ChildExit>;
  /** Error-level log lines seen on stderr (handler threw, completion failed, ...), first ones kept. */
  readonly errors: { count: number; first: string[] };
  /** Warn-level lines seen on stderr (what a host can make the target log), first ones kept; counted when the child logs at warn. */
  readonly warns: { count: number; first: string[] };
  /** Last stderr bytes (for crash reports). */
  stderrTail(): string;
  sample(gc?: boolean): Promise<ChildSample>;
  stop(): Promise<ChildExit>;
  kill(signal?: NodeJS.Signals): Promise<ChildExit>;
}

export interface ChildTargetOptions {
  env?: Record<string, string>;
}

export async function startChildTarget(cfg: TargetConfig & { icReqTimeoutS?: number }, opts: ChildTargetOptions = {}): Promise<ChildTarget> {
  const child: ChildProcess = fork(CHILD, [JSON.stringify(cfg)], {
    execArgv: ['--import', 'tsx', '--expose-gc'],
    stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    env: { ...process.env, ...(opts.env ?? {}) },
  });
  const { errors, warns, tail } = watchStderr(child);
  const exited = new Promise<ChildExit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  let nextId = 1;
  const pending = new Map<number, { resolve: (s: ChildSample) => void; reject: (e: Error) => void }>();
  let ready: ((m: { ports: number[]; pid: number }) => void) | undefined;
  const readyP = new Promise<{ ports: number[]; pid: number }>((resolve, reject) => {
    ready = resolve;
    void exited.then((e) => reject(new Error(`target child exited before ready (code ${e.code}, signal ${e.signal}): ${tail()}`)));
  });
  child.on('message', (raw: unknown) => {
    const m = raw as ChildToParent;
    if (m.type === 'ready') ready?.({ ports: m.ports, pid: m.pid });
    else if (m.type === 'sample') {
      const p = pending.get(m.id);
      pending.delete(m.id);
      p?.resolve(m.sample);
    }
  });
  void exited.then((e) => {
    for (const p of pending.values()) p.reject(new Error(`target child exited (code ${e.code}, signal ${e.signal})`));
    pending.clear();
  });
  const r = await readyP;
  const send = (m: ParentToChild): void => {
    if (child.connected) child.send(m);
  };
  return {
    pid: r.pid,
    ports: r.ports,
    exited,
    errors,
    warns,
    stderrTail: tail,
    sample(gc = false) {
      const id = nextId++;
      return new Promise<ChildSample>((resolve, reject) => {
        if (child.exitCode !== null || child.signalCode !== null) return reject(new Error('target child is not running'));
        pending.set(id, { resolve, reject });
        send({ cmd: 'sample', id, gc });
      });
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        send({ cmd: 'stop' });
        const t = setTimeout(() => child.kill('SIGKILL'), 5000);
        const e = await exited;
        clearTimeout(t);
        return e;
      }
      return exited;
    },
    async kill(signal: NodeJS.Signals = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** The child's stderr: its last 8 KiB; pino lines at level error or above (or non-JSON lines) and at warn counted. */
function watchStderr(child: ChildProcess): { errors: ChildTarget['errors']; warns: ChildTarget['warns']; tail: () => string } {
  const errors = { count: 0, first: [] as string[] };
  const warns = { count: 0, first: [] as string[] };
  let tail = '';
  let partial = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (s: string) => {
    tail = (tail + s).slice(-8192);
    partial += s;
    const lines = partial.split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      if (line.trim() === '') continue;
      let level = 50;
      try {
        level = (JSON.parse(line) as { level?: number }).level ?? 50;
      } catch {
        // Not a pino line (a stack trace): count it as an error.
      }
      const seen = level >= 50 ? errors : level >= 40 ? warns : undefined;
      if (seen !== undefined) {
        seen.count++;
        if (seen.first.length < 5) seen.first.push(line.slice(0, 2000));
      }
    }
  });
  return { errors, warns, tail: () => tail };
}
