// The one header writer per PDU type (NVMe-TCP 1.0 §3.6.2): each writes its CH (flags, hlen, pdo, plen), its
// PDU-specific fields with reserved bytes zeroed, its HDGST and the padding up to PDO. encodePdu, encodePduInto and
// every PduBatch method call these, so the framing rules of a type (§3.6.1.2 PDO, §3.6.1.3 HDGST, §3.6.1.4 DDGSTF)
// are written down once. Each returns the bytes written, i.e. where the PDU's data (if any) starts.
//
// A writer gets the destination twice: `h`, the bytes (for copies, fills and the HDGST's CRC), and `v`, a DataView over
// the same memory (v's byte 0 is h[0]) for the multi-byte fields. A DataView store is one bounds check and one store per
// field where byte stores take four of each: a CapsuleResp header costs ~5 ns so and ~18 ns as bytes (docs/performance.md).
import type { Buffer } from 'node:buffer';
import { CAPSULE_CMD_HLEN, CH_SIZE, DATA_PDU_HLEN, DIGEST_SIZE, IC_PDU_SIZE, PduFlag, PduType, TERM_REQ_HLEN, TERM_REQ_MAX_DATA, dataOffset } from './constants.js';
import { crc32c } from './crc32c.js';

/** Negotiated per-connection framing: digests from ICReq/ICResp, pda = the receiver's alignment (peer's xPDA). */
export interface PduFraming {
  hdgst: boolean;
  ddgst: boolean;
  /** Alignment (0's based dwords) the receiving side asked for: CPDA for H2C PDUs, HPDA for C2H PDUs. */
  pda: number;
}

export const NO_DIGESTS: PduFraming = Object.freeze({ hdgst: false, ddgst: false, pda: 0 });

/** Largest header a writer here produces (ICReq/ICResp 128 bytes; TermReq 24 + 128 bytes of error data). */
export const PDU_MAX_HEADER_BYTES = TERM_REQ_HLEN + TERM_REQ_MAX_DATA;

/** CapsuleResp hlen (§3.6.2.7): CH and the 16-byte CQE. */
export const CAPSULE_RESP_HLEN = 24;
/** R2T hlen (§3.6.2.10). */
const R2T_HLEN = 24;
/** The SQE a CapsuleCmd carries after its CH (§3.6.2.6). */
const SQE_BYTES = CAPSULE_CMD_HLEN - CH_SIZE;

/** A DataView over `h`'s memory, byte 0 at h[0]: the `v` a writer takes beside `h`. */
export function headerView(h: Uint8Array): DataView {
  return new DataView(h.buffer, h.byteOffset, h.byteLength);
}

/** CH (§3.6.1 Figure 17): type, flags, hlen and pdo in one little-endian word, then plen. */
function writeCh(v: DataView, o: number, type: number, flags: number, hlen: number, pdo: number, plen: number): void {
  v.setUint32(o, type | (flags << 8) | (hlen << 16) | (pdo << 24), true);
  v.setUint32(o + 4, plen, true);
}

/**
 * CH of a PDU that may carry data (CapsuleCmd, H2CData, C2HData): PDO is where data starts after the header, its HDGST
 * and padding to the receiver's alignment, and 0 without data (§3.6.1.2); DDGSTF only with data (§3.6.1.4); PLEN
 * covers header, padding, data and DDGST. Returns the bytes before the data.
 */
function writeDataCh(v: DataView, o: number, type: number, flags: number, hlen: number, datal: number, f: PduFraming): number {
  const hdgst = f.hdgst;
  let headLen = hdgst ? hlen + DIGEST_SIZE : hlen;
  let pdo = 0;
  let plen = headLen;
  if (datal > 0) {
    if (f.pda !== 0) headLen = dataOffset(hlen, hdgst, f.pda);
    pdo = headLen;
    plen = headLen + datal;
    if (f.ddgst) {
      flags |= PduFlag.DDGSTF;
      plen += DIGEST_SIZE;
    }
  }
  writeCh(v, o, type, hdgst ? flags | PduFlag.HDGSTF : flags, hlen, pdo, plen);
  return headLen;
}

/**
 * HDGST (§3.6.1.3) after the `hlen` header bytes when on, then zero padding up to `headLen`; returns `headLen`. The
 * data writers call it only when the header has either (the plain header of every I/O command ends at `hlen`).
 */
function finishHeader(h: Buffer, v: DataView, o: number, hlen: number, hdgst: boolean, headLen: number): number {
  if (hdgst) v.setUint32(o + hlen, crc32c(h.subarray(o, o + hlen)), true);
  const padFrom = hlen + (hdgst ? DIGEST_SIZE : 0);
  if (headLen > padFrom) h.fill(0, o + padFrom, o + headLen);
  return headLen;
}

/**
 * ICReq (§3.6.2.2) and ICResp (§3.6.2.3) share one layout: 128 bytes, no digests, no flags; PFV, then HPDA or CPDA,
 * the digest bits, then MAXR2T or MAXH2CDATA; the rest reserved.
 */
function writeIcHeader(h: Buffer, v: DataView, o: number, type: number, pfv: number, pda: number, dgst: number, last32: number): number {
  h.fill(0, o, o + IC_PDU_SIZE);
  writeCh(v, o, type, 0, IC_PDU_SIZE, 0, IC_PDU_SIZE);
  v.setUint16(o + 8, pfv, true);
  v.setUint8(o + 10, pda);
  v.setUint8(o + 11, dgst);
  v.setUint32(o + 12, last32 >>> 0, true);
  return IC_PDU_SIZE;
}

/** ICReq (§3.6.2.2): HPDA and MAXR2T. */
export function writeIcReqHeader(h: Buffer, v: DataView, o: number, pfv: number, hpda: number, dgst: number, maxr2t: number): number {
  return writeIcHeader(h, v, o, PduType.IC_REQ, pfv, hpda, dgst, maxr2t);
}

/** ICResp (§3.6.2.3): CPDA and MAXH2CDATA. */
export function writeIcRespHeader(h: Buffer, v: DataView, o: number, pfv: number, cpda: number, dgst: number, maxh2cdata: number): number {
  return writeIcHeader(h, v, o, PduType.IC_RESP, pfv, cpda, dgst, maxh2cdata);
}

/**
 * H2CTermReq / C2HTermReq (§3.6.2.4/5): no digests ever; the error data (up to 128 bytes of the offending header) is
 * part of the PDU here, so this writes the whole PDU and returns its PLEN.
 */
export function writeTermReqHeader(h: Buffer, v: DataView, o: number, type: typeof PduType.H2C_TERM_REQ | typeof PduType.C2H_TERM_REQ, fes: number, fei: number, errorData: Buffer): number {
  const n = Math.min(errorData.length, TERM_REQ_MAX_DATA);
  h.fill(0, o, o + TERM_REQ_HLEN);
  writeCh(v, o, type, 0, TERM_REQ_HLEN, 0, TERM_REQ_HLEN + n);
  v.setUint16(o + 8, fes, true);
  v.setUint32(o + 10, fei >>> 0, true);
  errorData.copy(h, o + TERM_REQ_HLEN, 0, n);
  return TERM_REQ_HLEN + n;
}

/**
 * CapsuleCmd (§3.6.2.6): CH and the 64-byte SQE (a shorter `sqe` is zero-filled, a longer one cut), then HDGST and
 * padding up to PDO when `datal` bytes of in-capsule data follow. The host's per-command writer: one TypedArray.set,
 * no argument-checked fill/copy on the common 64-byte SQE.
 */
export function writeCapsuleCmdHeader(h: Buffer, v: DataView, o: number, sqe: Buffer, datal: number, f: PduFraming): number {
  const headLen = writeDataCh(v, o, PduType.CAPSULE_CMD, 0, CAPSULE_CMD_HLEN, datal, f);
  if (sqe.length === SQE_BYTES) h.set(sqe, o + CH_SIZE);
  else {
    h.set(sqe.length > SQE_BYTES ? sqe.subarray(0, SQE_BYTES) : sqe, o + CH_SIZE);
    if (sqe.length < SQE_BYTES) h.fill(0, o + CH_SIZE + sqe.length, o + CAPSULE_CMD_HLEN);
  }
  return headLen === CAPSULE_CMD_HLEN ? headLen : finishHeader(h, v, o, CAPSULE_CMD_HLEN, f.hdgst, headLen);
}

/**
 * CapsuleResp (§3.6.2.7): CH and the 16-byte CQE (NVMe Base 2.0 §4.2.2: DW0, DW1, SQHD, SQID, CID, status word),
 * then HDGST. `sf` is the CQE's 16-bit status word as sent (status << 1 | phase; the phase bit is 0 on NVMe/TCP).
 * Written field by field, so the per-command completion neither builds nor copies a CQE.
 */
export function writeCapsuleRespHeader(h: Buffer, v: DataView, o: number, hdgst: boolean, dw0: number, dw1: number, sqhd: number, sqid: number, cid: number, sf: number): number {
  writeCh(v, o, PduType.CAPSULE_RESP, hdgst ? PduFlag.HDGSTF : 0, CAPSULE_RESP_HLEN, 0, hdgst ? CAPSULE_RESP_HLEN + DIGEST_SIZE : CAPSULE_RESP_HLEN);
  v.setUint32(o + 8, dw0, true);
  v.setUint32(o + 12, dw1, true);
  // Two 16-bit fields a word: SQHD and SQID, CID and the status word.
  v.setUint32(o + 16, ((sqhd & 0xffff) | (sqid << 16)) >>> 0, true);
  v.setUint32(o + 20, ((cid & 0xffff) | (sf << 16)) >>> 0, true);
  return hdgst ? finishHeader(h, v, o, CAPSULE_RESP_HLEN, true, CAPSULE_RESP_HLEN + DIGEST_SIZE) : CAPSULE_RESP_HLEN;
}

/** H2CData (§3.6.2.8): CCCID, TTAG, DATAO, DATAL, reserved; LAST in the CH flags. */
export function writeH2CDataHeader(h: Buffer, v: DataView, o: number, cccid: number, ttag: number, datao: number, datal: number, last: boolean, f: PduFraming): number {
  const headLen = writeDataCh(v, o, PduType.H2C_DATA, last ? PduFlag.DATA_LAST : 0, DATA_PDU_HLEN, datal, f);
  v.setUint32(o + 8, ((cccid & 0xffff) | (ttag << 16)) >>> 0, true);
  v.setUint32(o + 12, datao, true);
  v.setUint32(o + 16, datal, true);
  v.setUint32(o + 20, 0, true);
  return headLen === DATA_PDU_HLEN ? headLen : finishHeader(h, v, o, DATA_PDU_HLEN, f.hdgst, headLen);
}

/** C2HData (§3.6.2.9): CCCID, reserved, DATAO, DATAL, reserved; `flags` holds DATA_LAST and DATA_SUCCESS. */
export function writeC2HDataHeader(h: Buffer, v: DataView, o: number, cccid: number, datao: number, datal: number, flags: number, f: PduFraming): number {
  const headLen = writeDataCh(v, o, PduType.C2H_DATA, flags, DATA_PDU_HLEN, datal, f);
  v.setUint32(o + 8, cccid & 0xffff, true);
  v.setUint32(o + 12, datao, true);
  v.setUint32(o + 16, datal, true);
  v.setUint32(o + 20, 0, true);
  return headLen === DATA_PDU_HLEN ? headLen : finishHeader(h, v, o, DATA_PDU_HLEN, f.hdgst, headLen);
}

/** R2T (§3.6.2.10): CCCID, TTAG, R2TO, R2TL, reserved; never data. */
export function writeR2THeader(h: Buffer, v: DataView, o: number, cccid: number, ttag: number, r2to: number, r2tl: number, hdgst: boolean): number {
  writeCh(v, o, PduType.R2T, hdgst ? PduFlag.HDGSTF : 0, R2T_HLEN, 0, hdgst ? R2T_HLEN + DIGEST_SIZE : R2T_HLEN);
  v.setUint32(o + 8, ((cccid & 0xffff) | (ttag << 16)) >>> 0, true);
  v.setUint32(o + 12, r2to, true);
  v.setUint32(o + 16, r2tl, true);
  v.setUint32(o + 20, 0, true);
  return hdgst ? finishHeader(h, v, o, R2T_HLEN, true, R2T_HLEN + DIGEST_SIZE) : R2T_HLEN;
}

/** C2HData flags for a PDU's LAST and SUCCESS (§3.6.2.9). */
export function c2hDataFlags(last: boolean, success: boolean): number {
  return (last ? PduFlag.DATA_LAST : 0) | (success ? PduFlag.DATA_SUCCESS : 0);
}
