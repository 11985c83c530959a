/**
 * Get/Set Features (admin opcodes 0x0A / 0x09) command fields, the feature values a fabrics target
 * handles, and the Asynchronous Event Request completion dword. NVMe Base 2.0 §5.15, §5.27, §5.2.
 */
import { Buffer } from 'node:buffer';
import type { Sqe, SglDescriptor } from './sqe.js';
import { encodeSqe } from './sqe.js';
import { AdminOpcode } from './opcodes.js';
import { u16, u32, u8 } from './wire.js';

/**
 * The longest Keep Alive Timeout: KATO is 32 bits of milliseconds in Connect CDW12 (NVMe-oF 1.1 §3.3) and in Set /
 * Get Features FID 0Fh Dword 11 / Dword 0 (NVMe Base 2.0 §5.27.1.12), about 49.7 days.
 */
export const KATO_MAX_MS = 0xffff_ffff;

/** Feature identifiers (NVMe Base 2.0 Figure 317). */
export const FeatureId = {
  ARBITRATION: 0x01,
  POWER_MGMT: 0x02,
  LBA_RANGE: 0x03,
  TEMP_THRESH: 0x04,
  ERR_RECOVERY: 0x05,
  VOLATILE_WC: 0x06,
  NUM_QUEUES: 0x07,
  IRQ_COALESCE: 0x08,
  IRQ_CONFIG: 0x09,
  WRITE_ATOMIC: 0x0a,
  ASYNC_EVENT: 0x0b,
  AUTO_PST: 0x0c,
  HOST_MEM_BUF: 0x0d,
  TIMESTAMP: 0x0e,
  KATO: 0x0f,
  HCTM: 0x10,
  NOPSC: 0x11,
  RRL: 0x12,
  PLM_CONFIG: 0x13,
  PLM_WINDOW: 0x14,
  LBA_STS_INTERVAL: 0x15,
  HOST_BEHAVIOR: 0x16,
  SANITIZE: 0x17,
  ENDURANCE_EVT_CFG: 0x18,
  IOCS_PROFILE: 0x19,
  SPINUP_CONTROL: 0x1a,
  SW_PROGRESS: 0x80,
  HOST_ID: 0x81,
  RESV_MASK: 0x82,
  RESV_PERSIST: 0x83,
  WRITE_PROTECT: 0x84,
} as const;
export type FeatureId = (typeof FeatureId)[keyof typeof FeatureId];

/** Write Protection State, FID 84h CDW11 bits 2:0 (NVMe Base 2.0 §5.27.1.25, Namespace Write Protection Config); 4–7 are reserved. */
export const NwpState = { NONE: 0, WRITE_PROTECT: 1, UNTIL_POWER_CYCLE: 2, PERMANENT: 3 } as const;
export type NwpState = (typeof NwpState)[keyof typeof NwpState];

/** Size of the Host Behavior Support data structure, FID 16h (NVMe Base 2.0 §5.27.1.18). */
export const HOST_BEHAVIOR_SIZE = 512;
/**
 * Byte offsets of its fields: ACRE (Advanced Command Retry Enable), ETDAS (Extended Telemetry Data Area 4
 * Supported), LBAFEE (LBA Format Extension Enable). Each is 0 or 1; the rest of the 512 bytes is reserved.
 */
export const HostBehaviorOffset = { acre: 0, etdas: 1, lbafee: 2 } as const;

/** Get Features SEL (CDW10 10:8). */
export const FeatureSel = { CURRENT: 0, DEFAULT: 1, SAVED: 2, SUPPORTED_CAPS: 3 } as const;
export type FeatureSel = (typeof FeatureSel)[keyof typeof FeatureSel];

/** Capabilities returned for SEL 3 in dw0. */
export const FeatureCaps = { SAVEABLE: 1 << 0, NS_SPECIFIC: 1 << 1, CHANGEABLE: 1 << 2 } as const;

/** Set Features save bit (CDW10 bit 31). */
export const FEATURE_SV = 0x8000_0000;

/** Get/Set Features command fields. */
export interface FeatureCmd {
  /** Feature identifier (CDW10 7:0). */
  fid: number;
  /** Select, Get only (CDW10 10:8). */
  sel: number;
  /** Save, Set only (CDW10 bit 31). */
  sv: boolean;
  /** Feature specific value. */
  cdw11: number;
  nsid: number;
  /** UUID index (CDW14 6:0). */
  uuidIndex: number;
}

/** Decodes the Get/Set Features fields of an SQE (SEL and SV are both read; only one applies). */
export function decodeFeatureCmd(sqe: Sqe): FeatureCmd {
  return {
    fid: sqe.cdw10 & 0xff,
    sel: (sqe.cdw10 >>> 8) & 0x7,
    sv: (sqe.cdw10 & FEATURE_SV) !== 0,
    cdw11: sqe.cdw11 >>> 0,
    nsid: sqe.nsid >>> 0,
    uuidIndex: sqe.cdw14 & 0x7f,
  };
}

/** Encodes Set Features; no data unless `sgl` is given (Host ID, timestamp...). */
export function encodeSetFeaturesCmd(c: {
  cid: number;
  fid: number;
  cdw11: number;
  nsid?: number;
  sv?: boolean;
  cdw12?: number;
  sgl?: SglDescriptor;
}): Buffer {
  return encodeSqe({
    opcode: AdminOpcode.SET_FEATURES,
    cid: c.cid,
    nsid: c.nsid ?? 0,
    ...(c.sgl !== undefined ? { sgl: c.sgl } : {}),
    cdw10: (u8(c.fid) | (c.sv === true ? FEATURE_SV : 0)) >>> 0,
    cdw11: u32(c.cdw11),
    cdw12: u32(c.cdw12 ?? 0),
  });
}

/** Encodes Get Features. */
export function encodeGetFeaturesCmd(c: {
  cid: number;
  fid: number;
  sel?: number;
  nsid?: number;
  cdw11?: number;
  sgl?: SglDescriptor;
}): Buffer {
  return encodeSqe({
    opcode: AdminOpcode.GET_FEATURES,
    cid: c.cid,
    nsid: c.nsid ?? 0,
    ...(c.sgl !== undefined ? { sgl: c.sgl } : {}),
    cdw10: u8(c.fid) | (((c.sel ?? 0) & 0x7) << 8),
    cdw11: u32(c.cdw11 ?? 0),
  });
}

// ---------------------------------------------------------------------------------------------
// Number of Queues (FID 0x07)

/**
 * Number of Queues dword (Set CDW11 NSQR/NCQR, completion dw0 NSQA/NCQA): both halves are 0's
 * based on the wire. This takes COUNTS (1..65536) and writes count − 1.
 */
export function encodeNumQueues(nsqr: number, ncqr: number): number {
  return (((nsqr - 1) & 0xffff) | (((ncqr - 1) & 0xffff) << 16)) >>> 0;
}

/** Decodes a Number of Queues dword into COUNTS (wire value + 1). 0xFFFF decodes as 65536 (invalid on Set). */
export function decodeNumQueues(dw: number): { nsqr: number; ncqr: number } {
  return { nsqr: (dw & 0xffff) + 1, ncqr: ((dw >>> 16) & 0xffff) + 1 };
}

// ---------------------------------------------------------------------------------------------
// Volatile Write Cache (FID 0x06), Host Identifier (0x81), Keep Alive Timer (0x0F)

/** Volatile Write Cache CDW11 / dw0 bit 0: write cache enabled. */
export const VWC_WCE = 0x1;

/** Host Identifier CDW11 bit 0: extended (128-bit) host identifier, required on fabrics. */
export const HOST_ID_EXHID = 0x1;

/** Host identifier size with EXHID (NVMe Base 2.0 §5.27.1.28). */
export const HOST_ID_SIZE = 16;

// ---------------------------------------------------------------------------------------------
// Timestamp (FID 0x0E)

/** Timestamp data size (NVMe Base 2.0 Figure 346). */
export const TIMESTAMP_SIZE = 8;

/** Timestamp data: milliseconds since the epoch (48-bit) and attribute byte 6. */
export interface TimestampData {
  ms: bigint;
  /** Bit 0 synch, bits 3:1 origin. */
  attributes: number;
}

export function encodeTimestamp(t: TimestampData): Buffer {
  const b = Buffer.alloc(TIMESTAMP_SIZE);
  b.writeUIntLE(Number(BigInt.asUintN(48, t.ms)), 0, 6);
  b[6] = u8(t.attributes);
  return b;
}

export function decodeTimestamp(buf: Buffer): TimestampData {
  const b = buf.length >= TIMESTAMP_SIZE ? buf : Buffer.concat([buf, Buffer.alloc(TIMESTAMP_SIZE - buf.length)]);
  return { ms: BigInt(b.readUIntLE(0, 6)), attributes: b[6] ?? 0 };
}

// ---------------------------------------------------------------------------------------------
// Asynchronous Event Configuration (FID 0x0B) and AER completions

/**
 * Asynchronous Event Configuration bits (NVMe Base 2.0 Figure 326), also the OAES bits of Identify
 * Controller. DISC is bit 31 as an unsigned number.
 */
export const AenConfig = {
  /** SMART / health critical warnings, bits 7:0. */
  SMART_MASK: 0xff,
  NS_ATTR: 1 << 8,
  FW_ACT: 1 << 9,
  TELEMETRY: 1 << 10,
  ANA: 1 << 11,
  PLEA: 1 << 12,
  LBA_STATUS: 1 << 13,
  EGEA: 1 << 14,
  NORMAL_SHUTDOWN: 1 << 15,
  ZONE_DESC_CHANGED: 1 << 27,
  DISC: 0x8000_0000,
} as const;

/** Asynchronous event types, completion dw0 bits 2:0 (NVMe Base 2.0 Figure 148). */
export const AenType = {
  ERROR: 0,
  SMART: 1,
  NOTICE: 2,
  IMMEDIATE: 3,
  IO_CMD_SPECIFIC: 6,
  VENDOR: 7,
} as const;
export type AenType = (typeof AenType)[keyof typeof AenType];

/** Asynchronous event information for type NOTICE, dw0 bits 15:8 (NVMe Base 2.0 Figure 151). */
export const AenNotice = {
  NS_CHANGED: 0x00,
  FW_ACT_STARTING: 0x01,
  TELEMETRY: 0x02,
  ANA: 0x03,
  PLEA: 0x04,
  LBA_STATUS: 0x05,
  EGEA: 0x06,
  NORMAL_SHUTDOWN: 0x07,
  DISC_CHANGE: 0xf0,
} as const;
export type AenNotice = (typeof AenNotice)[keyof typeof AenNotice];

/** An AER completion dword 0. */
export interface AenResult {
  /** Event type, bits 2:0 (AenType). */
  type: number;
  /** Event information, bits 15:8 (AenNotice for NOTICE). */
  info: number;
  /** Log page the host must read to clear the event, bits 23:16. */
  lid: number;
}

/** Builds AER completion dw0: type | info << 8 | lid << 16. */
export function encodeAenResult(r: AenResult): number {
  return ((r.type & 0x7) | (u8(r.info) << 8) | (u8(r.lid) << 16)) >>> 0;
}

/** Splits AER completion dw0. */
export function decodeAenResult(dw0: number): AenResult {
  return { type: dw0 & 0x7, info: (dw0 >>> 8) & 0xff, lid: (dw0 >>> 16) & 0xff };
}

/** Ready-made AER dw0 values for the notices a fabrics target sends (NVMe Base 2.0 §5.2, Figures 148/151). */
export const AenDw0 = {
  /** Namespace attribute changed → log 0x04. */
  NS_CHANGED: 0x0004_0002,
  /** ANA change → log 0x0C. */
  ANA_CHANGE: 0x000c_0302,
  /** Discovery log page change → log 0x70. */
  DISC_CHANGE: 0x0070_f002,
} as const;

// ---------------------------------------------------------------------------------------------
// Abort (admin 0x08) — kept here because its result is a single dword like the features

/** Abort command fields (CDW10: SQID 15:0, CID 31:16). */
export function decodeAbortCmd(sqe: Sqe): { sqid: number; cid: number } {
  return { sqid: sqe.cdw10 & 0xffff, cid: sqe.cdw10 >>> 16 };
}

/** Abort completion dw0 bit 0: the command was NOT aborted (what nvmet always answers). */
export const ABORT_NOT_ABORTED = 0x1;

/** Encodes Abort for (sqid, cid). */
export function encodeAbortCmd(c: { cid: number; sqid: number; abortCid: number }): Buffer {
  return encodeSqe({ opcode: AdminOpcode.ABORT, cid: c.cid, cdw10: (u16(c.sqid) | (u16(c.abortCid) << 16)) >>> 0 });
}
