// Command statistics a subsystem keeps: fixed-bucket latency histograms and per-opcode counts.

/**
 * Command latency bucket bounds (µs), log-spaced 10 µs .. 100 ms, plus a final +Inf bucket. Fixed, so a
 * histogram is a preallocated array and recording a command allocates nothing.
 */
export const LATENCY_BOUNDS_US: readonly number[] = [10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000];

/** Capsule-receipt-to-completion latency of one opcode in one subsystem. */
export class LatencyHistogram {
  /** counts[i]: commands with latency in (bounds[i-1], bounds[i]] µs; the last entry is the +Inf bucket. */
  readonly counts: number[] = new Array<number>(LATENCY_BOUNDS_US.length + 1).fill(0);
  sumUs = 0;
  count = 0;

  record(us: number): void {
    const b = LATENCY_BOUNDS_US;
    let i = 0;
    while (i < b.length && us > (b[i] as number)) i++;
    this.counts[i] = (this.counts[i] as number) + 1;
    this.sumUs += us;
    this.count++;
  }
}

/** One opcode's parsed-command count and completion latency. */
export class OpcodeStat {
  count = 0;
  readonly lat = new LatencyHistogram();
}

/** Per-opcode counters for one subsystem (stats()). */
export type OpcodeCounters = Record<string, number>;
