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
