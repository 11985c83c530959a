// The send batch of one connection: PDUs encoded by protocol/'s header writers into a reused slab, and the buffer
// lifetime after a socket write (slabs and snapshot buffers come back to their pools once the writer is done with them).
// Lives in connection/ because that lifetime follows the socket's writes; protocol/ only encodes into given memory.
import { Buffer } from 'node:buffer';
import {
  CAPSULE_RESP_HLEN,
  DATA_PDU_HLEN,
  DIGEST_SIZE,
  NO_DIGESTS,
  PDU_MAX_HEADER_BYTES,
  PduFlag,
  byteLength,
  crc32c,
  dataOffset,
  pduData,
  pduDataDigest,
  writeC2HDataHeader,
  writeCapsuleRespHeader,
  writePduHeader,
  type Pdu,
  type PduFraming,
  bufferView,
  headerView,
} from '../protocol/index.js';

/**
 * How PduBatch.add treats a payload. VIEW: sent as the caller's buffer, which must stay unchanged until the
 * batch is written. COPY: copied into the batch slab, under the same promise, so the copy may wait for take().
 * SNAPSHOT: copied now (the source may change once the call returns; a data digest computed now must match).
 */
export const C2HPayload = { VIEW: 0, COPY: 1, SNAPSHOT: 2 } as const;
export type C2HPayload = (typeof C2HPayload)[keyof typeof C2HPayload];

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
  /** The slab as the header writers' DataView (pdu-header.ts: one store per field). */
  #slabView!: DataView;
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
    const headLen = writePduHeader(this.#slab, this.#slabView, this.#pos, pdu, framing, datalen);
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
    let o = start + writeC2HDataHeader(this.#slab, this.#slabView, start, cid, 0, len, flags, framing);
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
    const n = writeCapsuleRespHeader(this.#slab, this.#slabView, o, hdgst, dw0, dw1, sqhd, sqid, cid, (status << 1) & 0xfffe);
    this.bytes += n;
    return n;
  }

  /** DDGST at the slab position (§3.6.1.4). */
  #digest(crc: number): void {
    this.#slabView.setUint32(this.#pos, crc, true);
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
    this.#slabView = headerView(b);
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
