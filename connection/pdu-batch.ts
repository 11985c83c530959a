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
  PduType,
  byteLength,
  crc32c,
  dataOffset,
  pduData,
  pduDataDigest,
  writeC2HDataHeader,
  writeCapsuleRespHeader,
  writePduHeader,
  Lent,
  type Pdu,
  type PduFraming,
  bufferView,
  headerView,
} from '../protocol/index.js';

/**
 * A command's completion as the send path takes it (the target core's Request is one): CQE fields (`status` the
 * 15-bit status field), and the controller-to-host data with its lifetime and, when the backend gave it, the CRC32C of
 * all of it (which also promises the data never changes: copy-on-write).
 */
export interface Completion {
  readonly cid: number;
  readonly status: number;
  readonly dw0: number;
  readonly dw1: number;
  readonly sqhd: number;
  readonly out: readonly Buffer[] | undefined;
  readonly outLent: Lent;
  readonly outCrc: number | undefined;
}

/** How a payload is sent: copied into the slab at take(), copied now, or as the caller's buffers. */
const DEFER = 0;
const SNAP = 1;
const VIEW = 2;

/** Snapshots up to this size share the batch slab; larger ones use a pooled buffer of their own. */
const SNAPSHOT_IN_SLAB_MAX = 16 * 1024;
/** Free buffers kept per pool (slabs, snapshots): bounds the memory a busy connection keeps. */
const POOL_KEEP = 32;
const INITIAL_SLAB = 16 * 1024;
const LAST_SUCCESS = PduFlag.DATA_LAST | PduFlag.DATA_SUCCESS;
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
    /** Largest payload copied into the slab (lent STABLE or TASK); larger ones go out as views or snapshots. */
    readonly copyMax = 0,
    /** Size of pooled snapshot buffers (the largest C2HData payload that is snapshotted without an allocation). */
    readonly snapshotSize = 128 * 1024,
    /**
     * STABLE payload bytes per batch copied into the slab before the rest go out as views: up to about QD32 of 4 KiB
     * reads a batch then leaves as one contiguous write, and CPU per I/O at deeper queues does not grow with copying
     * every payload (docs/performance.md, third pass). TASK payloads are copied whatever the budget (they cannot wait
     * for the socket).
     */
    readonly copyBudget = Infinity,
  ) {
    this.#slabSize = Math.max(slabSize, PDU_MAX_HEADER_BYTES + DIGEST_SIZE);
    // Small at first (an idle or short-lived connection should not cost a large buffer); grows when a batch overflows.
    this.#slab = this.#useSlab(Buffer.allocUnsafeSlow(Math.min(this.#slabSize, INITIAL_SLAB)));
  }

  get empty(): boolean {
    return this.bytes === 0;
  }

  /**
   * Append one PDU: its header by its type's writer (as encodePdu), then its data as its lifetime (`lent`) and the
   * copy policy say (#mode): copied into the slab at take(), copied now (so that a data digest computed now matches
   * the bytes sent later), or sent as the caller's buffers.
   */
  add(pdu: Pdu, framing: PduFraming = NO_DIGESTS, lent: Lent = Lent.STABLE): void {
    const data = pduData(pdu);
    const datalen = data === undefined ? 0 : byteLength(data);
    const mode = this.#mode(datalen, lent);
    const inSlab = mode === DEFER || (mode === SNAP && datalen <= SNAPSHOT_IN_SLAB_MAX);
    this.#room(PDU_MAX_HEADER_BYTES + (inSlab ? datalen : 0) + DIGEST_SIZE);
    const headLen = writePduHeader(this.#slab, this.#slabView, this.#pos, pdu, framing, datalen);
    this.#pos += headLen;
    this.bytes += headLen + datalen;
    if (datalen === 0 || data === undefined) return;
    const crcOf = this.#payload(data, datalen, mode);
    if (framing.ddgst) this.#digest(pduDataDigest(pdu, crcOf));
  }

  /**
   * A command's completion, the one writer of the controller's per-command reply (NVMe-TCP 1.0 §3.6.2.9, §3.6.2.7):
   * its data (when `status` is 0) as C2HData PDUs of at most `c2hMax` bytes, the last with SUCCESS when SQ flow
   * control is disabled and Dwords 0 and 1 are 0, and then, unless SUCCESS replaced it, the CapsuleResp written from
   * the record's fields (no CQE built or copied). A lone payload that fits one PDU is written with one room check:
   * every 4 KiB read's reply (docs/performance.md, ninth pass).
   */
  addCompletion(c: Completion, sqid: number, sqflowDisabled: boolean, framing: PduFraming, c2hMax: number): void {
    const out = c.status === 0 ? c.out : undefined;
    const success = out !== undefined && sqflowDisabled && c.dw0 === 0 && c.dw1 === 0;
    const hd = framing.hdgst ? DIGEST_SIZE : 0;
    if (out !== undefined) {
      let total = 0;
      for (const b of out) total += b.length;
      // Without a CRC that promises the bytes stay, the digest computed now must cover the bytes sent: a snapshot.
      const lent = framing.ddgst && c.outCrc === undefined ? Lent.CALL : c.outLent;
      const mode = this.#mode(total, lent);
      if (total <= c2hMax) {
        const inSlab = mode === DEFER || (mode === SNAP && total <= SNAPSHOT_IN_SLAB_MAX);
        const need = dataOffset(DATA_PDU_HLEN, framing.hdgst, framing.pda) + (inSlab ? total : 0) + DIGEST_SIZE + CAPSULE_RESP_HLEN + hd;
        if (this.#slab.length - this.#pos < need) this.#room(need);
        this.#c2hData(c.cid, 0, out, total, success ? LAST_SUCCESS : PduFlag.DATA_LAST, mode, framing, c.outCrc);
      } else this.#c2hSplit(c.cid, out, total, success, mode, framing, c2hMax);
    }
    if (success) return;
    if (this.#slab.length - this.#pos < CAPSULE_RESP_HLEN + hd) this.#room(CAPSULE_RESP_HLEN + hd);
    const n = writeCapsuleRespHeader(this.#slab, this.#slabView, this.#pos, framing.hdgst, c.dw0, c.dw1, c.sqhd, sqid, c.cid, (c.status << 1) & 0xfffe);
    this.#pos += n;
    this.bytes += n;
  }

  /**
   * Bytes already laid out as PDUs (a fault rule's reshaped or corrupted reply, docs/faults.md), sent as they are after
   * what is batched; the caller lends them until the batch is written. Not on any unfaulted path.
   */
  addBytes(bufs: readonly Buffer[]): void {
    for (const b of bufs) this.bytes += b.length;
    this.#views(bufs);
  }

  /**
   * The copy policy: a payload up to copyMax is copied into the slab at take() when lent STABLE within the batch's
   * copy budget, or lent TASK; else one lent beyond this call is sent as a view, and one lent less long is copied now.
   */
  #mode(len: number, lent: Lent): number {
    if (len === 0) return VIEW;
    if (lent !== Lent.CALL && len <= this.copyMax && (lent === Lent.TASK || this.copied + len <= this.copyBudget)) return DEFER;
    return lent === Lent.STABLE ? VIEW : SNAP;
  }

  /** The payload of the PDU whose header was just written, as `mode` says; returns the buffers its digest covers. */
  #payload(data: readonly Buffer[], len: number, mode: number): readonly Buffer[] {
    if (mode === DEFER) this.#deferCopies(data, len);
    else if (mode === VIEW) this.#views(data);
    else if (len <= SNAPSHOT_IN_SLAB_MAX) this.#copyNow(data, len);
    else return [this.#snapshot(data, len)];
    return data;
  }

  /** One C2HData (room already made for its header, slab payload and digest): header, payload, DDGST. */
  #c2hData(cid: number, datao: number, data: readonly Buffer[], len: number, flags: number, mode: number, framing: PduFraming, crc: number | undefined): void {
    const start = this.#pos;
    this.#pos = start + writeC2HDataHeader(this.#slab, this.#slabView, start, cid, datao, len, flags, framing);
    this.bytes += this.#pos - start + len;
    const crcOf = this.#payload(data, len, mode);
    if (!framing.ddgst) return;
    if (datao === 0 && crc !== undefined && (flags & PduFlag.DATA_LAST) !== 0) this.#digest(crc);
    else {
      let d = 0;
      for (const b of crcOf) d = crc32c(b, d);
      this.#digest(d);
    }
  }

  /** Data larger than one C2HData: pieces of `max` bytes at increasing DATAO (NVMe-TCP 1.0 §3.6.2.9), LAST on the last. */
  #c2hSplit(cid: number, out: readonly Buffer[], total: number, success: boolean, mode: number, framing: PduFraming, max: number): void {
    const inSlab = mode === DEFER || (mode === SNAP && max <= SNAPSHOT_IN_SLAB_MAX);
    let datao = 0;
    let piece: Buffer[] = [];
    let pieceLen = 0;
    for (const b of out) {
      let off = 0;
      while (off < b.length) {
        const n = Math.min(b.length - off, max - pieceLen);
        piece.push(off === 0 && n === b.length ? b : b.subarray(off, off + n));
        pieceLen += n;
        off += n;
        if (pieceLen < max && datao + pieceLen < total) continue;
        const last = datao + pieceLen === total;
        this.#room(PDU_MAX_HEADER_BYTES + (inSlab ? pieceLen : 0) + DIGEST_SIZE);
        this.#c2hData(cid, datao, piece, pieceLen, last ? (success ? LAST_SUCCESS : PduFlag.DATA_LAST) : 0, mode, framing, undefined);
        datao += pieceLen;
        piece = [];
        pieceLen = 0;
      }
    }
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
