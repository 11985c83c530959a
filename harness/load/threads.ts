// Per-thread CPU of a process (/proc/PID/task/TID/stat), so a report can say whether an arm was bound by one end's
// CPU: a process below 100 % of a core can still be capped by its one event loop, and a process with io workers whose
// threads share one allowed CPU is capped by that CPU although no single thread is busy (docs/harness.md, "Bound arms").
import { readdir, readFile } from 'node:fs/promises';
import type { BusiestThread } from './types.js';

/** utime + stime are in clock ticks; Linux's USER_HZ is 100 on every architecture Node runs on. */
const MS_PER_TICK = 10;

export interface ThreadCpu {
  tid: number;
  /** comm: "node" for the main thread, "node" or the worker's name for worker_threads, "V8Worker", "libuv-worker", ... */
  name: string;
  /** user + system CPU time so far (ms). */
  cpuMs: number;
}

export interface ThreadSample {
  pid: number;
  threads: ThreadCpu[];
  /** Logical CPUs the process may run on (Cpus_allowed_list), or undefined where unreadable. */
  allowedCpus: number | undefined;
}

/** One /proc/PID/task/TID/stat line → name and CPU ms (fields after the ")" of comm: utime is 14th, stime 15th). */
export function parseTaskStat(tid: number, stat: string): ThreadCpu | undefined {
  const open = stat.indexOf('(');
  const close = stat.lastIndexOf(')');
  if (open < 0 || close < open) return undefined;
  const f = stat.slice(close + 2).split(' ');
  const ticks = Number(f[11]) + Number(f[12]);
  if (!Number.isFinite(ticks)) return undefined;
  return { tid, name: stat.slice(open + 1, close), cpuMs: ticks * MS_PER_TICK };
}

/** "0-1,4" → 3. */
export function countCpuList(list: string): number {
  let n = 0;
  for (const part of list.trim().split(',')) {
    if (part === '') continue;
    const [a, b] = part.split('-').map(Number) as [number, number | undefined];
    n += (b ?? a) - a + 1;
  }
  return n;
}

/** Every thread of `pid` (default: this process) with its CPU so far; undefined off Linux or when the process is gone. */
export async function sampleThreads(pid: number = process.pid): Promise<ThreadSample | undefined> {
  if (process.platform !== 'linux') return undefined;
  let tids: string[];
  try {
    tids = await readdir(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  const threads: ThreadCpu[] = [];
  for (const t of tids) {
    try {
      const parsed = parseTaskStat(Number(t), await readFile(`/proc/${pid}/task/${t}/stat`, 'utf8'));
      if (parsed !== undefined) threads.push(parsed);
    } catch {
      // The thread exited between readdir and read; it did no work we could still attribute.
    }
  }
  let allowedCpus: number | undefined;
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const list = /^Cpus_allowed_list:\s*(\S+)/m.exec(status)?.[1];
    allowedCpus = list === undefined ? undefined : countCpuList(list);
  } catch {
    allowedCpus = undefined;
  }
  return { pid, threads, allowedCpus };
}


/** The thread that used the most CPU between two samples of one process (threads born in between count from 0). */
export function busiestThread(before: ThreadSample, after: ThreadSample, wallMs: number): BusiestThread | undefined {
  if (wallMs <= 0) return undefined;
  const was = new Map(before.threads.map((t) => [t.tid, t.cpuMs]));
  let best: BusiestThread | undefined;
  for (const t of after.threads) {
    const pct = ((t.cpuMs - (was.get(t.tid) ?? 0)) / wallMs) * 100;
    if (best === undefined || pct > best.percentOfCore) best = { tid: t.tid, name: t.name, percentOfCore: Math.round(pct * 10) / 10 };
  }
  return best;
}
