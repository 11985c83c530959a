// The fault engine's PDU-shaping actions (docs/faults.md, "NVMe/TCP-level actions") as a raw peer sees them on the
// wire: C2HData reshaped, SUCCESS forced, C2HTermReq mid-stream, digests corrupted, R2Ts past MAXR2T or the transfer,
// writes stalled or dripped, close at the Nth received PDU; and that none of them acts outside its match.
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { Fes, FeatureId, NvmOpcode, PduType, crc32c, decodeCqe, encodeSqe, type C2HDataPdu, type Pdu } from '../../../protocol/index.js';
import { armFault } from '../../../harness/faults.js';
import { bringUpAdmin, connectIo, expectOk, nextCid, readCmd, setFeatures, startTarget, writeCmd, type Harness, type RawPeer } from './fixture.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

type Digests = { hdgst?: boolean; ddgst?: boolean };

async function ioQueue(hh: Harness, digests?: Digests): Promise<RawPeer> {
  const admin = await hh.peer();
  const cntlid = await bringUpAdmin(admin);
  expectOk(await admin.command(setFeatures(FeatureId.NUM_QUEUES, 0x30003)));
  const io = await hh.peer();
  expectOk(await connectIo(io, cntlid, 1, digests !== undefined ? { digests } : {}));
  return io;
}

const hits = (hh: Harness, id: string): number | undefined => hh.svc.listFaultRules().find((r) => r.id === id)?.hits;
const flush = (cid = nextCid()): Buffer => encodeSqe({ opcode: NvmOpcode.FLUSH, cid, nsid: 1 });
/** 4 KiB of distinct bytes, so a piece at the wrong offset shows. */
const PATTERN = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7 + 3) & 0xff));

async function written(io: RawPeer, n = 4096): Promise<Buffer> {
  const data = PATTERN.subarray(0, n);
  expectOk(await io.command(writeCmd(1, 0n, n / 512), { data }));
  return data;
}

/** PDUs until (and with) the CapsuleResp, or until `ms` pass with nothing. */
async function pdusUntilResp(p: RawPeer, ms = 500): Promise<Pdu[]> {
  const out: Pdu[] = [];
  for (;;) {
    const q = await p.nextPdu(ms).catch(() => undefined);
    if (q === undefined) return out;
    out.push(q);
    if (q.type === PduType.CAPSULE_RESP) return out;
  }
}

const c2h = (ps: Pdu[]): C2HDataPdu[] => ps.filter((p): p is C2HDataPdu => p.type === PduType.C2H_DATA);
const shape = (ps: Pdu[]): [number, number, boolean, boolean][] => c2h(ps).map((p) => [p.datao, Buffer.concat(p.data).length, p.last, p.success]);

/** Every raw byte the controller sends from now on, with when each read arrived. */
function tap(p: RawPeer): { chunks: { at: number; b: Buffer }[]; bytes(): Buffer; until(n: number, ms?: number): Promise<Buffer> } {
  const chunks: { at: number; b: Buffer }[] = [];
  p.socket.on('data', (b: Buffer) => chunks.push({ at: performance.now(), b: Buffer.from(b) }));
  const bytes = (): Buffer => Buffer.concat(chunks.map((c) => c.b));
  return {
    chunks,
    bytes,
    async until(n, ms = 2000) {
      const end = performance.now() + ms;
      while (bytes().length < n && performance.now() < end) await new Promise((r) => setTimeout(r, 5));
      return bytes();
    },
  };
}

describe('C2HData shaping', () => {
  it('c2h-split: one C2HData per byte at increasing DATAO, LAST on the last, then the CapsuleResp', async () => {
    h = await startTarget();
    const io = await ioQueue(h);
    const data = await written(io, 512);
    armFault(h.svc, { id: 's', match: { opcode: NvmOpcode.READ }, schedule: { nth: 1 }, action: { kind: 'c2h-split' } });
    const r = await io.command(readCmd(1, 0n, 1));
    const got = shape(r.pdus);
    expect(got).toHaveLength(512);
    expect(got.every(([o, n, last], i) => o === i && n === 1 && last === (i === 511))).toBe(true);
    expect(r.data.equals(data)).toBe(true);
    expect(r.cqe?.status).toBe(0);
    // Only the first read (nth 1): the next one is one PDU again.
    expect(shape((await io.command(readCmd(1, 0n, 1))).pdus)).toEqual([[0, 512, true, false]]);
    expect(hits(h, 's')).toBe(1);
  });

  it('c2h-reorder: pieces sent highest DATAO first; placed by DATAO they are the data', async () => {
    h = await startTarget();
    const io = await ioQueue(h);
    const data = await written(io);
    armFault(h.svc, { match: { opcode: NvmOpcode.READ }, schedule: { nth: 1 }, action: { kind: 'c2h-reorder', size: 1024 } });
    const r = await io.command(readCmd(1, 0n, 8));
    expect(shape(r.pdus)).toEqual([
      [3072, 1024, true, false],
      [2048, 1024, false, false],
      [1024, 1024, false, false],
      [0, 1024, false, false],
    ]);
    const placed = Buffer.alloc(4096);
    for (const p of c2h(r.pdus)) Buffer.concat(p.data).copy(placed, p.datao);
    expect(placed.equals(data)).toBe(true);
    expect(r.pdus.at(-1)?.type).toBe(PduType.CAPSULE_RESP);
  });

  it('c2h-duplicate: the first piece twice, then the rest and the CapsuleResp', async () => {
    h = await startTarget();
    const io = await ioQueue(h);
    const data = await written(io);
    armFault(h.svc, { match: { opcode: NvmOpcode.READ }, schedule: { nth: 1 }, action: { kind: 'c2h-duplicate' } });
    const r = await io.command(readCmd(1, 0n, 8));
    expect(shape(r.pdus)).toEqual([
      [0, 2048, false, false],
      [0, 2048, false, false],
      [2048, 2048, true, false],
    ]);
    const [a, b] = c2h(r.pdus);
    expect(Buffer.concat(a?.data ?? []).equals(data.subarray(0, 2048))).toBe(true);
    expect(Buffer.concat(b?.data ?? []).equals(data.subarray(0, 2048))).toBe(true);
  });

  it('c2h-overrun: the last C2HData runs past the transfer length (DATAO + DATAL > 512)', async () => {
    h = await startTarget();
    const io = await ioQueue(h);
    await written(io, 512);
    armFault(h.svc, { match: { opcode: NvmOpcode.READ }, schedule: { nth: 1 }, action: { kind: 'c2h-overrun', bytes: 100 } });
    const r = await io.command(readCmd(1, 0n, 1));
    expect(shape(r.pdus)).toEqual([[0, 612, true, false]]);
    expect(r.data.subarray(0, 512).equals(PATTERN.subarray(0, 512))).toBe(true);
    expect(r.cqe?.status).toBe(0);
  });

  it('success-flag without a CapsuleResp (SQ flow control on), and with one after it', async () => {
    h = await startTarget();
    const io = await ioQueue(h);
    await written(io, 512);
    armFault(h.svc, { id: 'alone', match: { opcode: NvmOpcode.READ }, schedule: { nth: 1 }, action: { kind: 'success-flag' } });
    const r = await io.command(readCmd(1, 0n, 1));
    expect(r.cqe).toBeUndefined();
    expect(shape(r.pdus)).toEqual([[0, 512, true, true]]);
    expect(await io.nextPdu(300).catch(() => 'none')).toBe('none');
    h.svc.removeFaultRule('alone');
    armFault(h.svc, { match: { opcode: NvmOpcode.READ }, schedule: { nth: 1 }, action: { kind: 'success-flag', resp: true } });
    const sqe = readCmd(1, 0n, 1);
    const cid = sqe.readUInt16LE(2);
    io.send({ type: PduType.CAPSULE_CMD, sqe, data: [] });
    const ps = await pdusUntilResp(io);
    expect(shape(ps)).toEqual([[0, 512, true, true]]);
    const resp = ps[1];
    expect(resp?.type === PduType.CAPSULE_RESP && decodeCqe(resp.cqe)).toMatchObject({ cid, status: 0 });
  });

  it.each([Fes.INVALID_HEADER_FIELD, Fes.PDU_SEQUENCE_ERROR, Fes.HEADER_DIGEST_ERROR, Fes.DATA_OUT_OF_RANGE, Fes.DATA_LIMIT_EXCEEDED, Fes.UNSUPPORTED_PARAMETER])(
    'c2h-term-req FES %i mid-stream: half the data, then C2HTermReq with that FES and FEI, then the close',
    async (fes) => {
      h = await startTarget();
      const io = await ioQueue(h);
      await written(io);
      armFault(h.svc, { match: { opcode: NvmOpcode.READ }, schedule: { nth: 1 }, action: { kind: 'c2h-term-req', fes, fei: 0x1234 } });
      io.send({ type: PduType.CAPSULE_CMD, sqe: readCmd(1, 0n, 8), data: [] });
      const first = await io.nextPdu();
      expect(first.type === PduType.C2H_DATA && [first.datao, Buffer.concat(first.data).length, first.last]).toEqual([0, 2048, false]);
      const term = await io.nextPdu();
      expect(term.type === PduType.C2H_TERM_REQ && [term.fes, term.fei]).toEqual([fes, 0x1234]);
      await io.closed(3000);
    },
  );

  it('c2h-term-req on a command without data: the TermReq instead of the CapsuleResp', async () => {
    h = await startTarget();
    const io = await ioQueue(h);
    armFault(h.svc, { match: { opcode: NvmOpcode.FLUSH }, action: { kind: 'c2h-term-req', fes: Fes.PDU_SEQUENCE_ERROR } });
    io.send({ type: PduType.CAPSULE_CMD, sqe: flush(), data: [] });
    const term = await io.nextPdu();
    expect(term.type === PduType.C2H_TERM_REQ && term.fes).toBe(Fes.PDU_SEQUENCE_ERROR);
    await io.closed(3000);
  });
});

describe('digest errors', () => {
  it('header-digest-error: the CapsuleResp\'s HDGST is the CRC32C of its header with its first byte flipped', async () => {
    h = await startTarget();
    const io = await ioQueue(h, { hdgst: true });
    armFault(h.svc, { id: 'hd', match: { opcode: NvmOpcode.FLUSH }, action: { kind: 'header-digest-error' } });
    const t = tap(io);
    io.send({ type: PduType.CAPSULE_CMD, sqe: flush(), data: [] });
    const b = (await t.until(28)).subarray(0, 28);
    expect([b[0], b[1], b[2], b.readUInt32LE(4)]).toEqual([PduType.CAPSULE_RESP, 0x01, 24, 28]);
    const good = crc32c(b.subarray(0, 24));
    expect(b.readUInt32LE(24)).toBe((good ^ 0xff) >>> 0);
    expect(io.readerFatal?.fes).toBe(Fes.HEADER_DIGEST_ERROR);
    expect(hits(h, 'hd')).toBe(1);
  });

  it('data-digest-error: the C2HData\'s DDGST is wrong in its first byte, its header and data are not', async () => {
    h = await startTarget();
    const io = await ioQueue(h, { ddgst: true });
    await written(io, 512);
    armFault(h.svc, { match: { opcode: NvmOpcode.READ }, schedule: { nth: 1 }, action: { kind: 'data-digest-error' } });
    const t = tap(io);
    io.send({ type: PduType.CAPSULE_CMD, sqe: readCmd(1, 0n, 1), data: [] });
    const b = await t.until(24 + 512 + 4 + 24);
    expect([b[0], b.readUInt32LE(4), b.readUInt32LE(12), b.readUInt32LE(16)]).toEqual([PduType.C2H_DATA, 24 + 512 + 4, 0, 512]);
    expect(b.subarray(24, 536).equals(PATTERN.subarray(0, 512))).toBe(true);
    expect(b.readUInt32LE(536)).toBe((crc32c(PATTERN.subarray(0, 512)) ^ 0xff) >>> 0);
    expect(b[540]).toBe(PduType.CAPSULE_RESP);
  });

  it('a digest-error rule does not match a connection without that digest: the reply is untouched', async () => {
    h = await startTarget();
    // Digests off by name: this case is about a connection without them (also under NVME_TCP_TEST_DIGESTS).
    const io = await ioQueue(h, { hdgst: false, ddgst: false });
    await written(io, 512);
    armFault(h.svc, { id: 'hd', action: { kind: 'header-digest-error' } });
    armFault(h.svc, { id: 'dd', action: { kind: 'data-digest-error' } });
    const r = await io.command(readCmd(1, 0n, 1));
    expect(r.cqe?.status).toBe(0);
    expect(r.data.equals(PATTERN.subarray(0, 512))).toBe(true);
    expect([hits(h, 'hd'), hits(h, 'dd')]).toEqual([0, 0]);
  });
});

describe('R2T shaping', () => {
  it('r2t-past-maxr2t: two R2Ts at once for one command (same TTAG, consecutive ranges); answered, the write lands', async () => {
    h = await startTarget();
    const io = await ioQueue(h);
    armFault(h.svc, { match: { opcode: NvmOpcode.WRITE }, schedule: { nth: 1 }, action: { kind: 'r2t-past-maxr2t' } });
    const r = await io.command(writeCmd(1, 0n, 8), { data: PATTERN });
    const r2ts = r.pdus.filter((p) => p.type === PduType.R2T);
    expect(r2ts.map((p) => p.type === PduType.R2T && [p.r2to, p.r2tl])).toEqual([
      [0, 2048],
      [2048, 2048],
    ]);
    expect(new Set(r2ts.map((p) => p.type === PduType.R2T && p.ttag)).size).toBe(1);
    expect(r.cqe?.status).toBe(0);
    expect((await io.command(readCmd(1, 0n, 8))).data.equals(PATTERN)).toBe(true);
  });

  it('r2t-past-transfer: one R2T whose R2TO + R2TL is past the command\'s 512 bytes', async () => {
    h = await startTarget();
    const io = await ioQueue(h);
    armFault(h.svc, { match: { opcode: NvmOpcode.WRITE }, schedule: { nth: 1 }, action: { kind: 'r2t-past-transfer', bytes: 4096 } });
    io.send({ type: PduType.CAPSULE_CMD, sqe: writeCmd(1, 0n, 1), data: [] });
    const r2t = await io.nextPdu();
    expect(r2t.type === PduType.R2T && [r2t.r2to, r2t.r2tl]).toEqual([0, 512 + 4096]);
  });
});

describe('socket write shaping', () => {
  it('stall mid-PDU for a time: 4 bytes of the CapsuleResp, then the rest no sooner than asked', async () => {
    h = await startTarget();
    const io = await ioQueue(h);
    armFault(h.svc, { match: { opcode: NvmOpcode.FLUSH }, schedule: { nth: 1 }, action: { kind: 'stall', ms: 300 } });
    const t = tap(io);
    const t0 = performance.now();
    const r = io.command(flush());
    await t.until(4);
    expect(t.bytes().length).toBe(4);
    expectOk(await r);
    const rest = t.chunks.find((c) => c.b.length > 0 && t.chunks.indexOf(c) > 0);
    expect((rest?.at ?? 0) - t0).toBeGreaterThanOrEqual(290);
    // Over: the next reply comes at once.
    const t1 = performance.now();
    expectOk(await io.command(flush()));
    expect(performance.now() - t1).toBeLessThan(250);
  });

  it('stall forever: after afterBytes nothing more comes, including later replies; the socket stays open', async () => {
    h = await startTarget();
    const io = await ioQueue(h);
    armFault(h.svc, { match: { opcode: NvmOpcode.FLUSH }, schedule: { nth: 1 }, action: { kind: 'stall', afterBytes: 10 } });
    const t = tap(io);
    io.send({ type: PduType.CAPSULE_CMD, sqe: flush(), data: [] });
    io.send({ type: PduType.CAPSULE_CMD, sqe: flush(), data: [] });
    await new Promise((r) => setTimeout(r, 400));
    expect(t.bytes().length).toBe(10);
    expect(io.isClosed).toBe(false);
  });

  it('drip: the CapsuleResp in 4-byte slices every 20 ms', async () => {
    h = await startTarget();
    const io = await ioQueue(h);
    armFault(h.svc, { match: { opcode: NvmOpcode.FLUSH }, schedule: { nth: 1 }, action: { kind: 'drip', bytes: 4, intervalMs: 20 } });
    const t = tap(io);
    const t0 = performance.now();
    expectOk(await io.command(flush()));
    expect(performance.now() - t0).toBeGreaterThanOrEqual(5 * 20 - 5);
    // A CapsuleResp: 8-byte CH + 16-byte CQE, and a 4-byte HDGST when header digests are on (NVMe-TCP 1.0 §3.6.2.7).
    expect(t.bytes().length).toBe(24 + (io.framing.hdgst ? 4 : 0));
    expect(t.chunks.every((c) => c.b.length <= 4)).toBe(true);
  });
});

describe('close at the Nth received PDU', () => {
  it('event "pdu" counts H2CData: the 3rd PDU of the I/O queue (Connect, Write, its H2CData) closes with FIN', async () => {
    h = await startTarget();
    armFault(h.svc, { id: 'n', match: { event: 'pdu', qid: 1 }, schedule: { nth: 3 }, action: { kind: 'close' } });
    const io = await ioQueue(h);
    const closed = io.closed(3000);
    const r = io.command(writeCmd(1, 0n, 8), { data: PATTERN }).then(
      () => 'completed',
      () => 'failed',
    );
    await closed;
    expect(await r).toBe('failed');
    expect(hits(h, 'n')).toBe(1);
  });

  it('pduType 6 counts H2CData only: the 2nd H2CData resets the connection; a rule for another queue never fires', async () => {
    h = await startTarget();
    armFault(h.svc, { id: 'h2c', match: { event: 'pdu', pduType: 6, qid: 1 }, schedule: { nth: 2 }, action: { kind: 'close', rst: true } });
    armFault(h.svc, { id: 'other', match: { event: 'pdu', qid: 2 }, action: { kind: 'close', rst: true } });
    const io = await ioQueue(h);
    expectOk(await io.command(writeCmd(1, 0n, 1), { data: PATTERN.subarray(0, 512) }));
    let rst = false;
    io.socket.on('error', (e: NodeJS.ErrnoException) => (rst ||= e.code === 'ECONNRESET'));
    await io.command(writeCmd(1, 0n, 8), { data: PATTERN, maxh2cdata: 1024 }).catch(() => undefined);
    await io.closed(3000);
    expect(rst).toBe(true);
    expect([hits(h, 'h2c'), hits(h, 'other')]).toEqual([1, 0]);
  });
});

describe('a PDU-shaping rule never acts outside its match', () => {
  it('reads of another namespace, writes, flushes and the admin queue keep their usual PDUs', async () => {
    h = await startTarget();
    const admin = await h.peer();
    const cntlid = await bringUpAdmin(admin);
    expectOk(await admin.command(setFeatures(FeatureId.NUM_QUEUES, 0x30003)));
    const io = await h.peer();
    expectOk(await connectIo(io, cntlid, 1));
    for (const kind of ['c2h-split', 'c2h-reorder', 'c2h-duplicate', 'c2h-overrun', 'success-flag'] as const) armFault(h.svc, { id: kind, match: { nsid: 2 }, action: { kind } });
    armFault(h.svc, { id: 'term', match: { qid: 2 }, action: { kind: 'c2h-term-req', fes: 1 } });
    armFault(h.svc, { id: 'stall', match: { opcode: NvmOpcode.COMPARE }, action: { kind: 'stall' } });
    armFault(h.svc, { id: 'r2t', match: { opcode: NvmOpcode.READ }, action: { kind: 'r2t-past-transfer' } });
    armFault(h.svc, { id: 'r2tq', match: { qid: 0 }, action: { kind: 'r2t-past-maxr2t' } });
    await written(io);
    const r = await io.command(readCmd(1, 0n, 8));
    expect(shape(r.pdus)).toEqual([[0, 4096, true, false]]);
    expect(r.cqe?.status).toBe(0);
    expectOk(await io.command(flush()));
    expect(Object.fromEntries(h.svc.listFaultRules().map((x) => [x.id, x.hits]))).toEqual({
      'c2h-split': 0,
      'c2h-reorder': 0,
      'c2h-duplicate': 0,
      'c2h-overrun': 0,
      'success-flag': 0,
      term: 0,
      stall: 0,
      r2t: 0,
      r2tq: 0,
    });
  });
});
