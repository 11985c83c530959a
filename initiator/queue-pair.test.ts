// The queue pair is the one writer of SGL1 and the CID (NVMe/TCP 1.0 §3.3.3): checked against a fake HostTcpQueue.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { CqeOffset, NvmOpcode, SglType, SqeOffset, decodeSqe, encodeCqe, encodeRwCmd, sglInCapsule } from '../protocol/index.js';
import { itChecksEveryEdge } from '../test/fixtures/state-table.js';
import { PromiseRequest, QUEUE_PAIR_TRANSITIONS, QueuePair, TagSet, type QueuePairState } from './queue-pair.js';
import type { HostTcpQueue, TcpQueueHandlers } from './transport/index.js';

class FakeTcp {
  handlers: TcpQueueHandlers | undefined;
  sent: Array<{ sqe: Buffer; data: Buffer | undefined }> = [];
  closed = false;
  closeError: Error | undefined;
  setHandlers(h: TcpQueueHandlers): void {
    this.handlers = h;
  }
  sendCapsule(sqe: Buffer, data?: Buffer): void {
    this.sent.push({ sqe: Buffer.from(sqe), data });
  }
  close(): void {
    this.closed = true;
  }
  respond(cid: number, status = 0): void {
    const h = this.handlers as TcpQueueHandlers;
    h.onResponse(encodeCqe({ cid, status }), 0, h.command(cid), cid);
  }
}

function queue(inlineLimit: number): { qp: QueuePair; tcp: FakeTcp } {
  const tcp = new FakeTcp();
  const qp = new QueuePair({ qid: 1, tcp: tcp as unknown as HostTcpQueue, tags: new TagSet(4), inlineLimit, onError: () => undefined });
  qp.setLive();
  return { qp, tcp };
}

/** An SQE whose SGL says something the queue pair must overwrite. */
function rw(opcode: number): Buffer {
  return encodeRwCmd({ opcode, cid: 0, nsid: 1, slba: 0n, nlb: 1, sgl: { ...sglInCapsule(999), address: 0x1234n } });
}

describe('QueuePair SGL and CID', () => {
  it.each([
    { name: 'write within the inline limit goes in-capsule', h2c: 512, c2h: 0, limit: 4096, type: SglType.DATA_BLOCK_OFFSET, len: 512, inCapsule: true },
    { name: 'write over the inline limit goes by R2T', h2c: 8192, c2h: 0, limit: 4096, type: SglType.TRANSPORT_DATA_BLOCK, len: 8192, inCapsule: false },
    { name: 'read is a transport data block of the transfer length', h2c: 0, c2h: 4096, limit: 4096, type: SglType.TRANSPORT_DATA_BLOCK, len: 4096, inCapsule: false },
    { name: 'no data is the null SGL', h2c: 0, c2h: 0, limit: 4096, type: SglType.TRANSPORT_DATA_BLOCK, len: 0, inCapsule: false },
  ])('$name', async ({ h2c, c2h, limit, type, len, inCapsule }) => {
    const { qp, tcp } = queue(limit);
    const done = qp.submit({
      sqe: rw(h2c > 0 ? NvmOpcode.WRITE : NvmOpcode.READ),
      ...(h2c > 0 ? { h2c: Buffer.alloc(h2c) } : {}),
      ...(c2h > 0 ? { c2h: Buffer.alloc(c2h) } : {}),
      timeoutMs: 1000,
    });
    const sent = tcp.sent[0];
    expect(sent).toBeDefined();
    const sqe = decodeSqe(sent?.sqe ?? Buffer.alloc(64));
    expect(sqe.sgl).toEqual({ address: 0n, length: len, type });
    expect(sent?.sqe.subarray(SqeOffset.dptr + 12, SqeOffset.dptr + 15)).toEqual(Buffer.alloc(3));
    expect(sent?.data !== undefined).toBe(inCapsule);
    tcp.respond(sqe.cid);
    await expect(done).resolves.toMatchObject({ status: 0 });
  });

  it('forceInCapsule sends data in-capsule whatever the inline limit', () => {
    const { qp, tcp } = queue(0);
    void qp.submit({ sqe: rw(NvmOpcode.WRITE), h2c: Buffer.alloc(1024), forceInCapsule: true, timeoutMs: 1000 });
    expect(decodeSqe(tcp.sent[0]?.sqe ?? Buffer.alloc(64)).sgl.type).toBe(SglType.DATA_BLOCK_OFFSET);
  });

  it('writes the tag set CID and reads the status from the CQE', async () => {
    const { qp, tcp } = queue(4096);
    const p = qp.submit({ sqe: rw(NvmOpcode.READ), c2h: Buffer.alloc(512), timeoutMs: 1000 });
    const cid = tcp.sent[0]?.sqe.readUInt16LE(SqeOffset.cid) ?? -1;
    expect(qp.tags.matches(cid)).toBe(true);
    const cqe = encodeCqe({ cid, status: 0x0281 });
    expect(cqe.readUInt16LE(CqeOffset.status) >>> 1).toBe(0x0281);
    const h = tcp.handlers as TcpQueueHandlers;
    h.onResponse(cqe, 0, h.command(cid), cid);
    await expect(p).rejects.toMatchObject({ status: 0x0281 });
  });
});

describe('QueuePair state table', () => {
  it('has exactly the documented edges', () => {
    expect(QUEUE_PAIR_TRANSITIONS).toEqual({ connecting: ['live', 'closed'], live: ['closed'], closed: [] });
  });

  itChecksEveryEdge<QueuePairState>(QUEUE_PAIR_TRANSITIONS, 'connecting', () => {
    const tcp = new FakeTcp();
    return new QueuePair({ qid: 1, tcp: tcp as unknown as HostTcpQueue, tags: new TagSet(4), inlineLimit: 0, onError: () => undefined });
  });

  it('a closed transport closes the pair once: setLive after it changes nothing', () => {
    const tcp = new FakeTcp();
    const qp = new QueuePair({ qid: 1, tcp: tcp as unknown as HostTcpQueue, tags: new TagSet(4), inlineLimit: 0, onError: () => undefined });
    tcp.handlers?.onClose(new Error('gone'));
    expect(qp.state).toBe('closed');
    qp.setLive();
    expect(qp.state).toBe('closed');
  });
});

describe('PromiseRequest pool', () => {
  it('a request completed twice goes back to the pool once: two later requests are two objects', async () => {
    const spec = { sqe: Buffer.alloc(64), timeoutMs: 1000 };
    const r = PromiseRequest.take(spec, false);
    const done = r.settled();
    r.ioDone(undefined);
    r.ioDone(new Error('late second completion'));
    await expect(done).resolves.toMatchObject({ status: 0 });
    const a = PromiseRequest.take(spec, false);
    const b = PromiseRequest.take(spec, false);
    expect(a).not.toBe(b);
    const pa = a.settled();
    const pb = b.settled();
    a.ioDone(new Error('a failed'));
    b.ioDone(undefined);
    await expect(pa).rejects.toThrow('a failed');
    await expect(pb).resolves.toMatchObject({ status: 0 });
  });
});
