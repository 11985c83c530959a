// Initiator against a scripted controller over real loopback sockets: connect sequence, data paths, digests, errors.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { AdminOpcode, FABRICS_OPCODE, NvmOpcode } from '../protocol/index.js';
import { connect, type Controller } from './index.js';
import { ControllerInitError, NvmeStatusError, TimeoutError, TransportFatalError } from './errors.js';
import { FakeController, type FakeOptions } from '../harness/peers/fake-controller.js';
import { pattern } from '../test/fixtures/data-pattern.js';
import { cleanupAfterEach } from '../test/fixtures/cleanups.js';

const cleanups = cleanupAfterEach();

async function fake(opts: FakeOptions = {}, blocks = 8192, bs: 512 | 4096 = 512): Promise<FakeController> {
  const f = new FakeController(opts);
  f.addNamespace(1, blocks, bs);
  await f.listen();
  cleanups.push(() => f.close());
  return f;
}

async function open(f: FakeController, extra: Record<string, unknown> = {}): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: f.port, nqn: f.subnqn, nr_io_queues: 2, duplicate_connect: true, ...extra });
  cleanups.push(() => c.disconnect());
  return c;
}

describe('connect sequence', () => {
  it('connects the admin queue, enables, identifies, sets queues, connects I/O queues and scans namespaces', async () => {
    const f = await fake();
    const c = await open(f, { nr_io_queues: 3 });
    expect(c.state).toBe('live');
    expect(c.ioQueueCount).toBe(3);
    expect(c.namespaces.map((n) => n.nsid)).toEqual([1]);
    expect(c.namespace(1).blockSize).toBe(512);
    const admin = f.commands.filter((x) => x.qid <= 0).map((x) => x.opcode);
    // Connect, CAP, CC(EN=0), CC(EN=1), CSTS..., VS, Identify, Set Features, Connects on I/O queues, AEN config, AER, scan.
    expect(admin[0]).toBe(FABRICS_OPCODE);
    expect(admin).toContain(AdminOpcode.IDENTIFY);
    expect(admin).toContain(AdminOpcode.SET_FEATURES);
    expect(admin).toContain(AdminOpcode.ASYNC_EVENT);
    expect(admin.indexOf(AdminOpcode.IDENTIFY)).toBeLessThan(admin.indexOf(AdminOpcode.SET_FEATURES));
    expect(f.connectCount).toBe(4);
    // The AER uses CID 31 outside the tag set, like Linux.
    expect(f.commands.find((x) => x.opcode === AdminOpcode.ASYNC_EVENT)?.cid).toBe(31);
  });

  it('rejects an ICResp whose digest bits differ from the request, with a TransportFatalError', async () => {
    const f = await fake({ icRespDigest: 0 });
    await expect(open(f, { hdr_digest: true })).rejects.toBeInstanceOf(TransportFatalError);
  });

  it('rejects a controller whose Identify cntlid differs from the Connect result', async () => {
    const f = await fake({ wrongCntlid: true });
    const err = await open(f).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ControllerInitError);
    expect((err as ControllerInitError).field).toBe('cntlid');
  });

  it('rejects an I/O controller with KAS 0', async () => {
    const f = await fake({ kas: 0 });
    await expect(open(f)).rejects.toMatchObject({ field: 'kas' });
  });

  it('honours a controller that grants fewer queues than requested', async () => {
    const f = await fake({ maxIoQueues: 2 });
    const c = await open(f, { nr_io_queues: 5 });
    expect(c.grantedQueues).toBe(2);
    expect(c.ioQueueCount).toBe(2);
  });

  it('orderly shutdown sets CC.SHN and closes every socket', async () => {
    const f = await fake();
    const c = await open(f);
    await c.disconnect();
    expect(c.state).toBe('deleted');
    await new Promise((r) => setTimeout(r, 50));
    expect(f.conns.size).toBe(0);
  });
});

describe('data paths', () => {
  const sizes = [512, 4096, 8192, 65536, 131072, 1 << 20];
  for (const [name, opts] of [
    ['in-capsule + single C2H', { inlineDataSize: 1 << 20, mdts: 8 }],
    ['R2T + split C2H', { inlineDataSize: 0, c2hChunk: 8192, maxh2cdata: 16384, mdts: 8 }],
    ['several R2Ts per command + C2H SUCCESS', { inlineDataSize: 4096, r2tChunk: 20480, c2hSuccess: true, mdts: 8 }],
    ['MDTS split (16 KiB)', { inlineDataSize: 8192, mdts: 2 }],
    ['CPDA 3 (16-byte aligned H2C data)', { inlineDataSize: 8192, cpda: 3 }],
  ] as const) {
    it(`round-trips 512 B … 1 MiB: ${name}`, async () => {
      const f = await fake(opts, 8192);
      const c = await open(f);
      const ns = c.namespace(1);
      let lba = 0;
      for (const size of sizes) {
        const data = pattern(size, size);
        await ns.write(lba, data);
        expect(f.namespaces[0]?.data.subarray(Number(lba) * 512, Number(lba) * 512 + size).equals(data)).toBe(true);
        const back = await ns.read(lba, size / 512);
        expect(back.equals(data), `${size}`).toBe(true);
        lba += size / 512;
      }
    });
  }

  for (const [hd, dd] of [
    [true, false],
    [false, true],
    [true, true],
  ] as const) {
    it(`works with header digest ${hd} / data digest ${dd}`, async () => {
      const f = await fake({ inlineDataSize: 4096, c2hChunk: 3000 * 4 });
      const c = await open(f, { hdr_digest: hd, data_digest: dd });
      const ns = c.namespace(1);
      for (const size of [512, 4096, 12288, 65536]) {
        const data = pattern(size, 7 * size);
        await ns.write(8, data);
        expect((await ns.read(8, size / 512)).equals(data)).toBe(true);
      }
    });
  }

  it('completes a read whose data digest is wrong with DATA_XFER_ERROR and keeps the queue', async () => {
    const f = await fake({ onIo: (sqe) => (sqe.opcode === NvmOpcode.READ && sqe.cdw10 === 5 ? 'corrupt-ddgst' : undefined) });
    const c = await open(f, { data_digest: true });
    const ns = c.namespace(1);
    const err = await ns.read(5, 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NvmeStatusError);
    expect((err as NvmeStatusError).status).toBe(0x04);
    expect((await ns.read(6, 1)).length).toBe(512);
    expect(c.state).toBe('live');
  });

  it('flush, write zeroes, deallocate and compare', async () => {
    const f = await fake();
    const c = await open(f);
    const ns = c.namespace(1);
    const data = pattern(4096, 3);
    await ns.write(0, data);
    await ns.compare(0, data);
    const other = pattern(4096, 4);
    await expect(ns.compare(0, other)).rejects.toMatchObject({ status: 0x285 });
    await ns.flush();
    await ns.writeZeroes(0, 4, { deac: true });
    expect((await ns.read(0, 4)).every((b) => b === 0)).toBe(true);
    expect((await ns.read(4, 4)).equals(data.subarray(2048))).toBe(true);
    await ns.deallocate([{ lba: 4, blocks: 2 }, { lba: 7, blocks: 1 }]);
    const after = await ns.read(4, 4);
    expect(after.subarray(0, 1024).every((b) => b === 0)).toBe(true);
    expect(after.subarray(1024, 1536).equals(data.subarray(3072, 3584))).toBe(true);
    expect(after.subarray(1536).every((b) => b === 0)).toBe(true);
  });

  it('surfaces NVMe status errors with their name', async () => {
    const f = await fake({ onIo: (sqe) => (sqe.opcode === NvmOpcode.WRITE ? 0x4080 : undefined) });
    const c = await open(f);
    const err = await c.namespace(1).write(0, Buffer.alloc(512)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NvmeStatusError);
    expect((err as NvmeStatusError).dnr).toBe(true);
    expect((err as Error).message).toMatch(/LBA/i);
  });

  it('with max_retries 0, times a command out with TimeoutError and recovers the controller', async () => {
    let drop = true;
    const f = await fake({ onIo: (sqe) => (sqe.opcode === NvmOpcode.READ && drop ? 'drop' : undefined) });
    const c = await open(f, { io_timeout: 0.2, reconnect_delay: 0.05, max_retries: 0 });
    const first = c.cntlid;
    const t0 = Date.now();
    await expect(c.namespace(1).read(0, 1)).rejects.toBeInstanceOf(TimeoutError);
    expect(Date.now() - t0).toBeLessThan(2000);
    drop = false;
    await new Promise<void>((r) => c.once('reconnected', () => r()));
    expect(c.cntlid).not.toBe(first);
    expect((await c.namespace(1).read(0, 1)).length).toBe(512);
  });

  it('a timed-out command is sent again after the reconnect, as Linux retries it (nvme_tcp_timeout on a live controller)', async () => {
    let reads = 0;
    const f = await fake({ onIo: (sqe) => (sqe.opcode === NvmOpcode.READ && ++reads === 1 ? 'drop' : undefined) });
    const c = await open(f, { io_timeout: 0.2, reconnect_delay: 0.05 });
    const data = pattern(4096, 7);
    await c.namespace(1).write(8, data);
    const first = c.cntlid;
    const reconnected = new Promise<void>((r) => c.once('reconnected', () => r()));
    const back = await c.namespace(1).read(8, 8);
    await reconnected;
    expect(back.equals(data)).toBe(true);
    expect(c.cntlid).not.toBe(first);
    expect(reads).toBe(2);
    expect(c.ioRetries).toBe(1);
  });

  it('a command that times out on every attempt fails with TimeoutError after max_retries resends', async () => {
    let reads = 0;
    const f = await fake({ onIo: (sqe) => (sqe.opcode === NvmOpcode.READ && ++reads !== 0 ? 'drop' : undefined) });
    const c = await open(f, { io_timeout: 0.1, reconnect_delay: 0.02, max_retries: 2 });
    await expect(c.namespace(1).read(0, 1)).rejects.toBeInstanceOf(TimeoutError);
    expect(reads).toBe(3);
  });
});
