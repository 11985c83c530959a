// One NVMe/TCP connection = one queue (TCP 1.0 §3.3), controller role: IC exchange, capsules, R2T/H2CData, C2HData,
// in-flight limits. The connection core (connection/) owns the socket, the reader's error boundary, the batched
// writes and fatal error → C2HTermReq → end → destroy.
import { Buffer } from 'node:buffer';
import type net from 'node:net';
import type { Logger } from 'pino';
import {
  DATA_PDU_HLEN,
  DataPduOffset,
  DataPshOffset,
  FABRICS_OPCODE,
  Lent,
  Fes,
  PDU_MAX_HEADER_BYTES,
  PduFlag,
  PduType,
  Status,
  checkH2CData,
  headerView,
  writePduHeader,
  fesName,
  packDigests,
  setLongTimeout,
  unpackDigests,
  type DataSink,
  type H2CDataPdu,
  type LongTimeout,
} from '../../../protocol/index.js';
import { TcpConnection, type ConnectionFatal, type ConnectionHandler, type ReceivedHandlers, type ResumedConnection } from '../../../connection/index.js';
import { CoreQueue, FABRICS_IN_CAPSULE_MAX, type IcReqFault, type HostLogLimiter, ReqStateId, type TargetController, type CorePort, type QueueHandle, type QueueTransportOps, type Request, type TargetCore, type TlsPskInfo } from '../../core/index.js';
import { TcpCommand } from './command.js';
import { sendFaultedCompletion, sendFaultedR2T } from './wire-faults.js';
import type { FaultWireAction } from '../../model/faults.js';
import { rd16, rd32 } from '../../../protocol/le.js';

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

/**
 * The send batch's copy policy (PduBatch copyMax / copyBudget): payloads up to FIRST_COPY_MAX are copied into the slab
 * while the batch has copied less than COPY_BUDGET, so up to about QD32 of 4 KiB reads a batch leaves as one contiguous
 * write, and deeper batches copy only their first 128 KiB, so CPU per I/O at QD128 does not grow as it did with copying
 * every payload (docs/performance.md, third pass: QD32 +2–5 %, QD128 +2–4 % IOPS same-run). Larger payloads go out as
 * views of the backend's buffers (zero-copy). Why a view of a RAM chunk is safe (send-before-mutate): the read's
 * completion (CapsuleResp, or the SUCCESS flag) follows its data in the same byte stream, so the host cannot observe
 * the completion before the kernel holds a copy of the data; any write ordered after the read therefore lands after
 * the copy. Only a write the host issued while the read was still outstanding can change queued bytes, and NVMe leaves
 * the result of such overlapping commands undefined (either version per block, no tearing). With data digests on
 * that would break digest/data agreement, so without the backend's CRC the payload is then snapshotted when the digest
 * is computed (PduBatch.addCompletion).
 */
const FIRST_COPY_MAX = 4096;
const COPY_BUDGET = 128 * 1024;

/** Send batch slab per connection. */
const BATCH_SLAB = 256 * 1024;
/** After a C2HTermReq the host gets this long to read it before the socket is destroyed. */
const TERM_LINGER_MS = 1000;

const NO_DATA: Buffer[] = [];
const NO_SQE = Buffer.alloc(0);

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
    // connection: data goes into the command's own buffer as it arrives (TcpCommand is the DataSink), and an SQE a
    // command keeps beyond the handler call is copied here (#capsuleHeader, #handleCapsule, #keepSqe).
    this.#reuse = opts.rxBuffer !== undefined;
    this.#onClosed = onClosed;
    this.#maxInFlight = port.maxInFlightBytes;
    this.core = new CoreQueue(target, port, this);
    this.#handOff = opts.handOff;
    const connOpts = {
      role: 'controller' as const,
      handler: this,
      maxDataLength: port.maxH2CData,
      maxInCapsuleData: Math.max(port.inlineDataSize, FABRICS_IN_CAPSULE_MAX),
      batchSlab: BATCH_SLAB,
      batchCopyMax: FIRST_COPY_MAX,
      batchCopyBudget: COPY_BUDGET,
      c2hDataMax: port.c2hDataSize,
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

  get headerDigest(): boolean {
    return this.#conn.framing.hdgst;
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
  readonly received: ReceivedHandlers = {
    [PduType.IC_REQ]: (pdu) => {
      if (!this.#refusedDuringHandOff()) this.#handleIcReq(pdu.hpda, pdu.dgst);
    },
    [PduType.CAPSULE_CMD]: (sqe, datal) => (this.#refusedDuringHandOff() ? undefined : this.#capsuleHeader(sqe, datal)),
    [PduType.H2C_DATA]: (psh, datal, flags) => (this.#refusedDuringHandOff() ? undefined : this.#h2cDataHeader(psh, datal, flags)),
    [PduType.H2C_TERM_REQ]: (pdu) => {
      if (this.#refusedDuringHandOff()) return;
      if (this.#hostLog.allow('h2c_term_req')) this.#log.warn({ fes: pdu.fes, fei: pdu.fei, reason: fesName(pdu.fes) }, 'host sent H2CTermReq; closing');
      this.close('H2CTermReq');
    },
  };

  /**
   * ConnectionHandler: the data of a CapsuleCmd or H2CData is in its command's buffer (TcpCommand is the DataSink). A
   * data digest mismatch fails that command, the connection stays (NVMe-TCP 1.0 §3.6.1.4).
   */
  dataEnd(sink: DataSink, digestOk: boolean): void {
    const cmd = sink as TcpCommand;
    // Only H2CData commands hold an R2T tag (1..0xfffe); a capsule's is 0.
    if (cmd.ttag !== 0) this.#h2cDataEnd(cmd, digestOk);
    else this.#capsuleDataEnd(cmd, digestOk);
  }

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

  /**
   * A CapsuleCmd (NVMe-TCP 1.0 §3.6.2.6): without in-capsule data it is submitted now; with some, its command takes the
   * data in a buffer of its own (an async backend writes it after this read's buffer is reused) and keeps the SQE.
   */
  #capsuleHeader(sqe: Buffer, datal: number): TcpCommand | undefined {
    const cmd = this.#alloc();
    if (datal === 0) {
      this.#handleCapsule(cmd, sqe, undefined);
      return undefined;
    }
    if (this.#reuse) {
      cmd.ownSqe.set(sqe);
      cmd.sqe = cmd.ownSqe;
    } else cmd.sqe = sqe;
    cmd.buf = Buffer.allocUnsafe(datal);
    cmd.at = 0;
    return cmd;
  }

  #capsuleDataEnd(cmd: TcpCommand, digestOk: boolean): void {
    const sqe = cmd.sqe;
    cmd.sqe = NO_SQE;
    if (digestOk) {
      this.#handleCapsule(cmd, sqe, [cmd.buf]);
      return;
    }
    this.target.stats.dataDigestErrors++;
    const req = cmd.req;
    req.load(sqe, undefined);
    if (this.#hostLog.allow('data_digest')) this.#log.warn({ cid: req.cid }, 'data digest error on in-capsule data');
    this.core.reject(req, Status.TRANSIENT_TRANSPORT);
    this.#keepSqe(req);
  }

  #handleCapsule(cmd: TcpCommand, sqe: Buffer, data: Buffer[] | undefined): void {
    if (this.#parked.length > 0 || this.#overLimit()) {
      // Over the in-flight limit: the command waits (in order) instead of adding more data; a copy of the SQE so
      // the parked command does not pin the received chunk.
      cmd.req.load(this.#reuse && data === undefined ? Buffer.from(sqe) : sqe, data);
      this.#parked.push(cmd);
      return;
    }
    cmd.req.load(sqe, data);
    this.#submit(cmd);
  }

  /** A command still running (R2T wait, async backend) reads its SQE later: give it its own copy. */
  #keepSqe(req: Request): void {
    if (this.#reuse && (req.stateId === ReqStateId.EXEC || req.stateId === ReqStateId.NEED_DATA) && req.sqe.length > 0 && req.sqe !== TcpCommand.of(req).ownSqe) req.sqe = Buffer.from(req.sqe);
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
    this.#r2t.set(ttag, cmd);
    this.#r2tBytes += req.dataLen;
    // A command a fault rule marked takes the slow branch (docs/faults.md); one compare otherwise.
    if (req.fault !== undefined) return sendFaultedR2T(this.#conn, req, req.fault.action as FaultWireAction, ttag);
    this.#conn.send({ type: PduType.R2T, cccid: req.cid, ttag, r2to: 0, r2tl: req.dataLen });
  }

  /**
   * QueueTransportOps.abortWaiting: the command with this CID, if it has not started: parked over the in-flight limit
   * (completed now with Command Abort Requested, never run), or waiting for the H2CData of its R2T (marked: it
   * completes so once that data is in, since the host may already be sending it). False for any other CID.
   */
  abortWaiting(cid: number): boolean {
    const i = this.#parked.findIndex((c) => c.req.cid === cid);
    if (i >= 0) {
      const [cmd] = this.#parked.splice(i, 1) as [TcpCommand];
      this.core.reject(cmd.req, Status.ABORT_REQ);
      return true;
    }
    for (const cmd of this.#r2t.values()) {
      if (cmd.req.cid !== cid || cmd.abortRequested) continue;
      cmd.abortRequested = true;
      return true;
    }
    return false;
  }

  /**
   * H2CData (NVMe-TCP 1.0 §3.6.2.8): checked against its R2T (TTAG, CCCID, in-order range), then its data goes into
   * the command's buffer at DATAO (one buffer per transfer, allocated by the first PDU), or undefined once the
   * connection ends.
   */
  #h2cDataHeader(psh: Buffer, datal: number, flags: number): TcpCommand | undefined {
    const ttag = rd16(psh, DataPshOffset.ttag);
    const cccid = rd16(psh, DataPshOffset.cccid);
    const datao = rd32(psh, DataPshOffset.datao);
    const cmd = this.#r2t.get(ttag);
    if (cmd === undefined) {
      this.#conn.fatal({ fes: Fes.INVALID_HEADER_FIELD, fei: DataPduOffset.ttag, reason: `H2CData with unknown ttag ${ttag}`, header: this.#h2cHeader(psh, datal, flags) });
      return undefined;
    }
    const req = cmd.req;
    if (req.cid !== cccid) {
      this.#conn.fatal({ fes: Fes.INVALID_HEADER_FIELD, fei: DataPduOffset.cccid, reason: `H2CData cccid ${cccid} for ttag of cid ${req.cid}`, header: this.#h2cHeader(psh, datal, flags) });
      return undefined;
    }
    const range = checkH2CData(datao, datal, cmd.received, req.dataLen);
    if (range !== undefined) {
      this.#conn.fatal({ ...range, header: this.#h2cHeader(psh, datal, flags) });
      return undefined;
    }
    // Rules counting received PDUs (match.event "pdu") see H2CData too; one read when nothing is armed.
    if (this.target.faults.armed && this.core.faultDataPdu(req)) return undefined;
    if (cmd.received === 0) cmd.buf = Buffer.allocUnsafe(req.dataLen);
    cmd.at = datao;
    cmd.rxLen = datal;
    return cmd;
  }

  #h2cDataEnd(cmd: TcpCommand, digestOk: boolean): void {
    cmd.received += cmd.rxLen;
    this.#r2tBytes -= cmd.rxLen;
    if (!digestOk) cmd.dataDigestError = true;
    const req = cmd.req;
    if (cmd.received < req.dataLen) return;
    this.#r2t.delete(cmd.ttag);
    if (cmd.abortRequested) {
      this.core.complete(req, Status.ABORT_REQ);
      return;
    }
    if (cmd.dataDigestError) {
      // A data digest error completes the command with a transient transport error, so the host retries (TCP 1.0 §3.6.1.4).
      this.target.stats.dataDigestErrors++;
      this.core.complete(req, Status.TRANSIENT_TRANSPORT);
      return;
    }
    req.data = [cmd.buf];
    this.core.execute(req);
  }

  /**
   * The header of the H2CData in error for the C2HTermReq (NVMe-TCP 1.0 §3.6.2.5), with the PDO, PLEN and DATAL it
   * arrived with: laid out again from its fields (H2C data is aligned to our CPDA, 0). Only on these failure paths.
   */
  #h2cHeader(psh: Buffer, datal: number, flags: number): Buffer {
    const f = this.#conn.framing;
    const head = Buffer.alloc(PDU_MAX_HEADER_BYTES);
    const pdu: H2CDataPdu = { type: PduType.H2C_DATA, cccid: rd16(psh, DataPshOffset.cccid), ttag: rd16(psh, DataPshOffset.ttag), datao: rd32(psh, DataPshOffset.datao), last: (flags & PduFlag.DATA_LAST) !== 0, data: NO_DATA };
    writePduHeader(head, headerView(head), 0, pdu, { hdgst: f.hdgst, ddgst: f.ddgst, pda: 0 }, datal);
    return head.subarray(0, DATA_PDU_HLEN);
  }

  /** Completion from core: C2HData (split at c2hDataSize, SUCCESS only with SQ flow control off), then CapsuleResp. */
  queueResponse(req: Request): void {
    const cmd = TcpCommand.of(req);
    if (cmd.pendingRead > 0) {
      this.#execBytes -= cmd.pendingRead;
      cmd.pendingRead = 0;
    }
    if (this.state === 'closing' || this.state === 'closed') return this.#release(cmd);
    // The Request is the completion record: CQE fields, data and its lifetime (PduBatch.addCompletion). A command a
    // fault rule marked takes the slow branch (docs/faults.md); one compare otherwise.
    if (req.fault !== undefined) return this.#faultedResponse(cmd, req.fault.action as FaultWireAction);
    this.#conn.sendCompletion(req, this.core.qid < 0 ? 0 : this.core.qid, this.core.sqflowDisabled);
    this.#release(cmd);
    if (this.#handOff !== undefined && this.#handingOff === undefined && this.core.qid > 0 && req.status === 0 && req.opcode === FABRICS_OPCODE && this.core.counters.commands === 1) this.#maybeHandOff();
  }

  /**
   * A reply a PDU-shaping rule marked (docs/faults.md): the slow branch. A faulted Connect keeps its queue in this
   * process (no hand-off): a stalled or dripping connection cannot move with bytes still held.
   */
  #faultedResponse(cmd: TcpCommand, a: FaultWireAction): void {
    const req = cmd.req;
    req.fault = undefined;
    sendFaultedCompletion(this.#conn, req, a, this.core.qid < 0 ? 0 : this.core.qid, this.core.sqflowDisabled, this.port.c2hDataSize);
    this.#release(cmd);
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
    // Zone state (write pointers, open zones) has one owner, this process (target/core/zoned.ts): the queues of a
    // subsystem with a zoned namespace stay here.
    for (const ns of ctrl.subsys.namespaces.values()) if (ns.zones !== undefined) return;
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
    this.#conn.sendCompletion({ cid, status, dw0, dw1, sqhd, out: undefined, outLent: Lent.STABLE, outCrc: undefined }, this.core.qid < 0 ? 0 : this.core.qid, false);
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

