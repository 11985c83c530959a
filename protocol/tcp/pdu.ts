// NVMe/TCP PDU shapes and their encoders — TCP Transport 1.0 §3.6.2. Headers come from one writer per PDU type
// (pdu-header.ts); encodePdu and PduBatch lay out data and DDGST around them.
import { Buffer } from 'node:buffer';
import { CAPSULE_CMD_HLEN, CH_SIZE, DATA_PDU_HLEN, DIGEST_SIZE, IC_PDU_SIZE, PduFlag, PduType, TERM_REQ_HLEN, dataOffset } from './constants.js';
import { crc32c } from './crc32c.js';
import {
  CAPSULE_RESP_HLEN,
  NO_DIGESTS,
  PDU_MAX_HEADER_BYTES,
  c2hDataFlags,
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

export { NO_DIGESTS, PDU_MAX_HEADER_BYTES, type PduFraming } from './pdu-header.js';

function byteLength(data: readonly Buffer[]): number {
  let n = 0;
  for (const d of data) n += d.length;
  return n;
}

/**
 * Encode one PDU as `[header(+HDGST)(+pad), ...data views, DDGST?]`. The header comes from its type's writer
 * (pdu-header.ts, shared with encodePduInto and PduBatch); payload buffers are passed through, never copied.
 */
export function encodePdu(pdu: Pdu, framing: PduFraming = NO_DIGESTS): Buffer[] {
  const data = pduData(pdu);
  const datalen = data === undefined ? 0 : byteLength(data);
  // allocUnsafe draws from the shared pool (Buffer.alloc does not); the writers zero reserved bytes and padding.
  const scratch = Buffer.allocUnsafe(PDU_MAX_HEADER_BYTES);
  const head = scratch.subarray(0, writeHeader(scratch, 0, pdu, framing, datalen));
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
  wr32(dst, off, pduDataDigest(pdu, pduData(pdu) ?? []));
  return DIGEST_SIZE;
}

/** DDGST (§3.6.1.4): CRC32C of the data, or the one a C2HData sender already knows (from a cache of block CRCs). */
export function pduDataDigest(pdu: Pdu, data: readonly Buffer[]): number {
  if (pdu.type === PduType.C2H_DATA && pdu.ddgst !== undefined) return pdu.ddgst >>> 0;
  let crc = 0;
  for (const d of data) if (d.length > 0) crc = crc32c(d, crc);
  return crc;
}

/** `pdu`'s header at `o` by its type's writer (pdu-header.ts); `datalen` bytes of data follow it. */
function writeHeader(h: Buffer, o: number, pdu: Pdu, f: PduFraming, datalen: number): number {
  switch (pdu.type) {
    case PduType.C2H_DATA:
      return writeC2HDataHeader(h, o, pdu.cccid, pdu.datao, datalen, c2hDataFlags(pdu.last, pdu.success), f);
    case PduType.CAPSULE_RESP: {
      const c = pdu.cqe;
      return writeCapsuleRespHeader(h, o, f.hdgst, rd32(c, 0), rd32(c, 4), rd16(c, 8), rd16(c, 10), rd16(c, 12), rd16(c, 14));
    }
    case PduType.CAPSULE_CMD:
      return writeCapsuleCmdHeader(h, o, pdu.sqe, datalen, f);
    case PduType.H2C_DATA:
      return writeH2CDataHeader(h, o, pdu.cccid, pdu.ttag, pdu.datao, datalen, pdu.last, f);
    case PduType.R2T:
      return writeR2THeader(h, o, pdu.cccid, pdu.ttag, pdu.r2to, pdu.r2tl, f.hdgst);
    case PduType.IC_REQ:
      return writeIcReqHeader(h, o, pdu.pfv, pdu.hpda, pdu.dgst, pdu.maxr2t);
    case PduType.IC_RESP:
      return writeIcRespHeader(h, o, pdu.pfv, pdu.cpda, pdu.dgst, pdu.maxh2cdata);
    case PduType.H2C_TERM_REQ:
    case PduType.C2H_TERM_REQ:
      return writeTermReqHeader(h, o, pdu.type, pdu.fes, pdu.fei, pdu.errorData);
  }
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
 * How PduBatch.add treats a payload. VIEW: sent as the caller's buffer, which must stay unchanged until the
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

  /**
   * Append one PDU: its header by its type's writer (as encodePdu), then its data as `payload` (C2HPayload) says. VIEW
   * sends the caller's buffers (copied into the slab only up to copyMax), COPY copies them into the slab at take(),
   * SNAPSHOT copies them now (into the slab or a pooled buffer), so that the data digest computed now matches the
   * bytes sent later even if the source buffer changes in between.
   */
  add(pdu: Pdu, framing: PduFraming = NO_DIGESTS, payload: C2HPayload = C2HPayload.VIEW): void {
    const data = pduData(pdu);
    const datalen = data === undefined ? 0 : byteLength(data);
    const snapshot = payload === C2HPayload.SNAPSHOT;
    const copy = datalen > 0 && (datalen <= this.copyMax || payload === C2HPayload.COPY || (snapshot && datalen <= SNAPSHOT_IN_SLAB_MAX));
    this.#room(PDU_MAX_HEADER_BYTES + (copy ? datalen : 0) + DIGEST_SIZE);
    const headLen = writeHeader(this.#slab, this.#pos, pdu, framing, datalen);
    this.#pos += headLen;
    this.bytes += headLen + datalen;
    if (datalen === 0 || data === undefined) return;
    let crcOf = data;
    if (copy && !snapshot) this.#deferCopies(data, datalen);
    else if (copy) this.#copyNow(data, datalen);
    else if (snapshot) crcOf = [this.#snapshot(data, datalen)];
    else this.#views(data);
    if (framing.ddgst) this.#digest(pduDataDigest(pdu, crcOf));
  }

  /**
   * The CapsuleResp of a completion from its CQE fields (status: the 15-bit status field, phase 0), so the
   * per-command completion neither builds nor copies a CQE.
   */
  addCapsuleRespCqe(dw0: number, dw1: number, sqhd: number, sqid: number, cid: number, status: number, framing: PduFraming = NO_DIGESTS): void {
    this.#room(PDU_MAX_HEADER_BYTES);
    this.#pos += this.#respCqe(this.#pos, dw0, dw1, sqhd, sqid, cid, status, framing.hdgst);
  }

  /**
   * The reply to a read of one payload: C2HData (LAST, and SUCCESS when `success`) with `data` copied at take() as
   * add()'s COPY, then, unless `success`, the CapsuleResp of addCapsuleRespCqe: the same bytes as those two calls with
   * one room check, because this is every 4 KiB read's reply (NVMe-TCP 1.0 §3.6.2.9, §3.6.2.7; docs/performance.md,
   * ninth pass). `data` is lent until take().
   */
  addReadReply(data: Buffer, success: boolean, dw0: number, dw1: number, sqhd: number, sqid: number, cid: number, status: number, framing: PduFraming = NO_DIGESTS): void {
    const len = data.length;
    // Exactly what the two writers below produce, so a reply that fits never rolls the slab over (#room copies pending
    // payloads early when it does).
    const hd = framing.hdgst ? DIGEST_SIZE : 0;
    const need = dataOffset(DATA_PDU_HLEN, framing.hdgst, framing.pda) + len + (framing.ddgst ? DIGEST_SIZE : 0) + (success ? 0 : CAPSULE_RESP_HLEN + hd);
    if (this.#slab.length - this.#pos < need) this.#room(need);
    const flags = success ? PduFlag.DATA_LAST | PduFlag.DATA_SUCCESS : PduFlag.DATA_LAST;
    const start = this.#pos;
    let o = start + writeC2HDataHeader(this.#slab, start, cid, 0, len, flags, framing);
    const n = this.#pendN;
    this.#pendSrc[n] = data;
    this.#pendAt[n] = o;
    this.#pendN = n + 1;
    o += len;
    this.copied += len;
    this.bytes += o - start;
    this.#pos = o;
    if (framing.ddgst) this.#digest(crc32c(data));
    if (!success) this.#pos += this.#respCqe(this.#pos, dw0, dw1, sqhd, sqid, cid, status, framing.hdgst);
  }

  /** CapsuleResp at `o` in the slab, counted in `bytes`; returns its length. */
  #respCqe(o: number, dw0: number, dw1: number, sqhd: number, sqid: number, cid: number, status: number, hdgst: boolean): number {
    const n = writeCapsuleRespHeader(this.#slab, o, hdgst, dw0, dw1, sqhd, sqid, cid, (status << 1) & 0xfffe);
    this.bytes += n;
    return n;
  }

  /** DDGST at the slab position (§3.6.1.4). */
  #digest(crc: number): void {
    wr32(this.#slab, this.#pos, crc);
    this.#pos += DIGEST_SIZE;
    this.bytes += DIGEST_SIZE;
  }

  /**
   * The caller lends `data` until the batch is written (as for payloads sent as views), so the copy into the slab
   * can wait for take(), where the whole batch's copies run back to back (#copyPending).
   */
  #deferCopies(data: readonly Buffer[], datalen: number): void {
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
  }

  /**
   * A snapshot small enough for the slab is copied now: its source may change as soon as the call returns.
   * TypedArray.set, not Buffer.copy: copy's JS wrapper re-derives bounds the room check already holds.
   */
  #copyNow(data: readonly Buffer[], datalen: number): void {
    const slab = this.#slab;
    let pos = this.#pos;
    for (const d of data) {
      slab.set(d, pos);
      pos += d.length;
    }
    this.#pos = pos;
    this.copied += datalen;
  }

  /** A larger snapshot goes into a pooled buffer of its own, sent as a view of it; returns that view. */
  #snapshot(data: readonly Buffer[], datalen: number): Buffer {
    const buf = datalen <= this.snapshotSize ? (this.#freeSnaps.pop() ?? Buffer.allocUnsafeSlow(this.snapshotSize)) : Buffer.allocUnsafeSlow(datalen);
    let o = 0;
    for (const d of data) o += d.copy(buf, o);
    const snap = buf.subarray(0, datalen);
    this.#held.push(buf);
    this.#cut();
    this.#chunks.push(snap);
    return snap;
  }

  /** Payloads sent as the caller's buffers, between slab chunks. */
  #views(data: readonly Buffer[]): void {
    for (const d of data) {
      if (d.length === 0) continue;
      this.#cut();
      this.#chunks.push(d);
    }
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
