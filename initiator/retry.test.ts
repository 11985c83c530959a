// I/O retries as Linux nvme_decide_disposition / nvme_retry_req make them: the decision table, and the controller
// against a scripted peer (statuses, CRD/CRDT delays, data digest errors, max_retries, multipath path errors).
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { NvmOpcode, Status } from '../protocol/index.js';
import { connect, type Controller } from './index.js';
import { NvmeStatusError } from './errors.js';
import { retryDelayMs } from './retry.js';
import { FakeController, type FakeOptions } from '../harness/peers/fake-controller.js';
import { cleanupAfterEach } from '../test/fixtures/cleanups.js';

const DNR = 0x4000;
const CRD = (n: number): number => n << 11;

describe('retryDelayMs (nvme_decide_disposition + nvme_retry_req)', () => {
  const policy = { maxRetries: 5, crdt: [3, 10, 0] };
  it.each([
    ['success is final', 0, 0, undefined],
    ['DNR is final', Status.INVALID_FIELD | DNR, 0, undefined],
    ['DNR with CRD is still final', Status.NS_NOT_READY | DNR | CRD(1), 0, undefined],
    ['no DNR, no CRD: retry at once', Status.NS_NOT_READY, 0, 0],
    ['data transfer error (digest mismatch): retry at once', Status.DATA_XFER_ERROR, 4, 0],
    ['CRD 1 → CRDT1 × 100 ms', Status.NS_NOT_READY | CRD(1), 0, 300],
    ['CRD 2 → CRDT2 × 100 ms', Status.NS_NOT_READY | CRD(2), 2, 1000],
    ['CRD 3 with CRDT3 = 0: no delay', Status.NS_NOT_READY | CRD(3), 0, 0],
    ['retries used up', Status.NS_NOT_READY, 5, undefined],
    ['ANA inaccessible without multipath: retried', Status.ANA_INACCESSIBLE, 0, 0],
  ])('%s', (_name, status, retries, want) => {
    expect(retryDelayMs(status, retries, policy)).toBe(want);
  });

  it('without CRDT in Identify a CRD asks for no delay; max_retries 0 never retries; multipath fails path errors over', () => {
    expect(retryDelayMs(Status.NS_NOT_READY | CRD(2), 0, { maxRetries: 5, crdt: [] })).toBe(0);
    expect(retryDelayMs(Status.NS_NOT_READY, 0, { maxRetries: 0, crdt: [] })).toBeUndefined();
    expect(retryDelayMs(Status.ANA_INACCESSIBLE, 0, policy, true)).toBeUndefined();
    expect(retryDelayMs(Status.NS_NOT_READY, 0, policy, true)).toBe(0);
  });
});

const cleanups = cleanupAfterEach();

async function fake(opts: FakeOptions): Promise<FakeController> {
  const f = new FakeController(opts);
  f.addNamespace(1, 64);
  await f.listen();
  cleanups.push(() => f.close());
  return f;
}

async function open(f: FakeController, extra: Record<string, unknown> = {}): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: f.port, nqn: f.subnqn, nr_io_queues: 1, duplicate_connect: true, ...extra });
  cleanups.push(() => c.disconnect());
  return c;
}

/** A hook failing the first `n` reads with `status` (or a corrupted data digest); counts every read it sees. */
function failReads(n: number, outcome: number | 'corrupt-ddgst'): { seen: () => number; onIo: NonNullable<FakeOptions['onIo']> } {
  let reads = 0;
  return {
    seen: () => reads,
    onIo: (sqe) => {
      if (sqe.opcode !== NvmOpcode.READ) return undefined;
      reads++;
      return reads <= n ? outcome : undefined;
    },
  };
}

describe('Controller I/O retries against a scripted controller', () => {
  it('waits CRDT × 100 ms before each retry when the status carries CRD', async () => {
    const h = failReads(2, Status.NS_NOT_READY | CRD(1));
    const f = await fake({ onIo: h.onIo, crdt: [1, 0, 0] });
    const c = await open(f);
    const t0 = performance.now();
    await c.namespace(1).read(0, 1);
    const ms = performance.now() - t0;
    expect(h.seen()).toBe(3);
    expect(c.ioRetries).toBe(2);
    expect(ms).toBeGreaterThanOrEqual(190);
    expect(ms).toBeLessThan(1500);
  });

  it('retries a C2H data digest error (DATA_XFER_ERROR) and returns the good data', async () => {
    const h = failReads(2, 'corrupt-ddgst');
    const f = await fake({ onIo: h.onIo });
    f.namespaces[0]?.data.fill(0x3c, 0, 512);
    const c = await open(f, { data_digest: true });
    expect((await c.namespace(1).read(0, 1)).equals(Buffer.alloc(512, 0x3c))).toBe(true);
    expect(h.seen()).toBe(3);
  });

  it('gives up after max_retries + 1 attempts with the last status; max_retries 0 sends once', async () => {
    const h = failReads(100, 'corrupt-ddgst');
    const c = await open(await fake({ onIo: h.onIo }), { data_digest: true });
    const err = await c.namespace(1).read(0, 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NvmeStatusError);
    expect((err as NvmeStatusError).status).toBe(Status.DATA_XFER_ERROR);
    expect(h.seen()).toBe(6);

    const once = failReads(100, Status.NS_NOT_READY);
    const c0 = await open(await fake({ onIo: once.onIo }), { max_retries: 0 });
    await expect(c0.namespace(1).read(0, 1)).rejects.toMatchObject({ status: Status.NS_NOT_READY });
    expect(once.seen()).toBe(1);
  });

  it('a multipath (failfast) I/O does not retry a path error on the same controller', async () => {
    const h = failReads(100, Status.ANA_INACCESSIBLE);
    const c = await open(await fake({ onIo: h.onIo }));
    await expect(c.namespace(1).read(0, 1, undefined, { failfast: true })).rejects.toMatchObject({ status: Status.ANA_INACCESSIBLE });
    expect(h.seen()).toBe(1);
  });
});
