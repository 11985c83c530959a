// Workload engine types: the BlockTarget seam the engine drives, resolved job specs, and run results.

/** Who is submitting: one instance of a job (fio's numjobs clone), mapped by the target adapter to an hctx. */
export interface SubmitContext {
  /** Job name (section name of the job file). */
  job: string;
  /** Clone index within the job, 0..numjobs-1. */
  clone: number;
  /** Global submitter index across all running jobs, 0-based. */
  index: number;
  /** Submission context name handed to the initiator (job option `hctx`, default `<job>.<clone>`). */
  hctx: string;
}

/** Cumulative per-queue counters, as an adapter reads them from the initiator (io_queue_info analogue). */
export interface QueueCounter {
  /** Stable label, e.g. "c0q3" (controller 0, I/O queue 3). */
  queue: string;
  commands: number;
  bytes: number;
}

/**
 * One reusable I/O of the callback API (BlockTarget.submit): the engine keeps one per in-flight slot (fio's io_u) and
 * the target owns it from submit until ioDone. Structurally an initiator IoRequest, so an adapter can pass it on as is.
 */
export interface BlockIo {
  write: boolean;
  lba: number;
  blocks: number;
  /** Exactly blocks × blockSize bytes: read into, or written from. */
  buf: Buffer;
  ctx: SubmitContext;
  /** Called once: undefined on success, else the error. Must not throw. */
  ioDone(err: Error | undefined): void;
}

/** What the engine drives: a namespace seen as LBAs. Block counts, not bytes, like the NVMe command set. */
export interface BlockTarget {
  /** Logical block size in bytes (512 or 4096). */
  readonly blockSize: number;
  /** Namespace size in blocks. */
  readonly capacityBlocks: number;
  /**
   * Reads `blocks` blocks at `lba`; resolves with exactly blocks × blockSize bytes. With `into` (at least that long)
   * the data should land there: the engine passes one buffer per in-flight slot, as fio does per io_u, because a fresh
   * 4 KiB..128 KiB Buffer per read is off-heap memory whose churn makes V8 run full mark-compact collections.
   */
  read(lba: number, blocks: number, ctx: SubmitContext, into?: Buffer): Promise<Uint8Array>;
  /** Writes `data` (a whole number of blocks) at `lba`. */
  write(lba: number, data: Uint8Array, ctx: SubmitContext): Promise<void>;
  /**
   * Optional callback API: start `io` and call `io.ioDone` when it finishes, with no promise per I/O. The engine uses
   * it for jobs without rate limit or verify; a target without it is driven through read/write.
   */
  submit?(io: BlockIo): void;
  /**
   * Optional: a data buffer of `bytes` for one in-flight slot, allocated once per slot. An initiator with io workers
   * hands out shared memory its worker threads use in place (Controller.allocIoBuffer), so no copy crosses threads.
   */
  allocBuffer?(bytes: number): Buffer;
  /** Optional cumulative per-queue counters; the engine reports the difference over the whole run (ramp and verify passes included). */
  queueCounters?(): QueueCounter[];
}

export const RW_MODES = ['read', 'write', 'randread', 'randwrite', 'randrw', 'readwrite'] as const;
/** fio `rw=`: `readwrite` (alias `rw`) is sequential mixed; `randrw` random mixed; the mix is `rwmixread`. */
export type RwMode = (typeof RW_MODES)[number];

export interface BsSplitEntry {
  /** Bytes per I/O. */
  bs: number;
  /** Relative weight (percent in fio syntax; need not add to 100). */
  weight: number;
}

/** A job after defaults, size suffixes and the namespace geometry have been applied. */
export interface JobSpec {
  name: string;
  rw: RwMode;
  /** Percentage of reads in mixed modes (fio default 50). */
  rwmixread: number;
  /** Weighted block sizes; a single `bs` is one entry with weight 100. */
  bssplit: BsSplitEntry[];
  iodepth: number;
  numjobs: number;
  /** Region start (bytes, block aligned). */
  offset: number;
  /** Region length (bytes). */
  size: number;
  /** Bytes each clone transfers when not time based. */
  ioSize: number;
  /** Measured duration (ms) when time based; undefined: run until ioSize. */
  runtimeMs: number | undefined;
  /** Warm-up (ms) before measuring; I/O done during it is not counted. */
  rampMs: number;
  /** IOPS cap per clone (fio rate_iops); undefined: unlimited. */
  rateIops: number | undefined;
  verify: boolean;
  /** Submission context name (numjobs clones get `.N` appended when there is more than one). */
  hctx: string | undefined;
  seed: number;
  /** Start only after every earlier job finished (fio stonewall / wait_for_previous). */
  stonewall: boolean;
}

/** Latency summary in microseconds. */
export interface LatencySummary {
  count: number;
  min: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  p99_9: number;
  max: number;
}

export interface IoTotals {
  ios: number;
  readIos: number;
  writeIos: number;
  bytes: number;
  readBytes: number;
  writeBytes: number;
  /** Completed I/Os per second over the measured window. */
  iops: number;
  /** 10^6 bytes per second over the measured window. */
  mbps: number;
  /** The same two rates for reads and for writes alone (fio's separate read and write sections of a mixed job). */
  readIops: number;
  writeIops: number;
  readMbps: number;
  writeMbps: number;
  latencyUs: LatencySummary;
  readLatencyUs: LatencySummary;
  writeLatencyUs: LatencySummary;
  errors: number;
}

export interface JobResult extends IoTotals {
  name: string;
  rw: RwMode;
  numjobs: number;
  iodepth: number;
  bs: string;
  /** Started only after every earlier job finished (fio stonewall): its rates do not add to the earlier jobs'. */
  stonewall: boolean;
  /** Measured window of this job (ms, ramp excluded). */
  durationMs: number;
  /** Per clone: ios and IOPS, to show how evenly the submitters ran. */
  clones: { clone: number; hctx: string; ios: number; iops: number }[];
}

export interface QueueResult {
  queue: string;
  commands: number;
  bytes: number;
  /** Share of all commands (0..1). */
  share: number;
}

export interface TimePoint {
  /** Milliseconds since the start of the run (ramp included). */
  tMs: number;
  iops: number;
  mbps: number;
  /** True while any job was still ramping. */
  ramp: boolean;
}

export interface VerifyMismatch {
  lba: number;
  job: string;
  reason: 'magic' | 'crc' | 'lba' | 'generation';
  /** Generation expected (last written) when known. */
  expectedGeneration?: number;
  gotGeneration?: number;
  gotLba?: number;
}

export interface VerifyResult {
  enabled: boolean;
  /** Reads whose data was checked (during the run and in the verify pass): the I/Os verified. */
  checkedReads: number;
  /** Logical blocks checked (the namespace's LBA size each), and those bytes. */
  checkedBlocks: number;
  checkedBytes: number;
  mismatchCount: number;
  /** First mismatches (at most 64). */
  mismatches: VerifyMismatch[];
}

export interface BusiestThread {
  tid: number;
  name: string;
  /** CPU over the run, in percent of one core. */
  percentOfCore: number;
}

export interface CpuResult {
  /** CPU time of this process over the run (ms). */
  userMs: number;
  systemMs: number;
  /** (user + system) / wall, in percent of one core. */
  percentOfCore: number;
  /** What this process contains: "initiator" or "initiator+target (same process)". */
  label: string;
  /** This process's busiest thread over the run (Linux: /proc/self/task), e.g. the event loop or one io worker. */
  busiestThread?: BusiestThread;
  /** CPUs this process was allowed on at the end of the run (Cpus_allowed_list). */
  allowedCpus?: number;
  /** Target CPU when it runs in another process and the scenario can read it (e.g. /proc/PID/stat). */
  target?: { userMs: number; systemMs: number; percentOfCore: number; source: string; busiestThread?: BusiestThread; allowedCpus?: number };
  /**
   * Whole machine over the run (/proc/stat, Linux only): busy time of all CPUs in percent of one core, and what is
   * left after this process and the target: other processes, plus softirq work the kernel does outside either
   * process. A high `otherPercentOfCore` means the run competed with other work for the CPUs.
   */
  machine?: { cores: number; busyPercentOfCore: number; otherPercentOfCore: number };
}

export interface GcResult {
  /** Garbage collections in this process over the run (perf_hooks 'gc' entries). */
  count: number;
  /** Of those, full mark-compact collections. */
  majorCount: number;
  /** Total and longest pause (ms). Every I/O in flight during a pause waits for it. */
  totalMs: number;
  maxMs: number;
}

export interface EventLoopResult {
  /** Event-loop lag over the run (perf_hooks monitorEventLoopDelay at 10 ms resolution, minus those 10 ms), milliseconds. */
  meanMs: number;
  p99Ms: number;
  maxMs: number;
}

export interface RunResult {
  /** Wall time of the measured window (ms, ramp excluded; the longest job). */
  durationMs: number;
  /** Wall time including ramp and verify passes. */
  wallMs: number;
  totals: IoTotals;
  jobs: JobResult[];
  queues: QueueResult[];
  timeSeries: { intervalMs: number; points: TimePoint[] };
  /** Latency CDF points over all measured I/O: [latencyUs, fraction 0..1]. */
  latencyCdf: [number, number][];
  cpu: CpuResult;
  eventLoop: EventLoopResult;
  /** This process's GC pauses over the run. */
  gc?: GcResult;
  verify: VerifyResult;
  /** First I/O error messages (at most 16). */
  errorMessages: string[];
}

export interface ProgressInfo {
  elapsedMs: number;
  /** Planned total (ms) when known (time based jobs). */
  totalMs: number | undefined;
  /** IOPS over the last interval. */
  iops: number;
  mbps: number;
}
