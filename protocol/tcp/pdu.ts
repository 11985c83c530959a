// NVMe/TCP PDU shapes and their encoders — TCP Transport 1.0 §3.6.2. Headers come from one writer per PDU type
// (pdu-header.ts); encodePdu and encodePduInto lay out data and DDGST around them into caller-provided memory.
// Buffer lifetime after a socket write (slabs, pools) is connection/'s (connection/pdu-batch.ts): protocol/ does no I/O.
import { Buffer } from 'node:buffer';
import { DIGEST_SIZE, PduType } from './constants.js';
import { crc32c } from './crc32c.js';
import {
  NO_DIGESTS,
  PDU_MAX_HEADER_BYTES,
  c2hDataFlags,
  headerView,
  writeC2HDataHeader,
  writeCapsuleCmdHeader,
  writeCapsuleRespHeader,
  writeH2CDataHeader,
  writeIcReqHeader,
  writeIcRespHeader,
  writeR2THeader,
  writeTermReqHeader,
  type PduFraming,
} from './pdu-header.js';
import { rd16, rd32, wr32 } from '../le.js';

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
  /** Sending only: the CRC32C of `data` when the sender already has it (the encoder then skips computing it). */
  ddgst?: number;
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

/** The PDU shape whose `type` can be `T` (TermReqPdu covers both TermReq types). */
export type PduOf<T extends Pdu['type'], P extends Pdu = Pdu> = P extends unknown ? (T extends P['type'] ? P : never) : never;

/**
 * One typed handler per PDU kind, keyed by the CH type (TCP 1.0 §3.6.1 Figure 17): each entry receives its own PDU
 * shape. A receiver lists the kinds its role accepts; dispatchPdu reports the others as unhandled.
 */
export type PduHandlers = { readonly [T in Pdu['type']]?: (pdu: PduOf<T>) => void };

/** Call `handlers`' entry for `pdu`'s type; false when there is none (the caller decides: usually a sequence error). */
export function dispatchPdu(handlers: PduHandlers, pdu: Pdu): boolean {
  const f = handlers[pdu.type] as ((p: Pdu) => void) | undefined;
  if (f === undefined) return false;
  f(pdu);
  return true;
}

export { NO_DIGESTS, PDU_MAX_HEADER_BYTES, type PduFraming } from './pdu-header.js';

/** Bytes in `data` (a PDU's payload views). */
export function byteLength(data: readonly Buffer[]): number {
  let n = 0;
  for (const d of data) n += d.length;
  return n;
}

/**
 * Encode one PDU as `[header(+HDGST)(+pad), ...data views, DDGST?]`. The header comes from its type's writer
 * (pdu-header.ts, shared with encodePduInto and connection/'s PduBatch); payload buffers are passed through, never copied.
 */
export function encodePdu(pdu: Pdu, framing: PduFraming = NO_DIGESTS): Buffer[] {
  const data = pduData(pdu);
  const datalen = data === undefined ? 0 : byteLength(data);
  // allocUnsafe draws from the shared pool (Buffer.alloc does not); the writers zero reserved bytes and padding.
  const scratch = Buffer.allocUnsafe(PDU_MAX_HEADER_BYTES);
  const head = scratch.subarray(0, writePduHeader(scratch, headerView(scratch), 0, pdu, framing, datalen));
  if (datalen === 0 || data === undefined) return [head];
  const out: Buffer[] = [head];
  for (const d of data) if (d.length > 0) out.push(d);
  if (framing.ddgst) {
    const tail = Buffer.allocUnsafe(DIGEST_SIZE);
    wr32(tail, 0, pduDataDigest(pdu, data));
    out.push(tail);
  }
  return out;
}

/**
 * encodePdu for batching writers: the header (CH, PSH, HDGST, padding up to PDO) goes into `dst` at `off`, and the
 * return value is the number of bytes written. The caller sends the PDU's data views next and then, with data and
 * data digests on, the DDGST (`pduDataDigest`). `dst` needs `PDU_MAX_HEADER_BYTES` free bytes at `off`.
 */
export function encodePduInto(dst: Buffer, off: number, pdu: Pdu, framing: PduFraming = NO_DIGESTS): number {
  const data = pduData(pdu);
  const datalen = data === undefined ? 0 : byteLength(data);
  return writePduHeader(dst, headerView(dst), off, pdu, framing, datalen);
}

/** DDGST (§3.6.1.4): CRC32C of the data, or the one a C2HData sender already knows (from a cache of block CRCs). */
export function pduDataDigest(pdu: Pdu, data: readonly Buffer[]): number {
  if (pdu.type === PduType.C2H_DATA && pdu.ddgst !== undefined) return pdu.ddgst >>> 0;
  let crc = 0;
  for (const d of data) if (d.length > 0) crc = crc32c(d, crc);
  return crc;
}

/**
 * `pdu`'s header at `o` in caller-provided memory by its type's writer (pdu-header.ts); `datalen` bytes of data follow
 * it. Returns the header's length (CH, PSH, HDGST, padding up to PDO). The one header path of encodePdu, encodePduInto
 * and connection/'s PduBatch.
 */
export function writePduHeader(h: Buffer, v: DataView, o: number, pdu: Pdu, f: PduFraming, datalen: number): number {
  switch (pdu.type) {
    case PduType.C2H_DATA:
      return writeC2HDataHeader(h, v, o, pdu.cccid, pdu.datao, datalen, c2hDataFlags(pdu.last, pdu.success), f);
    case PduType.CAPSULE_RESP: {
      const c = pdu.cqe;
      return writeCapsuleRespHeader(h, v, o, f.hdgst, rd32(c, 0), rd32(c, 4), rd16(c, 8), rd16(c, 10), rd16(c, 12), rd16(c, 14));
    }
    case PduType.CAPSULE_CMD:
      return writeCapsuleCmdHeader(h, v, o, pdu.sqe, datalen, f);
    case PduType.H2C_DATA:
      return writeH2CDataHeader(h, v, o, pdu.cccid, pdu.ttag, pdu.datao, datalen, pdu.last, f);
    case PduType.R2T:
      return writeR2THeader(h, v, o, pdu.cccid, pdu.ttag, pdu.r2to, pdu.r2tl, f.hdgst);
    case PduType.IC_REQ:
      return writeIcReqHeader(h, v, o, pdu.pfv, pdu.hpda, pdu.dgst, pdu.maxr2t);
    case PduType.IC_RESP:
      return writeIcRespHeader(h, v, o, pdu.pfv, pdu.cpda, pdu.dgst, pdu.maxh2cdata);
    case PduType.H2C_TERM_REQ:
    case PduType.C2H_TERM_REQ:
      return writeTermReqHeader(h, v, o, pdu.type, pdu.fes, pdu.fei, pdu.errorData);
  }
}

/** The payload views of a PDU type that carries data (CapsuleCmd, H2CData, C2HData); undefined for the others. */
export function pduData(pdu: Pdu): Buffer[] | undefined {
  switch (pdu.type) {
    case PduType.CAPSULE_CMD:
    case PduType.H2C_DATA:
    case PduType.C2H_DATA:
      return pdu.data;
    default:
      return undefined;
  }
}

