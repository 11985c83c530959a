/**
 * NVMe completion queue entry (16 B). NVMe Base 2.0 §4.6, Figure 92; NVMe-oF 1.1 §2.2 (the phase
 * tag has no meaning in a response capsule and is sent as 0).
 */
import { Buffer } from 'node:buffer';
import { u16, u32, zeroFilledWindow } from './wire.js';

/** Size of a completion queue entry (CC.IOCQES 4 = 2^4). */
export const CQE_SIZE = 16;

/** Byte offsets of the CQE fields (NVMe Base 2.0 Figure 92). */
export const CqeOffset = { dw0: 0, dw1: 4, sqhd: 8, sqid: 10, cid: 12, status: 14 } as const;

/** A decoded completion queue entry. */
export interface Cqe {
  /** Command specific result (e.g. Connect cntlid, Property Get low dword). */
  dw0: number;
  /** Command specific (high dword of an 8-byte property). */
  dw1: number;
  /** SQ head pointer; 0xFFFF when SQ flow control is disabled (nvmet). */
  sqhd: number;
  /** Submission queue identifier. */
  sqid: number;
  /** Command identifier, echoed. */
  cid: number;
  /**
   * Linux-style 15-bit status: SC bits 7:0, SCT 10:8, CRD 12:11, MORE bit 13, DNR bit 14. This is
   * the wire status word shifted right by one (the phase bit dropped).
   */
  status: number;
}

/** Input to encodeCqe: cid is required, the rest defaults to 0. */
export type CqeInit = Partial<Cqe> & { cid: number };

/** Decodes a 16-byte CQE; short input is zero-filled. The phase tag is ignored. */
export function decodeCqe(buf: Buffer, offset = 0): Cqe {
  const b = zeroFilledWindow(buf, offset, CQE_SIZE);
  return {
    dw0: b.readUInt32LE(CqeOffset.dw0),
    dw1: b.readUInt32LE(CqeOffset.dw1),
    sqhd: b.readUInt16LE(CqeOffset.sqhd),
    sqid: b.readUInt16LE(CqeOffset.sqid),
    cid: b.readUInt16LE(CqeOffset.cid),
    status: b.readUInt16LE(CqeOffset.status) >>> 1,
  };
}

/** Writes a CQE into `buf` at `offset`; the wire status word is `status << 1` (phase 0). */
export function encodeCqeInto(buf: Buffer, offset: number, cqe: CqeInit): void {
  buf.writeUInt32LE(u32(cqe.dw0 ?? 0), offset + CqeOffset.dw0);
  buf.writeUInt32LE(u32(cqe.dw1 ?? 0), offset + CqeOffset.dw1);
  buf.writeUInt16LE(u16(cqe.sqhd ?? 0), offset + CqeOffset.sqhd);
  buf.writeUInt16LE(u16(cqe.sqid ?? 0), offset + CqeOffset.sqid);
  buf.writeUInt16LE(u16(cqe.cid), offset + CqeOffset.cid);
  buf.writeUInt16LE(((cqe.status ?? 0) << 1) & 0xfffe, offset + CqeOffset.status);
}

/** Encodes a CQE into a new 16-byte buffer. */
export function encodeCqe(cqe: CqeInit): Buffer {
  const buf = Buffer.alloc(CQE_SIZE);
  encodeCqeInto(buf, 0, cqe);
  return buf;
}

/** dw1:dw0 as one 64-bit value (Property Get of an 8-byte property, NVMe-oF 1.1 §3.4). */
export function cqeResult64(cqe: Pick<Cqe, 'dw0' | 'dw1'>): bigint {
  return (BigInt(cqe.dw1 >>> 0) << 32n) | BigInt(cqe.dw0 >>> 0);
}

/** Splits a 64-bit result into dw0 (low) and dw1 (high). */
export function splitResult64(value: bigint): { dw0: number; dw1: number } {
  const v = BigInt.asUintN(64, value);
  return { dw0: Number(v & 0xffff_ffffn), dw1: Number(v >> 32n) };
}
