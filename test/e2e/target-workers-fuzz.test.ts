// The fuzzer (harness/fuzz, as bench/fuzz-target.ts runs it) against a target with workers 2 and placement `host`:
// every fuzz connection uses one host NQN, so its I/O queues land on one worker, while two healthy controllers of
// other hosts run verified write/read I/O on the other worker. The fuzzed queues must get C2HTermReqs and closes from
// their worker; the healthy controllers must see no error, no mismatch and no reconnect, and no worker may die.
import { describe, expect, it } from 'vitest';
import { FUZZ_HOST_NQN, runFuzz } from '../../harness/fuzz/run.js';

/** FNV-1a, the host policy's hash (written out so the test picks hosts for the other worker independently). */
function fnv(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

const FUZZ_WORKER = fnv(FUZZ_HOST_NQN) % 2;
const HEALTHY_WORKER = 1 - FUZZ_WORKER;
const HEALTHY_HOSTS = Array.from({ length: 64 }, (_, i) => `nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000001${i.toString(16).padStart(2, '0')}`)
  .filter((h) => fnv(h) % 2 === HEALTHY_WORKER)
  .slice(0, 2);
const HEALTHY_NQN = 'nqn.2024-01.io.nvme-ts:healthy';

describe('target workers: the fuzzer on one controller leaves the others untouched', () => {
  it('fuzzed I/O queues on one worker get TermReq/close; healthy controllers on the other do verified I/O with zero errors', async () => {
    expect(HEALTHY_HOSTS).toHaveLength(2);
    const r = await runFuzz({ cases: 8000, concurrency: 8, seed: 0x5eed12, target: { workers: 2, placement: 'host' }, healthyHosts: HEALTHY_HOSTS, healthyLoops: 4 });
    expect(r.crash).toBeUndefined();
    expect(r.targetErrors.first).toEqual([]);
    expect(r.malformedFirst).toEqual([]);
    expect(r.cases).toBeGreaterThanOrEqual(8000);
    // The fuzzed I/O queues were served by a worker (the primary stops reading a queue once it hands it off) and it
    // answered them with C2HTermReqs.
    expect(r.termReqsByMode.io ?? 0).toBeGreaterThan(0);
    expect(r.healthy.firstError).toBeUndefined();
    expect(r.healthy.errors).toBe(0);
    expect(r.healthy.mismatches).toBe(0);
    expect(r.healthy.reconnects).toBe(0);
    expect(r.healthy.ops).toBeGreaterThan(20);
    // No worker died; the fuzz worker executed commands and holds nothing now, the healthy worker holds the 4 queues.
    const workers = r.finalWorkers ?? [];
    expect(workers.map((w) => [w.index, w.state, w.restarts])).toEqual([
      [0, 'ready', 0],
      [1, 'ready', 0],
    ]);
    expect(workers[FUZZ_WORKER]?.ios ?? 0).toBeGreaterThan(0);
    expect(workers[FUZZ_WORKER]?.queues).toBe(0);
    expect(workers[HEALTHY_WORKER]?.queues).toBe(4);
    // The healthy controllers are the ones they connected as (no reconnect), their I/O queues on the healthy worker.
    const healthy = (r.finalControllers ?? []).filter((c) => c.subnqn === HEALTHY_NQN);
    expect(healthy.map((c) => c.cntlid).sort()).toEqual([...r.healthy.cntlids].sort());
    for (const c of healthy) {
      expect(c.queues.filter((q) => q.qid > 0).map((q) => q.worker)).toEqual([HEALTHY_WORKER, HEALTHY_WORKER]);
    }
    expect(r.finalCounts).toMatchObject({ controllers: 2, queues: 6, connections: 2, unboundConnections: 0, pendingRequests: 0 });
  }, 60_000);
});
