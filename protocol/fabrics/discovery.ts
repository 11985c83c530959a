/**
 * Discovery log page (LID 0x70): 1024-byte header plus 1024-byte entries. NVMe-oF 1.1 §5.3
 * Figures 31/32; NVMe/TCP 1.0 §3.9 for the TCP TSAS. The target builds the whole log with
 * encodeDiscoveryLog and serves windows of it with sliceLogPage.
 */
import { Buffer } from 'node:buffer';
import { copyBytes, readNulOrSpacePadded, readNulTerminated, u16, u64, u8, writeBytes, writeNulPadded, zeroFilledWindow } from '../nvme/wire.js';

/** The well-known discovery subsystem NQN (NVMe-oF 1.1 §7.2). */
export const DISCOVERY_NQN = 'nqn.2014-08.org.nvmexpress.discovery';

/** Header and entry sizes. */
export const DISC_LOG_HEADER_SIZE = 1024;
export const DISC_LOG_ENTRY_SIZE = 1024;

/** Header offsets (NVMe-oF 1.1 Figure 31). */
export const DiscLogHeaderOffset = { genctr: 0, numrec: 8, recfmt: 16 } as const;

/** Entry offsets (NVMe-oF 1.1 Figure 32). */
export const DiscLogEntryOffset = {
  trtype: 0,
  adrfam: 1,
  subtype: 2,
  treq: 3,
  portid: 4,
  cntlid: 6,
  asqsz: 8,
  eflags: 10,
  trsvcid: 32,
  subnqn: 256,
  traddr: 512,
  tsas: 768,
} as const;

/** Entry field sizes. */
export const DiscLogEntrySize = { trsvcid: 32, subnqn: 256, traddr: 256, tsas: 256 } as const;

/** Transport types. */
export const Trtype = { RDMA: 1, FC: 2, TCP: 3, LOOP: 254 } as const;
export type Trtype = (typeof Trtype)[keyof typeof Trtype];

/** Address families. */
export const Adrfam = { IPV4: 1, IPV6: 2, IB: 3, FC: 4, INTRA_HOST: 254 } as const;
export type Adrfam = (typeof Adrfam)[keyof typeof Adrfam];

/** Subsystem types. */
export const DiscSubtype = {
  /** Referral to another discovery service. */
  REFERRAL: 1,
  /** NVM subsystem. */
  NVME: 2,
  /** The discovery subsystem being talked to. */
  CURRENT: 3,
} as const;
export type DiscSubtype = (typeof DiscSubtype)[keyof typeof DiscSubtype];

/** Transport requirements (TREQ). */
export const Treq = {
  /** Bits 1:0: secure channel requirement. */
  SECURE_CHANNEL_MASK: 0x03,
  NOT_SPECIFIED: 0x00,
  REQUIRED: 0x01,
  NOT_REQUIRED: 0x02,
  /** Bit 2: SQ flow control disable supported (nvme-cli then connects with disable_sqflow). */
  DISABLE_SQFLOW: 0x04,
} as const;

/** Entry flags (EFLAGS). */
export const Eflags = {
  /** Duplicate returned information. */
  DUPRETINFO: 0x1,
  /** Explicit persistent connection support for discovery. */
  EPCSD: 0x2,
  /** No CDC connectivity. */
  NCC: 0x4,
} as const;

/** TCP TSAS security type (byte 0 of TSAS for TRTYPE TCP). */
export const TcpSectype = { NONE: 0, TLS12: 1, TLS13: 2 } as const;
export type TcpSectype = (typeof TcpSectype)[keyof typeof TcpSectype];

/** TCP transport specific address subtype. */
export interface TcpTsas {
  sectype: number;
}

/** One discovery log entry. */
export interface DiscLogEntry {
  trtype: number;
  adrfam: number;
  subtype: number;
  treq: number;
  portid: number;
  /** 0xFFFF dynamic controller model, 0xFFFE static. */
  cntlid: number;
  /** Admin max SQ size (nvmet 32). */
  asqsz: number;
  eflags: number;
  /** Transport service id, e.g. "4420". */
  trsvcid: string;
  subnqn: string;
  /** Transport address, e.g. "192.168.1.10". */
  traddr: string;
  /**
   * Transport specific address subtype: `{ sectype }` for TCP (decoded that way when TRTYPE is
   * TCP), otherwise the raw 256 bytes.
   */
  tsas: Buffer | TcpTsas;
}

/** Discovery log header. */
export interface DiscLogHeader {
  genctr: bigint;
  /** Number of records (u64 on the wire). */
  numrec: number;
  recfmt: number;
}

/** Writes one entry at `offset`; TRSVCID and TRADDR are NUL padded (as nvmet), NQNs NUL padded. */
export function encodeDiscLogEntryInto(buf: Buffer, offset: number, e: DiscLogEntry): void {
  const O = DiscLogEntryOffset;
  const S = DiscLogEntrySize;
  buf.fill(0, offset, offset + DISC_LOG_ENTRY_SIZE);
  buf[offset + O.trtype] = u8(e.trtype);
  buf[offset + O.adrfam] = u8(e.adrfam);
  buf[offset + O.subtype] = u8(e.subtype);
  buf[offset + O.treq] = u8(e.treq);
  buf.writeUInt16LE(u16(e.portid), offset + O.portid);
  buf.writeUInt16LE(u16(e.cntlid), offset + O.cntlid);
  buf.writeUInt16LE(u16(e.asqsz), offset + O.asqsz);
  buf.writeUInt16LE(u16(e.eflags), offset + O.eflags);
  writeNulPadded(buf, e.trsvcid, offset + O.trsvcid, S.trsvcid);
  writeNulPadded(buf, e.subnqn, offset + O.subnqn, S.subnqn);
  writeNulPadded(buf, e.traddr, offset + O.traddr, S.traddr);
  if (Buffer.isBuffer(e.tsas)) writeBytes(buf, e.tsas, offset + O.tsas, S.tsas);
  else buf[offset + O.tsas] = u8(e.tsas.sectype);
}

/** Encodes one 1024-byte entry. */
export function encodeDiscLogEntry(e: DiscLogEntry): Buffer {
  const b = Buffer.alloc(DISC_LOG_ENTRY_SIZE);
  encodeDiscLogEntryInto(b, 0, e);
  return b;
}

/** Decodes one entry at `offset`; short input is zero-filled. */
export function decodeDiscLogEntry(buf: Buffer, offset = 0): DiscLogEntry {
  const b = zeroFilledWindow(buf, offset, DISC_LOG_ENTRY_SIZE);
  const O = DiscLogEntryOffset;
  const S = DiscLogEntrySize;
  const trtype = b[O.trtype] ?? 0;
  return {
    trtype,
    adrfam: b[O.adrfam] ?? 0,
    subtype: b[O.subtype] ?? 0,
    treq: b[O.treq] ?? 0,
    portid: b.readUInt16LE(O.portid),
    cntlid: b.readUInt16LE(O.cntlid),
    asqsz: b.readUInt16LE(O.asqsz),
    eflags: b.readUInt16LE(O.eflags),
    trsvcid: readNulOrSpacePadded(b, O.trsvcid, S.trsvcid),
    subnqn: readNulTerminated(b, O.subnqn, S.subnqn),
    traddr: readNulOrSpacePadded(b, O.traddr, S.traddr),
    tsas: trtype === Trtype.TCP ? { sectype: b[O.tsas] ?? 0 } : copyBytes(b, O.tsas, S.tsas),
  };
}

/**
 * Encodes the whole discovery log: header (GENCTR, NUMREC = entries.length, RECFMT) and one entry
 * per record. Hosts read it in windows; keep GENCTR stable while the content is unchanged.
 */
export function encodeDiscoveryLog(log: { genctr: bigint; entries: readonly DiscLogEntry[]; recfmt?: number }): Buffer {
  const b = Buffer.alloc(DISC_LOG_HEADER_SIZE + log.entries.length * DISC_LOG_ENTRY_SIZE);
  b.writeBigUInt64LE(u64(log.genctr), DiscLogHeaderOffset.genctr);
  b.writeBigUInt64LE(BigInt(log.entries.length), DiscLogHeaderOffset.numrec);
  b.writeUInt16LE(u16(log.recfmt ?? 0), DiscLogHeaderOffset.recfmt);
  log.entries.forEach((e, i) => encodeDiscLogEntryInto(b, DISC_LOG_HEADER_SIZE + i * DISC_LOG_ENTRY_SIZE, e));
  return b;
}

/** Decodes the header (the first 18 bytes matter); short input is zero-filled. */
export function decodeDiscLogHeader(buf: Buffer): DiscLogHeader {
  const b = zeroFilledWindow(buf, 0, 24);
  return {
    genctr: b.readBigUInt64LE(DiscLogHeaderOffset.genctr),
    numrec: Number(b.readBigUInt64LE(DiscLogHeaderOffset.numrec)),
    recfmt: b.readUInt16LE(DiscLogHeaderOffset.recfmt),
  };
}

/** A decoded discovery log. */
export interface DiscoveryLog extends DiscLogHeader {
  entries: DiscLogEntry[];
  /** NUMREC promises more entries than the buffer holds (read it again with a larger length). */
  truncated: boolean;
}

/** Decodes the header and every entry wholly present in `buf` (at most NUMREC). */
export function decodeDiscoveryLog(buf: Buffer): DiscoveryLog {
  const header = decodeDiscLogHeader(buf);
  const present = Math.max(0, Math.floor((buf.length - DISC_LOG_HEADER_SIZE) / DISC_LOG_ENTRY_SIZE));
  const n = Math.min(header.numrec, present);
  const entries: DiscLogEntry[] = [];
  for (let i = 0; i < n; i++) entries.push(decodeDiscLogEntry(buf, DISC_LOG_HEADER_SIZE + i * DISC_LOG_ENTRY_SIZE));
  return { ...header, entries, truncated: buf.length < DISC_LOG_HEADER_SIZE || header.numrec > present };
}

/** Bytes a host must read to get `numrec` entries. */
export function discoveryLogSize(numrec: number): number {
  return DISC_LOG_HEADER_SIZE + numrec * DISC_LOG_ENTRY_SIZE;
}
