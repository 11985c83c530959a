// One NVMe/TCP connection = one queue (TCP 1.0 §3.3), controller role: IC exchange, capsules, R2T/H2CData, C2HData,
// in-flight limits. The connection core (connection/) owns the socket, the reader's error boundary, the batched
// writes and fatal error → C2HTermReq → end → destroy.
import { Buffer } from 'node:buffer';
import type net from 'node:net';
import type { Logger } from 'pino';
import {
  DATA_PDU_HLEN,
  DataPduOffset,
  FABRICS_OPCODE,
  Fes,
  PDU_MAX_HEADER_BYTES,
  PduType,
  Status,
  checkH2CData,
  encodePduInto,
  fesName,
  packDigests,
  setLongTimeout,
  unpackDigests,
  type C2HDataPdu,
  type H2CDataPdu,
  type LongTimeout,
  type Pdu,
  type PduHandlers,
} from '../../../protocol/index.js';
import { C2HPayload, TcpConnection, type ConnectionFatal, type ConnectionHandler, type DirectPduHandlers, type ResumedConnection } from '../../../connection/index.js';
import { CoreQueue, FABRICS_IN_CAPSULE_MAX, type IcReqFault, type HostLogLimiter, ReadLent, ReqStateId, type TargetController, type CorePort, type QueueHandle, type QueueTransportOps, type Request, type TargetCore, type TlsPskInfo } from '../../core/index.js';
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
  /** The socket is a TLS session (TP 8011); shown per queue in GET /controllers. */
  tls?: boolean;
  /** The TLS session's PSK identity (secure channel concatenation needs the kind and the NQNs at Connect). */
  tlsPsk?: TlsPskInfo;
  /** Cleartext on a 'required' port with concatenation: an admin queue for DH-HMAC-CHAP NEWTLSPSK only. */
  concatOnly?: boolean;
  /** Moves I/O queues to worker processes once connected (target/workers); unset: every queue stays here. */
  handOff?: QueueHandOff;
}

/** What a worker needs to continue an I/O queue the primary connected. */
export interface HandedOffQueue {
  portId: number;
  subnqn: string;
  cntlid: number;
  hostnqn: string;
  qid: number;
  sqsize: number;
  sqflowDisabled: boolean;
  hdgst: boolean;
  ddgst: boolean;
  /** The queue's ICReq and Connect times in the primary (epoch ms), for the controller's queue view. */
  setupTimes?: { icReqAt?: number; connectAt?: number };
}

/**
 * The primary side of the hand-off: an I/O queue's Connect succeeded (and it needs no authentication). `accept`
 * says whether to move it; after its response is written, `take` gets the socket and returns the handle that stands
 * for the queue in its controller (or undefined after it closed the socket itself).
 */
export interface QueueHandOff {
  accept(q: HandedOffQueue): boolean;
  take(socket: net.Socket, q: HandedOffQueue, ctrl: TargetController, pending: Buffer | undefined): QueueHandle | undefined;
}

/** Worker side: start a queue on a received socket, already connected (bound to `ctrl` as queue `qid`). */
export interface ResumeQueue {
  conn: ResumedConnection;
  ctrl: TargetController;
  qid: number;
  sqsize: number;
  sqflowDisabled: boolean;
}

/** One owned copy of in-capsule data views (the receive buffer is reused after this read). */
function ownedData(data: Buffer[]): Buffer[] {
  return [data.length === 1 ? Buffer.from(data[0] as Buffer) : Buffer.concat(data)];
}

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

/** Send batch slab per connection. */
const BATCH_SLAB = 256 * 1024;
/** After a C2HTermReq the host gets this long to read it before the socket is destroyed. */
const TERM_LINGER_MS = 1000;

const NO_DATA: Buffer[] = [];

/**
 * The controller side of one connection. It is the connection's ConnectionHandler itself (the on* methods), so a
 * received PDU reaches its handler without another closure.
 */
export class TargetTcpQueue implements QueueTransportOps, ConnectionHandler {
  #state: TcpQueueState = 'ic-wait';
  readonly core: CoreQueue;
  readonly peer: string;
  readonly #conn: TcpConnection;
  /** Received chunks are views of a reused buffer (TcpQueueOptions.rxBuffer). */
  readonly #reuse: boolean;
  #logger: Logger | undefined;
  /** ICReq / Connect wait: icReqTimeoutS comes from the config or the API (a LongTimeout keeps any length). */
  #timer: LongTimeout | undefined;
  readonly #r2t = new Map<number, TcpCommand>();
  #nextTtag = 1;
  /** Command records, each owning its core Request: reused so the data path allocates none per command. */
  readonly #pool: TcpCommand[] = [];
  /** Reused PDU objects for the per-command replies (the batch copies what it needs before returning). */
  readonly #c2h: C2HDataPdu = { type: PduType.C2H_DATA, cccid: 0, datao: 0, last: true, success: false, data: [] };
  readonly #c2hCrc: C2HDataPdu & { ddgst: number } = { type: PduType.C2H_DATA, cccid: 0, datao: 0, last: true, success: false, data: [], ddgst: 0 };
  /** Per-queue in-flight data limit (port maxInFlightBytes) and what counts against it besides queued sends. */
  readonly #maxInFlight: number;
  /** Bytes of H2C data requested by R2T and not yet received. */
  #r2tBytes = 0;
  /** Bytes of read data whose backend read has not completed (async backends). */
  #execBytes = 0;
  /** Commands received while over the limit, in arrival order; submitted as data drains. */
  readonly #parked: TcpCommand[] = [];
  #pumpScheduled = false;
  /** socket.writableLength as of the last flush or drain (a getter through the stream prototypes: not per command). */
  #unsent = 0;
  readonly #c2hMax: number;
  readonly #onClosed: (q: TargetTcpQueue) => void;

  constructor(
    readonly target: TargetCore,
    readonly port: CorePort,
    accepted: net.Socket,
    opts: TcpQueueOptions,
    onClosed: (q: TargetTcpQueue) => void,
    resume?: ResumeQueue,
  ) {
    // Received bytes land in the listener's shared buffer (opts.rxBuffer), overwritten by the next read of any
    // connection: the reader copies what an incomplete PDU still needs (reusesChunks), and everything a command keeps
    // beyond the handler call is copied here (#handleCapsule, #handleH2CData, #keepSqe).
    this.#reuse = opts.rxBuffer !== undefined;
    this.#onClosed = onClosed;
    this.#maxInFlight = port.maxInFlightBytes;
    this.#c2hMax = port.c2hDataSize;
    this.core = new CoreQueue(target, port, this);
    this.#handOff = opts.handOff;
    const connOpts = {
      role: 'controller' as const,
      handler: this,
      maxDataLength: port.maxH2CData,
      maxInCapsuleData: Math.max(port.inlineDataSize, FABRICS_IN_CAPSULE_MAX),
      batchSlab: BATCH_SLAB,
      batchCopyMax: COPY_MAX,
      lingerMs: TERM_LINGER_MS,
      ...(opts.rxBuffer !== undefined ? { rxBuffer: opts.rxBuffer } : {}),
    };
    this.#icReqTimeoutMs = opts.icReqTimeoutMs;
    this.tls = opts.tls === true;
    if (opts.tlsPsk !== undefined) this.tlsPsk = opts.tlsPsk;
    if (opts.concatOnly === true) this.concatOnly = true;
    if (resume !== undefined) {
      // Handed off by the primary after Connect: IC and Connect happened there; go straight to live.
      this.#conn = TcpConnection.resume(accepted, connOpts, resume.conn);
      this.peer = `${this.#conn.remoteAddress ?? '?'}:${this.#conn.remotePort ?? 0}`;
      this.setState('connect-wait');
      this.core.bindHandedOff(resume.ctrl, resume.qid, resume.sqsize, resume.sqflowDisabled);
      return;
    }
    this.#conn = TcpConnection.accept(accepted, connOpts);
    this.peer = `${this.#conn.remoteAddress ?? '?'}:${this.#conn.remotePort ?? 0}`;
    this.#timer = setLongTimeout(() => this.#timeout('no ICReq'), opts.icReqTimeoutMs, 'icReqTimeoutS').unref();
  }

  /** The connection runs over TLS 1.3 (TP 8011). */
  readonly tls: boolean;
  readonly tlsPsk?: TlsPskInfo;
  readonly concatOnly?: boolean;

  readonly #icReqTimeoutMs: number;
  readonly #handOff: QueueHandOff | undefined;
  /** The Connect of this I/O queue completed and its connection is being moved to a worker (QueueHandOff). */
  #handingOff: HandedOffQueue | undefined;

  /** The log limit this connection's host lines go through: its controller's, or its port's before it has one. */
  get #hostLog(): HostLogLimiter {
    return this.core.ctrl?.hostLog ?? this.target.portHostLog(this.port);
  }

  /** Child logger made on first use: a connection flood should not pay for one per connection (perf-flood.ts). */
  get #log(): Logger {
    this.#logger ??= this.target.logger.child({ peer: this.peer, port: this.port.id });
    return this.#logger;
  }

  get dataDigest(): boolean {
    return this.#conn.framing.ddgst;
  }

  get localAddress(): string {
    return this.#conn.localAddress ?? '';
  }
  get localPort(): number {
    return this.#conn.localPort ?? 0;
  }

  get state(): TcpQueueState {
    return this.#state;
  }

  /** The one place the connection state changes: refuses (returns false) any edge not in TCP_QUEUE_TRANSITIONS. */
  setState(next: TcpQueueState): boolean {
    const from = this.#state;
    if (!TCP_QUEUE_TRANSITIONS[from].includes(next)) return false;
    if (this.target.logger.isLevelEnabled('trace')) this.#log.trace({ from, to: next }, 'queue state');
    this.#state = next;
    return true;
  }

  /** ConnectionHandler: a received chunk begins (one clock read for the chunk's commands, CoreQueue.beginChunk). */
  onChunkStart(): void {
    this.core.beginChunk();
  }

  /** ConnectionHandler: the chunk is handled; its replies are written right after. */
  onChunkEnd(): void {
    this.core.counters.bytesIn = this.#conn.bytesIn;
    this.core.endChunk();
  }

  /** ConnectionHandler: a handler threw on received data; the connection core destroys the connection next. */
  onInternalError(err: unknown): void {
    this.#log.error({ err }, 'internal error handling received data; closing connection');
    if (this.state !== 'closing' && this.state !== 'closed') this.setState('closing');
    this.#failPending();
  }

  /** ConnectionHandler: a batch went to the socket; `unsent` is what the socket still buffers. */
  onFlushed(bytes: number, unsent: number): void {
    this.core.counters.bytesOut += bytes;
    // Read once per batch: between flushes the stream only shrinks, so this is an upper bound for #inFlightBytes.
    this.#unsent = unsent;
    if (this.#parked.length > 0 || this.#conn.readingPaused || unsent >= this.#maxInFlight) this.#updateReading();
  }

  /** ConnectionHandler: the socket's write buffer drained. */
  onDrain(): void {
    this.#pump();
  }

  /**
   * A PDU behind the Connect in the same read, before its response could reach the host, cannot travel with the
   * socket being handed off (it is parsed here): the queue goes and the host reconnects. True when that happened.
   */
  #refusedDuringHandOff(): boolean {
    if (this.#handingOff === undefined) return false;
    this.close('PDU received before the Connect response');
    return true;
  }

  /**
   * ConnectionHandler: one entry per PDU kind a controller takes (the reader refuses the controller-to-host types; the
   * connection core makes any other kind a sequence error).
   */
  readonly received: PduHandlers = {
    [PduType.IC_REQ]: (pdu) => {
      if (!this.#refusedDuringHandOff()) this.#handleIcReq(pdu.hpda, pdu.dgst);
    },
    [PduType.CAPSULE_CMD]: (pdu) => {
      if (!this.#refusedDuringHandOff()) this.#handleCapsule(pdu.sqe, pdu.data);
    },
    [PduType.H2C_DATA]: (pdu) => {
      if (!this.#refusedDuringHandOff()) this.#handleH2CData(pdu, false);
    },
    [PduType.H2C_TERM_REQ]: (pdu) => {
      if (this.#refusedDuringHandOff()) return;
      if (this.#hostLog.allow('h2c_term_req')) this.#log.warn({ fes: pdu.fes, fei: pdu.fei, reason: fesName(pdu.fes) }, 'host sent H2CTermReq; closing');
      this.close('H2CTermReq');
    },
  };

  /** ConnectionHandler: a CapsuleCmd without in-capsule data as its SQE (the reader's fast path; `received` otherwise). */
  readonly direct: DirectPduHandlers = {
    [PduType.CAPSULE_CMD]: (sqe) => {
      if (!this.#refusedDuringHandOff()) this.#handleCapsule(sqe, NO_DATA);
    },
  };

  #handleIcReq(hpda: number, dgst: number): void {
    this.core.icReqReceived();
    const faults = this.target.faults;
    const fault = faults.armed ? faults.onIcReq(this.port.id, this.peer) : undefined;
    if (fault !== undefined) return this.#faultIcReq(fault, hpda, dgst);
    const { hdgst, ddgst } = unpackDigests(dgst);
    // Echo the host's digest request exactly and CPDA 0: the Linux host fails the connection on any other answer
    // (nvme_tcp_init_connection); NVMe-TCP 1.0 §3.6.2.3, ICResp.
    this.#sendIcResp(hpda, hdgst, ddgst, 0, this.port.maxH2CData);
  }

  #sendIcResp(hpda: number, hdgst: boolean, ddgst: boolean, cpda: number, maxh2cdata: number): void {
    this.#conn.send({ type: PduType.IC_RESP, pfv: 0, cpda, dgst: packDigests(hdgst, ddgst), maxh2cdata });
    // HPDA "specifies the data alignment for all PDUs transferred from the controller to the host that contain data"
    // (NVMe-TCP 1.0 §3.6.2.2; 0..31, the reader refuses more): C2HData is padded to it. nvmet refuses any HPDA ≠ 0;
    // SPDK and FreeBSD honour it, and hosts other than Linux may ask for it. CPDA is what H2CData is padded to.
    this.#conn.setFraming(hdgst, ddgst, hpda, cpda);
    this.setState('connect-wait');
    this.#restartTimer('no Connect after ICResp');
  }

  /**
   * An ICReq fault rule fired (docs/faults.md): close, or an ICResp late, never, or with the fields the rule gives
   * (digests as answered are then this connection's framing). Never: the ICReq timer closes the connection.
   */
  #faultIcReq(f: IcReqFault, hpda: number, dgst: number): void {
    if (f.kind === 'close') return this.hangUp(f.rst === true);
    if (f.never === true) return;
    const asked = unpackDigests(dgst);
    const send = (): void => {
      if (this.state === 'ic-wait') this.#sendIcResp(hpda, f.hdgst ?? asked.hdgst, f.ddgst ?? asked.ddgst, f.cpda ?? 0, f.maxh2cdata ?? this.port.maxH2CData);
    };
    if ((f.delayMs ?? 0) > 0) setLongTimeout(send, f.delayMs as number, 'icresp delayMs').unref();
    else send();
  }

  #restartTimer(reason: string): void {
    this.#timer?.clear();
    this.#timer = setLongTimeout(() => this.#timeout(reason), this.#icReqTimeoutMs, 'icReqTimeoutS').unref();
  }

  #timeout(reason: string): void {
    this.#timer = undefined;
    if (this.state === 'ic-wait' || this.state === 'connect-wait') {
      if (this.#hostLog.allow('idle_connection')) this.#log.info({ reason }, 'closing idle connection');
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
    if (this.#reuse && (req.stateId === ReqStateId.EXEC || req.stateId === ReqStateId.NEED_DATA) && req.sqe.length > 0) req.sqe = Buffer.from(req.sqe);
  }

  #submit(cmd: TcpCommand): void {
    const req = cmd.req;
    this.core.submit(req);
    this.#keepSqe(req);
    // Still executing after submit: an async backend read whose data will need sending (the RAM backend has
    // already completed and released the request here).
    if (req.stateId === ReqStateId.EXEC && req.dir === 'c2h') {
      cmd.pendingRead = req.dataLen;
      this.#execBytes += req.dataLen;
    }
  }

  /** Data in flight on this queue: awaited R2T data, running reads, and replies not yet taken by the kernel. */
  #inFlightBytes(): number {
    return this.#r2tBytes + this.#execBytes + this.#conn.batchBytes + this.#unsent;
  }

  #overLimit(): boolean {
    return this.#inFlightBytes() >= this.#maxInFlight;
  }

  /** Submit parked commands while under the limit; stop or restart reading the socket to match. */
  #pump(): void {
    this.#pumpScheduled = false;
    this.#unsent = this.#conn.writableLength;
    if (this.state === 'closing' || this.state === 'closed') return;
    while (this.#parked.length > 0 && !this.#overLimit()) this.#submit(this.#parked.shift() as TcpCommand);
    this.#updateReading();
  }

  /**
   * Backpressure: stop reading while commands are parked or unsent replies exceed the limit — but never while R2T data
   * is awaited, since only reading can deliver it (the parked list bounds memory then; the host's queue depth bounds it).
   */
  #updateReading(): void {
    const conn = this.#conn;
    this.#unsent = conn.writableLength;
    const stop = (this.#parked.length > 0 || this.#unsent >= this.#maxInFlight) && this.#r2tBytes === 0;
    if (stop && !conn.readingPaused) {
      conn.pauseReading();
      this.#log.debug({ inFlight: this.#inFlightBytes(), limit: this.#maxInFlight, parked: this.#parked.length }, 'in-flight limit reached: pausing reads');
    } else if (!stop && conn.readingPaused) {
      conn.resumeReading();
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
    this.#conn.send({ type: PduType.R2T, cccid: req.cid, ttag, r2to: 0, r2tl: req.dataLen });
  }

  #handleH2CData(pdu: H2CDataPdu, digestBad: boolean): void {
    // The offending header goes into the C2HTermReq; it is encoded only on these failure paths.
    const cmd = this.#r2t.get(pdu.ttag);
    if (cmd === undefined) {
      this.#conn.fatal({ fes: Fes.INVALID_HEADER_FIELD, fei: DataPduOffset.ttag, reason: `H2CData with unknown ttag ${pdu.ttag}`, header: this.#h2cHeader(pdu) });
      return;
    }
    const req = cmd.req;
    if (req.cid !== pdu.cccid) {
      this.#conn.fatal({ fes: Fes.INVALID_HEADER_FIELD, fei: DataPduOffset.cccid, reason: `H2CData cccid ${pdu.cccid} for ttag of cid ${req.cid}`, header: this.#h2cHeader(pdu) });
      return;
    }
    let len = 0;
    for (const b of pdu.data) len += b.length;
    const range = checkH2CData(pdu.datao, len, cmd.received, req.dataLen);
    if (range !== undefined) {
      this.#conn.fatal({ ...range, header: this.#h2cHeader(pdu) });
      return;
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

  /**
   * The header of the H2CData in error for the C2HTermReq (NVMe-TCP 1.0 §3.6.2.5), with the PDO, PLEN and DATAL it
   * arrived with: laid out again with its data (H2C data is aligned to our CPDA, 0). Only on these failure paths.
   */
  #h2cHeader(pdu: H2CDataPdu): Buffer {
    const f = this.#conn.framing;
    const head = Buffer.alloc(PDU_MAX_HEADER_BYTES);
    encodePduInto(head, 0, pdu, { hdgst: f.hdgst, ddgst: f.ddgst, pda: 0 });
    return head.subarray(0, DATA_PDU_HLEN);
  }

  /** ConnectionHandler: a PDU whose data digest did not match (NVMe-TCP 1.0 §3.6.1.4: the command fails, the connection stays). */
  onDataDigestError(pdu: Pdu): void {
    if (pdu.type === PduType.H2C_DATA) return this.#handleH2CData(pdu, true);
    if (pdu.type === PduType.CAPSULE_CMD) {
      this.target.stats.dataDigestErrors++;
      const req = this.#alloc().req;
      req.load(pdu.sqe, undefined);
      if (this.#hostLog.allow('data_digest')) this.#log.warn({ cid: req.cid }, 'data digest error on in-capsule data');
      this.core.reject(req, Status.TRANSIENT_TRANSPORT);
      this.#keepSqe(req);
      return;
    }
    this.#conn.fatal({ fes: Fes.HEADER_DIGEST_ERROR, fei: 0, reason: 'data digest error' });
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
    const conn = this.#conn;
    const sqid = this.core.qid < 0 ? 0 : this.core.qid;
    const data = out !== undefined && req.status === 0 ? out : undefined;
    // SUCCESS in the last C2HData replaces the CapsuleResp only with SQ flow control disabled (NVMe-TCP 1.0 §3.6.2.9).
    const success = data !== undefined && this.core.sqflowDisabled && req.dw0 === 0 && req.dw1 === 0;
    if (data !== undefined && this.#oneCopiedPayload(data, req.outLent)) {
      // The common read: one small payload, no digests. Copied into the slab as #sendC2H would, in one call with its CQE.
      conn.sendResponse(data[0] as Buffer, success, req.dw0, req.dw1, req.sqhd, sqid, req.cid, 0);
    } else {
      if (data !== undefined) this.#sendC2H(req.cid, data, success, req.outCrc, req.outLent);
      if (!success) conn.sendResponse(undefined, false, req.dw0, req.dw1, req.sqhd, sqid, req.cid, req.status);
    }
    this.#release(cmd);
    if (this.#handOff !== undefined && this.#handingOff === undefined && this.core.qid > 0 && req.status === 0 && req.opcode === FABRICS_OPCODE && this.core.counters.commands === 1) this.#maybeHandOff();
  }

  /** `out` is one payload, in one C2HData without digests or padding, that #sendC2H would copy into the slab. */
  #oneCopiedPayload(out: Buffer[], lent: ReadLent): boolean {
    if (out.length !== 1 || lent === ReadLent.CALL || !this.#conn.plainFraming) return false;
    const len = (out[0] as Buffer).length;
    return len > 0 && len <= this.#c2hMax && this.#copies(len, lent);
  }

  /**
   * The copy policy for a payload of `total` bytes lent beyond the call: copied into the slab up to FIRST_COPY_MAX while
   * the batch's copy budget lasts, or whatever the budget when lent for this task only (it cannot wait for the socket).
   */
  #copies(total: number, lent: ReadLent): boolean {
    return total <= FIRST_COPY_MAX && (lent === ReadLent.TASK || this.#conn.batchCopied + total <= COPY_BUDGET);
  }

  /** After an I/O queue's Connect response (the queue's first command): offer the connection to the worker pool. */
  #maybeHandOff(): void {
    const core = this.core;
    const ctrl = core.ctrl;
    // A TLS session cannot move to another process (its keys and record state live in this one's OpenSSL): TLS
    // queues stay here, like authenticated ones.
    if (ctrl === undefined || core.auth !== undefined || this.tls || core.state !== 'live') return;
    // A worker resumes with the digests only (HandedOffQueue): a queue padding its C2HData to the host's HPDA stays.
    if (this.#conn.framing.pda !== 0) return;
    const h: HandedOffQueue = {
      portId: this.port.id,
      subnqn: ctrl.subsys.nqn,
      cntlid: ctrl.cntlid,
      hostnqn: ctrl.hostnqn,
      qid: core.qid,
      sqsize: core.sqsize,
      sqflowDisabled: core.sqflowDisabled,
      hdgst: this.#conn.framing.hdgst,
      ddgst: this.#conn.framing.ddgst,
      setupTimes: core.setupTimes(),
    };
    const handOff = this.#handOff as QueueHandOff;
    if (!handOff.accept(h)) return;
    this.#handingOff = h;
    this.#conn.detach((socket, pending) => {
      this.#timer?.clear();
      this.#timer = undefined;
      this.setState('closed');
      const remote = ctrl.state === 'dead' ? undefined : handOff.take(socket, h, ctrl, pending);
      if (remote === undefined) {
        socket.destroy();
        core.onTransportClosed();
      } else core.handOver(remote);
      this.#onClosed(this);
    });
  }

  /** The core queue went live (Connect bound it): the connection is connected and the Connect timer stops. */
  queueLive(): void {
    if (!this.setState('live')) return;
    this.#timer?.clear();
    this.#timer = undefined;
  }

  /**
   * `crc`: the backend's CRC32C of all of `out`, which also promises `out` never changes; otherwise, with data digests
   * on, each payload is snapshotted so its digest matches the bytes sent (see COPY_MAX). `lent` (ReadLent): CALL, the
   * backend lends `out` only until this call returns, so every payload is snapshotted too; TASK, until this task
   * ends, so a small payload is copied into the slab when the batch is written (PduBatch COPY) and a larger one now.
   */
  #sendC2H(cid: number, out: Buffer[], success: boolean, crc: number | undefined, lent: ReadLent): void {
    const max = this.#c2hMax;
    let total = 0;
    for (const b of out) total += b.length;
    const pdu = this.#c2h;
    pdu.cccid = cid;
    const conn = this.#conn;
    const snapshot = lent === ReadLent.CALL || (conn.framing.ddgst && crc === undefined);
    // A payload not copied into the slab goes out as a view only if it stays as it is until the socket is done with it.
    const uncopied = snapshot || lent === ReadLent.TASK ? C2HPayload.SNAPSHOT : C2HPayload.VIEW;
    if (total <= max) {
      // Small payloads are copied into the slab (#copies): a lone read (QD1) or a QD32 batch then leaves as one
      // contiguous write instead of a cork/writev of many pieces; deeper batches continue as views.
      const copy = !snapshot && this.#copies(total, lent);
      // Two reused objects, so that each keeps one shape (with and without a known digest).
      const one = crc === undefined ? pdu : this.#c2hCrc;
      one.cccid = cid;
      one.datao = 0;
      one.last = true;
      one.success = success;
      one.data = out;
      if (crc !== undefined) this.#c2hCrc.ddgst = crc;
      conn.send(one, copy ? C2HPayload.COPY : uncopied);
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
      conn.send(pdu, uncopied);
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

  /**
   * ConnectionHandler: the connection terminates for `f` (a reader finding or one of ours); the connection core has
   * already sent the C2HTermReq, ended the socket and armed the linger (NVMe-TCP 1.0 §3.6.2, C2HTermReq). Once.
   */
  onFatal(f: ConnectionFatal): void {
    this.target.countPduError(f.fes);
    if (this.#hostLog.allow('transport_fatal')) {
      this.#log.warn({ fes: f.fes, fei: f.fei, reason: f.reason, hostnqn: this.core.ctrl?.hostnqn, qid: this.core.qid }, `fatal transport error (${fesName(f.fes)}): sent C2HTermReq`);
    }
    if (this.state !== 'closing' && this.state !== 'closed') this.setState('closing');
    this.#failPending();
  }

  /** A fault rule's close (docs/faults.md): FIN after what is batched, or RST at once. */
  hangUp(rst: boolean): void {
    if (this.state === 'closed') return;
    this.#log.info({ rst }, 'closing connection for a fault rule');
    if (this.state !== 'closing') this.setState('closing');
    if (rst) this.#conn.reset();
    else this.#conn.close();
    this.#failPending();
  }

  /** A fault rule's duplicate: one more CapsuleResp carrying these CQE fields (NVMe-TCP 1.0 §3.6.2.7). */
  sendCqe(cid: number, status: number, dw0: number, dw1: number, sqhd: number): void {
    if (this.state === 'closing' || this.state === 'closed') return;
    this.#conn.sendResponse(undefined, false, dw0, dw1, sqhd, this.core.qid < 0 ? 0 : this.core.qid, cid, status);
  }

  /** Core/teardown-initiated close: what is batched goes out, then the socket is destroyed. */
  close(reason: string): void {
    if (this.state === 'closed') return;
    if (this.target.logger.isLevelEnabled('debug')) this.#log.debug({ reason }, 'closing connection');
    if (this.state !== 'closing') this.setState('closing');
    this.#conn.destroy();
    this.#failPending();
  }

  #failPending(): void {
    this.#r2t.clear();
    this.#r2tBytes = 0;
    for (const r of this.#parked.splice(0)) this.#release(r);
  }

  /** ConnectionHandler: the socket is gone (last event of the connection); `err` is the socket error before it. */
  onClose(err: Error | undefined): void {
    if (err !== undefined) this.#log.debug({ err }, 'socket error');
    this.#timer?.clear();
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

