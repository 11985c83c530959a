// Where the two ends run. On this kind of machine a QD1 round trip costs ~7.6 µs with both ends on one vCPU and ~90 µs
// across vCPUs, and unpinned runs are bimodal (docs/performance.md, Benchmarks; docs/harness.md), so the split scenarios
// pin the initiator (this process) and the target (a child process) to different CPUs and report what the kernel says
// each was allowed to run on.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import type { CpuSample } from '../load/engine.js';
import { readProcCpu, startChildTarget, type ChildTarget } from '../nvme.js';

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
  /** Every CPU this process was pinned to (one, or all but the target's with `spread`); empty when not pinned. */
  initiatorCpus: number[];
  /** CPU for the target child, or undefined when not pinned. */
  targetCpu: number | undefined;
  /** Why the ends are not pinned apart (one CPU, no taskset, not Linux). */
  unpinnedReason?: string;
  /** Restores this process's original affinity (all threads). */
  restore(): Promise<void>;
}

/**
 * Pins this process (every thread: `taskset -a`, so V8's GC and libuv's threadpool move too) to the first allowed
 * CPU and reserves the second for the target. With `spread` (io workers: the initiator is several threads) this
 * process gets every allowed CPU but the target's. Node has no sched_setaffinity, hence taskset. With fewer than two
 * CPUs or no taskset nothing is pinned and the reason is returned for the report.
 */
export async function pinApart(o: { spread?: boolean } = {}): Promise<Placement> {
  const noop = async (): Promise<void> => undefined;
  const none = { initiatorCpu: undefined, initiatorCpus: [], targetCpu: undefined, restore: noop };
  if (process.platform !== 'linux') return { ...none, unpinnedReason: 'not Linux' };
  const allowed = parseCpuList(await allowedCpus(process.pid));
  if (allowed.length < 2) return { ...none, unpinnedReason: `only ${allowed.length} CPU allowed` };
  let original: string;
  try {
    // "pid N's current affinity list: 0,1"
    original = (await run('taskset', ['-cp', String(process.pid)])).trim().split(': ').pop() ?? '';
  } catch (e) {
    return { ...none, unpinnedReason: `taskset unavailable (${(e as Error).message})` };
  }
  const [ini, tgt] = allowed as [number, number];
  const mine = o.spread === true ? allowed.filter((c) => c !== tgt) : [ini];
  await run('taskset', ['-a', '-cp', mine.join(','), String(process.pid)]);
  return {
    initiatorCpu: ini,
    initiatorCpus: mine,
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
  let target: ChildTarget;
  try {
    target = await startChildTarget({
      listen: '127.0.0.1:0',
      api: true,
      ...(o.nqn === undefined ? {} : { nqn: o.nqn }),
      ...(o.ram === undefined ? {} : { ram: o.ram }),
      ...(o.timeoutMs === undefined ? {} : { timeoutMs: o.timeoutMs }),
      ...(o.cpu === undefined ? {} : { prefix: ['taskset', '-c', String(o.cpu)] }),
    });
  } catch (e) {
    throw new PlacementError(e instanceof Error ? e.message : String(e));
  }
  const { pid, api } = target;
  if (api === undefined) {
    await target.stop();
    throw new PlacementError('target child did not report its management API');
  }
  const get = async (p: string): Promise<Response> => {
    const r = await fetch(`${api}${p}`);
    if (!r.ok) throw new PlacementError(`GET ${p}: HTTP ${r.status}`);
    return r;
  };
  return {
    pid,
    addr: target.addr,
    port: target.port,
    nqn: target.nqn,
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
    stop: () => target.stop(),
  };
}
