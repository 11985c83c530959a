// PduReader's host read path without PDU objects (onCapsuleResp, onC2HDataHeader/End): data copied straight into the
// command's buffer across any chunking, the same findings as the general path for malformed headers, and the
// general path whenever digests are on. Bytes come from the independent test builder.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { Fes, PduFlag, PduReader, PduType } from './index.js';
import * as B from '../testing/pdu-builder.js';

interface Seen {
  pdus: number[];
  fatals: Array<[number, number]>;
  headers: number[][];
  ends: number[][];
  resps: number[];
}

function reader(dest: Buffer | undefined, opts: { ddgst?: boolean } = {}): { r: PduReader; seen: Seen } {
  const seen: Seen = { pdus: [], fatals: [], headers: [], ends: [], resps: [] };
  const r: PduReader = new PduReader({
    role: 'host',
    reusesChunks: true,
    onPdu: (p) => {
      seen.pdus.push(p.type);
      if (p.type === PduType.IC_RESP) r.setFraming(false, opts.ddgst ?? false, 0);
    },
    onFatal: (f) => seen.fatals.push([f.fes, f.fei]),
    onCapsuleResp: (buf, at) => seen.resps.push(buf.readUInt16LE(at + 12)),
    onC2HDataHeader: (cccid, datao, datal, flags) => {
      seen.headers.push([cccid, datao, datal, flags]);
      return dest;
    },
    onC2HDataEnd: (cccid, datal, flags) => seen.ends.push([cccid, datal, flags]),
  });
  return { r, seen };
}

/** Feed `bytes` in pieces of `size` through one reused buffer, overwritten after each push (as a socket's rxBuffer is). */
function feed(r: PduReader, bytes: Buffer, size: number): void {
  const rx = Buffer.alloc(size);
  for (let i = 0; i < bytes.length; i += size) {
    const n = bytes.copy(rx, 0, i, Math.min(bytes.length, i + size));
    r.push(rx.subarray(0, n));
    rx.fill(0xee);
  }
}

describe('PduReader direct host read path', () => {
  const a = B.pattern(300, 1, 3);
  const b = B.pattern(200, 5, 11);
  const stream = Buffer.concat([
    B.icResp({}),
    B.c2hData({ cccid: 3, datao: 0, data: a }),
    B.c2hData({ cccid: 3, datao: 300, last: true, success: true, data: b }),
    B.capsuleResp({ cqe: B.cqe({ cid: 5 }) }),
  ]);

  for (const size of [1, 7, 23, 24, 25, 4096]) {
    it(`copies C2HData into the command buffer and hands CQEs in place, in ${size}-byte reads`, () => {
      const dest = Buffer.alloc(500);
      const { r, seen } = reader(dest);
      feed(r, stream, size);
      expect(seen.fatals).toEqual([]);
      expect(seen.pdus).toEqual([PduType.IC_RESP]);
      expect(dest.equals(Buffer.concat([a, b]))).toBe(true);
      const ls = PduFlag.DATA_LAST | PduFlag.DATA_SUCCESS;
      expect(seen.headers).toEqual([[3, 0, 300, 0], [3, 300, 200, ls]]);
      expect(seen.ends).toEqual([[3, 300, 0], [3, 200, ls]]);
      expect(seen.resps).toEqual([5]);
      expect(r.bytesIn).toBe(stream.length);
    });
  }

  it('copies from the current read when later reads put other PDUs at the same offsets of the same or another buffer', () => {
    // Reads 1–2 through one buffer, read 3 through another: every PDU lands at an offset an earlier read used too,
    // with other data and, for the second PDU, other lengths.
    const dests = [Buffer.alloc(64), Buffer.alloc(64)];
    const r = new PduReader({
      role: 'host',
      reusesChunks: true,
      onPdu: (p) => {
        if (p.type === PduType.IC_RESP) r.setFraming(false, false, 0);
      },
      onFatal: (f) => {
        throw new Error(`fatal ${f.fes}`);
      },
      onC2HDataHeader: (cccid) => dests[cccid],
      onC2HDataEnd: () => undefined,
    });
    r.push(B.icResp({}));
    const rxA = Buffer.alloc(256);
    const rxB = Buffer.alloc(256);
    for (const [rx, seed, len2] of [
      [rxA, 1, 40],
      [rxA, 7, 64],
      [rxB, 13, 40],
    ] as const) {
      const d0 = B.pattern(64, seed, 3);
      const d1 = B.pattern(len2, seed + 1, 5);
      const n = Buffer.concat([B.c2hData({ cccid: 0, datao: 0, data: d0 }), B.c2hData({ cccid: 1, datao: 0, data: d1 })]).copy(rx);
      r.push(rx.subarray(0, n));
      rx.fill(0xee);
      expect(dests[0]?.equals(d0)).toBe(true);
      expect(dests[1]?.subarray(0, len2).equals(d1)).toBe(true);
    }
  });

  it('a malformed C2HData header leaves the direct path and fails as the general path does', () => {
    const cases: Array<[Buffer, [number, number]]> = [
      [B.c2hData({ cccid: 3, datao: 0, success: true, data: a }), [Fes.INVALID_HEADER_FIELD, 1]],
      [B.c2hData({ cccid: 3, datao: 0, datal: 299, data: a }), [Fes.INVALID_HEADER_FIELD, 16]],
      [B.c2hData({ cccid: 3, datao: 0, data: a }, undefined, { pdo: 28 }), [Fes.INVALID_HEADER_FIELD, 3]],
    ];
    for (const [bad, finding] of cases) {
      const { r, seen } = reader(Buffer.alloc(500));
      r.push(Buffer.concat([B.icResp({}), bad]));
      expect(seen.headers).toEqual([]);
      expect(seen.fatals).toEqual([finding]);
    }
  });

  it('a C2HData whose CH is one already seen still gets its header checked: datal against the data it carries', () => {
    // Same CH as the first PDU (type, flags, hlen, pdo, plen), so the known-CH table sends it straight to the direct
    // copy; its datal field alone is wrong (TCP 1.0 §3.6.2.9), the finding the general path gives.
    const { r, seen } = reader(Buffer.alloc(500));
    r.push(Buffer.concat([B.icResp({}), B.c2hData({ cccid: 3, datao: 0, data: a }), B.c2hData({ cccid: 3, datao: 0, datal: 299, data: a })]));
    expect(seen.headers).toEqual([[3, 0, 300, 0]]);
    expect(seen.ends).toEqual([[3, 300, 0]]);
    expect(seen.fatals).toEqual([[Fes.INVALID_HEADER_FIELD, 16]]);
  });

  it('stops reading when the header callback ends the connection (returns no buffer)', () => {
    const { r, seen } = reader(undefined);
    r.push(stream);
    expect(seen.headers).toHaveLength(1);
    expect(seen.ends).toEqual([]);
    expect(seen.resps).toEqual([]);
    expect(r.failed).toBe(true);
  });

  it('with data digests C2HData takes the general path (the digest is checked there)', () => {
    const { r, seen } = reader(Buffer.alloc(500), { ddgst: true });
    r.push(Buffer.concat([B.icResp({ dgst: 2 }), B.c2hData({ cccid: 3, datao: 0, last: true, data: a }, { ddgst: true })]));
    expect(seen.fatals).toEqual([]);
    expect(seen.headers).toEqual([]);
    expect(seen.pdus).toEqual([PduType.IC_RESP, PduType.C2H_DATA]);
  });
});
