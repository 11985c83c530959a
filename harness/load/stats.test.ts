import { describe, expect, it } from 'vitest';
import { LatencyRecorder, cdfPoints, newHistogram, recordNs, summarize } from './stats.js';

/** Log-uniform values from 0.1 ns to 100 s (xorshift32, fixed seed), plus the layout's edges. */
function values(n: number): number[] {
  let x = 0x2545f491;
  const out = [0, 0.3, 1, 1.5, 2047, 2047.6, 2048, 2049, 3071, 3072, 4095, 4096, 80_000.7, 1e6, 2 ** 31 - 1, 2 ** 31, 5e9, 7e10];
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out.push(10 ** (-1 + ((x >>> 0) / 2 ** 32) * 12));
  }
  return out;
}

describe('LatencyRecorder', () => {
  it('leaves the histogram exactly as recording every value in it would', () => {
    const vs = values(20_000);
    const direct = newHistogram();
    for (const v of vs) recordNs(direct, v);
    const folded = newHistogram();
    const rec = new LatencyRecorder(folded);
    // Two flushes with records in between: a flush empties the recorder and a later one adds to the histogram.
    vs.forEach((v, i) => {
      rec.record(v);
      if (i === 7_000) rec.flush();
    });
    rec.flush();
    expect(folded.totalCount).toBe(vs.length);
    expect(folded.maxValue).toBe(direct.maxValue);
    expect(folded.minNonZeroValue).toBe(direct.minNonZeroValue);
    expect(summarize(folded)).toEqual(summarize(direct));
    expect(cdfPoints(folded)).toEqual(cdfPoints(direct));
    // Bucket by bucket (hdr-histogram-js has getCountAtValue at run time; its typings leave it out).
    const count = (h: unknown, v: number): number => (h as { getCountAtValue(v: number): number }).getCountAtValue(Math.min(6e10, Math.max(1, Math.round(v))));
    for (const v of vs) expect(count(folded, v)).toBe(count(direct, v));
  });

  it('keeps the exact extremes when they share a bucket with other values', () => {
    // 1_000_001 and 1_000_100 fall in one bucket of 512 ns width; the folded max must be the larger, not the bucket.
    const direct = newHistogram();
    const folded = newHistogram();
    const rec = new LatencyRecorder(folded);
    for (const v of [1_000_100, 1_000_001, 1_000_050]) {
      recordNs(direct, v);
      rec.record(v);
    }
    rec.flush();
    expect(folded.maxValue).toBe(1_000_100);
    expect(folded.minNonZeroValue).toBe(1_000_001);
    expect(summarize(folded)).toEqual(summarize(direct));
  });

  it('adds nothing when nothing was recorded', () => {
    const h = newHistogram();
    new LatencyRecorder(h).flush();
    expect(h.totalCount).toBe(0);
  });
});
