/**
 * NVMe submission queue entry (64 B), the SGL descriptor as NVMe/TCP uses it, and the NVM command
 * set field helpers (Read/Write, Write Zeroes, Dataset Management). NVMe Base 2.0 §4.2, §4.3.2;
 * NVM Command Set 1.0 §3.2, §4.
 */
import { Buffer } from 'node:buffer';
import { NvmOpcode } from './opcodes.js';
import { u16, u32, u64, u8, zeroFilledWindow } from './wire.js';

/** Size of a submission queue entry (NVMe Base 2.0 §4.2; CAP/CC IOSQES 6 = 2^6). */
export const SQE_SIZE = 64;

/** Byte offsets of the common SQE fields (NVMe Base 2.0 Figure 88 "Common Command Format"). */
export const SqeOffset = {
  opcode: 0,
  flags: 1,
  cid: 2,
  nsid: 4,
  cdw2: 8,
  cdw3: 12,
  mptr: 16,
  dptr: 24,
  cdw10: 40,
  cdw11: 44,
  cdw12: 48,
  cdw13: 52,
  cdw14: 56,
  cdw15: 60,
} as const;

/**
 * Flags byte value with PSDT = 01b (SGL, MPTR contiguous). NVMe-oF 1.1 §2.1: fabrics capsules
 * always use SGLs, so this is the default flags byte.
 */
export const PSDT_SGL = 0x40;

/** Masks within the SQE flags byte (NVMe Base 2.0 Figure 87 CDW0). */
export const SqeFlags = {
  /** bits 1:0 — fused operation (0 normal, 1 first, 2 second). */
  FUSE_MASK: 0x03,
  /** bits 7:6 — PRP or SGL for data transfer. */
  PSDT_MASK: 0xc0,
} as const;

/** FUSE values (bits 1:0 of the flags byte). */
export const Fuse = { NORMAL: 0, FIRST: 1, SECOND: 2 } as const;
export type Fuse = (typeof Fuse)[keyof typeof Fuse];

/**
 * PSDT values as they sit in the flags byte (already shifted to bits 7:6), so that
 * `sqe.psdt === Psdt.SGL` and `sqe.psdt === PSDT_SGL` both work.
 */
export const Psdt = { PRP: 0x00, SGL: 0x40, SGL_MPTR_SGL: 0x80 } as const;
export type Psdt = (typeof Psdt)[keyof typeof Psdt];

/** SGL descriptor size (NVMe Base 2.0 §4.3.2). */
export const SGL_DESC_SIZE = 16;

/** NSID FFFFFFFFh: all namespaces (broadcast), where a command allows it (NVMe Base 2.0 §3.2.1.2). */
export const NSID_BROADCAST = 0xffff_ffff;

/** Byte offsets inside an SGL descriptor (NVMe Base 2.0 Figure 115). */
export const SglOffset = { address: 0, length: 8, type: 15 } as const;

/**
 * Byte offsets inside the SQE of SGL1, the descriptor in DPTR (NVMe Base 2.0 §4.3.2): what a target reports as the
 * parameter error location (Error Information log, NVMe Base 2.0 §5.16.1.2) when the SGL is at fault.
 */
export const Sgl1Offset = {
  address: SqeOffset.dptr + SglOffset.address,
  length: SqeOffset.dptr + SglOffset.length,
  type: SqeOffset.dptr + SglOffset.type,
} as const;

/**
 * Whole byte 15 of an SGL descriptor: type in bits 7:4, sub-type in bits 3:0 (NVMe Base 2.0
 * Figures 116/117). NVMe/TCP 1.0 §3.3.3 uses only 0x5A and 0x01.
 */
export const SglType = {
  /** Data Block, sub-type address (PCIe/RDMA). */
  DATA_BLOCK: 0x00,
  /** Data Block, sub-type offset: in-capsule data at ICDOFF + address. */
  DATA_BLOCK_OFFSET: 0x01,
  BIT_BUCKET: 0x10,
  SEGMENT: 0x20,
  SEGMENT_OFFSET: 0x21,
  LAST_SEGMENT: 0x30,
  LAST_SEGMENT_OFFSET: 0x31,
  /** Keyed SGL Data Block: RDMA only. */
  KEYED_DATA_BLOCK: 0x40,
  /** Transport SGL Data Block, sub-type transport specific: data moved by C2HData/R2T. */
  TRANSPORT_DATA_BLOCK: 0x5a,
} as const;
export type SglType = (typeof SglType)[keyof typeof SglType];

/** SGL descriptor type field (bits 7:4 of byte 15). */
export const SglDescType = {
  DATA_BLOCK: 0x0,
  BIT_BUCKET: 0x1,
  SEGMENT: 0x2,
  LAST_SEGMENT: 0x3,
  KEYED_DATA_BLOCK: 0x4,
  TRANSPORT_DATA_BLOCK: 0x5,
  VENDOR_SPECIFIC: 0xf,
} as const;
export type SglDescType = (typeof SglDescType)[keyof typeof SglDescType];

/** SGL descriptor sub-type field (bits 3:0 of byte 15). */
export const SglSubtype = { ADDRESS: 0x0, OFFSET: 0x1, TRANSPORT: 0xa } as const;
export type SglSubtype = (typeof SglSubtype)[keyof typeof SglSubtype];

/** Type field (bits 7:4) of an SGL type byte. */
export function sglDescType(type: number): number {
  return (type >> 4) & 0xf;
}

/** Sub-type field (bits 3:0) of an SGL type byte. */
export function sglSubtype(type: number): number {
  return type & 0xf;
}

/** One SGL descriptor (the SQE's DPTR on fabrics). */
export interface SglDescriptor {
  /** Address, or the offset into in-capsule data for sub-type offset (must be 0 on TCP). */
  address: bigint;
  /** Data length in bytes. */
  length: number;
  /** Whole byte 15: type (7:4) and sub-type (3:0), e.g. 0x5A or 0x01. */
  type: number;
}

/** A decoded submission queue entry. Numbers are unsigned; 64-bit fields are bigint. */
export interface Sqe {
  /** Command opcode (byte 0). */
  opcode: number;
  /** Whole flags byte (byte 1): FUSE bits 1:0, PSDT bits 7:6. */
  flags: number;
  /** FUSE, `flags & 0x03`. */
  fuse: number;
  /** PSDT left in place, `flags & 0xC0`: compare with PSDT_SGL (0x40). */
  psdt: number;
  /** Command identifier, opaque to the controller (Linux puts a generation counter in 15:12). */
  cid: number;
  /** Namespace identifier (for Fabrics commands byte 4 holds FCTYPE). */
  nsid: number;
  cdw2: number;
  cdw3: number;
  /** Metadata pointer; unused on TCP. */
  mptr: bigint;
  /** SGL1 (DPTR). */
  sgl: SglDescriptor;
  cdw10: number;
  cdw11: number;
  cdw12: number;
  cdw13: number;
  cdw14: number;
  cdw15: number;
}

/**
 * Input to encodeSqe: opcode and cid are required, everything else defaults to 0, except flags
 * (PSDT_SGL) and sgl (transport data block, length 0: the "null" SGL Linux sends for no-data
 * commands). `psdt` and `fuse`, when given, replace their bits in `flags`.
 */
export type SqeInit = Partial<Omit<Sqe, 'opcode' | 'cid'>> & { opcode: number; cid: number };

/** The "null" SGL (transport data block, length 0) for commands whose encoder input names none. */
const NULL_SGL: Readonly<SglDescriptor> = Object.freeze({ address: 0n, length: 0, type: SglType.TRANSPORT_DATA_BLOCK });

/** Transport SGL Data Block for `length` bytes moved by C2HData or R2T/H2CData (NVMe/TCP 1.0 §3.3.3). */
export function sglTransport(length: number): SglDescriptor {
  return { address: 0n, length: u32(length), type: SglType.TRANSPORT_DATA_BLOCK };
}

/** Data Block with sub-type offset for in-capsule data at offset 0 (ICDOFF is 0, NVMe/TCP 1.0 §3.3.3). */
export function sglInCapsule(length: number): SglDescriptor {
  return { address: 0n, length: u32(length), type: SglType.DATA_BLOCK_OFFSET };
}

/** Decodes an SGL descriptor; short input is zero-filled. */
export function decodeSgl(buf: Buffer, offset = 0): SglDescriptor {
  const b = zeroFilledWindow(buf, offset, SGL_DESC_SIZE);
  return {
    address: b.readBigUInt64LE(SglOffset.address),
    length: b.readUInt32LE(SglOffset.length),
    type: b[SglOffset.type] ?? 0,
  };
}

/** Writes an SGL descriptor; bytes 12..14 (reserved) are zeroed. */
export function encodeSglInto(buf: Buffer, offset: number, sgl: SglDescriptor): void {
  buf.writeBigUInt64LE(u64(sgl.address), offset + SglOffset.address);
  buf.writeUInt32LE(u32(sgl.length), offset + SglOffset.length);
  buf.fill(0, offset + 12, offset + 15);
  buf[offset + SglOffset.type] = u8(sgl.type);
}

/** Decodes a 64-byte SQE; short input is zero-filled. */
export function decodeSqe(buf: Buffer, offset = 0): Sqe {
  const b = zeroFilledWindow(buf, offset, SQE_SIZE);
  const flags = b[SqeOffset.flags] ?? 0;
  return {
    opcode: b[SqeOffset.opcode] ?? 0,
    flags,
    fuse: flags & SqeFlags.FUSE_MASK,
    psdt: flags & SqeFlags.PSDT_MASK,
    cid: b.readUInt16LE(SqeOffset.cid),
    nsid: b.readUInt32LE(SqeOffset.nsid),
    cdw2: b.readUInt32LE(SqeOffset.cdw2),
    cdw3: b.readUInt32LE(SqeOffset.cdw3),
    mptr: b.readBigUInt64LE(SqeOffset.mptr),
    sgl: decodeSgl(b, SqeOffset.dptr),
    cdw10: b.readUInt32LE(SqeOffset.cdw10),
    cdw11: b.readUInt32LE(SqeOffset.cdw11),
    cdw12: b.readUInt32LE(SqeOffset.cdw12),
    cdw13: b.readUInt32LE(SqeOffset.cdw13),
    cdw14: b.readUInt32LE(SqeOffset.cdw14),
    cdw15: b.readUInt32LE(SqeOffset.cdw15),
  };
}

/** Writes an SQE into `buf` at `offset` (64 bytes must fit). */
export function encodeSqeInto(buf: Buffer, offset: number, sqe: SqeInit): void {
  let flags = u8(sqe.flags ?? PSDT_SGL);
  if (sqe.psdt !== undefined) flags = (flags & ~SqeFlags.PSDT_MASK) | (sqe.psdt & SqeFlags.PSDT_MASK);
  if (sqe.fuse !== undefined) flags = (flags & ~SqeFlags.FUSE_MASK) | (sqe.fuse & SqeFlags.FUSE_MASK);
  buf[offset + SqeOffset.opcode] = u8(sqe.opcode);
  buf[offset + SqeOffset.flags] = flags;
  buf.writeUInt16LE(u16(sqe.cid), offset + SqeOffset.cid);
  buf.writeUInt32LE(u32(sqe.nsid ?? 0), offset + SqeOffset.nsid);
  buf.writeUInt32LE(u32(sqe.cdw2 ?? 0), offset + SqeOffset.cdw2);
  buf.writeUInt32LE(u32(sqe.cdw3 ?? 0), offset + SqeOffset.cdw3);
  buf.writeBigUInt64LE(u64(sqe.mptr ?? 0n), offset + SqeOffset.mptr);
  encodeSglInto(buf, offset + SqeOffset.dptr, sqe.sgl ?? NULL_SGL);
  buf.writeUInt32LE(u32(sqe.cdw10 ?? 0), offset + SqeOffset.cdw10);
  buf.writeUInt32LE(u32(sqe.cdw11 ?? 0), offset + SqeOffset.cdw11);
  buf.writeUInt32LE(u32(sqe.cdw12 ?? 0), offset + SqeOffset.cdw12);
  buf.writeUInt32LE(u32(sqe.cdw13 ?? 0), offset + SqeOffset.cdw13);
  buf.writeUInt32LE(u32(sqe.cdw14 ?? 0), offset + SqeOffset.cdw14);
  buf.writeUInt32LE(u32(sqe.cdw15 ?? 0), offset + SqeOffset.cdw15);
}

/** Encodes an SQE into a new 64-byte buffer. */
export function encodeSqe(sqe: SqeInit): Buffer {
  const buf = Buffer.alloc(SQE_SIZE);
  encodeSqeInto(buf, 0, sqe);
  return buf;
}

// ---------------------------------------------------------------------------------------------
// NVM command set: Read / Write / Compare / Verify / Write Zeroes / Write Uncorrectable

/** CDW12 bits of the NVM Read/Write family (NVM Command Set 1.0 Figures 35/64). */
export const RwCdw12 = {
  /** bits 15:0 — NLB, 0's based. */
  NLB_MASK: 0xffff,
  /** bits 23:20 — directive type. */
  DTYPE_SHIFT: 20,
  /** bit 25 — deallocate (Write Zeroes only). */
  DEAC: 1 << 25,
  /** bits 29:26 — PRINFO. */
  PRINFO_SHIFT: 26,
  /** bit 30 — force unit access. */
  FUA: 1 << 30,
  /** bit 31 — limited retry. */
  LR: 0x8000_0000,
} as const;

/** Read/Write family fields taken from an SQE. */
export interface RwFields {
  /** Starting LBA (CDW11:CDW10). */
  slba: bigint;
  /** Number of logical blocks as a count (wire value + 1, so 1..65536). */
  nlb: number;
  /** Force Unit Access (CDW12 bit 30). */
  fua: boolean;
  /** Limited Retry (CDW12 bit 31). */
  lr: boolean;
  /** Directive type (CDW12 bits 23:20). */
  dtype: number;
  /** Dataset management hints (CDW13 bits 7:0). */
  dsm: number;
  /** Directive specific (CDW13 bits 31:16). */
  dspec: number;
}

/** Decodes SLBA, NLB (as a count), FUA, LR and hints of Read/Write/Compare/Verify/Write Zeroes. */
export function decodeRwFields(sqe: Sqe): RwFields {
  return {
    slba: (BigInt(sqe.cdw11 >>> 0) << 32n) | BigInt(sqe.cdw10 >>> 0),
    nlb: (sqe.cdw12 & RwCdw12.NLB_MASK) + 1,
    fua: (sqe.cdw12 & RwCdw12.FUA) !== 0,
    lr: (sqe.cdw12 & RwCdw12.LR) !== 0,
    dtype: (sqe.cdw12 >>> RwCdw12.DTYPE_SHIFT) & 0xf,
    dsm: sqe.cdw13 & 0xff,
    dspec: sqe.cdw13 >>> 16,
  };
}

/** Input to encodeRwCmd; `nlb` is a count (1..65536), written 0's based. */
export interface RwCmdInit {
  opcode: number;
  cid: number;
  nsid: number;
  slba: bigint;
  nlb: number;
  fua?: boolean;
  lr?: boolean;
  /** SGL1; default the null SGL (a host's transport fills it in, as Linux nvme_tcp_setup_cmd_pdu does). */
  sgl?: SglDescriptor;
}

function rwCdw10(slba: bigint): number {
  return Number(u64(slba) & 0xffff_ffffn);
}

function rwCdw11(slba: bigint): number {
  return Number(u64(slba) >> 32n);
}

/** Encodes a Read/Write-family command. */
export function encodeRwCmd(c: RwCmdInit): Buffer {
  let cdw12 = (c.nlb - 1) & RwCdw12.NLB_MASK;
  if (c.fua === true) cdw12 |= RwCdw12.FUA;
  if (c.lr === true) cdw12 |= RwCdw12.LR;
  return encodeSqe({
    opcode: c.opcode,
    cid: c.cid,
    nsid: c.nsid,
    sgl: c.sgl ?? NULL_SGL,
    cdw10: rwCdw10(c.slba),
    cdw11: rwCdw11(c.slba),
    cdw12: cdw12 >>> 0,
  });
}

/** Write Zeroes CDW12 bits (NVM Command Set 1.0 §3.2.8): DEAC bit 25, FUA bit 30. */
export const WriteZeroesFlags = { DEAC: RwCdw12.DEAC, FUA: RwCdw12.FUA } as const;

/** Write Zeroes fields. */
export interface WriteZeroesFields {
  slba: bigint;
  /** Count of blocks (wire value + 1). */
  nlb: number;
  /** Deallocate the range (CDW12 bit 25). */
  deac: boolean;
  /** Force Unit Access (CDW12 bit 30). */
  fua: boolean;
}

/** Decodes Write Zeroes fields from an SQE. */
export function decodeWriteZeroesFields(sqe: Sqe): WriteZeroesFields {
  const rw = decodeRwFields(sqe);
  return { slba: rw.slba, nlb: rw.nlb, deac: (sqe.cdw12 & RwCdw12.DEAC) !== 0, fua: rw.fua };
}

/** Encodes Write Zeroes (opcode 0x08, no data: null SGL). `nlb` is a count. */
export function encodeWriteZeroesCmd(c: {
  cid: number;
  nsid: number;
  slba: bigint;
  nlb: number;
  deac?: boolean;
  fua?: boolean;
}): Buffer {
  let cdw12 = (c.nlb - 1) & RwCdw12.NLB_MASK;
  if (c.deac === true) cdw12 |= RwCdw12.DEAC;
  if (c.fua === true) cdw12 |= RwCdw12.FUA;
  return encodeSqe({
    opcode: NvmOpcode.WRITE_ZEROES,
    cid: c.cid,
    nsid: c.nsid,
    cdw10: rwCdw10(c.slba),
    cdw11: rwCdw11(c.slba),
    cdw12: cdw12 >>> 0,
  });
}

// ---------------------------------------------------------------------------------------------
// Dataset Management (NVM Command Set 1.0 §3.2.3)

/** Size of one DSM range (NVM Command Set 1.0 Figure 39). */
export const DSM_RANGE_SIZE = 16;

/** Maximum ranges per DSM command: NR is 8 bits, 0's based. */
export const DSM_MAX_RANGES = 256;

/** Byte offsets in a DSM range. NLB is NOT 0's based here, unlike Read/Write. */
export const DsmRangeOffset = { cattr: 0, nlb: 4, slba: 8 } as const;

/** DSM CDW11 attribute bits. */
export const DsmAttr = {
  /** Integral Dataset for Read. */
  IDR: 1 << 0,
  /** Integral Dataset for Write. */
  IDW: 1 << 1,
  /** Deallocate. */
  AD: 1 << 2,
} as const;

/** One DSM range. */
export interface DsmRange {
  /** Context attributes. */
  cattr: number;
  /** Length in logical blocks (a count, not 0's based). */
  nlb: number;
  slba: bigint;
}

/**
 * Decodes `count` ranges (the count, i.e. NR + 1). `count` is clamped to 0..256; ranges past the
 * end of `buf` are zero-filled (nlb 0: they cover nothing).
 */
export function decodeDsmRanges(buf: Buffer, count: number): DsmRange[] {
  const n = Math.max(0, Math.min(DSM_MAX_RANGES, Math.trunc(Number.isFinite(count) ? count : 0)));
  const b = zeroFilledWindow(buf, 0, n * DSM_RANGE_SIZE);
  const out: DsmRange[] = [];
  for (let i = 0; i < n; i++) {
    const o = i * DSM_RANGE_SIZE;
    out.push({
      cattr: b.readUInt32LE(o + DsmRangeOffset.cattr),
      nlb: b.readUInt32LE(o + DsmRangeOffset.nlb),
      slba: b.readBigUInt64LE(o + DsmRangeOffset.slba),
    });
  }
  return out;
}

/** Encodes DSM ranges (16 bytes each). */
export function encodeDsmRanges(ranges: readonly DsmRange[]): Buffer {
  const buf = Buffer.alloc(ranges.length * DSM_RANGE_SIZE);
  ranges.forEach((r, i) => {
    const o = i * DSM_RANGE_SIZE;
    buf.writeUInt32LE(u32(r.cattr), o + DsmRangeOffset.cattr);
    buf.writeUInt32LE(u32(r.nlb), o + DsmRangeOffset.nlb);
    buf.writeBigUInt64LE(u64(r.slba), o + DsmRangeOffset.slba);
  });
  return buf;
}

/** DSM command fields. */
export interface DsmCmdFields {
  /** Number of ranges as a count (CDW10 NR + 1, 1..256). */
  count: number;
  idr: boolean;
  idw: boolean;
  /** Deallocate (discard). */
  ad: boolean;
}

/** Decodes DSM CDW10/CDW11. */
export function decodeDsmCmd(sqe: Sqe): DsmCmdFields {
  return {
    count: (sqe.cdw10 & 0xff) + 1,
    idr: (sqe.cdw11 & DsmAttr.IDR) !== 0,
    idw: (sqe.cdw11 & DsmAttr.IDW) !== 0,
    ad: (sqe.cdw11 & DsmAttr.AD) !== 0,
  };
}

/** Encodes a DSM command (opcode 0x09); `count` is the number of ranges (1..256). */
export function encodeDsmCmd(c: {
  cid: number;
  nsid: number;
  count: number;
  ad?: boolean;
  idr?: boolean;
  idw?: boolean;
  /** SGL1; default the null SGL. */
  sgl?: SglDescriptor;
}): Buffer {
  const cdw11 = (c.idr === true ? DsmAttr.IDR : 0) | (c.idw === true ? DsmAttr.IDW : 0) | (c.ad === true ? DsmAttr.AD : 0);
  return encodeSqe({ opcode: NvmOpcode.DSM, cid: c.cid, nsid: c.nsid, sgl: c.sgl ?? NULL_SGL, cdw10: (c.count - 1) & 0xff, cdw11 });
}

// ---------------------------------------------------------------------------------------------
// Copy (NVM Command Set 1.0 §3.2.2)

/**
 * Source Range Entry sizes by Descriptor Format (NVM Command Set 1.0 Figures 33 and 34): format 0 (16-bit guard
 * protection information) 32 bytes, format 1 (32/64-bit guard) 40 bytes. Both hold SLBA and NLB at the same offsets.
 */
export const COPY_RANGE_SIZE: readonly [number, number] = [32, 40];

/** Byte offsets in a Source Range Entry of either format. NLB is 0's based here, as in Read/Write. */
export const CopyRangeOffset = { slba: 8, nlb: 16 } as const;

/** Copy CDW12 fields: NR bits 7:0 (0's based), Descriptor Format bits 11:8, FUA bit 30, LR bit 31. */
export const CopyCdw12 = { NR_MASK: 0xff, DESC_FORMAT_SHIFT: 8, DESC_FORMAT_MASK: 0xf00, FUA: RwCdw12.FUA, LR: RwCdw12.LR } as const;

/** One source range of a Copy. */
export interface CopyRange {
  slba: bigint;
  /** Length in logical blocks, a count (1..65536; the wire holds it 0's based). */
  nlb: number;
}

/** Encodes source ranges in Descriptor Format `format` (0 or 1), without protection information. */
export function encodeCopyRanges(ranges: readonly CopyRange[], format: 0 | 1 = 0): Buffer {
  const size = COPY_RANGE_SIZE[format];
  const buf = Buffer.alloc(ranges.length * size);
  ranges.forEach((r, i) => {
    buf.writeBigUInt64LE(u64(r.slba), i * size + CopyRangeOffset.slba);
    buf.writeUInt16LE((r.nlb - 1) & 0xffff, i * size + CopyRangeOffset.nlb);
  });
  return buf;
}

/** Decodes `count` source ranges of Descriptor Format `format`; entries past the end of `buf` are zero-filled. */
export function decodeCopyRanges(buf: Buffer, count: number, format: 0 | 1 = 0): CopyRange[] {
  const size = COPY_RANGE_SIZE[format];
  const n = Math.max(0, Math.min(256, Math.trunc(Number.isFinite(count) ? count : 0)));
  const b = zeroFilledWindow(buf, 0, n * size);
  const out: CopyRange[] = [];
  for (let i = 0; i < n; i++) out.push({ slba: b.readBigUInt64LE(i * size + CopyRangeOffset.slba), nlb: b.readUInt16LE(i * size + CopyRangeOffset.nlb) + 1 });
  return out;
}

/** Encodes a Copy command (opcode 0x19): SDLBA in CDW10–11, `count` source ranges (1..256) of format `format`. */
export function encodeCopyCmd(c: { cid: number; nsid: number; sdlba: bigint; count: number; format?: 0 | 1; fua?: boolean; sgl?: SglDescriptor }): Buffer {
  let cdw12 = ((c.count - 1) & CopyCdw12.NR_MASK) | ((c.format ?? 0) << CopyCdw12.DESC_FORMAT_SHIFT);
  if (c.fua === true) cdw12 |= CopyCdw12.FUA;
  return encodeSqe({ opcode: NvmOpcode.COPY, cid: c.cid, nsid: c.nsid, sgl: c.sgl ?? NULL_SGL, cdw10: rwCdw10(c.sdlba), cdw11: rwCdw11(c.sdlba), cdw12: cdw12 >>> 0 });
}
