// Table-driven codec tests: every PDU type × digests × PDA, expected bytes from the independent
// test builder; each case is decoded (whole, byte by byte, split at every offset), encoded, and round-tripped.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { byteByByte, readChunks, splitAt, summarize, type Framing, type ReadOptions } from '../../test/fixtures/pdu-stream.js';
import { C2HPayload, encodeDataDigestInto, encodePdu, encodePduInto, encodedLength, PDU_MAX_HEADER_BYTES, PduBatch, pduHasDataDigest, PduType, type C2HDataPdu, type Pdu, type ReceiverRole } from './index.js';
import * as B from '../testing/pdu-builder.js';

const FR = {
  plain: { hdgst: false, ddgst: false, pda: 0 },
  hd: { hdgst: true, ddgst: false, pda: 0 },
  dd: { hdgst: false, ddgst: true, pda: 0 },
  both: { hdgst: true, ddgst: true, pda: 0 },
  plainPda1: { hdgst: false, ddgst: false, pda: 1 },
  bothPda3: { hdgst: true, ddgst: true, pda: 3 },
  hdPda31: { hdgst: true, ddgst: false, pda: 31 },
} as const satisfies Record<string, Framing>;
type FrName = keyof typeof FR;

interface Case {
  name: string;
  role: ReceiverRole;
  framing: Framing;
  fields: Pdu;
  /** Expected wire bytes, laid out by protocol/testing/pdu-builder.ts. */
  bytes: Buffer;
  /** What decoding the bytes yields, when it differs from `fields` (TermReq error data over 128 bytes). */
  decoded?: Pdu;
}

const SQE_READ = B.sqe({ opcode: 0x02, cid: 0x3007, nsid: 1, sglType: 0x5a, sglLen: 4096, cdw10: 16 });
const SQE_WRITE_ICD = (len: number): Buffer => B.sqe({ opcode: 0x01, cid: 0x1011, nsid: 1, sglType: 0x01, sglLen: len });
const CQE_OK = B.cqe({ cid: 0x3007, sqhd: 12, sqid: 1 });
const CQE_ERR = B.cqe({ cid: 31, sqhd: 0xffff, sqid: 0, status: 0x4006, dw0: 0xdeadbeef });
const D = {
  tiny: B.pattern(1, 0x11),
  odd: B.pattern(37, 0x22),
  k4: B.pattern(4096, 0x33, 13),
  parts: [B.pattern(10, 0x44), Buffer.alloc(0), B.pattern(3, 0x55), B.pattern(250, 0x66)],
};
const cat = (bufs: readonly Buffer[]): Buffer => Buffer.concat(bufs);

function each<T>(frames: readonly FrName[], make: (fr: Framing, frName: FrName) => T): T[] {
  return frames.map((n) => make(FR[n], n));
}

const CASES: Case[] = [
  // IC PDUs: 128 bytes, never digests; the framing they negotiate applies to what follows.
  { name: 'ICReq all zero', role: 'controller', framing: FR.plain, fields: { type: PduType.IC_REQ, pfv: 0, hpda: 0, dgst: 0, maxr2t: 0 }, bytes: B.icReq({}) },
  { name: 'ICReq dgst 3, hpda 5, maxr2t 3', role: 'controller', framing: FR.both, fields: { type: PduType.IC_REQ, pfv: 0, hpda: 5, dgst: 3, maxr2t: 3 }, bytes: B.icReq({ dgst: 3, hpda: 5, maxr2t: 3 }) },
  { name: 'ICResp maxh2cdata 128 KiB', role: 'host', framing: FR.plain, fields: { type: PduType.IC_RESP, pfv: 0, cpda: 0, dgst: 0, maxh2cdata: 131072 }, bytes: B.icResp({ maxh2cdata: 131072 }) },
  { name: 'ICResp dgst 3, cpda 31, maxh2cdata 0xfffffffc', role: 'host', framing: FR.both, fields: { type: PduType.IC_RESP, pfv: 0, cpda: 31, dgst: 3, maxh2cdata: 0xfffffffc }, bytes: B.icResp({ dgst: 3, cpda: 31, maxh2cdata: 0xfffffffc }) },

  // TermReq: no digests even when negotiated; error data ≤ 128 bytes, longer is cut to 128 (plen ≤ 152).
  ...[0, 8, 128].flatMap((n) =>
    (['controller', 'host'] as const).map((role): Case => {
      const type = role === 'controller' ? PduType.H2C_TERM_REQ : PduType.C2H_TERM_REQ;
      const errorData = B.pattern(n, n);
      return { name: `${type === 2 ? 'H2C' : 'C2H'}TermReq with ${n} bytes of error data`, role, framing: FR.both, fields: { type, fes: 1, fei: 0x1234567, errorData }, bytes: B.termReq(type, { fes: 1, fei: 0x1234567, errorData }) };
    }),
  ),
  ...(['controller', 'host'] as const).map((role): Case => {
    const type = role === 'controller' ? PduType.H2C_TERM_REQ : PduType.C2H_TERM_REQ;
    const errorData = B.pattern(200, 9);
    return {
      name: `${type === 2 ? 'H2C' : 'C2H'}TermReq with 200 bytes of error data (cut to 128)`,
      role,
      framing: FR.plain,
      fields: { type, fes: 6, fei: 8, errorData },
      bytes: B.termReq(type, { fes: 6, fei: 8, errorData }),
      decoded: { type, fes: 6, fei: 8, errorData: errorData.subarray(0, 128) },
    };
  }),

  // CapsuleCmd: without data (pdo 0), with in-capsule data in one or several buffers.
  ...each(['plain', 'hd', 'both', 'bothPda3'], (fr, n): Case => ({
    name: `CapsuleCmd no data [${n}]`,
    role: 'controller',
    framing: fr,
    fields: { type: PduType.CAPSULE_CMD, sqe: SQE_READ, data: [] },
    bytes: B.capsuleCmd({ sqe: SQE_READ }, fr),
  })),
  {
    name: 'CapsuleCmd with only empty data buffers (same as no data)',
    role: 'controller',
    framing: FR.both,
    fields: { type: PduType.CAPSULE_CMD, sqe: SQE_READ, data: [Buffer.alloc(0), Buffer.alloc(0)] },
    bytes: B.capsuleCmd({ sqe: SQE_READ }, FR.both),
    decoded: { type: PduType.CAPSULE_CMD, sqe: SQE_READ, data: [] },
  },
  ...each(['plain', 'hd', 'dd', 'both', 'plainPda1', 'bothPda3', 'hdPda31'], (fr, n): Case => ({
    name: `CapsuleCmd 4 KiB in-capsule [${n}]`,
    role: 'controller',
    framing: fr,
    fields: { type: PduType.CAPSULE_CMD, sqe: SQE_WRITE_ICD(4096), data: [D.k4] },
    bytes: B.capsuleCmd({ sqe: SQE_WRITE_ICD(4096), data: D.k4 }, fr),
  })),
  ...each(['plain', 'both', 'bothPda3'], (fr, n): Case => ({
    name: `CapsuleCmd data in 4 buffers (one empty) [${n}]`,
    role: 'controller',
    framing: fr,
    fields: { type: PduType.CAPSULE_CMD, sqe: SQE_WRITE_ICD(263), data: D.parts },
    bytes: B.capsuleCmd({ sqe: SQE_WRITE_ICD(263), data: cat(D.parts) }, fr),
  })),
  {
    name: 'CapsuleCmd 1 data byte [both]',
    role: 'controller',
    framing: FR.both,
    fields: { type: PduType.CAPSULE_CMD, sqe: SQE_WRITE_ICD(1), data: [D.tiny] },
    bytes: B.capsuleCmd({ sqe: SQE_WRITE_ICD(1), data: D.tiny }, FR.both),
  },

  // CapsuleResp: never data, so DDGST never applies.
  ...each(['plain', 'hd', 'both', 'hdPda31'], (fr, n): Case => ({
    name: `CapsuleResp [${n}]`,
    role: 'host',
    framing: fr,
    fields: { type: PduType.CAPSULE_RESP, cqe: n === 'both' ? CQE_ERR : CQE_OK },
    bytes: B.capsuleResp({ cqe: n === 'both' ? CQE_ERR : CQE_OK }, fr),
  })),

  // H2CData
  ...each(['plain', 'hd', 'dd', 'both', 'plainPda1', 'bothPda3', 'hdPda31'], (fr, n): Case => ({
    name: `H2CData 37 bytes LAST [${n}]`,
    role: 'controller',
    framing: fr,
    fields: { type: PduType.H2C_DATA, cccid: 0x1011, ttag: 0xabcd, datao: 8192, last: true, data: [D.odd] },
    bytes: B.h2cData({ cccid: 0x1011, ttag: 0xabcd, datao: 8192, last: true, data: D.odd }, fr),
  })),
  ...each(['plain', 'both', 'bothPda3'], (fr, n): Case => ({
    name: `H2CData not last, data in 4 buffers [${n}]`,
    role: 'controller',
    framing: fr,
    fields: { type: PduType.H2C_DATA, cccid: 65535, ttag: 0, datao: 0xfffff000, last: false, data: D.parts },
    bytes: B.h2cData({ cccid: 65535, ttag: 0, datao: 0xfffff000, last: false, data: cat(D.parts) }, fr),
  })),

  // C2HData with each LAST/SUCCESS combination the spec allows (SUCCESS requires LAST).
  ...each(['plain', 'hd', 'dd', 'both', 'plainPda1', 'bothPda3', 'hdPda31'], (fr, n): Case => ({
    name: `C2HData 4 KiB LAST [${n}]`,
    role: 'host',
    framing: fr,
    fields: { type: PduType.C2H_DATA, cccid: 0x3007, datao: 0, last: true, success: false, data: [D.k4] },
    bytes: B.c2hData({ cccid: 0x3007, datao: 0, last: true, data: D.k4 }, fr),
  })),
  ...each(['plain', 'both'], (fr, n): Case => ({
    name: `C2HData LAST|SUCCESS [${n}]`,
    role: 'host',
    framing: fr,
    fields: { type: PduType.C2H_DATA, cccid: 7, datao: 4096, last: true, success: true, data: [D.tiny] },
    bytes: B.c2hData({ cccid: 7, datao: 4096, last: true, success: true, data: D.tiny }, fr),
  })),
  ...each(['plain', 'both', 'bothPda3'], (fr, n): Case => ({
    name: `C2HData not last, data in 4 buffers [${n}]`,
    role: 'host',
    framing: fr,
    fields: { type: PduType.C2H_DATA, cccid: 1, datao: 512, last: false, success: false, data: D.parts },
    bytes: B.c2hData({ cccid: 1, datao: 512, data: cat(D.parts) }, fr),
  })),

  // R2T: never data.
  ...each(['plain', 'hd', 'both', 'hdPda31'], (fr, n): Case => ({
    name: `R2T [${n}]`,
    role: 'host',
    framing: fr,
    fields: { type: PduType.R2T, cccid: 0x1011, ttag: 0xbeef, r2to: 4096, r2tl: 0x400000 },
    bytes: B.r2t({ cccid: 0x1011, ttag: 0xbeef, r2to: 4096, r2tl: 0x400000 }, fr),
  })),
];

const isIc = (p: Pdu): boolean => p.type === PduType.IC_REQ || p.type === PduType.IC_RESP;
const full = (p: Pdu): ReturnType<typeof summarize> => summarize(p, Number.POSITIVE_INFINITY);

function decode(c: Case, chunks: Buffer[]): Pdu {
  const opts: ReadOptions = { role: c.role, framing: c.framing, primed: !isIc(c.fields) };
  const r = readChunks(chunks, opts);
  expect(r.fatals).toEqual([]);
  expect(r.pdus).toHaveLength(1);
  return r.pdus[0] as Pdu;
}

describe('PDU codec table', () => {
  it('covers all nine PDU types', () => {
    expect(new Set(CASES.map((c) => c.fields.type)).size).toBe(9);
  });

  describe('decode', () => {
    it.each(CASES)('$name', (c) => {
      expect(full(decode(c, [c.bytes]))).toEqual(full(c.decoded ?? c.fields));
    });
  });

  describe('decode byte by byte and split at every offset', () => {
    it.each(CASES)('$name', (c) => {
      // Data compared as length + CRC here: thousands of splits of a 4 KiB PDU would otherwise dominate the run.
      const want = JSON.stringify(summarize(c.decoded ?? c.fields));
      expect(full(decode(c, byteByByte(c.bytes)))).toEqual(full(c.decoded ?? c.fields));
      const bad: number[] = [];
      for (let at = 1; at < c.bytes.length; at++) {
        const r = readChunks(splitAt(c.bytes, [at]), { role: c.role, framing: c.framing, primed: !isIc(c.fields) });
        if (r.fatals.length !== 0 || r.pdus.length !== 1 || JSON.stringify(summarize(r.pdus[0] as Pdu)) !== want) bad.push(at);
      }
      expect(bad, 'split offsets that decoded differently').toEqual([]);
    });
  });

  describe('encode', () => {
    it.each(CASES)('$name', (c) => {
      const parts = encodePdu(c.fields, c.framing);
      expect(encodedLength(parts)).toBe(c.bytes.length);
      expect(Buffer.concat(parts).toString('hex')).toBe(c.bytes.toString('hex'));
    });
  });

  describe('round trip: decode(encode(fields)) and encode(decode(bytes))', () => {
    it.each(CASES)('$name', (c) => {
      const again = decode(c, encodePdu(c.fields, c.framing));
      expect(full(again)).toEqual(full(c.decoded ?? c.fields));
      expect(Buffer.concat(encodePdu(decode(c, [c.bytes]), c.framing)).toString('hex')).toBe(c.bytes.toString('hex'));
    });
  });
});

// The batching writers share the header code with encodePdu but have their own data/digest paths: hold every one of
// them to the builder's bytes too.
const dataOf = (p: Pdu): Buffer[] => (p.type === PduType.CAPSULE_CMD || p.type === PduType.H2C_DATA || p.type === PduType.C2H_DATA ? p.data : []);

describe('batching encoders produce the same bytes', () => {
  it.each(CASES)('encodePduInto + data views + encodeDataDigestInto: $name', (c) => {
    const dst = Buffer.alloc(PDU_MAX_HEADER_BYTES + 8, 0xee);
    const n = encodePduInto(dst, 3, c.fields, c.framing);
    expect(n).toBeLessThanOrEqual(PDU_MAX_HEADER_BYTES);
    const parts = [dst.subarray(3, 3 + n), ...dataOf(c.fields)];
    if (pduHasDataDigest(c.fields, c.framing)) {
      const tail = Buffer.alloc(4);
      expect(encodeDataDigestInto(tail, 0, c.fields)).toBe(4);
      parts.push(tail);
    }
    expect(Buffer.concat(parts).toString('hex')).toBe(c.bytes.toString('hex'));
  });

  it.each([0, 64, 1 << 20])('PduBatch.add of every table row, copyMax %i, one take()', (copyMax) => {
    const batch = new PduBatch(4096, copyMax);
    for (const c of CASES) batch.add(c.fields, c.framing);
    const want = Buffer.concat(CASES.map((c) => c.bytes));
    expect(batch.bytes).toBe(want.length);
    expect(Buffer.concat(batch.take()).toString('hex')).toBe(want.toString('hex'));
  });

  it('PduBatch.add writes every byte of every row over a reused slab full of garbage (reserved bytes, padding)', () => {
    // Fill the slab with 0xee through a copied payload, then recycle it: the next batch starts at the same bytes.
    const junk: Pdu = { type: PduType.H2C_DATA, cccid: 1, ttag: 1, datao: 0, last: true, data: [Buffer.alloc(32 * 1024, 0xee)] };
    const copying = new PduBatch(64 * 1024, 1 << 20);
    copying.add(junk, FR.plain);
    copying.take();
    copying.recycle(false);
    for (const c of CASES) copying.add(c.fields, c.framing);
    expect(Buffer.concat(copying.take()).toString('hex')).toBe(Buffer.concat(CASES.map((c) => c.bytes)).toString('hex'));
  });

  it.each([C2HPayload.VIEW, C2HPayload.COPY, C2HPayload.SNAPSHOT])('PduBatch.add of C2HData (payload mode %i) and addCapsuleRespCqe match the table', (payload) => {
    const rows = CASES.filter((c) => c.fields.type === PduType.C2H_DATA || c.fields.type === PduType.CAPSULE_RESP);
    expect(rows.length).toBeGreaterThan(10);
    for (const copyMax of [0, 1 << 20]) {
      const batch = new PduBatch(8192, copyMax);
      for (const c of rows) {
        if (c.fields.type === PduType.C2H_DATA) batch.add(c.fields, c.framing, payload);
        else if (c.fields.type === PduType.CAPSULE_RESP) {
          const q = c.fields.cqe;
          // The field-wise writer sends the phase bit as 0 (NVMe/TCP); a row with it set goes through add().
          if ((q[14] as number) & 1) batch.add(c.fields, c.framing);
          else batch.addCapsuleRespCqe(q.readUInt32LE(0), q.readUInt32LE(4), q.readUInt16LE(8), q.readUInt16LE(10), q.readUInt16LE(12), q.readUInt16LE(14) >> 1, c.framing);
        }
      }
      expect(Buffer.concat(batch.take()).toString('hex')).toBe(Buffer.concat(rows.map((c) => c.bytes)).toString('hex'));
    }
  });

  it('PduBatch reuses its slab only after recycle(false), never under bytes still being written', () => {
    const batch = new PduBatch(4096, 1 << 20);
    const a = CASES.find((c) => c.name === 'CapsuleResp [both]');
    const b = CASES.find((c) => c.name === 'R2T [hd]');
    if (a === undefined || b === undefined) throw new Error('table rows missing');
    batch.add(a.fields, a.framing);
    // take() returns the batch's own array (valid until the next add), so keep a copy of the chunk list.
    const first = [...batch.take()];
    const firstHex = Buffer.concat(first).toString('hex');
    batch.recycle(true);
    batch.add(b.fields, b.framing);
    expect(Buffer.concat(first).toString('hex')).toBe(firstHex);
    expect(Buffer.concat(batch.take()).toString('hex')).toBe(b.bytes.toString('hex'));
    batch.recycle(false);
    batch.add(a.fields, a.framing);
    expect(Buffer.concat(batch.take()).toString('hex')).toBe(a.bytes.toString('hex'));
  });

  it('a C2HData `ddgst` given by the sender is written as is (and a wrong one shows)', () => {
    const data = B.pattern(64, 5);
    const good = B.c2hData({ cccid: 1, datao: 0, last: true, data }, FR.dd);
    const crc = good.readUInt32LE(good.length - 4);
    const pdu: C2HDataPdu = { type: PduType.C2H_DATA, cccid: 1, datao: 0, last: true, success: false, data: [data] };
    expect(Buffer.concat(encodePdu({ ...pdu, ddgst: crc }, FR.dd)).equals(good)).toBe(true);
    expect(Buffer.concat(encodePdu({ ...pdu, ddgst: crc ^ 1 }, FR.dd)).equals(good)).toBe(false);
  });
});

describe('zero copy', () => {
  it('encodePdu passes payload buffers through as the same objects, skipping empty ones', () => {
    const data = [B.pattern(100, 1), Buffer.alloc(0), B.pattern(50, 2)];
    const parts = encodePdu({ type: PduType.H2C_DATA, cccid: 1, ttag: 2, datao: 0, last: true, data }, FR.both);
    expect(parts).toHaveLength(4);
    expect(parts[1]).toBe(data[0]);
    expect(parts[2]).toBe(data[2]);
    expect(parts[3]).toHaveLength(4);
  });

  it('the reader hands out data as views into the received chunk, and the SQE/CQE as header views', () => {
    const chunk = Buffer.concat([B.icReq({}), B.capsuleCmd({ sqe: SQE_WRITE_ICD(37), data: D.odd })]);
    const r = readChunks([chunk], { role: 'controller' });
    const cmd = r.pdus[1];
    expect(cmd?.type).toBe(PduType.CAPSULE_CMD);
    if (cmd?.type !== PduType.CAPSULE_CMD) return;
    expect(cmd.data).toHaveLength(1);
    expect(cmd.data[0]?.buffer).toBe(chunk.buffer);
    expect(cmd.data[0]?.byteOffset).toBe(chunk.byteOffset + 128 + 72);
    expect(cmd.sqe.buffer).toBe(chunk.buffer);
  });

  it('writes zeros into reserved bytes and padding even when the pool slab is dirty', () => {
    // allocUnsafe reuses the shared pool; fill it with garbage first.
    for (let i = 0; i < 64; i++) Buffer.allocUnsafe(128).fill(0xa5);
    const bytes = Buffer.concat(encodePdu({ type: PduType.C2H_DATA, cccid: 1, datao: 0, last: true, success: false, data: [D.tiny] }, FR.hdPda31));
    expect(bytes.toString('hex')).toBe(B.c2hData({ cccid: 1, datao: 0, last: true, data: D.tiny }, FR.hdPda31).toString('hex'));
  });
});
