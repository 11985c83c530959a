// Bad input: every fatal finding of the receiver with its exact FES and FEI (TCP 1.0 §3.6.2.4/5 Figure 23–25),
// delivered once, with the offending header, after which the reader ignores all input.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { byteByByte, primer, readChunks, type Framing, type ReadOptions } from '../../test/fixtures/pdu-stream.js';
import { Fes, PduType, validatePduHeader, type HeaderContext } from './index.js';
import * as B from '../testing/pdu-builder.js';

const NONE: Framing = { hdgst: false, ddgst: false, pda: 0 };
const HD: Framing = { hdgst: true, ddgst: false, pda: 0 };
const DD: Framing = { hdgst: false, ddgst: true, pda: 0 };
const BOTH: Framing = { hdgst: true, ddgst: true, pda: 0 };
const PDA3: Framing = { hdgst: false, ddgst: false, pda: 3 };

const SQE = B.sqe({ opcode: 0x02, cid: 5, nsid: 1 });
const DATA = B.pattern(37, 3);
const CQE = B.cqe({ cid: 5 });

interface BadCase {
  name: string;
  role: 'controller' | 'host';
  /** Framing negotiated by the (primed) IC exchange. */
  framing?: Framing;
  /** Start without the IC exchange (for the sequence rules). */
  unprimed?: boolean;
  opts?: Pick<ReadOptions, 'maxDataLength' | 'maxInCapsuleData'>;
  /** Valid PDUs first (must be decoded), then the bad one. */
  before?: Buffer[];
  bad: Buffer;
  fes: number;
  fei: number;
  /** How many bytes of `bad` the finding's header copy holds: 8 for CH findings, hlen for the rest. */
  headerLen: number;
}

/** Copy `b` and change it. Only for CH fields or PDUs without HDGST: a PSH edit would fail the digest first. */
function patch(b: Buffer, edit: (c: Buffer) => void): Buffer {
  const c = Buffer.from(b);
  edit(c);
  return c;
}

const CASES: BadCase[] = [
  // type
  { name: 'unknown type 0x08 (KDReq, not supported)', role: 'controller', bad: patch(B.r2t({ cccid: 1, ttag: 1, r2to: 0, r2tl: 1 }), (c) => (c[0] = 0x08)), fes: Fes.INVALID_HEADER_FIELD, fei: 0, headerLen: 8 },
  { name: 'unknown type 0xff', role: 'host', bad: patch(B.capsuleResp({ cqe: CQE }), (c) => (c[0] = 0xff)), fes: Fes.INVALID_HEADER_FIELD, fei: 0, headerLen: 8 },
  { name: 'C2HData sent to a controller', role: 'controller', bad: B.c2hData({ cccid: 1, datao: 0, last: true, data: DATA }), fes: Fes.INVALID_HEADER_FIELD, fei: 0, headerLen: 8 },
  { name: 'R2T sent to a controller', role: 'controller', bad: B.r2t({ cccid: 1, ttag: 1, r2to: 0, r2tl: 1 }), fes: Fes.INVALID_HEADER_FIELD, fei: 0, headerLen: 8 },
  { name: 'ICResp sent to a controller', role: 'controller', unprimed: true, bad: B.icResp({}), fes: Fes.INVALID_HEADER_FIELD, fei: 0, headerLen: 8 },
  { name: 'CapsuleCmd sent to a host', role: 'host', bad: B.capsuleCmd({ sqe: SQE }), fes: Fes.INVALID_HEADER_FIELD, fei: 0, headerLen: 8 },
  { name: 'H2CTermReq sent to a host', role: 'host', bad: B.termReq(PduType.H2C_TERM_REQ, { fes: 1, fei: 0, errorData: Buffer.alloc(8) }), fes: Fes.INVALID_HEADER_FIELD, fei: 0, headerLen: 8 },

  // sequence (§3.3: the IC exchange first, exactly once)
  { name: 'CapsuleCmd before ICReq', role: 'controller', unprimed: true, bad: B.capsuleCmd({ sqe: SQE }), fes: Fes.PDU_SEQUENCE_ERROR, fei: 0, headerLen: 8 },
  { name: 'H2CData before ICReq', role: 'controller', unprimed: true, bad: B.h2cData({ cccid: 1, ttag: 1, datao: 0, data: DATA }), fes: Fes.PDU_SEQUENCE_ERROR, fei: 0, headerLen: 8 },
  { name: 'CapsuleResp before ICResp', role: 'host', unprimed: true, bad: B.capsuleResp({ cqe: CQE }), fes: Fes.PDU_SEQUENCE_ERROR, fei: 0, headerLen: 8 },
  { name: 'second ICReq', role: 'controller', bad: B.icReq({}), fes: Fes.PDU_SEQUENCE_ERROR, fei: 0, headerLen: 8 },
  { name: 'second ICReq after a command', role: 'controller', before: [B.capsuleCmd({ sqe: SQE })], bad: B.icReq({}), fes: Fes.PDU_SEQUENCE_ERROR, fei: 0, headerLen: 8 },
  { name: 'second ICResp', role: 'host', bad: B.icResp({}), fes: Fes.PDU_SEQUENCE_ERROR, fei: 0, headerLen: 8 },

  // flags
  { name: 'reserved flag 0x10 on CapsuleCmd', role: 'controller', bad: B.capsuleCmd({ sqe: SQE }, NONE, { flags: 0x10 }), fes: Fes.INVALID_HEADER_FIELD, fei: 1, headerLen: 8 },
  { name: 'DATA_LAST on CapsuleCmd (reserved there)', role: 'controller', bad: B.capsuleCmd({ sqe: SQE }, NONE, { flags: 0x04 }), fes: Fes.INVALID_HEADER_FIELD, fei: 1, headerLen: 8 },
  { name: 'DATA_SUCCESS on H2CData (C2H only)', role: 'controller', bad: B.h2cData({ cccid: 1, ttag: 1, datao: 0, last: true, data: DATA }, NONE, { flags: 0x0c }), fes: Fes.INVALID_HEADER_FIELD, fei: 1, headerLen: 8 },
  { name: 'flag 0x80 on ICReq', role: 'controller', unprimed: true, bad: B.icReq({}, { flags: 0x80 }), fes: Fes.INVALID_HEADER_FIELD, fei: 1, headerLen: 8 },
  { name: 'DDGSTF on a TermReq (no flags defined)', role: 'controller', framing: BOTH, bad: B.termReq(PduType.H2C_TERM_REQ, { fes: 1, fei: 0, errorData: Buffer.alloc(8) }, { flags: 0x02 }), fes: Fes.INVALID_HEADER_FIELD, fei: 1, headerLen: 8 },
  { name: 'DDGSTF on CapsuleResp (never data)', role: 'host', framing: BOTH, bad: B.capsuleResp({ cqe: CQE }, HD, { flags: 0x03 }), fes: Fes.INVALID_HEADER_FIELD, fei: 1, headerLen: 8 },
  { name: 'HDGSTF clear while header digests are on', role: 'controller', framing: HD, bad: B.capsuleCmd({ sqe: SQE }, NONE), fes: Fes.INVALID_HEADER_FIELD, fei: 1, headerLen: 8 },
  { name: 'HDGSTF set while header digests are off', role: 'host', framing: NONE, bad: B.r2t({ cccid: 1, ttag: 1, r2to: 0, r2tl: 1 }, HD), fes: Fes.INVALID_HEADER_FIELD, fei: 1, headerLen: 8 },
  { name: 'HDGSTF on ICReq', role: 'controller', unprimed: true, bad: B.icReq({}, { flags: 0x01 }), fes: Fes.INVALID_HEADER_FIELD, fei: 1, headerLen: 8 },
  { name: 'DDGSTF clear on data while data digests are on', role: 'controller', framing: DD, bad: B.h2cData({ cccid: 1, ttag: 1, datao: 0, data: DATA }, NONE), fes: Fes.INVALID_HEADER_FIELD, fei: 1, headerLen: 8 },
  { name: 'DDGSTF set while data digests are off', role: 'host', framing: NONE, bad: B.c2hData({ cccid: 1, datao: 0, last: true, data: DATA }, DD), fes: Fes.INVALID_HEADER_FIELD, fei: 1, headerLen: 8 },
  { name: 'DDGSTF on a CapsuleCmd without data', role: 'controller', framing: DD, bad: B.capsuleCmd({ sqe: SQE }, NONE, { flags: 0x02 }), fes: Fes.INVALID_HEADER_FIELD, fei: 1, headerLen: 8 },
  { name: 'DATA_SUCCESS without DATA_LAST', role: 'host', bad: B.c2hData({ cccid: 1, datao: 0, success: true, data: DATA }), fes: Fes.INVALID_HEADER_FIELD, fei: 1, headerLen: 8 },

  // hlen
  { name: 'CapsuleCmd hlen 24', role: 'controller', bad: B.capsuleCmd({ sqe: SQE }, NONE, { hlen: 24 }), fes: Fes.INVALID_HEADER_FIELD, fei: 2, headerLen: 8 },
  { name: 'ICReq hlen 127', role: 'controller', unprimed: true, bad: B.icReq({}, { hlen: 127 }), fes: Fes.INVALID_HEADER_FIELD, fei: 2, headerLen: 8 },
  { name: 'R2T hlen 28 (HDGST counted in hlen)', role: 'host', framing: HD, bad: B.r2t({ cccid: 1, ttag: 1, r2to: 0, r2tl: 1 }, HD, { hlen: 28 }), fes: Fes.INVALID_HEADER_FIELD, fei: 2, headerLen: 8 },
  { name: 'TermReq hlen 8', role: 'host', bad: B.termReq(PduType.C2H_TERM_REQ, { fes: 1, fei: 0, errorData: Buffer.alloc(0) }, { hlen: 8 }), fes: Fes.INVALID_HEADER_FIELD, fei: 2, headerLen: 8 },

  // pdo
  { name: 'CapsuleCmd with data, pdo 76 without HDGST', role: 'controller', bad: B.capsuleCmd({ sqe: SQE, data: DATA }, NONE, { pdo: 76 }), fes: Fes.INVALID_HEADER_FIELD, fei: 3, headerLen: 8 },
  { name: 'H2CData pdo 24 when CPDA 3 wants 32', role: 'controller', framing: PDA3, bad: B.h2cData({ cccid: 1, ttag: 1, datao: 0, data: DATA }, NONE), fes: Fes.INVALID_HEADER_FIELD, fei: 3, headerLen: 8 },
  { name: 'C2HData pdo 0 with data', role: 'host', bad: B.c2hData({ cccid: 1, datao: 0, last: true, data: DATA }, NONE, { pdo: 0 }), fes: Fes.INVALID_HEADER_FIELD, fei: 3, headerLen: 8 },
  { name: 'R2T pdo 24', role: 'host', bad: B.r2t({ cccid: 1, ttag: 1, r2to: 0, r2tl: 1 }, NONE, { pdo: 24 }), fes: Fes.INVALID_HEADER_FIELD, fei: 3, headerLen: 8 },
  { name: 'TermReq pdo 24', role: 'controller', bad: B.termReq(PduType.H2C_TERM_REQ, { fes: 1, fei: 0, errorData: Buffer.alloc(8) }, { pdo: 24 }), fes: Fes.INVALID_HEADER_FIELD, fei: 3, headerLen: 8 },
  { name: 'ICResp pdo 128', role: 'host', unprimed: true, bad: B.icResp({}, { pdo: 128 }), fes: Fes.INVALID_HEADER_FIELD, fei: 3, headerLen: 8 },
  { name: 'CapsuleCmd without data, pdo 80', role: 'controller', bad: B.capsuleCmd({ sqe: SQE }, NONE, { pdo: 80 }), fes: Fes.INVALID_HEADER_FIELD, fei: 3, headerLen: 8 },

  // plen
  { name: 'CapsuleResp plen 20 (too small)', role: 'host', bad: B.capsuleResp({ cqe: CQE }, NONE, { plen: 20 }), fes: Fes.INVALID_HEADER_FIELD, fei: 4, headerLen: 8 },
  { name: 'CapsuleResp plen 24 with HDGST (too small)', role: 'host', framing: HD, bad: B.capsuleResp({ cqe: CQE }, HD, { plen: 24 }), fes: Fes.INVALID_HEADER_FIELD, fei: 4, headerLen: 8 },
  { name: 'ICReq plen 127 (too small)', role: 'controller', unprimed: true, bad: B.icReq({}, { plen: 127 }), fes: Fes.INVALID_HEADER_FIELD, fei: 4, headerLen: 8 },
  { name: 'H2CData with pdo but no data (plen 24)', role: 'controller', bad: B.h2cData({ cccid: 1, ttag: 1, datao: 0, data: DATA }, NONE, { plen: 24 }), fes: Fes.INVALID_HEADER_FIELD, fei: 4, headerLen: 8 },
  { name: 'C2HData with no data at all (pdo 0, plen 24)', role: 'host', bad: B.c2hData({ cccid: 1, datao: 0, last: true, data: Buffer.alloc(0) }), fes: Fes.INVALID_HEADER_FIELD, fei: 4, headerLen: 8 },
  { name: 'H2CData plen = pdo + DDGST (no data bytes)', role: 'controller', framing: DD, bad: B.h2cData({ cccid: 1, ttag: 1, datao: 0, data: DATA }, DD, { plen: 28 }), fes: Fes.INVALID_HEADER_FIELD, fei: 4, headerLen: 8 },
  { name: 'TermReq plen 23 (too small)', role: 'controller', bad: B.termReq(PduType.H2C_TERM_REQ, { fes: 1, fei: 0, errorData: Buffer.alloc(0) }, { plen: 23 }), fes: Fes.INVALID_HEADER_FIELD, fei: 4, headerLen: 8 },
  { name: 'R2T plen 25 (too big)', role: 'host', bad: B.r2t({ cccid: 1, ttag: 1, r2to: 0, r2tl: 1 }, NONE, { plen: 25 }), fes: Fes.INVALID_HEADER_FIELD, fei: 4, headerLen: 8 },
  { name: 'ICResp plen 129 (too big)', role: 'host', unprimed: true, bad: B.icResp({}, { plen: 129 }), fes: Fes.INVALID_HEADER_FIELD, fei: 4, headerLen: 8 },
  { name: 'CapsuleResp plen 0xffffffff (too big)', role: 'host', bad: B.capsuleResp({ cqe: CQE }, NONE, { plen: 0xffffffff }), fes: Fes.INVALID_HEADER_FIELD, fei: 4, headerLen: 8 },
  { name: 'TermReq plen 153 (> 24 + 128)', role: 'host', bad: B.termReq(PduType.C2H_TERM_REQ, { fes: 1, fei: 0, errorData: Buffer.alloc(128) }, { plen: 153 }), fes: Fes.INVALID_HEADER_FIELD, fei: 4, headerLen: 8 },

  // IC parameters (§3.6.2.2/3)
  { name: 'ICReq pfv 1', role: 'controller', unprimed: true, bad: B.icReq({ pfv: 1 }), fes: Fes.UNSUPPORTED_PARAMETER, fei: 8, headerLen: 128 },
  { name: 'ICResp pfv 0x100', role: 'host', unprimed: true, bad: B.icResp({ pfv: 0x100 }), fes: Fes.UNSUPPORTED_PARAMETER, fei: 8, headerLen: 128 },
  { name: 'ICReq hpda 32', role: 'controller', unprimed: true, bad: B.icReq({ hpda: 32 }), fes: Fes.INVALID_HEADER_FIELD, fei: 10, headerLen: 128 },
  { name: 'ICResp cpda 255', role: 'host', unprimed: true, bad: B.icResp({ cpda: 255 }), fes: Fes.INVALID_HEADER_FIELD, fei: 10, headerLen: 128 },
  { name: 'ICReq digest bit 2', role: 'controller', unprimed: true, bad: B.icReq({ dgst: 4 }), fes: Fes.INVALID_HEADER_FIELD, fei: 11, headerLen: 128 },
  { name: 'ICResp maxh2cdata 4092 (< 4096)', role: 'host', unprimed: true, bad: B.icResp({ maxh2cdata: 4092 }), fes: Fes.INVALID_HEADER_FIELD, fei: 12, headerLen: 128 },
  { name: 'ICResp maxh2cdata 0', role: 'host', unprimed: true, bad: B.icResp({ maxh2cdata: 0 }), fes: Fes.INVALID_HEADER_FIELD, fei: 12, headerLen: 128 },
  { name: 'ICResp maxh2cdata 8194 (not a multiple of 4)', role: 'host', unprimed: true, bad: B.icResp({ maxh2cdata: 8194 }), fes: Fes.INVALID_HEADER_FIELD, fei: 12, headerLen: 128 },

  // data lengths
  { name: 'H2CData datal 36 but 37 bytes carried', role: 'controller', bad: B.h2cData({ cccid: 1, ttag: 1, datao: 0, datal: 36, data: DATA }), fes: Fes.INVALID_HEADER_FIELD, fei: 16, headerLen: 24 },
  { name: 'H2CData datal 38 but 37 bytes carried (with digests)', role: 'controller', framing: BOTH, bad: B.h2cData({ cccid: 1, ttag: 1, datao: 0, datal: 38, data: DATA }, BOTH), fes: Fes.INVALID_HEADER_FIELD, fei: 16, headerLen: 24 },
  { name: 'C2HData datal 0 but 37 bytes carried', role: 'host', bad: B.c2hData({ cccid: 1, datao: 0, datal: 0, last: true, data: DATA }), fes: Fes.INVALID_HEADER_FIELD, fei: 16, headerLen: 24 },
  { name: 'H2CData 4100 bytes > maxDataLength 4096', role: 'controller', opts: { maxDataLength: 4096 }, bad: B.h2cData({ cccid: 1, ttag: 1, datao: 0, data: B.pattern(4100) }), fes: Fes.DATA_LIMIT_EXCEEDED, fei: 4, headerLen: 8 },
  { name: 'CapsuleCmd 4097 bytes in-capsule > maxInCapsuleData 4096', role: 'controller', opts: { maxInCapsuleData: 4096 }, bad: B.capsuleCmd({ sqe: SQE, data: B.pattern(4097) }), fes: Fes.DATA_LIMIT_EXCEEDED, fei: 4, headerLen: 8 },
  { name: 'R2T r2tl 0', role: 'host', bad: B.r2t({ cccid: 1, ttag: 1, r2to: 0, r2tl: 0 }), fes: Fes.INVALID_HEADER_FIELD, fei: 16, headerLen: 24 },
  { name: 'R2T r2tl 0 (with HDGST)', role: 'host', framing: HD, bad: B.r2t({ cccid: 1, ttag: 1, r2to: 0, r2tl: 0 }, HD), fes: Fes.INVALID_HEADER_FIELD, fei: 16, headerLen: 24 },

  // digests
  {
    name: 'header digest mismatch (one SQE byte changed after the digest)',
    role: 'controller',
    framing: HD,
    bad: patch(B.capsuleCmd({ sqe: SQE }, HD), (c) => (c[20] = (c[20] as number) ^ 0x01)),
    fes: Fes.HEADER_DIGEST_ERROR,
    fei: 0,
    headerLen: 72,
  },
  { name: 'header digest bytes wrong', role: 'host', framing: HD, bad: patch(B.capsuleResp({ cqe: CQE }, HD), (c) => (c[27] = (c[27] as number) ^ 0x80)), fes: Fes.HEADER_DIGEST_ERROR, fei: 0, headerLen: 24 },
  {
    name: 'data digest mismatch without onDataDigestError (fatal, like SPDK)',
    role: 'controller',
    framing: DD,
    bad: patch(B.h2cData({ cccid: 1, ttag: 1, datao: 0, data: DATA }, DD), (c) => (c[30] = (c[30] as number) ^ 0xff)),
    fes: Fes.HEADER_DIGEST_ERROR,
    fei: 0,
    headerLen: 24,
  },
];

function run(c: BadCase, chunks: (all: Buffer) => Buffer[]): ReturnType<typeof readChunks> {
  const framing = c.framing ?? NONE;
  const stream = Buffer.concat([...(c.unprimed === true ? [] : [primer(c.role, framing)]), ...(c.before ?? []), c.bad]);
  return readChunks(chunks(stream), { role: c.role, framing, ...c.opts });
}

describe('fatal findings: exact FES and FEI', () => {
  it.each(CASES)('$name → FES $fes FEI $fei', (c) => {
    const primed = c.unprimed === true ? 0 : 1;
    for (const chunking of [(s: Buffer) => [s], byteByByte]) {
      const r = run(c, chunking);
      expect(r.pdus).toHaveLength(primed + (c.before?.length ?? 0));
      expect(r.fatals).toHaveLength(1);
      const f = r.fatals[0];
      expect({ fes: f?.fes, fei: f?.fei }).toEqual({ fes: c.fes, fei: c.fei });
      expect(f?.reason).toMatch(/\S/);
      expect(f?.header.toString('hex')).toBe(c.bad.subarray(0, c.headerLen).toString('hex'));
      expect(r.reader.failed).toBe(true);
    }
  });
});

describe('after a fatal finding', () => {
  it('ignores all further input, valid or not, and reports nothing more', () => {
    const r = readChunks([primer('controller'), B.capsuleCmd({ sqe: SQE }, HD)], { role: 'controller' });
    expect(r.fatals).toHaveLength(1);
    const before = r.events.length;
    r.reader.push(B.capsuleCmd({ sqe: SQE }));
    r.reader.push(Buffer.from([0xff, 0xff, 0xff]));
    r.reader.push(B.icReq({}));
    expect(r.events).toHaveLength(before);
    expect(r.reader.failed).toBe(true);
  });

  it('drops the rest of the chunk that held the bad PDU', () => {
    const good = B.capsuleCmd({ sqe: SQE });
    const r = readChunks([Buffer.concat([primer('controller'), good, B.capsuleCmd({ sqe: SQE }, NONE, { hlen: 73 }), good, good])], { role: 'controller' });
    expect(r.events).toEqual(['pdu', 'pdu', 'fatal']);
  });
});

describe('data digest errors with onDataDigestError', () => {
  it('reports the PDU and keeps reading (the Linux host completes the command with DATA_XFER_ERROR)', () => {
    const good = B.c2hData({ cccid: 1, datao: 0, last: true, data: DATA }, BOTH);
    const bad = patch(good, (c) => (c[40] = (c[40] as number) ^ 0x01));
    const after = B.capsuleResp({ cqe: CQE }, BOTH);
    for (const chunks of [[Buffer.concat([primer('host', BOTH), good, bad, after])], byteByByte(Buffer.concat([primer('host', BOTH), good, bad, after]))]) {
      const r = readChunks(chunks, { role: 'host', framing: BOTH, primed: false, collectDigestErrors: true });
      expect(r.events).toEqual(['pdu', 'pdu', 'ddgst', 'pdu']);
      expect(r.fatals).toEqual([]);
      const e = r.digestErrors[0];
      expect(e?.type).toBe(PduType.C2H_DATA);
      if (e?.type === PduType.C2H_DATA) expect(e.cccid).toBe(1);
    }
  });

  it('a wrong DDGST value (data intact) is also a data digest error', () => {
    const bad = patch(B.capsuleCmd({ sqe: SQE, data: DATA }, DD), (c) => (c[c.length - 1] = (c[c.length - 1] as number) ^ 0x01));
    const r = readChunks([bad], { role: 'controller', framing: DD, primed: true, collectDigestErrors: true });
    expect(r.events).toEqual(['ddgst']);
  });
});

describe('limits at their edge are accepted', () => {
  it.each([
    { name: 'H2CData of exactly maxDataLength', role: 'controller' as const, opts: { maxDataLength: 4096 }, pdu: B.h2cData({ cccid: 1, ttag: 1, datao: 0, data: B.pattern(4096) }) },
    { name: 'CapsuleCmd of exactly maxInCapsuleData', role: 'controller' as const, opts: { maxInCapsuleData: 4096 }, pdu: B.capsuleCmd({ sqe: SQE, data: B.pattern(4096) }) },
    { name: 'maxDataLength does not limit in-capsule data', role: 'controller' as const, opts: { maxDataLength: 4096 }, pdu: B.capsuleCmd({ sqe: SQE, data: B.pattern(8192) }) },
    { name: 'maxInCapsuleData does not limit H2CData', role: 'controller' as const, opts: { maxInCapsuleData: 1024 }, pdu: B.h2cData({ cccid: 1, ttag: 1, datao: 0, data: B.pattern(8192) }) },
    { name: 'TermReq plen 152', role: 'host' as const, opts: {}, pdu: B.termReq(PduType.C2H_TERM_REQ, { fes: 1, fei: 0, errorData: Buffer.alloc(128) }) },
    { name: 'ICResp maxh2cdata 4096', role: 'host' as const, opts: {}, pdu: B.icResp({ maxh2cdata: 4096 }) },
    { name: 'ICReq hpda 31', role: 'controller' as const, opts: {}, pdu: B.icReq({ hpda: 31 }) },
    { name: 'TermReq before the IC exchange', role: 'controller' as const, opts: {}, pdu: B.termReq(PduType.H2C_TERM_REQ, { fes: 2, fei: 0, errorData: Buffer.alloc(0) }) },
  ])('$name', ({ role, opts, pdu }) => {
    const r = readChunks([pdu], { role, ...opts, primed: pdu[0] !== PduType.IC_REQ && pdu[0] !== PduType.IC_RESP && pdu[0] !== PduType.H2C_TERM_REQ });
    expect(r.fatals).toEqual([]);
    expect(r.pdus).toHaveLength(1);
  });
});

describe('validatePduHeader', () => {
  const ctx = (over: Partial<HeaderContext> = {}): HeaderContext => ({ role: 'controller', icDone: true, hdgst: false, ddgst: false, pda: 0, maxDataLength: 0, ...over });
  it.each([
    { name: 'CapsuleCmd no data', ch: B.capsuleCmd({ sqe: SQE }), c: ctx(), headLen: 72, dataLen: 0 },
    { name: 'CapsuleCmd no data + HDGST', ch: B.capsuleCmd({ sqe: SQE }, HD), c: ctx({ hdgst: true }), headLen: 76, dataLen: 0 },
    { name: 'CapsuleCmd 37 bytes, digests, CPDA 3', ch: B.capsuleCmd({ sqe: SQE, data: DATA }, { ...BOTH, pda: 3 }), c: ctx({ hdgst: true, ddgst: true, pda: 3 }), headLen: 80, dataLen: 37 },
    { name: 'H2CData 37 bytes + DDGST', ch: B.h2cData({ cccid: 1, ttag: 1, datao: 0, data: DATA }, DD), c: ctx({ ddgst: true }), headLen: 24, dataLen: 37 },
    { name: 'ICReq', ch: B.icReq({}), c: ctx({ icDone: false }), headLen: 128, dataLen: 0 },
    { name: 'TermReq with 100 bytes', ch: B.termReq(PduType.H2C_TERM_REQ, { fes: 1, fei: 0, errorData: Buffer.alloc(100) }), c: ctx({ hdgst: true, ddgst: true }), headLen: 24, dataLen: 100 },
    { name: 'R2T + HDGST (host)', ch: B.r2t({ cccid: 1, ttag: 1, r2to: 0, r2tl: 1 }, HD), c: ctx({ role: 'host', hdgst: true }), headLen: 28, dataLen: 0 },
  ])('$name: headLen $headLen, dataLen $dataLen', ({ ch, c, headLen, dataLen }) => {
    expect(validatePduHeader(ch.subarray(0, 8), c)).toEqual({ ok: true, headLen, dataLen });
  });
});
