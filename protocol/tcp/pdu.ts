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
import { wr16, wr32 } from '../le.js';
import { bufferView } from '../view.js';

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
 * HDGSTF/DDGSTF and digests (together with encodePduInto, which shares the code); payload buffers are passed
 * through, never copied.
 */
export function encodePdu(pdu: Pdu, framing: PduFraming = NO_DIGESTS): Buffer[] {
  const data = pduData(pdu);
  const datalen = data === undefined ? 0 : byteLength(data);
  // allocUnsafe draws from the shared pool (Buffer.alloc does not); writeHeader zeroes reserved bytes and padding.
  const head = Buffer.allocUnsafe(headerBytes(pdu, framing, datalen));
  writeHeader(head, 0, pdu, framing, datalen);
  if (datalen === 0 || data === undefined) return [head];
  const out: Buffer[] = [head];
  for (const d of data) if (d.length > 0) out.push(d);
  if (framing.ddgst) {
    const tail = Buffer.allocUnsafe(DIGEST_SIZE);
    tail.writeUInt32LE(pduDataDigest(pdu, data), 0);
    out.push(tail);
  }
  return out;
}

/**
 * encodePdu for batching writers: the header (CH, PSH, HDGST, padding up to PDO) goes into `dst` at `off`, and the
 * return value is the number of bytes written. The caller sends the PDU's data views next and then, when
 * `pduHasDataDigest(pdu, framing)`, the four bytes `encodeDataDigestInto` writes. `dst` needs
 * `PDU_MAX_HEADER_BYTES` free bytes at `off`.
 */
export function encodePduInto(dst: Buffer, off: number, pdu: Pdu, framing: PduFraming = NO_DIGESTS): number {
  const data = pduData(pdu);
  const datalen = data === undefined ? 0 : byteLength(data);
  return writeHeader(dst, off, pdu, framing, datalen);
}

/** Whether a DDGST follows the data of `pdu` under `framing` (data present and data digests on, §3.6.1.4). */
export function pduHasDataDigest(pdu: Pdu, framing: PduFraming): boolean {
  if (!framing.ddgst) return false;
  const data = pduData(pdu);
  return data !== undefined && byteLength(data) > 0;
}

/** Write the DDGST of `pdu`'s data at `dst[off..off+4]`; returns 4. */
export function encodeDataDigestInto(dst: Buffer, off: number, pdu: Pdu): number {
  dst.writeUInt32LE(pduDataDigest(pdu, pduData(pdu) ?? []), off);
  return DIGEST_SIZE;
}

/** Largest header encodePduInto writes (ICReq/ICResp 128 bytes; TermReq 24 + 128 bytes of error data). */
export const PDU_MAX_HEADER_BYTES = TERM_REQ_HLEN + TERM_REQ_MAX_DATA;

function pduDataDigest(pdu: Pdu, data: readonly Buffer[]): number {
  // A data digest the sender already knows (C2HData from a cache of block CRCs) is used as is.
  if (pdu.type === PduType.C2H_DATA && pdu.ddgst !== undefined) return pdu.ddgst >>> 0;
  let crc = 0;
  for (const d of data) if (d.length > 0) crc = crc32c(d, crc);
  return crc;
}

function isTermReq(pdu: Pdu): pdu is TermReqPdu {
  return pdu.type === PduType.H2C_TERM_REQ || pdu.type === PduType.C2H_TERM_REQ;
}

/** Bytes of the header part: CH+PSH(+HDGST)(+pad to PDO) when data follows; the whole PDU for TermReq. */
function headerBytes(pdu: Pdu, framing: PduFraming, datalen: number): number {
  const info = PDU_INFO[pdu.type];
  if (isTermReq(pdu)) return info.hlen + Math.min(pdu.errorData.length, TERM_REQ_MAX_DATA);
  const hdgst = info.hdgst && framing.hdgst;
  return datalen > 0 ? dataOffset(info.hlen, hdgst, framing.pda) : info.hlen + (hdgst ? DIGEST_SIZE : 0);
}

function writeHeader(head: Buffer, o: number, pdu: Pdu, framing: PduFraming, datalen: number): number {
  // The per-command replies have monomorphic writers (PduBatch calls them directly); same bytes as below.
  if (pdu.type === PduType.C2H_DATA) return writeC2HDataHeader(head, o, pdu, framing, datalen);
  if (pdu.type === PduType.CAPSULE_RESP) return writeCapsuleRespHeader(head, o, pdu, framing);
  if (pdu.type === PduType.CAPSULE_CMD) return writeCapsuleCmdHeader(head, o, pdu, framing, datalen);
  const info = PDU_INFO[pdu.type];
  const hlen = info.hlen;
  const hdgst = info.hdgst && framing.hdgst;
  const hasData = datalen > 0;
  const ddgst = hasData && framing.ddgst;
  const pdo = hasData ? dataOffset(hlen, hdgst, framing.pda) : 0;
  const headLen = headerBytes(pdu, framing, datalen);
  let plen = headLen + datalen + (ddgst ? DIGEST_SIZE : 0);
  if (isTermReq(pdu)) plen = headLen;
  // Reserved bytes and padding must be zero.
  head.fill(0, o, o + headLen);
  let flags = (hdgst ? PduFlag.HDGSTF : 0) | (ddgst ? PduFlag.DDGSTF : 0);
  switch (pdu.type) {
    case PduType.IC_REQ:
      head.writeUInt16LE(pdu.pfv, o + 8);
      head[o + 10] = pdu.hpda;
      head[o + 11] = pdu.dgst;
      head.writeUInt32LE(pdu.maxr2t >>> 0, o + 12);
      break;
    case PduType.IC_RESP:
      head.writeUInt16LE(pdu.pfv, o + 8);
      head[o + 10] = pdu.cpda;
      head[o + 11] = pdu.dgst;
      head.writeUInt32LE(pdu.maxh2cdata >>> 0, o + 12);
      break;
    case PduType.H2C_TERM_REQ:
    case PduType.C2H_TERM_REQ:
      head.writeUInt16LE(pdu.fes, o + 8);
      head.writeUInt32LE(pdu.fei >>> 0, o + 10);
      pdu.errorData.copy(head, o + TERM_REQ_HLEN, 0, Math.min(pdu.errorData.length, TERM_REQ_MAX_DATA));
      break;
    case PduType.H2C_DATA:
      wr16(head, o + 8, pdu.cccid);
      wr16(head, o + 10, pdu.ttag);
      wr32(head, o + 12, pdu.datao);
      wr32(head, o + 16, datalen);
      if (pdu.last) flags |= PduFlag.DATA_LAST;
      break;
    case PduType.R2T:
      wr16(head, o + 8, pdu.cccid);
      wr16(head, o + 10, pdu.ttag);
      wr32(head, o + 12, pdu.r2to);
      wr32(head, o + 16, pdu.r2tl);
      break;
  }
  head[o] = pdu.type;
  head[o + 1] = flags;
  head[o + 2] = hlen;
  head[o + 3] = pdo;
  wr32(head, o + 4, plen);
  if (hdgst) writeHeaderDigest(head, o, hlen);
  return headLen;
}

/** C2HData header (§3.6.2.9): CH, CCCID, DATAO, DATAL, reserved; HDGST and padding up to PDO. */
function writeC2HDataHeader(head: Buffer, o: number, pdu: C2HDataPdu, framing: PduFraming, datalen: number): number {
  const hdgst = framing.hdgst;
  const pdo = pdoOf(DATA_PDU_HLEN, framing, datalen);
  const headLen = headLenOf(DATA_PDU_HLEN, hdgst, pdo);
  const ddgst = datalen > 0 && framing.ddgst;
  const flags = (hdgst ? PduFlag.HDGSTF : 0) | (ddgst ? PduFlag.DDGSTF : 0) | (pdu.last ? PduFlag.DATA_LAST : 0) | (pdu.success ? PduFlag.DATA_SUCCESS : 0);
  head[o] = PduType.C2H_DATA;
  head[o + 1] = flags;
  head[o + 2] = DATA_PDU_HLEN;
  head[o + 3] = pdo;
  wr32(head, o + 4, headLen + datalen + (ddgst ? DIGEST_SIZE : 0));
  wr16(head, o + 8, pdu.cccid);
  head[o + 10] = 0;
  head[o + 11] = 0;
  wr32(head, o + 12, pdu.datao);
  wr32(head, o + 16, datalen);
  wr32(head, o + 20, 0);
  return finishHeader(head, o, DATA_PDU_HLEN, hdgst, headLen);
}

/** PDO (§3.6.1.2): where data starts, after the header, its HDGST and padding to the alignment asked for; 0 without data. */
function pdoOf(hlen: number, framing: PduFraming, datalen: number): number {
  return datalen > 0 ? dataOffset(hlen, framing.hdgst, framing.pda) : 0;
}

/** Bytes before the data: up to PDO when there is data, else the header and its HDGST. */
function headLenOf(hlen: number, hdgst: boolean, pdo: number): number {
  return pdo > 0 ? pdo : hlen + (hdgst ? DIGEST_SIZE : 0);
}

/** HDGST after the `hlen` header bytes, then zero padding up to `headLen`; returns `headLen`. */
function finishHeader(head: Buffer, o: number, hlen: number, hdgst: boolean, headLen: number): number {
  if (hdgst) writeHeaderDigest(head, o, hlen);
  const padFrom = hlen + (hdgst ? DIGEST_SIZE : 0);
  if (headLen > padFrom) head.fill(0, o + padFrom, o + headLen);
  return headLen;
}

/** The SQE a CapsuleCmd carries after its CH (§3.6.2.6). */
const SQE_BYTES = CAPSULE_CMD_HLEN - CH_SIZE;

/**
 * CapsuleCmd header (§3.6.2.6): CH and the 64-byte SQE, then HDGST and padding up to PDO when in-capsule data
 * follows. The host's per-command writer: byte stores and one TypedArray.set, no argument-checked fill/copy.
 */
function writeCapsuleCmdHeader(head: Buffer, o: number, pdu: CapsuleCmdPdu, framing: PduFraming, datalen: number): number {
  const hdgst = framing.hdgst;
  const pdo = pdoOf(CAPSULE_CMD_HLEN, framing, datalen);
  const headLen = headLenOf(CAPSULE_CMD_HLEN, hdgst, pdo);
  const ddgst = datalen > 0 && framing.ddgst;
  head[o] = PduType.CAPSULE_CMD;
  head[o + 1] = (hdgst ? PduFlag.HDGSTF : 0) | (ddgst ? PduFlag.DDGSTF : 0);
  head[o + 2] = CAPSULE_CMD_HLEN;
  head[o + 3] = pdo;
  wr32(head, o + 4, headLen + datalen + (ddgst ? DIGEST_SIZE : 0));
  const sqe = pdu.sqe;
  if (sqe.length === SQE_BYTES) head.set(sqe, o + CH_SIZE);
  else {
    head.set(sqe.length > SQE_BYTES ? sqe.subarray(0, SQE_BYTES) : sqe, o + CH_SIZE);
    if (sqe.length < SQE_BYTES) head.fill(0, o + CH_SIZE + sqe.length, o + CAPSULE_CMD_HLEN);
  }
  return finishHeader(head, o, CAPSULE_CMD_HLEN, hdgst, headLen);
}

/** HDGST (§3.6.1.3): CRC32C of the `hlen` header bytes at `o`, written right after them. */
function writeHeaderDigest(head: Buffer, o: number, hlen: number): void {
  wr32(head, o + hlen, crc32c(head.subarray(o, o + hlen)));
}

/** CapsuleResp CH (§3.6.2.7); returns the PDU length (header and HDGST). The CQE follows at o + CH_SIZE. */
function writeCapsuleRespCh(head: Buffer, o: number, hdgst: boolean): number {
  const headLen = CAPSULE_RESP_HLEN + (hdgst ? DIGEST_SIZE : 0);
  head[o] = PduType.CAPSULE_RESP;
  head[o + 1] = hdgst ? PduFlag.HDGSTF : 0;
  head[o + 2] = CAPSULE_RESP_HLEN;
  head[o + 3] = 0;
  wr32(head, o + 4, headLen);
  return headLen;
}

/** The 16-byte CQE (NVMe Base 2.0 §4.2.2) at `o`: DW0, DW1, SQHD, SQID, CID, and the 15-bit status with phase 0. */
function writeCqeFields(head: Buffer, o: number, dw0: number, dw1: number, sqhd: number, sqid: number, cid: number, status: number): void {
  wr32(head, o, dw0);
  wr32(head, o + 4, dw1);
  wr16(head, o + 8, sqhd);
  wr16(head, o + 10, sqid);
  wr16(head, o + 12, cid);
  wr16(head, o + 14, (status << 1) & 0xfffe);
}
const CQE_BYTES = 16;

/** CapsuleResp header (§3.6.2.7): CH and the 16-byte CQE, then HDGST. */
function writeCapsuleRespHeader(head: Buffer, o: number, pdu: CapsuleRespPdu, framing: PduFraming): number {
  const headLen = writeCapsuleRespCh(head, o, framing.hdgst);
  pdu.cqe.copy(head, o + CH_SIZE, 0, 16);
  if (framing.hdgst) writeHeaderDigest(head, o, CAPSULE_RESP_HLEN);
  return headLen;
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

/**
 * How PduBatch.addC2HData treats a payload. VIEW: sent as the caller's buffer, which must stay unchanged until the
 * batch is written. COPY: copied into the batch slab, under the same promise, so the copy may wait for take().
 * SNAPSHOT: copied now (the source may change once the call returns; a data digest computed now must match).
 */
export const C2HPayload = { VIEW: 0, COPY: 1, SNAPSHOT: 2 } as const;
export type C2HPayload = (typeof C2HPayload)[keyof typeof C2HPayload];

/** Header-only sizes, exported for layout tests and callers that size buffers. */
export const PduSize = { CH: CH_SIZE, IC: IC_PDU_SIZE, CAPSULE_CMD: CAPSULE_CMD_HLEN, DATA: DATA_PDU_HLEN, TERM_REQ: TERM_REQ_HLEN } as const;

/** Snapshots up to this size share the batch slab; larger ones use a pooled buffer of their own. */
const SNAPSHOT_IN_SLAB_MAX = 16 * 1024;
/** Free buffers kept per pool (slabs, snapshots): bounds the memory a busy connection keeps. */
const POOL_KEEP = 32;
const INITIAL_SLAB = 16 * 1024;
/** Placeholder for a consumed deferred-copy source (keeps the array of one element kind, releases the source). */
const EMPTY = Buffer.alloc(0);

/**
 * Gathers the PDUs of one send batch (everything produced by one received chunk) for a single corked write:
 * headers, digests and data up to `copyMax` bytes go into a reused slab, larger payloads are passed as views
 * (docs/performance.md, Baseline facts: per-PDU writes cost 6×, a header allocation per PDU shows in profiles). Consecutive slab bytes
 * form one chunk, so a batch of 4 KiB reads becomes ~2 chunks per read instead of 3 allocations and 3 writes.
 *
 * Buffers are reused only once the writer is done with them: after writing take()'s chunks the caller calls
 * recycle(stillReferenced). With `false` (a socket write libuv completed synchronously: `writableLength === 0`)
 * everything is reusable at once; with `true` it gets a release function to call from the write callback.
 * Fresh large buffers are expensive (a 128 KiB allocation is an mmap plus page faults), hence the pools.
 */
const CAPSULE_RESP_HLEN = PDU_INFO[PduType.CAPSULE_RESP].hlen;

export class PduBatch {
  #slab: Buffer;
  /** The slab's memory and offset in it (#cut makes its views from these: `Buffer.subarray` reads `.buffer` per call). */
  #slabMem!: ArrayBufferLike;
  #slabOff = 0;
  #pos = 0;
  #segStart = 0;
  #chunks: Buffer[] = [];
  readonly #slabSize: number;
  /** Buffers other than the current slab that this batch's chunks point into. */
  #held: Buffer[] = [];
  readonly #freeSlabs: Buffer[] = [];
  readonly #freeSnaps: Buffer[] = [];
  /** Deferred payload copies into the current slab (#copyPending): sources and their slab offsets. */
  readonly #pendSrc: Buffer[] = [];
  readonly #pendAt: number[] = [];
  #pendN = 0;
  /** Where the touch loop of #copyPending leaves its loads, so that they are not optimized away. */
  #touched = 0;
  /** Bytes added since the last take(). */
  bytes = 0;
  /** Payload bytes copied into the slab since the last take() (for an adaptive copy policy). */
  copied = 0;

  constructor(
    slabSize = 256 * 1024,
    readonly copyMax = 0,
    /** Size of pooled snapshot buffers (the largest C2HData payload that is snapshotted without an allocation). */
    readonly snapshotSize = 128 * 1024,
  ) {
    this.#slabSize = Math.max(slabSize, PDU_MAX_HEADER_BYTES + DIGEST_SIZE);
    // Small at first (an idle or short-lived connection should not cost a large buffer); grows when a batch overflows.
    this.#slab = this.#useSlab(Buffer.allocUnsafeSlow(Math.min(this.#slabSize, INITIAL_SLAB)));
  }

  get empty(): boolean {
    return this.bytes === 0;
  }

  /** Append one PDU, encoded by the same code as encodePdu. */
  add(pdu: Pdu, framing: PduFraming = NO_DIGESTS): void {
    const data = pduData(pdu);
    const datalen = data === undefined ? 0 : byteLength(data);
    const copy = datalen > 0 && datalen <= this.copyMax;
    const ddgst = datalen > 0 && framing.ddgst;
    this.#room(PDU_MAX_HEADER_BYTES + (copy ? datalen : 0) + DIGEST_SIZE);
    const slab = this.#slab;
    const headLen = writeHeader(slab, this.#pos, pdu, framing, datalen);
    this.#pos += headLen;
    this.bytes += headLen + datalen;
    if (datalen === 0 || data === undefined) return;
    for (const d of data) {
      if (d.length === 0) continue;
      if (copy) {
        d.copy(slab, this.#pos);
        this.#pos += d.length;
      } else {
        this.#cut();
        this.#chunks.push(d);
      }
    }
    if (ddgst) {
      wr32(slab, this.#pos, pduDataDigest(pdu, data));
      this.#pos += DIGEST_SIZE;
      this.bytes += DIGEST_SIZE;
    }
  }

  /**
   * add() for the per-read reply: C2HData with its payload (monomorphic path, same encoding). `payload` (C2HPayload):
   * VIEW sends the caller's buffers (copied into the slab only up to copyMax), COPY copies them into the slab at
   * take(), SNAPSHOT copies them now (into the slab or a pooled buffer), so that the data digest computed now matches
   * the bytes sent later even if the source buffer changes in between.
   */
  addC2HData(pdu: C2HDataPdu, framing: PduFraming = NO_DIGESTS, payload: C2HPayload = C2HPayload.VIEW): void {
    const data = pdu.data;
    const datalen = byteLength(data);
    const snapshot = payload === C2HPayload.SNAPSHOT;
    const copy = datalen > 0 && (datalen <= this.copyMax || payload === C2HPayload.COPY || (snapshot && datalen <= SNAPSHOT_IN_SLAB_MAX));
    this.#room(PDU_MAX_HEADER_BYTES + (copy ? datalen : 0) + DIGEST_SIZE);
    const headLen = writeC2HDataHeader(this.#slab, this.#pos, pdu, framing, datalen);
    this.#pos += headLen;
    this.bytes += headLen + datalen;
    if (datalen === 0) return;
    let crcOf = data;
    if (copy && !snapshot) {
      // The caller lends `data` until the batch is written (as for payloads sent as views), so the copy can wait for
      // take(), where the whole batch's copies run back to back (#copyPending).
      let pos = this.#pos;
      let n = this.#pendN;
      for (const d of data) {
        if (d.length === 0) continue;
        this.#pendSrc[n] = d;
        this.#pendAt[n] = pos;
        n++;
        pos += d.length;
      }
      this.#pendN = n;
      this.#pos = pos;
      this.copied += datalen;
    } else if (copy) {
      // A snapshot is copied now: its source may change as soon as this call returns.
      // TypedArray.set, not Buffer.copy: copy's JS wrapper re-derives bounds the room check above already holds.
      const slab = this.#slab;
      let pos = this.#pos;
      for (const d of data) {
        slab.set(d, pos);
        pos += d.length;
      }
      this.#pos = pos;
      this.copied += datalen;
    } else if (snapshot) {
      const buf = datalen <= this.snapshotSize ? (this.#freeSnaps.pop() ?? Buffer.allocUnsafeSlow(this.snapshotSize)) : Buffer.allocUnsafeSlow(datalen);
      let o = 0;
      for (const d of data) o += d.copy(buf, o);
      const snap = buf.subarray(0, datalen);
      this.#held.push(buf);
      this.#cut();
      this.#chunks.push(snap);
      crcOf = [snap];
    } else {
      for (const d of data) {
        if (d.length === 0) continue;
        this.#cut();
        this.#chunks.push(d);
      }
    }
    if (framing.ddgst) {
      wr32(this.#slab, this.#pos, pduDataDigest(pdu, crcOf));
      this.#pos += DIGEST_SIZE;
      this.bytes += DIGEST_SIZE;
    }
  }

  /** add() for a CapsuleResp (monomorphic path, same encoding). */
  addCapsuleResp(pdu: CapsuleRespPdu, framing: PduFraming = NO_DIGESTS): void {
    this.#room(PDU_MAX_HEADER_BYTES);
    const n = writeCapsuleRespHeader(this.#slab, this.#pos, pdu, framing);
    this.#pos += n;
    this.bytes += n;
  }

  /**
   * addCapsuleResp with the CQE fields written straight into the slab (NVMe Base 2.0 §4.2.2: DW0, DW1, SQHD, SQID,
   * CID, status with the phase bit 0), so the per-command completion neither builds nor copies a CQE. `status` is the
   * 15-bit status field (wire value status << 1), as in encodeCqeInto.
   */
  addCapsuleRespCqe(dw0: number, dw1: number, sqhd: number, sqid: number, cid: number, status: number, framing: PduFraming = NO_DIGESTS): void {
    this.#room(PDU_MAX_HEADER_BYTES);
    const head = this.#slab;
    const o = this.#pos;
    const headLen = writeCapsuleRespCh(head, o, framing.hdgst);
    writeCqeFields(head, o + CH_SIZE, dw0, dw1, sqhd, sqid, cid, status);
    if (framing.hdgst) writeHeaderDigest(head, o, CAPSULE_RESP_HLEN);
    this.#pos = o + headLen;
    this.bytes += headLen;
  }

  /**
   * The reply to a read of one payload when no digest and no padding applies (PDA 0): C2HData (LAST, and SUCCESS
   * when `success`) with `data` copied at take() as addC2HData's COPY, then, unless `success`, the CapsuleResp of
   * addCapsuleRespCqe. The same bytes as those two calls; one room check and direct stores, because this is every
   * 4 KiB read's reply (NVMe-TCP 1.0 §3.6.2.9, §3.6.2.7; docs/performance.md, ninth pass). `data` is lent until take().
   */
  addReadReply(data: Buffer, success: boolean, dw0: number, dw1: number, sqhd: number, sqid: number, cid: number, status: number): void {
    const len = data.length;
    const plen = DATA_PDU_HLEN + len;
    const all = success ? plen : plen + CAPSULE_RESP_HLEN;
    if (this.#slab.length - this.#pos < all) this.#room(all);
    const head = this.#slab;
    let o = this.#pos;
    head[o] = PduType.C2H_DATA;
    head[o + 1] = success ? PduFlag.DATA_LAST | PduFlag.DATA_SUCCESS : PduFlag.DATA_LAST;
    head[o + 2] = DATA_PDU_HLEN;
    head[o + 3] = DATA_PDU_HLEN;
    wr32(head, o + 4, plen);
    wr16(head, o + 8, cid);
    head[o + 10] = 0;
    head[o + 11] = 0;
    wr32(head, o + 12, 0);
    wr32(head, o + 16, len);
    wr32(head, o + 20, 0);
    o += DATA_PDU_HLEN;
    const n = this.#pendN;
    this.#pendSrc[n] = data;
    this.#pendAt[n] = o;
    this.#pendN = n + 1;
    o += len;
    this.copied += len;
    if (!success) {
      o += writeCapsuleRespCh(head, o, false);
      writeCqeFields(head, o - CQE_BYTES, dw0, dw1, sqhd, sqid, cid, status);
    }
    this.#pos = o;
    this.bytes += all;
  }

  /** The chunks to write, in order; valid until the next add(). */
  take(): Buffer[] {
    if (this.#pendN > 0) this.#copyPending();
    this.#cut();
    this.bytes = 0;
    this.copied = 0;
    return this.#chunks;
  }

  /**
   * After writing take()'s chunks. `stillReferenced` false: the writer copied everything, all buffers are reusable
   * now (returns undefined). true: returns the function to call once the writer is done with these chunks.
   */
  recycle(stillReferenced: boolean): (() => void) | undefined {
    // A fresh list rather than `length = 0`, which is a runtime call (JSArray::SetLength) per batch.
    this.#chunks = [];
    const held = this.#held;
    if (!stillReferenced) {
      this.#pos = 0;
      this.#segStart = 0;
      if (held.length > 0) this.#release(held);
      return undefined;
    }
    // The current slab keeps filling after the referenced bytes; it is handed back when a later batch retires it.
    if (held.length === 0) return undefined;
    this.#held = [];
    return () => this.#release(held);
  }

  #release(bufs: Buffer[]): void {
    for (const b of bufs) {
      if (b.length === this.#slabSize) {
        if (b !== this.#slab && this.#freeSlabs.length < POOL_KEEP) this.#freeSlabs.push(b);
      } else if (b.length === this.snapshotSize && this.#freeSnaps.length < POOL_KEEP) this.#freeSnaps.push(b);
    }
    bufs.length = 0;
  }

  /**
   * The deferred payload copies into the current slab. Payloads of random reads are cold (random blocks of a large
   * namespace), and a copy mostly waits for its first TLB walk and cache lines: loading one byte of each page of every
   * source first lets those misses of the whole batch overlap instead of each copy stalling on its own.
   */
  #copyPending(): void {
    const n = this.#pendN;
    const src = this.#pendSrc;
    const at = this.#pendAt;
    let t = 0;
    for (let i = 0; i < n; i++) {
      const s = src[i] as Buffer;
      t ^= (s[0] as number) ^ (s[s.length - 1] as number);
    }
    this.#touched = t;
    const slab = this.#slab;
    for (let i = 0; i < n; i++) {
      slab.set(src[i] as Buffer, at[i] as number);
      src[i] = EMPTY;
    }
    this.#pendN = 0;
  }

  #cut(): void {
    if (this.#pos > this.#segStart) this.#chunks.push(bufferView(this.#slabMem, this.#slabOff + this.#segStart, this.#pos - this.#segStart));
    this.#segStart = this.#pos;
  }

  #useSlab(b: Buffer): Buffer {
    this.#slabMem = b.buffer;
    this.#slabOff = b.byteOffset;
    return b;
  }

  #room(n: number): void {
    if (this.#slab.length - this.#pos >= n) return;
    if (this.#pendN > 0) this.#copyPending();
    this.#cut();
    // The old slab stays referenced by this batch's chunks until they are written.
    this.#held.push(this.#slab);
    const grown = Math.min(this.#slabSize, this.#slab.length * 4);
    this.#slab = this.#useSlab(n <= grown ? (this.#freeSlabs.pop() ?? Buffer.allocUnsafeSlow(grown)) : Buffer.allocUnsafeSlow(n));
    this.#pos = 0;
    this.#segStart = 0;
  }
}
