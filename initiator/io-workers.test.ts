// io workers end to end over 127.0.0.1 against our TS target: verify jobs with io_workers 0, 1, 2 and
// queues_per_hctx 1, 2; placement in queueInfo; setQueueWorker moves a live queue and survives a forced reconnect;
// a worker killed mid-run: its queues recover and the run ends with no mismatch and no hung command. Nothing timed.
import { Buffer } from 'node:buffer';
import { afterEach, describe, expect, it } from 'vitest';
import { connect, type Controller } from './index.js';
import { InvalidArgumentError } from './errors.js';
import { runJobs } from '../harness/load/engine.js';
import { parseFioJobFile, resolveJobs } from '../harness/load/job-file.js';
import { controllerBlockTarget, startInProcessTarget, type InProcessTarget } from '../harness/nvme.js';
import { FakeController } from '../harness/peers/fake-controller.js';
import { NvmOpcode, encodeSqe } from '../protocol/index.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function setup(extra: Record<string, unknown>): Promise<{ target: InProcessTarget; ctrl: Controller }> {
  const target = await startInProcessTarget({ size: '8M' });
  cleanups.push(() => target.stop());
  const ctrl = await connect({ traddr: target.addr, trsvcid: target.port, nqn: target.nqn, reconnect_delay: 0.05, ...extra });
  cleanups.push(() => ctrl.disconnect());
  return { target, ctrl };
}

const VERIFY = '[w]\nrw=write\nbssplit=4k/50:16k/30:64k/20\niodepth=16\nsize=2m\nverify=crc32c\n[r]\nstonewall\nrw=randread\nbs=4k\niodepth=16\nsize=2m\nverify=crc32c\n';

describe('io workers', () => {
  for (const workers of [0, 1, 2]) {
    for (const qph of [1, 2]) {
      it(`verify job: io_workers=${workers} queues_per_hctx=${qph}`, async () => {
        const { ctrl } = await setup({ io_workers: workers, queues_per_hctx: qph, nr_io_queues: 2 });
        const bt = controllerBlockTarget(ctrl, 1);
        const r = await runJobs(bt, resolveJobs(parseFioJobFile(VERIFY), bt));
        expect(r.errorMessages).toEqual([]);
        expect(r.totals.errors).toBe(0);
        expect(r.verify.mismatchCount).toBe(0);
        expect(r.verify.checkedBlocks).toBeGreaterThan(0);
        const qs = ctrl.queueInfo();
        expect(qs).toHaveLength(2 * qph);
        if (workers === 0) expect(qs.every((q) => q.owner === 'main' && q.worker === -1)).toBe(true);
        else {
          // (qid − 1) mod N, and the queues of one group on distinct workers.
          for (const q of qs) expect(q.worker).toBe((q.qid - 1) % workers);
          const info = ctrl.ioWorkerInfo();
          expect(info).toHaveLength(workers);
          expect(info.reduce((a, w) => a + w.ios, 0)).toBe(qs.reduce((a, q) => a + q.submitted, 0));
          for (const w of info) {
            expect(w.alive).toBe(true);
            expect(w.tid).toBeGreaterThan(0);
            expect(w.batches).toBeGreaterThan(0);
            expect(w.batches).toBeLessThanOrEqual(w.ios);
          }
        }
      });
    }
  }

  it('counts relinquish events when io_budget_us runs out with submissions pending; engine slots in shared memory', async () => {
    const { ctrl } = await setup({ io_workers: 1, nr_io_queues: 1, io_budget_us: 1 });
    // The engine's slot buffers from the controller's shared pool: the worker uses them in place.
    const bt = { ...controllerBlockTarget(ctrl, 1), allocBuffer: (n: number) => ctrl.allocIoBuffer(n) };
    const r = await runJobs(bt, resolveJobs(parseFioJobFile('[w]\nrw=write\nbs=4k\niodepth=32\nsize=2m\n[r]\nstonewall\nrw=randread\nbs=4k\niodepth=32\nsize=2m\nverify=crc32c\n'), bt));
    expect(r.totals.errors).toBe(0);
    const w = ctrl.ioWorkerInfo()[0];
    // 32 submissions published at once and a 1 µs budget checked every 8: the worker yields with work left.
    expect(w?.relinquish).toBeGreaterThan(0);
    expect(w?.ios).toBe(ctrl.queueInfo()[0]?.submitted);
  });

  it('promise API, shared-pool buffers and plain buffers round-trip on a worker queue', async () => {
    const { ctrl } = await setup({ io_workers: 1, nr_io_queues: 1 });
    const ns = ctrl.namespace(1);
    const plain = Buffer.alloc(64 * 1024, 0x5a);
    await ns.write(8, plain);
    expect((await ns.read(8, 128)).equals(plain)).toBe(true);
    const shared = ctrl.allocIoBuffer(8192);
    expect(shared.buffer).toBeInstanceOf(SharedArrayBuffer);
    shared.fill(0x33);
    await ns.write(1000, shared);
    const into = ctrl.allocIoBuffer(8192);
    await ns.read(1000, 16, into);
    expect(into.equals(shared)).toBe(true);
    await ns.flush();
  });

  it('controllers with the same io-worker settings share one pool; the last disconnect stops it', async () => {
    const { target, ctrl: a } = await setup({ io_workers: 2, nr_io_queues: 2 });
    const b = await connect({ traddr: target.addr, trsvcid: target.port, nqn: target.nqn, io_workers: 2, nr_io_queues: 2, duplicate_connect: true });
    cleanups.push(() => b.disconnect());
    const c = await connect({ traddr: target.addr, trsvcid: target.port, nqn: target.nqn, io_workers: 1, nr_io_queues: 1, duplicate_connect: true });
    cleanups.push(() => c.disconnect());
    const tids = (x: Controller): number[] => x.ioWorkerInfo().map((w) => w.tid);
    expect(tids(a).every((t) => t > 0)).toBe(true);
    expect(tids(b)).toEqual(tids(a));
    // Other settings, other pool.
    expect(tids(c).some((t) => tids(a).includes(t))).toBe(false);
    // Queue q of every controller sits on worker (q-1) mod N: both controllers' queue 1 on worker 0.
    expect(a.ioWorkerInfo()[0]?.queues).toBe(2);
    await a.disconnect();
    const buf = Buffer.alloc(4096, 0x42);
    await b.namespace(1).write(0, buf);
    expect((await b.namespace(1).read(0, 8)).equals(buf)).toBe(true);
    expect(b.ioWorkerInfo().every((w) => w.alive)).toBe(true);
    const live = b.ioWorkerInfo().map((w) => w.tid);
    await b.disconnect();
    const { readdir } = await import('node:fs/promises');
    const stillThere = async (): Promise<number[]> => {
      const threads = new Set((await readdir('/proc/self/task')).map(Number));
      return live.filter((t) => threads.has(t));
    };
    // The pool's threads are gone once the last controller using it disconnected (terminate() has resolved). The join
    // returns when the exiting thread clears its tid (mm_release in do_exit); the kernel drops its /proc entry a moment
    // later (release_task), so a thread preempted in between on a loaded machine gets a bounded wait (CI saw one).
    let left = await stillThere();
    for (let i = 0; i < 100 && left.length > 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
      left = await stillThere();
    }
    expect(left).toEqual([]);
  });

  it('command-specific CQE results (Dword 0/1) come back through a worker queue as on the calling thread', async () => {
    const f = new FakeController({ ioResult: { dw0: 0x12345678, dw1: 0x9abcdef0 } });
    f.addNamespace(1, 4096);
    await f.listen();
    cleanups.push(() => f.close());
    for (const io_workers of [0, 1]) {
      const ctrl = await connect({ traddr: '127.0.0.1', trsvcid: f.port, nqn: f.subnqn, nr_io_queues: 1, io_workers });
      cleanups.push(() => ctrl.disconnect());
      const c = await ctrl.execIo(() => ({ sqe: encodeSqe({ opcode: NvmOpcode.FLUSH, cid: 0, nsid: 1 }), timeoutMs: 5000 }), { write: true });
      expect({ io_workers, dw0: c.dw0 >>> 0, dw1: c.dw1 >>> 0 }).toEqual({ io_workers, dw0: 0x12345678, dw1: 0x9abcdef0 });
      await ctrl.disconnect();
    }
  });

  it('setQueueWorker moves a live queue, is kept across a forced reconnect, -1 reverts; bad input changes nothing', async () => {
    const { ctrl } = await setup({ io_workers: 2, nr_io_queues: 2 });
    expect(ctrl.queueInfo().map((q) => q.worker)).toEqual([0, 1]);
    await expect(ctrl.setQueueWorker(3, 0)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(ctrl.setQueueWorker(1, 2)).rejects.toThrow(/worker/);
    expect(ctrl.queueInfo().map((q) => q.worker)).toEqual([0, 1]);
    const ns = ctrl.namespace(1);
    const data = Buffer.alloc(4096, 7);
    const bg = (async () => {
      for (let i = 0; i < 50; i++) await ns.write(i * 8, data, { hctx: 0 });
    })();
    await ctrl.setQueueWorker(1, 1);
    await bg;
    expect(ctrl.queueInfo().map((q) => [q.qid, q.worker, q.state])).toEqual([
      [1, 1, 'live'],
      [2, 1, 'live'],
    ]);
    const reconnected = new Promise((r) => ctrl.once('reconnected', r));
    ctrl.reset();
    await reconnected;
    expect(ctrl.queueInfo().map((q) => q.worker)).toEqual([1, 1]);
    await ctrl.setQueueWorker(1, -1);
    expect(ctrl.queueInfo().map((q) => q.worker)).toEqual([0, 1]);
    expect((await ns.read(0, 8)).equals(data)).toBe(true);
  });

  it('a worker killed mid-run: its queues recover, the run completes with no mismatch and no hung command', async () => {
    const { ctrl } = await setup({ io_workers: 2, nr_io_queues: 2 });
    const bt = controllerBlockTarget(ctrl, 1);
    const job = '[w]\nrw=randwrite\nbs=4k\niodepth=16\nnumjobs=2\nsize=2m\nio_size=8m\nverify=crc32c\n';
    const run = runJobs(bt, resolveJobs(parseFioJobFile(job), bt));
    // Kill once I/O is flowing on worker 1.
    while (ctrl.ioWorkerInfo()[1]?.ios === 0) await new Promise((r) => setTimeout(r, 1));
    const reconnected = new Promise((r) => ctrl.once('reconnected', r));
    await ctrl.terminateIoWorker(1);
    await reconnected;
    const r = await run;
    expect(r.errorMessages).toEqual([]);
    expect(r.verify.mismatchCount).toBe(0);
    expect(ctrl.inFlight).toBe(0);
    const info = ctrl.ioWorkerInfo();
    expect(info[1]?.starts).toBe(2);
    expect(info.every((w) => w.alive)).toBe(true);
    expect(ctrl.queueInfo().every((q) => q.state === 'live')).toBe(true);
  });
});
