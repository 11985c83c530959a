// Incremental PDU receiver (TCP 1.0 §3.6): CH(8) → rest of header(+HDGST+pad) → DATA → DDGST, over chunks of any size.
// Header bytes are copied only when a header straddles chunks; payload is handed out as views.
import { Buffer } from 'node:buffer';
import { CAPSULE_CMD_HLEN, CH_SIZE, DIGEST_SIZE, Fes, PDU_INFO, PduFlag, PduType } from './constants.js';
import { crc32c } from './crc32c.js';
import { rd16, rd32 } from '../le.js';
import type { Pdu } from './pdu.js';
import { type FatalFinding, type ReceiverRole, validateDatal, validatePduHeader, validatePduSpecific } from './validate.js';

export interface ReaderFatal extends FatalFinding {
  /** The offending header bytes as far as they were received (for the TermReq's error data). */
  header: Buffer;
}

export interface PduReaderOptions {
  role: ReceiverRole;
  /** Called for every complete, valid PDU. Data buffers are views into the received chunks. */
  onPdu: (pdu: Pdu) => void;
  /** Called once on the first fatal finding; the reader then ignores all further input. */
  onFatal: (finding: ReaderFatal) => void;
  /**
   * Called instead of onPdu when a PDU's data digest does not match (TCP 1.0 §3.6.1.4 leaves recovery to the
   * command: Linux hosts complete it with DATA_XFER_ERROR). Without a handler it is fatal (FES 3, as SPDK does).
   */
  onDataDigestError?: (pdu: Pdu) => void;
  /** Largest data length accepted per H2CData/C2HData PDU (MAXH2CDATA); 0 = unlimited. */
  maxDataLength?: number;
  /** Largest in-capsule data accepted in one CapsuleCmd; 0 = unlimited. */
  maxInCapsuleData?: number;
  /**
   * The caller reuses each chunk's memory after push() returns (a socket reading into one static buffer,
   * docs/performance.md, Baseline facts). The reader then copies the header and data views of a PDU left incomplete at the end of a
   * chunk; views handed to onPdu stay valid only during that call, as always.
   */
  reusesChunks?: boolean;
  /**
   * Controller role, no header digest: a CapsuleCmd without in-capsule data is handed over as its SQE view (valid only
   * during the call) instead of a PDU object wrapping it. Hot path: every command arrives this way.
   */
  onCapsuleCmd?: (sqe: Buffer) => void;
  /**
   * Host role, no digests: a CapsuleResp is handed over as the chunk and the CQE's offset in it instead of a PDU
   * object and a view (valid only during the call). Hot path: nothing is allocated per response.
   */
  onCapsuleResp?: (buf: Buffer, cqeOff: number) => void;
  /**
   * Host role, no digests: a C2HData header asks for the buffer its data goes to; the reader copies the data there
   * at `datao` as it arrives (across chunks, no view and no staging copy: Linux nvme_tcp_recv_data copies straight
   * into the request), then calls onC2HDataEnd. The callee checks the PDU against its command (TCP 1.0 §3.6.2.9)
   * and returns undefined after it ended the connection; the reader then stops. `flags` are the CH flags (LAST,
   * SUCCESS).
   */
  onC2HDataHeader?: (cccid: number, datao: number, datal: number, flags: number) => Buffer | undefined;
  onC2HDataEnd?: (cccid: number, datal: number, flags: number) => void;
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

/**
 * Direct handlers (#wholeHeader), as #checkCh decides them for a CH and #knownDirect keeps them: no header digest,
 * and a CapsuleCmd without data with onCapsuleCmd set, a CapsuleResp with onCapsuleResp set, a C2HData on the direct
 * C2HData path (#fastData). 0: none, the PDU takes #headerComplete.
 */
const DIRECT_CMD = 1;
const DIRECT_RESP = 2;
const DIRECT_C2H = 3;

/** The direct callbacks a reader without them holds; never called (#checkCh gives no DIRECT_* for them). */
function noDirect(): undefined {
  return undefined;
}

/** The 32-bit little-endian word at `o` as an int32 (what the known-CH table stores): bit operations only. */
function i32(b: Buffer, o: number): number {
  return (b[o] as number) | ((b[o + 1] as number) << 8) | ((b[o + 2] as number) << 16) | ((b[o + 3] as number) << 24);
}

/** Slots of the known-CH table (#recvCh): PDU types are 0x00–0x09 (§3.6.1 Figure 17). */
const KNOWN_SLOTS = 16;
/**
 * Offset slots of the view cache (#viewOf): distinct for the ~60 PDU offsets of 4 KiB reads in a 256 KiB read, and
 * for the 72-byte capsules of a QD32 batch.
 */
const VIEW_SLOTS = 1024;

export class PduReader {
  #state: RxState = RxState.CH;
  #opts: PduReaderOptions;
  /** PduReaderOptions.reusesChunks and the direct callbacks, read once: push() and its receive methods load fields. */
  readonly #reuses: boolean;
  readonly #onCapsuleCmd: (sqe: Buffer) => void;
  readonly #onCapsuleResp: (buf: Buffer, cqeOff: number) => void;
  readonly #onC2HDataHeader: NonNullable<PduReaderOptions['onC2HDataHeader']>;
  readonly #onC2HDataEnd: NonNullable<PduReaderOptions['onC2HDataEnd']>;
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
  /** By PDU type, the known CH's direct handler (DIRECT_*, 0 for none; #checkCh decides it once per CH). */
  readonly #knownDirect = new Uint8Array(KNOWN_SLOTS);
  /** Host role, IC done, no digests, PDA 0, and the onC2HData* callbacks set: the direct C2HData path applies. */
  #fastData = false;
  /** Direct C2HData in progress: where its data goes, the PDU's datao, cccid and flags. */
  #direct: Buffer | undefined;
  #directAt = 0;
  #directCid = 0;
  #directFlags = 0;
  /** Views of the reused receive buffer (SQEs, direct C2HData copies), by offset slot (#viewOf). */
  readonly #views: (Buffer | undefined)[] = new Array<Buffer | undefined>(VIEW_SLOTS).fill(undefined);
  /** The receive buffer those views are of, and its byteOffset; another buffer empties the cache (checked once per push). */
  #viewsOf: Buffer | undefined;
  #viewsBase = 0;
  #hdgst = false;
  #ddgst = false;
  #pda = 0;
  readonly #ch = Buffer.alloc(CH_SIZE);
  #chHave = 0;
  #head: Buffer = this.#ch;
  #headHave = 0;
  #headLen = 0;
  #dataLen = 0;
  #dataHave = 0;
  #data: Buffer[] = [];
  #crc = 0;
  /**
   * With reusesChunks, where the data of a PDU that spans reads accumulates (one buffer per reader, grown to the
   * largest such PDU and reused): copying each partial view into a fresh Buffer cost a zero-filled allocation per
   * read, 22 % of the host's CPU at 128 KiB reads (docs/performance.md). Handlers copy out during onPdu, as they must
   * for views of the reused chunk, so reusing this buffer is as safe.
   */
  #stage: Buffer | undefined;
  #staging = false;
  readonly #ddgstBuf = Buffer.alloc(DIGEST_SIZE);
  #ddgstHave = 0;
  /** Bytes consumed over the connection's life (for diagnostics). */
  bytesIn = 0;

  constructor(opts: PduReaderOptions) {
    // A copy: setMaxDataLength must not write into an options object the caller may share between connections.
    this.#opts = { ...opts };
    this.#reuses = opts.reusesChunks === true;
    // Called only where #checkCh found the option set (DIRECT_*).
    this.#onCapsuleCmd = opts.onCapsuleCmd ?? noDirect;
    this.#onCapsuleResp = opts.onCapsuleResp ?? noDirect;
    this.#onC2HDataHeader = opts.onC2HDataHeader ?? noDirect;
    this.#onC2HDataEnd = opts.onC2HDataEnd ?? noDirect;
  }

  /** Apply the digests negotiated by ICReq/ICResp and the receiver's alignment; call from onPdu of the IC PDU. */
  setFraming(hdgst: boolean, ddgst: boolean, pda = 0): void {
    // The CHs accepted so far were accepted under the old framing.
    this.#knownWord.fill(-1);
    this.#fastData = this.#icDone && this.#opts.role === 'host' && !hdgst && !ddgst && pda === 0 && this.#opts.onC2HDataHeader !== undefined && this.#opts.onC2HDataEnd !== undefined;
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
    // Only a PDU left incomplete in views of the chunk needs copying out (#detach); the check spares the call.
    if (this.#reuses && this.#state >= RxState.DATA && this.#direct === undefined) this.#detach(chunk);
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
      return this.#wholeHeader(chunk, off, this.#knownDirect[type] as number);
    }
    return this.#newCh(chunk, off, n);
  }

  /** A CH to validate (or one that straddles chunks): then the rest of its header from this chunk or in 'head'. */
  #newCh(chunk: Buffer, off: number, n: number): number {
    if (this.#chHave > 0 || n - off < CH_SIZE) return this.#gatherCh(chunk, off, n);
    const direct = this.#checkCh(chunk.subarray(off, off + CH_SIZE));
    if (direct < 0) return n;
    const headLen = this.#headLen;
    if (n - off >= headLen) return this.#wholeHeader(chunk, off, direct);
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
    if (this.#checkCh(this.#ch) < 0) return n;
    this.#head = Buffer.allocUnsafe(this.#headLen);
    this.#ch.copy(this.#head, 0);
    this.#headHave = CH_SIZE;
    this.#go(RxState.HEAD);
    if (this.#headHave === this.#headLen && !this.#headerComplete()) return n;
    return off;
  }

  /** PDU-specific header (and HDGST, padding) that straddles chunks, gathered into #head. */
  #recvHead(chunk: Buffer, off: number, n: number): number {
    const take = Math.min(this.#headLen - this.#headHave, n - off);
    chunk.copy(this.#head, this.#headHave, off, off + take);
    this.#headHave += take;
    if (this.#headHave === this.#headLen && !this.#headerComplete()) return n;
    return off + take;
  }

  /**
   * Data: a direct C2HData's is copied to the buffer onC2HDataHeader gave, at datao, then onC2HDataEnd; any other
   * PDU's is kept as views (#keepViews). A kept view of a reused chunk (#viewOf) spares the view Buffer.copy makes of
   * part of a buffer.
   */
  #recvData(chunk: Buffer, off: number, n: number): number {
    const take = Math.min(this.#dataLen - this.#dataHave, n - off);
    const direct = this.#direct;
    if (direct === undefined) return this.#keepViews(chunk, off, take);
    if (this.#reuses) direct.set(this.#viewOf(chunk, off, take), this.#directAt + this.#dataHave);
    else chunk.copy(direct, this.#directAt + this.#dataHave, off, off + take);
    this.#dataHave += take;
    if (this.#dataHave === this.#dataLen) {
      this.#direct = undefined;
      this.#go(RxState.CH);
      this.#onC2HDataEnd(this.#directCid, this.#dataLen, this.#directFlags);
    }
    return off + take;
  }

  /** Data of a PDU handed to onPdu: kept as views of the chunks, or staged (#detach) when the chunk is reused. */
  #keepViews(chunk: Buffer, off: number, take: number): number {
    const view = chunk.subarray(off, off + take);
    if (this.#staging) view.copy(this.#stage as Buffer, this.#dataHave);
    else this.#data.push(view);
    if (this.#wantsDdgst()) this.#crc = crc32c(view, this.#crc);
    this.#dataHave += take;
    if (this.#dataHave === this.#dataLen) this.#dataComplete();
    return off + take;
  }

  /** DDGST (§3.6.1.4), gathered across chunks, then compared with the CRC32C of the data. */
  #recvDdgst(chunk: Buffer, off: number, n: number): number {
    const take = Math.min(DIGEST_SIZE - this.#ddgstHave, n - off);
    chunk.copy(this.#ddgstBuf, this.#ddgstHave, off, off + take);
    this.#ddgstHave += take;
    if (this.#ddgstHave === DIGEST_SIZE) this.#finish(this.#ddgstBuf.readUInt32LE(0) === this.#crc);
    return off + take;
  }

  /**
   * The whole header is in this chunk. A CH with a direct handler (`direct`, DIRECT_*: no header digest, and the
   * handler set) skips the header view and the PDU object: a CapsuleCmd without data goes to onCapsuleCmd as its SQE,
   * a CapsuleResp to onCapsuleResp in place, a C2HData into its direct copy once its datal holds (as #headerComplete
   * would check). Everything else, and any finding, takes #headerComplete.
   */
  #wholeHeader(chunk: Buffer, off: number, direct: number): number {
    const end = off + this.#headLen;
    if (direct === DIRECT_RESP) this.#onCapsuleResp(chunk, off + CH_SIZE);
    else if (direct === DIRECT_CMD) this.#onCapsuleCmd(this.#viewOf(chunk, off + CH_SIZE, CAPSULE_CMD_HLEN - CH_SIZE));
    else if (direct === DIRECT_C2H && validateDatal(chunk, this.#dataLen, off) === undefined) this.#startDirect(chunk, off, this.#dataLen);
    else {
      this.#head = chunk.subarray(off, end);
      // On a finding the state is 'failed' and push() stops.
      this.#headerComplete();
    }
    return end;
  }

  /** Copy what an incomplete PDU still points at in `chunk`, which the caller is about to overwrite. */
  #detach(chunk: Buffer): void {
    if (this.#state !== RxState.DATA && this.#state !== RxState.DDGST) return;
    if (this.#direct !== undefined) return;
    if (this.#head.buffer === chunk.buffer) this.#head = Buffer.from(this.#head);
    if (this.#staging) return;
    if (this.#stage === undefined || this.#stage.length < this.#dataLen) this.#stage = Buffer.allocUnsafeSlow(this.#dataLen);
    let at = 0;
    for (const d of this.#data) at += d.copy(this.#stage, at);
    this.#data = [];
    this.#staging = true;
  }

  /**
   * `len` bytes at `off` in `chunk`, as a view. Every view costs a construction, and Buffer.copy of part of a buffer
   * makes one per call too (~100 bytes of garbage and half the copy's cost at 4 KiB, docs/performance.md "Host path,
   * fourth pass"). A reused receive buffer puts the PDUs of a steady stream at the same few offsets read after read,
   * so with reusesChunks the views are kept, one per offset slot (push() empties them when another buffer arrives): a
   * CapsuleCmd's SQE or a direct copy's source then costs no construction. Handlers already treat views of a reused
   * chunk as valid only during their call, so a kept view handed out again later is as safe as a fresh one.
   */
  #viewOf(chunk: Buffer, off: number, len: number): Buffer {
    if (!this.#reuses) return chunk.subarray(off, off + len);
    const v = this.#views[(off >>> 2) & (VIEW_SLOTS - 1)];
    return v !== undefined && v.byteOffset === this.#viewsBase + off && v.length === len ? v : this.#newView(chunk, off, len);
  }

  /** #viewOf's miss: a new view, kept in its slot. Apart so the hit, a steady stream's case, stays small to inline. */
  #newView(chunk: Buffer, off: number, len: number): Buffer {
    const v = chunk.subarray(off, off + len);
    this.#views[(off >>> 2) & (VIEW_SLOTS - 1)] = v;
    return v;
  }

  /**
   * A direct C2HData begins: onC2HDataHeader checks it against its command and gives its destination, or undefined
   * after it ended the connection, and the reader then stops ('failed').
   */
  #startDirect(head: Buffer, at: number, datal: number): void {
    const cccid = rd16(head, at + 8);
    const datao = rd32(head, at + 12);
    const flags = head[at + 1] as number;
    const dst = this.#onC2HDataHeader(cccid, datao, datal, flags);
    if (dst === undefined) {
      this.#go(RxState.FAILED);
      return;
    }
    this.#direct = dst;
    this.#directAt = datao;
    this.#directCid = cccid;
    this.#directFlags = flags;
    this.#dataLen = datal;
    this.#dataHave = 0;
    this.#go(RxState.DATA);
  }

  #fail(f: FatalFinding, header: Buffer): void {
    if (!this.setState(RxState.FAILED)) return;
    this.#opts.onFatal({ ...f, header: Buffer.from(header.subarray(0, Math.min(header.length, 128))) });
  }

  /**
   * Validates the CH (validatePduHeader, the one place its rules live); on success sets #headLen/#dataLen, remembers
   * the CH in the known-CH table once the IC exchange is done, and returns its direct handler (DIRECT_*, 0 for none),
   * else fails and returns -1.
   */
  #checkCh(ch: Buffer): number {
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
      return -1;
    }
    if (type === PduType.CAPSULE_CMD && (this.#opts.maxInCapsuleData ?? 0) > 0 && verdict.dataLen > (this.#opts.maxInCapsuleData ?? 0)) {
      this.#fail({ fes: Fes.DATA_LIMIT_EXCEEDED, fei: 4, reason: `in-capsule data ${verdict.dataLen} exceeds ${this.#opts.maxInCapsuleData}` }, ch);
      return -1;
    }
    this.#headLen = verdict.headLen;
    this.#dataLen = verdict.dataLen;
    const plain = ((ch[1] as number) & PduFlag.HDGSTF) === 0;
    const cmd = type === PduType.CAPSULE_CMD && verdict.dataLen === 0 && this.#opts.onCapsuleCmd !== undefined;
    const resp = type === PduType.CAPSULE_RESP && this.#opts.onCapsuleResp !== undefined;
    const data = type === PduType.C2H_DATA && this.#fastData;
    const direct = !plain ? 0 : cmd ? DIRECT_CMD : resp ? DIRECT_RESP : data ? DIRECT_C2H : 0;
    // Before the IC exchange the same CH is judged differently afterwards (§3.3): only what comes after is kept.
    if (this.#icDone) {
      this.#knownWord[type] = i32(ch, 0);
      this.#knownPlen[type] = i32(ch, 4);
      this.#knownHead[type] = verdict.headLen;
      this.#knownData[type] = verdict.dataLen;
      this.#knownDirect[type] = direct;
    }
    return direct;
  }

  #wantsDdgst(): boolean {
    const type = this.#head[0] as number;
    return this.#ddgst && type !== PduType.H2C_TERM_REQ && type !== PduType.C2H_TERM_REQ;
  }

  /** Header (and HDGST) received: verify, then move to data or emit. Returns false when the reader failed. */
  #headerComplete(): boolean {
    const head = this.#head;
    const type = head[0] as number;
    const hlen = head[2] as number;
    if (((head[1] as number) & PduFlag.HDGSTF) !== 0) {
      const got = head.readUInt32LE(hlen);
      if (got !== crc32c(head.subarray(0, hlen))) {
        this.#fail({ fes: Fes.HEADER_DIGEST_ERROR, fei: 0, reason: `header digest mismatch on ${PDU_INFO[type as PduType].name}` }, head.subarray(0, hlen));
        return false;
      }
    }
    const specific = validatePduSpecific(head, type, this.#dataLen);
    if (specific !== undefined) {
      this.#fail(specific, head.subarray(0, hlen));
      return false;
    }
    if (type === PduType.IC_REQ || type === PduType.IC_RESP) this.#icDone = true;
    if (this.#fastData && type === PduType.C2H_DATA) {
      // A C2HData header that straddled reads: validated above, now the direct copy as in #directHeader.
      this.#startDirect(head, 0, this.#dataLen);
      this.#head = this.#ch;
      return this.#state !== RxState.FAILED;
    }
    this.#data = [];
    this.#staging = false;
    this.#dataHave = 0;
    this.#crc = 0;
    this.#ddgstHave = 0;
    if (this.#dataLen > 0) {
      this.#go(RxState.DATA);
      return true;
    }
    this.#finish(true);
    return this.#state !== RxState.FAILED;
  }

  #dataComplete(): void {
    if (this.#wantsDdgst()) {
      this.#go(RxState.DDGST);
      return;
    }
    this.#finish(true);
  }

  #finish(dataDigestOk: boolean): void {
    const head = this.#head;
    if (this.#staging) {
      this.#data = [(this.#stage as Buffer).subarray(0, this.#dataLen)];
      this.#staging = false;
    }
    if (dataDigestOk && head[0] === PduType.CAPSULE_RESP && this.#opts.onCapsuleResp !== undefined) {
      // A CapsuleResp that straddled reads (or carries a header digest, already checked): the same in-place call.
      this.#go(RxState.CH);
      this.#head = this.#ch;
      this.#data = [];
      this.#opts.onCapsuleResp(head, CH_SIZE);
      return;
    }
    const pdu = decodePduHeader(head, this.#data, this.#dataLen);
    this.#go(RxState.CH);
    this.#head = this.#ch;
    this.#data = [];
    if (!dataDigestOk) {
      if (this.#opts.onDataDigestError !== undefined) this.#opts.onDataDigestError(pdu);
      else this.#fail({ fes: Fes.HEADER_DIGEST_ERROR, fei: 0, reason: 'data digest mismatch' }, head.subarray(0, head[2] as number));
      return;
    }
    this.#opts.onPdu(pdu);
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

