// One NVMe/TCP connection = one queue (TCP 1.0 §3.3): IC exchange, capsules, R2T/H2CData, C2HData, TermReq, batched writes.
import { Buffer } from 'node:buffer';
import type net from 'node:net';
import type { Logger } from 'pino';
import {
  Fes,
  PduBatch,
  PduReader,
  PduType,
  Status,
  encodePdu,
  fesName,
  termReqFor,
  type C2HDataPdu,
  type H2CDataPdu,
  type Pdu,
  type PduFraming,
  type ReaderFatal,
} from '../../../protocol/index.js';
import { adoptWithUserBuffer } from './user-buffer-socket.js';
import { CoreQueue, FABRICS_IN_CAPSULE_MAX, type CorePort, type QueueTransportOps, type Request, type TargetCore } from '../../core/index.js';
import { TcpCommand } from './command.js';

/**
 * Connection states: waiting for ICReq, waiting for Connect, connected (the core queue reported it went live), TermReq
 * sent / closing, gone. The transport owns these; the core queue owns its own (QUEUE_TRANSITIONS).
 */
export type TcpQueueState = 'ic-wait' | 'connect-wait' | 'live' | 'closing' | 'closed';

export const TCP_QUEUE_TRANSITIONS: Readonly<Record<TcpQueueState, readonly TcpQueueState[]>> = {
  'ic-wait': ['connect-wait', 'closing', 'closed'],
  'connect-wait': ['live', 'closing', 'closed'],
  live: ['closing', 'closed'],
  closing: ['closed'],
  closed: [],
};

export interface TcpQueueOptions {
  /** Close a connection that sends no ICReq (and then no Connect) within this many ms. */
  icReqTimeoutMs: number;
  /**
   * Shared receive buffer: libuv reads every connection into it (one read at a time on the event loop), instead of
   * a fresh 64 KiB allocation per read. Unset: ordinary 'data' events.
   */
  rxBuffer?: Buffer;
}

/** One owned copy of in-capsule data views (the receive buffer is reused after this read). */
function ownedData(data: Buffer[]): Buffer[] {
  return [data.length === 1 ? Buffer.from(data[0] as Buffer) : Buffer.concat(data)];
}

const H2C_DATAO_OFFSET = 12;
/**
 * Payloads up to this size are copied into the batch slab; larger ones go out as views of the backend's buffers
 * (zero-copy), except for the small payloads the adaptive policy below copies (COPY_BUDGET). Why a view of a RAM
 * chunk is safe (send-before-mutate): the read's completion (CapsuleResp, or the SUCCESS flag) follows its data in
 * the same byte stream, so the host cannot observe the completion before the kernel holds a copy of the data; any
 * write ordered after the read therefore lands after the copy. Only a write the host issued while the read was still
 * outstanding can change queued bytes, and NVMe leaves the result of such overlapping commands undefined (either
 * version per block, no tearing: the JS copy and the kernel copy never interleave). With data digests on, that would
 * break digest/data agreement, so the payload is then snapshotted into the slab when the digest is computed.
 */
const COPY_MAX = 0;
/** Largest C2HData payload that #sendC2H copies into the batch slab (adaptive policy, see COPY_BUDGET). */
const FIRST_COPY_MAX = 4096;
/**
 * Payload bytes per batch copied into the slab before switching to views. Up to about QD32 of 4 KiB reads a batch
 * then leaves as one contiguous write (one buffer, no cork/writev bookkeeping); deeper batches copy only their first
 * 128 KiB, so CPU per I/O at QD128 does not grow as it did with copying every payload (docs/performance.md, third pass:
 * QD32 +2–5 %, QD128 +2–4 % IOPS same-run).
 */
const COPY_BUDGET = 128 * 1024;
const H2C_TTAG_OFFSET = 10;
const H2C_CCCID_OFFSET = 8;

const NO_DATA: Buffer[] = [];
const EMPTY = Buffer.alloc(0);

export class TcpQueue implements QueueTransportOps {
  state: TcpQueueState = 'ic-wait';
  readonly core: CoreQueue;
  readonly peer: string;
  readonly #socket: net.Socket;
  /** Received chunks are views of a reused buffer (TcpQueueOptions.rxBuffer). */
  readonly #reuse: boolean;
  readonly #reader: PduReader;
  #logger: Logger | undefined;
  #framing: PduFraming = { hdgst: false, ddgst: false, pda: 0 };
  #timer: NodeJS.Timeout | undefined;
  readonly #r2t = new Map<number, TcpCommand>();
  #nextTtag = 1;
  /** Command records, each owning its core Request: reused so the data path allocates none per command. */
  readonly #pool: TcpCommand[] = [];
  /** Reused PDU objects for the per-command replies (the batch copies what it needs before returning). */
  readonly #c2h: C2HDataPdu = { type: PduType.C2H_DATA, cccid: 0, datao: 0, last: true, success: false, data: [] };
  readonly #c2hCrc: C2HDataPdu & { ddgst: number } = { type: PduType.C2H_DATA, cccid: 0, datao: 0, last: true, success: false, data: [], ddgst: 0 };
  readonly #batch = new PduBatch(256 * 1024, COPY_MAX);
  #flushScheduled = false;
  #inChunk = false;
  /** Per-queue in-flight data limit (port maxInFlightBytes) and what counts against it besides queued sends. */
  readonly #maxInFlight: number;
  /** Bytes of H2C data requested by R2T and not yet received. */
  #r2tBytes = 0;
  /** Bytes of read data whose backend read has not completed (async backends). */
  #execBytes = 0;
  /** Commands received while over the limit, in arrival order; submitted as data drains. */
  readonly #parked: TcpCommand[] = [];
  #pumpScheduled = false;
  #readPaused = false;
  /** socket.writableLength as of the last flush or drain (a getter through the stream prototypes: not per command). */
  #unsent = 0;
  readonly #c2hMax: number;
  #closeTimer: NodeJS.Timeout | undefined;
  readonly #onClosed: (q: TcpQueue) => void;

  constructor(
    readonly target: TargetCore,
    readonly port: CorePort,
    accepted: net.Socket,
    opts: TcpQueueOptions,
    onClosed: (q: TcpQueue) => void,
  ) {
    // Received bytes land in the listener's shared buffer (opts.rxBuffer), overwritten by the next read of any
    // connection: the reader copies what an incomplete PDU still needs (reusesChunks), and everything a command keeps
    // beyond this callback is copied here (#handleCapsule, #handleH2CData, #keepSqe).
    const socket = opts.rxBuffer === undefined ? accepted : adoptWithUserBuffer(accepted, opts.rxBuffer, (n, buf) => this.#onRead(n, buf));
    this.#socket = socket;
    this.#reuse = opts.rxBuffer !== undefined;
    this.#onClosed = onClosed;
    this.peer = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? 0}`;
    this.core = new CoreQueue(target, port, this);
    this.#reader = new PduReader({
      role: 'controller',
      onPdu: (pdu) => this.#handlePdu(pdu),
      onFatal: (f) => this.#fatal(f),
      onDataDigestError: (pdu) => this.#handleDataDigestError(pdu),
      maxDataLength: port.maxH2CData,
      maxInCapsuleData: Math.max(port.inlineDataSize, FABRICS_IN_CAPSULE_MAX),
      reusesChunks: opts.rxBuffer !== undefined,
    });
    this.#maxInFlight = port.maxInFlightBytes;
    this.#c2hMax = port.c2hDataSize;
    socket.setNoDelay(true);
    if (opts.rxBuffer === undefined) socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('drain', () => this.#pump());
    socket.on('error', (err) => this.#log.debug({ err }, 'socket error'));
    socket.on('close', () => this.#onSocketClose());
    this.#timer = setTimeout(() => this.#timeout('no ICReq'), opts.icReqTimeoutMs);
    this.#timer.unref();
    this.#icReqTimeoutMs = opts.icReqTimeoutMs;
  }

  readonly #icReqTimeoutMs: number;

  /** Child logger made on first use: a connection flood should not pay for one per connection (perf-flood.ts). */
  get #log(): Logger {
    this.#logger ??= this.target.logger.child({ peer: this.peer, port: this.port.id });
    return this.#logger;
  }

  get dataDigest(): boolean {
    return this.#framing.ddgst;
  }

  get localAddress(): string {
    return this.#socket.localAddress ?? '';
  }
  get localPort(): number {
    return this.#socket.localPort ?? 0;
  }

  setState(next: TcpQueueState): boolean {
    if (!TCP_QUEUE_TRANSITIONS[this.state].includes(next)) return false;
    if (this.target.logger.isLevelEnabled('trace')) this.#log.trace({ from: this.state, to: next }, 'queue state');
    this.state = next;
    return true;
  }

  /** onread callback: true keeps reading. */
  #onRead(n: number, buf: Buffer): boolean {
    this.#onData(buf.subarray(0, n));
    return true;
  }

  #onData(chunk: Buffer): void {
    // Network input never crashes the process: catch at the socket boundary and close only this connection.
    this.#inChunk = true;
    this.core.beginChunk();
    try {
      this.#reader.push(chunk);
      this.core.counters.bytesIn += chunk.length;
    } catch (err) {
      this.#log.error({ err }, 'internal error handling received data; closing connection');
      this.close('internal error');
    } finally {
      this.#inChunk = false;
      this.core.endChunk();
      this.#flush();
    }
  }

  #handlePdu(pdu: Pdu): void {
    switch (pdu.type) {
      case PduType.IC_REQ:
        return this.#handleIcReq(pdu.hpda, pdu.dgst);
      case PduType.CAPSULE_CMD:
        return this.#handleCapsule(pdu.sqe, pdu.data);
      case PduType.H2C_DATA:
        return this.#handleH2CData(pdu, false);
      case PduType.H2C_TERM_REQ:
        this.#log.warn({ fes: pdu.fes, fei: pdu.fei, reason: fesName(pdu.fes) }, 'host sent H2CTermReq; closing');
        this.close('H2CTermReq');
        return;
      default:
        // The host-role types never reach a controller reader; anything else is a sequence error.
        this.#fatal({ fes: Fes.PDU_SEQUENCE_ERROR, fei: 0, reason: `unexpected PDU type ${pdu.type}`, header: Buffer.from([pdu.type]) });
    }
  }

  #handleIcReq(hpda: number, dgst: number): void {
    if (hpda !== 0) {
      // nvmet rejects a non-zero HPDA (NVMe-TCP 1.0 §3.6.2, ICReq); report it as an unsupported parameter at offset 10.
      this.#fatal({ fes: Fes.UNSUPPORTED_PARAMETER, fei: 10, reason: `HPDA ${hpda} not supported`, header: Buffer.alloc(0) });
      return;
    }
    const hdgst = (dgst & 1) !== 0;
    const ddgst = (dgst & 2) !== 0;
    // Echo the host's digest request exactly and CPDA 0: the Linux host fails the connection on any other answer
    // (nvme_tcp_init_connection); NVMe-TCP 1.0 §3.6.2, ICResp.
    this.#send({ type: PduType.IC_RESP, pfv: 0, cpda: 0, dgst: dgst & 3, maxh2cdata: this.port.maxH2CData });
    this.#framing = { hdgst, ddgst, pda: 0 };
    this.#reader.setFraming(hdgst, ddgst, 0);
    this.setState('connect-wait');
    this.#restartTimer('no Connect after ICResp');
  }

  #restartTimer(reason: string): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#timeout(reason), this.#icReqTimeoutMs);
    this.#timer.unref();
  }

  #timeout(reason: string): void {
    this.#timer = undefined;
    if (this.state === 'ic-wait' || this.state === 'connect-wait') {
      this.#log.info({ reason }, 'closing idle connection');
      this.close(reason);
    }
  }

  #alloc(): TcpCommand {
    const c = this.#pool.pop() ?? new TcpCommand();
    c.reset();
    return c;
  }

  #handleCapsule(sqe: Buffer, data: Buffer[]): void {
    const cmd = this.#alloc();
    if (this.#parked.length > 0 || this.#overLimit()) {
      // Over the in-flight limit: the command waits (in order) instead of adding more data; a copy of the SQE so
      // the parked command does not pin the received chunk.
      cmd.req.load(Buffer.from(sqe), data.length > 0 ? (this.#reuse ? ownedData(data) : data) : undefined);
      this.#parked.push(cmd);
      return;
    }
    // In-capsule data is copied: an async backend (file) writes it after this read's buffer is reused.
    cmd.req.load(sqe, data.length > 0 ? (this.#reuse ? ownedData(data) : data) : undefined);
    this.#submit(cmd);
  }

  /** A command still running (R2T wait, async backend) reads its SQE later: give it its own copy. */
  #keepSqe(req: Request): void {
    if (this.#reuse && (req.state === 'exec' || req.state === 'need-data') && req.sqe.length > 0) req.sqe = Buffer.from(req.sqe);
  }

  #submit(cmd: TcpCommand): void {
    const req = cmd.req;
    this.core.submit(req);
    this.#keepSqe(req);
    // Still executing after submit: an async backend read whose data will need sending (the RAM backend has
    // already completed and released the request here).
    if (req.state === 'exec' && req.dir === 'c2h') {
      cmd.pendingRead = req.dataLen;
      this.#execBytes += req.dataLen;
    }
  }

  /** Data in flight on this queue: awaited R2T data, running reads, and replies not yet taken by the kernel. */
  #inFlightBytes(): number {
    return this.#r2tBytes + this.#execBytes + this.#batch.bytes + this.#unsent;
  }

  #overLimit(): boolean {
    return this.#inFlightBytes() >= this.#maxInFlight;
  }

  /** Submit parked commands while under the limit; stop or restart reading the socket to match. */
  #pump(): void {
    this.#pumpScheduled = false;
    this.#unsent = this.#socket.writableLength;
    if (this.state === 'closing' || this.state === 'closed') return;
    let progressed = false;
    while (this.#parked.length > 0 && !this.#overLimit()) {
      this.#submit(this.#parked.shift() as TcpCommand);
      progressed = true;
    }
    if (progressed) this.#sent();
    this.#updateReading();
  }

  /**
   * Backpressure: stop reading while commands are parked or unsent replies exceed the limit — but never while R2T data
   * is awaited, since only reading can deliver it (the parked list bounds memory then; the host's queue depth bounds it).
   */
  #updateReading(): void {
    this.#unsent = this.#socket.writableLength;
    const stop = (this.#parked.length > 0 || this.#unsent >= this.#maxInFlight) && this.#r2tBytes === 0;
    if (stop && !this.#readPaused) {
      this.#readPaused = true;
      this.#socket.pause();
      this.#log.debug({ inFlight: this.#inFlightBytes(), limit: this.#maxInFlight, parked: this.#parked.length }, 'in-flight limit reached: pausing reads');
    } else if (!stop && this.#readPaused) {
      this.#readPaused = false;
      this.#socket.resume();
    }
    // Parked work that can proceed without a 'drain' (the kernel took everything, or a backend read finished).
    if (this.#parked.length > 0 && !this.#pumpScheduled && !this.#overLimit()) {
      this.#pumpScheduled = true;
      setImmediate(() => this.#pump());
    }
  }

  /**
   * One R2T for the whole length (the Linux host accepts R2TL up to MAXH2CDATA and answers with H2CData PDUs of at
   * most that size; NVMe-TCP 1.0 §3.6.2, R2T).
   */
  requestData(req: Request): void {
    const cmd = TcpCommand.of(req);
    let ttag = this.#nextTtag;
    while (this.#r2t.has(ttag)) ttag = ttag >= 0xfffe ? 1 : ttag + 1;
    this.#nextTtag = ttag >= 0xfffe ? 1 : ttag + 1;
    cmd.ttag = ttag;
    cmd.received = 0;
    cmd.h2c = [];
    this.#r2t.set(ttag, cmd);
    this.#r2tBytes += req.dataLen;
    this.#send({ type: PduType.R2T, cccid: req.cid, ttag, r2to: 0, r2tl: req.dataLen });
  }

  #handleH2CData(pdu: H2CDataPdu, digestBad: boolean): void {
    const cmd = this.#r2t.get(pdu.ttag);
    const header = this.#h2cHeader(pdu);
    if (cmd === undefined) return this.#fatal({ fes: Fes.INVALID_HEADER_FIELD, fei: H2C_TTAG_OFFSET, reason: `H2CData with unknown ttag ${pdu.ttag}`, header });
    const req = cmd.req;
    if (req.cid !== pdu.cccid) return this.#fatal({ fes: Fes.INVALID_HEADER_FIELD, fei: H2C_CCCID_OFFSET, reason: `H2CData cccid ${pdu.cccid} for ttag of cid ${req.cid}`, header });
    let len = 0;
    for (const b of pdu.data) len += b.length;
    if (pdu.datao !== cmd.received || pdu.datao + len > req.dataLen) {
      return this.#fatal({ fes: Fes.DATA_OUT_OF_RANGE, fei: H2C_DATAO_OFFSET, reason: `H2CData datao ${pdu.datao} len ${len}: expected offset ${cmd.received} of ${req.dataLen}`, header });
    }
    // Copied: the data is gathered across reads and written by the backend later (the read buffer is reused).
    if (this.#reuse) {
      for (const b of pdu.data) cmd.h2c.push(b.length > 0 ? Buffer.from(b) : b);
    } else {
      for (const b of pdu.data) cmd.h2c.push(b);
    }
    cmd.received += len;
    this.#r2tBytes -= len;
    if (digestBad) cmd.dataDigestError = true;
    if (cmd.received < req.dataLen) return;
    this.#r2t.delete(pdu.ttag);
    if (cmd.dataDigestError) {
      // A data digest error completes the command with a transient transport error, so the host retries (TCP 1.0 §3.6.1.4).
      this.target.stats.dataDigestErrors++;
      this.core.complete(req, Status.TRANSIENT_TRANSPORT);
      return;
    }
    req.data = cmd.h2c;
    this.core.execute(req);
  }

  #h2cHeader(pdu: H2CDataPdu): Buffer {
    return encodePdu({ ...pdu, data: [] }, this.#framing)[0]?.subarray(0, 24) ?? Buffer.alloc(0);
  }

  #handleDataDigestError(pdu: Pdu): void {
    if (pdu.type === PduType.H2C_DATA) return this.#handleH2CData(pdu, true);
    if (pdu.type === PduType.CAPSULE_CMD) {
      this.target.stats.dataDigestErrors++;
      const req = this.#alloc().req;
      req.load(pdu.sqe, undefined);
      this.#log.warn({ cid: req.cid }, 'data digest error on in-capsule data');
      this.core.reject(req, Status.TRANSIENT_TRANSPORT);
      this.#keepSqe(req);
      return;
    }
    this.#fatal({ fes: Fes.HEADER_DIGEST_ERROR, fei: 0, reason: 'data digest error', header: Buffer.alloc(0) });
  }

  /** Completion from core: C2HData (split at c2hDataSize, SUCCESS only with SQ flow control off), then CapsuleResp. */
  queueResponse(req: Request): void {
    const cmd = TcpCommand.of(req);
    if (cmd.pendingRead > 0) {
      this.#execBytes -= cmd.pendingRead;
      cmd.pendingRead = 0;
    }
    if (this.state === 'closing' || this.state === 'closed') return this.#release(cmd);
    const out = req.out;
    let skipResp = false;
    if (out !== undefined && req.status === 0) {
      const success = this.core.sqflowDisabled && req.dw0 === 0 && req.dw1 === 0;
      this.#sendC2H(req.cid, out, success, req.outCrc);
      skipResp = success;
    }
    if (!skipResp) {
      this.#batch.addCapsuleRespCqe(req.dw0, req.dw1, req.sqhd, this.core.qid < 0 ? 0 : this.core.qid, req.cid, req.status, this.#framing);
      this.#sent();
    }
    this.#release(cmd);
  }

  /** The core queue went live (Connect bound it): the connection is connected and the Connect timer stops. */
  queueLive(): void {
    if (!this.setState('live')) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /**
   * `crc`: the backend's CRC32C of all of `out`, which also promises `out` never changes; otherwise, with data digests
   * on, each payload is snapshotted so its digest matches the bytes sent (see COPY_MAX).
   */
  #sendC2H(cid: number, out: Buffer[], success: boolean, crc: number | undefined): void {
    const max = this.#c2hMax;
    let total = 0;
    for (const b of out) total += b.length;
    const pdu = this.#c2h;
    pdu.cccid = cid;
    const snapshot = this.#framing.ddgst && crc === undefined;
    if (total <= max) {
      // Small payloads are copied into the slab while the batch's copy budget lasts: a lone read (QD1) or a QD32 batch
      // then leaves as one contiguous write instead of a cork/writev of many pieces; deeper batches continue as views.
      const copy = snapshot || (total <= FIRST_COPY_MAX && this.#batch.copied + total <= COPY_BUDGET);
      // Two reused objects, so that each keeps one shape (with and without a known digest).
      const one = crc === undefined ? pdu : this.#c2hCrc;
      one.cccid = cid;
      one.datao = 0;
      one.last = true;
      one.success = success;
      one.data = out;
      if (crc !== undefined) this.#c2hCrc.ddgst = crc;
      this.#batch.addC2HData(one, this.#framing, copy);
      this.#sent();
      one.data = NO_DATA;
      return;
    }
    let datao = 0;
    let piece: Buffer[] = [];
    let pieceLen = 0;
    const emit = (last: boolean): void => {
      pdu.datao = datao;
      pdu.last = last;
      pdu.success = last && success;
      pdu.data = piece;
      this.#batch.addC2HData(pdu, this.#framing, snapshot);
      this.#sent();
      datao += pieceLen;
      piece = [];
      pieceLen = 0;
    };
    for (const b of out) {
      let off = 0;
      while (off < b.length) {
        const n = Math.min(b.length - off, max - pieceLen);
        piece.push(off === 0 && n === b.length ? b : b.subarray(off, off + n));
        pieceLen += n;
        off += n;
        if (pieceLen === max) emit(datao + pieceLen === total);
      }
    }
    if (pieceLen > 0) emit(true);
    pdu.data = NO_DATA;
  }

  #release(cmd: TcpCommand): void {
    cmd.release();
    if (this.#pool.length < 256) this.#pool.push(cmd);
  }

  /** Add a reply to the current batch; it goes out with the batch at the end of the received chunk (or tick). */
  #send(pdu: Pdu): void {
    if (this.state === 'closed') return;
    this.#batch.add(pdu, this.#framing);
    this.#sent();
  }

  /** Something was added to the batch: outside a received chunk, flush it on the next tick. */
  #sent(): void {
    if (!this.#inChunk && !this.#flushScheduled) {
      this.#flushScheduled = true;
      process.nextTick(() => this.#flush());
    }
  }

  /** One write per batch: a single chunk directly, several under cork/uncork (one writev; docs/performance.md). */
  #flush(): void {
    this.#flushScheduled = false;
    const batch = this.#batch;
    if (batch.empty) return;
    this.core.counters.bytesOut += batch.bytes;
    const chunks = batch.take();
    const s = this.#socket;
    if (this.state === 'closed' || s.destroyed) {
      batch.recycle(false);
      return;
    }
    if (chunks.length === 1) s.write(chunks[0] as Buffer);
    else {
      s.cork();
      for (const c of chunks) s.write(c);
      s.uncork();
    }
    // A write libuv completed synchronously leaves nothing buffered: the slab may be reused from the start.
    // Otherwise pooled buffers come back once the stream has flushed this batch (its callbacks run in order).
    // Read once per batch: between flushes the stream only shrinks, so this is an upper bound for #inFlightBytes.
    this.#unsent = s.writableLength;
    const release = batch.recycle(this.#unsent > 0);
    if (release !== undefined) s.write(EMPTY, release);
    if (this.#parked.length > 0 || this.#readPaused || this.#unsent >= this.#maxInFlight) this.#updateReading();
  }

  #fatal(f: ReaderFatal): void {
    if (this.state === 'closing' || this.state === 'closed') return;
    this.target.countPduError(f.fes);
    this.#log.warn({ fes: f.fes, fei: f.fei, reason: f.reason, hostnqn: this.core.ctrl?.hostnqn, qid: this.core.qid }, `fatal transport error (${fesName(f.fes)}): sending C2HTermReq`);
    this.#send(termReqFor('controller', f));
    this.#flush();
    this.setState('closing');
    this.#socket.end();
    this.#closeTimer = setTimeout(() => this.#socket.destroy(), 1000);
    this.#closeTimer.unref();
    this.#failPending();
  }

  /** Core/teardown-initiated close. */
  close(reason: string): void {
    if (this.state === 'closed') return;
    if (this.target.logger.isLevelEnabled('debug')) this.#log.debug({ reason }, 'closing connection');
    this.#flush();
    if (this.state !== 'closing') this.setState('closing');
    this.#socket.destroy();
    this.#failPending();
  }

  #failPending(): void {
    this.#r2t.clear();
    this.#r2tBytes = 0;
    for (const r of this.#parked.splice(0)) this.#release(r);
  }

  #onSocketClose(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    if (this.#closeTimer !== undefined) clearTimeout(this.#closeTimer);
    this.#timer = undefined;
    this.#failPending();
    this.setState('closed');
    this.core.onTransportClosed();
    this.#onClosed(this);
  }

  /** Wait until nothing is in flight (graceful stop), at most `ms`. */
  async drain(ms: number): Promise<void> {
    const end = Date.now() + ms;
    while (this.core.inFlight + this.#parked.length - (this.core.ctrl?.aers.length ?? 0) > 0 && Date.now() < end && this.state !== 'closed') {
      await new Promise((r) => setTimeout(r, 5));
    }
  }
}

