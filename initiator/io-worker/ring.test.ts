// SPSC ring: wrap-around, full-ring back-pressure, one wake-up per published batch (Atomics.waitAsync doorbell).
import { describe, expect, it } from 'vitest';
import { RingConsumer, RingProducer, createRingBuffer } from './ring.js';

function pair(capacity: number, words = 2): { p: RingProducer; c: RingConsumer } {
  const { sab, layout } = createRingBuffer(capacity, words);
  return { p: new RingProducer(sab, layout), c: new RingConsumer(sab, layout) };
}

function push(p: RingProducer, v: number): boolean {
  const b = p.reserve();
  if (b < 0) return false;
  p.words[b] = v;
  p.words[b + 1] = ~v;
  p.commit();
  return true;
}

function drainAll(c: RingConsumer): number[] {
  const got: number[] = [];
  c.drain((w, b) => {
    expect(w[b + 1]).toBe(~(w[b] as number));
    got.push(w[b] as number);
  });
  return got;
}

describe('SPSC ring', () => {
  it('rounds capacity up to a power of two', () => {
    expect(pair(5).p.capacity).toBe(8);
  });

  it('keeps order across many wrap-arounds', () => {
    const { p, c } = pair(4);
    const seen: number[] = [];
    let next = 0;
    for (let round = 0; round < 50; round++) {
      const n = (round % 4) + 1;
      for (let i = 0; i < n; i++) expect(push(p, next++)).toBe(true);
      p.publish();
      seen.push(...drainAll(c));
    }
    expect(seen).toEqual(Array.from({ length: next }, (_, i) => i));
  });

  it('hides committed entries until publish', () => {
    const { p, c } = pair(8);
    push(p, 1);
    push(p, 2);
    expect(p.unpublished).toBe(2);
    expect(drainAll(c)).toEqual([]);
    p.publish();
    expect(drainAll(c)).toEqual([1, 2]);
  });

  it('refuses a full ring and lets the producer retry once the consumer frees space', async () => {
    const { p, c } = pair(4);
    for (let i = 0; i < 4; i++) expect(push(p, i)).toBe(true);
    expect(push(p, 4)).toBe(false);
    expect(p.counters.full).toBe(1);
    p.publish();
    let resumed = false;
    const waiting = p.waitSpace().then(() => {
      resumed = true;
    });
    await Promise.resolve();
    expect(resumed).toBe(false);
    expect(c.drain(() => undefined, 1)).toBe(1);
    await waiting;
    expect(resumed).toBe(true);
    expect(push(p, 4)).toBe(true);
    p.publish();
    expect(drainAll(c)).toEqual([1, 2, 3, 4]);
  });

  it('wakes a sleeping consumer once per published batch, not per entry', async () => {
    const { p, c } = pair(64);
    const sleeping = c.wait();
    await new Promise((r) => setImmediate(r));
    for (let i = 0; i < 32; i++) push(p, i);
    expect(p.publish()).toBe(true);
    // A second publish before the consumer looks: nothing new to wake.
    for (let i = 32; i < 40; i++) push(p, i);
    expect(p.publish()).toBe(false);
    await sleeping;
    expect(drainAll(c)).toHaveLength(40);
    expect(p.counters.wakeups).toBe(1);
    expect(c.counters.wakeups).toBe(1);
    expect(c.counters.batches).toBe(1);
    // With entries already pending, wait() returns without sleeping and the producer sends no wake-up.
    push(p, 99);
    p.publish();
    await c.wait();
    expect(p.counters.wakeups).toBe(1);
  });

  it('close() ends a pending wait', async () => {
    const { c } = pair(4);
    const w = c.wait();
    c.close();
    await w;
  });
});
