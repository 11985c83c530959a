// Placement rules: (q − 1) mod N (nvme_tcp_set_queue_io_cpu), queue groups on distinct workers, the match_hw_queues
// cap, setQueueWorker overrides and their errors.
import { describe, expect, it } from 'vitest';
import { mapQueues } from '../dispatch/hctx.js';
import { InvalidArgumentError } from '../errors.js';
import { Placement, defaultWorker, effectiveWorkers } from './placement.js';

describe('io worker placement', () => {
  it('maps queue q to worker (q - 1) mod N', () => {
    expect([1, 2, 3, 4, 5].map((q) => defaultWorker(q, 2))).toEqual([0, 1, 0, 1, 0]);
    expect([1, 2, 3].map((q) => defaultWorker(q, 1))).toEqual([0, 0, 0]);
  });

  it('puts the queues of one group on distinct workers', () => {
    for (const [n, per] of [
      [2, 2],
      [3, 2],
      [4, 3],
      [4, 4],
    ] as const) {
      const map = mapQueues(16 * per, 4, per, 0, 0);
      for (const g of map.default) expect(new Set(g.map((q) => defaultWorker(q, n))).size).toBe(g.length);
    }
  });

  it('caps workers at the NIC queue count under match_hw_queues', () => {
    expect(effectiveWorkers(4, true, 2)).toBe(2);
    expect(effectiveWorkers(4, false, 2)).toBe(4);
    expect(effectiveWorkers(4, true, undefined)).toBe(4);
    expect(effectiveWorkers(0, true, 2)).toBe(0);
  });

  it('keeps overrides until -1 reverts them', () => {
    const p = new Placement(3);
    expect(p.set(2, 0, 4)).toBe(0);
    expect(p.workerOf(2)).toBe(0);
    expect(p.overrideOf(2)).toBe(0);
    expect(p.workerOf(3)).toBe(2);
    expect(p.set(2, -1, 4)).toBe(1);
    expect(p.overrideOf(2)).toBe(-1);
  });

  it('refuses a non-existent queue or worker and changes nothing', () => {
    const p = new Placement(2);
    p.set(1, 1, 2);
    const err = (f: () => unknown): string => {
      try {
        f();
      } catch (e) {
        expect(e).toBeInstanceOf(InvalidArgumentError);
        return (e as InvalidArgumentError).field;
      }
      return 'none';
    };
    expect(err(() => p.set(3, 0, 2))).toBe('qid');
    expect(err(() => p.set(0, 0, 2))).toBe('qid');
    expect(err(() => p.set(1, 2, 2))).toBe('worker');
    expect(err(() => p.set(1, -2, 2))).toBe('worker');
    expect(err(() => new Placement(0).set(1, 0, 2))).toBe('worker');
    expect(p.workerOf(1)).toBe(1);
  });
});
