// NVMe/TCP PDU shapes and the one encoder — TCP Transport 1.0 §3.6.2. encodePdu alone writes hlen/pdo/plen and digests.
import { Buffer } from 'node:buffer';
import {
  CAPSULE_CMD_HLEN,
  CH_SIZE,
  DATA_PDU_HLEN,
  DIGEST_SIZE,
  IC_PDU_SIZE,
  PDU_INFO,
  PduFlag,
  PduType,
  TERM_REQ_HLEN,
  TERM_REQ_MAX_DATA,
  dataOffset,
} from './constants.js';
import { crc32c } from './crc32c.js';

/** ICReq (§3.6.2.2). */
export interface IcReqPdu {
  readonly type: typeof PduType.IC_REQ;
  /** PDU Format Version; 0 is the only defined value. */
  pfv: number;
  /** Host PDU Data Alignment, 0's based dwords: alignment the host wants in C2H data PDUs. */
  hpda: number;
  /** Digest request: bit0 header digest, bit1 data digest. */
  dgst: number;
  /** Maximum outstanding R2Ts per command, 0's based. */
  maxr2t: number;
}

/** ICResp (§3.6.2.3). */
export interface IcRespPdu {
  readonly type: typeof PduType.IC_RESP;
  pfv: number;
  /** Controller PDU Data Alignment, 0's based dwords: alignment the controller wants in H2C data. */
  cpda: number;
  /** Digests enabled: bit0 header, bit1 data. */
  dgst: number;
  /** MAXH2CDATA: largest data length of one H2CData PDU. */
  maxh2cdata: number;
}

/** H2CTermReq / C2HTermReq (§3.6.2.4, §3.6.2.5). */
export interface TermReqPdu {
  readonly type: typeof PduType.H2C_TERM_REQ | typeof PduType.C2H_TERM_REQ;
  /** Fatal Error Status. */
  fes: number;
  /** Fatal Error Information: for FES 1/6 the byte offset of the bad header field. */
  fei: number;
  /** Copy of (up to 128 bytes of) the PDU header that caused the error. */
  errorData: Buffer;
}

/** CapsuleCmd (§3.6.2.6): the 64-byte SQE and optional in-capsule data. */
export interface CapsuleCmdPdu {
  readonly type: typeof PduType.CAPSULE_CMD;
  sqe: Buffer;
  /** In-capsule data as received (views into socket chunks) or to send. */
  data: Buffer[];
}

/** CapsuleResp (§3.6.2.7): the 16-byte CQE. */
export interface CapsuleRespPdu {
  readonly type: typeof PduType.CAPSULE_RESP;
  cqe: Buffer;
}

/** H2CData (§3.6.2.8). */
export interface H2CDataPdu {
  readonly type: typeof PduType.H2C_DATA;
  /** Command Capsule CID the data belongs to. */
  cccid: number;
  /** Transfer Tag from the R2T being answered. */
  ttag: number;
  /** Data Offset within the command's data. */
  datao: number;
  /** DATA_LAST flag: last PDU of the R2T's range. */
  last: boolean;
  data: Buffer[];
}

/** C2HData (§3.6.2.9). */
export interface C2HDataPdu {
  readonly type: typeof PduType.C2H_DATA;
  cccid: number;
  datao: number;
  last: boolean;
  /** DATA_SUCCESS: the command completed; no CapsuleResp follows (only when SQ flow control is off). */
  success: boolean;
  data: Buffer[];
}

/** R2T (§3.6.2.10). */
export interface R2TPdu {
  readonly type: typeof PduType.R2T;
  cccid: number;
  ttag: number;
  /** R2T Offset: where in the command's data the controller wants the next bytes. */
  r2to: number;
  /** R2T Length. */
  r2tl: number;
}

export type Pdu = IcReqPdu | IcRespPdu | TermReqPdu | CapsuleCmdPdu | CapsuleRespPdu | H2CDataPdu | C2HDataPdu | R2TPdu;

/** Negotiated per-connection framing: digests from ICReq/ICResp, pda = the receiver's alignment (peer's xPDA). */
export interface PduFraming {
  hdgst: boolean;
  ddgst: boolean;
  /** Alignment (0's based dwords) the receiving side asked for: CPDA for H2C PDUs, HPDA for C2H PDUs. */
  pda: number;
}

export const NO_DIGESTS: PduFraming = Object.freeze({ hdgst: false, ddgst: false, pda: 0 });

function byteLength(data: readonly Buffer[]): number {
  let n = 0;
  for (const d of data) n += d.length;
  return n;
}

/**
 * Encode one PDU as `[header(+HDGST)(+pad), ...data views, DDGST?]`. The only writer of hlen, pdo, plen,
 * HDGSTF/DDGSTF and digests; payload buffers are passed through, never copied.
 */
export function encodePdu(pdu: Pdu, framing: PduFraming = NO_DIGESTS): Buffer[] {
  const info = PDU_INFO[pdu.type];
  const hlen = info.hlen;
  const hdgst = info.hdgst && framing.hdgst;
  const data = pduData(pdu);
  const datalen = data === undefined ? 0 : byteLength(data);
  const hasData = datalen > 0;
  const ddgst = hasData && framing.ddgst;
  const pdo = hasData ? dataOffset(hlen, hdgst, framing.pda) : 0;
  const headLen = hasData ? pdo : hlen + (hdgst ? DIGEST_SIZE : 0);
  let plen = headLen + datalen + (ddgst ? DIGEST_SIZE : 0);
  if (pdu.type === PduType.H2C_TERM_REQ || pdu.type === PduType.C2H_TERM_REQ) plen = hlen + Math.min(pdu.errorData.length, TERM_REQ_MAX_DATA);

  // allocUnsafe draws from the shared pool (Buffer.alloc does not); reserved bytes and padding must be zero.
  const head = Buffer.allocUnsafe(pdu.type === PduType.H2C_TERM_REQ || pdu.type === PduType.C2H_TERM_REQ ? plen : headLen).fill(0);
  let flags = (hdgst ? PduFlag.HDGSTF : 0) | (ddgst ? PduFlag.DDGSTF : 0);
  switch (pdu.type) {
    case PduType.IC_REQ:
      head.writeUInt16LE(pdu.pfv, 8);
      head[10] = pdu.hpda;
      head[11] = pdu.dgst;
      head.writeUInt32LE(pdu.maxr2t >>> 0, 12);
      break;
    case PduType.IC_RESP:
      head.writeUInt16LE(pdu.pfv, 8);
      head[10] = pdu.cpda;
      head[11] = pdu.dgst;
      head.writeUInt32LE(pdu.maxh2cdata >>> 0, 12);
      break;
    case PduType.H2C_TERM_REQ:
    case PduType.C2H_TERM_REQ:
      head.writeUInt16LE(pdu.fes, 8);
      head.writeUInt32LE(pdu.fei >>> 0, 10);
      pdu.errorData.copy(head, TERM_REQ_HLEN, 0, Math.min(pdu.errorData.length, TERM_REQ_MAX_DATA));
      break;
    case PduType.CAPSULE_CMD:
      pdu.sqe.copy(head, CH_SIZE, 0, 64);
      break;
    case PduType.CAPSULE_RESP:
      pdu.cqe.copy(head, CH_SIZE, 0, 16);
      break;
    case PduType.H2C_DATA:
      head.writeUInt16LE(pdu.cccid, 8);
      head.writeUInt16LE(pdu.ttag, 10);
      head.writeUInt32LE(pdu.datao >>> 0, 12);
      head.writeUInt32LE(datalen, 16);
      if (pdu.last) flags |= PduFlag.DATA_LAST;
      break;
    case PduType.C2H_DATA:
      head.writeUInt16LE(pdu.cccid, 8);
      head.writeUInt32LE(pdu.datao >>> 0, 12);
      head.writeUInt32LE(datalen, 16);
      if (pdu.last) flags |= PduFlag.DATA_LAST;
      if (pdu.success) flags |= PduFlag.DATA_SUCCESS;
      break;
    case PduType.R2T:
      head.writeUInt16LE(pdu.cccid, 8);
      head.writeUInt16LE(pdu.ttag, 10);
      head.writeUInt32LE(pdu.r2to >>> 0, 12);
      head.writeUInt32LE(pdu.r2tl >>> 0, 16);
      break;
  }
  head[0] = pdu.type;
  head[1] = flags;
  head[2] = hlen;
  head[3] = pdo;
  head.writeUInt32LE(plen, 4);
  if (hdgst) head.writeUInt32LE(crc32c(head.subarray(0, hlen)), hlen);
  if (!hasData || data === undefined) return [head];
  const out: Buffer[] = [head];
  let crc = 0;
  for (const d of data) {
    if (d.length === 0) continue;
    out.push(d);
    if (ddgst) crc = crc32c(d, crc);
  }
  if (ddgst) {
    const tail = Buffer.allocUnsafe(DIGEST_SIZE);
    tail.writeUInt32LE(crc, 0);
    out.push(tail);
  }
  return out;
}

function pduData(pdu: Pdu): Buffer[] | undefined {
  switch (pdu.type) {
    case PduType.CAPSULE_CMD:
    case PduType.H2C_DATA:
    case PduType.C2H_DATA:
      return pdu.data;
    default:
      return undefined;
  }
}

/** Total bytes of an encoded PDU. */
export function encodedLength(parts: readonly Buffer[]): number {
  return byteLength(parts);
}

/** Header-only sizes, exported for layout tests and callers that size buffers. */
export const PduSize = { CH: CH_SIZE, IC: IC_PDU_SIZE, CAPSULE_CMD: CAPSULE_CMD_HLEN, DATA: DATA_PDU_HLEN, TERM_REQ: TERM_REQ_HLEN } as const;
