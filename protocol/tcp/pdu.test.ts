// Table-driven codec tests: every PDU type × digests × PDA, expected bytes from the independent
// test builder; each case is decoded (whole, byte by byte, split at every offset), encoded, and round-tripped.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { byteByByte, readChunks, splitAt, summarize, type Framing, type ReadOptions } from '../../test/fixtures/pdu-stream.js';
import { encodePdu, encodePduInto, PDU_MAX_HEADER_BYTES, PduReader, PduType, type C2HDataPdu, type Pdu } from './index.js';
import * as B from '../testing/pdu-builder.js';

import { CASES, D, FR, SQE_WRITE_ICD, type Case } from '../testing/pdu-cases.js';

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
  it.each(CASES)('encodePduInto + data views (+ the builder DDGST): $name', (c) => {
    const dst = Buffer.alloc(PDU_MAX_HEADER_BYTES + 8, 0xee);
    const n = encodePduInto(dst, 3, c.fields, c.framing);
    expect(n).toBeLessThanOrEqual(PDU_MAX_HEADER_BYTES);
    const data = Buffer.concat(dataOf(c.fields));
    // DDGST follows the data when there is data and data digests are on (TCP 1.0 §3.6.1.4); it is the builder's.
    const ddgst = c.framing.ddgst && data.length > 0 ? c.bytes.subarray(c.bytes.length - 4) : Buffer.alloc(0);
    expect(Buffer.concat([dst.subarray(3, 3 + n), data, ddgst]).toString('hex')).toBe(c.bytes.toString('hex'));
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

  it('the reader hands a sink the SQE as a header view of the received chunk and copies the data once, into the sink', () => {
    const chunk = Buffer.concat([B.icReq({}), B.capsuleCmd({ sqe: SQE_WRITE_ICD(37), data: D.odd })]);
    const dst = Buffer.alloc(D.odd.length + 8);
    const sqes: Buffer[] = [];
    const r = new PduReader({
      role: 'controller',
      onPdu: () => undefined,
      onFatal: (f) => {
        throw new Error(f.reason);
      },
      sink: {
        header: (_type, psh) => {
          sqes.push(psh);
          return { buf: dst, at: 8 };
        },
        end: () => undefined,
      },
    });
    r.push(chunk);
    expect(sqes).toHaveLength(1);
    expect(sqes[0]?.buffer).toBe(chunk.buffer);
    expect(sqes[0]?.byteOffset).toBe(chunk.byteOffset + 128 + 8);
    expect(sqes[0]?.length).toBe(64);
    expect(dst.subarray(8).equals(D.odd)).toBe(true);
  });

  it('writes zeros into reserved bytes and padding even when the pool slab is dirty', () => {
    // allocUnsafe reuses the shared pool; fill it with garbage first.
    for (let i = 0; i < 64; i++) Buffer.allocUnsafe(128).fill(0xa5);
    const bytes = Buffer.concat(encodePdu({ type: PduType.C2H_DATA, cccid: 1, datao: 0, last: true, success: false, data: [D.tiny] }, FR.hdPda31));
    expect(bytes.toString('hex')).toBe(B.c2hData({ cccid: 1, datao: 0, last: true, data: D.tiny }, FR.hdPda31).toString('hex'));
  });
});
