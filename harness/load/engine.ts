// The fio-like workload engine: runs resolved jobs against a BlockTarget and measures IOPS, bandwidth, latency
// histograms, per-job/per-queue distribution, CPU and event-loop lag; optionally verifies every block it reads.
import { readFile } from 'node:fs/promises';
import { constants as perfConstants, monitorEventLoopDelay, performance, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import type { Histogram } from 'hdr-histogram-js';
import { formatBs } from './job-file.js';
import { LatencyRecorder, cdfPoints, newHistogram, summarize } from './stats.js';
import type {
  BlockIo,
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
import { busiestThread, sampleThreads, type ThreadSample } from './threads.js';
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
  /** The target's pid when it runs in another process on this host: its threads are sampled for the bound verdict. */
  targetPid?: number;
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
  /** Where the I/Os record their latencies; folded into hists.read / hists.write after the run. */
  latency: { read: LatencyRecorder; write: LatencyRecorder };
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
  return new WorkloadRun(target, jobs, opts).run();
}

/** Splits jobs at stonewall into groups that run one after another. */
function stonewallGroups(jobs: JobSpec[]): JobSpec[][] {
  const groups: JobSpec[][] = [];
  for (const j of jobs) {
    if (groups.length === 0 || j.stonewall) groups.push([]);
    (groups[groups.length - 1] as JobSpec[]).push(j);
  }
  return groups;
}

/** One runJobs call: the run-wide measurements, the verify bookkeeping and the group sequencing. */
class WorkloadRun {
  readonly bsz: number;
  readonly groups: JobSpec[][];
  /** Planned duration when every job is time based (for progress and the default interval). */
  readonly plannedMs: number | undefined;
  readonly intervalMs: number;
  readonly verifyJobs: JobSpec[];
  /** Expected generation per block, shared by every verify job; undefined when no job verifies. */
  readonly genMap: GenerationMap | undefined;
  readonly total = newHists();
  readonly totalCounters = newCounters();
  readonly states: JobState[] = [];
  readonly errorMessages: string[] = [];
  readonly mismatches: VerifyMismatch[] = [];
  mismatchCount = 0;
  checkedBlocks = 0;
  /** Reads whose data was checked (at least one block of it): the I/Os verified. */
  checkedReads = 0;
  generation = 0;
  submitterIndex = 0;
  measuredMs = 0;
  /** Block ranges of in-flight verify I/Os, and the slots waiting for one of them to finish. */
  readonly inflight = new Set<Inflight>();
  private waiters: (() => void)[] = [];
  // Time series: completions counted per interval, ramp included (flagged), as fio's bandwidth logs do.
  runStart = 0;
  tickIos = 0;
  tickBytes = 0;
  private lastTick = 0;
  private readonly points: TimePoint[] = [];
  private currentGroup: JobState[] = [];

  constructor(
    readonly target: BlockTarget,
    jobs: JobSpec[],
    readonly opts: EngineOptions,
  ) {
    this.bsz = target.blockSize;
    this.groups = stonewallGroups(jobs);
    this.plannedMs = this.groups.every((g) => g.every((j) => j.runtimeMs !== undefined))
      ? this.groups.reduce((s, g) => s + Math.max(...g.map((j) => j.rampMs + (j.runtimeMs ?? 0))), 0)
      : undefined;
    this.intervalMs = opts.intervalMs ?? (this.plannedMs === undefined ? 250 : Math.min(1000, Math.max(100, Math.round(this.plannedMs / 60))));
    this.verifyJobs = jobs.filter((j) => j.verify);
    if (this.verifyJobs.length > 0) {
      const lo = Math.min(...this.verifyJobs.map((j) => j.offset / this.bsz));
      const hi = Math.max(...this.verifyJobs.map((j) => (j.offset + j.size) / this.bsz));
      this.genMap = new GenerationMap(lo, hi - lo);
    }
  }

  async run(): Promise<RunResult> {
    this.runStart = performance.now();
    this.lastTick = this.runStart;
    const ticker = setInterval(() => this.tick(), this.intervalMs);
    const queueBefore = this.target.queueCounters?.() ?? [];
    const targetCpuBefore = await this.opts.targetCpu?.();
    const threadsBefore = await sampleThreads();
    const targetThreadsBefore = this.opts.targetPid === undefined ? undefined : await sampleThreads(this.opts.targetPid);
    const machineBefore = await machineCpu();
    const cpuBefore = process.cpuUsage();
    const gc = watchGc();
    const loopDelay = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
    loopDelay.enable();
    try {
      for (const group of this.groups) await this.runGroup(group);
    } finally {
      clearInterval(ticker);
      loopDelay.disable();
    }
    const wallMs = performance.now() - this.runStart;
    const cpu = process.cpuUsage(cpuBefore);
    const gcResult = gc.stop();
    const machineAfter = await machineCpu();
    const targetCpuAfter = await this.opts.targetCpu?.();
    const threadsAfter = await sampleThreads();
    const targetThreadsAfter = this.opts.targetPid === undefined ? undefined : await sampleThreads(this.opts.targetPid);
    const durationMs = Math.max(this.measuredMs, 0.001);
    this.foldHistograms();
    return {
      durationMs: Math.round(durationMs * 10) / 10,
      wallMs: Math.round(wallMs * 10) / 10,
      totals: totals(this.totalCounters, this.total, durationMs),
      jobs: this.states.map(jobResult),
      queues: diffQueues(queueBefore, this.target.queueCounters?.() ?? []),
      timeSeries: { intervalMs: this.intervalMs, points: this.points },
      latencyCdf: cdfPoints(this.total.all),
      cpu: cpuResult(
        cpu,
        wallMs,
        this.opts,
        { before: targetCpuBefore, after: targetCpuAfter },
        { before: machineBefore, after: machineAfter },
        { before: threadsBefore, after: threadsAfter },
        { before: targetThreadsBefore, after: targetThreadsAfter },
      ),
      eventLoop: {
        meanMs: lagMs(loopDelay.mean),
        p99Ms: lagMs(loopDelay.percentile(99)),
        maxMs: lagMs(loopDelay.max),
      },
      gc: gcResult,
      verify: { enabled: this.verifyJobs.length > 0, checkedReads: this.checkedReads, checkedBlocks: this.checkedBlocks, checkedBytes: this.checkedBlocks * this.bsz, mismatchCount: this.mismatchCount, mismatches: this.mismatches },
      errorMessages: this.errorMessages,
    };
  }

  private tick(): void {
    const now = performance.now();
    const dt = (now - this.lastTick) / 1000;
    const ramp = this.currentGroup.some((s) => now < s.measureFrom);
    const p: TimePoint = { tMs: Math.round(now - this.runStart), iops: Math.round(this.tickIos / dt), mbps: Math.round((this.tickBytes / dt / 1e6) * 100) / 100, ramp };
    this.points.push(p);
    this.tickIos = 0;
    this.tickBytes = 0;
    this.lastTick = now;
    this.opts.onProgress?.({ elapsedMs: now - this.runStart, totalMs: this.plannedMs, iops: p.iops, mbps: p.mbps });
  }

  private async runGroup(group: JobSpec[]): Promise<void> {
    const groupStart = performance.now();
    const groupStates = group.map((spec): JobState => {
      const clones = Array.from({ length: spec.numjobs }, (_, c) => ({
        clone: c,
        hctx: spec.hctx === undefined ? `${spec.name}.${c}` : spec.numjobs > 1 ? `${spec.hctx}.${c}` : spec.hctx,
        ios: 0,
      }));
      const hists = newHists();
      const latency = { read: new LatencyRecorder(hists.read), write: new LatencyRecorder(hists.write) };
      return { spec, hists, latency, counters: newCounters(), clones, startedAt: groupStart, measureFrom: groupStart + spec.rampMs, endedAt: groupStart + spec.rampMs, stop: false };
    });
    this.states.push(...groupStates);
    this.currentGroup = groupStates;
    await Promise.all(
      groupStates.map(async (st) => {
        const ctxs = st.clones.map((c): SubmitContext => ({ job: st.spec.name, clone: c.clone, index: this.submitterIndex++, hctx: c.hctx }));
        await Promise.all(ctxs.map((ctx, i) => new CloneRun(this, st, i, ctx).run()));
        st.endedAt = Math.max(st.endedAt, performance.now());
        if (st.spec.verify) await this.verifyPass(st, ctxs[0] as SubmitContext);
      }),
    );
    const measuredFrom = Math.min(...groupStates.map((s) => s.measureFrom));
    const endedAt = Math.max(...groupStates.map((s) => s.endedAt));
    this.measuredMs += Math.max(0, endedAt - measuredFrom);
  }

  /** Reads back everything a verify job wrote (fio's verify phase); not part of the measured window. */
  private async verifyPass(st: JobState, ctx: SubmitContext): Promise<void> {
    const j = st.spec;
    const bsz = this.bsz;
    if (this.genMap === undefined || j.rwmixread >= 100) return;
    const map = this.genMap;
    const lo = j.offset / bsz;
    const hi = (j.offset + j.size) / bsz;
    const maxBlocks = Math.max(1, Math.floor(Math.max(...j.bssplit.map((e) => e.bs)) / bsz));
    const extents = [...map.extents(maxBlocks)].filter(([l, n]) => l < hi && l + n > lo);
    let next = 0;
    const worker = async (): Promise<void> => {
      const slotBuf = this.target.allocBuffer?.(maxBlocks * bsz) ?? Buffer.allocUnsafeSlow(maxBlocks * bsz);
      while (next < extents.length && this.opts.signal?.aborted !== true) {
        const [l0, n0] = extents[next++] as [number, number];
        const l = Math.max(l0, lo);
        const n = Math.min(l0 + n0, hi) - l;
        try {
          const data = await this.target.read(l, n, ctx, slotBuf.subarray(0, n * bsz));
          this.checkedBlocks += n;
          this.checkedReads++;
          this.recordMismatches(checkBlocks(data, l, bsz, j.name, (x) => map.get(x)));
        } catch (e) {
          this.recordError(st, `${j.name}: verify read lba ${l} +${n}: ${(e as Error).message}`);
          return;
        }
      }
    };
    await Promise.all(Array.from({ length: j.iodepth }, () => worker()));
  }

  /**
   * The slots' clock: one reading per batch of completions (all those delivered in one task, e.g. one socket
   * read), set by refreshClock and reset by a microtask after that task, the way blk-mq caches the time per plug;
   * −1: not read in this task yet. Reading the clock per I/O cost ~5 % of the host's CPU (docs/performance.md, "Host
   * path, fourth pass"). A later completion of the batch gets the batch's first reading, as does the I/O it starts,
   * so both ends of each latency are taken alike (within one batch's handling time, a few µs per I/O). Read from
   * this field, not passed around: a double passed to or returned from a call that is not inlined is boxed anew.
   */
  batchTime = -1;
  private readonly endBatch = (): void => {
    this.batchTime = -1;
  };

  refreshClock(): void {
    if (this.batchTime < 0) {
      this.batchTime = performance.now();
      queueMicrotask(this.endBatch);
    }
  }

  recordMismatches(found: VerifyMismatch[]): void {
    this.mismatchCount += found.length;
    for (const m of found) if (this.mismatches.length < MAX_MISMATCHES) this.mismatches.push(m);
  }

  /** Each job's "all" = its read + write histograms; the run's read, write and all = the sums over jobs. */
  foldHistograms(): void {
    for (const h of [this.total.all, this.total.read, this.total.write]) h.reset();
    for (const st of this.states) {
      st.latency.read.flush();
      st.latency.write.flush();
      st.hists.all.reset();
      st.hists.all.add(st.hists.read);
      st.hists.all.add(st.hists.write);
      this.total.read.add(st.hists.read);
      this.total.write.add(st.hists.write);
      this.total.all.add(st.hists.all);
    }
  }

  recordError(st: JobState, message: string): void {
    st.counters.errors++;
    this.totalCounters.errors++;
    if (this.errorMessages.length < MAX_ERROR_MESSAGES) this.errorMessages.push(message);
  }

  /**
   * Counts a slot's I/O, completed at batchTime, in the time series and, past the job's ramp, in its and the run's
   * totals.
   */
  recordSlot(st: JobState, cloneStats: { ios: number }, slot: IoSlot): void {
    const t1 = this.batchTime;
    this.tickIos++;
    this.tickBytes += slot.bs;
    if (t1 < st.measureFrom) return;
    st.endedAt = t1;
    // Whole nanoseconds: an integer below 2^30 is passed on unboxed.
    this.countIo(st, cloneStats, !slot.write, slot.bs, Math.round((t1 - slot.t0) * 1e6));
  }

  private countIo(st: JobState, cloneStats: { ios: number }, isRead: boolean, bs: number, latencyNs: number): void {
    // One histogram record per I/O: the job's read or write histogram. The job's "all" and the run's totals are sums
    // of those, folded once after the run (foldHistograms); four records per I/O were ~10 % of the host's CPU.
    (isRead ? st.latency.read : st.latency.write).record(latencyNs);
    count(st.counters, isRead, bs);
    count(this.totalCounters, isRead, bs);
    cloneStats.ios++;
  }

  overlaps(lba: number, blocks: number): boolean {
    for (const r of this.inflight) if (lba < r.lba + r.blocks && r.lba < lba + blocks) return true;
    return false;
  }

  /** Calls `start` once some in-flight verify range is released (it checks again: another slot may claim it first). */
  waitRange(start: () => void): void {
    this.waiters.push(start);
  }

  releaseRange(range: Inflight): void {
    this.inflight.delete(range);
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
}

function count(c: Counters, isRead: boolean, bs: number): void {
  if (isRead) {
    c.readIos++;
    c.readBytes += bs;
  } else {
    c.writeIos++;
    c.writeBytes += bs;
  }
}

/**
 * One in-flight slot (fio's io_u), the one way the engine issues I/O: its request object, data buffer and a view per
 * block size are made once, so an I/O allocates nothing. Doubles as its own verify range (lba, blocks).
 */
class IoSlot implements BlockIo, Inflight {
  write = false;
  lba = 0;
  blocks = 0;
  buf: Buffer;
  t0 = 0;
  bs = 0;
  /** The generation a verify write stamped into buf. */
  gen = 0;
  /** Views of this slot's buffer, one per bssplit entry: where reads land and verify writes are stamped. */
  readonly views: Buffer[];
  /** Starts the I/O picked for this slot after a rate-limit or overlap wait: one closure per slot, not per wait. */
  readonly start = (): void => this.owner.start(this);

  constructor(
    private readonly owner: CloneRun,
    readonly ctx: SubmitContext,
    bssplit: readonly { bs: number }[],
    maxBs: number,
    alloc: ((bytes: number) => Buffer) | undefined,
  ) {
    const slotBuf = alloc?.(maxBs) ?? Buffer.allocUnsafeSlow(maxBs);
    this.views = bssplit.map((e) => slotBuf.subarray(0, e.bs));
    this.buf = this.views[0] as Buffer;
  }

  ioDone(err: Error | undefined): void {
    this.owner.slotDone(this, err);
  }
}

/** One clone (fio numjobs copy) of a job: its offset/size generators, rate limit and iodepth submitters. */
class CloneRun {
  private readonly j: JobSpec;
  private readonly rand: () => number;
  private readonly regionEnd: number;
  private readonly weightSum: number;
  private readonly maxBs: number;
  /** The target's slot-buffer allocator (shared memory for io workers), if it has one. */
  private readonly alloc: ((bytes: number) => Buffer) | undefined;
  private readonly random: boolean;
  private readonly writesToo: boolean;
  private readonly measureEnd: number;
  private readonly slotMs: number;
  private readonly cloneStats: { ios: number };
  private cursor: number;
  private issuedBytes = 0;
  private nextSlot = performance.now();
  // Single-bs random jobs walk a permutation of the region (every slot once per pass), like fio's random map;
  // with bssplit the offsets are independent draws (fio's norandommap).
  private readonly slots: number;
  private pass = 0;
  private perm: ((i: number) => number) | undefined;
  private drawn = 0;

  constructor(
    private readonly workload: WorkloadRun,
    private readonly st: JobState,
    private readonly clone: number,
    private readonly ctx: SubmitContext,
  ) {
    const j = st.spec;
    this.j = j;
    this.rand = rng(j.seed * 7919 + clone * 104_729 + 1);
    this.regionEnd = j.offset + j.size;
    this.weightSum = j.bssplit.reduce((s, e) => s + e.weight, 0);
    this.maxBs = Math.max(...j.bssplit.map((e) => e.bs));
    const t = workload.target;
    this.alloc = t.allocBuffer === undefined ? undefined : (n) => (t.allocBuffer as (b: number) => Buffer)(n);
    this.random = j.rw === 'randread' || j.rw === 'randwrite' || j.rw === 'randrw';
    this.writesToo = j.rwmixread < 100;
    this.cursor = j.offset;
    this.measureEnd = j.runtimeMs === undefined ? Infinity : st.measureFrom + j.runtimeMs;
    this.slotMs = j.rateIops === undefined ? 0 : 1000 / j.rateIops;
    this.cloneStats = st.clones[clone] as { ios: number };
    this.slots = Math.floor(j.size / this.maxBs);
    this.perm = j.bssplit.length === 1 && this.slots <= 0xffff_ffff ? permutation(this.slots, j.seed * 31 + clone) : undefined;
  }

  /**
   * iodepth slots, each issuing its next I/O from the completion of the last (fio's io_u loop). Rate-limited and
   * verify jobs take the same path: pacing is a timer before the submit, overlap a wait for a range to be released.
   */
  run(): Promise<void> {
    const j = this.j;
    if (this.writesToo && !j.verify) {
      // Plain writes share one pattern buffer; verify writes are stamped in their own slot's buffer.
      const scratch = Buffer.alloc(this.maxBs, 0xa5);
      this.writeViews = j.bssplit.map((e) => scratch.subarray(0, e.bs));
    }
    const slots = Array.from({ length: j.iodepth }, () => new IoSlot(this, this.ctx, j.bssplit, this.maxBs, this.alloc));
    return new Promise<void>((resolve) => {
      this.finished = resolve;
      this.active = slots.length;
      this.workload.refreshClock();
      for (const s of slots) this.issue(s);
    });
  }

  private active = 0;
  private finished: (() => void) | undefined;
  private writeViews: Buffer[] = [];

  /**
   * Pick the slot's next I/O and start it, or retire the slot when the job is over. Its start time is the workload's
   * batchTime, the completion time of the slot's last I/O: one reading serves as both that I/O's end and the next
   * one's start.
   */
  private issue(slot: IoSlot): void {
    const run = this.workload;
    if (this.ended() || run.batchTime >= this.measureEnd) {
      this.retire();
      return;
    }
    const j = this.j;
    const k = this.pickBsIndex();
    const bs = (j.bssplit[k] as { bs: number }).bs;
    const off = this.pickOffset(bs);
    this.issuedBytes += bs;
    const isRead = j.rwmixread >= 100 || (j.rwmixread > 0 && this.rand() * 100 < j.rwmixread);
    slot.write = !isRead;
    slot.lba = off / run.bsz;
    slot.blocks = bs / run.bsz;
    slot.bs = bs;
    slot.buf = (isRead || j.verify ? slot.views[k] : this.writeViews[k]) as Buffer;
    if (this.slotMs > 0) {
      const wait = this.paceRate();
      if (wait >= 1) {
        setTimeout(slot.start, wait);
        return;
      }
    }
    this.start(slot);
  }

  /** Submit the slot's I/O; in a run that verifies, once it holds its blocks (and a verify write is stamped). */
  start(slot: IoSlot): void {
    const run = this.workload;
    // After a timer this is a new task with no clock reading yet.
    run.refreshClock();
    if (run.genMap !== undefined && !this.claim(slot)) return;
    slot.t0 = run.batchTime;
    try {
      const t = run.target;
      if (t.submit !== undefined) t.submit(slot);
      else submitByPromise(t, slot);
    } catch (e) {
      this.slotDone(slot, e instanceof Error ? e : new Error(String(e)));
    }
  }

  slotDone(slot: IoSlot, err: Error | undefined): void {
    const run = this.workload;
    if (run.genMap !== undefined) this.settleVerify(run.genMap, slot, err);
    if (err !== undefined) {
      run.recordError(this.st, `${this.j.name}: ${slot.write ? 'write' : 'read'} lba ${slot.lba} +${slot.blocks}: ${err.message}`);
      // fio's default (continue_on_error=none): the job stops at its first I/O error.
      this.st.stop = true;
      this.retire();
      return;
    }
    run.refreshClock();
    run.recordSlot(this.st, this.cloneStats, slot);
    this.issue(slot);
  }

  private retire(): void {
    if (--this.active === 0) this.finished?.();
  }

  private pickBsIndex(): number {
    const bssplit = this.j.bssplit;
    if (bssplit.length === 1) return 0;
    let r = this.rand() * this.weightSum;
    for (let i = 0; i < bssplit.length; i++) {
      r -= (bssplit[i] as { weight: number }).weight;
      if (r < 0) return i;
    }
    return bssplit.length - 1;
  }

  private pickOffset(bs: number): number {
    const j = this.j;
    if (this.random) {
      if (this.perm === undefined) return j.offset + Math.floor(this.rand() * Math.floor(j.size / bs)) * bs;
      if (this.drawn === this.slots) {
        this.drawn = 0;
        this.perm = permutation(this.slots, j.seed * 31 + this.clone + ++this.pass * 1_000_003);
      }
      return j.offset + this.perm(this.drawn++) * bs;
    }
    if (this.cursor + bs > this.regionEnd) this.cursor = j.offset;
    const o = this.cursor;
    this.cursor += bs;
    return o;
  }

  /** Over for a reason other than time: stopped, aborted, or io_size issued (a size-based job). */
  private ended(): boolean {
    if (this.st.stop || this.workload.opts.signal?.aborted === true) return true;
    return this.j.runtimeMs === undefined && this.issuedBytes >= this.j.ioSize;
  }

  /** fio rate_iops: takes this clone's next submission slot; returns how many ms until it (0: now). */
  private paceRate(): number {
    const now = performance.now();
    const at = Math.max(now, this.nextSlot);
    this.nextSlot = at + this.slotMs;
    return at - now;
  }

  /**
   * Two I/Os on one block at once would make the expected generation ambiguous (fio: serialize_overlap): a random job
   * picks another offset a few times, then the slot waits for a range to be released. A verify write is stamped with
   * its generation once it holds its blocks.
   */
  private claim(slot: IoSlot): boolean {
    const run = this.workload;
    for (let tries = 0; run.overlaps(slot.lba, slot.blocks) && this.random && tries < 8; tries++) slot.lba = this.pickOffset(slot.bs) / run.bsz;
    if (run.overlaps(slot.lba, slot.blocks)) {
      run.waitRange(slot.start);
      return false;
    }
    run.inflight.add(slot);
    if (slot.write && this.j.verify) {
      slot.gen = ++run.generation;
      stampBlocks(slot.buf, slot.lba, run.bsz, slot.gen);
    }
    return true;
  }

  /** A verify run's completion: a verify write's generation becomes expected, a read is checked, the range released. */
  private settleVerify(map: GenerationMap, slot: IoSlot, err: Error | undefined): void {
    if (err === undefined && this.j.verify) {
      if (slot.write) map.set(slot.lba, slot.blocks, slot.gen);
      else this.checkRead(map, slot.buf, slot.lba, slot.blocks);
    }
    this.workload.releaseRange(slot);
  }

  /** A job that also writes checks only blocks it has written; a read-only job checks everything it reads. */
  private checkRead(map: GenerationMap, data: Uint8Array, lba: number, blocks: number): void {
    const run = this.workload;
    const found = checkBlocks(data, lba, run.bsz, this.j.name, (l) => map.get(l)).filter((m) => !this.writesToo || map.get(m.lba) !== undefined);
    const checked = this.writesToo ? countKnown(map, lba, blocks) : blocks;
    run.checkedBlocks += checked;
    if (checked > 0) run.checkedReads++;
    run.recordMismatches(found);
  }
}

/**
 * The slot API over a target's read/write, for a target without submit (a multipath head, test doubles): a read's data
 * is copied into the slot's buffer when the target returned it elsewhere.
 */
function submitByPromise(t: BlockTarget, io: IoSlot): void {
  const done = io.write ? t.write(io.lba, io.buf, io.ctx) : t.read(io.lba, io.blocks, io.ctx, io.buf).then((d) => landIn(io.buf, d));
  done.then(
    () => io.ioDone(undefined),
    (e: unknown) => io.ioDone(e instanceof Error ? e : new Error(String(e))),
  );
}

function landIn(buf: Buffer, d: Uint8Array): void {
  if (d.buffer !== buf.buffer || d.byteOffset !== buf.byteOffset) buf.set(d.subarray(0, buf.length));
}

function jobResult(st: JobState): JobResult {
  const d = Math.max(st.endedAt - st.measureFrom, 0.001);
  return {
    name: st.spec.name,
    rw: st.spec.rw,
    numjobs: st.spec.numjobs,
    iodepth: st.spec.iodepth,
    bs: formatBs(st.spec.bssplit),
    stonewall: st.spec.stonewall,
    durationMs: Math.round(d * 10) / 10,
    ...totals(st.counters, st.hists, d),
    clones: st.clones.map((c) => ({ clone: c.clone, hctx: c.hctx, ios: c.ios, iops: Math.round((c.ios / d) * 1000) })),
  };
}

interface Span<T> {
  before: T | undefined;
  after: T | undefined;
}

/** This process's CPU over the run, plus the target's (when sampled) and what the rest of the machine used. */
function cpuResult(
  cpu: NodeJS.CpuUsage,
  wallMs: number,
  opts: EngineOptions,
  targetCpu: Span<CpuSample>,
  machine: Span<MachineCpu>,
  threads: Span<ThreadSample>,
  targetThreads: Span<ThreadSample>,
): CpuResult {
  const r: CpuResult = {
    userMs: Math.round(cpu.user / 1000),
    systemMs: Math.round(cpu.system / 1000),
    percentOfCore: Math.round(((cpu.user + cpu.system) / 1000 / wallMs) * 1000) / 10,
    label: opts.cpuLabel ?? 'initiator',
  };
  if (threads.before !== undefined && threads.after !== undefined) {
    const b = busiestThread(threads.before, threads.after, wallMs);
    if (b !== undefined) r.busiestThread = b;
    if (threads.after.allowedCpus !== undefined) r.allowedCpus = threads.after.allowedCpus;
  }
  if (targetCpu.before !== undefined && targetCpu.after !== undefined) {
    const u = targetCpu.after.userMs - targetCpu.before.userMs;
    const s = targetCpu.after.systemMs - targetCpu.before.systemMs;
    r.target = { userMs: Math.round(u), systemMs: Math.round(s), percentOfCore: Math.round(((u + s) / wallMs) * 1000) / 10, source: opts.targetCpuSource ?? 'external' };
    if (targetThreads.before !== undefined && targetThreads.after !== undefined) {
      const b = busiestThread(targetThreads.before, targetThreads.after, wallMs);
      if (b !== undefined) r.target.busiestThread = b;
      if (targetThreads.after.allowedCpus !== undefined) r.target.allowedCpus = targetThreads.after.allowedCpus;
    }
  }
  const { before, after } = machine;
  if (before !== undefined && after !== undefined && after.totalTicks > before.totalTicks) {
    const cores = after.cores;
    const busyPct = ((after.busyTicks - before.busyTicks) / (after.totalTicks - before.totalTicks)) * cores * 100;
    const ours = r.percentOfCore + (r.target?.percentOfCore ?? 0);
    r.machine = { cores, busyPercentOfCore: Math.round(busyPct * 10) / 10, otherPercentOfCore: Math.round(Math.max(0, busyPct - ours) * 10) / 10 };
  }
  return r;
}

interface MachineCpu {
  busyTicks: number;
  totalTicks: number;
  cores: number;
}

/** Aggregate CPU ticks from the first line of /proc/stat (user nice system idle iowait irq softirq steal ...). */
async function machineCpu(): Promise<MachineCpu | undefined> {
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
      // Both to 0.01 ms: rounding the total coarser than the longest pause could report a pause longer than the sum.
      return { count: r.count, majorCount: r.majorCount, totalMs: Math.round(r.totalMs * 100) / 100, maxMs: Math.round(r.maxMs * 100) / 100 };
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
    readIops: Math.round((c.readIos / durationMs) * 1000),
    writeIops: Math.round((c.writeIos / durationMs) * 1000),
    readMbps: round2((c.readBytes / durationMs) * 1000 / 1e6),
    writeMbps: round2((c.writeBytes / durationMs) * 1000 / 1e6),
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
