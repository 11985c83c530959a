// Golden kernel captures (test/fixtures/captures: Linux 6.1 nvme-tcp host ↔ nvmet, with and without digests): every PDU
// decodes to the fields the capture lists, re-encodes byte-identically, and decodes the same under any chunking.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { loadAllConnections, type FixtureConnection, type FixturePdu, type FixtureStream } from '../../test/fixtures/load.js';
import { byteByByte, prng, readChunks, splitAt, summarizeResult, type ReadOptions } from '../../test/fixtures/pdu-stream.js';
import { encodePdu, Fes, PDU_INFO, PduType, isPduType, type Pdu, type PduFraming, type ReceiverRole } from './index.js';
import { crc32cBitwise } from '../testing/pdu-builder.js';

const conns: FixtureConnection[] = await loadAllConnections();

interface DirCase {
  label: string;
  conn: FixtureConnection;
  s: FixtureStream;
  role: ReceiverRole;
}
const dirCases: DirCase[] = conns.flatMap((conn) => [
  { label: `${conn.label} h2c`, conn, s: conn.h2c, role: 'controller' as const },
  { label: `${conn.label} c2h`, conn, s: conn.c2h, role: 'host' as const },
]);
const pduCases = dirCases.flatMap((d) => d.s.pdus.map((p) => ({ ...d, p, name: `${d.label} #${p.dirIndex} ${p.typeName}` })));

const framingOf = (c: FixtureConnection): PduFraming => ({ hdgst: c.digests.hdgst, ddgst: c.digests.ddgst, pda: 0 });
const opts = (d: DirCase, extra: Partial<ReadOptions> = {}): ReadOptions => ({ role: d.role, ...extra });

/** Whole-stream decode, once per direction, shared by the per-PDU tests. */
const decoded = new Map<FixtureStream, Pdu[]>();
function decodedOf(d: DirCase): Pdu[] {
  let pdus = decoded.get(d.s);
  if (pdus === undefined) {
    const r = readChunks([d.s.stream], opts(d));
    expect(r.fatals).toEqual([]);
    pdus = r.pdus;
    decoded.set(d.s, pdus);
  }
  return pdus;
}

const num = (v: unknown): number => (typeof v === 'string' ? Number(v) : (v as number));
const dataLen = (bufs: readonly Buffer[]): number => bufs.reduce((n, b) => n + b.length, 0);

/** The values the capture's `info` lists, read from the decoded PDU (never from the JSON's bytes). */
function infoOf(pdu: Pdu, fp: FixturePdu): Record<string, unknown> {
  const info = fp.info;
  const out: Record<string, unknown> = {};
  const pick = (k: string, v: unknown): void => {
    if (k in info) out[k] = v;
  };
  switch (pdu.type) {
    case PduType.IC_REQ:
      return { pfv: pdu.pfv, hpda: pdu.hpda, dgst: pdu.dgst, maxr2t: pdu.maxr2t };
    case PduType.IC_RESP:
      return { pfv: pdu.pfv, cpda: pdu.cpda, dgst: pdu.dgst, maxh2cdata: pdu.maxh2cdata };
    case PduType.CAPSULE_CMD:
      out.cid = pdu.sqe.readUInt16LE(2);
      out.opcode = `0x${(pdu.sqe[0] as number).toString(16).padStart(2, '0')}`;
      out.sgl = { addr: Number(pdu.sqe.readBigUInt64LE(24)), len: pdu.sqe.readUInt32LE(32), type: `0x${(pdu.sqe[39] as number).toString(16).padStart(2, '0')}` };
      pick('incapsule', dataLen(pdu.data));
      return out;
    case PduType.CAPSULE_RESP:
      return { cid: pdu.cqe.readUInt16LE(12), sqhd: pdu.cqe.readUInt16LE(8), sqid: pdu.cqe.readUInt16LE(10), status: pdu.cqe.readUInt16LE(14) >> 1, dw0: pdu.cqe.readUInt32LE(0) };
    case PduType.H2C_DATA:
      return { cccid: pdu.cccid, ttag: pdu.ttag, datao: pdu.datao, datal: dataLen(pdu.data), last: pdu.last };
    case PduType.C2H_DATA:
      // ttag is reserved in C2HData and not part of the decoded PDU; the capture shows 0.
      return { cccid: pdu.cccid, ttag: 0, datao: pdu.datao, datal: dataLen(pdu.data), last: pdu.last, success: pdu.success };
    case PduType.R2T:
      return { cccid: pdu.cccid, ttag: pdu.ttag, r2to: pdu.r2to, r2tl: pdu.r2tl };
    default:
      throw new Error(`unexpected ${PDU_INFO[pdu.type].name} in a capture`);
  }
}

function expectedInfo(fp: FixturePdu, keys: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of keys) {
    const v = fp.info[k];
    out[k] = ['status', 'dw0'].includes(k) ? num(v) : v;
  }
  return out;
}

describe('golden captures', () => {
  it('hold the sessions, connections and PDU counts their README lists', () => {
    const bySession = (s: string): FixtureConnection[] => conns.filter((c) => c.session === s);
    expect(bySession('discover').map((c) => c.pdus.length)).toEqual([38]);
    expect(bySession('io').map((c) => c.pdus.length)).toEqual([90, 27]);
    expect(bySession('io-digest').map((c) => c.pdus.length)).toEqual([90, 27]);
    expect(bySession('io-digest').every((c) => c.digests.hdgst && c.digests.ddgst)).toBe(true);
    for (const c of conns) {
      expect(c.h2c.stream.length).toBe(c.relayBytes.h2c);
      expect(c.c2h.stream.length).toBe(c.relayBytes.c2h);
    }
  });

  describe('each direction decodes without a finding into exactly the captured PDUs', () => {
    it.each(dirCases)('$label', (d) => {
      const pdus = decodedOf(d);
      expect(pdus.map((p) => p.type)).toEqual(d.s.pdus.map((p) => p.type));
    });
  });

  describe('every PDU: header fields, info fields, digests, byte-identical re-encoding', () => {
    it.each(pduCases)('$name', (c) => {
      const { p, conn } = c;
      const pdu = decodedOf(c)[p.dirIndex];
      if (pdu === undefined) throw new Error('not decoded');
      expect(pdu.type).toBe(p.type);
      expect(isPduType(p.type) && PDU_INFO[p.type].dir).toBe(p.dir);

      const info = infoOf(pdu, p);
      expect(info).toEqual(expectedInfo(p, Object.keys(info)));

      const again = Buffer.concat(encodePdu(pdu, framingOf(conn)));
      expect({ type: again[0], flags: again[1], hlen: again[2], pdo: again[3], plen: again.readUInt32LE(4) }).toEqual({ type: p.type, flags: p.flags, hlen: p.hlen, pdo: p.pdo, plen: p.plen });
      expect(again.equals(p.bytes)).toBe(true);

      // Digests: present exactly as negotiated, and equal to an independent CRC32C of header / data.
      const info2 = PDU_INFO[pdu.type];
      const hd = info2.hdgst && conn.digests.hdgst;
      expect((p.flags & 1) !== 0).toBe(hd);
      if (hd) expect(p.bytes.readUInt32LE(p.hlen)).toBe(crc32cBitwise(p.bytes.subarray(0, p.hlen)));
      const hasData = info2.data && p.pdo !== 0;
      const dd = hasData && conn.digests.ddgst;
      expect((p.flags & 2) !== 0).toBe(dd);
      if (dd) expect(p.bytes.readUInt32LE(p.plen - 4)).toBe(crc32cBitwise(p.bytes.subarray(p.pdo, p.plen - 4)));
    });
  });

  // Reference result per direction (data as length + CRC), for comparing chunkings cheaply.
  const reference = (d: DirCase): string => JSON.stringify(summarizeResult(readChunks([d.s.stream], opts(d)), 64));
  const SMALL = 16 * 1024;

  describe('byte by byte gives the same PDUs', () => {
    it.each(dirCases)('$label', (d) => {
      expect(JSON.stringify(summarizeResult(readChunks(byteByByte(d.s.stream), opts(d)), 64))).toBe(reference(d));
    });
  });

  describe(`split at every offset (streams ≤ ${SMALL} B) or at every header/digest offset + 300 random ones`, () => {
    it.each(dirCases)('$label', (d) => {
      const want = reference(d);
      const n = d.s.stream.length;
      const offsets = new Set<number>();
      if (n <= SMALL) for (let i = 1; i < n; i++) offsets.add(i);
      else {
        for (const p of d.s.pdus) {
          const headEnd = p.pdo !== 0 ? p.pdo : p.plen;
          for (let i = 0; i <= headEnd; i++) offsets.add(p.streamOffset + i);
          // the data digest and the first bytes of the next PDU
          for (let i = Math.max(headEnd, p.plen - 5); i <= p.plen; i++) offsets.add(p.streamOffset + i);
        }
        const rnd = prng(0x5eed ^ n);
        for (let k = 0; k < 300; k++) offsets.add(1 + Math.floor(rnd() * (n - 1)));
        offsets.delete(0);
        offsets.delete(n);
      }
      const bad: number[] = [];
      for (const at of offsets) {
        if (JSON.stringify(summarizeResult(readChunks(splitAt(d.s.stream, [at]), opts(d)), 64)) !== want) bad.push(at);
      }
      expect(bad, 'split offsets that decoded differently').toEqual([]);
      expect(offsets.size).toBeGreaterThan(Math.min(n - 1, 300));
    });
  });

  describe('corrupting io-digest', () => {
    const digestDirs = dirCases.filter((d) => d.conn.session === 'io-digest');
    const corrupt = (s: Buffer, at: number): Buffer => {
      const c = Buffer.from(s);
      c[at] = (c[at] as number) ^ 0x5a;
      return c;
    };
    const headerCases = digestDirs.flatMap((d) =>
      [...new Set(d.s.pdus.filter((p) => isPduType(p.type) && PDU_INFO[p.type].hdgst).map((p) => p.type))].flatMap((type) => {
        const p = d.s.pdus.find((q) => q.type === type && q.dirIndex > 1) as FixturePdu;
        return [
          { name: `${d.label}: ${p.typeName} #${p.dirIndex} PSH byte 9`, d, p, at: 9 },
          { name: `${d.label}: ${p.typeName} #${p.dirIndex} HDGST byte`, d, p, at: p.hlen + 2 },
        ];
      }),
    );

    it.each(headerCases)('one header byte → FES 3 (header digest error): $name', ({ d, p, at }) => {
      const r = readChunks([corrupt(d.s.stream, p.streamOffset + at)], opts(d));
      expect(r.pdus).toHaveLength(p.dirIndex);
      expect(r.fatals.map((f) => [f.fes, f.fei])).toEqual([[Fes.HEADER_DIGEST_ERROR, 0]]);
      expect(r.fatals[0]?.header.equals(corrupt(p.bytes, at).subarray(0, p.hlen))).toBe(true);
    });

    const dataCases = digestDirs.flatMap((d) =>
      d.s.pdus
        .filter((p) => p.pdo !== 0)
        .filter((p, i, all) => all.findIndex((q) => q.type === p.type && q.plen === p.plen) === i)
        .map((p) => ({ name: `${d.label}: ${p.typeName} #${p.dirIndex} (${p.plen - p.pdo - 4} data bytes)`, d, p, at: p.pdo + Math.floor((p.plen - p.pdo - 4) / 2) })),
    );

    it('has data-carrying PDUs of every kind to corrupt', () => {
      expect(new Set(dataCases.map((c) => c.p.typeName))).toEqual(new Set(['CapsuleCmd', 'C2HData', 'H2CData']));
    });

    it.each(dataCases)('one data byte → onDataDigestError for that PDU, then reading continues: $name', ({ d, p, at }) => {
      const r = readChunks([corrupt(d.s.stream, p.streamOffset + at)], opts(d, { collectDigestErrors: true }));
      expect(r.fatals).toEqual([]);
      expect(r.pdus).toHaveLength(d.s.pdus.length - 1);
      expect(r.events.indexOf('ddgst')).toBe(p.dirIndex);
      expect(r.digestErrors.map((e) => e.type)).toEqual([p.type]);
    });

    it.each(dataCases)('one data byte without onDataDigestError → fatal FES 3: $name', ({ d, p, at }) => {
      const r = readChunks([corrupt(d.s.stream, p.streamOffset + at)], opts(d));
      expect(r.pdus).toHaveLength(p.dirIndex);
      expect(r.fatals.map((f) => [f.fes, f.fei])).toEqual([[Fes.HEADER_DIGEST_ERROR, 0]]);
    });
  });
});
