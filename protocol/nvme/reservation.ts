/**
 * Reservations (NVMe Base 2.0 §8.19; the commands in NVM Command Set 1.0 §7 are the Base 2.0 §7.2-§7.5
 * Reservation Register / Report / Acquire / Release): command dword fields, the data each command carries and the
 * Reservation Status data structure that Report returns. Pure encoders / decoders.
 */
import { Buffer } from 'node:buffer';
import { InvalidArgumentError } from '../errors.js';
import { PSDT_SGL, SqeOffset } from './sqe.js';
import { NvmOpcode } from './opcodes.js';

/** Reservation types (RTYPE "Reservation Type Encoding"); 0 = no reservation held. */
export const ResvType = {
  NONE: 0,
  WRITE_EXCLUSIVE: 1,
  EXCLUSIVE_ACCESS: 2,
  WRITE_EXCLUSIVE_REG_ONLY: 3,
  EXCLUSIVE_ACCESS_REG_ONLY: 4,
  WRITE_EXCLUSIVE_ALL_REGS: 5,
  EXCLUSIVE_ACCESS_ALL_REGS: 6,
} as const;
export type ResvType = (typeof ResvType)[keyof typeof ResvType];

/** The two All Registrants types: every registrant is a reservation holder (Base 2.0 §8.19.1). */
export function isAllRegistrants(t: number): boolean {
  return t === ResvType.WRITE_EXCLUSIVE_ALL_REGS || t === ResvType.EXCLUSIVE_ACCESS_ALL_REGS;
}

/** Reservation Register Action, CDW10 bits 2:0. */
export const ResvRegisterAction = { REGISTER: 0, UNREGISTER: 1, REPLACE: 2 } as const;
export type ResvRegisterAction = (typeof ResvRegisterAction)[keyof typeof ResvRegisterAction];
/** Reservation Acquire Action, CDW10 bits 2:0. */
export const ResvAcquireAction = { ACQUIRE: 0, PREEMPT: 1, PREEMPT_AND_ABORT: 2 } as const;
export type ResvAcquireAction = (typeof ResvAcquireAction)[keyof typeof ResvAcquireAction];
/** Reservation Release Action, CDW10 bits 2:0. */
export const ResvReleaseAction = { RELEASE: 0, CLEAR: 1 } as const;
export type ResvReleaseAction = (typeof ResvReleaseAction)[keyof typeof ResvReleaseAction];
/** Change Persist Through Power Loss State, Register CDW10 bits 31:30; 1 is reserved. */
export const Cptpl = { NO_CHANGE: 0, RESERVED: 1, CLEAR: 2, SET: 3 } as const;
export type Cptpl = (typeof Cptpl)[keyof typeof Cptpl];

/** Identify Namespace RESCAP (byte 31, NVM Command Set 1.0 Identify Namespace): PTPL, one bit per type, IEKEY_X. */
export const Rescap = {
  PTPL: 1 << 0,
  WRITE_EXCLUSIVE: 1 << 1,
  EXCLUSIVE_ACCESS: 1 << 2,
  WRITE_EXCLUSIVE_REG_ONLY: 1 << 3,
  EXCLUSIVE_ACCESS_REG_ONLY: 1 << 4,
  WRITE_EXCLUSIVE_ALL_REGS: 1 << 5,
  EXCLUSIVE_ACCESS_ALL_REGS: 1 << 6,
  /** Ignore Existing Key as defined from revision 1.3 on (only Register honours IEKEY). */
  IEKEY_X: 1 << 7,
} as const;
/** Identify Controller ONCS bit 5: Reservations supported. */
export const ONCS_RESERVATIONS = 1 << 5;
/** Reservation Notification Mask feature (FID 82h) bits: set = that notice is masked (Base 2.0 §5.27.1.22). */
export const ResvNotifMask = { REG_PREEMPTED: 1 << 1, RESV_RELEASED: 1 << 2, RESV_PREEMPTED: 1 << 3 } as const;
export const RESV_NOTIF_MASK_ALL = ResvNotifMask.REG_PREEMPTED | ResvNotifMask.RESV_RELEASED | ResvNotifMask.RESV_PREEMPTED;
/** Reservation Persistence feature (FID 83h) CDW11 / dword 0 bit 0: PTPL (Base 2.0 §5.27.1.23). */
export const RESV_PERSIST_PTPL = 1;
/** Reservation Report CDW11 bit 0: Extended Data Structure. */
export const RESV_REPORT_EDS = 1;

/** Bit positions in CDW10 of Register / Acquire / Release. */
const ACTION_MASK = 0x7;
const IEKEY = 1 << 3;

export interface ResvRegisterCdw10 {
  /** Reservation Register Action (RREGA). */
  rrega: number;
  /** Ignore Existing Key. */
  iekey: boolean;
  /** Change Persist Through Power Loss State. */
  cptpl: number;
}
export function decodeResvRegisterCdw10(cdw10: number): ResvRegisterCdw10 {
  return { rrega: cdw10 & ACTION_MASK, iekey: (cdw10 & IEKEY) !== 0, cptpl: (cdw10 >>> 30) & 0x3 };
}
export function encodeResvRegisterCdw10(f: ResvRegisterCdw10): number {
  return ((f.rrega & ACTION_MASK) | (f.iekey ? IEKEY : 0) | ((f.cptpl & 0x3) << 30)) >>> 0;
}

export interface ResvAcquireCdw10 {
  /** Reservation Acquire Action (RACQA). */
  racqa: number;
  iekey: boolean;
  /** Reservation Type. */
  rtype: number;
}
export function decodeResvAcquireCdw10(cdw10: number): ResvAcquireCdw10 {
  return { racqa: cdw10 & ACTION_MASK, iekey: (cdw10 & IEKEY) !== 0, rtype: (cdw10 >>> 8) & 0xff };
}
export function encodeResvAcquireCdw10(f: ResvAcquireCdw10): number {
  return ((f.racqa & ACTION_MASK) | (f.iekey ? IEKEY : 0) | ((f.rtype & 0xff) << 8)) >>> 0;
}

export interface ResvReleaseCdw10 {
  /** Reservation Release Action (RRELA). */
  rrela: number;
  iekey: boolean;
  rtype: number;
}
export function decodeResvReleaseCdw10(cdw10: number): ResvReleaseCdw10 {
  return { rrela: cdw10 & ACTION_MASK, iekey: (cdw10 & IEKEY) !== 0, rtype: (cdw10 >>> 8) & 0xff };
}
export function encodeResvReleaseCdw10(f: ResvReleaseCdw10): number {
  return ((f.rrela & ACTION_MASK) | (f.iekey ? IEKEY : 0) | ((f.rtype & 0xff) << 8)) >>> 0;
}

/** Data of Register (16 bytes: CRKEY, NRKEY), Acquire (16: CRKEY, PRKEY) and Release (8: CRKEY). */
export const RESV_REGISTER_DATA_SIZE = 16;
export const RESV_ACQUIRE_DATA_SIZE = 16;
export const RESV_RELEASE_DATA_SIZE = 8;

/** Two 64-bit keys: Register's CRKEY/NRKEY or Acquire's CRKEY/PRKEY. */
export function encodeResvKeys(first: bigint, second: bigint): Buffer {
  const b = Buffer.alloc(16);
  b.writeBigUInt64LE(BigInt.asUintN(64, first), 0);
  b.writeBigUInt64LE(BigInt.asUintN(64, second), 8);
  return b;
}
export function encodeResvReleaseData(crkey: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt.asUintN(64, crkey), 0);
  return b;
}
/** Key `index` (0, 1) of a Register/Acquire/Release payload; missing bytes read as 0. */
export function decodeResvKey(data: Buffer, index: 0 | 1): bigint {
  const off = index * 8;
  if (data.length < off + 8) return 0n;
  return data.readBigUInt64LE(off);
}

/** Reservation Status header: 24 bytes, or 64 with the extended data structure (Base 2.0 §7.4 Reservation Report). */
export const RESV_STATUS_HEADER_SIZE = 24;
export const RESV_STATUS_EXT_HEADER_SIZE = 64;
/** Registered Controller data structure: 24 bytes (64-bit host ID) or 64 bytes extended (128-bit host ID). */
export const RESV_REGCTL_SIZE = 24;
export const RESV_REGCTL_EXT_SIZE = 64;
export const ResvStatusOffset = { gen: 0, rtype: 4, regctl: 5, ptpls: 9 } as const;
/** Registered Controller fields: CNTLID 1:0, RCSTS 2; then HOSTID 15:8 / RKEY 23:16, or extended RKEY 15:8 / HOSTID 31:16. */
export const ResvRegctlOffset = { cntlid: 0, rcsts: 2, hostid: 8, rkey: 16 } as const;
export const ResvRegctlExtOffset = { cntlid: 0, rcsts: 2, rkey: 8, hostid: 16 } as const;
/** CNTLID of a registrant under the dynamic controller model. */
export const RESV_CNTLID_DYNAMIC = 0xffff;

export interface ResvRegisteredCtrl {
  /** Controller ID (FFFFh: dynamic controller model). */
  cntlid: number;
  /** RCSTS bit 0: this registrant holds the reservation. */
  holder: boolean;
  /** Host identifier: 8 bytes (EDS 0) or 16 bytes (EDS 1). */
  hostid: Buffer;
  rkey: bigint;
}

export interface ResvStatus {
  /** Generation: bumped by Register, Preempt and Clear. */
  gen: number;
  rtype: number;
  /** Persist Through Power Loss State. */
  ptpls: boolean;
  regctls: ResvRegisteredCtrl[];
}

/** Full Reservation Status data structure (the controller then returns the first NUMD+1 dwords). */
export function encodeResvStatus(s: ResvStatus, eds: boolean): Buffer {
  const hdr = eds ? RESV_STATUS_EXT_HEADER_SIZE : RESV_STATUS_HEADER_SIZE;
  const sz = eds ? RESV_REGCTL_EXT_SIZE : RESV_REGCTL_SIZE;
  const idLen = eds ? 16 : 8;
  const b = Buffer.alloc(hdr + sz * s.regctls.length);
  b.writeUInt32LE(s.gen >>> 0, ResvStatusOffset.gen);
  b[ResvStatusOffset.rtype] = s.rtype & 0xff;
  b.writeUInt16LE(s.regctls.length & 0xffff, ResvStatusOffset.regctl);
  b[ResvStatusOffset.ptpls] = s.ptpls ? 1 : 0;
  s.regctls.forEach((r, i) => {
    const o = hdr + i * sz;
    if (r.hostid.length !== idLen) throw new InvalidArgumentError('hostid', `${r.hostid.length} bytes; the ${eds ? 'extended' : 'plain'} structure holds ${idLen}`);
    const off = eds ? ResvRegctlExtOffset : ResvRegctlOffset;
    b.writeUInt16LE(r.cntlid & 0xffff, o + off.cntlid);
    b[o + off.rcsts] = r.holder ? 1 : 0;
    r.hostid.copy(b, o + off.hostid);
    b.writeBigUInt64LE(BigInt.asUintN(64, r.rkey), o + off.rkey);
  });
  return b;
}

/** Decodes a (possibly truncated) Reservation Status; entries beyond the buffer are left out. */
export function decodeResvStatus(buf: Buffer, eds: boolean): ResvStatus & { regctlCount: number } {
  const hdr = eds ? RESV_STATUS_EXT_HEADER_SIZE : RESV_STATUS_HEADER_SIZE;
  const sz = eds ? RESV_REGCTL_EXT_SIZE : RESV_REGCTL_SIZE;
  if (buf.length < RESV_STATUS_HEADER_SIZE) throw new InvalidArgumentError('buf', `reservation status needs ${RESV_STATUS_HEADER_SIZE} bytes, got ${buf.length}`);
  const count = buf.readUInt16LE(ResvStatusOffset.regctl);
  const off = eds ? ResvRegctlExtOffset : ResvRegctlOffset;
  const idLen = eds ? 16 : 8;
  const regctls: ResvRegisteredCtrl[] = [];
  for (let i = 0; i < count; i++) {
    const o = hdr + i * sz;
    if (o + sz > buf.length) break;
    regctls.push({
      cntlid: buf.readUInt16LE(o + off.cntlid),
      holder: ((buf[o + off.rcsts] as number) & 1) !== 0,
      hostid: Buffer.from(buf.subarray(o + off.hostid, o + off.hostid + idLen)),
      rkey: buf.readBigUInt64LE(o + off.rkey),
    });
  }
  return { gen: buf.readUInt32LE(ResvStatusOffset.gen), rtype: buf[ResvStatusOffset.rtype] as number, ptpls: ((buf[ResvStatusOffset.ptpls] as number) & 1) !== 0, regctls, regctlCount: count };
}

/** AER dword 0 for "Reservation Log Page Available": type 6 (I/O command specific), info 0, log 80h. */
export const AEN_RESV_LOG_AVAILABLE = 0x0080_0006;

/** SQE of a reservation command (NVM Command Set: NSID, CDW10, CDW11 only; the data goes through SGL1). */
export function encodeResvCmd(c: { opcode: number; cid: number; nsid: number; cdw10: number; cdw11?: number }): Buffer {
  if (c.opcode !== NvmOpcode.RESV_REGISTER && c.opcode !== NvmOpcode.RESV_REPORT && c.opcode !== NvmOpcode.RESV_ACQUIRE && c.opcode !== NvmOpcode.RESV_RELEASE) {
    throw new InvalidArgumentError('opcode', `0x${c.opcode.toString(16)} is not a reservation command`);
  }
  const b = Buffer.alloc(64);
  b[SqeOffset.opcode] = c.opcode;
  b[SqeOffset.flags] = PSDT_SGL;
  b.writeUInt16LE(c.cid & 0xffff, SqeOffset.cid);
  b.writeUInt32LE(c.nsid >>> 0, SqeOffset.nsid);
  b.writeUInt32LE(c.cdw10 >>> 0, SqeOffset.cdw10);
  b.writeUInt32LE((c.cdw11 ?? 0) >>> 0, SqeOffset.cdw11);
  return b;
}
