// Latency histograms (hdr-histogram-js, nanoseconds in, microseconds out) and the summaries reports show.
import * as hdr from 'hdr-histogram-js';
import type { Histogram } from 'hdr-histogram-js';
import type { LatencySummary } from './types.js';

/** 3 significant digits up to 60 s; values above are clamped (an I/O that slow has already failed its timeout). */
const HIGHEST_NS = 60_000_000_000;

export function newHistogram(): Histogram {
  return hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: HIGHEST_NS, numberOfSignificantValueDigits: 3 });
}

export function recordNs(h: Histogram, ns: number): void {
  h.recordValue(Math.min(HIGHEST_NS, Math.max(1, Math.round(ns))));
}

/** HDR layout at 3 significant digits: values below 2048 exact, then 1024 sub-buckets per power of two. */
const SUB_HALF_MAG = 10;
/** Values below 2^31 ns (2.1 s) are indexed with Math.clz32; slower ones go to the histogram directly. */
const FAST_LIMIT = 2 ** 31;
const FAST_SLOTS = ((31 - 1 - SUB_HALF_MAG) << SUB_HALF_MAG) + 2 * (1 << SUB_HALF_MAG);

/** Counts index of a value in [1, FAST_LIMIT): HDR's bucket and sub-bucket, computed with integer operations. */
function slotOf(v: number): number {
  // floor(log2 v) − 10: how far v is shifted to land in the top half of the sub-buckets (≤ 0: exact).
  const e = 21 - Math.clz32(v);
  return e <= 0 ? v : (e << SUB_HALF_MAG) + (v >>> e);
}

/** Lowest value of a counts index (the inverse of slotOf). */
function slotValue(idx: number): number {
  if (idx < 2 << SUB_HALF_MAG) return idx;
  const e = (idx >> SUB_HALF_MAG) - 1;
  return (idx - (e << SUB_HALF_MAG)) * 2 ** e;
}

/**
 * recordNs for the per-I/O path: one index computation and one counter increment, folded into `into` later
 * (flush). hdr-histogram-js's recordValue (floating-point log2 and divisions, several calls) was ~5 % of the host's
 * CPU per I/O (docs/performance.md, "Host path, fourth pass"). The indexing is HDR's own at 3 significant digits
 * (newHistogram), and flush records each bucket's count at a value inside it (the exact minimum and maximum in
 * theirs), so the histogram ends up with the same counts, total, minimum and maximum as if each value had been
 * recorded in it.
 */
export class LatencyRecorder {
  readonly #counts = new Float64Array(FAST_SLOTS);
  #min = FAST_LIMIT;
  #max = 0;
  #n = 0;

  constructor(readonly into: Histogram) {}

  record(ns: number): void {
    let v = Math.round(ns);
    if (v < 1) v = 1;
    if (v >= FAST_LIMIT) {
      recordNs(this.into, v);
      return;
    }
    const i = slotOf(v);
    this.#counts[i] = (this.#counts[i] as number) + 1;
    if (v > this.#max) this.#max = v;
    if (v < this.#min) this.#min = v;
    this.#n++;
  }

  /** Move everything recorded so far into `into`. */
  flush(): void {
    if (this.#n === 0) return;
    const counts = this.#counts;
    const min = this.#min;
    const max = this.#max;
    const minIdx = slotOf(min);
    const maxIdx = slotOf(max);
    for (let i = minIdx; i <= maxIdx; i++) {
      const c = counts[i] as number;
      if (c === 0) continue;
      counts[i] = 0;
      // The extremes' buckets are recorded at the extremes themselves (same bucket, so the same counts): the
      // histogram's exact minimum and maximum come out as recorded.
      if (i === maxIdx) {
        this.into.recordValue(max);
        if (c > 1) this.into.recordValueWithCount(i === minIdx ? min : max, c - 1);
      } else this.into.recordValueWithCount(i === minIdx ? min : slotValue(i), c);
    }
    this.#min = FAST_LIMIT;
    this.#max = 0;
    this.#n = 0;
  }
}

const round1 = (us: number): number => Math.round(us * 10) / 10;

export function summarize(h: Histogram): LatencySummary {
  if (h.totalCount === 0) return { count: 0, min: 0, mean: 0, p50: 0, p90: 0, p99: 0, p99_9: 0, max: 0 };
  const us = (ns: number): number => round1(ns / 1000);
  // getValueAtPercentile answers with the top of the value's bucket (up to 0.1 % above it at 3 digits), which can
  // pass the recorded maximum when the slowest I/Os share its bucket; no percentile exceeds the maximum.
  const max = h.maxValue;
  const at = (p: number): number => us(Math.min(max, h.getValueAtPercentile(p)));
  return {
    count: h.totalCount,
    min: us(h.minNonZeroValue),
    mean: us(h.mean),
    p50: at(50),
    p90: at(90),
    p99: at(99),
    p99_9: at(99.9),
    max: us(max),
  };
}

/** Percentiles sampled for the CDF chart: dense in the tail, where latency stories are told. */
const CDF_PERCENTILES: number[] = [
  ...Array.from({ length: 50 }, (_, i) => i * 2),
  91, 92, 93, 94, 95, 96, 97, 98, 99, 99.5, 99.9, 99.95, 99.99, 100,
].filter((p, i, a) => a.indexOf(p) === i && p >= 0);

/** [latency µs, cumulative fraction] pairs, monotone in both coordinates. */
export function cdfPoints(h: Histogram): [number, number][] {
  if (h.totalCount === 0) return [];
  const out: [number, number][] = [[round1(h.minNonZeroValue / 1000), 0]];
  for (const p of CDF_PERCENTILES) {
    if (p === 0) continue;
    const v = round1(h.getValueAtPercentile(p) / 1000);
    const last = out[out.length - 1] as [number, number];
    if (v < last[0]) continue;
    out.push([v, p / 100]);
  }
  return out;
}
