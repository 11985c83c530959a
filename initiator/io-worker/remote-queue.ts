// The calling thread's face of an I/O queue that an io worker runs: the same submitIo / inFlight / close the
// hctxs and the controller use on a local QueuePair, over the queue's two rings. CIDs come from the hctx's shared tag
// set here (as blk-mq tags are allocated on the submitting CPU, Linux blk_mq_get_tag) and index a preallocated slot
// table; the worker's QueuePair runs the wire protocol. Data crosses in shared memory: a buffer from the controller's
// I/O buffer pool is used in place, any other Buffer is copied once into this queue's bounce area.
import { Buffer } from 'node:buffer';
import { ConnectionClosedError, InvalidArgumentError } from '../errors.js';
import type { IoQueue, IoRequest, IoSink, IoSqeBuilder, QueueCounters, TagSet } from '../queue-pair.js';
import { RingConsumer, RingProducer, createRingBuffer } from './ring.js';
import { Cqe, type OpenQueueMsg, type OpenedQueue, SqFlag, Sqe, cqError } from './wire.js';

/** connecting: Open sent to the worker; live: commands flow; closing: Close sent, waiting for the worker's answer. */
export type RemoteQueueState = 'connecting' | 'live' | 'closing' | 'closed';

const TRANSITIONS: Readonly<Record<RemoteQueueState, readonly RemoteQueueState[]>> = {
  connecting: ['live', 'closing', 'closed'],
  live: ['closing', 'closed'],
  closing: ['closed'],
  closed: [],
};

/** How long a closing queue waits for its worker before failing what it still holds (a worker never answering). */
const CLOSE_GRACE_MS = 5000;

/** One slot per tag: what the completion needs (the blk-mq request pdu of a worker queue). */
class RemoteSlot {
  active = false;
  cid = 0;
  length = 0;
  /** A read whose destination is not in shared memory: copied out of the bounce area on completion. */
  copyOut: Buffer | undefined = undefined;
  /** The request: its SQE builder, sink and what requeue needs travel in it. */
  io: IoRequest | undefined = undefined;

  clear(): void {
    this.active = false;
    this.copyOut = undefined;
    this.io = undefined;
  }
}

/** What the queue needs from its io worker (the pool's handle). */
export interface RemoteQueueWorker {
  readonly index: number;
  /** The controller's shared I/O buffer pool. */
  readonly pool: SharedArrayBuffer;
  open(q: HostRemoteQueue, msg: Omit<OpenQueueMsg, 't'>): Promise<OpenedQueue>;
  close(key: number): void;
}

export interface RemoteQueueOptions {
  key: number;
  qid: number;
  tags: TagSet;
  inlineLimit: number;
  /** Largest transfer of one command (MDTS): the bounce area has this much per tag. */
  slotBytes: number;
  worker: RemoteQueueWorker;
  onError: (q: HostRemoteQueue, err: Error) => void;
  onActivity?: () => void;
}

export class HostRemoteQueue implements IoQueue {
  readonly qid: number;
  readonly tags: TagSet;
  readonly inlineLimit: number;
  readonly worker: number;
  readonly key: number;
  readonly counters: QueueCounters = { submitted: 0, completed: 0, errors: 0, bytes: 0 };
  source = '?:0';
  destination = '?:0';
  #state: RemoteQueueState = 'connecting';
  readonly #opts: RemoteQueueOptions;
  readonly #slots: RemoteSlot[];
  readonly #sqSab: SharedArrayBuffer;
  readonly #cqSab: SharedArrayBuffer;
  readonly #capacity: number;
  readonly #sq: RingProducer;
  readonly #cq: RingConsumer;
  readonly #bounceSab: SharedArrayBuffer;
  readonly #bounce: Buffer;
  readonly #pool: SharedArrayBuffer;
  readonly #sqe = Buffer.alloc(64);
  #inFlight = 0;
  #publishScheduled = false;
  #closeErr: Error | undefined;
  #graceTimer: NodeJS.Timeout | undefined;
  readonly #publish = (): void => {
    this.#publishScheduled = false;
    this.#sq.publish();
  };
  readonly #onCqe = (w: Int32Array, b: number): void => this.#complete(w, b);

  constructor(o: RemoteQueueOptions) {
    this.#opts = o;
    this.qid = o.qid;
    this.key = o.key;
    this.tags = o.tags;
    this.inlineLimit = o.inlineLimit;
    this.worker = o.worker.index;
    this.#pool = o.worker.pool;
    this.#slots = Array.from({ length: o.tags.size }, () => new RemoteSlot());
    const sq = createRingBuffer(o.tags.size, Sqe.words);
    const cq = createRingBuffer(o.tags.size, Cqe.words);
    this.#capacity = sq.layout.capacity;
    this.#sqSab = sq.sab;
    this.#cqSab = cq.sab;
    this.#sq = new RingProducer(sq.sab, sq.layout);
    this.#cq = new RingConsumer(cq.sab, cq.layout);
    this.#bounceSab = new SharedArrayBuffer(o.tags.size * o.slotBytes);
    this.#bounce = Buffer.from(this.#bounceSab);
  }

  get state(): RemoteQueueState {
    return this.#state;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  #setState(next: RemoteQueueState): boolean {
    if (!TRANSITIONS[this.#state].includes(next)) return false;
    this.#state = next;
    return true;
  }

  /** Open the socket and Fabrics Connect the queue on its worker (the Connect is a command on that queue). */
  async connect(c: Omit<OpenQueueMsg, 't' | 'key' | 'qid' | 'depth' | 'inlineLimit' | 'sq' | 'cq' | 'ringCapacity' | 'bounce' | 'slotBytes'>): Promise<OpenedQueue['auth']> {
    const ends = await this.#opts.worker.open(this, {
      key: this.key,
      qid: this.qid,
      ...c,
      depth: this.tags.size,
      inlineLimit: this.inlineLimit,
      sq: this.#sqSab,
      cq: this.#cqSab,
      ringCapacity: this.#capacity,
      bounce: this.#bounceSab,
      slotBytes: this.#opts.slotBytes,
    });
    this.source = ends.local;
    this.destination = ends.remote;
    if (!this.#setState('live')) throw this.#closeErr ?? new ConnectionClosedError(`queue ${this.qid} closed while connecting`);
    void this.#cqLoop();
    return ends.auth;
  }

  async #cqLoop(): Promise<void> {
    while (this.#state === 'live' || this.#state === 'closing') {
      await this.#cq.wait();
      this.#cq.drain(this.#onCqe);
    }
  }

  #closedError(): Error {
    return this.#closeErr ?? new ConnectionClosedError(`queue ${this.qid} is closed`);
  }

  /**
   * Submit, as QueuePair.submitIo: a tag, a slot, one ring entry; nothing allocated per command. The one path for both
   * APIs (the promise API's commands arrive as PromiseRequests); dw0/dw1 come back from the worker in the CQ entry.
   */
  submitIo(io: IoRequest): void {
    const cid = this.tags.tryGet();
    if (cid === undefined) {
      this.#waitForTag(io);
      return;
    }
    const sink = io.sink as IoSink;
    if (this.#state !== 'live') {
      this.tags.put(cid);
      sink.ioCompleted(io, this.#closedError());
      return;
    }
    const len = (io.builder as IoSqeBuilder).buildIoSqe(this.#sqe, io);
    if (len > this.#opts.slotBytes && io.buf.buffer !== this.#pool) {
      this.tags.put(cid);
      sink.ioCompleted(io, new InvalidArgumentError('buf', `${len} bytes exceed the queue's ${this.#opts.slotBytes}-byte transfer slot`));
      return;
    }
    const p = this.#slots[cid & 0xfff] as RemoteSlot;
    p.io = io;
    this.#send(p, cid, io, len);
  }

  /** Out of submitIo so that V8 does not allocate a context for its parameters on every call (docs/performance.md). */
  #waitForTag(io: IoRequest): void {
    this.tags.onFree(() => this.submitIo(io));
  }

  #send(p: RemoteSlot, cid: number, io: IoRequest, len: number): void {
    const tag = cid & 0xfff;
    const write = io.write;
    const data = io.buf;
    p.active = true;
    p.cid = cid;
    p.length = len;
    let flags = write ? SqFlag.write : 0;
    let offset = 0;
    if (len > 0) {
      if (data.buffer === this.#pool) {
        flags |= SqFlag.pool;
        offset = data.byteOffset;
      } else {
        offset = tag * this.#opts.slotBytes;
        // The one copy of a caller's plain Buffer: into the bounce area for a write, out of it for a read.
        if (write) this.#bounce.set(data.length === len ? data : data.subarray(0, len), offset);
        else p.copyOut = data;
      }
    }
    this.#inFlight++;
    this.counters.submitted++;
    // At most one ring entry per tag in flight and the ring holds the tag count: reserve() cannot find it full.
    const b = this.#sq.reserve();
    if (b < 0) throw new Error(`queue ${this.qid}: submission ring full with ${this.#inFlight} in flight`);
    this.#writeAt(b, tag, flags, offset, len, io.rqTimeoutMs as number);
  }

  #writeAt(b: number, tag: number, flags: number, offset: number, len: number, timeoutMs: number): void {
    const w = this.#sq.words;
    w[b + Sqe.tag] = tag;
    w[b + Sqe.flags] = flags;
    w[b + Sqe.offset] = offset;
    w[b + Sqe.length] = len;
    w[b + Sqe.timeoutMs] = timeoutMs;
    const s = this.#sqe;
    for (let i = 0; i < 16; i++) w[b + Sqe.sqe + i] = s.readInt32LE(i * 4);
    this.#sq.commit();
    if (!this.#publishScheduled) {
      this.#publishScheduled = true;
      queueMicrotask(this.#publish);
    }
  }

  #complete(w: Int32Array, b: number): void {
    const tag = w[b + Cqe.tag] as number;
    const p = this.#slots[tag];
    if (p === undefined || !p.active) return;
    this.#opts.onActivity?.();
    const kind = w[b + Cqe.kind] as number;
    const err = kind === 0 ? undefined : cqError(kind, w[b + Cqe.status] as number, w[b + Cqe.dw0] as number, this.qid, p.cid);
    this.#finish(p, err, w[b + Cqe.dw0] as number, w[b + Cqe.dw1] as number);
  }

  #finish(p: RemoteSlot, err: Error | undefined, dw0: number, dw1: number): void {
    this.counters.completed++;
    if (err !== undefined) this.counters.errors++;
    else {
      this.counters.bytes += p.length;
      if (p.copyOut !== undefined) this.#bounce.copy(p.copyOut, 0, (p.cid & 0xfff) * this.#opts.slotBytes, (p.cid & 0xfff) * this.#opts.slotBytes + p.length);
    }
    const io = p.io as IoRequest;
    const cid = p.cid;
    p.clear();
    this.#inFlight--;
    this.tags.put(cid);
    const r = io.result;
    if (err === undefined && r !== undefined) {
      r.dw0 = dw0;
      r.dw1 = dw1;
    }
    (io.sink as IoSink).ioCompleted(io, err);
  }

  /**
   * The worker says the queue is gone (socket loss, timeout, its own close) or the worker died: take the completions
   * it published, fail everything else (Linux nvme_tcp_error_recovery cancels all requests), report the error once.
   */
  workerClosed(err: Error): void {
    const from = this.#state;
    if (from === 'closed') return;
    this.#closeErr ??= err instanceof ConnectionClosedError ? err : new ConnectionClosedError(`queue ${this.qid}: torn down (${err.message})`, { cause: err });
    this.#setState('closed');
    if (this.#graceTimer !== undefined) clearTimeout(this.#graceTimer);
    this.#cq.drain(this.#onCqe);
    this.#cq.close();
    for (const p of this.#slots) if (p.active) this.#finish(p, this.#closeErr, 0, 0);
    if (from === 'live' || from === 'connecting') this.#opts.onError(this, err);
  }

  /** Close the queue: the worker closes its socket and answers; in-flight commands complete or fail with `err`. */
  close(err?: Error): void {
    if (this.#state === 'closing' || this.#state === 'closed') return;
    this.#closeErr = err ?? new ConnectionClosedError(`queue ${this.qid}: closed by host`);
    this.#setState('closing');
    this.#opts.worker.close(this.key);
    this.#graceTimer = setTimeout(() => this.workerClosed(this.#closeErr as Error), CLOSE_GRACE_MS);
    this.#graceTimer.unref();
  }
}
