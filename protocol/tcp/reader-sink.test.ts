// PduReader's one data path (PduSink): header views, data copied straight into the sink the role gives across any
// chunking, with or without digests (the data digest checked over the same bytes), the same findings for a CH seen
// before as for a new one, and control PDUs as objects. Bytes come from the independent test builder.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { DataPshOffset, Fes, PduFlag, PduReader, PduType, type DataSink } from './index.js';
import * as B from '../testing/pdu-builder.js';

interface Seen {
  pdus: number[];
  fatals: Array<[number, number]>;
  headers: number[][];
  ends: number[][];
  resps: number[];
  /** dataEnd's digestOk per C2HData. */
  digests: boolean[];
}

function reader(dest: Buffer | undefined, opts: { hdgst?: boolean; ddgst?: boolean } = {}): { r: PduReader; seen: Seen } {
  const seen: Seen = { pdus: [], fatals: [], headers: [], ends: [], resps: [], digests: [] };
  const sink: DataSink & { cccid: number; datal: number; flags: number } = { buf: Buffer.alloc(0), at: 0, cccid: 0, datal: 0, flags: 0 };
  const r: PduReader = new PduReader({
    role: 'host',
    reusesChunks: true,
    onPdu: (p) => {
      seen.pdus.push(p.type);
      if (p.type === PduType.IC_RESP) r.setFraming(opts.hdgst ?? false, opts.ddgst ?? false, 0);
    },
    onFatal: (f) => seen.fatals.push([f.fes, f.fei]),
    sink: {
      header: (type, psh, datal, flags) => {
        if (type === PduType.CAPSULE_RESP) {
          seen.resps.push(psh.readUInt16LE(12));
          return undefined;
        }
        const cccid = psh.readUInt16LE(DataPshOffset.cccid);
        const datao = psh.readUInt32LE(DataPshOffset.datao);
        seen.headers.push([cccid, datao, datal, flags]);
        if (dest === undefined) return undefined;
        Object.assign(sink, { buf: dest, at: datao, cccid, datal, flags });
        return sink;
      },
      end: (_s, digestOk) => {
        seen.ends.push([sink.cccid, sink.datal, sink.flags]);
        seen.digests.push(digestOk);
      },
    },
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

describe('PduReader data path (PduSink), host role', () => {
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
    const sink: DataSink = { buf: Buffer.alloc(0), at: 0 };
    const r = new PduReader({
      role: 'host',
      reusesChunks: true,
      onPdu: (p) => {
        if (p.type === PduType.IC_RESP) r.setFraming(false, false, 0);
      },
      onFatal: (f) => {
        throw new Error(`fatal ${f.fes}`);
      },
      sink: {
        header: (_type, psh) => {
          sink.buf = dests[psh.readUInt16LE(DataPshOffset.cccid)] as Buffer;
          return sink;
        },
        end: () => undefined,
      },
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

  it('a malformed C2HData header never reaches the sink: the finding the header names', () => {
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
    // Same CH as the first PDU (type, flags, hlen, pdo, plen), so the known-CH table spares validating it again; its
    // datal field alone is wrong (TCP 1.0 §3.6.2.9), the finding a new CH gets.
    const { r, seen } = reader(Buffer.alloc(500));
    r.push(Buffer.concat([B.icResp({}), B.c2hData({ cccid: 3, datao: 0, data: a }), B.c2hData({ cccid: 3, datao: 0, datal: 299, data: a })]));
    expect(seen.headers).toEqual([[3, 0, 300, 0]]);
    expect(seen.ends).toEqual([[3, 300, 0]]);
    expect(seen.fatals).toEqual([[Fes.INVALID_HEADER_FIELD, 16]]);
  });

  it('stops reading when the header handler ends the connection (returns no sink)', () => {
    const { r, seen } = reader(undefined);
    r.push(stream);
    expect(seen.headers).toHaveLength(1);
    expect(seen.ends).toEqual([]);
    expect(seen.resps).toEqual([]);
    expect(r.failed).toBe(true);
  });

  for (const size of [1, 7, 23, 4096]) {
    it(`with header and data digests the same sink gets the data and the digest verdict, in ${size}-byte reads`, () => {
      const dg = { hdgst: true, ddgst: true };
      const wire = Buffer.concat([
        B.icResp({ dgst: 3 }),
        B.c2hData({ cccid: 3, datao: 0, data: a }, dg),
        B.c2hData({ cccid: 3, datao: 300, last: true, success: true, data: b }, dg),
        B.capsuleResp({ cqe: B.cqe({ cid: 5 }) }, dg),
      ]);
      const dest = Buffer.alloc(500);
      const { r, seen } = reader(dest, dg);
      feed(r, wire, size);
      expect(seen.fatals).toEqual([]);
      expect(seen.pdus).toEqual([PduType.IC_RESP]);
      expect(dest.equals(Buffer.concat([a, b]))).toBe(true);
      expect(seen.digests).toEqual([true, true]);
      expect(seen.resps).toEqual([5]);
    });
  }

  it('a data digest mismatch is the sink\'s to handle: end() says so and reading goes on', () => {
    const bad = B.c2hData({ cccid: 3, datao: 0, last: true, data: a }, { ddgst: true });
    bad.writeUInt8((bad.at(-1) as number) ^ 0xff, bad.length - 1);
    const { r, seen } = reader(Buffer.alloc(500), { ddgst: true });
    r.push(Buffer.concat([B.icResp({ dgst: 2 }), bad, B.capsuleResp({ cqe: B.cqe({ cid: 3 }) })]));
    expect(seen.fatals).toEqual([]);
    expect(seen.digests).toEqual([false]);
    expect(seen.resps).toEqual([3]);
  });

  it('a header digest mismatch on a CH seen before is still found (FES 1)', () => {
    const dg = { hdgst: true };
    const badResp = B.capsuleResp({ cqe: B.cqe({ cid: 9 }) }, dg);
    badResp.writeUInt8((badResp.at(-1) as number) ^ 0xff, badResp.length - 1);
    const { r, seen } = reader(Buffer.alloc(500), dg);
    r.push(Buffer.concat([B.icResp({ dgst: 1 }), B.capsuleResp({ cqe: B.cqe({ cid: 8 }) }, dg), badResp]));
    expect(seen.resps).toEqual([8]);
    expect(seen.fatals).toEqual([[Fes.HEADER_DIGEST_ERROR, 0]]);
  });
});
