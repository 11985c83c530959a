// The fio-like workload engine: runs resolved jobs against a BlockTarget and measures IOPS, bandwidth, latency
// histograms, per-job/per-queue distribution, CPU and event-loop lag; optionally verifies every block it reads.
import { readFile } from 'node:fs/promises';
import { constants as perfConstants, monitorEventLoopDelay, performance, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import type { Histogram } from 'hdr-histogram-js';
import { formatBs } from './job-file.js';
import { cdfPoints, newHistogram, recordNs, summarize } from './stats.js';
import type {
  BlockTarget,
  CpuResult,
  GcResult,
  IoTotals,
  JobResult,
  JobSpec,
  ProgressInfo,
  QueueCounter,
  QueueResult,
  RunResult,
  SubmitContext,
  TimePoint,
  VerifyMismatch,
} from './types.js';
import { GenerationMap, checkBlocks, stampBlocks } from './verify.js';

export interface CpuSample {
  userMs: number;
  systemMs: number;
}

export interface EngineOptions {
  /** What this process contains, for the CPU line of reports (default "initiator"). */
  cpuLabel?: string;
  /** Reads the target's cumulative CPU time when it runs in another process (sampled at start and end). */
  targetCpu?: () => CpuSample | undefined | Promise<CpuSample | undefined>;
  /** Where targetCpu reads from, e.g. "/proc/1234/stat". */
  targetCpuSource?: string;
  /** Time-series and progress interval (ms). Default: planned duration / 60, within 100..1000. */
  intervalMs?: number;
  onProgress?: (p: ProgressInfo) => void;
  signal?: AbortSignal;
}

/** Raised for job sets the engine cannot run; I/O errors are counted in the result instead. */
export class EngineError extends Error {
  readonly code = 'HARNESS_ERR_ENGINE';
  constructor(message: string) {
    super(message);
    this.name = 'EngineError';
  }
}

const MAX_MISMATCHES = 64;
/** monitorEventLoopDelay samples with a timer of this period; its values include the period, which we subtract. */
const LOOP_RESOLUTION_MS = 10;
const MAX_ERROR_MESSAGES = 16;

/** xorshift32: fast, seedable, good enough to spread offsets. Returns [0, 1). */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 0x9e3779b9;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 0x1_0000_0000;
  };
}

/**
 * A pseudo-random permutation of 0..n-1 (fio's random map: a size-based random job touches every block once).
 * An invertible mix on the next power of two, with cycle walking to stay below n.
 */
function permutation(n: number, seed: number): (i: number) => number {
  let bits = 1;
  while (2 ** bits < n) bits++;
  const size = 2 ** bits;
  const mask = size - 1;
  const mul = (((seed * 2654435761) >>> 0) | 1) % size || 1;
  const add = ((seed * 40503) >>> 0) % size;
  const shift = Math.max(1, bits >> 1);
  const mix = (x: number): number => {
    // Odd multiplier mod 2^k and xorshift-right are both bijections on [0, 2^k).
    let y = (Math.imul(x, mul) + add) >>> 0;
    y = bits >= 32 ? y : y & mask;
    y ^= y >>> shift;
    y = (Math.imul(y, mul) + add) >>> 0;
    return bits >= 32 ? y : y & mask;
  };
  return (i: number): number => {
    let y = mix(i % n);
    while (y >= n) y = mix(y);
    return y;
  };
}

interface Hists {
  all: Histogram;
  read: Histogram;
  write: Histogram;
}

interface Counters {
  readIos: number;
  writeIos: number;
  readBytes: number;
  writeBytes: number;
  errors: number;
}

const newHists = (): Hists => ({ all: newHistogram(), read: newHistogram(), write: newHistogram() });
const newCounters = (): Counters => ({ readIos: 0, writeIos: 0, readBytes: 0, writeBytes: 0, errors: 0 });

interface JobState {
  spec: JobSpec;
  hists: Hists;
  counters: Counters;
  clones: { clone: number; hctx: string; ios: number }[];
  startedAt: number;
  measureFrom: number;
  endedAt: number;
  stop: boolean;
}

interface Inflight {
  lba: number;
  blocks: number;
}

/** Runs `jobs` (groups split at stonewall run one after another) and returns the measurements. */
export async function runJobs(target: BlockTarget, jobs: JobSpec[], opts: EngineOptions = {}): Promise<RunResult> {
  if (jobs.length === 0) throw new EngineError('no jobs');
  const bsz = target.blockSize;
  for (const j of jobs) {
    if (j.offset + j.size > bsz * target.capacityBlocks) throw new EngineError(`job "${j.name}": region beyond the namespace`);
    for (const e of j.bssplit) if (e.bs % bsz !== 0) throw new EngineError(`job "${j.name}": bs ${e.bs} is not a multiple of ${bsz}`);
  }

  const groups: JobSpec[][] = [];
  for (const j of jobs) {
    if (groups.length === 0 || j.stonewall) groups.push([]);
    (groups[groups.length - 1] as JobSpec[]).push(j);
  }
  const plannedMs = groups.every((g) => g.every((j) => j.runtimeMs !== undefined))
    ? groups.reduce((s, g) => s + Math.max(...g.map((j) => j.rampMs + (j.runtimeMs ?? 0))), 0)
    : undefined;
  const intervalMs = opts.intervalMs ?? (plannedMs === undefined ? 250 : Math.min(1000, Math.max(100, Math.round(plannedMs / 60))));

  const total = newHists();
  const totalCounters = newCounters();
  const verifyJobs = jobs.filter((j) => j.verify);
  let genMap: GenerationMap | undefined;
  if (verifyJobs.length > 0) {
    const lo = Math.min(...verifyJobs.map((j) => j.offset / bsz));
    const hi = Math.max(...verifyJobs.map((j) => (j.offset + j.size) / bsz));
    genMap = new GenerationMap(lo, hi - lo);
  }
  const mismatches: VerifyMismatch[] = [];
  let mismatchCount = 0;
  let checkedBlocks = 0;
  let generation = 0;
  const errorMessages: string[] = [];
  const inflight = new Set<Inflight>();
  let waiters: (() => void)[] = [];
  const wakeWaiters = (): void => {
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  const overlaps = (lba: number, blocks: number): boolean => {
    for (const r of inflight) if (lba < r.lba + r.blocks && r.lba < lba + blocks) return true;
    return false;
  };

  // Time series: completions counted per interval, ramp included (flagged), as fio's bandwidth logs do.
  const runStart = performance.now();
  let tickIos = 0;
  let tickBytes = 0;
  let lastTick = runStart;
  const points: TimePoint[] = [];
  let anyRamping = (): boolean => false;
  const ticker = setInterval(() => {
    const now = performance.now();
    const dt = (now - lastTick) / 1000;
    const p: TimePoint = { tMs: Math.round(now - runStart), iops: Math.round(tickIos / dt), mbps: Math.round((tickBytes / dt / 1e6) * 100) / 100, ramp: anyRamping() };
    points.push(p);
    tickIos = 0;
    tickBytes = 0;
    lastTick = now;
    opts.onProgress?.({ elapsedMs: now - runStart, totalMs: plannedMs, iops: p.iops, mbps: p.mbps });
  }, intervalMs);

  const queueBefore = target.queueCounters?.() ?? [];
  const targetCpuBefore = await opts.targetCpu?.();
  const machineBefore = await machineCpu();
  const cpuBefore = process.cpuUsage();
  const gc = watchGc();
  const loopDelay = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
  loopDelay.enable();

  const states: JobState[] = [];
  let submitterIndex = 0;
  let measuredMs = 0;

  const recordMismatches = (found: VerifyMismatch[]): void => {
    mismatchCount += found.length;
    for (const m of found) if (mismatches.length < MAX_MISMATCHES) mismatches.push(m);
  };

  async function runClone(st: JobState, clone: number, ctx: SubmitContext): Promise<void> {
    const j = st.spec;
    const rand = rng(j.seed * 7919 + clone * 104_729 + 1);
    const regionEnd = j.offset + j.size;
    const weightSum = j.bssplit.reduce((s, e) => s + e.weight, 0);
    const maxBs = Math.max(...j.bssplit.map((e) => e.bs));
    const random = j.rw === 'randread' || j.rw === 'randwrite' || j.rw === 'randrw';
    const writesToo = j.rwmixread < 100;
    let cursor = j.offset;
    let issuedBytes = 0;
    const measureEnd = j.runtimeMs === undefined ? Infinity : st.measureFrom + j.runtimeMs;
    let nextSlot = performance.now();
    const slotMs = j.rateIops === undefined ? 0 : 1000 / j.rateIops;
    const cloneStats = st.clones[clone] as { ios: number };

    const pickBs = (): number => {
      if (j.bssplit.length === 1) return (j.bssplit[0] as { bs: number }).bs;
      let r = rand() * weightSum;
      for (const e of j.bssplit) {
        r -= e.weight;
        if (r < 0) return e.bs;
      }
      return (j.bssplit[j.bssplit.length - 1] as { bs: number }).bs;
    };
    // Single-bs random jobs walk a permutation of the region (every slot once per pass), like fio's random map;
    // with bssplit the offsets are independent draws (fio's norandommap).
    const slots = Math.floor(j.size / maxBs);
    let pass = 0;
    let perm = j.bssplit.length === 1 && slots <= 0xffff_ffff ? permutation(slots, j.seed * 31 + clone) : undefined;
    let drawn = 0;
    const pickOffset = (bs: number): number => {
      if (random) {
        if (perm === undefined) return j.offset + Math.floor(rand() * Math.floor(j.size / bs)) * bs;
        if (drawn === slots) {
          drawn = 0;
          perm = permutation(slots, j.seed * 31 + clone + ++pass * 1_000_003);
        }
        return j.offset + perm(drawn++) * bs;
      }
      if (cursor + bs > regionEnd) cursor = j.offset;
      const o = cursor;
      cursor += bs;
      return o;
    };

    const worker = async (): Promise<void> => {
      const scratch = writesToo && !j.verify ? Buffer.alloc(maxBs, 0xa5) : undefined;
      // One data buffer per in-flight slot (fio's io_u): reads land in it and verify writes are stamped in it, so the
      // steady state allocates no off-heap memory per I/O. Safe because this slot awaits each I/O before reusing it.
      const slotBuf = Buffer.allocUnsafeSlow(maxBs);
      for (;;) {
        if (st.stop || opts.signal?.aborted === true) return;
        if (performance.now() >= measureEnd) return;
        if (j.runtimeMs === undefined && issuedBytes >= j.ioSize) return;
        const bs = pickBs();
        let off = pickOffset(bs);
        issuedBytes += bs;
        const isRead = j.rwmixread >= 100 || (j.rwmixread > 0 && rand() * 100 < j.rwmixread);
        if (slotMs > 0) {
          const now = performance.now();
          const at = Math.max(now, nextSlot);
          nextSlot = at + slotMs;
          if (at - now >= 1) await new Promise((r) => setTimeout(r, at - now));
        }
        const blocks = bs / bsz;
        let range: Inflight | undefined;
        if (genMap !== undefined) {
          // Two I/Os on one block at once would make the expected generation ambiguous (fio: serialize_overlap).
          for (let tries = 0; overlaps(off / bsz, blocks) && random && tries < 8; tries++) off = pickOffset(bs);
          while (overlaps(off / bsz, blocks)) await new Promise<void>((r) => waiters.push(r));
          range = { lba: off / bsz, blocks };
          inflight.add(range);
        }
        const lba = off / bsz;
        const t0 = performance.now();
        try {
          if (isRead) {
            const data = await target.read(lba, blocks, ctx, slotBuf.subarray(0, bs));
            if (j.verify && genMap !== undefined) {
              const map = genMap;
              // A job that also writes checks only blocks it has written; a read-only job checks everything it reads.
              const found = checkBlocks(data, lba, bsz, j.name, (l) => map.get(l)).filter((m) => !writesToo || map.get(m.lba) !== undefined);
              checkedBlocks += writesToo ? countKnown(map, lba, blocks) : blocks;
              recordMismatches(found);
            }
          } else if (j.verify && genMap !== undefined) {
            const buf = slotBuf.subarray(0, bs);
            const gen = ++generation;
            stampBlocks(buf, lba, bsz, gen);
            await target.write(lba, buf, ctx);
            genMap.set(lba, blocks, gen);
          } else {
            await target.write(lba, (scratch as Buffer).subarray(0, bs), ctx);
          }
        } catch (e) {
          st.counters.errors++;
          totalCounters.errors++;
          if (errorMessages.length < MAX_ERROR_MESSAGES) errorMessages.push(`${j.name}: ${isRead ? 'read' : 'write'} lba ${lba} +${blocks}: ${(e as Error).message}`);
          // fio's default (continue_on_error=none): the job stops at its first I/O error.
          st.stop = true;
          return;
        } finally {
          if (range !== undefined) {
            inflight.delete(range);
            wakeWaiters();
          }
        }
        const t1 = performance.now();
        tickIos++;
        tickBytes += bs;
        if (t1 < st.measureFrom) continue;
        const ns = (t1 - t0) * 1e6;
        recordNs(st.hists.all, ns);
        recordNs(total.all, ns);
        recordNs(isRead ? st.hists.read : st.hists.write, ns);
        recordNs(isRead ? total.read : total.write, ns);
        for (const c of [st.counters, totalCounters]) {
          if (isRead) {
            c.readIos++;
            c.readBytes += bs;
          } else {
            c.writeIos++;
            c.writeBytes += bs;
          }
        }
        cloneStats.ios++;
        st.endedAt = t1;
      }
    };
    await Promise.all(Array.from({ length: j.iodepth }, () => worker()));
  }

  /** Reads back everything a verify job wrote (fio's verify phase); not part of the measured window. */
  async function verifyPass(st: JobState, ctx: SubmitContext): Promise<void> {
    const j = st.spec;
    if (genMap === undefined || j.rwmixread >= 100) return;
    const map = genMap;
    const lo = j.offset / bsz;
    const hi = (j.offset + j.size) / bsz;
    const maxBlocks = Math.max(1, Math.floor(Math.max(...j.bssplit.map((e) => e.bs)) / bsz));
    const extents = [...map.extents(maxBlocks)].filter(([l, n]) => l < hi && l + n > lo);
    let next = 0;
    const worker = async (): Promise<void> => {
      const slotBuf = Buffer.allocUnsafeSlow(maxBlocks * bsz);
      while (next < extents.length && opts.signal?.aborted !== true) {
        const [l0, n0] = extents[next++] as [number, number];
        const l = Math.max(l0, lo);
        const n = Math.min(l0 + n0, hi) - l;
        try {
          const data = await target.read(l, n, ctx, slotBuf.subarray(0, n * bsz));
          checkedBlocks += n;
          recordMismatches(checkBlocks(data, l, bsz, j.name, (x) => map.get(x)));
        } catch (e) {
          st.counters.errors++;
          totalCounters.errors++;
          if (errorMessages.length < MAX_ERROR_MESSAGES) errorMessages.push(`${j.name}: verify read lba ${l} +${n}: ${(e as Error).message}`);
          return;
        }
      }
    };
    await Promise.all(Array.from({ length: j.iodepth }, () => worker()));
  }

  try {
    for (const group of groups) {
      const groupStart = performance.now();
      const groupStates = group.map((spec): JobState => {
        const clones = Array.from({ length: spec.numjobs }, (_, c) => ({
          clone: c,
          hctx: spec.hctx === undefined ? `${spec.name}.${c}` : spec.numjobs > 1 ? `${spec.hctx}.${c}` : spec.hctx,
          ios: 0,
        }));
        return { spec, hists: newHists(), counters: newCounters(), clones, startedAt: groupStart, measureFrom: groupStart + spec.rampMs, endedAt: groupStart + spec.rampMs, stop: false };
      });
      states.push(...groupStates);
      anyRamping = (): boolean => groupStates.some((s) => performance.now() < s.measureFrom);
      await Promise.all(
        groupStates.map(async (st) => {
          const ctxs = st.clones.map((c): SubmitContext => ({ job: st.spec.name, clone: c.clone, index: submitterIndex++, hctx: c.hctx }));
          await Promise.all(ctxs.map((ctx, i) => runClone(st, i, ctx)));
          st.endedAt = Math.max(st.endedAt, performance.now());
          if (st.spec.verify) await verifyPass(st, ctxs[0] as SubmitContext);
        }),
      );
      const measuredFrom = Math.min(...groupStates.map((s) => s.measureFrom));
      const endedAt = Math.max(...groupStates.map((s) => s.endedAt));
      measuredMs += Math.max(0, endedAt - measuredFrom);
    }
  } finally {
    clearInterval(ticker);
    loopDelay.disable();
  }

  const wallMs = performance.now() - runStart;
  const cpu = process.cpuUsage(cpuBefore);
  const gcResult = gc.stop();
  const machineAfter = await machineCpu();
  const targetCpuAfter = await opts.targetCpu?.();
  const cpuResult: CpuResult = {
    userMs: Math.round(cpu.user / 1000),
    systemMs: Math.round(cpu.system / 1000),
    percentOfCore: Math.round(((cpu.user + cpu.system) / 1000 / wallMs) * 1000) / 10,
    label: opts.cpuLabel ?? 'initiator',
  };
  if (targetCpuBefore !== undefined && targetCpuAfter !== undefined) {
    const u = targetCpuAfter.userMs - targetCpuBefore.userMs;
    const s = targetCpuAfter.systemMs - targetCpuBefore.systemMs;
    cpuResult.target = { userMs: Math.round(u), systemMs: Math.round(s), percentOfCore: Math.round(((u + s) / wallMs) * 1000) / 10, source: opts.targetCpuSource ?? 'external' };
  }
  if (machineBefore !== undefined && machineAfter !== undefined && machineAfter.totalTicks > machineBefore.totalTicks) {
    const cores = machineAfter.cores;
    const busyPct = ((machineAfter.busyTicks - machineBefore.busyTicks) / (machineAfter.totalTicks - machineBefore.totalTicks)) * cores * 100;
    const ours = cpuResult.percentOfCore + (cpuResult.target?.percentOfCore ?? 0);
    cpuResult.machine = { cores, busyPercentOfCore: Math.round(busyPct * 10) / 10, otherPercentOfCore: Math.round(Math.max(0, busyPct - ours) * 10) / 10 };
  }

  const durationMs = Math.max(measuredMs, 0.001);
  const jobResults = states.map((st): JobResult => {
    const d = Math.max(st.endedAt - st.measureFrom, 0.001);
    return {
      name: st.spec.name,
      rw: st.spec.rw,
      numjobs: st.spec.numjobs,
      iodepth: st.spec.iodepth,
      bs: formatBs(st.spec.bssplit),
      durationMs: Math.round(d * 10) / 10,
      ...totals(st.counters, st.hists, d),
      clones: st.clones.map((c) => ({ clone: c.clone, hctx: c.hctx, ios: c.ios, iops: Math.round((c.ios / d) * 1000) })),
    };
  });

  return {
    durationMs: Math.round(durationMs * 10) / 10,
    wallMs: Math.round(wallMs * 10) / 10,
    totals: totals(totalCounters, total, durationMs),
    jobs: jobResults,
    queues: diffQueues(queueBefore, target.queueCounters?.() ?? []),
    timeSeries: { intervalMs, points },
    latencyCdf: cdfPoints(total.all),
    cpu: cpuResult,
    eventLoop: {
      meanMs: lagMs(loopDelay.mean),
      p99Ms: lagMs(loopDelay.percentile(99)),
      maxMs: lagMs(loopDelay.max),
    },
    gc: gcResult,
    verify: { enabled: verifyJobs.length > 0, checkedBlocks, mismatchCount, mismatches },
    errorMessages,
  };
}

/** Aggregate CPU ticks from the first line of /proc/stat (user nice system idle iowait irq softirq steal ...). */
async function machineCpu(): Promise<{ busyTicks: number; totalTicks: number; cores: number } | undefined> {
  if (process.platform !== 'linux') return undefined;
  try {
    const text = await readFile('/proc/stat', 'utf8');
    const f = (text.split('\n')[0] ?? '').trim().split(/\s+/).slice(1, 9).map(Number);
    if (f.length < 8 || f.some((x) => !Number.isFinite(x))) return undefined;
    const total = f.reduce((a, b) => a + b, 0);
    const idle = (f[3] as number) + (f[4] as number);
    const cores = text.split('\n').filter((l) => /^cpu\d+ /.test(l)).length;
    return { busyTicks: total - idle, totalTicks: total, cores };
  } catch {
    return undefined;
  }
}

/** GC pauses of this process while the run lasts (perf_hooks 'gc' entries; detail.kind tells major from minor). */
function watchGc(): { stop(): GcResult } {
  const r: GcResult = { count: 0, majorCount: 0, totalMs: 0, maxMs: 0 };
  const add = (e: PerformanceEntry): void => {
    r.count++;
    r.totalMs += e.duration;
    r.maxMs = Math.max(r.maxMs, e.duration);
    if (((e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ?? 0) === perfConstants.NODE_PERFORMANCE_GC_MAJOR) r.majorCount++;
  };
  const obs = new PerformanceObserver((list) => list.getEntries().forEach(add));
  obs.observe({ entryTypes: ['gc'] });
  return {
    stop: (): GcResult => {
      // Entries are delivered asynchronously; take what is buffered before disconnecting.
      obs.takeRecords().forEach(add);
      obs.disconnect();
      return { count: r.count, majorCount: r.majorCount, totalMs: Math.round(r.totalMs * 10) / 10, maxMs: Math.round(r.maxMs * 100) / 100 };
    },
  };
}

function countKnown(map: GenerationMap, lba: number, blocks: number): number {
  let n = 0;
  for (let i = 0; i < blocks; i++) if (map.get(lba + i) !== undefined) n++;
  return n;
}

const round2 = (x: number): number => Math.round(x * 100) / 100;
const lagMs = (ns: number): number => (Number.isFinite(ns) ? round2(Math.max(0, ns / 1e6 - LOOP_RESOLUTION_MS)) : 0);

function totals(c: Counters, h: Hists, durationMs: number): IoTotals {
  const ios = c.readIos + c.writeIos;
  const bytes = c.readBytes + c.writeBytes;
  return {
    ios,
    readIos: c.readIos,
    writeIos: c.writeIos,
    bytes,
    readBytes: c.readBytes,
    writeBytes: c.writeBytes,
    iops: Math.round((ios / durationMs) * 1000),
    mbps: round2((bytes / durationMs) * 1000 / 1e6),
    latencyUs: summarize(h.all),
    readLatencyUs: summarize(h.read),
    writeLatencyUs: summarize(h.write),
    errors: c.errors,
  };
}

function diffQueues(before: QueueCounter[], after: QueueCounter[]): QueueResult[] {
  const prev = new Map(before.map((q) => [q.queue, q]));
  const rows = after.map((q) => ({ queue: q.queue, commands: q.commands - (prev.get(q.queue)?.commands ?? 0), bytes: q.bytes - (prev.get(q.queue)?.bytes ?? 0) }));
  const all = rows.reduce((s, q) => s + q.commands, 0);
  return rows.map((q) => ({ ...q, share: all === 0 ? 0 : Math.round((q.commands / all) * 10000) / 10000 }));
}
