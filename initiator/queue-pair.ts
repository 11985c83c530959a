// One submission/completion queue pair over one HostTcpQueue: CID table with a generation counter, per-command
// timeouts and per-queue counters (io_queue_info). Linux drivers/nvme/host/tcp.c + blk-mq tags (nvme_cid()).
import { Buffer } from 'node:buffer';
import {
  ConnectionClosedError,
  CqeOffset,
  NvmeStatusError,
  SGL_DESC_SIZE,
  SglOffset,
  SglType,
  SqeOffset,
  TimeoutError,
  statusName,
} from '../protocol/index.js';
import type { HostCommand, HostTcpQueue } from './transport/index.js';
import { rd16, rd32, wr16, wr32 } from '../protocol/le.js';

/** What a command completed with (CQE fields the caller may need). */
export interface Completion {
  dw0: number;
  dw1: number;
  status: number;
}

/** A command to submit: a 64-byte SQE (CID and SGL are filled in here) and its data. */
export interface SubmitSpec {
  sqe: Buffer;
  /** Host-to-controller data; sent in-capsule when it fits the queue's inline limit, else by R2T. */
  h2c?: Buffer;
  /** Controller-to-host destination buffer; its length is the transfer length. */
  c2h?: Buffer;
  /** Force in-capsule data regardless of the inline limit (Fabrics Connect, Linux nvme_tcp_setup_cmd_pdu). */
  forceInCapsule?: boolean;
  timeoutMs: number;
  /** Use a reserved CID outside the tag set (the AER, Linux CID 31 on the admin queue). */
  reservedCid?: number;
}

/**
 * A tag space shared by the queues of one hctx (queue group): CIDs are unique across the group. CID = genctr(4 bits)
 * << 12 | tag, as Linux nvme_cid() does, so a stale completion for a reused tag is detected.
 */
export class TagSet {
  readonly #free: number[] = [];
  readonly #gen: Uint8Array;
  readonly #waiters: Array<() => void> = [];
  readonly size: number;

  constructor(size: number) {
    if (size < 1 || size > 4096) throw new RangeError(`tag set size ${size} outside 1..4096`);
    this.size = size;
    this.#gen = new Uint8Array(size);
    for (let t = size - 1; t >= 0; t--) this.#free.push(t);
  }

  get inUse(): number {
    return this.size - this.#free.length;
  }

  /** Take a tag and return its CID, or undefined when all are in use. */
  tryGet(): number | undefined {
    const tag = this.#free.pop();
    if (tag === undefined) return undefined;
    const g = ((this.#gen[tag] as number) + 1) & 0xf;
    this.#gen[tag] = g;
    return (g << 12) | tag;
  }

  /** Wait for a free tag (FIFO). */
  async get(): Promise<number> {
    for (;;) {
      const cid = this.tryGet();
      if (cid !== undefined) return cid;
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  /** Call `fn` once a tag is put back (FIFO with get()); `fn` must try again, since another submitter may win it. */
  onFree(fn: () => void): void {
    this.#waiters.push(fn);
  }

  put(cid: number): void {
    this.#free.push(cid & 0xfff);
    this.#waiters.shift()?.();
  }

  /** The CID is the current incarnation of its tag. */
  matches(cid: number): boolean {
    const tag = cid & 0xfff;
    return tag < this.size && this.#gen[tag] === cid >>> 12;
  }
}

/** CQE Dwords 0 and 1 of a completed command (NVMe Base 2.0 §4.2.1: command specific, e.g. Connect's CNTLID). */
export interface IoResult {
  dw0: number;
  dw1: number;
}

/**
 * A caller-owned, reusable command for the callback API (Namespace.submit): the library owns it from submit until
 * ioDone, like a blk-mq struct request, and allocates nothing per command for it. The one request shape every
 * command takes from the controller down to the queue; the promise API wraps its commands in one (PromiseRequest).
 */
export interface IoRequest {
  /** true: Write from buf (and the write hctxs); false: Read into buf. */
  write: boolean;
  /** First logical block: a non-negative safe integer, the one LBA type of the initiator's API (see Namespace). */
  lba: number;
  blocks: number;
  /** Data: exactly blocks × block size bytes (a longer buffer costs a view per command). */
  buf: Buffer;
  /** Force Unit Access (CDW12 bit 30). */
  fua?: boolean;
  /** Fail on a transport error instead of waiting for reconnect (REQ_FAILFAST_TRANSPORT). */
  failfast?: boolean;
  /** Use the poll hctxs (nr_poll_queues). */
  poll?: boolean;
  /** This command's timeout in ms (blk-mq's rq->timeout); absent: the controller's io_timeout. */
  timeoutMs?: number;
  /**
   * Where the queue puts CQE Dwords 0 and 1 on success, for requests that want them (as Linux keeps the CQE result in
   * nvme_req(req)->result); absent: not kept.
   */
  result?: IoResult;
  /** Called once, synchronously from the receive path: undefined on success, else the error. Must not throw. */
  ioDone(err: Error | undefined): void;

  // The library's own fields, written on submit and read until ioDone (blk-mq keeps the same in struct request and
  // nvme_request): the request is the one record every seam passes, from the controller through the hctx to the queue
  // and back to its sink, so nothing is allocated per command and no seam passes them one by one. A caller leaves them
  // unset; a class that implements IoRequest may declare them for a stable shape.
  /** Writes the SQE (the namespace for a Read/Write, the request itself on the promise path). */
  builder?: IoSqeBuilder;
  /** Where the queue reports the outcome (the controller: retry, requeue or ioDone). */
  sink?: IoSink;
  /** The hctx index asked for (Namespace.submit's `hctx`); retries and requeues go back to it. */
  hctx?: number;
  /** Retries so far (nvme_req(req)->retries), counted against max_retries. */
  retries?: number;
  /** The timeout the queue applies: `timeoutMs`, else the controller's io_timeout (blk-mq's rq->timeout). */
  rqTimeoutMs?: number;
  /** Send the data in-capsule whatever the inline limit (Fabrics Connect, Linux nvme_tcp_setup_cmd_pdu). */
  forceInCapsule?: boolean;
}

/** Writes a request's SQE into a scratch buffer (for a Read/Write the namespace knows nsid and block size). */
export interface IoSqeBuilder {
  /** Fill all 64 bytes of `sqe` but CID and SGL; returns the transfer length in bytes (0: no data). */
  buildIoSqe(sqe: Buffer, io: IoRequest): number;
}

/** Where a callback-API command's completion goes (the controller: retry, requeue, or ioDone). */
export interface IoSink {
  /** err: undefined on success, NvmeStatusError for an NVMe status, else a transport or timeout error. */
  ioCompleted(io: IoRequest, err: Error | undefined): void;
}

const NO_DATA = Buffer.alloc(0);

/**
 * The promise API as a thin adapter over the callback core: a SubmitSpec wrapped in a pooled IoRequest that is its own
 * SQE builder and settles its promise from ioDone, so both APIs share one submission, completion, timeout, retry and
 * requeue path (blk-mq has one request path; a synchronous caller just waits on it). One free list per thread: a
 * promise command allocates its promise and the completion it resolves with, nothing else here.
 */
export class PromiseRequest implements IoRequest, IoSqeBuilder, IoSink {
  static readonly #free: PromiseRequest[] = [];
  write = false;
  lba = 0;
  blocks = 0;
  buf: Buffer = NO_DATA;
  failfast = false;
  poll = false;
  timeoutMs = 0;
  readonly result: IoResult = { dw0: 0, dw1: 0 };
  builder: IoSqeBuilder = this;
  sink: IoSink = this;
  hctx = 0;
  retries = 0;
  rqTimeoutMs = 0;
  forceInCapsule = false;
  #sqe: Buffer = NO_DATA;
  #len = 0;
  #resolve: ((c: Completion) => void) | undefined = undefined;
  #reject: ((e: Error) => void) | undefined = undefined;
  /** The promise executor, made once per request rather than a closure per command. */
  readonly #arm = (resolve: (c: Completion) => void, reject: (e: Error) => void): void => {
    this.#resolve = resolve;
    this.#reject = reject;
  };

  /**
   * A request for `spec` (its promise: settled()). The data's direction follows the buffer given (h2c: write, c2h: read);
   * `write` only says which hctxs a command without data uses (Flush and Write Zeroes go with the writes).
   */
  static take(spec: SubmitSpec, write: boolean): PromiseRequest {
    const r = PromiseRequest.#free.pop() ?? new PromiseRequest();
    const h2c = spec.h2c !== undefined && spec.h2c.length > 0 ? spec.h2c : undefined;
    const c2h = spec.c2h !== undefined && spec.c2h.length > 0 ? spec.c2h : undefined;
    r.write = h2c !== undefined || (c2h === undefined && write);
    r.buf = h2c ?? c2h ?? NO_DATA;
    r.#len = r.buf.length;
    r.#sqe = spec.sqe;
    r.timeoutMs = spec.timeoutMs;
    r.rqTimeoutMs = spec.timeoutMs;
    r.forceInCapsule = spec.forceInCapsule === true;
    r.builder = r;
    r.sink = r;
    r.hctx = 0;
    r.retries = 0;
    return r;
  }

  /** The promise ioDone settles; taken before the request is submitted, since it may complete at once. */
  settled(): Promise<Completion> {
    return new Promise<Completion>(this.#arm);
  }

  buildIoSqe(sqe: Buffer): number {
    this.#sqe.copy(sqe, 0, 0, 64);
    return this.#len;
  }

  ioDone(err: Error | undefined): void {
    const resolve = this.#resolve;
    const reject = this.#reject;
    // Settled already: a second ioDone must not put this object in the free list twice, where two later commands
    // would share it and one's completion would settle the other's promise.
    if (resolve === undefined) return;
    const dw0 = this.result.dw0;
    const dw1 = this.result.dw1;
    this.#resolve = undefined;
    this.#reject = undefined;
    this.buf = NO_DATA;
    this.#sqe = NO_DATA;
    this.failfast = false;
    this.poll = false;
    this.result.dw0 = 0;
    this.result.dw1 = 0;
    PromiseRequest.#free.push(this);
    if (err !== undefined) reject?.(err);
    else resolve?.({ dw0, dw1, status: 0 });
  }

  /** IoSink, for a queue-level promise command (no controller in between to retry or requeue it). */
  ioCompleted(_io: IoRequest, err: Error | undefined): void {
    this.ioDone(err);
  }
}

/**
 * One preallocated command slot per tag (Linux nvme_tcp_request, allocated once per tag by blk-mq init_request):
 * a command reuses its tag's slot, so submit and complete allocate nothing for bookkeeping.
 */
class CommandSlot implements HostCommand {
  cid = 0;
  h2c: Buffer | undefined = undefined;
  c2h: Buffer | undefined = undefined;
  h2cSent = 0;
  c2hReceived = 0;
  transportStatus = 0;
  active = false;
  reserved = false;
  /** Reserved-CID commands only; a tag's deadline is in QueuePair's #deadlines. */
  deadline = 0;
  bytes = 0;
  /** The request: its SQE builder, sink and what requeue needs to submit it again travel in it. */
  io: IoRequest | undefined = undefined;

  arm(cid: number, h2c: Buffer | undefined, c2h: Buffer | undefined, reserved: boolean, bytes: number): void {
    this.cid = cid;
    this.h2c = h2c;
    this.c2h = c2h;
    this.h2cSent = 0;
    this.c2hReceived = 0;
    this.transportStatus = 0;
    this.active = true;
    this.reserved = reserved;
    this.bytes = bytes;
  }

  /** Drop every reference so a finished command pins no buffer or closure. */
  clear(): void {
    this.active = false;
    this.h2c = undefined;
    this.c2h = undefined;
    this.io = undefined;
  }
}

/** Queue states: connecting (IC + Connect in progress), live, closed (socket gone; all commands failed). */
export type QueuePairState = 'connecting' | 'live' | 'closed';

/** Allowed QueuePair edges; QueuePair.setState refuses every other one (closed is final: the controller makes a new pair). */
export const QUEUE_PAIR_TRANSITIONS: Readonly<Record<QueuePairState, readonly QueuePairState[]>> = {
  connecting: ['live', 'closed'],
  live: ['closed'],
  closed: [],
};

export interface QueueCounters {
  submitted: number;
  completed: number;
  errors: number;
  bytes: number;
}

/**
 * An I/O queue as the hctxs and the controller drive it, wherever it runs: a QueuePair on the calling thread or a
 * HostRemoteQueue whose QueuePair an io worker runs (the io_cpu of Linux nvme_tcp_queue).
 */
export interface IoQueue {
  readonly qid: number;
  readonly tags: TagSet;
  readonly state: string;
  readonly inFlight: number;
  readonly counters: QueueCounters;
  /** Owning io worker, −1: the calling thread. */
  readonly worker: number;
  /** Local and remote endpoint "addr:port". */
  readonly source: string;
  readonly destination: string;
  /** Submit `io` with its builder, sink, hctx, retries and rqTimeoutMs set; the outcome goes to `io.sink`. */
  submitIo(io: IoRequest): void;
  close(err?: Error): void;
}

export interface QueuePairOptions {
  qid: number;
  tcp: HostTcpQueue;
  tags: TagSet;
  /** Largest write sent in-capsule (IOCCSZ*16−64 when SGLS bit 20; 8 KiB on the admin queue). */
  inlineLimit: number;
  /** Called once when the queue dies or a command times out (controller error recovery). */
  onError: (qp: QueuePair, err: Error) => void;
  /** Called for every completion seen (traffic-based keep-alive bookkeeping). */
  onActivity?: () => void;
}

/**
 * Write SGL1 of `sqe` in place (NVMe/TCP 1.0 §3.3.3), the only place the host describes a command's data, as Linux
 * nvme_tcp_setup_cmd_pdu does with nvme_tcp_set_sg_{inline,host_data,null}: a Data Block with sub-type offset
 * (offset 0, ICDOFF 0) for in-capsule data, else a Transport Data Block of the transfer length (0: no data).
 * Byte writes, so nothing is allocated per command.
 */
function setSgl(sqe: Buffer, length: number, inCapsule: boolean): void {
  const at = SqeOffset.dptr;
  // Plain stores of the 16 descriptor bytes (address 0, length, reserved 0, type): Buffer.fill's argument checks were
  // ~1 % of the host's CPU per I/O (docs/performance.md, "Host path, third pass").
  wr32(sqe, at, 0);
  wr32(sqe, at + 4, 0);
  wr32(sqe, at + SglOffset.length, length);
  wr32(sqe, at + SGL_DESC_SIZE - 4, 0);
  sqe[at + SglOffset.type] = inCapsule ? SglType.DATA_BLOCK_OFFSET : SglType.TRANSPORT_DATA_BLOCK;
}

export class QueuePair implements IoQueue {
  readonly qid: number;
  readonly worker = -1;
  readonly tcp: HostTcpQueue;
  readonly tags: TagSet;
  inlineLimit: number;
  #state: QueuePairState = 'connecting';
  /** Slot per tag (index = CID bits 11:0); a slot is in flight on this queue while `active` and its cid matches. */
  readonly #slots: CommandSlot[];
  /** Deadline of the command in each slot (ms since #epoch), valid while the slot is active. */
  readonly #deadlines: Float64Array;
  /** Commands on reserved CIDs outside the tag set (the AER): rare, so a map. */
  readonly #reserved = new Map<number, CommandSlot>();
  #inFlight = 0;
  /** Scratch SQE for every command: HostTcpQueue.sendCapsule copies it into the send batch before returning. */
  readonly #sqe = Buffer.alloc(64);
  readonly #opts: QueuePairOptions;
  #timer: NodeJS.Timeout | undefined;
  #timerPeriod = 0;
  /** The timeout #armTimer last looked at. */
  #timerFor = -1;
  /**
   * The scan's timer callback, made once: an arrow function inside #armTimer made V8 allocate #armTimer's context on
   * every call, ~40 bytes per I/O (docs/performance.md, "Host path, fourth pass").
   */
  readonly #scanTick = (): void => this.#scan();
  /**
   * Milliseconds since #epoch, read once per timeout scan and when the scan starts, not per command: a clock read
   * per command left a 16-byte number behind each time (docs/performance.md, "Host path, third pass"). A command's
   * deadline is this plus its timeout plus one scan period, so it never expires early and at most two periods late
   * (blk-mq's timeout scan is as coarse).
   */
  #clock = 0;
  readonly #epoch = Date.now();
  #errorReported = false;
  readonly counters: QueueCounters = { submitted: 0, completed: 0, errors: 0, bytes: 0 };

  constructor(opts: QueuePairOptions) {
    this.qid = opts.qid;
    this.tcp = opts.tcp;
    this.tags = opts.tags;
    this.inlineLimit = opts.inlineLimit;
    this.#opts = opts;
    this.#slots = Array.from({ length: opts.tags.size }, () => new CommandSlot());
    this.#deadlines = new Float64Array(opts.tags.size);
    opts.tcp.setHandlers({
      command: (cid) => this.#lookup(cid),
      onResponse: (buf, at, cmd, cid) => this.#complete(buf, at, cmd as CommandSlot | undefined, cid),
      onClose: (err) => this.#closed(err),
    });
    if (opts.tcp.closed) this.setState('closed');
  }

  get state(): QueuePairState {
    return this.#state;
  }

  get source(): string {
    return `${this.tcp.localAddress ?? '?'}:${this.tcp.localPort ?? 0}`;
  }

  get destination(): string {
    return `${this.tcp.remoteAddress ?? '?'}:${this.tcp.remotePort ?? 0}`;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  setLive(): void {
    this.setState('live');
  }

  /** The one place the queue state changes: refuses (returns false) any edge not in QUEUE_PAIR_TRANSITIONS. */
  setState(next: QueuePairState): boolean {
    if (!QUEUE_PAIR_TRANSITIONS[this.#state].includes(next)) return false;
    this.#state = next;
    return true;
  }

  #lookup(cid: number): CommandSlot | undefined {
    if (this.#reserved.size > 0) {
      const r = this.#reserved.get(cid);
      if (r !== undefined) return r;
    }
    const s = this.#slots[cid & 0xfff];
    return s !== undefined && s.active && s.cid === cid ? s : undefined;
  }

  #slotFor(cid: number, reserved: boolean): CommandSlot {
    if (!reserved) return this.#slots[cid & 0xfff] as CommandSlot;
    const s = new CommandSlot();
    this.#reserved.set(cid, s);
    return s;
  }

  #release(p: CommandSlot): void {
    if (p.reserved) this.#reserved.delete(p.cid);
    else this.tags.put(p.cid);
  }

  /**
   * Submit one command through the promise API, an adapter over the callback core below: resolves with its
   * completion, rejects with NvmeStatusError or a transport error. The admin queue and Fabrics Connect use it.
   */
  submit(spec: SubmitSpec): Promise<Completion> {
    const req = PromiseRequest.take(spec, false);
    const done = req.settled();
    try {
      if (spec.reservedCid === undefined) this.submitIo(req);
      else this.#issue(spec.reservedCid, true, req);
    } catch (e) {
      req.ioDone(e instanceof Error ? e : new Error(String(e)));
    }
    return done;
  }

  /**
   * Submit a command through the callback API: no promise, closure or object per command (a tag's slot and one
   * scratch SQE are reused). A tag, then the command; with none free, wait for one (FIFO). The outcome goes to
   * `io.sink.ioCompleted`, synchronously from the receive path.
   */
  submitIo(io: IoRequest): void {
    const cid = this.tags.tryGet();
    if (cid === undefined) this.#waitForTag(io);
    else this.#issue(cid, false, io);
  }

  /**
   * More requests than tags: wait for one. The closure lives in its own method: a closure over submitIo's parameters
   * made V8 allocate their context on every submitIo call, taken or not (88 bytes per I/O, docs/performance.md).
   */
  #waitForTag(io: IoRequest): void {
    this.tags.onFree(() => this.submitIo(io));
  }

  /** The one submission path: SQE, CID and SGL into the scratch SQE, the slot armed, the capsule sent. */
  #issue(cid: number, reserved: boolean, io: IoRequest): void {
    if (this.#state === 'closed') {
      if (!reserved) this.tags.put(cid);
      (io.sink as IoSink).ioCompleted(io, this.tcp.closeError ?? new ConnectionClosedError(`queue ${this.qid} is closed`));
      return;
    }
    const sqe = this.#sqe;
    const len = (io.builder as IoSqeBuilder).buildIoSqe(sqe, io);
    // Plain stores and loads (protocol/le.ts) on the per-command path: Buffer's read/write methods validate their
    // arguments on every call (docs/performance.md, "Host path, fourth pass").
    wr16(sqe, SqeOffset.cid, cid);
    const data = len === 0 ? undefined : io.buf.length === len ? io.buf : io.buf.subarray(0, len);
    // No data: the null SGL (a Transport Data Block of length 0, Linux nvme_tcp_set_sg_null), whatever `write` says.
    const inCapsule = io.write && len > 0 && (len <= this.inlineLimit || io.forceInCapsule === true);
    setSgl(sqe, len, inCapsule);
    const p = this.#slotFor(cid, reserved);
    p.arm(cid, io.write && !inCapsule ? data : undefined, io.write ? undefined : data, reserved, len);
    this.#setDeadline(p, io.rqTimeoutMs as number);
    p.io = io;
    this.#started();
    this.tcp.sendCapsule(sqe, inCapsule ? data : undefined);
  }

  #started(): void {
    this.#inFlight++;
    this.counters.submitted++;
  }

  /**
   * Arms the timeout scan (if it is not running) and sets the deadline of `p`, submitted now. A tag's deadline goes
   * into a Float64Array, where a double is stored without boxing it.
   */
  #setDeadline(p: CommandSlot, timeoutMs: number): void {
    this.#armTimer(timeoutMs);
    if (p.reserved) p.deadline = this.#clock + timeoutMs + this.#timerPeriod;
    else this.#deadlines[p.cid & 0xfff] = this.#clock + timeoutMs + this.#timerPeriod;
  }

  #complete(cqe: Buffer | undefined, at: number, p: CommandSlot | undefined, cid: number): void {
    if (p === undefined || (!p.reserved && !this.tags.matches(cid))) {
      // Linux nvme_tcp_process_nvme_cqe: a CQE for no known command ("got bad cqe.command_id") → error recovery.
      this.#reportError(new ConnectionClosedError(`queue ${this.qid}: completion for unknown cid 0x${cid.toString(16)}`));
      this.tcp.close(new ConnectionClosedError(`queue ${this.qid}: completion for unknown cid 0x${cid.toString(16)}`));
      return;
    }
    this.#opts.onActivity?.();
    // The CQE fields read in place (at `at` in cqe, valid only during this call); status is the Linux-style 15-bit value.
    const dw0 = cqe === undefined ? 0 : rd32(cqe, at + CqeOffset.dw0);
    const dw1 = cqe === undefined ? 0 : rd32(cqe, at + CqeOffset.dw1);
    const cqeStatus = cqe === undefined ? 0 : rd16(cqe, at + CqeOffset.status) >>> 1;
    const status = p.transportStatus !== 0 ? p.transportStatus : cqeStatus;
    this.counters.completed++;
    if (status !== 0) this.counters.errors++;
    else this.counters.bytes += p.bytes;
    if (status !== 0) {
      this.#finish(p, new NvmeStatusError(status, cid, statusName(status), dw0));
      return;
    }
    const r = (p.io as IoRequest).result;
    if (r !== undefined) {
      r.dw0 = dw0;
      r.dw1 = dw1;
    }
    this.#finish(p, undefined);
  }

  /** Fail one command with a transport-side error (timeout, teardown): already removed from the in-flight set. */
  #fail(p: CommandSlot, err: Error): void {
    this.counters.errors++;
    this.#finish(p, err);
  }

  /** The one end of a command: its slot goes back, then its sink hears the outcome. */
  #finish(p: CommandSlot, err: Error | undefined): void {
    const io = p.io as IoRequest;
    // The request is read out of the slot before the tag goes back: put() may hand it to a waiting submitter at once.
    p.clear();
    this.#inFlight--;
    this.#release(p);
    (io.sink as IoSink).ioCompleted(io, err);
  }

  /**
   * One periodic check per queue, armed only while commands are in flight (blk-mq's timeout scan, not a timer per
   * I/O); its period follows the shortest timeout seen so far.
   */
  #armTimer(timeoutMs: number): void {
    // Per command: the scan runs and was armed for this timeout already (one comparison, not the period's arithmetic).
    if (timeoutMs === this.#timerFor && this.#timer !== undefined) return;
    this.#timerFor = timeoutMs;
    const period = Math.max(10, Math.min(1000, Math.floor(timeoutMs / 4)));
    if (this.#timer !== undefined) {
      if (period >= this.#timerPeriod) return;
      clearInterval(this.#timer);
    }
    this.#clock = Date.now() - this.#epoch;
    this.#timerPeriod = period;
    this.#timer = setInterval(this.#scanTick, period);
    this.#timer.unref();
  }

  #scan(): void {
    if (this.#inFlight === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
      return;
    }
    const now = (this.#clock = Date.now() - this.#epoch);
    let expired: CommandSlot | undefined;
    const slots = this.#slots;
    for (let i = 0; i < slots.length; i++) {
      const p = slots[i] as CommandSlot;
      if (p.active && (this.#deadlines[i] as number) <= now) {
        expired = p;
        break;
      }
    }
    if (expired === undefined) for (const p of this.#reserved.values()) if (p.deadline <= now) expired = p;
    if (expired === undefined) return;
    // Linux nvme_tcp_timeout: fail the command and start controller error recovery (teardown + reconnect).
    const err = new TimeoutError(`queue ${this.qid}: command cid 0x${expired.cid.toString(16)} timed out`);
    this.#fail(expired, err);
    this.#reportError(err);
    this.tcp.close(new ConnectionClosedError(`queue ${this.qid}: torn down after a command timeout`, { cause: err }));
  }

  #reportError(err: Error): void {
    if (this.#errorReported) return;
    this.#errorReported = true;
    this.#opts.onError(this, err);
  }

  #closed(err: Error): void {
    this.setState('closed');
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    // On teardown every in-flight command is rejected with the one error that closed the queue (Linux
    // nvme_tcp_error_recovery cancels all requests with the same status).
    const pend = [...this.#slots.filter((p) => p.active), ...this.#reserved.values()];
    for (const p of pend) this.#fail(p, err);
    this.#reportError(err);
  }

  close(err?: Error): void {
    this.tcp.close(err);
  }
}
