// The callback submit API (Namespace.submit): reusable requests, the same retry / requeue / timeout / digest / R2T
// behaviour as the promise API, against a scripted FakeController.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { NvmOpcode } from '../protocol/index.js';
import { connect, type Controller } from './index.js';
import { InvalidArgumentError, NvmeStatusError, TimeoutError } from './errors.js';
import type { IoRequest } from './namespace.js';
import { FakeController, type FakeOptions } from '../harness/peers/fake-controller.js';
import { cleanupAfterEach } from '../test/fixtures/cleanups.js';

const cleanups = cleanupAfterEach();

async function setup(opts: FakeOptions = {}, extra: Record<string, unknown> = {}): Promise<{ f: FakeController; c: Controller }> {
  const f = new FakeController(opts);
  f.addNamespace(1, 4096);
  await f.listen();
  cleanups.push(() => f.close());
  const c = await connect({ traddr: '127.0.0.1', trsvcid: f.port, nqn: f.subnqn, nr_io_queues: 1, reconnect_delay: 0.05, ...extra });
  cleanups.push(() => c.disconnect());
  return { f, c };
}

/** One reusable request whose ioDone settles the promise of the current round. */
class Req implements IoRequest {
  write = false;
  lba = 0;
  blocks = 1;
  buf: Buffer;
  #settle: ((e: Error | undefined) => void) | undefined;
  constructor(bytes: number) {
    this.buf = Buffer.alloc(bytes);
  }
  run(c: Controller, write: boolean, lba: number, blocks: number): Promise<Error | undefined> {
    this.write = write;
    this.lba = lba;
    this.blocks = blocks;
    const p = new Promise<Error | undefined>((r) => (this.#settle = r));
    c.namespace(1).submit(this);
    return p;
  }
  ioDone(err: Error | undefined): void {
    this.#settle?.(err);
  }
}

describe('Namespace.submit (callback API)', () => {
  it('reuses one request for writes and reads at depth, in-capsule and by R2T, and the data round-trips', async () => {
    const { f, c } = await setup({ inlineDataSize: 4096, r2tChunk: 2048, c2hChunk: 1024 });
    const reqs = Array.from({ length: 8 }, () => new Req(16384));
    for (let round = 0; round < 3; round++) {
      await Promise.all(
        reqs.map((r, i) => {
          r.buf.fill(round * 16 + i);
          // 8 blocks (4 KiB, in-capsule) on even slots, 32 blocks (16 KiB, R2T) on odd ones.
          return r.run(c, true, i * 64, i % 2 === 0 ? 8 : 32);
        }),
      ).then((errs) => expect(errs).toEqual(reqs.map(() => undefined)));
      const errs = await Promise.all(reqs.map((r, i) => (r.buf.fill(0), r.run(c, false, i * 64, i % 2 === 0 ? 8 : 32))));
      expect(errs).toEqual(reqs.map(() => undefined));
      reqs.forEach((r, i) => expect(r.buf.subarray(0, (i % 2 === 0 ? 8 : 32) * 512).every((b) => b === round * 16 + i)).toBe(true));
    }
    expect(f.namespaces[0]?.data[0]).toBe(2 * 16);
    expect(c.queueInfo()[0]?.inFlight).toBe(0);
  });

  it('splits a request above MDTS through the promise path and still calls ioDone once', async () => {
    const { c } = await setup({ mdts: 1 });
    const r = new Req(64 * 1024);
    r.buf.fill(7);
    expect(await r.run(c, true, 0, 128)).toBeUndefined();
    r.buf.fill(0);
    expect(await r.run(c, false, 0, 128)).toBeUndefined();
    expect(r.buf.every((b) => b === 7)).toBe(true);
  });

  it('retries a status without DNR and reports one with DNR as NvmeStatusError', async () => {
    let fails = 2;
    const { f, c } = await setup({ onIo: (sqe) => (sqe.opcode === NvmOpcode.READ && fails-- > 0 ? 0x82 : undefined) });
    const r = new Req(512);
    expect(await r.run(c, false, 0, 1)).toBeUndefined();
    expect(c.ioRetries).toBe(2);
    expect(f.commands.filter((x) => x.opcode === NvmOpcode.READ)).toHaveLength(3);
    fails = 1;
    f.opts.onIo = (sqe) => (sqe.opcode === NvmOpcode.READ && fails-- > 0 ? 0x4082 : undefined);
    const err = await r.run(c, false, 0, 1);
    expect(err).toBeInstanceOf(NvmeStatusError);
    expect((err as NvmeStatusError).dnr).toBe(true);
  });

  it('retries a read whose data digest was wrong (DATA_XFER_ERROR) and gets the right data', async () => {
    let corrupt = 1;
    const { f, c } = await setup({ onIo: (sqe) => (sqe.opcode === NvmOpcode.READ && corrupt-- > 0 ? 'corrupt-ddgst' : undefined) }, { data_digest: true });
    f.namespaces[0]?.data.fill(0x3c, 0, 4096);
    const r = new Req(4096);
    expect(await r.run(c, false, 0, 8)).toBeUndefined();
    expect(r.buf.every((b) => b === 0x3c)).toBe(true);
    expect(c.ioRetries).toBe(1);
  });

  it('requeues across a reconnect and completes once', async () => {
    let hold = true;
    const { f, c } = await setup({ onIo: (sqe) => (sqe.opcode === NvmOpcode.WRITE && hold ? 'drop' : undefined) });
    const r = new Req(4096);
    r.buf.fill(0xab);
    let calls = 0;
    const done = r.run(c, true, 16, 8).then((e) => (calls++, e));
    await new Promise((res) => setTimeout(res, 30));
    hold = false;
    const reconnected = new Promise<void>((res) => c.once('reconnected', () => res()));
    f.dropAll();
    await reconnected;
    expect(await done).toBeUndefined();
    await new Promise((res) => setTimeout(res, 20));
    expect(calls).toBe(1);
    expect(f.namespaces[0]?.data.subarray(16 * 512, 16 * 512 + 4096).every((b) => b === 0xab)).toBe(true);
  });

  it('fails a command that times out with TimeoutError (max_retries 0: not sent again)', async () => {
    const { c } = await setup({ onIo: (sqe) => (sqe.opcode === NvmOpcode.READ ? 'drop' : undefined) }, { io_timeout: 0.1, max_retries: 0 });
    const err = await new Req(512).run(c, false, 0, 1);
    expect(err).toBeInstanceOf(TimeoutError);
  });

  it('throws on bad arguments before submitting anything', async () => {
    const { c } = await setup();
    const r = new Req(512);
    expect(() => c.namespace(1).submit(Object.assign(r, { lba: -1 }))).toThrow(InvalidArgumentError);
    expect(() => c.namespace(1).submit(Object.assign(r, { lba: 0, blocks: 2 }))).toThrow(InvalidArgumentError);
    expect(() => c.namespace(1).submit(Object.assign(r, { lba: 4095, blocks: 1 }))).not.toThrow();
    expect(() => c.namespace(1).submit(Object.assign(r, { lba: 4096, blocks: 1 }))).toThrow(InvalidArgumentError);
  });
});
