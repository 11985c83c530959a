/**
 * Fabrics command types and the Connect command: SQE fields, the 1024-byte Connect data, and the
 * Connect response dword. NVMe-oF 1.1 §3.3 (Connect), §6 (Fabrics command format).
 */
import { Buffer } from 'node:buffer';
import type { Sqe, SglDescriptor } from '../nvme/sqe.js';
import { FABRICS_OPCODE, opcodeDataDirection } from '../nvme/opcodes.js';
import type { DataDirection } from '../nvme/opcodes.js';
import { SQE_SIZE, encodeSqe, encodeSqeInto, decodeSgl, sglInCapsule, SqeOffset } from '../nvme/sqe.js';
import { copyBytes, readNulTerminated, u16, u32, u8, writeBytes, writeNulPadded, zeroFilledWindow } from '../nvme/wire.js';

/** Fabrics command types, SQE byte 4 (NVMe-oF 1.1 Figure 9). */
export const FabricsType = {
  PROPERTY_SET: 0x00,
  CONNECT: 0x01,
  PROPERTY_GET: 0x04,
  AUTH_SEND: 0x05,
  AUTH_RECV: 0x06,
  DISCONNECT: 0x08,
} as const;
export type FabricsType = (typeof FabricsType)[keyof typeof FabricsType];

/** Offset of FCTYPE in a Fabrics SQE (NVMe-oF 1.1 Figure 8: it replaces the NSID's low byte). */
export const FabricsSqeOffset = { fctype: 4 } as const;

const fabricsNames = new Map<number, string>(Object.entries(FabricsType).map(([k, v]) => [v, k]));

/** Name of a fabrics command type ("CONNECT"), or "0xNN". */
export function fabricsTypeName(fctype: number): string {
  return fabricsNames.get(fctype) ?? `0x${(fctype & 0xff).toString(16).padStart(2, '0')}`;
}

/** Data direction of a fabrics command: FCTYPE bits 1:0, same rule as opcodes (NVMe-oF 1.1 §6.1). */
export function fabricsDataDirection(fctype: number): DataDirection {
  return opcodeDataDirection(fctype);
}

/** The 64 SQE bytes of a raw buffer (a view at `offset`, zero-filled if short) or of a decoded SQE. */
export function fabricsSqeBytes(sqe: Buffer | Sqe, offset = 0): Buffer {
  if (Buffer.isBuffer(sqe)) return zeroFilledWindow(sqe, offset, SQE_SIZE);
  const b = Buffer.alloc(SQE_SIZE);
  encodeSqeInto(b, 0, sqe);
  return b;
}

/** FCTYPE of a Fabrics SQE, from raw bytes (byte 4) or a decoded SQE (NSID low byte). */
export function decodeFctype(sqe: Buffer | Sqe, offset = 0): number {
  if (Buffer.isBuffer(sqe)) return fabricsSqeBytes(sqe, offset)[FabricsSqeOffset.fctype] ?? 0;
  return sqe.nsid & 0xff;
}

/** Encodes the 64-byte common part of any Fabrics command; `fields` writes bytes 40..63. */
export function encodeFabricsSqe(cid: number, fctype: number, sgl: SglDescriptor | undefined, fields?: (b: Buffer) => void): Buffer {
  const b = encodeSqe({ opcode: FABRICS_OPCODE, cid, nsid: u8(fctype), ...(sgl !== undefined ? { sgl } : {}) });
  if (fields !== undefined) fields(b);
  return b;
}

// ---------------------------------------------------------------------------------------------
// Connect command

/** Byte offsets of the Connect SQE fields (NVMe-oF 1.1 Figure 19). */
export const ConnectCmdOffset = { fctype: 4, sgl: 24, recfmt: 40, qid: 42, sqsize: 44, cattr: 46, kato: 48 } as const;

/** Connect attributes (CATTR, NVMe-oF 1.1 Figure 19 byte 46). */
export const ConnectCattr = {
  /** Bits 1:0 priority class (RDMA only). */
  PRIORITY_MASK: 0x03,
  /** Bit 2: disable SQ flow control (then SQHD is reserved, 0xFFFF on nvmet). */
  DISABLE_SQFLOW: 0x04,
} as const;

/** Record format of the Connect data the host sends (must be 0, else 0x180). */
export const CONNECT_RECFMT = 0;

/** Connect command fields. */
export interface ConnectCmd {
  cid: number;
  /** Record format (must be 0). */
  recfmt: number;
  /** Queue ID, 0 = admin queue. */
  qid: number;
  /** Submission queue size, 0's based, as on the wire. */
  sqsize: number;
  /** Connect attributes (ConnectCattr). */
  cattr: number;
  /** Keep alive timeout in milliseconds (admin queue; 0 = disabled). */
  kato: number;
  /** SGL: in-capsule (0x01, 1024 bytes) from Linux, or 0x5A + R2T. */
  sgl: SglDescriptor;
}

/** Input to encodeConnectCmd: recfmt, cattr and kato default to 0, the SGL to 1024 bytes in-capsule. */
export type ConnectCmdInit = Pick<ConnectCmd, 'cid' | 'qid' | 'sqsize'> & Partial<ConnectCmd>;

/** Encodes a Connect SQE. */
export function encodeConnectCmd(c: ConnectCmdInit): Buffer {
  const O = ConnectCmdOffset;
  return encodeFabricsSqe(c.cid, FabricsType.CONNECT, c.sgl ?? sglInCapsule(CONNECT_DATA_SIZE), (b) => {
    b.writeUInt16LE(u16(c.recfmt ?? CONNECT_RECFMT), O.recfmt);
    b.writeUInt16LE(u16(c.qid), O.qid);
    b.writeUInt16LE(u16(c.sqsize), O.sqsize);
    b[O.cattr] = u8(c.cattr ?? 0);
    b.writeUInt32LE(u32(c.kato ?? 0), O.kato);
  });
}

/** Decodes a Connect SQE from raw bytes (at `offset`) or a decoded SQE; short input is zero-filled. */
export function decodeConnectCmd(sqe: Buffer | Sqe, offset = 0): ConnectCmd {
  const b = fabricsSqeBytes(sqe, offset);
  const O = ConnectCmdOffset;
  return {
    cid: b.readUInt16LE(SqeOffset.cid),
    recfmt: b.readUInt16LE(O.recfmt),
    qid: b.readUInt16LE(O.qid),
    sqsize: b.readUInt16LE(O.sqsize),
    cattr: b[O.cattr] ?? 0,
    kato: b.readUInt32LE(O.kato),
    sgl: decodeSgl(b, O.sgl),
  };
}

// ---------------------------------------------------------------------------------------------
// Connect data (1024 bytes, in-capsule)

/** Size of the Connect data (NVMe-oF 1.1 Figure 20). */
export const CONNECT_DATA_SIZE = 1024;

/** Byte offsets of the Connect data fields (NVMe-oF 1.1 Figure 20). */
export const ConnectDataOffset = { hostid: 0, cntlid: 16, subnqn: 256, hostnqn: 512 } as const;

/** Size of an NQN field on the wire (NUL padded). */
export const NQN_FIELD_SIZE = 256;

/** Size of the host identifier. */
export const HOSTID_SIZE = 16;

/** Controller ID a host sends to ask for any controller in the dynamic model. */
export const CNTLID_DYNAMIC = 0xffff;
/** Controller ID a host sends to ask for any static controller. */
export const CNTLID_ANY_STATIC = 0xfffe;

/** Connect data. */
export interface ConnectData {
  /** 128-bit host identifier (16 bytes). */
  hostid: Buffer;
  /** 0xFFFF on an admin Connect (dynamic model); the admin Connect's result on I/O queues. */
  cntlid: number;
  subnqn: string;
  hostnqn: string;
}

/** Encodes the 1024-byte Connect data; NQNs are NUL padded UTF-8. */
export function encodeConnectData(d: ConnectData): Buffer {
  const b = Buffer.alloc(CONNECT_DATA_SIZE);
  const O = ConnectDataOffset;
  writeBytes(b, d.hostid, O.hostid, HOSTID_SIZE);
  b.writeUInt16LE(u16(d.cntlid), O.cntlid);
  writeNulPadded(b, d.subnqn, O.subnqn, NQN_FIELD_SIZE);
  writeNulPadded(b, d.hostnqn, O.hostnqn, NQN_FIELD_SIZE);
  return b;
}

/** Decodes Connect data; NQNs stop at the first NUL, short input is zero-filled. */
export function decodeConnectData(buf: Buffer, offset = 0): ConnectData {
  const b = zeroFilledWindow(buf, offset, CONNECT_DATA_SIZE);
  const O = ConnectDataOffset;
  return {
    hostid: copyBytes(b, O.hostid, HOSTID_SIZE),
    cntlid: b.readUInt16LE(O.cntlid),
    subnqn: readNulTerminated(b, O.subnqn, NQN_FIELD_SIZE),
    hostnqn: readNulTerminated(b, O.hostnqn, NQN_FIELD_SIZE),
  };
}

// ---------------------------------------------------------------------------------------------
// Connect response dword 0 (NVMe-oF 1.1 Figures 21/22)

/** AUTHREQ bits in Connect dw0: ATR (bit 17) and ASCR (bit 18). */
export const ConnectAuthReq = { ATR: 1 << 17, ASCR: 1 << 18 } as const;

/** Successful Connect result. */
export interface ConnectResult {
  cntlid: number;
  /** Authentication required (DH-HMAC-CHAP before anything else). */
  atr: boolean;
  /** Secure channel concatenation required. */
  ascr: boolean;
}

/** Builds dw0 of a successful Connect: CNTLID 15:0, ATR bit 17, ASCR bit 18. */
export function connectResultDw0(r: { cntlid: number; atr?: boolean; ascr?: boolean }): number {
  return (u16(r.cntlid) | (r.atr === true ? ConnectAuthReq.ATR : 0) | (r.ascr === true ? ConnectAuthReq.ASCR : 0)) >>> 0;
}

/** Splits dw0 of a successful Connect. */
export function decodeConnectResult(dw0: number): ConnectResult {
  return {
    cntlid: dw0 & 0xffff,
    atr: (dw0 & ConnectAuthReq.ATR) !== 0,
    ascr: (dw0 & ConnectAuthReq.ASCR) !== 0,
  };
}

/** Where an invalid Connect parameter is: in the data (true) or the SQE (false), and its byte offset. */
export interface ConnectInvalidParam {
  inData: boolean;
  offset: number;
}

/**
 * dw0 of a Connect failed with CONNECT_INVALID_PARAM (0x182): IATTR << 16 | IPO, IATTR bit 0 set
 * when the field is in the Connect data (e.g. 256 subnqn, 512 hostnqn, 16 cntlid), clear when in
 * the SQE (42 qid, 44 sqsize).
 */
export function connectInvalidParamDw0(p: ConnectInvalidParam): number {
  return (((p.inData ? 1 : 0) << 16) | u16(p.offset)) >>> 0;
}

/** Splits dw0 of a Connect failed with CONNECT_INVALID_PARAM. */
export function decodeConnectInvalidParam(dw0: number): ConnectInvalidParam {
  return { inData: ((dw0 >>> 16) & 0x1) !== 0, offset: dw0 & 0xffff };
}

// ---------------------------------------------------------------------------------------------
// UUIDs (host identifier)

const UUID_RE = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** True for the canonical 8-4-4-4-12 hex form. */
export function isUuid(str: string): boolean {
  return UUID_RE.test(str);
}

/** 16 bytes of a canonical UUID string, in string order. Throws TypeError if `str` is not one. */
export function uuidToBytes(str: string): Buffer {
  if (!isUuid(str)) throw new TypeError(`not a UUID: ${JSON.stringify(str)}`);
  return Buffer.from(str.replace(/-/g, ''), 'hex');
}

/** Canonical lower-case UUID string of 16 bytes at `offset` (short input is zero-filled). */
export function bytesToUuid(buf: Buffer, offset = 0): string {
  const h = zeroFilledWindow(buf, offset, HOSTID_SIZE).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
