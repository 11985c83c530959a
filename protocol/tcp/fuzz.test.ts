// Property-based fuzzing of PduReader (after mqtt-packet testRandom.js): push never throws; every
// input ends in decoded PDUs and exactly one fatal finding once a poison tail is appended; results never depend on
// how the bytes were chunked; valid streams decode to exactly the PDUs they were built from.
import { Buffer } from 'node:buffer';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadFixture } from '../../test/fixtures/load.js';
import { primer, readChunks, splitAt, summarize, summarizeResult, type Framing, type ReadOptions } from '../../test/fixtures/pdu-stream.js';
import { PDU_INFO, PduType, isPduType, type Pdu, type ReceiverRole } from './index.js';
import * as B from '../testing/pdu-builder.js';

const LIMIT = 8192;
/** Long enough to complete any PDU the limits allow (data ≤ LIMIT, pdo ≤ 128, DDGST), then to start a new CH with 0xff. */
const POISON = Buffer.alloc(LIMIT + 256, 0xff);

/** What each role receives after the IC exchange (a second IC PDU comes from the all-types bucket). */
const TYPES_FOR: Record<ReceiverRole, number[]> = {
  controller: [PduType.H2C_TERM_REQ, PduType.CAPSULE_CMD, PduType.CAPSULE_CMD, PduType.H2C_DATA, PduType.H2C_DATA],
  host: [PduType.C2H_TERM_REQ, PduType.CAPSULE_RESP, PduType.CAPSULE_RESP, PduType.C2H_DATA, PduType.C2H_DATA, PduType.R2T],
};
const ALL_TYPES = Object.keys(PDU_INFO).map(Number);

const roleArb = fc.constantFrom<ReceiverRole>('controller', 'host');
const framingArb: fc.Arbitrary<Framing> = fc.record({ hdgst: fc.boolean(), ddgst: fc.boolean(), pda: fc.constantFrom(0, 0, 1, 3, 31) });

/**
 * A position as a fraction of a length. Not fc.double: it draws uniformly over float encodings, so nearly every value
 * is ~0. Unbiased integers spread positions evenly; the biased ones add the edges (0 and the end).
 */
const fracArb = fc.oneof({ weight: 3, arbitrary: fc.noBias(fc.integer({ min: 0, max: 0xffff })) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 0xffff }) }).map((i) => i / 0x10000);
/** Cut points for a buffer: none, a few, or many. */
const cutsArb = fc.array(fracArb, { maxLength: 12 });
function chunked(buf: Buffer, cuts: readonly number[]): Buffer[] {
  const offs = [...new Set(cuts.map((c) => Math.floor(c * buf.length)))].filter((o) => o > 0 && o < buf.length).sort((a, b) => a - b);
  return splitAt(buf, offs);
}

/** One PDU-like segment: a type biased to what the role receives, fields mostly valid, sometimes broken. */
interface Seg {
  type: number;
  psh: Uint8Array;
  data: Uint8Array;
  /** Make the PDU-specific fields valid (pfv 0, datal = data length, r2tl > 0, ...). */
  fix: boolean;
  last: boolean;
  success: boolean;
  ch: { flags?: number; hlen?: number; pdo?: number; plen?: number };
  /** Flip one byte at (pos × length) after layout. */
  flip: number | null;
}

const segArb = (role: ReceiverRole): fc.Arbitrary<Seg> =>
  fc.record({
    type: fc.oneof({ weight: 20, arbitrary: fc.constantFrom(...TYPES_FOR[role]) }, { weight: 1, arbitrary: fc.constantFrom(...ALL_TYPES) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 255 }) }),
    psh: fc.uint8Array({ minLength: 120, maxLength: 120 }),
    data: fc.oneof({ weight: 3, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 80 }) }, { weight: 1, arbitrary: fc.constant(new Uint8Array(0)) }, { weight: 1, arbitrary: fc.uint8Array({ minLength: LIMIT - 2, maxLength: LIMIT + 2 }) }),
    fix: fc.oneof({ weight: 15, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
    last: fc.boolean(),
    success: fc.boolean(),
    ch: fc.oneof(
      { weight: 40, arbitrary: fc.constant({}) },
      { weight: 1, arbitrary: fc.record({ flags: fc.integer({ min: 0, max: 255 }) }) },
      { weight: 1, arbitrary: fc.record({ hlen: fc.integer({ min: 0, max: 255 }) }) },
      { weight: 1, arbitrary: fc.record({ pdo: fc.integer({ min: 0, max: 255 }) }) },
      { weight: 1, arbitrary: fc.record({ plen: fc.oneof(fc.integer({ min: 0, max: 300 }), fc.nat()) }) },
    ),
    flip: fc.oneof({ weight: 8, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fracArb }),
  });

/** Lay a segment out with the independent builder; returns the bytes and the PDU a reader should decode when valid. */
function build(s: Seg, fr: Framing): { bytes: Buffer; pdu: Pdu | undefined } {
  const psh = Buffer.from(s.psh);
  const data = Buffer.from(s.data);
  const u16 = (o: number): number => psh.readUInt16LE(o);
  const u32 = (o: number): number => psh.readUInt32LE(o);
  let bytes: Buffer;
  let pdu: Pdu | undefined;
  switch (s.type) {
    case PduType.IC_REQ: {
      const f = { pfv: s.fix ? 0 : u16(0), hpda: s.fix ? (psh[2] as number) & 31 : (psh[2] as number), dgst: s.fix ? (psh[3] as number) & 3 : (psh[3] as number), maxr2t: u32(4) };
      bytes = B.icReq(f, s.ch);
      pdu = { type: PduType.IC_REQ, ...f };
      break;
    }
    case PduType.IC_RESP: {
      const f = { pfv: s.fix ? 0 : u16(0), cpda: s.fix ? (psh[2] as number) & 31 : (psh[2] as number), dgst: s.fix ? (psh[3] as number) & 3 : (psh[3] as number), maxh2cdata: s.fix ? Math.max(4096, u32(4) & ~3) >>> 0 : u32(4) };
      bytes = B.icResp(f, s.ch);
      pdu = { type: PduType.IC_RESP, ...f };
      break;
    }
    case PduType.H2C_TERM_REQ:
    case PduType.C2H_TERM_REQ: {
      const f = { fes: u16(0), fei: u32(2), errorData: data.subarray(0, 128) };
      bytes = B.termReq(s.type, f, s.ch);
      pdu = { type: s.type, ...f };
      break;
    }
    case PduType.CAPSULE_CMD: {
      const sqe = psh.subarray(0, 64);
      bytes = B.capsuleCmd({ sqe, data }, fr, s.ch);
      pdu = { type: PduType.CAPSULE_CMD, sqe, data: data.length > 0 ? [data] : [] };
      break;
    }
    case PduType.CAPSULE_RESP: {
      const cqe = psh.subarray(0, 16);
      bytes = B.capsuleResp({ cqe }, fr, s.ch);
      pdu = { type: PduType.CAPSULE_RESP, cqe };
      break;
    }
    case PduType.H2C_DATA: {
      const f = { cccid: u16(0), ttag: u16(2), datao: u32(4), last: s.last };
      bytes = B.h2cData({ ...f, data, ...(s.fix ? {} : { datal: u32(8) }) }, fr, s.ch);
      pdu = { type: PduType.H2C_DATA, ...f, data: [data] };
      break;
    }
    case PduType.C2H_DATA: {
      const f = { cccid: u16(0), datao: u32(4), last: s.last || (s.fix && s.success), success: s.success };
      bytes = B.c2hData({ ...f, data, ...(s.fix ? {} : { datal: u32(8) }) }, fr, s.ch);
      pdu = { type: PduType.C2H_DATA, ...f, data: [data] };
      break;
    }
    case PduType.R2T: {
      const f = { cccid: u16(0), ttag: u16(2), r2to: u32(4), r2tl: s.fix ? u32(8) || 1 : u32(8) };
      bytes = B.r2t(f, fr, s.ch);
      pdu = { type: PduType.R2T, ...f };
      break;
    }
    default: {
      // Not a PDU type: a CH with that type byte and a random body.
      bytes = Buffer.concat([Buffer.from([s.type, s.ch.flags ?? 0, s.ch.hlen ?? 24, s.ch.pdo ?? 0, 0, 0, 0, 0]), psh.subarray(0, 16)]);
      bytes.writeUInt32LE(s.ch.plen ?? bytes.length, 4);
      pdu = undefined;
    }
  }
  if (s.flip !== null) {
    const at = Math.floor(s.flip * bytes.length);
    bytes[at] = (bytes[at] as number) ^ 0x01;
  }
  return { bytes, pdu };
}

interface Outcome {
  summary: ReturnType<typeof summarizeResult>;
}

/** The fuzz invariants for one input under two chunkings; returns the whole-chunk result. */
function checkInvariants(role: ReceiverRole, framing: Framing, input: Buffer, cuts: readonly number[], extra: Partial<ReadOptions> = {}): Outcome {
  const o: ReadOptions = { role, framing, maxDataLength: LIMIT, maxInCapsuleData: LIMIT, ...extra };
  const whole = readChunks([input], o);
  const pieces = readChunks(chunked(input, cuts), o);
  const a = summarizeResult(whole, 64);
  expect(summarizeResult(pieces, 64)).toEqual(a);
  // At most one fatal finding, and nothing after it.
  expect(whole.fatals.length).toBeLessThanOrEqual(1);
  if (whole.fatals.length === 1) expect(whole.events.at(-1)).toBe('fatal');
  expect(whole.reader.failed).toBe(whole.fatals.length === 1);
  for (const p of whole.pdus) expect(PDU_INFO[p.type].dir).toBe(role === 'controller' ? 'h2c' : 'c2h');
  // Appending the poison tail always ends the stream in exactly one fatal finding.
  whole.reader.push(POISON);
  expect(whole.fatals).toHaveLength(1);
  for (const f of whole.fatals) {
    expect([1, 2, 3, 4, 5, 6]).toContain(f.fes);
    expect(f.header.length).toBeGreaterThan(0);
    expect(f.header.length).toBeLessThanOrEqual(128);
  }
  return { summary: a };
}

const RUNS = { numRuns: 400 };

describe('PduReader fuzz', () => {
  it('random bytes (first byte biased to the IC type) never throw and end in at most one fatal finding', () => {
    fc.assert(
      fc.property(
        roleArb,
        fc.oneof({ weight: 3, arbitrary: fc.constantFrom(0, 1) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 255 }) }),
        fc.uint8Array({ maxLength: 400 }),
        cutsArb,
        (role, first, rest, cuts) => {
          const input = Buffer.concat([Buffer.from([first]), Buffer.from(rest)]);
          checkInvariants(role, { hdgst: false, ddgst: false, pda: 0 }, input, cuts);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('PDU-shaped segments (biased types, mostly valid fields, sometimes broken CH/PSH/digests) after the IC exchange', () => {
    fc.assert(
      fc.property(
        roleArb.chain((role) => fc.tuple(fc.constant(role), framingArb, fc.array(segArb(role), { minLength: 1, maxLength: 6 }), cutsArb, fc.boolean())),
        ([role, framing, segs, cuts, collect]) => {
          const input = Buffer.concat([primer(role, framing), ...segs.map((s) => build(s, framing).bytes)]);
          checkInvariants(role, framing, input, cuts, collect ? { collectDigestErrors: true } : {});
        },
      ),
      RUNS,
    );
  });

  it('valid PDU sequences decode to exactly the PDUs they were built from, in any chunking', () => {
    const validSeg = (role: ReceiverRole): fc.Arbitrary<Seg> =>
      segArb(role).map((s) => ({ ...s, fix: true, ch: {}, flip: null }));
    fc.assert(
      fc.property(
        roleArb.chain((role) => fc.tuple(fc.constant(role), framingArb, fc.array(validSeg(role), { minLength: 1, maxLength: 8 }), cutsArb)),
        ([role, framing, segs, cuts]) => {
          // Only types this role receives; IC only as the first PDU (it is the primer), H2C/C2H data non-empty.
          const usable = segs.filter((s) => TYPES_FOR[role].includes(s.type) && s.type !== PduType.IC_REQ && s.type !== PduType.IC_RESP && !((s.type === PduType.H2C_DATA || s.type === PduType.C2H_DATA) && s.data.length === 0));
          const built = usable.map((s) => build(s, framing));
          const input = Buffer.concat([primer(role, framing), ...built.map((b) => b.bytes)]);
          const r = readChunks(chunked(input, cuts), { role, framing, primed: false, maxDataLength: LIMIT + 2, maxInCapsuleData: LIMIT + 2 });
          expect(r.fatals).toEqual([]);
          const expected = built.map((b) => summarize(b.pdu as Pdu, 64));
          expect(r.pdus.slice(1).map((p) => summarize(p, 64))).toEqual(expected);
        },
      ),
      RUNS,
    );
  });

  it('mutated capture streams (flip bytes, truncate, splice) never throw; chunking never matters', async () => {
    const streams = await (async () => {
      const disc = (await loadFixture('discover')).connections[0];
      const dig = (await loadFixture('io-digest')).connections[0];
      if (disc === undefined || dig === undefined) throw new Error('fixture connections missing');
      // Keep inputs small: the first PDUs of each direction (IC, Connect, property traffic, identify data).
      const head = (s: { pdus: Array<{ bytes: Buffer }> }, n: number): Buffer => Buffer.concat(s.pdus.slice(0, n).map((p) => p.bytes));
      return [
        { role: 'controller' as const, framing: { hdgst: false, ddgst: false, pda: 0 }, stream: head(disc.h2c, 12) },
        { role: 'host' as const, framing: { hdgst: false, ddgst: false, pda: 0 }, stream: head(disc.c2h, 12) },
        { role: 'controller' as const, framing: { hdgst: true, ddgst: true, pda: 0 }, stream: head(dig.h2c, 12) },
        { role: 'host' as const, framing: { hdgst: true, ddgst: true, pda: 0 }, stream: head(dig.c2h, 12) },
      ];
    })();
    const mutation = fc.oneof(
      fc.record({ kind: fc.constant('flip' as const), at: fc.array(fracArb, { minLength: 1, maxLength: 4 }), xor: fc.integer({ min: 1, max: 255 }) }),
      fc.record({ kind: fc.constant('truncate' as const), at: fracArb }),
      fc.record({ kind: fc.constant('splice' as const), from: fracArb, len: fc.integer({ min: 0, max: 200 }), to: fracArb, insert: fc.uint8Array({ maxLength: 16 }) }),
    );
    fc.assert(
      fc.property(fc.array(mutation, { minLength: 1, maxLength: 3 }), cutsArb, fc.boolean(), (muts, cuts, collect) => {
        for (const src of streams) mutateAndCheck(src, muts, cuts, collect);
      }),
      { numRuns: 250 },
    );
    type Mutation = typeof mutation extends fc.Arbitrary<infer M> ? M : never;
    function mutateAndCheck(src: (typeof streams)[number], muts: readonly Mutation[], cuts: readonly number[], collect: boolean): void {
      let s = Buffer.from(src.stream);
      for (const m of muts) {
        if (m.kind === 'flip') for (const a of m.at) s[Math.floor(a * s.length)] = (s[Math.floor(a * s.length)] as number) ^ m.xor;
        else if (m.kind === 'truncate') s = s.subarray(0, Math.floor(m.at * s.length));
        else {
          // Cut a range out and put it (plus a few random bytes) back elsewhere: duplicates, drops, reorders.
          const from = Math.floor(m.from * s.length);
          const piece = Buffer.from(s.subarray(from, from + m.len));
          const rest = Buffer.concat([s.subarray(0, from), s.subarray(from + piece.length)]);
          const to = Math.floor(m.to * rest.length);
          s = Buffer.concat([rest.subarray(0, to), piece, Buffer.from(m.insert), rest.subarray(to)]);
        }
        if (s.length === 0) return;
      }
      checkInvariants(src.role, src.framing, s, cuts, collect ? { collectDigestErrors: true } : {});
    }
  });

  it('the poison tail itself is a fatal finding on a fresh, primed reader (sanity of the invariant)', () => {
    for (const role of ['controller', 'host'] as const) {
      const r = readChunks([POISON], { role, primed: true });
      expect(r.fatals.map((f) => [f.fes, f.fei])).toEqual([[1, 0]]);
      expect(isPduType(0xff)).toBe(false);
    }
  });
});
