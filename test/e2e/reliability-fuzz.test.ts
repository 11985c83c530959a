// Short fuzz run (issue 6 item 1; the long one is bench/fuzz-target.ts): mutated and random PDUs from many
// connections at a target in a child process, while a healthy controller does verified I/O. Zero crashes, no error
// logged by the target, no malformed PDU from it, bounded memory, and afterwards only the healthy controller left.
import { describe, expect, it } from 'vitest';
import { runFuzz } from '../../harness/fuzz/run.js';

describe('fuzzing a live target', () => {
  it('20k mutated/garbage cases: no crash, healthy I/O verified throughout, nothing leaked', async () => {
    const r = await runFuzz({ cases: 20_000, concurrency: 12, seed: 0x1234 + (Number(process.env.FUZZ_SEED_OFFSET ?? 0) | 0) });
    expect(r.crash).toBeUndefined();
    expect(r.crashes).toBe(0);
    expect(r.cases).toBeGreaterThanOrEqual(20_000);
    expect(r.targetErrors.first).toEqual([]);
    expect(r.malformedFirst).toEqual([]);
    // The cases reached the command parsers, not just the PDU reader: successful and refused commands both came back.
    expect(Object.keys(r.statuses).length).toBeGreaterThan(5);
    expect(r.termReqs).toBeGreaterThan(0);
    expect(r.healthy.firstError).toBeUndefined();
    expect(r.healthy.mismatches).toBe(0);
    expect(r.healthy.ops).toBeGreaterThan(20);
    expect(r.rssMB.samples).toBeGreaterThan(0);
    expect(r.rssMB.max).toBeLessThan(400);
    expect(r.heapAfterGcMB.end - r.heapAfterGcMB.start).toBeLessThan(16);
    expect(r.finalCounts).toMatchObject({ controllers: 1, queues: 3, connections: 3, unboundConnections: 0, pendingRequests: 0 });
  }, 30_000);
});
