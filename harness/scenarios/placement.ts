// Where the two ends run. On this kind of machine a QD1 round trip costs ~7.6 µs with both ends on one vCPU and ~90 µs
// across vCPUs, and unpinned runs are bimodal (shared/reference/performance.md, "The machine"), so the split scenarios
// pin the initiator (this process) and the target (a child process) to different CPUs and report what the kernel says
// each was allowed to run on.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { CpuSample } from '../load/engine.js';
import { DEFAULT_BENCH_NQN, readProcCpu, REPO_ROOT } from '../nvme.js';

/** Raised when the target child cannot be started or queried. */
export class PlacementError extends Error {
  readonly code = 'HARNESS_ERR_PLACEMENT';
  constructor(message: string) {
    super(message);
    this.name = 'PlacementError';
  }
}

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: 10_000 }, (err, stdout, stderr) => (err !== null ? reject(new PlacementError(`${cmd} ${args.join(' ')}: ${stderr.trim() || err.message}`)) : resolve(stdout)));
  });
}

/** "0-1" / "0,2-3" → [0, 1] / [0, 2, 3]. */
export function parseCpuList(s: string): number[] {
  const out: number[] = [];
  for (const part of s.trim().split(',')) {
    if (part === '') continue;
    const [a, b] = part.split('-').map(Number) as [number, number | undefined];
    for (let c = a; c <= (b ?? a); c++) out.push(c);
  }
  return out;
}

/** The CPUs the kernel lets `pid` run on (Cpus_allowed_list in /proc/PID/status). */
export async function allowedCpus(pid: number): Promise<string> {
  try {
    const s = await readFile(`/proc/${pid}/status`, 'utf8');
    return /^Cpus_allowed_list:\s*(\S+)/m.exec(s)?.[1] ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

export interface Placement {
  /** CPU for this process (initiator), or undefined when not pinned. */
  initiatorCpu: number | undefined;
  /** CPU for the target child, or undefined when not pinned. */
  targetCpu: number | undefined;
  /** Why the ends are not pinned apart (one CPU, no taskset, not Linux). */
  unpinnedReason?: string;
  /** Restores this process's original affinity (all threads). */
  restore(): Promise<void>;
}

/**
 * Pins this process (every thread: `taskset -a`, so V8's GC and libuv's threadpool move too) to the first allowed
 * CPU and reserves the second for the target. Node has no sched_setaffinity, hence taskset. With fewer than two
 * CPUs or no taskset nothing is pinned and the reason is returned for the report.
 */
export async function pinApart(): Promise<Placement> {
  const noop = async (): Promise<void> => undefined;
  if (process.platform !== 'linux') return { initiatorCpu: undefined, targetCpu: undefined, unpinnedReason: 'not Linux', restore: noop };
  const allowed = parseCpuList(await allowedCpus(process.pid));
  if (allowed.length < 2) return { initiatorCpu: undefined, targetCpu: undefined, unpinnedReason: `only ${allowed.length} CPU allowed`, restore: noop };
  let original: string;
  try {
    // "pid N's current affinity list: 0,1"
    original = (await run('taskset', ['-cp', String(process.pid)])).trim().split(': ').pop() ?? '';
  } catch (e) {
    return { initiatorCpu: undefined, targetCpu: undefined, unpinnedReason: `taskset unavailable (${(e as Error).message})`, restore: noop };
  }
  const [ini, tgt] = allowed as [number, number];
  await run('taskset', ['-a', '-cp', String(ini), String(process.pid)]);
  return {
    initiatorCpu: ini,
    targetCpu: tgt,
    restore: async () => {
      await run('taskset', ['-a', '-cp', original, String(process.pid)]).catch(() => undefined);
    },
  };
}

export interface TargetProcess {
  pid: number;
  addr: string;
  port: number;
  nqn: string;
  /** Management API base URL (GET /controllers, /metrics). */
  api: string;
  /** Cumulative CPU time of the target process (/proc/PID/stat). */
  cpu(): Promise<CpuSample | undefined>;
  /** Same shape as TargetService.listControllers(), read over the management API. */
  controllers(): Promise<TargetControllerInfo[]>;
  /** Target event-loop delay since the previous call (the API's gauge resets per scrape), in ms. */
  loopLag(): Promise<{ p99Ms: number; maxMs: number } | undefined>;
  stop(): Promise<void>;
}

export interface TargetControllerInfo {
  cntlid: number;
  subnqn: string;
  queues: { qid: number; commands: number }[];
}

/**
 * `nvme-tcp target` (cli/main.ts via `node --import tsx`) as a child, optionally pinned with `taskset -c CPU`
 * (taskset execs node, so the child's pid is the target's), with the management API on a free loopback port.
 */
export async function startTargetProcess(o: { ram?: string; cpu?: number; nqn?: string; timeoutMs?: number } = {}): Promise<TargetProcess> {
  const nqn = o.nqn ?? DEFAULT_BENCH_NQN;
  const node = [process.execPath, '--import', 'tsx', path.join(REPO_ROOT, 'cli', 'main.ts'), 'target', '--listen', '127.0.0.1:0', '--api', '127.0.0.1:0', '--nqn', nqn, '--ram', o.ram ?? '256M', '--log-level', 'warn'];
  const argv = o.cpu === undefined ? node : ['taskset', '-c', String(o.cpu), ...node];
  const child: ChildProcess = spawn(argv[0] as string, argv.slice(1), { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(t);
  };
  try {
    const { port, api } = await new Promise<{ port: number; api: string }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new PlacementError(`target child did not start in time; stderr: ${err.slice(-500)}`)), o.timeoutMs ?? 30_000);
      child.stdout?.on('data', (b: Buffer) => {
        out += b.toString();
        const m = /listening on 127\.0\.0\.1:(\d+)/.exec(out);
        const a = /management API on (http:\/\/\S+)/.exec(out);
        if (m !== null && a !== null) {
          clearTimeout(timer);
          resolve({ port: Number(m[1]), api: (a[1] as string).replace(/[),]+$/, '') });
        }
      });
      child.stderr?.on('data', (b: Buffer) => (err += b.toString()));
      child.once('exit', (code, sig) => {
        clearTimeout(timer);
        reject(new PlacementError(`target child exited (${code ?? sig}) before listening: ${(err || out).trim().split('\n').slice(-3).join(' / ')}`));
      });
    });
    const pid = child.pid ?? -1;
    const get = async (p: string): Promise<Response> => {
      const r = await fetch(`${api}${p}`);
      if (!r.ok) throw new PlacementError(`GET ${p}: HTTP ${r.status}`);
      return r;
    };
    return {
      pid,
      addr: '127.0.0.1',
      port,
      nqn,
      api,
      cpu: () => readProcCpu(pid),
      controllers: async () => (await (await get('/controllers')).json()) as TargetControllerInfo[],
      loopLag: async () => {
        try {
          const text = await (await get('/metrics')).text();
          const p99 = /^nvme_tcp_event_loop_lag_seconds\{quantile="0\.99"\} (\S+)/m.exec(text)?.[1];
          const max = /^nvme_tcp_event_loop_lag_max_seconds (\S+)/m.exec(text)?.[1];
          if (p99 === undefined || max === undefined) return undefined;
          // The gauge comes from monitorEventLoopDelay at 10 ms resolution; subtract it as the engine does for ours.
          const ms = (s: string): number => Math.round(Math.max(0, Number(s) * 1000 - 10) * 100) / 100;
          return { p99Ms: ms(p99), maxMs: ms(max) };
        } catch {
          return undefined;
        }
      },
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
