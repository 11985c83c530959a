// Incremental PDU receiver (TCP 1.0 §3.6): CH(8) → rest of header(+HDGST+pad) → DATA → DDGST, over chunks of any size.
// One route per PDU: its header view goes to the role's sink (PduSink), which says where its data goes; the data is
// copied there as it arrives, digest verified on the way. Control PDUs, and every PDU of a reader without a sink
// (harness peers, tests), become objects through the reader's own sink. Header bytes are copied only when a header
// straddles chunks.
import { Buffer } from 'node:buffer';
import { CH_SIZE, DIGEST_SIZE, Fes, PDU_INFO, PduFlag, PduType } from './constants.js';
import { crc32c } from './crc32c.js';
import { rd16, rd32 } from '../le.js';
import type { Pdu } from './pdu.js';
import { type FatalFinding, type ReceiverRole, validatePduHeader, validatePduSpecific } from './validate.js';

export interface ReaderFatal extends FatalFinding {
  /** The offending header bytes as far as they were received (for the TermReq's error data). */
  header: Buffer;
}

/**
 * Where the data of one received PDU goes: copied into `buf` from `at` as it arrives, across chunks, with its data
 * digest computed over the same bytes (Linux nvme_tcp_recv_data copies straight into the request). The role owns the
 * object (usually one reused per connection, or the command record itself), so nothing is allocated per PDU.
 */
export interface DataSink {
  buf: Buffer;
  at: number;
}

/**
 * A role's side of the data path: every PDU but the control ones (ICReq/ICResp, TermReq), with or without digests.
 * One call per PDU, then one more for a PDU that carries data.
 */
export interface PduSink {
  /**
   * A valid header (CH checked, header digest verified when on): `psh` is a view of its PDU-specific header (the SQE
   * of a CapsuleCmd, the CQE of a CapsuleResp, the 16 bytes after the CH of an R2T or data PDU), valid only during
   * the call; `flags` the CH flags. A PDU with data (`datal` > 0) returns where its data goes; undefined means the
   * role ended the connection, and the reader stops ('failed'). Without data the return value only says whether
   * `end` follows (a C2HData may carry none).
   */
  header(type: PduType, psh: Buffer, datal: number, flags: number): DataSink | undefined;
  /** The data of the PDU whose header returned `sink` is in `sink.buf`; `digestOk` false: its DDGST did not match. */
  end(sink: DataSink, digestOk: boolean): void;
}

export interface PduReaderOptions {
  role: ReceiverRole;
  /**
   * PDUs as objects, built from the same header view and a data sink of the reader's own: the control PDUs
   * (ICReq/ICResp, TermReq) always, every kind when `sink` is unset (harness peers, tests). Data is owned by the PDU.
   */
  onPdu: (pdu: Pdu) => void;
  /** Called once on the first fatal finding; the reader then ignores all further input. */
  onFatal: (finding: ReaderFatal) => void;
  /**
   * A PDU object whose data digest does not match (TCP 1.0 §3.6.1.4 leaves recovery to the command: Linux hosts
   * complete it with DATA_XFER_ERROR). Without a handler it is fatal (FES 3, as SPDK does). A `sink` hears it in end().
   */
  onDataDigestError?: (pdu: Pdu) => void;
  /** The role's data path (PduSink): every PDU but the control ones. */
  sink?: PduSink;
  /** Largest data length accepted per H2CData/C2HData PDU (MAXH2CDATA); 0 = unlimited. */
  maxDataLength?: number;
  /** Largest in-capsule data accepted in one CapsuleCmd; 0 = unlimited. */
  maxInCapsuleData?: number;
  /**
   * The caller reuses each chunk's memory after push() returns (a socket reading into one static buffer,
   * docs/performance.md, Baseline facts). Data never stays in a chunk (it goes to its sink as it arrives) and a header
   * that straddles chunks is gathered in the reader's own buffer, so this only lets the reader keep its views of the
   * chunk (#viewOf): header views handed to `header` are valid only during that call, as always.
   */
  reusesChunks?: boolean;
}

/**
 * Receive states (Linux nvme_tcp_recv_state): the CH, the rest of a header that straddles chunks, data, DDGST, and
 * failed (a fatal finding was reported; nothing more is read).
 */
export type PduReaderState = 'ch' | 'head' | 'data' | 'ddgst' | 'failed';

/**
 * Allowed edges; PduReader.setState refuses every other one. ch → ch: a PDU without data completed inside its header
 * states (the next CH follows). Every state but failed may fail; failed is final.
 */
export const PDU_READER_TRANSITIONS: Readonly<Record<PduReaderState, readonly PduReaderState[]>> = {
  ch: ['ch', 'head', 'data', 'failed'],
  head: ['ch', 'data', 'failed'],
  data: ['ch', 'ddgst', 'failed'],
  ddgst: ['ch', 'failed'],
  failed: [],
};

/** The receive states as the small integers a PduReader keeps (index into RX_STATE_NAMES); setState takes these. */
export const RxState = { CH: 0, HEAD: 1, DATA: 2, DDGST: 3, FAILED: 4 } as const;
export type RxState = (typeof RxState)[keyof typeof RxState];
export const RX_STATE_NAMES: readonly PduReaderState[] = ['ch', 'head', 'data', 'ddgst', 'failed'];
/** PDU_READER_TRANSITIONS as one bit per allowed next state, by state id: a per-PDU edge is a load and an AND. */
const RX_EDGES = Uint8Array.from(RX_STATE_NAMES, (s) => PDU_READER_TRANSITIONS[s].reduce((m, n) => m | (1 << RX_STATE_NAMES.indexOf(n)), 0));

/** The 32-bit little-endian word at `o` as an int32 (what the known-CH table stores): bit operations only. */
function i32(b: Buffer, o: number): number {
  return (b[o] as number) | ((b[o + 1] as number) << 8) | ((b[o + 2] as number) << 16) | ((b[o + 3] as number) << 24);
}

/** By PDU type, 1 for the control PDUs (ICReq/ICResp, TermReq): they always reach onPdu as objects. */
const CONTROL = Uint8Array.from({ length: 256 }, (_, t) => (t === PduType.IC_REQ || t === PduType.IC_RESP || t === PduType.H2C_TERM_REQ || t === PduType.C2H_TERM_REQ ? 1 : 0));

/** Slots of the known-CH table (#recvCh): PDU types are 0x00–0x09 (§3.6.1 Figure 17). */
const KNOWN_SLOTS = 16;
/**
 * Offset slots of the view cache (#viewOf): distinct for the ~60 PDU offsets of 4 KiB reads in a 256 KiB read, and
 * for the 72-byte capsules of a QD32 batch.
 */
const VIEW_SLOTS = 1024;
const NO_HEAD = Buffer.alloc(0);

/**
 * The reader's own sink for PDUs handed over as objects (PduReaderOptions.onPdu): the header copied, the data into
 * a buffer of its own. Not on the data path of either role.
 */
class ObjectSink implements DataSink {
  buf: Buffer = NO_HEAD;
  at = 0;
  head: Buffer = NO_HEAD;
}

export class PduReader {
  #state: RxState = RxState.CH;
  #opts: PduReaderOptions;
  /** PduReaderOptions.reusesChunks and the sink, read once: push() and its receive methods load fields. */
  readonly #reuses: boolean;
  readonly #sink: PduSink | undefined;
  #icDone = false;
  /**
   * The known-CH table (#recvCh): a CH identical to one validatePduHeader accepted in this context (same framing and
   * limits, IC done) is valid the same way, so its lengths come from the table, keyed by PDU type, without validating
   * again: the PDUs of a stream repeat their CH (every CapsuleCmd without data, every CapsuleResp, the C2HData of
   * every read of one size). Words are stored as int32 (`| 0`); -1 marks none (no valid CH has type byte 0xff).
   */
  readonly #knownWord = new Int32Array(KNOWN_SLOTS).fill(-1);
  readonly #knownPlen = new Int32Array(KNOWN_SLOTS).fill(-1);
  readonly #knownHead = new Int32Array(KNOWN_SLOTS).fill(0x7fffffff);
  readonly #knownData = new Int32Array(KNOWN_SLOTS);
  /** Data in progress: the sink it goes to, that sink's buffer and where this PDU's data starts in it. */
  #dst: DataSink | undefined;
  #dstBuf: Buffer = NO_HEAD;
  #dstAt = 0;
  /** The data in progress belongs to a PDU object (#objectSink), not to the role's sink. */
  #toObject = false;
  readonly #objectSink = new ObjectSink();
  /** Views of the reused receive buffer (header views, data copies' sources), by offset slot (#viewOf). */
  readonly #views: (Buffer | undefined)[] = new Array<Buffer | undefined>(VIEW_SLOTS).fill(undefined);
  /** The receive buffer those views are of, and its byteOffset; another buffer empties the cache (checked once per push). */
  #viewsOf: Buffer | undefined;
  #viewsBase = 0;
  #hdgst = false;
  #ddgst = false;
  #pda = 0;
  readonly #ch = Buffer.alloc(CH_SIZE);
  #chHave = 0;
  /** A header that straddles chunks, gathered (never a view of a chunk). */
  #head: Buffer = this.#ch;
  #headHave = 0;
  #headLen = 0;
  #dataLen = 0;
  #dataHave = 0;
  /** The data in progress carries a DDGST (§3.6.1.4; TermReq data has none). */
  #wantsDdgst = false;
  #crc = 0;
  readonly #ddgstBuf = Buffer.alloc(DIGEST_SIZE);
  #ddgstHave = 0;
  /** Bytes consumed over the connection's life (for diagnostics). */
  bytesIn = 0;

  constructor(opts: PduReaderOptions) {
    // A copy: setMaxDataLength must not write into an options object the caller may share between connections.
    this.#opts = { ...opts };
    this.#reuses = opts.reusesChunks === true;
    this.#sink = opts.sink;
  }

  /** Apply the digests negotiated by ICReq/ICResp and the receiver's alignment; call from onPdu of the IC PDU. */
  setFraming(hdgst: boolean, ddgst: boolean, pda = 0): void {
    // The CHs accepted so far were accepted under the old framing.
    this.#knownWord.fill(-1);
    this.#hdgst = hdgst;
    this.#ddgst = ddgst;
    this.#pda = pda;
  }

  setMaxDataLength(n: number): void {
    this.#opts.maxDataLength = n;
    this.#knownWord.fill(-1);
  }

  get failed(): boolean {
    return this.#state === RxState.FAILED;
  }

  get state(): PduReaderState {
    return RX_STATE_NAMES[this.#state] as PduReaderState;
  }

  /**
   * The one place the receive state changes: refuses (returns false) any edge not in PDU_READER_TRANSITIONS (by state
   * id: a load and an AND, nothing allocated). Public for the table test, as the other state machines' setState.
   */
  setState(next: RxState): boolean {
    if (((RX_EDGES[this.#state] as number) & (1 << next)) === 0) return false;
    this.#state = next;
    return true;
  }

  /** An edge the receive methods take; one the table refuses is a bug, reported as a fatal finding (no throw). */
  #go(next: RxState): void {
    if (!this.setState(next)) this.#badEdge(next);
  }

  /** Apart from #go so the receive methods that V8 inlines into push() stay small (docs/performance.md). */
  #badEdge(next: RxState): void {
    this.#fail({ fes: Fes.PDU_SEQUENCE_ERROR, fei: 0, reason: `reader: no edge ${this.state} -> ${RX_STATE_NAMES[next]}` }, this.#head);
  }

  /**
   * Feed the next received chunk: its first `n` bytes (all of it by default; a reused receive buffer is pushed whole
   * with the count read, so no view is made per read). Never throws for any byte content. One receive method per
   * state, as Linux nvme_tcp_recv_skb (recv_pdu, recv_data, recv_ddgst): each consumes what its state needs from
   * `off` and returns where the next starts (`n` once the reader failed).
   */
  push(chunk: Buffer, n = chunk.length): void {
    let off = 0;
    this.bytesIn += n;
    if (this.#reuses && chunk !== this.#viewsOf) this.#rebase(chunk);
    while (off < n) {
      const state = this.#state;
      if (state === RxState.CH) off = this.#recvCh(chunk, off, n);
      else if (state === RxState.DATA) off = this.#recvData(chunk, off, n);
      else if (state === RxState.HEAD) off = this.#recvHead(chunk, off, n);
      else if (state === RxState.DDGST) off = this.#recvDdgst(chunk, off, n);
      else return;
    }
  }

  /** A new receive buffer: the view cache (#viewOf) is of the previous one. */
  #rebase(chunk: Buffer): void {
    // Keyed by the Buffer object, not its memory: `chunk.buffer` costs a runtime call per read in optimized code.
    this.#views.fill(undefined);
    this.#viewsOf = chunk;
    this.#viewsBase = chunk.byteOffset;
  }

  /**
   * CH (§3.6.1). A CH the known-CH table holds (see #knownWord), its whole header in this chunk, goes to #wholeHeader
   * without validating again; everything else takes #newCh.
   */
  #recvCh(chunk: Buffer, off: number, n: number): number {
    const type = chunk[off] as number;
    if (this.#chHave === 0 && type < KNOWN_SLOTS && n - off >= (this.#knownHead[type] as number) && this.#knownWord[type] === i32(chunk, off) && this.#knownPlen[type] === i32(chunk, off + 4)) {
      this.#headLen = this.#knownHead[type] as number;
      this.#dataLen = this.#knownData[type] as number;
      this.#headerComplete(chunk, off, true);
      return off + this.#headLen;
    }
    return this.#newCh(chunk, off, n);
  }

  /** A CH to validate (or one that straddles chunks): then the rest of its header from this chunk or in 'head'. */
  #newCh(chunk: Buffer, off: number, n: number): number {
    if (this.#chHave > 0 || n - off < CH_SIZE) return this.#gatherCh(chunk, off, n);
    if (!this.#checkCh(chunk.subarray(off, off + CH_SIZE))) return n;
    const headLen = this.#headLen;
    if (n - off >= headLen) {
      this.#headerComplete(chunk, off, false);
      return off + headLen;
    }
    this.#head = Buffer.allocUnsafe(headLen);
    chunk.copy(this.#head, 0, off, n);
    this.#headHave = n - off;
    this.#go(RxState.HEAD);
    return n;
  }

  /** A CH that straddles chunks: gathered in #ch, then its header continues in the 'head' state. */
  #gatherCh(chunk: Buffer, off: number, n: number): number {
    const take = Math.min(CH_SIZE - this.#chHave, n - off);
    chunk.copy(this.#ch, this.#chHave, off, off + take);
    this.#chHave += take;
    off += take;
    if (this.#chHave < CH_SIZE) return off;
    this.#chHave = 0;
    if (!this.#checkCh(this.#ch)) return n;
    this.#head = Buffer.allocUnsafe(this.#headLen);
    this.#ch.copy(this.#head, 0);
    this.#headHave = CH_SIZE;
    this.#go(RxState.HEAD);
    if (this.#headHave === this.#headLen) this.#gathered();
    return off;
  }

  /** PDU-specific header (and HDGST, padding) that straddles chunks, gathered into #head. */
  #recvHead(chunk: Buffer, off: number, n: number): number {
    const take = Math.min(this.#headLen - this.#headHave, n - off);
    chunk.copy(this.#head, this.#headHave, off, off + take);
    this.#headHave += take;
    if (this.#headHave === this.#headLen) this.#gathered();
    return off + take;
  }

  /** A gathered header is complete: handled as one found whole in a chunk; the reader then forgets it. */
  #gathered(): void {
    const head = this.#head;
    this.#head = this.#ch;
    this.#headerComplete(head, 0, false);
    if (this.#state === RxState.HEAD) this.#go(RxState.CH);
  }

  /**
   * Data: copied into its sink at its offset as it arrives, the data digest computed over the same view. A view of a
   * reused chunk (#viewOf) spares the view Buffer.copy makes of part of a buffer.
   */
  #recvData(chunk: Buffer, off: number, n: number): number {
    const take = Math.min(this.#dataLen - this.#dataHave, n - off);
    const src = this.#viewOf(chunk, off, take);
    this.#dstBuf.set(src, this.#dstAt + this.#dataHave);
    if (this.#wantsDdgst) this.#crc = crc32c(src, this.#crc);
    this.#dataHave += take;
    if (this.#dataHave === this.#dataLen) {
      if (this.#wantsDdgst) this.#go(RxState.DDGST);
      else this.#end(true);
    }
    return off + take;
  }

  /** DDGST (§3.6.1.4), gathered across chunks, then compared with the CRC32C of the data. */
  #recvDdgst(chunk: Buffer, off: number, n: number): number {
    const take = Math.min(DIGEST_SIZE - this.#ddgstHave, n - off);
    chunk.copy(this.#ddgstBuf, this.#ddgstHave, off, off + take);
    this.#ddgstHave += take;
    if (this.#ddgstHave === DIGEST_SIZE) this.#end(this.#ddgstBuf.readUInt32LE(0) === this.#crc);
    return off + take;
  }

  /**
   * `len` bytes at `off` in `chunk`, as a view. Every view costs a construction, and Buffer.copy of part of a buffer
   * makes one per call too (~100 bytes of garbage and half the copy's cost at 4 KiB, docs/performance.md "Host path,
   * fourth pass"). A reused receive buffer puts the PDUs of a steady stream at the same few offsets read after read,
   * so with reusesChunks the views are kept, one per offset slot (push() empties them when another buffer arrives): a
   * header view or a data copy's source then costs no construction. Handlers already treat views of a reused chunk
   * as valid only during their call, so a kept view handed out again later is as safe as a fresh one.
   */
  #viewOf(chunk: Buffer, off: number, len: number): Buffer {
    if (!this.#reuses || chunk !== this.#viewsOf) return chunk.subarray(off, off + len);
    const v = this.#views[(off >>> 2) & (VIEW_SLOTS - 1)];
    return v !== undefined && v.byteOffset === this.#viewsBase + off && v.length === len ? v : this.#newView(chunk, off, len);
  }

  /** #viewOf's miss: a new view, kept in its slot. Apart so the hit, a steady stream's case, stays small to inline. */
  #newView(chunk: Buffer, off: number, len: number): Buffer {
    const v = chunk.subarray(off, off + len);
    this.#views[(off >>> 2) & (VIEW_SLOTS - 1)] = v;
    return v;
  }

  #fail(f: FatalFinding, header: Buffer): void {
    if (!this.setState(RxState.FAILED)) return;
    this.#opts.onFatal({ ...f, header: Buffer.from(header.subarray(0, Math.min(header.length, 128))) });
  }

  /**
   * Validates the CH (validatePduHeader, the one place its rules live); on success sets #headLen/#dataLen and
   * remembers the CH in the known-CH table once the IC exchange is done, else fails and returns false.
   */
  #checkCh(ch: Buffer): boolean {
    const type = ch[0] as number;
    const verdict = validatePduHeader(ch, {
      role: this.#opts.role,
      icDone: this.#icDone,
      hdgst: this.#hdgst,
      ddgst: this.#ddgst,
      pda: this.#pda,
      maxDataLength: this.#opts.maxDataLength ?? 0,
    });
    if (!verdict.ok) {
      this.#fail(verdict, ch);
      return false;
    }
    if (type === PduType.CAPSULE_CMD && (this.#opts.maxInCapsuleData ?? 0) > 0 && verdict.dataLen > (this.#opts.maxInCapsuleData ?? 0)) {
      this.#fail({ fes: Fes.DATA_LIMIT_EXCEEDED, fei: 4, reason: `in-capsule data ${verdict.dataLen} exceeds ${this.#opts.maxInCapsuleData}` }, ch);
      return false;
    }
    this.#headLen = verdict.headLen;
    this.#dataLen = verdict.dataLen;
    // Before the IC exchange the same CH is judged differently afterwards (§3.3): only what comes after is kept.
    if (this.#icDone) {
      this.#knownWord[type] = i32(ch, 0);
      this.#knownPlen[type] = i32(ch, 4);
      this.#knownHead[type] = verdict.headLen;
      this.#knownData[type] = verdict.dataLen;
    }
    return true;
  }

  /**
   * The whole header is at `at` in `buf` (a chunk, or the gathered #head): header digest, the PDU-specific checks (a
   * known CH, #recvCh, only needs DATAL checked: the rest of its CH was accepted before), then the PDU goes to its
   * sink (#dispatch). On a finding the state is 'failed' and push() stops.
   */
  #headerComplete(buf: Buffer, at: number, known: boolean): void {
    const type = buf[at] as number;
    const hlen = buf[at + 2] as number;
    if (((buf[at + 1] as number) & PduFlag.HDGSTF) !== 0 && !this.#headerDigestOk(buf, at, type, hlen)) return;
    if (known ? (type === PduType.C2H_DATA || type === PduType.H2C_DATA) && rd32(buf, at + 16) !== this.#dataLen : true) {
      // A new CH, or a known data PDU whose DATAL differs: the PDU-specific checks (validatePduSpecific).
      const specific = validatePduSpecific(buf, type, this.#dataLen, at);
      if (specific !== undefined) {
        this.#fail(specific, buf.subarray(at, at + hlen));
        return;
      }
    }
    if (type === PduType.IC_REQ || type === PduType.IC_RESP) this.#icDone = true;
    this.#dispatch(buf, at, type, hlen);
  }

  /** HDGST (§3.6.1.3) over the header view; a mismatch is fatal (FES 1). Apart: only digest-enabled streams call it. */
  #headerDigestOk(buf: Buffer, at: number, type: number, hlen: number): boolean {
    if (rd32(buf, at + hlen) === crc32c(this.#viewOf(buf, at, hlen))) return true;
    this.#fail({ fes: Fes.HEADER_DIGEST_ERROR, fei: 0, reason: `header digest mismatch on ${PDU_INFO[type as PduType].name}` }, buf.subarray(at, at + hlen));
    return false;
  }

  /**
   * One header, one sink: the role's (PduSink.header) for every PDU but the control ones, else the reader's own,
   * which builds a PDU object. A PDU with data then takes the 'data' state into that sink.
   */
  #dispatch(buf: Buffer, at: number, type: number, hlen: number): void {
    const datal = this.#dataLen;
    const sink = this.#sink;
    let dst: DataSink | undefined;
    if (sink === undefined || CONTROL[type] === 1) {
      if (datal === 0) {
        this.#opts.onPdu(decodePduHeader(this.#viewOf(buf, at, hlen), [], 0));
        return;
      }
      const o = this.#objectSink;
      o.head = Buffer.from(buf.subarray(at, at + hlen));
      o.buf = Buffer.allocUnsafe(datal);
      o.at = 0;
      dst = o;
      this.#toObject = true;
    } else {
      dst = sink.header(type as PduType, this.#viewOf(buf, at + CH_SIZE, hlen - CH_SIZE), datal, buf[at + 1] as number);
      this.#toObject = false;
      if (datal === 0) {
        if (dst !== undefined) sink.end(dst, true);
        return;
      }
      if (dst === undefined) {
        // The role ended the connection (its TermReq is on the way): nothing more is read.
        this.#go(RxState.FAILED);
        return;
      }
    }
    this.#wantsDdgst = this.#ddgst && type !== PduType.H2C_TERM_REQ && type !== PduType.C2H_TERM_REQ;
    this.#dst = dst;
    this.#dstBuf = dst.buf;
    this.#dstAt = dst.at;
    this.#dataHave = 0;
    this.#crc = 0;
    this.#ddgstHave = 0;
    this.#go(RxState.DATA);
  }

  /** The data (and its DDGST) of the PDU in progress is in: its sink hears it, or its object goes to onPdu. */
  #end(digestOk: boolean): void {
    const dst = this.#dst as DataSink;
    this.#dst = undefined;
    this.#dstBuf = NO_HEAD;
    this.#go(RxState.CH);
    if (!this.#toObject) {
      (this.#sink as PduSink).end(dst, digestOk);
      return;
    }
    const o = this.#objectSink;
    const pdu = decodePduHeader(o.head, [o.buf], this.#dataLen);
    const head = o.head;
    o.head = NO_HEAD;
    o.buf = NO_HEAD;
    if (digestOk) this.#opts.onPdu(pdu);
    else if (this.#opts.onDataDigestError !== undefined) this.#opts.onDataDigestError(pdu);
    else this.#fail({ fes: Fes.HEADER_DIGEST_ERROR, fei: 0, reason: 'data digest mismatch' }, head.subarray(0, head[2] as number));
  }
}

/** Decode a complete header (CH + PSH) plus its data views into a Pdu. The header must already be validated. */
export function decodePduHeader(head: Buffer, data: Buffer[], dataLen: number): Pdu {
  const type = head[0] as PduType;
  const flags = head[1] as number;
  switch (type) {
    case PduType.IC_REQ:
      return { type, pfv: head.readUInt16LE(8), hpda: head[10] as number, dgst: head[11] as number, maxr2t: head.readUInt32LE(12) };
    case PduType.IC_RESP:
      return { type, pfv: head.readUInt16LE(8), cpda: head[10] as number, dgst: head[11] as number, maxh2cdata: head.readUInt32LE(12) };
    case PduType.H2C_TERM_REQ:
    case PduType.C2H_TERM_REQ:
      return { type, fes: head.readUInt16LE(8), fei: head.readUInt32LE(10), errorData: dataLen === 0 ? Buffer.alloc(0) : Buffer.concat(data, dataLen) };
    case PduType.CAPSULE_CMD:
      return { type, sqe: head.subarray(CH_SIZE, CH_SIZE + 64), data };
    case PduType.CAPSULE_RESP:
      return { type, cqe: head.subarray(CH_SIZE, CH_SIZE + 16) };
    case PduType.H2C_DATA:
      return { type, cccid: rd16(head, 8), ttag: rd16(head, 10), datao: rd32(head, 12), last: (flags & PduFlag.DATA_LAST) !== 0, data };
    case PduType.C2H_DATA:
      return {
        type,
        cccid: rd16(head, 8),
        datao: rd32(head, 12),
        last: (flags & PduFlag.DATA_LAST) !== 0,
        success: (flags & PduFlag.DATA_SUCCESS) !== 0,
        data,
      };
    case PduType.R2T:
      return { type, cccid: rd16(head, 8), ttag: rd16(head, 10), r2to: rd32(head, 12), r2tl: rd32(head, 16) };
  }
}

