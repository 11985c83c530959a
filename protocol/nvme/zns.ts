/**
 * Zoned Namespace Command Set 1.1 wire formats: Zone Management Send (79h) and Receive (7Ah) fields, the zone
 * descriptor and report (§3.4.2.2), the zoned Identify Namespace (CNS 05h, CSI 02h, §4.1.5.1) and Identify
 * Controller (CNS 06h, CSI 02h, §4.1.5.2). Zone Append (7Dh) uses the Read/Write layout (encodeRwCmd).
 */
import { Buffer } from 'node:buffer';
import { encodeSqe, sglTransport, type SglDescriptor } from './sqe.js';
import { IDENTIFY_DATA_SIZE, LBAF_MAX } from './identify.js';
import { NvmOpcode } from './opcodes.js';
import { u64, zeroFilledWindow } from './wire.js';

/** Zone Send Action, CDW13 bits 7:0 (ZNS 1.1 Figure 33). */
export const ZoneSendAction = { CLOSE: 0x01, FINISH: 0x02, OPEN: 0x03, RESET: 0x04, OFFLINE: 0x05, SET_ZDE: 0x10 } as const;
export type ZoneSendAction = (typeof ZoneSendAction)[keyof typeof ZoneSendAction];
/** Zone Management Send CDW13 bit 8: Select All (the SLBA is ignored). */
export const ZMS_SELECT_ALL = 1 << 8;

/** Zone Receive Action, CDW13 bits 7:0 (ZNS 1.1 Figure 36). */
export const ZoneRecvAction = { REPORT: 0x00, EXT_REPORT: 0x01 } as const;
/** Zone Receive Action Specific Field, CDW13 bits 15:8, for a report: which zones it lists (ZNS 1.1 Figure 36). */
export const ZoneReportFilter = { ALL: 0, EMPTY: 1, IMP_OPEN: 2, EXP_OPEN: 3, CLOSED: 4, FULL: 5, READ_ONLY: 6, OFFLINE: 7 } as const;
/** Zone Management Receive CDW13 bit 16: Partial Report (Number of Zones counts only the descriptors returned). */
export const ZMR_PARTIAL = 1 << 16;

/** Zone State values, the high nibble of a descriptor's ZS byte (ZNS 1.1 Figure 38). */
export const ZoneStateCode = { EMPTY: 0x1, IMP_OPEN: 0x2, EXP_OPEN: 0x3, CLOSED: 0x4, READ_ONLY: 0xd, FULL: 0xe, OFFLINE: 0xf } as const;
export type ZoneStateCode = (typeof ZoneStateCode)[keyof typeof ZoneStateCode];
/** Zone Type: Sequential Write Required, the only type ZNS 1.1 defines (Figure 38). */
export const ZONE_TYPE_SEQ_WRITE_REQ = 0x2;

/** Report header and each descriptor are 64 bytes (ZNS 1.1 Figures 37, 38). */
export const ZONE_REPORT_HEADER_SIZE = 64;
export const ZONE_DESC_SIZE = 64;
export const ZoneDescOffset = { zt: 0, zs: 1, za: 2, zai: 3, zcap: 8, zslba: 16, wp: 24 } as const;

/** One zone descriptor. LBAs as numbers: a namespace here has fewer than 2^53 blocks. */
export interface ZoneDescriptor {
  /** Zone state (ZoneStateCode). */
  zs: number;
  /** Zone attributes (bit 0 ZFC, bit 1 FZR, bit 7 ZDEV). */
  za: number;
  zcap: number;
  zslba: number;
  wp: number;
}

/**
 * Writes a report into `buf` (the host's whole transfer): the Number of Zones, then as many descriptors as fit. The
 * caller says what Number of Zones holds, since it depends on Partial Report (ZNS 1.1 §3.4.2.2).
 */
export function encodeZoneReportInto(buf: Buffer, nrZones: number, descs: readonly ZoneDescriptor[]): void {
  buf.fill(0);
  if (buf.length >= 8) buf.writeBigUInt64LE(BigInt(nrZones), 0);
  for (let i = 0; i < descs.length; i++) {
    const o = ZONE_REPORT_HEADER_SIZE + i * ZONE_DESC_SIZE;
    if (o + ZONE_DESC_SIZE > buf.length) break;
    const d = descs[i] as ZoneDescriptor;
    buf[o + ZoneDescOffset.zt] = ZONE_TYPE_SEQ_WRITE_REQ;
    buf[o + ZoneDescOffset.zs] = (d.zs & 0xf) << 4;
    buf[o + ZoneDescOffset.za] = d.za & 0xff;
    buf.writeBigUInt64LE(BigInt(d.zcap), o + ZoneDescOffset.zcap);
    buf.writeBigUInt64LE(BigInt(d.zslba), o + ZoneDescOffset.zslba);
    buf.writeBigUInt64LE(BigInt(d.wp), o + ZoneDescOffset.wp);
  }
}

/** Descriptors that fit in a report of `bytes` bytes. */
export function zoneReportCapacity(bytes: number): number {
  return Math.max(0, Math.floor((bytes - ZONE_REPORT_HEADER_SIZE) / ZONE_DESC_SIZE));
}

/** Decodes a report: Number of Zones and every whole descriptor present (at most Number of Zones of them). */
export function decodeZoneReport(buf: Buffer): { nrZones: bigint; zones: ZoneDescriptor[] } {
  const nrZones = buf.length >= 8 ? buf.readBigUInt64LE(0) : 0n;
  const zones: ZoneDescriptor[] = [];
  const n = Math.min(zoneReportCapacity(buf.length), Number(nrZones > 0xffff_ffffn ? 0xffff_ffffn : nrZones));
  for (let i = 0; i < n; i++) {
    const o = ZONE_REPORT_HEADER_SIZE + i * ZONE_DESC_SIZE;
    zones.push({
      zs: (buf[o + ZoneDescOffset.zs] as number) >>> 4,
      za: buf[o + ZoneDescOffset.za] as number,
      zcap: Number(buf.readBigUInt64LE(o + ZoneDescOffset.zcap)),
      zslba: Number(buf.readBigUInt64LE(o + ZoneDescOffset.zslba)),
      wp: Number(buf.readBigUInt64LE(o + ZoneDescOffset.wp)),
    });
  }
  return { nrZones, zones };
}

// ---------------------------------------------------------------------------------------------
// Commands

/** Encodes Zone Management Send: `zsa` on the zone starting at `slba`, or on every zone it applies to with `selectAll`. */
export function encodeZoneMgmtSendCmd(c: { cid: number; nsid: number; slba: bigint; zsa: number; selectAll?: boolean }): Buffer {
  const s = u64(c.slba);
  return encodeSqe({
    opcode: NvmOpcode.ZONE_MGMT_SEND,
    cid: c.cid,
    nsid: c.nsid,
    cdw10: Number(s & 0xffff_ffffn),
    cdw11: Number(s >> 32n),
    cdw13: ((c.zsa & 0xff) | (c.selectAll === true ? ZMS_SELECT_ALL : 0)) >>> 0,
  });
}

/** Encodes Zone Management Receive: a report of `length` bytes (NUMD, 0's based dwords, in CDW12). */
export function encodeZoneMgmtRecvCmd(c: { cid: number; nsid: number; slba: bigint; length: number; zra?: number; filter?: number; partial?: boolean; sgl?: SglDescriptor }): Buffer {
  const s = u64(c.slba);
  return encodeSqe({
    opcode: NvmOpcode.ZONE_MGMT_RECV,
    cid: c.cid,
    nsid: c.nsid,
    sgl: c.sgl ?? sglTransport(c.length),
    cdw10: Number(s & 0xffff_ffffn),
    cdw11: Number(s >> 32n),
    cdw12: (Math.floor(c.length / 4) - 1) >>> 0,
    cdw13: (((c.zra ?? ZoneRecvAction.REPORT) & 0xff) | (((c.filter ?? ZoneReportFilter.ALL) & 0xff) << 8) | (c.partial === true ? ZMR_PARTIAL : 0)) >>> 0,
  });
}

// ---------------------------------------------------------------------------------------------
// Identify (CNS 05h / 06h with CSI 02h)

/** Byte offsets of the zoned Identify Namespace fields (ZNS 1.1 Figure 48); LBAFE n at lbafe + 16 n. */
export const IdentifyZnsNamespaceOffset = { zoc: 0, ozcs: 2, mar: 4, mor: 8, rrl: 12, frl: 16, lbafe: 2816 } as const;
export const ZNS_LBAFE_SIZE = 16;
/** OZCS bit 0: Read Across Zone Boundaries (ZNS 1.1 Figure 48). */
export const OZCS_RAZB = 0x1;
/** MAR / MOR value meaning "no limit" (ZNS 1.1 Figure 48: FFFFFFFFh). */
export const ZNS_NO_LIMIT = 0xffff_ffff;

/** Zoned Identify Namespace fields. MAR and MOR are 0's based (FFFFFFFFh: no limit). */
export interface IdentifyZnsNamespace {
  zoc: number;
  ozcs: number;
  mar: number;
  mor: number;
  rrl: number;
  frl: number;
  /** Per LBA format: zone size in LBAs (ZSZE) and descriptor extension size (ZDES, 64-byte units). */
  lbafe: { zsze: bigint; zdes: number }[];
}

/** Encodes CNS 05h / CSI 02h data (4096 bytes). */
export function encodeIdentifyZnsNamespace(z: Partial<IdentifyZnsNamespace>): Buffer {
  const b = Buffer.alloc(IDENTIFY_DATA_SIZE);
  const O = IdentifyZnsNamespaceOffset;
  b.writeUInt16LE(z.zoc ?? 0, O.zoc);
  b.writeUInt16LE(z.ozcs ?? 0, O.ozcs);
  b.writeUInt32LE((z.mar ?? 0) >>> 0, O.mar);
  b.writeUInt32LE((z.mor ?? 0) >>> 0, O.mor);
  b.writeUInt32LE((z.rrl ?? 0) >>> 0, O.rrl);
  b.writeUInt32LE((z.frl ?? 0) >>> 0, O.frl);
  (z.lbafe ?? []).slice(0, LBAF_MAX).forEach((f, i) => {
    b.writeBigUInt64LE(u64(f.zsze), O.lbafe + i * ZNS_LBAFE_SIZE);
    b[O.lbafe + i * ZNS_LBAFE_SIZE + 8] = f.zdes & 0xff;
  });
  return b;
}

/** Decodes CNS 05h / CSI 02h data, the first `nlbaf` LBAFE entries; short input is zero-filled. */
export function decodeIdentifyZnsNamespace(buf: Buffer, nlbaf = 1): IdentifyZnsNamespace {
  const b = zeroFilledWindow(buf, 0, IDENTIFY_DATA_SIZE);
  const O = IdentifyZnsNamespaceOffset;
  const lbafe: IdentifyZnsNamespace['lbafe'] = [];
  for (let i = 0; i < Math.min(nlbaf, LBAF_MAX); i++) lbafe.push({ zsze: b.readBigUInt64LE(O.lbafe + i * ZNS_LBAFE_SIZE), zdes: b[O.lbafe + i * ZNS_LBAFE_SIZE + 8] as number });
  return { zoc: b.readUInt16LE(O.zoc), ozcs: b.readUInt16LE(O.ozcs), mar: b.readUInt32LE(O.mar), mor: b.readUInt32LE(O.mor), rrl: b.readUInt32LE(O.rrl), frl: b.readUInt32LE(O.frl), lbafe };
}

/** Encodes CNS 06h / CSI 02h data: ZASL (byte 0), the Zone Append size limit as log2 of CAP.MPSMIN units (ZNS 1.1 Figure 49). */
export function encodeIdentifyZnsController(c: { zasl: number }): Buffer {
  const b = Buffer.alloc(IDENTIFY_DATA_SIZE);
  b[0] = c.zasl & 0xff;
  return b;
}

/** Decodes CNS 06h / CSI 02h data. */
export function decodeIdentifyZnsController(buf: Buffer): { zasl: number } {
  return { zasl: buf.length > 0 ? (buf[0] as number) : 0 };
}
