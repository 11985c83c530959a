// blk-mq-like dispatch: queue map, queue groups with one tag space and a rotor, whole-group fallback, connect parallelism.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { NvmOpcode } from '../../protocol/index.js';
import { connect, type Controller } from '../index.js';
import { TagSet } from '../queue-pair.js';
import { FakeController, type FakeOptions } from '../../harness/peers/fake-controller.js';
import { mapQueues } from './hctx.js';
import { cleanupAfterEach } from '../../test/fixtures/cleanups.js';

const cleanups = cleanupAfterEach();

async function setup(fopts: FakeOptions, copts: Record<string, unknown>): Promise<{ f: FakeController; c: Controller }> {
  const f = new FakeController(fopts);
  f.addNamespace(1, 4096);
  await f.listen();
  cleanups.push(() => f.close());
  const c = await connect({ traddr: '127.0.0.1', trsvcid: f.port, nqn: f.subnqn, duplicate_connect: true, ...copts });
  cleanups.push(() => c.disconnect());
  return { f, c };
}

describe('mapQueues', () => {
  it('gives each hctx whole groups and the rest to write then poll queues', () => {
    expect(mapQueues(8, 4, 2, 0, 0)).toEqual({ default: [[1, 2], [3, 4], [5, 6], [7, 8]], write: [], poll: [], queuesPerHctx: 2 });
    expect(mapQueues(6, 2, 2, 1, 1)).toEqual({ default: [[1, 2], [3, 4]], write: [[5]], poll: [[6]], queuesPerHctx: 2 });
  });
  it('keeps whole groups only when fewer queues are granted', () => {
    expect(mapQueues(5, 4, 2, 0, 0).default).toEqual([[1, 2], [3, 4]]);
    expect(mapQueues(3, 2, 4, 0, 0)).toMatchObject({ default: [[1], [2], [3]].slice(0, 2), queuesPerHctx: 1 });
  });
});

describe('TagSet', () => {
  it('puts a 4-bit generation counter in the CID and detects stale ones', () => {
    const t = new TagSet(2);
    const a = t.tryGet() as number;
    expect(a >> 12).toBe(1);
    t.put(a);
    const b = t.tryGet() as number;
    expect(b & 0xfff).toBe(a & 0xfff);
    expect(b).not.toBe(a);
    expect(t.matches(a)).toBe(false);
    expect(t.matches(b)).toBe(true);
  });
  it('makes submitters wait when exhausted', async () => {
    const t = new TagSet(1);
    const a = t.tryGet() as number;
    expect(t.tryGet()).toBeUndefined();
    const later = t.get();
    t.put(a);
    expect(((await later) & 0xfff)).toBe(0);
  });
});

describe('queue groups (queues_per_hctx)', () => {
  it('spreads one hctx over its group by rotor with CIDs unique across the group', async () => {
    const { f, c } = await setup({}, { nr_io_queues: 2, queues_per_hctx: 4, queue_size: 64 });
    expect(c.hctxs().length).toBe(2);
    expect(c.hctxs()[0]?.queues.map((q) => q.qid)).toEqual([1, 2, 3, 4]);
    const ns = c.namespace(1);
    const buf = Buffer.alloc(512);
    await Promise.all(Array.from({ length: 64 }, (_, i) => ns.read(i, 1, Buffer.alloc(512), { hctx: 0 })));
    void buf;
    const reads = f.commands.filter((x) => x.opcode === NvmOpcode.READ && x.qid > 0);
    const perQ = new Map<number, number>();
    for (const r of reads) perQ.set(r.qid, (perQ.get(r.qid) ?? 0) + 1);
    expect([...perQ.keys()].sort()).toEqual([1, 2, 3, 4]);
    expect([...perQ.values()]).toEqual([16, 16, 16, 16]);
    // All 64 were in flight at once on a 64-tag shared space: every CID distinct across the group.
    expect(new Set(reads.map((r) => r.cid)).size).toBe(64);
    const info = c.queueInfo();
    expect(info.filter((q) => q.hctx === 0).map((q) => q.submitted)).toEqual([17, 17, 17, 17]);
  });

  it('bounds in-flight commands of a group by the shared tag space', async () => {
    const { f, c } = await setup({ onIo: (sqe) => (sqe.opcode === NvmOpcode.READ ? 'drop' : undefined) }, { nr_io_queues: 1, queues_per_hctx: 2, queue_size: 16, io_timeout: 5 });
    const ns = c.namespace(1);
    const ps = Array.from({ length: 40 }, (_, i) => ns.read(i, 1).catch(() => undefined));
    await new Promise((r) => setTimeout(r, 100));
    expect(f.commands.filter((x) => x.opcode === NvmOpcode.READ && x.qid > 0).length).toBe(16);
    expect(c.hctx(0).inFlight).toBe(16);
    await c.disconnect();
    await Promise.all(ps);
  });

  it('falls back to whole groups when the controller grants fewer queues (maxIoQueues)', async () => {
    const { c } = await setup({ maxIoQueues: 5 }, { nr_io_queues: 4, queues_per_hctx: 2 });
    expect(c.grantedQueues).toBe(5);
    expect(c.hctxs().map((h) => h.queues.length)).toEqual([2, 2]);
    expect(c.ioQueueCount).toBe(4);
  });

  it('falls back to one queue per hctx when not even one group fits', async () => {
    const { c } = await setup({ maxIoQueues: 3 }, { nr_io_queues: 2, queues_per_hctx: 4 });
    expect(c.hctxs().map((h) => h.queues.length)).toEqual([1, 1]);
  });

  it('routes writes to write queues and poll I/O to poll queues', async () => {
    const { f, c } = await setup({}, { nr_io_queues: 2, nr_write_queues: 1, nr_poll_queues: 1 });
    expect(c.queueInfo().map((q) => [q.qid, q.type])).toEqual([
      [1, 'default'],
      [2, 'default'],
      [3, 'write'],
      [4, 'poll'],
    ]);
    const ns = c.namespace(1);
    await ns.write(0, Buffer.alloc(512), { hctx: 1 });
    await ns.read(0, 1, undefined, { hctx: 1 });
    await ns.read(0, 1, undefined, { poll: true });
    expect(f.commands.filter((x) => x.opcode === NvmOpcode.WRITE && x.qid > 0).map((x) => x.qid)).toEqual([3]);
    expect(f.commands.filter((x) => x.opcode === NvmOpcode.READ && x.qid > 0).map((x) => x.qid)).toEqual([2, 4]);
  });
});

describe('I/O queue connect parallelism', () => {
  it('connects all I/O queues at once by default and one at a time with connect_concurrency 1', async () => {
    const par = await setup({ connectLatencyMs: 30 }, { nr_io_queues: 8 });
    expect(par.f.maxConcurrentConnects).toBe(8);
    const ser = await setup({ connectLatencyMs: 30 }, { nr_io_queues: 8, connect_concurrency: 1 });
    expect(ser.f.maxConcurrentConnects).toBe(1);
    const mid = await setup({ connectLatencyMs: 30 }, { nr_io_queues: 8, connect_concurrency: 3 });
    expect(mid.f.maxConcurrentConnects).toBe(3);
  });
});
