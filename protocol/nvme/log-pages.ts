/**
 * Get Log Page (admin opcode 0x02) command fields and the log pages a fabrics target serves:
 * supported logs, error information, SMART / health, firmware slot, changed namespace list,
 * commands supported and effects, ANA, reservation notification. NVMe Base 2.0 §5.16; the
 * discovery log (0x70) lives in protocol/fabrics/discovery.ts.
 */
import { Buffer } from 'node:buffer';
import type { Sqe, SglDescriptor } from './sqe.js';
import { encodeSqe, sglTransport } from './sqe.js';
import { AdminOpcode } from './opcodes.js';
import {
  readNulOrSpacePadded,
  readU128LE,
  u16,
  u32,
  u64,
  u8,
  writeSpacePadded,
  writeU128LE,
  zeroFilledWindow,
} from './wire.js';

/** Log page identifiers (NVMe Base 2.0 Figure 202; NVMe-oF 1.1 §5.3 for 0x70). */
export const LogPageId = {
  SUPPORTED: 0x00,
  ERROR: 0x01,
  SMART: 0x02,
  FW_SLOT: 0x03,
  CHANGED_NS: 0x04,
  CMD_EFFECTS: 0x05,
  DEVICE_SELF_TEST: 0x06,
  TELEMETRY_HOST: 0x07,
  TELEMETRY_CTRL: 0x08,
  ENDURANCE_GROUP: 0x09,
  PRED_LAT_NVMSET: 0x0a,
  PRED_LAT_AGG: 0x0b,
  ANA: 0x0c,
  PERSISTENT_EVENT: 0x0d,
  LBA_STATUS: 0x0e,
  ENDURANCE_GROUP_AGG: 0x0f,
  FEATURE_EFFECTS: 0x12,
  DISCOVERY: 0x70,
  RESV_NOTIF: 0x80,
  SANITIZE: 0x81,
} as const;
export type LogPageId = (typeof LogPageId)[keyof typeof LogPageId];

// ---------------------------------------------------------------------------------------------
// Get Log Page command

/** LSP bit 0 for the ANA log: Return Groups Only (NVMe Base 2.0 §5.16.1.13). */
export const ANA_LSP_RGO = 0x01;

/** Get Log Page command fields (CDW10..CDW14, NVMe Base 2.0 Figures 197-201). */
export interface GetLogPageCmd {
  /** Log page identifier (CDW10 7:0). */
  lid: number;
  /** Log specific parameter (CDW10 14:8). */
  lsp: number;
  /** Retain asynchronous event (CDW10 bit 15). */
  rae: boolean;
  /** Number of dwords, 0's based (NUMDU:NUMDL). */
  numd: number;
  /** Transfer length in bytes: (numd + 1) * 4. */
  length: number;
  /** Log specific identifier (CDW11 31:16), e.g. endurance group. */
  lsi: number;
  /** Log page offset in bytes (CDW13:CDW12); must be dword aligned unless OT. */
  lpo: bigint;
  /** Command set identifier (CDW14 31:24). */
  csi: number;
  /** Offset type: LPO is an index, not bytes (CDW14 bit 23). */
  ot: boolean;
  /** UUID index (CDW14 6:0). */
  uuidIndex: number;
}

/** Decodes the Get Log Page fields of an SQE. */
export function decodeGetLogPageCmd(sqe: Sqe): GetLogPageCmd {
  const numd = (((sqe.cdw11 & 0xffff) << 16) | (sqe.cdw10 >>> 16)) >>> 0;
  return {
    lid: sqe.cdw10 & 0xff,
    lsp: (sqe.cdw10 >>> 8) & 0x7f,
    rae: (sqe.cdw10 & 0x8000) !== 0,
    numd,
    length: (numd + 1) * 4,
    lsi: sqe.cdw11 >>> 16,
    lpo: (BigInt(sqe.cdw13 >>> 0) << 32n) | BigInt(sqe.cdw12 >>> 0),
    csi: sqe.cdw14 >>> 24,
    ot: (sqe.cdw14 & 0x80_0000) !== 0,
    uuidIndex: sqe.cdw14 & 0x7f,
  };
}

/**
 * Encodes a Get Log Page command. `length` is in bytes, rounded up to whole dwords (minimum 4);
 * the SGL defaults to a transport data block of that length.
 */
export function encodeGetLogPageCmd(c: {
  cid: number;
  lid: number;
  length: number;
  nsid?: number;
  lpo?: bigint;
  rae?: boolean;
  lsp?: number;
  lsi?: number;
  csi?: number;
  ot?: boolean;
  uuidIndex?: number;
  sgl?: SglDescriptor;
}): Buffer {
  const dwords = Math.max(1, Math.ceil(c.length / 4));
  const numd = (dwords - 1) >>> 0;
  const lpo = u64(c.lpo ?? 0n);
  return encodeSqe({
    opcode: AdminOpcode.GET_LOG_PAGE,
    cid: c.cid,
    nsid: c.nsid ?? 0,
    sgl: c.sgl ?? sglTransport(dwords * 4),
    cdw10: (u8(c.lid) | (((c.lsp ?? 0) & 0x7f) << 8) | (c.rae === true ? 0x8000 : 0) | ((numd & 0xffff) << 16)) >>> 0,
    cdw11: ((numd >>> 16) | (u16(c.lsi ?? 0) << 16)) >>> 0,
    cdw12: Number(lpo & 0xffff_ffffn),
    cdw13: Number(lpo >> 32n),
    cdw14: (((c.uuidIndex ?? 0) & 0x7f) | (c.ot === true ? 0x80_0000 : 0) | (u8(c.csi ?? 0) << 24)) >>> 0,
  });
}

/**
 * The window [lpo, lpo + length) of a log page as a new buffer: bytes past the end of the log are
 * zero (NVMe Base 2.0 §5.16: reading past the end returns zeroes; hosts read logs in pieces).
 */
export function sliceLogPage(full: Buffer, lpo: bigint, length: number): Buffer {
  const len = Number.isSafeInteger(length) && length > 0 ? length : 0;
  const out = Buffer.alloc(len);
  if (lpo < 0n || lpo >= BigInt(full.length)) return out;
  const start = Number(lpo);
  full.copy(out, 0, start, Math.min(full.length, start + len));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Supported Log Pages (LID 0x00)

/** 256 dwords, one per LID (NVMe Base 2.0 Figure 203). */
export const SUPPORTED_LOG_SIZE = 1024;
/** LSUPP bit of an entry. */
export const LOG_SUPPORTED = 0x1;

/** Encodes the supported log pages log with LSUPP set for each listed LID. */
export function encodeSupportedLogPages(lids: readonly number[]): Buffer {
  const b = Buffer.alloc(SUPPORTED_LOG_SIZE);
  for (const lid of lids) b.writeUInt32LE(LOG_SUPPORTED, u8(lid) * 4);
  return b;
}

/** LIDs whose LSUPP bit is set; short input is zero-filled. */
export function decodeSupportedLogPages(buf: Buffer): number[] {
  const b = zeroFilledWindow(buf, 0, SUPPORTED_LOG_SIZE);
  const out: number[] = [];
  for (let lid = 0; lid < 256; lid++) if ((b.readUInt32LE(lid * 4) & LOG_SUPPORTED) !== 0) out.push(lid);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Feature Identifiers Supported and Effects (LID 0x12)

/** 256 dwords, one per FID (NVMe Base 2.0 §5.16.1.17, Feature Identifiers Supported and Effects). */
export const FEATURE_EFFECTS_LOG_SIZE = 1024;
/**
 * Bits of one entry (NVMe Base 2.0 §5.16.1.17): FSUPP supported; UDCC, NCC, NIC, CCC a Set Features may change user
 * data, namespace capabilities, the namespace inventory, controller capabilities; FSP (bits 31:20) the feature's
 * scope: NSCPE namespace, CTRLSCP controller, NSETSCP NVM set, ENDGSCP endurance group, DSCP domain, NSSS subsystem.
 */
export const FeatureEffects = {
  FSUPP: 1 << 0,
  UDCC: 1 << 1,
  NCC: 1 << 2,
  NIC: 1 << 3,
  CCC: 1 << 4,
  NSCPE: 1 << 20,
  CTRLSCP: 1 << 21,
  NSETSCP: 1 << 22,
  ENDGSCP: 1 << 23,
  DSCP: 1 << 24,
  NSSS: 1 << 25,
} as const;

/** Encodes the log from an entry per FID (missing entries are 0: not supported). */
export function encodeFeatureEffectsLog(byFid: readonly (number | undefined)[]): Buffer {
  const b = Buffer.alloc(FEATURE_EFFECTS_LOG_SIZE);
  for (let fid = 0; fid < 256; fid++) b.writeUInt32LE(u32(byFid[fid] ?? 0), fid * 4);
  return b;
}

/** The 256 entries; short input is zero-filled. */
export function decodeFeatureEffectsLog(buf: Buffer): number[] {
  const b = zeroFilledWindow(buf, 0, FEATURE_EFFECTS_LOG_SIZE);
  const out: number[] = [];
  for (let fid = 0; fid < 256; fid++) out.push(b.readUInt32LE(fid * 4));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Error Information (LID 0x01)

/** Size of one error information entry (NVMe Base 2.0 Figure 205). */
export const ERROR_LOG_ENTRY_SIZE = 64;

/** Byte offsets in an error information entry. */
export const ErrorLogOffset = {
  errorCount: 0,
  sqid: 8,
  cmdid: 10,
  status: 12,
  paramErrorLocation: 14,
  lba: 16,
  nsid: 24,
  vsInfo: 28,
  trtype: 29,
  cmdSpecificInfo: 32,
  trtypeSpecificInfo: 40,
} as const;

/** One error information entry. */
export interface ErrorLogEntry {
  /** Unique, incrementing error count (0 = entry invalid). */
  errorCount: bigint;
  sqid: number;
  cmdid: number;
  /** Status in the Linux 15-bit form (wire bits 15:1; bit 0 is the phase tag). */
  status: number;
  /** Byte (7:0) and bit (10:8) of the command field in error. */
  paramErrorLocation: number;
  lba: bigint;
  nsid: number;
  /** Log page with vendor specific information (0 = none). */
  vsInfo: number;
  /** Transport type (Trtype). */
  trtype: number;
  cmdSpecificInfo: bigint;
  trtypeSpecificInfo: number;
}

/** Writes an error entry at `offset`. */
export function encodeErrorLogEntryInto(buf: Buffer, offset: number, e: Partial<ErrorLogEntry>): void {
  const O = ErrorLogOffset;
  buf.fill(0, offset, offset + ERROR_LOG_ENTRY_SIZE);
  buf.writeBigUInt64LE(u64(e.errorCount ?? 0n), offset + O.errorCount);
  buf.writeUInt16LE(u16(e.sqid ?? 0), offset + O.sqid);
  buf.writeUInt16LE(u16(e.cmdid ?? 0), offset + O.cmdid);
  buf.writeUInt16LE(((e.status ?? 0) << 1) & 0xfffe, offset + O.status);
  buf.writeUInt16LE(u16(e.paramErrorLocation ?? 0), offset + O.paramErrorLocation);
  buf.writeBigUInt64LE(u64(e.lba ?? 0n), offset + O.lba);
  buf.writeUInt32LE(u32(e.nsid ?? 0), offset + O.nsid);
  buf[offset + O.vsInfo] = u8(e.vsInfo ?? 0);
  buf[offset + O.trtype] = u8(e.trtype ?? 0);
  buf.writeBigUInt64LE(u64(e.cmdSpecificInfo ?? 0n), offset + O.cmdSpecificInfo);
  buf.writeUInt16LE(u16(e.trtypeSpecificInfo ?? 0), offset + O.trtypeSpecificInfo);
}

/** Encodes one 64-byte error entry. */
export function encodeErrorLogEntry(e: Partial<ErrorLogEntry>): Buffer {
  const b = Buffer.alloc(ERROR_LOG_ENTRY_SIZE);
  encodeErrorLogEntryInto(b, 0, e);
  return b;
}

/** Encodes a whole error log: `slots` entries (nvmet keeps 128), the given ones first. */
export function encodeErrorLog(entries: readonly Partial<ErrorLogEntry>[], slots = entries.length): Buffer {
  const n = Math.max(slots, 0);
  const b = Buffer.alloc(n * ERROR_LOG_ENTRY_SIZE);
  entries.slice(0, n).forEach((e, i) => encodeErrorLogEntryInto(b, i * ERROR_LOG_ENTRY_SIZE, e));
  return b;
}

/** Decodes one error entry; short input is zero-filled. */
export function decodeErrorLogEntry(buf: Buffer, offset = 0): ErrorLogEntry {
  const b = zeroFilledWindow(buf, offset, ERROR_LOG_ENTRY_SIZE);
  const O = ErrorLogOffset;
  return {
    errorCount: b.readBigUInt64LE(O.errorCount),
    sqid: b.readUInt16LE(O.sqid),
    cmdid: b.readUInt16LE(O.cmdid),
    status: b.readUInt16LE(O.status) >>> 1,
    paramErrorLocation: b.readUInt16LE(O.paramErrorLocation),
    lba: b.readBigUInt64LE(O.lba),
    nsid: b.readUInt32LE(O.nsid),
    vsInfo: b[O.vsInfo] ?? 0,
    trtype: b[O.trtype] ?? 0,
    cmdSpecificInfo: b.readBigUInt64LE(O.cmdSpecificInfo),
    trtypeSpecificInfo: b.readUInt16LE(O.trtypeSpecificInfo),
  };
}

// ---------------------------------------------------------------------------------------------
// SMART / Health Information (LID 0x02)

/** Size of the SMART / health log (NVMe Base 2.0 Figure 207). */
export const SMART_LOG_SIZE = 512;

/** Byte offsets in the SMART / health log. */
export const SmartLogOffset = {
  criticalWarning: 0,
  compositeTemperature: 1,
  availableSpare: 3,
  availableSpareThreshold: 4,
  percentageUsed: 5,
  enduranceGroupCriticalWarning: 6,
  dataUnitsRead: 32,
  dataUnitsWritten: 48,
  hostReadCommands: 64,
  hostWriteCommands: 80,
  controllerBusyTime: 96,
  powerCycles: 112,
  powerOnHours: 128,
  unsafeShutdowns: 144,
  mediaErrors: 160,
  numErrLogEntries: 176,
  warningTempTime: 192,
  criticalCompTime: 196,
  tempSensor: 200,
  thmTemp1TransCount: 216,
  thmTemp2TransCount: 220,
  thmTemp1TotalTime: 224,
  thmTemp2TotalTime: 228,
} as const;

/** Critical warning bits (byte 0). */
export const SmartCritical = {
  SPARE: 1 << 0,
  TEMPERATURE: 1 << 1,
  RELIABILITY: 1 << 2,
  READ_ONLY: 1 << 3,
  VOLATILE_BACKUP: 1 << 4,
  PMR_READ_ONLY: 1 << 5,
} as const;

/** Number of temperature sensor fields. */
export const SMART_TEMP_SENSORS = 8;

const smartU128Keys = [
  'dataUnitsRead',
  'dataUnitsWritten',
  'hostReadCommands',
  'hostWriteCommands',
  'controllerBusyTime',
  'powerCycles',
  'powerOnHours',
  'unsafeShutdowns',
  'mediaErrors',
  'numErrLogEntries',
] as const;
type SmartU128Key = (typeof smartU128Keys)[number];

const smartU32Keys = ['warningTempTime', 'criticalCompTime', 'thmTemp1TransCount', 'thmTemp2TransCount', 'thmTemp1TotalTime', 'thmTemp2TotalTime'] as const;
type SmartU32Key = (typeof smartU32Keys)[number];

/** SMART / health information. 128-bit counters are bigint. */
export interface SmartLog extends Record<SmartU128Key, bigint>, Record<SmartU32Key, number> {
  /** Critical warning bits (SmartCritical). */
  criticalWarning: number;
  /** Composite temperature, Kelvin. */
  compositeTemperature: number;
  /** Available spare, percent. */
  availableSpare: number;
  /** Available spare threshold, percent. */
  availableSpareThreshold: number;
  /** Percentage used (may exceed 100). */
  percentageUsed: number;
  /** Endurance group critical warning summary. */
  enduranceGroupCriticalWarning: number;
  /** Temperature sensors 1..8, Kelvin (0 = not implemented). */
  tempSensor: number[];
}

/** Encodes the SMART / health log (512 bytes). */
export function encodeSmartLog(s: Partial<SmartLog>): Buffer {
  const b = Buffer.alloc(SMART_LOG_SIZE);
  const O = SmartLogOffset;
  b[O.criticalWarning] = u8(s.criticalWarning ?? 0);
  b.writeUInt16LE(u16(s.compositeTemperature ?? 0), O.compositeTemperature);
  b[O.availableSpare] = u8(s.availableSpare ?? 0);
  b[O.availableSpareThreshold] = u8(s.availableSpareThreshold ?? 0);
  b[O.percentageUsed] = u8(s.percentageUsed ?? 0);
  b[O.enduranceGroupCriticalWarning] = u8(s.enduranceGroupCriticalWarning ?? 0);
  for (const k of smartU128Keys) writeU128LE(b, s[k] ?? 0n, O[k]);
  for (const k of smartU32Keys) b.writeUInt32LE(u32(s[k] ?? 0), O[k]);
  (s.tempSensor ?? []).slice(0, SMART_TEMP_SENSORS).forEach((t, i) => b.writeUInt16LE(u16(t), O.tempSensor + i * 2));
  return b;
}

/** Decodes the SMART / health log; short input is zero-filled. */
export function decodeSmartLog(buf: Buffer, offset = 0): SmartLog {
  const b = zeroFilledWindow(buf, offset, SMART_LOG_SIZE);
  const O = SmartLogOffset;
  const tempSensor: number[] = [];
  for (let i = 0; i < SMART_TEMP_SENSORS; i++) tempSensor.push(b.readUInt16LE(O.tempSensor + i * 2));
  const big: Partial<Record<SmartU128Key, bigint>> = {};
  for (const k of smartU128Keys) big[k] = readU128LE(b, O[k]);
  const small: Partial<Record<SmartU32Key, number>> = {};
  for (const k of smartU32Keys) small[k] = b.readUInt32LE(O[k]);
  return {
    ...(big as Record<SmartU128Key, bigint>),
    ...(small as Record<SmartU32Key, number>),
    criticalWarning: b[O.criticalWarning] ?? 0,
    compositeTemperature: b.readUInt16LE(O.compositeTemperature),
    availableSpare: b[O.availableSpare] ?? 0,
    availableSpareThreshold: b[O.availableSpareThreshold] ?? 0,
    percentageUsed: b[O.percentageUsed] ?? 0,
    enduranceGroupCriticalWarning: b[O.enduranceGroupCriticalWarning] ?? 0,
    tempSensor,
  };
}

// ---------------------------------------------------------------------------------------------
// Firmware Slot Information (LID 0x03)

/** Size of the firmware slot log (NVMe Base 2.0 Figure 209). */
export const FW_SLOT_LOG_SIZE = 512;
export const FW_SLOTS = 7;
export const FwSlotLogOffset = { afi: 0, frs: 8 } as const;
/** Each FRS entry is an 8-byte ASCII firmware revision. */
export const FW_REVISION_SIZE = 8;

/** Firmware slot information. */
export interface FwSlotLog {
  /** Active firmware info: bits 2:0 active slot, bits 6:4 slot activated at next reset. */
  afi: number;
  /** Revisions of slots 1..7 ('' = empty slot). */
  frs: string[];
}

/** Encodes the firmware slot log; empty slots stay all-zero, others are space padded. */
export function encodeFwSlotLog(f: Partial<FwSlotLog>): Buffer {
  const b = Buffer.alloc(FW_SLOT_LOG_SIZE);
  b[FwSlotLogOffset.afi] = u8(f.afi ?? 0);
  (f.frs ?? []).slice(0, FW_SLOTS).forEach((r, i) => {
    if (r !== '') writeSpacePadded(b, r, FwSlotLogOffset.frs + i * FW_REVISION_SIZE, FW_REVISION_SIZE);
  });
  return b;
}

/** Decodes the firmware slot log; revisions are trimmed, short input is zero-filled. */
export function decodeFwSlotLog(buf: Buffer, offset = 0): FwSlotLog {
  const b = zeroFilledWindow(buf, offset, FW_SLOT_LOG_SIZE);
  const frs: string[] = [];
  for (let i = 0; i < FW_SLOTS; i++) frs.push(readNulOrSpacePadded(b, FwSlotLogOffset.frs + i * FW_REVISION_SIZE, FW_REVISION_SIZE));
  return { afi: b[FwSlotLogOffset.afi] ?? 0, frs };
}

// ---------------------------------------------------------------------------------------------
// Changed Namespace List (LID 0x04)

/** Size of the changed namespace list (NVMe Base 2.0 §5.16.1.5). */
export const CHANGED_NS_LIST_SIZE = 4096;
/** Entries that fit; more changes are reported as a single 0xFFFFFFFF. */
export const CHANGED_NS_LIST_MAX = 1024;
/** First entry value meaning "more than 1024 namespaces changed". */
export const CHANGED_NS_OVERFLOW = 0xffff_ffff;

/** Decoded changed namespace list. */
export interface ChangedNsList {
  /** More than 1024 changed: the host must rescan everything. */
  overflow: boolean;
  /** Changed NSIDs (empty when `overflow`). */
  nsids: number[];
}

/** Encodes the changed NS list; more than 1024 NSIDs become the single 0xFFFFFFFF entry. */
export function encodeChangedNsList(nsids: readonly number[]): Buffer {
  const b = Buffer.alloc(CHANGED_NS_LIST_SIZE);
  if (nsids.length > CHANGED_NS_LIST_MAX) {
    b.writeUInt32LE(CHANGED_NS_OVERFLOW, 0);
    return b;
  }
  nsids.forEach((n, i) => b.writeUInt32LE(u32(n), i * 4));
  return b;
}

/** Decodes the changed NS list up to the first zero entry. */
export function decodeChangedNsList(buf: Buffer): ChangedNsList {
  const n = Math.min(CHANGED_NS_LIST_MAX, Math.floor(buf.length / 4));
  if (n > 0 && buf.readUInt32LE(0) === CHANGED_NS_OVERFLOW) return { overflow: true, nsids: [] };
  const nsids: number[] = [];
  for (let i = 0; i < n; i++) {
    const v = buf.readUInt32LE(i * 4);
    if (v === 0) break;
    nsids.push(v);
  }
  return { overflow: false, nsids };
}

// ---------------------------------------------------------------------------------------------
// Commands Supported and Effects (LID 0x05)

/** Size of the effects log (NVMe Base 2.0 Figure 210). */
export const CMD_EFFECTS_LOG_SIZE = 4096;
export const CmdEffectsLogOffset = { acs: 0, iocs: 1024 } as const;

/** Bits of one effects entry (NVMe Base 2.0 Figure 211). */
export const CmdEffects = {
  /** Command supported. */
  CSUPP: 1 << 0,
  /** Logical block content change. */
  LBCC: 1 << 1,
  /** Namespace capability change. */
  NCC: 1 << 2,
  /** Namespace inventory change. */
  NIC: 1 << 3,
  /** Controller capability change. */
  CCC: 1 << 4,
  /** Command submission and execution, bits 18:16. */
  CSE_MASK: 0x7 << 16,
  CSE_SINGLE_NS: 1 << 16,
  CSE_SINGLE_CMD: 2 << 16,
  /** UUID selection supported. */
  USS: 1 << 19,
} as const;

/** Commands supported and effects: one u32 per admin opcode and per I/O opcode. */
export interface CmdEffectsLog {
  /** Admin command effects, indexed by opcode (256 entries when decoded). */
  acs: number[];
  /** I/O command effects, indexed by opcode (256 entries when decoded). */
  iocs: number[];
}

/** Encodes the effects log; missing or sparse entries are 0. */
export function encodeCmdEffectsLog(e: { acs?: readonly (number | undefined)[]; iocs?: readonly (number | undefined)[] }): Buffer {
  const b = Buffer.alloc(CMD_EFFECTS_LOG_SIZE);
  for (let i = 0; i < 256; i++) {
    b.writeUInt32LE(u32(e.acs?.[i] ?? 0), CmdEffectsLogOffset.acs + i * 4);
    b.writeUInt32LE(u32(e.iocs?.[i] ?? 0), CmdEffectsLogOffset.iocs + i * 4);
  }
  return b;
}

/** Decodes the effects log; short input is zero-filled. */
export function decodeCmdEffectsLog(buf: Buffer, offset = 0): CmdEffectsLog {
  const b = zeroFilledWindow(buf, offset, CMD_EFFECTS_LOG_SIZE);
  const acs: number[] = [];
  const iocs: number[] = [];
  for (let i = 0; i < 256; i++) {
    acs.push(b.readUInt32LE(CmdEffectsLogOffset.acs + i * 4));
    iocs.push(b.readUInt32LE(CmdEffectsLogOffset.iocs + i * 4));
  }
  return { acs, iocs };
}

// ---------------------------------------------------------------------------------------------
// Asymmetric Namespace Access (LID 0x0C)

/** ANA states (NVMe Base 2.0 §8.1.3, Figure 226 byte 16). */
export const AnaState = {
  OPTIMIZED: 0x01,
  NON_OPTIMIZED: 0x02,
  INACCESSIBLE: 0x03,
  PERSISTENT_LOSS: 0x04,
  CHANGE: 0x0f,
} as const;
export type AnaState = (typeof AnaState)[keyof typeof AnaState];

/**
 * ANA state names as nvmet's configfs spells them (ana_state: "optimized", "non-optimized", "inaccessible",
 * "persistent-loss", "change"), in AnaState code order; the one vocabulary for config, API, CLI and host.
 */
export const ANA_STATE_NAMES = ['optimized', 'non-optimized', 'inaccessible', 'persistent-loss', 'change'] as const;
export type AnaStateName = (typeof ANA_STATE_NAMES)[number];

/** ANA state name → code (NVMe Base 2.0 §8.1.3). */
export const ANA_STATE_CODE = {
  optimized: AnaState.OPTIMIZED,
  'non-optimized': AnaState.NON_OPTIMIZED,
  inaccessible: AnaState.INACCESSIBLE,
  'persistent-loss': AnaState.PERSISTENT_LOSS,
  change: AnaState.CHANGE,
} as const satisfies Record<AnaStateName, AnaState>;

/** ANA state code (bits 3:0 of the descriptor's state byte) → name; reserved codes read as 'change' (in transition). */
export function anaStateName(code: number): AnaStateName {
  switch (code & 0x0f) {
    case AnaState.OPTIMIZED:
      return 'optimized';
    case AnaState.NON_OPTIMIZED:
      return 'non-optimized';
    case AnaState.INACCESSIBLE:
      return 'inaccessible';
    case AnaState.PERSISTENT_LOSS:
      return 'persistent-loss';
    default:
      return 'change';
  }
}

/** ANA log header size and field offsets (NVMe Base 2.0 Figure 225). */
export const ANA_LOG_HEADER_SIZE = 16;
export const AnaLogOffset = { chgcnt: 0, ngrps: 8 } as const;
/** ANA group descriptor size without its NSID list (Figure 226). */
export const ANA_GROUP_DESC_SIZE = 32;
export const AnaGroupOffset = { grpid: 0, nnsids: 4, chgcnt: 8, state: 16, nsids: 32 } as const;

/** One ANA group descriptor. */
export interface AnaGroupDesc {
  /** ANA group identifier (non-zero, ≤ ANAGRPMAX). */
  grpid: number;
  /** Change count of this group. */
  chgcnt: bigint;
  /** ANA state, bits 3:0 (AnaState). */
  state: number;
  /** NSIDs in the group, ascending (empty when read with RGO). */
  nsids: number[];
}

/** The ANA log. */
export interface AnaLog {
  /** Change count of the whole log. */
  chgcnt: bigint;
  groups: AnaGroupDesc[];
}

/** A decoded ANA log: `truncated` when NGRPS or NNSIDS promise more bytes than the buffer holds. */
export interface DecodedAnaLog extends AnaLog {
  truncated: boolean;
}

/** Largest possible ANA log, as the Linux host sizes its buffer: 16 + NANAGRPID×32 + MNAN×4. */
export function anaLogMaxSize(nanagrpid: number, mnan: number): number {
  return ANA_LOG_HEADER_SIZE + nanagrpid * ANA_GROUP_DESC_SIZE + mnan * 4;
}

/**
 * Encodes the ANA log, exactly as long as its contents. With `rgo` (LSP bit 0, Return Groups
 * Only) NNSIDS is 0 and no NSID lists are written.
 */
export function encodeAnaLog(log: AnaLog, opts: { rgo?: boolean } = {}): Buffer {
  const rgo = opts.rgo === true;
  const size = log.groups.reduce((n, g) => n + ANA_GROUP_DESC_SIZE + (rgo ? 0 : g.nsids.length * 4), ANA_LOG_HEADER_SIZE);
  const b = Buffer.alloc(size);
  b.writeBigUInt64LE(u64(log.chgcnt), AnaLogOffset.chgcnt);
  b.writeUInt16LE(u16(log.groups.length), AnaLogOffset.ngrps);
  let o = ANA_LOG_HEADER_SIZE;
  for (const g of log.groups) {
    b.writeUInt32LE(u32(g.grpid), o + AnaGroupOffset.grpid);
    b.writeUInt32LE(rgo ? 0 : g.nsids.length, o + AnaGroupOffset.nnsids);
    b.writeBigUInt64LE(u64(g.chgcnt), o + AnaGroupOffset.chgcnt);
    b[o + AnaGroupOffset.state] = g.state & 0xf;
    o += ANA_GROUP_DESC_SIZE;
    if (!rgo) {
      for (const nsid of g.nsids) {
        b.writeUInt32LE(u32(nsid), o);
        o += 4;
      }
    }
  }
  return b;
}

/**
 * Decodes the ANA log. Decoding stops at the end of the buffer: a descriptor or NSID list that
 * does not fit is dropped or cut short and `truncated` is set (it never throws or over-allocates).
 */
export function decodeAnaLog(buf: Buffer): DecodedAnaLog {
  const h = zeroFilledWindow(buf, 0, ANA_LOG_HEADER_SIZE);
  const chgcnt = h.readBigUInt64LE(AnaLogOffset.chgcnt);
  const ngrps = h.readUInt16LE(AnaLogOffset.ngrps);
  const groups: AnaGroupDesc[] = [];
  let truncated = buf.length < ANA_LOG_HEADER_SIZE;
  let o = ANA_LOG_HEADER_SIZE;
  for (let i = 0; i < ngrps && !truncated; i++) {
    if (o + ANA_GROUP_DESC_SIZE > buf.length) {
      truncated = true;
      break;
    }
    const nnsids = buf.readUInt32LE(o + AnaGroupOffset.nnsids);
    const group: AnaGroupDesc = {
      grpid: buf.readUInt32LE(o + AnaGroupOffset.grpid),
      chgcnt: buf.readBigUInt64LE(o + AnaGroupOffset.chgcnt),
      state: (buf[o + AnaGroupOffset.state] ?? 0) & 0xf,
      nsids: [],
    };
    o += ANA_GROUP_DESC_SIZE;
    const avail = Math.floor((buf.length - o) / 4);
    const n = Math.min(nnsids, avail);
    for (let k = 0; k < n; k++) group.nsids.push(buf.readUInt32LE(o + k * 4));
    o += n * 4;
    if (n < nnsids) truncated = true;
    groups.push(group);
  }
  return { chgcnt, groups, truncated };
}

// ---------------------------------------------------------------------------------------------
// Reservation Notification (LID 0x80)

/** Size of the reservation notification log (NVMe Base 2.0 Figure 267). */
export const RESV_NOTIF_LOG_SIZE = 64;
export const ResvNotifLogOffset = { count: 0, type: 8, nalp: 9, nsid: 12 } as const;

/** Reservation notification types. */
export const ResvNotifType = { EMPTY: 0, REGISTRATION_PREEMPTED: 1, RESERVATION_RELEASED: 2, RESERVATION_PREEMPTED: 3 } as const;
export type ResvNotifType = (typeof ResvNotifType)[keyof typeof ResvNotifType];

/** Reservation notification log. */
export interface ResvNotifLog {
  /** Log page count (0 = empty). */
  count: bigint;
  /** Reservation notification type. */
  type: number;
  /** Number of available log pages after this one. */
  nalp: number;
  nsid: number;
}

/** Encodes the reservation notification log (64 bytes). */
export function encodeResvNotifLog(r: Partial<ResvNotifLog>): Buffer {
  const b = Buffer.alloc(RESV_NOTIF_LOG_SIZE);
  b.writeBigUInt64LE(u64(r.count ?? 0n), ResvNotifLogOffset.count);
  b[ResvNotifLogOffset.type] = u8(r.type ?? 0);
  b[ResvNotifLogOffset.nalp] = u8(r.nalp ?? 0);
  b.writeUInt32LE(u32(r.nsid ?? 0), ResvNotifLogOffset.nsid);
  return b;
}

/** Decodes the reservation notification log; short input is zero-filled. */
export function decodeResvNotifLog(buf: Buffer, offset = 0): ResvNotifLog {
  const b = zeroFilledWindow(buf, offset, RESV_NOTIF_LOG_SIZE);
  return {
    count: b.readBigUInt64LE(ResvNotifLogOffset.count),
    type: b[ResvNotifLogOffset.type] ?? 0,
    nalp: b[ResvNotifLogOffset.nalp] ?? 0,
    nsid: b.readUInt32LE(ResvNotifLogOffset.nsid),
  };
}
