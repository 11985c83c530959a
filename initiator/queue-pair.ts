// One submission/completion queue pair over one TcpQueue: CID table with a generation counter, per-command
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
import type { HostCommand, TcpQueue } from './transport/index.js';
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

/**
 * A caller-owned, reusable Read or Write for the callback API (Namespace.submit): the library owns it from submit
 * until ioDone, like a blk-mq struct request, and allocates nothing per command for it.
 */
export interface IoRequest {
  /** true: Write from buf; false: Read into buf. */
  write: boolean;
  /** First logical block (a safe integer). */
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
  /** Called once, synchronously from the receive path: undefined on success, else the error. Must not throw. */
  ioDone(err: Error | undefined): void;
}

/** Writes a request's Read/Write SQE into a scratch buffer (the namespace knows nsid and block size). */
export interface IoSqeBuilder {
  /** Fill all 64 bytes of `sqe` but CID and SGL; returns the transfer length in bytes. */
  buildIoSqe(sqe: Buffer, io: IoRequest): number;
}

/** Where a callback-API command's completion goes (the controller: retry, requeue, or ioDone). */
export interface IoSink {
  /** err: undefined on success, NvmeStatusError for an NVMe status, else a transport or timeout error. */
  ioCompleted(io: IoRequest, builder: IoSqeBuilder, hctx: number, retries: number, err: Error | undefined): void;
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
  /** Promise API: the command's settle functions. */
  resolve: ((c: Completion) => void) | undefined = undefined;
  reject: ((e: Error) => void) | undefined = undefined;
  /** Callback API: the request, its SQE builder and sink, and what requeue needs to submit it again. */
  io: IoRequest | undefined = undefined;
  builder: IoSqeBuilder | undefined = undefined;
  sink: IoSink | undefined = undefined;
  hctx = 0;
  retries = 0;

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
    this.resolve = undefined;
    this.reject = undefined;
    this.io = undefined;
    this.builder = undefined;
    this.sink = undefined;
  }
}

/** Queue states: connecting (IC + Connect in progress), live, closed (socket gone; all commands failed). */
export type QueuePairState = 'connecting' | 'live' | 'closed';

export interface QueueCounters {
  submitted: number;
  completed: number;
  errors: number;
  bytes: number;
}

/**
 * An I/O queue as the hctxs and the controller drive it, wherever it runs: a QueuePair on the calling thread or a
 * RemoteQueue whose QueuePair an io worker runs (the io_cpu of Linux nvme_tcp_queue).
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
  submit(spec: SubmitSpec): Promise<Completion>;
  submitIo(io: IoRequest, builder: IoSqeBuilder, sink: IoSink, hctx: number, retries: number, timeoutMs: number): void;
  close(err?: Error): void;
}

export interface QueuePairOptions {
  qid: number;
  tcp: TcpQueue;
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
  readonly tcp: TcpQueue;
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
  /** Scratch SQE for callback-API commands: TcpQueue.sendCapsule copies it into the send batch before returning. */
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
  /**
   * CQE Dword 0 and 1 of the callback-API command being completed, valid only during sink.ioCompleted (as the CQE
   * view is): command-specific results (NVMe Base 2.0 §4.2.1) reach an io worker's completion ring without a field on
   * every IoRequest.
   */
  completionDw0 = 0;
  completionDw1 = 0;

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
    if (opts.tcp.closed) this.#state = 'closed';
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
    if (this.#state === 'connecting') this.#state = 'live';
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

  /** Submit one command; resolves with its completion, rejects with NvmeStatusError or a transport error. */
  submit(spec: SubmitSpec): Promise<Completion> {
    // Not async: with a free tag (the common case) the command's own promise is returned, one allocation less per I/O.
    const cid = spec.reservedCid ?? this.tags.tryGet();
    if (cid === undefined) return this.tags.get().then((c) => this.#submitWithCid(c, spec));
    try {
      return this.#submitWithCid(cid, spec);
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
  }

  #submitWithCid(cid: number, spec: SubmitSpec): Promise<Completion> {
    const reserved = spec.reservedCid !== undefined;
    if (this.#state === 'closed') {
      if (!reserved) this.tags.put(cid);
      return Promise.reject(this.tcp.closeError ?? new ConnectionClosedError(`queue ${this.qid} is closed`));
    }
    const sqe = spec.sqe;
    wr16(sqe, SqeOffset.cid, cid);
    const h2c = spec.h2c !== undefined && spec.h2c.length > 0 ? spec.h2c : undefined;
    const inCapsule = h2c !== undefined && (spec.forceInCapsule === true || h2c.length <= this.inlineLimit);
    const dataLen = h2c?.length ?? spec.c2h?.length ?? 0;
    setSgl(sqe, dataLen, inCapsule);
    return new Promise<Completion>((resolve, reject) => {
      const p = this.#slotFor(cid, reserved);
      p.arm(cid, inCapsule ? undefined : h2c, spec.c2h, reserved, dataLen);
      this.#setDeadline(p, spec.timeoutMs);
      p.resolve = resolve;
      p.reject = reject;
      this.#started();
      this.tcp.sendCapsule(sqe, inCapsule ? h2c : undefined);
    });
  }

  /**
   * Submit a Read or Write through the callback API: no promise, closure or object per command (a tag's slot and one
   * scratch SQE are reused). The outcome goes to `sink.ioCompleted`, synchronously from the receive path.
   */
  submitIo(io: IoRequest, builder: IoSqeBuilder, sink: IoSink, hctx: number, retries: number, timeoutMs: number): void {
    const cid = this.tags.tryGet();
    if (cid === undefined) {
      this.#waitForTag(io, builder, sink, hctx, retries, timeoutMs);
      return;
    }
    if (this.#state === 'closed') {
      this.tags.put(cid);
      sink.ioCompleted(io, builder, hctx, retries, this.tcp.closeError ?? new ConnectionClosedError(`queue ${this.qid} is closed`));
      return;
    }
    const sqe = this.#sqe;
    const len = builder.buildIoSqe(sqe, io);
    // Plain stores and loads (protocol/le.ts) on the per-command path: Buffer's read/write methods validate their
    // arguments on every call (docs/performance.md, "Host path, fourth pass").
    wr16(sqe, SqeOffset.cid, cid);
    const data = io.buf.length === len ? io.buf : io.buf.subarray(0, len);
    const inCapsule = io.write && len <= this.inlineLimit;
    setSgl(sqe, len, inCapsule);
    const p = this.#slots[cid & 0xfff] as CommandSlot;
    p.arm(cid, io.write && !inCapsule ? data : undefined, io.write ? undefined : data, false, len);
    this.#setDeadline(p, timeoutMs);
    p.io = io;
    p.builder = builder;
    p.sink = sink;
    p.hctx = hctx;
    p.retries = retries;
    this.#started();
    this.tcp.sendCapsule(sqe, inCapsule ? data : undefined);
  }

  /**
   * More requests than tags: wait for one. The closure lives in its own method: a closure over submitIo's parameters
   * made V8 allocate their context on every submitIo call, taken or not (88 bytes per I/O, docs/performance.md).
   */
  #waitForTag(io: IoRequest, builder: IoSqeBuilder, sink: IoSink, hctx: number, retries: number, timeoutMs: number): void {
    this.tags.onFree(() => this.submitIo(io, builder, sink, hctx, retries, timeoutMs));
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
    const { io, builder, sink, resolve, reject } = p;
    const hctx = p.hctx;
    const retries = p.retries;
    // Everything is read out of the slot before the tag goes back: put() may hand it to a waiting submitter at once.
    p.clear();
    this.#inFlight--;
    this.#release(p);
    if (io !== undefined) {
      this.completionDw0 = dw0;
      this.completionDw1 = dw1;
      (sink as IoSink).ioCompleted(io, builder as IoSqeBuilder, hctx, retries, status === 0 ? undefined : new NvmeStatusError(status, cid, statusName(status), dw0));
      return;
    }
    if (status !== 0) {
      reject?.(new NvmeStatusError(status, cid, statusName(status), dw0));
      return;
    }
    resolve?.({ dw0, dw1, status: cqeStatus });
  }

  /** Fail one command with a transport-side error (timeout, teardown): already removed from the in-flight set. */
  #fail(p: CommandSlot, err: Error): void {
    const { io, builder, sink, reject } = p;
    const hctx = p.hctx;
    const retries = p.retries;
    p.clear();
    this.#inFlight--;
    this.#release(p);
    this.counters.errors++;
    if (io !== undefined) (sink as IoSink).ioCompleted(io, builder as IoSqeBuilder, hctx, retries, err);
    else reject?.(err);
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
    this.#state = 'closed';
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
