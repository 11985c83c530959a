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

interface Pending extends HostCommand {
  resolve: (c: Completion) => void;
  reject: (e: Error) => void;
  deadline: number;
  reserved: boolean;
  bytes: number;
}

/** Queue states: connecting (IC + Connect in progress), live, closed (socket gone; all commands failed). */
export type QueuePairState = 'connecting' | 'live' | 'closed';

export interface QueueCounters {
  submitted: number;
  completed: number;
  errors: number;
  bytes: number;
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
  sqe.fill(0, at, at + SGL_DESC_SIZE);
  sqe.writeUInt32LE(length, at + SglOffset.length);
  sqe[at + SglOffset.type] = inCapsule ? SglType.DATA_BLOCK_OFFSET : SglType.TRANSPORT_DATA_BLOCK;
}

export class QueuePair {
  readonly qid: number;
  readonly tcp: TcpQueue;
  readonly tags: TagSet;
  inlineLimit: number;
  #state: QueuePairState = 'connecting';
  readonly #pending = new Map<number, Pending>();
  readonly #opts: QueuePairOptions;
  #timer: NodeJS.Timeout | undefined;
  #errorReported = false;
  readonly counters: QueueCounters = { submitted: 0, completed: 0, errors: 0, bytes: 0 };

  constructor(opts: QueuePairOptions) {
    this.qid = opts.qid;
    this.tcp = opts.tcp;
    this.tags = opts.tags;
    this.inlineLimit = opts.inlineLimit;
    this.#opts = opts;
    opts.tcp.setHandlers({
      command: (cid) => this.#pending.get(cid),
      onResponse: (cqe, cmd, cid) => this.#complete(cqe, cmd as Pending | undefined, cid),
      onClose: (err) => this.#closed(err),
    });
    if (opts.tcp.closed) this.#state = 'closed';
  }

  get state(): QueuePairState {
    return this.#state;
  }

  get inFlight(): number {
    return this.#pending.size;
  }

  setLive(): void {
    if (this.#state === 'connecting') this.#state = 'live';
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
    sqe.writeUInt16LE(cid, SqeOffset.cid);
    const h2c = spec.h2c !== undefined && spec.h2c.length > 0 ? spec.h2c : undefined;
    const inCapsule = h2c !== undefined && (spec.forceInCapsule === true || h2c.length <= this.inlineLimit);
    const dataLen = h2c?.length ?? spec.c2h?.length ?? 0;
    setSgl(sqe, dataLen, inCapsule);
    return new Promise<Completion>((resolve, reject) => {
      const p: Pending = {
        cid,
        h2c: inCapsule ? undefined : h2c,
        c2h: spec.c2h,
        h2cSent: 0,
        c2hReceived: 0,
        transportStatus: 0,
        resolve,
        reject,
        deadline: Date.now() + spec.timeoutMs,
        reserved,
        bytes: dataLen,
      };
      this.#pending.set(cid, p);
      this.counters.submitted++;
      this.#armTimer(spec.timeoutMs);
      this.tcp.sendCapsule(sqe, inCapsule ? h2c : undefined);
    });
  }

  #complete(cqe: Buffer | undefined, p: Pending | undefined, cid: number): void {
    if (p === undefined || (!p.reserved && !this.tags.matches(cid))) {
      // Linux nvme_tcp_process_nvme_cqe: a CQE for no known command ("got bad cqe.command_id") → error recovery.
      this.#reportError(new ConnectionClosedError(`queue ${this.qid}: completion for unknown cid 0x${cid.toString(16)}`));
      this.tcp.close(new ConnectionClosedError(`queue ${this.qid}: completion for unknown cid 0x${cid.toString(16)}`));
      return;
    }
    this.#pending.delete(cid);
    if (!p.reserved) this.tags.put(cid);
    this.#opts.onActivity?.();
    // The CQE fields read in place (cqe is a view valid only during this call); status is the Linux-style 15-bit value.
    const dw0 = cqe === undefined ? 0 : cqe.readUInt32LE(CqeOffset.dw0);
    const cqeStatus = cqe === undefined ? 0 : cqe.readUInt16LE(CqeOffset.status) >>> 1;
    const status = p.transportStatus !== 0 ? p.transportStatus : cqeStatus;
    this.counters.completed++;
    if (status !== 0) {
      this.counters.errors++;
      p.reject(new NvmeStatusError(status, cid, statusName(status), dw0));
      return;
    }
    this.counters.bytes += p.bytes;
    p.resolve({ dw0, dw1: cqe === undefined ? 0 : cqe.readUInt32LE(CqeOffset.dw1), status: cqeStatus });
  }

  /** One timer per queue, armed only while commands are in flight (blk-mq's timeout scan, not a timer per I/O). */
  #armTimer(timeoutMs: number): void {
    if (this.#timer !== undefined) return;
    const period = Math.max(10, Math.min(1000, Math.floor(timeoutMs / 4)));
    this.#timer = setInterval(() => this.#scan(), period);
    this.#timer.unref();
  }

  #scan(): void {
    if (this.#pending.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
      return;
    }
    const now = Date.now();
    for (const p of this.#pending.values()) {
      if (p.deadline <= now) {
        // Linux nvme_tcp_timeout: fail the command and start controller error recovery (teardown + reconnect).
        const err = new TimeoutError(`queue ${this.qid}: command cid 0x${p.cid.toString(16)} timed out`);
        this.#pending.delete(p.cid);
        if (!p.reserved) this.tags.put(p.cid);
        this.counters.errors++;
        p.reject(err);
        this.#reportError(err);
        this.tcp.close(new ConnectionClosedError(`queue ${this.qid}: torn down after a command timeout`, { cause: err }));
        return;
      }
    }
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
    const pend = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of pend) {
      if (!p.reserved) this.tags.put(p.cid);
      this.counters.errors++;
      p.reject(err);
    }
    this.#reportError(err);
  }

  close(err?: Error): void {
    this.tcp.close(err);
  }
}
