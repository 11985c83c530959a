// One NVMe/TCP connection for either role (TCP 1.0 §3.3): socket ↔ PduReader behind an error boundary, one write per
// send batch, and fatal finding → TermReq → end → destroy (§3.6.2.4/5). The transports keep their role's PDU handling
// (ConnectionHandler); FreeBSD lib/libnvmf/nvmf_tcp.c likewise serves host and controller from one connection type.
import { Buffer } from 'node:buffer';
import net from 'node:net';
import {
  Fes,
  Lent,
  PduReader,
  PduType,
  encodePdu,
  packDigests,
  termReqFor,
  type DataSink,
  type FatalFinding,
  type IcReqPdu,
  type IcRespPdu,
  type Pdu,
  type PduFraming,
  type TermReqPdu,
  type ReceiverRole,
} from '../protocol/index.js';
import { writeToDescriptor } from './fd-write.js';
import { PduBatch, type Completion } from './pdu-batch.js';
import { adoptReceivedWithUserBuffer, adoptWithUserBuffer } from './user-buffer-socket.js';

/** The side this end plays: 'controller' receives H2C PDUs and sends C2HTermReq, 'host' the reverse. */
export type ConnectionRole = ReceiverRole;

/**
 * connecting: TCP connect in progress (connect() only). open: PDUs flow. terminating: TermReq sent or close begun,
 * nothing more is received or queued, the socket is ending. closed: the socket is gone.
 */
export type ConnectionState = 'connecting' | 'open' | 'terminating' | 'closed';

/** Allowed transitions; setState rejects every other one. */
export const CONNECTION_TRANSITIONS: Readonly<Record<ConnectionState, readonly ConnectionState[]>> = {
  connecting: ['open', 'terminating', 'closed'],
  open: ['terminating', 'closed'],
  terminating: ['closed'],
  closed: [],
};

/** A fatal finding to report in the TermReq (TCP 1.0 §3.6.2.4/5): FES, FEI and the offending header bytes if any. */
export interface ConnectionFatal extends FatalFinding {
  header?: Buffer;
}

/**
 * A data-path PDU as the reader hands it over (PduSink.header): `psh` is the view of its PDU-specific header (the SQE
 * of a CapsuleCmd, the CQE of a CapsuleResp, the 16 bytes after the CH of an R2T or data PDU), valid only during the
 * call; `flags` the CH flags. A PDU with data returns where its data goes (DataSink), or undefined after the handler
 * ended the connection; ConnectionHandler.dataEnd follows once the data is in.
 */
export type HeaderHandler = (psh: Buffer, datal: number, flags: number) => DataSink | undefined;

/**
 * The one handler table of a connection, keyed by PDU type: the control PDUs (TCP 1.0 §3.6.2.2–5) as objects, every
 * other kind as its header view (HeaderHandler), with or without digests. A kind without an entry is a PDU sequence
 * error (TCP 1.0 §3.6.2.4/5, FES 2): the connection sends its TermReq and onFatal follows.
 */
export interface ReceivedHandlers {
  readonly [PduType.IC_REQ]?: (pdu: IcReqPdu) => void;
  readonly [PduType.IC_RESP]?: (pdu: IcRespPdu) => void;
  readonly [PduType.H2C_TERM_REQ]?: (pdu: TermReqPdu) => void;
  readonly [PduType.C2H_TERM_REQ]?: (pdu: TermReqPdu) => void;
  readonly [PduType.CAPSULE_CMD]?: HeaderHandler;
  readonly [PduType.CAPSULE_RESP]?: HeaderHandler;
  readonly [PduType.H2C_DATA]?: HeaderHandler;
  readonly [PduType.C2H_DATA]?: HeaderHandler;
  readonly [PduType.R2T]?: HeaderHandler;
}

/** The role's side of a connection. Called on the event loop of the socket; none of them may keep received views. */
export interface ConnectionHandler {
  /** One entry per received PDU kind this role takes, only while the connection is open (ReceivedHandlers). */
  readonly received: ReceivedHandlers;
  /**
   * The data of a PDU whose HeaderHandler returned `sink` is in `sink.buf`. `digestOk` false: its data digest did not
   * match (TCP 1.0 §3.6.1.4 leaves recovery to the command: the role fails that command, the connection stays).
   */
  dataEnd?(sink: DataSink, digestOk: boolean): void;
  /** The connection terminates for `finding` (found by the reader, or passed to fatal()); its TermReq is already sent. Once. */
  onFatal(finding: ConnectionFatal): void;
  /** A handler threw while handling received data; the connection is destroyed right after (no other one is touched). */
  onInternalError?(err: unknown): void;
  /** Before the first PDU of a received chunk. */
  onChunkStart?(): void;
  /** After the last PDU of a received chunk, before that chunk's batch is flushed. */
  onChunkEnd?(): void;
  /** A batch of `bytes` was written; `unsent` is what the socket still buffers (socket.writableLength). */
  onFlushed?(bytes: number, unsent: number): void;
  /** The socket's write buffer drained ('drain'). */
  onDrain?(): void;
  /** Every state change; connecting → open is TCP connect done (connections made by TcpConnection.connect). */
  onStateChange?(from: ConnectionState, to: ConnectionState): void;
  /** The socket closed; `err` is the first socket error before it, if any. Once, and last. */
  onClose(err: Error | undefined): void;
}

export interface TcpConnectionOptions {
  role: ConnectionRole;
  handler: ConnectionHandler;
  /** Largest data length accepted per data PDU (MAXH2CDATA as a controller); 0 or unset = unlimited. */
  maxDataLength?: number;
  /** Largest in-capsule data accepted per CapsuleCmd; 0 or unset = unlimited. */
  maxInCapsuleData?: number;
  /**
   * PduBatch slab size (default 256 KiB), largest payload copied into the slab (default 0: payloads as views) and the
   * bytes of payloads lent STABLE a batch copies (default unlimited).
   */
  batchSlab?: number;
  batchCopyMax?: number;
  batchCopyBudget?: number;
  /** Largest C2HData payload sendCompletion puts in one PDU (a controller's C2H data size); default 128 KiB. */
  c2hDataMax?: number;
  /** After a TermReq or close() the peer gets this long to read what is queued before the socket is destroyed (default 1000 ms). */
  lingerMs?: number;
  /**
   * Buffer libuv reads into, reused for every read (it may be shared by all connections of one event loop: reads run
   * one at a time). Header views are then valid only during the handler call (data goes to the role's sink as it
   * arrives, and a header that straddles reads is gathered by the reader). Unset: ordinary 'data' events. An accepted
   * socket must come from a server with pauseOnConnect.
   */
  rxBuffer?: Buffer;
}

/**
 * A controller-side connection whose IC exchange (and more) happened in another process (TcpConnection.resume): the
 * digests it negotiated and the bytes that process had read but not yet handled.
 */
export interface ResumedConnection {
  hdgst: boolean;
  ddgst: boolean;
  /** Received bytes not yet parsed (usually none: a host sends nothing on a queue before its Connect completes). */
  pending?: Buffer;
}

/** Where TcpConnection.connect goes. */
export interface TcpConnectOptions {
  host: string;
  port: number;
  /** Source address (host_traddr). */
  localAddress?: string;
  /**
   * Make the stream instead of net.connect, e.g. tls.connect (a TLSSocket is a net.Socket): NVMe/TCP then runs above
   * TLS (TP 8011). It opens when the socket emits `readyEvent` ('secureConnect' for TLS). rxBuffer does not apply.
   */
  createSocket?: () => net.Socket;
  readyEvent?: string;
}

const EMPTY = Buffer.alloc(0);
const DEFAULT_LINGER_MS = 1000;

/**
 * How a fault rule holds this connection's writes (docs/faults.md, stall and drip): from `skip` bytes into what is
 * written next, `slice` bytes (0: all that is held) every `intervalMs`, or nothing more for `ms` (stall; forever when
 * `ms` is undefined). Only the socket write changes; the PDUs are the ones the batch made.
 */
export type WriteShaping = { kind: 'stall'; skip: number; ms: number | undefined } | { kind: 'drip'; skip: number; slice: number; intervalMs: number };

export class TcpConnection {
  readonly role: ConnectionRole;
  #state: ConnectionState;
  readonly #handler: ConnectionHandler;
  /** ConnectionHandler.received's header handlers, by PDU type (a load per PDU, not a property lookup). */
  readonly #headers: (HeaderHandler | undefined)[] = [];
  readonly #reader: PduReader;
  readonly #batch: PduBatch;
  readonly #reuse: boolean;
  readonly #lingerMs: number;
  #socket!: net.Socket;
  #framing: PduFraming = { hdgst: false, ddgst: false, pda: 0 };
  readonly #c2hMax: number;
  #inChunk = false;
  #flushScheduled = false;
  #readPaused = false;
  #linger: NodeJS.Timeout | undefined;
  #socketError: Error | undefined;
  #bytesOut = 0;
  /**
   * Batches go straight to the descriptor when the stream holds nothing (writeToDescriptor). Only with rxBuffer, which only
   * plain TCP sockets get (a TLSSocket's descriptor carries records: its bytes must go through the TLS stream).
   */
  readonly #toDescriptor: boolean;
  /** resume(): the synthetic ICReq is being fed to the reader; it is not the handler's. */
  #priming = false;
  /** detach() took the socket: no further event reaches the handler. */
  #detached = false;
  /** A fault rule's stall or drip (shape()): set only while it holds bytes; flush() then takes its slow branch. */
  #shaping: WriteShaping | undefined;
  #held: Buffer[] = [];
  /** Bytes in #held: reported as unsent (onFlushed), so the role's backpressure sees what a stall keeps. */
  #heldBytes = 0;
  #shapeTimer: NodeJS.Timeout | undefined;
  /** One function per connection for the per-tick flush (no closure per batch). */
  readonly #flushTick = (): void => this.flush();

  /** A connection over an accepted socket (controller side, usually). */
  static accept(socket: net.Socket, opts: TcpConnectionOptions): TcpConnection {
    const c = new TcpConnection(opts, 'open');
    c.#attach(opts.rxBuffer === undefined ? socket : adoptWithUserBuffer(socket, opts.rxBuffer, (n, buf) => c.#onRead(n, buf)));
    return c;
  }

  /**
   * A controller connection over a socket received from another process (child_process send), which negotiated the
   * IC exchange already: the reader is primed past ICReq without telling the handler, then `r.pending` is handled as
   * if just received. The socket may already be reading (Node starts a received socket): it is stopped and re-wrapped.
   */
  static resume(socket: net.Socket, opts: TcpConnectionOptions, r: ResumedConnection): TcpConnection {
    const c = new TcpConnection(opts, 'open');
    let buffered: Buffer | undefined;
    if (opts.rxBuffer === undefined) c.#attach(socket);
    else {
      const moved = adoptReceivedWithUserBuffer(socket, opts.rxBuffer, (n, buf) => c.#onRead(n, buf));
      buffered = moved.buffered;
      c.#attach(moved.socket);
    }
    // The reader accepts only an ICReq before the IC exchange (TCP 1.0 §3.6.2.2): feed it one it then swallows.
    c.#priming = true;
    c.#reader.push(encodePdu({ type: PduType.IC_REQ, pfv: 0, hpda: 0, dgst: packDigests(r.hdgst, r.ddgst), maxr2t: 0 })[0] as Buffer);
    c.#priming = false;
    c.#reader.bytesIn = 0;
    c.setFraming(r.hdgst, r.ddgst, 0, 0);
    const first = r.pending !== undefined && r.pending.length > 0 ? (buffered !== undefined ? Buffer.concat([r.pending, buffered]) : r.pending) : buffered;
    if (first !== undefined && first.length > 0) setImmediate(() => c.#onChunk(first));
    return c;
  }

  /** A connection to `to` (host side, usually); state 'connecting' until TCP connects (handler.onStateChange hears connecting → open). */
  static connect(to: TcpConnectOptions, opts: TcpConnectionOptions): TcpConnection {
    if (to.createSocket !== undefined) {
      const { rxBuffer: _ignored, ...rest } = opts;
      const c = new TcpConnection(rest, 'connecting');
      const socket = to.createSocket();
      c.#attach(socket);
      socket.on(to.readyEvent ?? 'connect', () => c.#onConnect());
      return c;
    }
    const c = new TcpConnection(opts, 'connecting');
    const rx = opts.rxBuffer;
    const socket = net.connect({
      host: to.host,
      port: to.port,
      noDelay: true,
      ...(rx !== undefined ? { onread: { buffer: rx, callback: (n: number, buf: Uint8Array) => c.#onRead(n, buf as Buffer) } } : {}),
      ...(to.localAddress !== undefined ? { localAddress: to.localAddress } : {}),
    });
    c.#attach(socket);
    socket.on('connect', () => c.#onConnect());
    return c;
  }

  private constructor(opts: TcpConnectionOptions, initial: ConnectionState) {
    this.role = opts.role;
    this.#state = initial;
    this.#handler = opts.handler;
    this.#reuse = opts.rxBuffer !== undefined;
    this.#toDescriptor = this.#reuse;
    this.#lingerMs = opts.lingerMs ?? DEFAULT_LINGER_MS;
    this.#batch = new PduBatch(opts.batchSlab ?? 256 * 1024, opts.batchCopyMax ?? 0, undefined, opts.batchCopyBudget ?? Infinity);
    this.#c2hMax = opts.c2hDataMax ?? 128 * 1024;
    const h = opts.handler;
    for (const t of [PduType.CAPSULE_CMD, PduType.CAPSULE_RESP, PduType.H2C_DATA, PduType.C2H_DATA, PduType.R2T] as const) this.#headers[t] = h.received[t];
    this.#reader = new PduReader({
      role: opts.role,
      onPdu: (pdu) => this.#onPdu(pdu),
      onFatal: (f) => this.fatal(f),
      sink: { header: (type, psh, datal, flags) => this.#onHeader(type, psh, datal, flags), end: (sink, ok) => this.#onDataEnd(sink, ok) },
      ...(opts.maxDataLength !== undefined ? { maxDataLength: opts.maxDataLength } : {}),
      ...(opts.maxInCapsuleData !== undefined ? { maxInCapsuleData: opts.maxInCapsuleData } : {}),
      reusesChunks: this.#reuse,
    });
  }

  #attach(socket: net.Socket): void {
    this.#socket = socket;
    socket.setNoDelay(true);
    if (!this.#reuse) socket.on('data', (chunk: Buffer) => this.#onChunk(chunk));
    socket.on('drain', () => this.#handler.onDrain?.());
    socket.on('error', (err) => this.#onSocketError(err));
    socket.on('close', () => this.#onSocketClose());
  }

  get state(): ConnectionState {
    return this.#state;
  }

  /** Framing PDUs are sent with (digests and the peer's PDU data alignment). */
  get framing(): PduFraming {
    return this.#framing;
  }

  /** Header views point into a reused buffer (TcpConnectionOptions.rxBuffer): copy whatever outlives the handler call. */
  get reusesChunks(): boolean {
    return this.#reuse;
  }

  get remoteAddress(): string | undefined {
    return this.#socket.remoteAddress;
  }
  get remotePort(): number | undefined {
    return this.#socket.remotePort;
  }
  get localAddress(): string | undefined {
    return this.#socket.localAddress;
  }
  get localPort(): number | undefined {
    return this.#socket.localPort;
  }

  /** Bytes received over the connection's life. */
  get bytesIn(): number {
    return this.#reader.bytesIn;
  }
  /** Bytes handed to the socket over the connection's life. */
  get bytesOut(): number {
    return this.#bytesOut;
  }
  /** Bytes the socket still buffers (a getter through the stream prototypes: read it per batch, not per command). */
  get writableLength(): number {
    return this.#socket.writableLength;
  }
  /** Bytes queued in the current batch, not yet written. */
  get batchBytes(): number {
    return this.#batch.bytes;
  }
  get readingPaused(): boolean {
    return this.#readPaused;
  }

  /**
   * Apply the digests negotiated by ICReq/ICResp (TCP 1.0 §3.6.2.2/3): `txPda` is the alignment the peer asked for
   * (CPDA for a host, HPDA for a controller), `rxPda` the one this side advertised. Call from the handler of the IC PDU.
   */
  setFraming(hdgst: boolean, ddgst: boolean, txPda = 0, rxPda = 0): void {
    this.#framing = { hdgst, ddgst, pda: txPda };
    this.#reader.setFraming(hdgst, ddgst, rxPda);
  }

  setMaxDataLength(n: number): void {
    this.#reader.setMaxDataLength(n);
  }

  /**
   * Queue a PDU in this tick's batch; `lent` says how long its data stays as it is (PduBatch.add). False when the
   * connection no longer sends (terminating or closed).
   */
  send(pdu: Pdu, lent: Lent = Lent.STABLE): boolean {
    if (this.#state !== 'open' && this.#state !== 'connecting') return false;
    this.#batch.add(pdu, this.#framing, lent);
    this.#queued();
    return true;
  }

  /**
   * A command's completion (PduBatch.addCompletion): its data as C2HData, then its CapsuleResp unless the SUCCESS
   * flag replaces it (`sqflowDisabled`; NVMe-TCP 1.0 §3.6.2.9). The controller's per-command send. False when the
   * connection no longer sends.
   */
  sendCompletion(c: Completion, sqid: number, sqflowDisabled: boolean): boolean {
    if (this.#state !== 'open') return false;
    this.#batch.addCompletion(c, sqid, sqflowDisabled, this.#framing, this.#c2hMax);
    this.#queued();
    return true;
  }

  /**
   * Bytes laid out by a fault rule (PduBatch.addBytes), after what is batched; lent until written. False when the
   * connection no longer sends.
   */
  sendBytes(bufs: readonly Buffer[]): boolean {
    if (this.#state !== 'open') return false;
    this.#batch.addBytes(bufs);
    this.#queued();
    return true;
  }

  /**
   * A fault rule's stall or drip (docs/faults.md) on what is written from now on: `skip` bytes of it past what is
   * already batched go out as usual, then the writes are held (WriteShaping). Ends once nothing is held.
   */
  shape(s: WriteShaping): void {
    if (this.#shaping !== undefined) return;
    this.#shaping = { ...s, skip: s.skip + this.#batch.bytes };
  }

  /** Inside a received chunk the batch goes out when the chunk is done; otherwise on the next tick. */
  #queued(): void {
    if (!this.#inChunk && !this.#flushScheduled) {
      this.#flushScheduled = true;
      process.nextTick(this.#flushTick);
    }
  }

  /** Write the batch now: one chunk directly, several under cork/uncork (one writev; docs/performance.md). */
  flush(): void {
    this.#flushScheduled = false;
    const batch = this.#batch;
    if (batch.empty) return;
    const bytes = batch.bytes;
    const chunks = batch.take();
    const s = this.#socket;
    if (s.destroyed || s.writableEnded) {
      batch.recycle(false);
      return;
    }
    this.#bytesOut += bytes;
    if (this.#shaping !== undefined) return this.#flushShaped(chunks, bytes);
    if (this.#toDescriptor && s.writableLength === 0 && writeToDescriptor(s, chunks, bytes)) {
      batch.recycle(false);
      this.#handler.onFlushed?.(bytes, 0);
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
    const unsent = s.writableLength;
    const release = batch.recycle(unsent > 0);
    if (release !== undefined) s.write(EMPTY, release);
    this.#handler.onFlushed?.(bytes, unsent);
  }

  /** flush() under a stall or drip: the batch is copied (its slab is reused) and released by #releaseHeld. */
  #flushShaped(chunks: Buffer[], bytes: number): void {
    const copy = Buffer.concat(chunks, bytes);
    this.#batch.recycle(false);
    const sh = this.#shaping as WriteShaping;
    const now = Math.min(sh.skip, bytes);
    sh.skip -= now;
    if (now > 0) this.#socket.write(copy.subarray(0, now));
    if (now < bytes) {
      this.#held.push(copy.subarray(now));
      this.#heldBytes += bytes - now;
    }
    if (this.#shapeTimer === undefined && this.#held.length > 0) {
      const wait = sh.kind === 'drip' ? sh.intervalMs : sh.ms;
      if (wait !== undefined) this.#shapeTimer = setTimeout(() => this.#releaseHeld(), wait);
    }
    if (this.#held.length === 0 && sh.skip === 0) this.#shaping = undefined;
    this.#handler.onFlushed?.(bytes, this.#socket.writableLength + this.#heldBytes);
  }

  /** The stall ends (everything held goes out), or the next drip slice goes; shaping ends once nothing is held. */
  #releaseHeld(): void {
    this.#shapeTimer = undefined;
    const sh = this.#shaping;
    const s = this.#socket;
    if (sh === undefined || s.destroyed || s.writableEnded) {
      this.#held = [];
      this.#heldBytes = 0;
      return;
    }
    if (sh.kind === 'stall') {
      for (const b of this.#held) s.write(b);
      this.#held = [];
      this.#heldBytes = 0;
    } else {
      const b = this.#held[0] as Buffer;
      const n = Math.min(sh.slice, b.length);
      s.write(b.subarray(0, n));
      this.#heldBytes -= n;
      if (b.length > n) this.#held[0] = b.subarray(n);
      else this.#held.shift();
    }
    if (this.#held.length === 0) this.#shaping = undefined;
    else this.#shapeTimer = setTimeout(() => this.#releaseHeld(), (sh as { intervalMs: number }).intervalMs);
  }

  /** Stop reading the socket (backpressure); resumeReading undoes it. */
  pauseReading(): void {
    if (this.#readPaused) return;
    this.#readPaused = true;
    this.#socket.pause();
  }

  resumeReading(): void {
    if (!this.#readPaused) return;
    this.#readPaused = false;
    this.#socket.resume();
  }

  /**
   * Fatal transport error (TCP 1.0 §3.6.2.4/5): send the role's TermReq (C2HTermReq from a controller, H2CTermReq
   * from a host) after what is batched, end the socket, destroy it after the linger time, and tell the handler.
   * Input after this point is ignored. False when the connection was already terminating or closed.
   */
  fatal(finding: ConnectionFatal): boolean {
    if (this.#state !== 'open' && this.#state !== 'connecting') return false;
    this.#batch.add(termReqFor(this.role, { fes: finding.fes, fei: finding.fei, header: finding.header ?? EMPTY }), this.#framing);
    this.#setState('terminating');
    this.flush();
    this.#endWithLinger();
    this.#handler.onFatal(finding);
    return true;
  }

  /** Graceful close: what is batched goes out, then FIN; destroyed after the linger time if the peer does not close. */
  close(): void {
    if (this.#state !== 'open' && this.#state !== 'connecting') return;
    this.flush();
    this.#setState('terminating');
    this.#endWithLinger();
  }

  /** Close now: what is batched is written, then the socket is destroyed. Also cuts a linger short. */
  destroy(): void {
    if (this.#state === 'closed') return;
    this.flush();
    if (this.#state !== 'terminating') this.#setState('terminating');
    this.#socket.destroy();
  }

  /** Reset now (RST, socket.resetAndDestroy): nothing batched is written. A fault rule's `close` with rst (docs/faults.md). */
  reset(): void {
    if (this.#state === 'closed') return;
    if (this.#state !== 'terminating') this.#setState('terminating');
    this.#socket.resetAndDestroy();
  }

  /**
   * Give the socket away (to another process): what is batched is written, reading stops, and once every write has
   * completed `cb` gets the socket with this connection's listeners removed; the handler hears nothing more (no
   * onClose). If the socket fails or closes first, the ordinary onClose runs instead and `cb` is never called.
   */
  detach(cb: (socket: net.Socket, pending: Buffer | undefined) => void): void {
    if (this.#state !== 'open') return;
    this.flush();
    this.pauseReading();
    const s = this.#socket;
    s.write(EMPTY, (err) => {
      if (err || this.#state !== 'open' || s.destroyed) return;
      this.#detached = true;
      this.#setState('closed');
      s.removeAllListeners('drain');
      s.removeAllListeners('error');
      s.removeAllListeners('close');
      s.removeAllListeners('data');
      // Without rxBuffer a paused stream may have read ahead into its own buffer: those bytes travel with the socket.
      const parts: Buffer[] = [];
      if (!this.#reuse) for (let b = s.read() as Buffer | null; b !== null; b = s.read() as Buffer | null) parts.push(b);
      cb(s, parts.length === 0 ? undefined : Buffer.concat(parts));
    });
  }

  #setState(next: ConnectionState): boolean {
    const from = this.#state;
    if (!CONNECTION_TRANSITIONS[from].includes(next)) return false;
    this.#state = next;
    this.#handler.onStateChange?.(from, next);
    return true;
  }

  #endWithLinger(): void {
    const s = this.#socket;
    if (s.destroyed) return;
    s.end();
    // A peer that never reads (or never closes) must not hold the socket: the linger is bounded.
    this.#linger = setTimeout(() => s.destroy(), this.#lingerMs);
    this.#linger.unref();
  }

  /** onread callback: true keeps reading. */
  #onRead(n: number, buf: Buffer): boolean {
    this.#onChunk(buf, n);
    return true;
  }

  /** The error boundary: nothing thrown while handling input leaves this function; it closes only this connection. */
  #onChunk(chunk: Buffer, n = chunk.length): void {
    if (this.#state !== 'open') return;
    const h = this.#handler;
    this.#inChunk = true;
    try {
      h.onChunkStart?.();
      this.#reader.push(chunk, n);
    } catch (err) {
      this.#internalError(err);
    } finally {
      this.#inChunk = false;
      try {
        h.onChunkEnd?.();
      } catch (err) {
        this.#internalError(err);
      }
      this.flush();
    }
  }

  /** A control PDU (ICReq/ICResp, TermReq) from the reader. */
  #onPdu(pdu: Pdu): void {
    if (this.#priming) return;
    // After a TermReq the rest of the chunk is not acted on (TCP 1.0 §3.6.2.4/5: the connection is being torn down).
    if (this.#state !== 'open') return;
    const f = this.#handler.received[pdu.type as typeof PduType.IC_REQ] as ((p: Pdu) => void) | undefined;
    if (f !== undefined) f(pdu);
    else this.#unexpected(pdu.type);
  }

  /** Every other PDU: its header handler, which says where its data goes. */
  #onHeader(type: PduType, psh: Buffer, datal: number, flags: number): DataSink | undefined {
    if (this.#state !== 'open') return undefined;
    const f = this.#headers[type];
    if (f !== undefined) return f(psh, datal, flags);
    this.#unexpected(type);
    return undefined;
  }

  #onDataEnd(sink: DataSink, digestOk: boolean): void {
    if (this.#state === 'open') this.#handler.dataEnd?.(sink, digestOk);
  }

  /** A kind this role does not take here (the reader already refuses the other direction's types). */
  #unexpected(type: number): void {
    this.fatal({ fes: Fes.PDU_SEQUENCE_ERROR, fei: 0, reason: `unexpected PDU type ${type}`, header: Buffer.from([type]) });
  }

  #internalError(err: unknown): void {
    if (this.#state === 'closed') return;
    try {
      this.#handler.onInternalError?.(err);
    } catch {
      // The connection is destroyed below either way; a failing report must not escape the socket callback.
    }
    this.destroy();
  }

  #onConnect(): void {
    this.#setState('open');
  }

  #onSocketError(err: Error): void {
    this.#socketError ??= err;
  }

  #onSocketClose(): void {
    if (this.#detached) return;
    if (this.#linger !== undefined) clearTimeout(this.#linger);
    this.#linger = undefined;
    if (this.#shapeTimer !== undefined) clearTimeout(this.#shapeTimer);
    this.#shapeTimer = undefined;
    if (!this.#setState('closed')) return;
    this.#handler.onClose(this.#socketError);
  }
}
