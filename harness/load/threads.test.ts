import { describe, expect, it } from 'vitest';
import { busiestThread, countCpuList, parseTaskStat, sampleThreads, type ThreadSample } from './threads.js';

// A /proc/PID/task/TID/stat line as proc(5) lays it out: pid (comm) state ppid ... utime(14) stime(15) ...
function statLine(tid: number, comm: string, utime: number, stime: number): string {
  const fields = ['S', '1', '1', '1', '0', '-1', '4194560', '100', '0', '0', '0', String(utime), String(stime), '0', '0', '20', '0', '7'];
  return `${tid} (${comm}) ${fields.join(' ')}\n`;
}

describe('per-thread CPU', () => {
  it('parses utime + stime in clock ticks, with a comm that holds spaces and parentheses', () => {
    expect(parseTaskStat(42, statLine(42, 'node (x) y', 150, 50))).toEqual({ tid: 42, name: 'node (x) y', cpuMs: 2000 });
    expect(parseTaskStat(1, 'garbage')).toBeUndefined();
  });

  it('counts CPU lists as Cpus_allowed_list writes them', () => {
    expect(countCpuList('0')).toBe(1);
    expect(countCpuList('0-1')).toBe(2);
    expect(countCpuList('0,2-4,7')).toBe(5);
  });

  it('the busiest thread is the one with the largest CPU delta; threads born in the window count from zero', () => {
    const before: ThreadSample = { pid: 1, allowedCpus: 2, threads: [{ tid: 1, name: 'node', cpuMs: 1000 }, { tid: 2, name: 'V8Worker', cpuMs: 50 }] };
    const after: ThreadSample = {
      pid: 1,
      allowedCpus: 2,
      threads: [{ tid: 1, name: 'node', cpuMs: 1400 }, { tid: 2, name: 'V8Worker', cpuMs: 60 }, { tid: 3, name: 'io-worker', cpuMs: 900 }],
    };
    expect(busiestThread(before, after, 1000)).toEqual({ tid: 3, name: 'io-worker', percentOfCore: 90 });
    expect(busiestThread(before, { ...after, threads: after.threads.slice(0, 2) }, 1000)).toEqual({ tid: 1, name: 'node', percentOfCore: 40 });
    expect(busiestThread(before, after, 0)).toBeUndefined();
  });

  it.runIf(process.platform === 'linux')('samples this process: the main thread (tid = pid) is among its threads', async () => {
    const s = await sampleThreads();
    expect(s?.threads.some((t) => t.tid === process.pid)).toBe(true);
    expect(s?.allowedCpus).toBeGreaterThanOrEqual(1);
    expect(await sampleThreads(2 ** 22 + 1)).toBeUndefined();
  });
});
