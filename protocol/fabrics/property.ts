/**
 * Property Get / Property Set (Fabrics FCTYPE 0x04 / 0x00) and the controller properties a fabrics
 * controller exposes: CAP, VS, CC, CSTS, NSSR, CRTO. NVMe-oF 1.1 §3.4/§3.5; NVMe Base 2.0 §3.1.3
 * (register layouts).
 */
import { Buffer } from 'node:buffer';
import type { Sqe } from '../nvme/sqe.js';
import { SqeOffset } from '../nvme/sqe.js';
import { u32, u64 } from '../nvme/wire.js';
import { FabricsType, FabricsSqeOffset, encodeFabricsSqe, fabricsSqeBytes } from './connect.js';

/** Property offsets (NVMe Base 2.0 Figure 33; registers 0x0C/0x10 are reserved on fabrics). */
export const PropertyOffset = {
  CAP: 0x00,
  VS: 0x08,
  INTMS: 0x0c,
  INTMC: 0x10,
  CC: 0x14,
  CSTS: 0x1c,
  NSSR: 0x20,
  CRTO: 0x68,
} as const;
export type PropertyOffset = (typeof PropertyOffset)[keyof typeof PropertyOffset];

/** Size in bytes of the property at `offset`: 8 for CAP, 4 for the others fabrics defines. */
export function propertySize(offset: number): 4 | 8 {
  return offset === PropertyOffset.CAP ? 8 : 4;
}

/** Byte offsets of the Property Get/Set SQE fields (NVMe-oF 1.1 Figures 23/25). */
export const PropertyCmdOffset = { fctype: 4, attrib: 40, offset: 44, value: 48 } as const;

/** ATTRIB bits 2:0: 0 = 4-byte property, 1 = 8-byte property. */
export const PropertyAttrib = { SIZE_4: 0, SIZE_8: 1, SIZE_MASK: 0x7 } as const;

/** NSSR value that triggers an NVM subsystem reset ("NVMe"). */
export const NSSR_RESET_VALUE = 0x4e564d65;

/** Property Get/Set command fields. */
export interface PropertyCmd {
  /** FabricsType.PROPERTY_GET or PROPERTY_SET. */
  fctype: number;
  cid: number;
  /** Raw ATTRIB byte. */
  attrib: number;
  /** ATTRIB size is 8 bytes. */
  size8: boolean;
  /** Property offset. */
  offset: number;
  /** Value to set (Property Set; 0 / reserved on Get). 4-byte sets use the low 32 bits. */
  value: bigint;
}

/** Encodes Property Get; `size8` defaults to propertySize(offset) === 8. */
export function encodePropertyGetCmd(c: { cid: number; offset: number; size8?: boolean }): Buffer {
  const size8 = c.size8 ?? propertySize(c.offset) === 8;
  return encodeFabricsSqe(c.cid, FabricsType.PROPERTY_GET, undefined, (b) => {
    b[PropertyCmdOffset.attrib] = size8 ? PropertyAttrib.SIZE_8 : PropertyAttrib.SIZE_4;
    b.writeUInt32LE(u32(c.offset), PropertyCmdOffset.offset);
  });
}

/** Encodes Property Set; `size8` defaults to propertySize(offset) === 8. */
export function encodePropertySetCmd(c: { cid: number; offset: number; value: bigint; size8?: boolean }): Buffer {
  const size8 = c.size8 ?? propertySize(c.offset) === 8;
  return encodeFabricsSqe(c.cid, FabricsType.PROPERTY_SET, undefined, (b) => {
    b[PropertyCmdOffset.attrib] = size8 ? PropertyAttrib.SIZE_8 : PropertyAttrib.SIZE_4;
    b.writeUInt32LE(u32(c.offset), PropertyCmdOffset.offset);
    b.writeBigUInt64LE(size8 ? u64(c.value) : BigInt.asUintN(32, c.value), PropertyCmdOffset.value);
  });
}

/** Decodes a Property Get/Set SQE from raw bytes or a decoded SQE; short input is zero-filled. */
export function decodePropertyCmd(sqe: Buffer | Sqe, offset = 0): PropertyCmd {
  const b = fabricsSqeBytes(sqe, offset);
  const attrib = b[PropertyCmdOffset.attrib] ?? 0;
  return {
    fctype: b[FabricsSqeOffset.fctype] ?? 0,
    cid: b.readUInt16LE(SqeOffset.cid),
    attrib,
    size8: (attrib & PropertyAttrib.SIZE_MASK) === PropertyAttrib.SIZE_8,
    offset: b.readUInt32LE(PropertyCmdOffset.offset),
    value: b.readBigUInt64LE(PropertyCmdOffset.value),
  };
}

// ---------------------------------------------------------------------------------------------
// Bit-field helpers over bigint registers

function field(v: bigint, lo: number, width: number): number {
  return Number((v >> BigInt(lo)) & ((1n << BigInt(width)) - 1n));
}

function put(value: number | boolean | undefined, lo: number, width: number): bigint {
  if (value === undefined) return 0n;
  const n = typeof value === 'boolean' ? (value ? 1 : 0) : Number.isFinite(value) ? Math.trunc(value) : 0;
  return (BigInt.asUintN(width, BigInt(n)) & ((1n << BigInt(width)) - 1n)) << BigInt(lo);
}

// ---------------------------------------------------------------------------------------------
// CAP (offset 0x00, 8 bytes)

/** CAP.CSS bits (CAP bits 44:37 shifted down): bit0 NVM, bit6 I/O command sets, bit7 admin only. */
export const CapCss = { NVM: 0x01, IO_CMD_SETS: 0x40, NO_IO: 0x80 } as const;

/** Controller Capabilities (NVMe Base 2.0 Figure 36). */
export interface CapFields {
  /** Maximum queue entries supported, 0's based (bits 15:0). */
  mqes: number;
  /** Contiguous queues required (bit 16). */
  cqr: boolean;
  /** Arbitration mechanism supported (bits 18:17). */
  ams: number;
  /** Timeout in 500 ms units (bits 31:24): worst case for CSTS.RDY to change. */
  to: number;
  /** Doorbell stride (bits 35:32), 0 on fabrics. */
  dstrd: number;
  /** NVM subsystem reset supported (bit 36). */
  nssrs: boolean;
  /** Command sets supported (bits 44:37, see CapCss). */
  css: number;
  /** Boot partition support (bit 45). */
  bps: boolean;
  /** Controller power scope (bits 47:46). */
  cps: number;
  /** Memory page size minimum / maximum, 2^(12+n) (bits 51:48 / 55:52). */
  mpsmin: number;
  mpsmax: number;
  /** Persistent memory region supported (bit 56). */
  pmrs: boolean;
  /** Controller memory buffer supported (bit 57). */
  cmbs: boolean;
  /** NVM subsystem shutdown supported (bit 58). */
  nsss: boolean;
  /** Controller ready modes supported (bits 60:59): bit0 CRWMS, bit1 CRIMS. */
  crms: number;
}

/** CAP.CRMS bits (shifted down). */
export const CapCrms = { CRWMS: 0x1, CRIMS: 0x2 } as const;

const capLayout = {
  mqes: [0, 16],
  cqr: [16, 1],
  ams: [17, 2],
  to: [24, 8],
  dstrd: [32, 4],
  nssrs: [36, 1],
  css: [37, 8],
  bps: [45, 1],
  cps: [46, 2],
  mpsmin: [48, 4],
  mpsmax: [52, 4],
  pmrs: [56, 1],
  cmbs: [57, 1],
  nsss: [58, 1],
  crms: [59, 2],
} as const satisfies Record<keyof CapFields, readonly [number, number]>;

/** Bit position and width of each CAP field. */
export const CapBits: Readonly<Record<keyof CapFields, readonly [lo: number, width: number]>> = capLayout;

/** Encodes CAP; missing fields are 0 / false. */
export function encodeCap(f: Partial<CapFields>): bigint {
  let v = 0n;
  for (const k of Object.keys(capLayout) as (keyof CapFields)[]) v |= put(f[k], capLayout[k][0], capLayout[k][1]);
  return v;
}

/** Decodes CAP. */
export function decodeCap(cap: bigint): CapFields {
  const v = BigInt.asUintN(64, cap);
  const n = (k: keyof CapFields): number => field(v, capLayout[k][0], capLayout[k][1]);
  return {
    mqes: n('mqes'),
    cqr: n('cqr') === 1,
    ams: n('ams'),
    to: n('to'),
    dstrd: n('dstrd'),
    nssrs: n('nssrs') === 1,
    css: n('css'),
    bps: n('bps') === 1,
    cps: n('cps'),
    mpsmin: n('mpsmin'),
    mpsmax: n('mpsmax'),
    pmrs: n('pmrs') === 1,
    cmbs: n('cmbs') === 1,
    nsss: n('nsss') === 1,
    crms: n('crms'),
  };
}

// ---------------------------------------------------------------------------------------------
// VS (offset 0x08)

/** Encodes VS: MJR 31:16, MNR 15:8, TER 7:0. */
export function encodeVs(mjr: number, mnr: number, ter = 0): number {
  return (((mjr & 0xffff) << 16) | ((mnr & 0xff) << 8) | (ter & 0xff)) >>> 0;
}

/** Decodes VS. */
export function decodeVs(vs: number): { mjr: number; mnr: number; ter: number } {
  return { mjr: vs >>> 16, mnr: (vs >>> 8) & 0xff, ter: vs & 0xff };
}

/** Common VS values: 1.3 avoids CNS 0x08 on Linux, 2.0 triggers it (the Linux host sends CNS 0x08 only to a controller reporting VS ≥ 2.0, NVMe Base 2.0 Figure 280). */
export const NvmeVersion = { V1_2: 0x10200, V1_3: 0x10300, V1_4: 0x10400, V2_0: 0x20000, V2_1: 0x20100 } as const;

// ---------------------------------------------------------------------------------------------
// CC (offset 0x14)

/** CC.CSS values (NVMe Base 2.0 Figure 41). */
export const CcCss = { NVM: 0, CSI: 6, ADMIN_ONLY: 7 } as const;
export type CcCss = (typeof CcCss)[keyof typeof CcCss];

/** CC.SHN values. */
export const CcShn = { NONE: 0, NORMAL: 1, ABRUPT: 2 } as const;
export type CcShn = (typeof CcShn)[keyof typeof CcShn];

/** Controller Configuration (NVMe Base 2.0 Figure 41). */
export interface CcFields {
  /** Enable (bit 0). */
  en: boolean;
  /** I/O command set selected (bits 6:4). */
  css: number;
  /** Memory page size, 2^(12+n) (bits 10:7). */
  mps: number;
  /** Arbitration mechanism (bits 13:11). */
  ams: number;
  /** Shutdown notification (bits 15:14, CcShn). */
  shn: number;
  /** I/O SQ entry size, log2 (bits 19:16, must be 6). */
  iosqes: number;
  /** I/O CQ entry size, log2 (bits 23:20, must be 4). */
  iocqes: number;
  /** Controller ready independent of media enable (bit 24). */
  crime: boolean;
}

const ccLayout = {
  en: [0, 1],
  css: [4, 3],
  mps: [7, 4],
  ams: [11, 3],
  shn: [14, 2],
  iosqes: [16, 4],
  iocqes: [20, 4],
  crime: [24, 1],
} as const satisfies Record<keyof CcFields, readonly [number, number]>;

/** Bit position and width of each CC field. */
export const CcBits: Readonly<Record<keyof CcFields, readonly [lo: number, width: number]>> = ccLayout;

/** Encodes CC; missing fields are 0 / false. */
export function encodeCc(f: Partial<CcFields>): number {
  let v = 0n;
  for (const k of Object.keys(ccLayout) as (keyof CcFields)[]) v |= put(f[k], ccLayout[k][0], ccLayout[k][1]);
  return Number(v);
}

/** Decodes CC. */
export function decodeCc(cc: number): CcFields {
  const v = BigInt(cc >>> 0);
  const n = (k: keyof CcFields): number => field(v, ccLayout[k][0], ccLayout[k][1]);
  return {
    en: n('en') === 1,
    css: n('css'),
    mps: n('mps'),
    ams: n('ams'),
    shn: n('shn'),
    iosqes: n('iosqes'),
    iocqes: n('iocqes'),
    crime: n('crime') === 1,
  };
}

// ---------------------------------------------------------------------------------------------
// CSTS (offset 0x1C)

/** CSTS.SHST values. */
export const CstsShst = { NORMAL: 0, OCCURRING: 1, COMPLETE: 2 } as const;
export type CstsShst = (typeof CstsShst)[keyof typeof CstsShst];

/** Controller Status (NVMe Base 2.0 Figure 42). */
export interface CstsFields {
  /** Ready (bit 0). */
  rdy: boolean;
  /** Controller fatal status (bit 1). */
  cfs: boolean;
  /** Shutdown status (bits 3:2, CstsShst). */
  shst: number;
  /** NVM subsystem reset occurred (bit 4). */
  nssro: boolean;
  /** Processing paused (bit 5). */
  pp: boolean;
  /** Shutdown type (bit 6). */
  st: boolean;
}

const cstsLayout = {
  rdy: [0, 1],
  cfs: [1, 1],
  shst: [2, 2],
  nssro: [4, 1],
  pp: [5, 1],
  st: [6, 1],
} as const satisfies Record<keyof CstsFields, readonly [number, number]>;

/** Bit position and width of each CSTS field. */
export const CstsBits: Readonly<Record<keyof CstsFields, readonly [lo: number, width: number]>> = cstsLayout;

/** Encodes CSTS; missing fields are 0 / false. */
export function encodeCsts(f: Partial<CstsFields>): number {
  let v = 0n;
  for (const k of Object.keys(cstsLayout) as (keyof CstsFields)[]) v |= put(f[k], cstsLayout[k][0], cstsLayout[k][1]);
  return Number(v);
}

/** Decodes CSTS. */
export function decodeCsts(csts: number): CstsFields {
  const v = BigInt(csts >>> 0);
  const n = (k: keyof CstsFields): number => field(v, cstsLayout[k][0], cstsLayout[k][1]);
  return {
    rdy: n('rdy') === 1,
    cfs: n('cfs') === 1,
    shst: n('shst'),
    nssro: n('nssro') === 1,
    pp: n('pp') === 1,
    st: n('st') === 1,
  };
}

// ---------------------------------------------------------------------------------------------
// CRTO (offset 0x68)

/** Controller Ready Timeouts, 500 ms units (NVMe Base 2.0 Figure 58). */
export interface CrtoFields {
  /** Ready with media timeout (bits 15:0). */
  crwmt: number;
  /** Ready independent of media timeout (bits 31:16). */
  crimt: number;
}

export function encodeCrto(f: Partial<CrtoFields>): number {
  return (((f.crwmt ?? 0) & 0xffff) | (((f.crimt ?? 0) & 0xffff) << 16)) >>> 0;
}

export function decodeCrto(v: number): CrtoFields {
  return { crwmt: v & 0xffff, crimt: (v >>> 16) & 0xffff };
}
