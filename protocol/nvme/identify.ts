/**
 * Identify (admin opcode 0x06) command fields and data structures: controller (CNS 0x01),
 * namespace (0x00), active NSID list (0x02), NS identification descriptors (0x03), NVM command set
 * controller (0x06) and I/O command set independent namespace (0x08). NVMe Base 2.0 §5.17;
 * NVM Command Set 1.0 §4.1.5. Every structure is 4096 bytes.
 */
import { Buffer } from 'node:buffer';
import type { Sqe, SglDescriptor } from './sqe.js';
import { encodeSqe, sglTransport } from './sqe.js';
import { AdminOpcode } from './opcodes.js';
import {
  copyBytes,
  readNulTerminated,
  readTrimmedAscii,
  readU128LE,
  u16,
  u32,
  u8,
  writeBytes,
  writeNulPadded,
  writeSpacePadded,
  writeU128LE,
  zeroFilledWindow,
} from './wire.js';

/** Identify Controller CMIC bits (NVMe Base 2.0 §5.17.2.1, Figure 275 byte 76). */
export const Cmic = { MULTI_PORT: 1 << 0, MULTI_CTRL: 1 << 1, ANA_REPORTING: 1 << 3 } as const;
/** Identify Controller CTRATT bits (Figure 275 bytes 99:96): 128-bit Host Identifier, Traffic Based Keep Alive. */
export const Ctratt = { HOST_ID_128: 1 << 0, TBKAS: 1 << 6 } as const;
/**
 * Identify Controller SGLS fields (Figure 275 bytes 539:536): bits 1:0 SGL support (01b: no alignment
 * requirement), bit 20 SGL Offset (Address field of Data Block descriptors may hold an offset).
 */
export const Sgls = { SUPPORT_MASK: 0x3, SUPPORTED: 0x1, OFFSET: 1 << 20 } as const;
/**
 * Identify Controller ONCS bits (Figure 275 bytes 521:520): the optional NVM commands. Reservations (bit 5) is
 * ONCS_RESERVATIONS (protocol/nvme/reservation.ts).
 */
export const Oncs = { COMPARE: 1 << 0, WRITE_UNCOR: 1 << 1, DSM: 1 << 2, WRITE_ZEROES: 1 << 3, VERIFY: 1 << 7, COPY: 1 << 8 } as const;
/** Identify Controller OACS bit 1: Format NVM supported (Figure 275 bytes 257:256). */
export const Oacs = { FORMAT_NVM: 1 << 1 } as const;
/** Identify Controller OCFS bits (Figure 275 bytes 535:534): Copy Descriptor Formats 0h and 1h supported. */
export const Ocfs = { FORMAT0: 1 << 0, FORMAT1: 1 << 1 } as const;
/**
 * Identify Controller NWPC bits (Figure 275 byte 531): Namespace Write Protection Config (FID 84h) with the No Write
 * Protect and Write Protect states, Write Protect Until Power Cycle, Permanent Write Protect.
 */
export const Nwpc = { WRITE_PROTECT: 1 << 0, UNTIL_POWER_CYCLE: 1 << 1, PERMANENT: 1 << 2 } as const;
/** Identify Namespace NMIC bit 0: may be attached to two or more controllers (NVM Command Set 1.0 §4.1.5.1). */
export const Nmic = { SHARED: 1 << 0 } as const;
/** Identify Namespace NSATTR bit 0: write protected (NVM Command Set 1.0 §4.1.5.1). */
export const Nsattr = { WRITE_PROTECTED: 1 << 0 } as const;

/** Size of every Identify data structure (NVMe Base 2.0 §5.17.2). */
export const IDENTIFY_DATA_SIZE = 4096;

/** Controller or Namespace Structure values (NVMe Base 2.0 Figure 273). */
export const Cns = {
  NS: 0x00,
  CTRL: 0x01,
  NS_ACTIVE_LIST: 0x02,
  NS_DESC_LIST: 0x03,
  NVMSET_LIST: 0x04,
  CS_NS: 0x05,
  CS_CTRL: 0x06,
  CS_NS_ACTIVE_LIST: 0x07,
  CS_INDEP_NS: 0x08,
  NS_PRESENT_LIST: 0x10,
  NS_PRESENT: 0x11,
  CTRL_NS_LIST: 0x12,
  CTRL_LIST: 0x13,
  PRIMARY_CTRL_CAP: 0x14,
  SEC_CTRL_LIST: 0x15,
  NS_GRANULARITY: 0x16,
  UUID_LIST: 0x17,
  DOMAIN_LIST: 0x18,
  ENDGRP_LIST: 0x19,
  CS_NS_PRESENT_LIST: 0x1a,
  CS_NS_PRESENT: 0x1b,
  CS_VECTOR: 0x1c,
} as const;
export type Cns = (typeof Cns)[keyof typeof Cns];

/** Command Set Identifier (NVMe Base 2.0 Figure 286). */
export const Csi = { NVM: 0x00, KV: 0x01, ZNS: 0x02 } as const;
export type Csi = (typeof Csi)[keyof typeof Csi];

/** Controller types reported in CNTRLTYPE (NVMe Base 2.0 Figure 275 byte 111). */
export const CntrlType = { NOT_REPORTED: 0, IO: 1, DISCOVERY: 2, ADMIN: 3 } as const;
export type CntrlType = (typeof CntrlType)[keyof typeof CntrlType];

// ---------------------------------------------------------------------------------------------
// Identify command

/** Identify command fields (CDW10 CNS 7:0, CNTID 31:16; CDW11 CNS specific id 15:0, CSI 31:24). */
export interface IdentifyCmd {
  cns: number;
  cntid: number;
  cnsSpecificId: number;
  csi: number;
  nsid: number;
}

/** Decodes the Identify fields of an SQE. */
export function decodeIdentifyCmd(sqe: Sqe): IdentifyCmd {
  return {
    cns: sqe.cdw10 & 0xff,
    cntid: sqe.cdw10 >>> 16,
    cnsSpecificId: sqe.cdw11 & 0xffff,
    csi: sqe.cdw11 >>> 24,
    nsid: sqe.nsid >>> 0,
  };
}

/** Encodes an Identify command; the SGL defaults to a 4096-byte transport data block. */
export function encodeIdentifyCmd(c: {
  cid: number;
  cns: number;
  nsid?: number;
  cntid?: number;
  cnsSpecificId?: number;
  csi?: number;
  sgl?: SglDescriptor;
}): Buffer {
  return encodeSqe({
    opcode: AdminOpcode.IDENTIFY,
    cid: c.cid,
    nsid: c.nsid ?? 0,
    sgl: c.sgl ?? sglTransport(IDENTIFY_DATA_SIZE),
    cdw10: (u8(c.cns) | (u16(c.cntid ?? 0) << 16)) >>> 0,
    cdw11: (u16(c.cnsSpecificId ?? 0) | (u8(c.csi ?? 0) << 24)) >>> 0,
  });
}

// ---------------------------------------------------------------------------------------------
// Shared numeric field tables

type Width = 1 | 2 | 4;

function readFields<K extends string>(b: Buffer, offsets: Readonly<Record<K, number>>, widths: Readonly<Record<K, Width>>): Record<K, number> {
  const out: Partial<Record<K, number>> = {};
  for (const key of Object.keys(widths) as K[]) out[key] = b.readUIntLE(offsets[key], widths[key]);
  return out as Record<K, number>;
}

function writeFields<K extends string>(
  b: Buffer,
  offsets: Readonly<Record<K, number>>,
  widths: Readonly<Record<K, Width>>,
  values: Partial<Record<K, number>>,
): void {
  for (const key of Object.keys(widths) as K[]) {
    const v = values[key];
    if (v === undefined) continue;
    const w = widths[key];
    b.writeUIntLE(w === 4 ? u32(v) : w === 2 ? u16(v) : u8(v), offsets[key], w);
  }
}

// ---------------------------------------------------------------------------------------------
// Identify Controller (CNS 0x01)

/** Byte offsets of Identify Controller fields (NVMe Base 2.0 Figure 275; NVMe-oF 1.1 Figure 28). */
export const IdentifyControllerOffset = {
  vid: 0,
  ssvid: 2,
  sn: 4,
  mn: 24,
  fr: 64,
  rab: 72,
  ieee: 73,
  cmic: 76,
  mdts: 77,
  cntlid: 78,
  ver: 80,
  rtd3r: 84,
  rtd3e: 88,
  oaes: 92,
  ctratt: 96,
  rrls: 100,
  cntrltype: 111,
  fguid: 112,
  crdt1: 128,
  crdt2: 130,
  crdt3: 132,
  nvmsr: 253,
  vwci: 254,
  mec: 255,
  oacs: 256,
  acl: 258,
  aerl: 259,
  frmw: 260,
  lpa: 261,
  elpe: 262,
  npss: 263,
  avscc: 264,
  apsta: 265,
  wctemp: 266,
  cctemp: 268,
  mtfa: 270,
  hmpre: 272,
  hmmin: 276,
  tnvmcap: 280,
  unvmcap: 296,
  rpmbs: 312,
  edstt: 316,
  dsto: 318,
  fwug: 319,
  kas: 320,
  hctma: 322,
  mntmt: 324,
  mxtmt: 326,
  sanicap: 328,
  hmminds: 332,
  hmmaxd: 336,
  nsetidmax: 338,
  endgidmax: 340,
  anatt: 342,
  anacap: 343,
  anagrpmax: 344,
  nanagrpid: 348,
  pels: 352,
  domainid: 356,
  megcap: 368,
  sqes: 512,
  cqes: 513,
  maxcmd: 514,
  nn: 516,
  oncs: 520,
  fuses: 522,
  fna: 524,
  vwc: 525,
  awun: 526,
  awupf: 528,
  icsvscc: 530,
  nwpc: 531,
  acwu: 532,
  ocfs: 534,
  sgls: 536,
  mnan: 540,
  maxdna: 544,
  maxcna: 560,
  subnqn: 768,
  ioccsz: 1792,
  iorcsz: 1796,
  icdoff: 1800,
  fcatt: 1802,
  msdbd: 1803,
  ofcs: 1804,
  dctype: 1806,
  psd: 2048,
  vs: 3072,
} as const;

/** Field sizes of the string, GUID and 128-bit fields. */
export const IdentifyControllerSize = {
  sn: 20,
  mn: 40,
  fr: 8,
  ieee: 3,
  fguid: 16,
  subnqn: 256,
  psd: 32,
  u128: 16,
} as const;

/** Power state descriptor size (NVMe Base 2.0 Figure 276). */
export const PSD_SIZE = 32;

/** Byte offsets in a power state descriptor. */
export const PsdOffset = { maxPower: 0, flags: 3, entryLatency: 4, exitLatency: 8, rrt: 12, rrl: 13, rwt: 14, rwl: 15 } as const;

/** Power state descriptor 0 (the only one a fabrics target reports; NPSS 0). */
export interface PowerStateDescriptor {
  /** MP: maximum power in 0.01 W (or 0.0001 W with MXPS). */
  maxPower: number;
  /** Byte 3: MXPS bit 0, NOPS bit 1. */
  flags: number;
  /** ENLAT: entry latency, microseconds. */
  entryLatency: number;
  /** EXLAT: exit latency, microseconds. */
  exitLatency: number;
  /** Relative read throughput / latency, relative write throughput / latency. */
  rrt: number;
  rrl: number;
  rwt: number;
  rwl: number;
}

/** Numeric (≤ 32-bit) Identify Controller fields and their widths. */
const ctrlNumWidths = {
  vid: 2,
  ssvid: 2,
  rab: 1,
  cmic: 1,
  mdts: 1,
  cntlid: 2,
  ver: 4,
  rtd3r: 4,
  rtd3e: 4,
  oaes: 4,
  ctratt: 4,
  rrls: 2,
  cntrltype: 1,
  crdt1: 2,
  crdt2: 2,
  crdt3: 2,
  nvmsr: 1,
  vwci: 1,
  mec: 1,
  oacs: 2,
  acl: 1,
  aerl: 1,
  frmw: 1,
  lpa: 1,
  elpe: 1,
  npss: 1,
  avscc: 1,
  apsta: 1,
  wctemp: 2,
  cctemp: 2,
  mtfa: 2,
  hmpre: 4,
  hmmin: 4,
  rpmbs: 4,
  edstt: 2,
  dsto: 1,
  fwug: 1,
  kas: 2,
  hctma: 2,
  mntmt: 2,
  mxtmt: 2,
  sanicap: 4,
  hmminds: 4,
  hmmaxd: 2,
  nsetidmax: 2,
  endgidmax: 2,
  anatt: 1,
  anacap: 1,
  anagrpmax: 4,
  nanagrpid: 4,
  pels: 4,
  domainid: 2,
  sqes: 1,
  cqes: 1,
  maxcmd: 2,
  nn: 4,
  oncs: 2,
  fuses: 2,
  fna: 1,
  vwc: 1,
  awun: 2,
  awupf: 2,
  icsvscc: 1,
  nwpc: 1,
  acwu: 2,
  ocfs: 2,
  sgls: 4,
  mnan: 4,
  maxcna: 4,
  ioccsz: 4,
  iorcsz: 4,
  icdoff: 2,
  fcatt: 1,
  msdbd: 1,
  ofcs: 2,
  dctype: 1,
} as const satisfies Record<string, Width>;

type CtrlNumKey = keyof typeof ctrlNumWidths;
const ctrlU128Keys = ['tnvmcap', 'unvmcap', 'megcap', 'maxdna'] as const;
type CtrlU128Key = (typeof ctrlU128Keys)[number];

/**
 * Identify Controller data. Field names are the spec mnemonics in lower case; the comments give the
 * value a fabrics target should report (NVMe Base 2.0 Figure 275, NVMe-oF 1.1 Figure 28, as Linux nvmet fills it).
 */
export interface IdentifyController {
  /** PCI Vendor ID. */
  vid: number;
  /** PCI Subsystem Vendor ID. */
  ssvid: number;
  /** Serial number: printable ASCII, space padded to 20 bytes. */
  sn: string;
  /** Model number: printable ASCII, space padded to 40 bytes. */
  mn: string;
  /** Firmware revision: printable ASCII, space padded to 8 bytes. */
  fr: string;
  /** Recommended Arbitration Burst (nvmet 6). */
  rab: number;
  /** IEEE OUI, 24-bit, stored little-endian. */
  ieee: number;
  /** Multi-path I/O and namespace sharing: bit0 multi-port, bit1 multi-controller, bit3 ANA. */
  cmic: number;
  /** Maximum data transfer size, log2 of units of CAP.MPSMIN (0 = no limit). */
  mdts: number;
  /** Controller ID; must equal the Connect result. */
  cntlid: number;
  /** Version, same encoding as the VS property. */
  ver: number;
  /** RTD3 resume latency (µs). */
  rtd3r: number;
  /** RTD3 entry latency (µs); raises the host's shutdown timeout. */
  rtd3e: number;
  /** Optional asynchronous events supported (see AenConfig). */
  oaes: number;
  /** Controller attributes: bit0 128-bit host ID, bit6 TBKAS, bit15 ELBAS. */
  ctratt: number;
  /** Read recovery levels supported. */
  rrls: number;
  /** Controller type: 1 I/O, 2 discovery, 3 administrative. */
  cntrltype: number;
  /** FRU globally unique identifier (16 bytes). */
  fguid: Buffer;
  /** Command retry delay times, 100 ms units. */
  crdt1: number;
  crdt2: number;
  crdt3: number;
  /** NVM subsystem report (NVMe-MI). */
  nvmsr: number;
  /** VPD write cycle information (NVMe-MI). */
  vwci: number;
  /** Management endpoint capabilities (NVMe-MI). */
  mec: number;
  /** Optional admin command support. */
  oacs: number;
  /** Abort command limit, 0's based. */
  acl: number;
  /** Asynchronous event request limit, 0's based. */
  aerl: number;
  /** Firmware updates. */
  frmw: number;
  /** Log page attributes: bit0 per-NS SMART, bit1 effects log, bit2 extended data, bit3 telemetry. */
  lpa: number;
  /** Error log page entries, 0's based. */
  elpe: number;
  /** Number of power states supported, 0's based. */
  npss: number;
  /** Admin vendor specific command configuration. */
  avscc: number;
  /** Autonomous power state transition attributes. */
  apsta: number;
  /** Warning composite temperature threshold (K). */
  wctemp: number;
  /** Critical composite temperature threshold (K). */
  cctemp: number;
  /** Maximum time for firmware activation (100 ms units). */
  mtfa: number;
  /** Host memory buffer preferred / minimum size (4 KiB units). */
  hmpre: number;
  hmmin: number;
  /** Total / unallocated NVM capacity (bytes, 128-bit). */
  tnvmcap: bigint;
  unvmcap: bigint;
  /** Replay protected memory block support. */
  rpmbs: number;
  /** Extended device self-test time (minutes). */
  edstt: number;
  /** Device self-test options. */
  dsto: number;
  /** Firmware update granularity (4 KiB units). */
  fwug: number;
  /** Keep alive support: granularity in 100 ms units; must be non-zero on fabrics I/O controllers. */
  kas: number;
  /** Host controlled thermal management attributes. */
  hctma: number;
  /** Minimum / maximum thermal management temperature (K). */
  mntmt: number;
  mxtmt: number;
  /** Sanitize capabilities. */
  sanicap: number;
  /** Host memory buffer minimum descriptor entry size. */
  hmminds: number;
  /** Host memory maximum descriptors entries. */
  hmmaxd: number;
  /** NVM set identifier maximum. */
  nsetidmax: number;
  /** Endurance group identifier maximum. */
  endgidmax: number;
  /** ANA transition time (s). */
  anatt: number;
  /** ANA capabilities: bits 4:0 reportable states, bit6 non-zero ANAGRPID, bit7 ANAGRPID static. */
  anacap: number;
  /** ANA group identifier maximum. */
  anagrpmax: number;
  /** Number of ANA group identifiers (sizes the ANA log). */
  nanagrpid: number;
  /** Persistent event log size (64 KiB units). */
  pels: number;
  /** Domain identifier. */
  domainid: number;
  /** Maximum endurance group capacity (128-bit). */
  megcap: bigint;
  /** SQ entry size: bits 3:0 required, 7:4 maximum, log2 (0x66 = 64 B). */
  sqes: number;
  /** CQ entry size: bits 3:0 required, 7:4 maximum, log2 (0x44 = 16 B). */
  cqes: number;
  /** Maximum outstanding commands per queue; must be non-zero on fabrics. */
  maxcmd: number;
  /** Number of namespaces (highest NSID). */
  nn: number;
  /** Optional NVM command support: bit0 Compare … bit2 DSM, bit3 Write Zeroes, bit5 Reservations. */
  oncs: number;
  /** Fused operation support. */
  fuses: number;
  /** Format NVM attributes. */
  fna: number;
  /** Volatile write cache: bit0 present, bits 2:1 Flush NSID 0xFFFFFFFF support. */
  vwc: number;
  /** Atomic write unit normal / power fail, 0's based blocks. */
  awun: number;
  awupf: number;
  /** I/O command set vendor specific command configuration. */
  icsvscc: number;
  /** Namespace write protection capabilities. */
  nwpc: number;
  /** Atomic compare & write unit. */
  acwu: number;
  /** Optional copy formats supported. */
  ocfs: number;
  /** SGL support: bits 1:0 = 01b supported; bit20 offset sub-type (in-capsule data). */
  sgls: number;
  /** Maximum number of allowed namespaces (1..NN when CMIC.ANA). */
  mnan: number;
  /** Maximum domain namespace attachments (128-bit). */
  maxdna: bigint;
  /** Maximum I/O controller namespace attachments. */
  maxcna: number;
  /** Subsystem NQN (NUL padded UTF-8 on the wire). */
  subnqn: string;
  /** I/O queue command capsule supported size, 16-byte units including the 64-byte SQE. */
  ioccsz: number;
  /** I/O queue response capsule supported size, 16-byte units. */
  iorcsz: number;
  /** In-capsule data offset, 16-byte units; must be 0 for TCP. */
  icdoff: number;
  /** Fabrics controller attributes: bit0 static controller model. */
  fcatt: number;
  /** Maximum SGL data block descriptors (1). */
  msdbd: number;
  /** Optional fabric commands supported: bit0 Disconnect. */
  ofcs: number;
  /** Discovery controller type: 0 not reported, 1 DDC, 2 CDC. */
  dctype: number;
  /** Power state descriptor 0. */
  psd0: PowerStateDescriptor;
}

function decodePsd(b: Buffer, o: number): PowerStateDescriptor {
  return {
    maxPower: b.readUInt16LE(o + PsdOffset.maxPower),
    flags: b[o + PsdOffset.flags] ?? 0,
    entryLatency: b.readUInt32LE(o + PsdOffset.entryLatency),
    exitLatency: b.readUInt32LE(o + PsdOffset.exitLatency),
    rrt: (b[o + PsdOffset.rrt] ?? 0) & 0x1f,
    rrl: (b[o + PsdOffset.rrl] ?? 0) & 0x1f,
    rwt: (b[o + PsdOffset.rwt] ?? 0) & 0x1f,
    rwl: (b[o + PsdOffset.rwl] ?? 0) & 0x1f,
  };
}

function encodePsd(b: Buffer, o: number, p: Partial<PowerStateDescriptor>): void {
  b.writeUInt16LE(u16(p.maxPower ?? 0), o + PsdOffset.maxPower);
  b[o + PsdOffset.flags] = u8(p.flags ?? 0);
  b.writeUInt32LE(u32(p.entryLatency ?? 0), o + PsdOffset.entryLatency);
  b.writeUInt32LE(u32(p.exitLatency ?? 0), o + PsdOffset.exitLatency);
  b[o + PsdOffset.rrt] = (p.rrt ?? 0) & 0x1f;
  b[o + PsdOffset.rrl] = (p.rrl ?? 0) & 0x1f;
  b[o + PsdOffset.rwt] = (p.rwt ?? 0) & 0x1f;
  b[o + PsdOffset.rwl] = (p.rwl ?? 0) & 0x1f;
}

/** Input to encodeIdentifyController: any subset of the fields; psd0 may be partial too. */
export type IdentifyControllerInit = Partial<Omit<IdentifyController, 'psd0'>> & { psd0?: Partial<PowerStateDescriptor> };

/**
 * Encodes Identify Controller (4096 bytes). Missing fields are 0 / empty; SN, MN and FR are space
 * padded printable ASCII (non-printable characters become '?'); SUBNQN is NUL padded UTF-8.
 */
export function encodeIdentifyController(c: IdentifyControllerInit): Buffer {
  const b = Buffer.alloc(IDENTIFY_DATA_SIZE);
  const O = IdentifyControllerOffset;
  const S = IdentifyControllerSize;
  writeFields<CtrlNumKey>(b, O, ctrlNumWidths, c);
  writeSpacePadded(b, c.sn ?? '', O.sn, S.sn);
  writeSpacePadded(b, c.mn ?? '', O.mn, S.mn);
  writeSpacePadded(b, c.fr ?? '', O.fr, S.fr);
  b.writeUIntLE((c.ieee ?? 0) & 0xff_ffff, O.ieee, S.ieee);
  writeBytes(b, c.fguid, O.fguid, S.fguid);
  for (const k of ctrlU128Keys) writeU128LE(b, c[k] ?? 0n, O[k]);
  writeNulPadded(b, c.subnqn ?? '', O.subnqn, S.subnqn);
  if (c.psd0 !== undefined) encodePsd(b, O.psd, c.psd0);
  return b;
}

/** Decodes Identify Controller; strings are trimmed, short input is zero-filled. */
export function decodeIdentifyController(buf: Buffer, offset = 0): IdentifyController {
  const b = zeroFilledWindow(buf, offset, IDENTIFY_DATA_SIZE);
  const O = IdentifyControllerOffset;
  const S = IdentifyControllerSize;
  const nums = readFields<CtrlNumKey>(b, O, ctrlNumWidths);
  const big: Record<CtrlU128Key, bigint> = {
    tnvmcap: readU128LE(b, O.tnvmcap),
    unvmcap: readU128LE(b, O.unvmcap),
    megcap: readU128LE(b, O.megcap),
    maxdna: readU128LE(b, O.maxdna),
  };
  return {
    ...nums,
    ...big,
    sn: readTrimmedAscii(b, O.sn, S.sn),
    mn: readTrimmedAscii(b, O.mn, S.mn),
    fr: readTrimmedAscii(b, O.fr, S.fr),
    ieee: b.readUIntLE(O.ieee, S.ieee),
    fguid: copyBytes(b, O.fguid, S.fguid),
    subnqn: readNulTerminated(b, O.subnqn, S.subnqn),
    psd0: decodePsd(b, O.psd),
  };
}

// ---------------------------------------------------------------------------------------------
// Identify Namespace (CNS 0x00, NVM command set)

/** Byte offsets of Identify Namespace fields (NVM Command Set 1.0 Figure 97). */
export const IdentifyNamespaceOffset = {
  nsze: 0,
  ncap: 8,
  nuse: 16,
  nsfeat: 24,
  nlbaf: 25,
  flbas: 26,
  mc: 27,
  dpc: 28,
  dps: 29,
  nmic: 30,
  rescap: 31,
  fpi: 32,
  dlfeat: 33,
  nawun: 34,
  nawupf: 36,
  nacwu: 38,
  nabsn: 40,
  nabo: 42,
  nabspf: 44,
  noiob: 46,
  nvmcap: 48,
  npwg: 64,
  npwa: 66,
  npdg: 68,
  npda: 70,
  nows: 72,
  mssrl: 74,
  mcl: 76,
  msrc: 80,
  nulbaf: 81,
  anagrpid: 92,
  nsattr: 99,
  nvmsetid: 100,
  endgid: 102,
  nguid: 104,
  eui64: 120,
  lbaf: 128,
} as const;

/** LBA format descriptor: 4 bytes, up to 64 of them (NVM Command Set 1.0 Figure 98). */
export const LBAF_SIZE = 4;
export const LBAF_MAX = 64;
export const LbafOffset = { ms: 0, lbads: 2, rp: 3 } as const;

/** One LBA format. */
export interface LbaFormat {
  /** Metadata bytes per LBA. */
  ms: number;
  /** LBA data size, log2 (9 = 512 B, 12 = 4 KiB). */
  lbads: number;
  /** Relative performance, bits 1:0. */
  rp: number;
}

const nsNumWidths = {
  nsfeat: 1,
  nlbaf: 1,
  flbas: 1,
  mc: 1,
  dpc: 1,
  dps: 1,
  nmic: 1,
  rescap: 1,
  fpi: 1,
  dlfeat: 1,
  nawun: 2,
  nawupf: 2,
  nacwu: 2,
  nabsn: 2,
  nabo: 2,
  nabspf: 2,
  noiob: 2,
  npwg: 2,
  npwa: 2,
  npdg: 2,
  npda: 2,
  nows: 2,
  mssrl: 2,
  mcl: 4,
  msrc: 1,
  nulbaf: 1,
  anagrpid: 4,
  nsattr: 1,
  nvmsetid: 2,
  endgid: 2,
} as const satisfies Record<string, Width>;

type NsNumKey = keyof typeof nsNumWidths;

/** Identify Namespace data (NVM command set). */
export interface IdentifyNamespace {
  /** Namespace size, in LBAs. */
  nsze: bigint;
  /** Namespace capacity; 0 means "not attached" to the Linux host. */
  ncap: bigint;
  /** Namespace utilization. */
  nuse: bigint;
  /** Features: bit0 thin provisioning, bit1 NAWUN.. valid, bit2 DAE, bit3 UIDREUSE, bit4 OPTPERF. */
  nsfeat: number;
  /** Number of LBA formats, 0's based. */
  nlbaf: number;
  /** Formatted LBA size: bits 3:0 format index, bit4 extended metadata. */
  flbas: number;
  /** Metadata capabilities. */
  mc: number;
  /** End-to-end data protection capabilities / settings. */
  dpc: number;
  dps: number;
  /** Multi-path I/O and sharing: bit0 shared. */
  nmic: number;
  /** Reservation capabilities. */
  rescap: number;
  /** Format progress indicator. */
  fpi: number;
  /** Deallocate logical block features (bits 2:0: 1 = reads return zeroes). */
  dlfeat: number;
  /** Atomic/boundary hints, 0's based LBAs. */
  nawun: number;
  nawupf: number;
  nacwu: number;
  nabsn: number;
  nabo: number;
  nabspf: number;
  /** Optimal I/O boundary. */
  noiob: number;
  /** NVM capacity (bytes, 128-bit). */
  nvmcap: bigint;
  /** Performance hints (0's based LBAs). */
  npwg: number;
  npwa: number;
  npdg: number;
  npda: number;
  nows: number;
  /** Copy limits. */
  mssrl: number;
  mcl: number;
  msrc: number;
  /** Number of unique attribute LBA formats. */
  nulbaf: number;
  /** ANA group identifier. */
  anagrpid: number;
  /** Namespace attributes: bit0 write protected. */
  nsattr: number;
  /** NVM set identifier. */
  nvmsetid: number;
  /** Endurance group identifier. */
  endgid: number;
  /** Namespace globally unique identifier (16 bytes). */
  nguid: Buffer;
  /** IEEE extended unique identifier (8 bytes). */
  eui64: Buffer;
  /** LBA formats; decode returns NLBAF + 1 of them (at most 64). */
  lbaf: LbaFormat[];
}

/**
 * Encodes Identify Namespace (4096 bytes). When `nlbaf` is not given it is derived from
 * `lbaf.length - 1`; at most 64 formats are written.
 */
export function encodeIdentifyNamespace(ns: Partial<IdentifyNamespace>): Buffer {
  const b = Buffer.alloc(IDENTIFY_DATA_SIZE);
  const O = IdentifyNamespaceOffset;
  const lbaf = (ns.lbaf ?? []).slice(0, LBAF_MAX);
  writeFields<NsNumKey>(b, O, nsNumWidths, { ...ns, nlbaf: ns.nlbaf ?? Math.max(0, lbaf.length - 1) });
  b.writeBigUInt64LE(BigInt.asUintN(64, ns.nsze ?? 0n), O.nsze);
  b.writeBigUInt64LE(BigInt.asUintN(64, ns.ncap ?? 0n), O.ncap);
  b.writeBigUInt64LE(BigInt.asUintN(64, ns.nuse ?? 0n), O.nuse);
  writeU128LE(b, ns.nvmcap ?? 0n, O.nvmcap);
  writeBytes(b, ns.nguid, O.nguid, 16);
  writeBytes(b, ns.eui64, O.eui64, 8);
  lbaf.forEach((f, i) => {
    const o = O.lbaf + i * LBAF_SIZE;
    b.writeUInt16LE(u16(f.ms), o + LbafOffset.ms);
    b[o + LbafOffset.lbads] = u8(f.lbads);
    b[o + LbafOffset.rp] = f.rp & 0x3;
  });
  return b;
}

/** Decodes Identify Namespace; short input is zero-filled. */
export function decodeIdentifyNamespace(buf: Buffer, offset = 0): IdentifyNamespace {
  const b = zeroFilledWindow(buf, offset, IDENTIFY_DATA_SIZE);
  const O = IdentifyNamespaceOffset;
  const nums = readFields<NsNumKey>(b, O, nsNumWidths);
  const count = Math.min(LBAF_MAX, nums.nlbaf + 1);
  const lbaf: LbaFormat[] = [];
  for (let i = 0; i < count; i++) {
    const o = O.lbaf + i * LBAF_SIZE;
    lbaf.push({
      ms: b.readUInt16LE(o + LbafOffset.ms),
      lbads: b[o + LbafOffset.lbads] ?? 0,
      rp: (b[o + LbafOffset.rp] ?? 0) & 0x3,
    });
  }
  return {
    ...nums,
    nsze: b.readBigUInt64LE(O.nsze),
    ncap: b.readBigUInt64LE(O.ncap),
    nuse: b.readBigUInt64LE(O.nuse),
    nvmcap: readU128LE(b, O.nvmcap),
    nguid: copyBytes(b, O.nguid, 16),
    eui64: copyBytes(b, O.eui64, 8),
    lbaf,
  };
}

/** Index of the LBA format in use (FLBAS bits 3:0, plus bits 6:5 as the high bits when NLBAF > 16). */
export function flbasIndex(flbas: number): number {
  return (flbas & 0xf) | (((flbas >> 5) & 0x3) << 4);
}

// ---------------------------------------------------------------------------------------------
// Active Namespace ID list (CNS 0x02 / 0x07)

/** Entries in an active NSID list (4096 / 4). */
export const ACTIVE_NS_LIST_MAX = 1024;

/**
 * The page a controller returns for CNS 0x02 with the given NSID: active NSIDs strictly greater than
 * `after`, ascending, at most 1024 (NVMe Base 2.0 §5.17.2.2).
 */
export function selectActiveNsids(nsids: readonly number[], after: number): number[] {
  return nsids
    .filter((n) => n > after >>> 0 && n !== 0)
    .sort((a, b) => a - b)
    .slice(0, ACTIVE_NS_LIST_MAX);
}

/** Encodes an active NSID list (4096 bytes, zero terminated). The first 1024 NSIDs are written as given. */
export function encodeActiveNsList(nsids: readonly number[]): Buffer {
  const b = Buffer.alloc(IDENTIFY_DATA_SIZE);
  nsids.slice(0, ACTIVE_NS_LIST_MAX).forEach((n, i) => b.writeUInt32LE(u32(n), i * 4));
  return b;
}

/** Decodes an active NSID list up to the first zero entry (or the end of the buffer). */
export function decodeActiveNsList(buf: Buffer): number[] {
  const out: number[] = [];
  const n = Math.min(ACTIVE_NS_LIST_MAX, Math.floor(buf.length / 4));
  for (let i = 0; i < n; i++) {
    const v = buf.readUInt32LE(i * 4);
    if (v === 0) break;
    out.push(v);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Namespace Identification Descriptor list (CNS 0x03)

/** Namespace Identifier Type (NVMe Base 2.0 Figure 279). */
export const NidType = { EUI64: 1, NGUID: 2, UUID: 3, CSI: 4 } as const;
export type NidType = (typeof NidType)[keyof typeof NidType];

/** NIDL for each type. */
export const NID_LENGTH: Readonly<Record<NidType, number>> = { 1: 8, 2: 16, 3: 16, 4: 1 };

/** Header of a descriptor: NIDT u8, NIDL u8, reserved u16. */
export const NS_DESC_HEADER_SIZE = 4;
export const NsDescOffset = { nidt: 0, nidl: 1, nid: 4 } as const;

/** One namespace identification descriptor. */
export interface NsDescriptor {
  /** Identifier type (NidType). */
  nidt: number;
  /** Identifier bytes; NIDL is its length. */
  nid: Buffer;
}

/**
 * Encodes a descriptor list (4096 bytes, terminated by a zero NIDT). Descriptors that would not
 * fit are dropped.
 */
export function encodeNsDescList(descs: readonly NsDescriptor[]): Buffer {
  const b = Buffer.alloc(IDENTIFY_DATA_SIZE);
  let o = 0;
  for (const d of descs) {
    const len = Math.min(d.nid.length, 255);
    if (o + NS_DESC_HEADER_SIZE + len > IDENTIFY_DATA_SIZE) break;
    b[o + NsDescOffset.nidt] = u8(d.nidt);
    b[o + NsDescOffset.nidl] = len;
    d.nid.copy(b, o + NsDescOffset.nid, 0, len);
    o += NS_DESC_HEADER_SIZE + len;
  }
  return b;
}

/**
 * Decodes a descriptor list up to the first zero NIDT. A descriptor whose NID runs past the end of
 * the buffer ends the list (it is not returned).
 */
export function decodeNsDescList(buf: Buffer): NsDescriptor[] {
  const out: NsDescriptor[] = [];
  let o = 0;
  while (o + NS_DESC_HEADER_SIZE <= buf.length) {
    const nidt = buf[o + NsDescOffset.nidt] ?? 0;
    const nidl = buf[o + NsDescOffset.nidl] ?? 0;
    if (nidt === 0) break;
    const start = o + NsDescOffset.nid;
    if (start + nidl > buf.length) break;
    out.push({ nidt, nid: copyBytes(buf, start, nidl) });
    o = start + nidl;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// I/O Command Set specific Identify Controller, NVM (CNS 0x06, CSI 0)

/** Byte offsets (NVM Command Set 1.0 Figure 101). */
export const IdentifyNvmControllerOffset = { vsl: 0, wzsl: 1, wusl: 2, dmrl: 3, dmrsl: 4, dmsl: 8 } as const;

/** NVM command set controller limits (0 = no limit reported). */
export interface IdentifyNvmController {
  /** Verify size limit, log2 of CAP.MPSMIN units. */
  vsl: number;
  /** Write Zeroes size limit, log2 of CAP.MPSMIN units. */
  wzsl: number;
  /** Write Uncorrectable size limit. */
  wusl: number;
  /** DSM ranges limit. */
  dmrl: number;
  /** DSM range size limit (LBAs). */
  dmrsl: number;
  /** DSM size limit (LBAs). */
  dmsl: bigint;
}

/** Encodes CNS 0x06 / CSI 0 data (4096 bytes). */
export function encodeIdentifyNvmController(c: Partial<IdentifyNvmController>): Buffer {
  const b = Buffer.alloc(IDENTIFY_DATA_SIZE);
  const O = IdentifyNvmControllerOffset;
  b[O.vsl] = u8(c.vsl ?? 0);
  b[O.wzsl] = u8(c.wzsl ?? 0);
  b[O.wusl] = u8(c.wusl ?? 0);
  b[O.dmrl] = u8(c.dmrl ?? 0);
  b.writeUInt32LE(u32(c.dmrsl ?? 0), O.dmrsl);
  b.writeBigUInt64LE(BigInt.asUintN(64, c.dmsl ?? 0n), O.dmsl);
  return b;
}

/** Decodes CNS 0x06 / CSI 0 data; short input is zero-filled. */
export function decodeIdentifyNvmController(buf: Buffer, offset = 0): IdentifyNvmController {
  const b = zeroFilledWindow(buf, offset, 16);
  const O = IdentifyNvmControllerOffset;
  return {
    vsl: b[O.vsl] ?? 0,
    wzsl: b[O.wzsl] ?? 0,
    wusl: b[O.wusl] ?? 0,
    dmrl: b[O.dmrl] ?? 0,
    dmrsl: b.readUInt32LE(O.dmrsl),
    dmsl: b.readBigUInt64LE(O.dmsl),
  };
}

// ---------------------------------------------------------------------------------------------
// I/O Command Set Independent Identify Namespace (CNS 0x08)

/** Byte offsets (NVMe Base 2.0 Figure 280). */
export const IdentifyIndepNamespaceOffset = {
  nsfeat: 0,
  nmic: 1,
  rescap: 2,
  fpi: 3,
  anagrpid: 4,
  nsattr: 8,
  nvmsetid: 10,
  endgid: 12,
  nstat: 14,
} as const;

/** NSTAT bit0: namespace ready (the Linux host skips a namespace whose bit is clear). */
export const NSTAT_READY = 0x01;

/** I/O command set independent namespace data. */
export interface IdentifyIndepNamespace {
  nsfeat: number;
  nmic: number;
  rescap: number;
  fpi: number;
  anagrpid: number;
  nsattr: number;
  nvmsetid: number;
  endgid: number;
  /** Namespace status: bit0 ready. */
  nstat: number;
}

const indepWidths = {
  nsfeat: 1,
  nmic: 1,
  rescap: 1,
  fpi: 1,
  anagrpid: 4,
  nsattr: 1,
  nvmsetid: 2,
  endgid: 2,
  nstat: 1,
} as const satisfies Record<keyof IdentifyIndepNamespace, Width>;

/** Encodes CNS 0x08 data (4096 bytes). */
export function encodeIdentifyIndepNamespace(ns: Partial<IdentifyIndepNamespace>): Buffer {
  const b = Buffer.alloc(IDENTIFY_DATA_SIZE);
  writeFields<keyof IdentifyIndepNamespace>(b, IdentifyIndepNamespaceOffset, indepWidths, ns);
  return b;
}

/** Decodes CNS 0x08 data; short input is zero-filled. */
export function decodeIdentifyIndepNamespace(buf: Buffer, offset = 0): IdentifyIndepNamespace {
  const b = zeroFilledWindow(buf, offset, 16);
  return readFields<keyof IdentifyIndepNamespace>(b, IdentifyIndepNamespaceOffset, indepWidths);
}

// ---------------------------------------------------------------------------------------------
// I/O Command Set data structure (CNS 0x1C)

/** Size of one I/O command set vector (64-bit bitmap of CSIs), 512 of them per page. */
export const CS_VECTOR_SIZE = 8;

/** Encodes the I/O command set vectors (bit n of a vector = CSI n supported). */
export function encodeIoCmdSetVectors(vectors: readonly bigint[]): Buffer {
  const b = Buffer.alloc(IDENTIFY_DATA_SIZE);
  vectors.slice(0, IDENTIFY_DATA_SIZE / CS_VECTOR_SIZE).forEach((v, i) => b.writeBigUInt64LE(BigInt.asUintN(64, v), i * CS_VECTOR_SIZE));
  return b;
}

/** Decodes the I/O command set vectors up to the last non-zero one. */
export function decodeIoCmdSetVectors(buf: Buffer): bigint[] {
  const out: bigint[] = [];
  const n = Math.min(IDENTIFY_DATA_SIZE, buf.length) / CS_VECTOR_SIZE;
  for (let i = 0; i < Math.floor(n); i++) out.push(buf.readBigUInt64LE(i * CS_VECTOR_SIZE));
  while (out.length > 0 && out[out.length - 1] === 0n) out.pop();
  return out;
}
