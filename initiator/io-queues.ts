// The controller's I/O queues (Linux drivers/nvme/host/tcp.c nvme_tcp_alloc_io_queues / nvme_tcp_start_io_queues and
// fabrics.c nvmf_set_io_queues): Number of Queues negotiated by Set Features, granted queues laid out over hctxs,
// opened and connected with bounded parallelism. The set owns the queue pairs and hctxs of one controller incarnation.
import pLimit from 'p-limit';
import type { Logger } from 'pino';
import { FeatureId, NvmeStatusError, Status, decodeCap, decodeNumQueues, encodeNumQueues, encodeSetFeaturesCmd, type IdentifyController } from '../protocol/index.js';
import type { AdminChannel } from './admin.js';
import { Hctx, type HctxType, mapQueues } from './dispatch/hctx.js';
import { ioInlineLimit } from './identify.js';
import type { ResolvedOptions } from './options.js';
import { type IoQueue, type IoRequest, type QueueCounters, TagSet } from './queue-pair.js';

/** Per I/O queue information (io_queue_info). */
export interface QueueInfo extends QueueCounters {
  qid: number;
  /** Hctx index within its type. */
  hctx: number;
  type: HctxType;
  /** Which event loop owns the queue (the io_cpu analogue): 'main' (the calling thread) or 'worker N'. */
  owner: string;
  /** Owning io worker, −1: the calling thread. */
  worker: number;
  /** CPU the owning io worker is pinned to (undefined: not pinned, or the calling thread). */
  cpu: number | undefined;
  source: string;
  destination: string;
  state: string;
  inFlight: number;
}

/** What the queue set needs from its controller to bring one queue up. */
export interface IoQueueHost extends AdminChannel {
  /** Open the socket and run ICReq/ICResp for `qid` (on its io worker: make the queue there). */
  openQueue(qid: number, tags: TagSet, inlineLimit: number): Promise<IoQueue>;
  /** Fabrics Connect (and authentication) of an opened I/O queue with SQSIZE `sqsize` (0's based). */
  connectQueue(qp: IoQueue, sqsize: number): Promise<void>;
  /** CPU an io worker is pinned to. */
  workerCpu(worker: number): number | undefined;
}

/** Largest tag space of one hctx: CIDs carry the tag in bits 11:0. */
const MAX_TAGS = 4096;
const HCTX_TYPES = ['default', 'write', 'poll'] as const;

interface Slot {
  qid: number;
  tags: TagSet;
}

interface Group {
  type: HctxType;
  qids: number[];
  tags: TagSet;
}

function noHctxs(): Record<HctxType, Hctx[]> {
  return { default: [], write: [], poll: [] };
}

export class IoQueueSet {
  readonly #host: IoQueueHost;
  readonly #log: Logger;
  #queues: IoQueue[] = [];
  #hctxs = noHctxs();
  #granted = 0;
  #qsize = 0;
  #inline = 0;

  constructor(host: IoQueueHost, log: Logger) {
    this.#host = host;
    this.#log = log;
  }

  get count(): number {
    return this.#queues.length;
  }

  /** I/O queues granted by Set Features Number of Queues (before whole-group fallback). */
  get granted(): number {
    return this.#granted;
  }

  hctxs(type: HctxType): readonly Hctx[] {
    return this.#hctxs[type];
  }

  /** Commands in flight on every I/O queue. */
  get inFlight(): number {
    let n = 0;
    for (const q of this.#queues) n += q.inFlight;
    return n;
  }

  /** Negotiate, lay out, open and connect the I/O queues; a failure leaves the opened queues here for teardown. */
  async setup(o: ResolvedOptions, queueLimit: number | undefined, id: IdentifyController, cap: bigint): Promise<void> {
    let nrIo = o.nrIoQueues;
    if (queueLimit !== undefined && !o.nrIoQueuesExplicit) nrIo = Math.min(nrIo, queueLimit);
    const granted = await this.#negotiate(nrIo * o.queuesPerHctx + o.nrWriteQueues + o.nrPollQueues);
    const map = mapQueues(granted, nrIo, o.queuesPerHctx, o.nrWriteQueues, o.nrPollQueues);
    // Queue size: clamp to MAXCMD and CAP.MQES + 1 (Linux nvme_init_ctrl_finish / nvmf sqsize clamp).
    const mqes = decodeCap(cap).mqes + 1;
    const qsize = Math.max(2, Math.min(o.queueSize, id.maxcmd > 0 ? id.maxcmd : o.queueSize, mqes));
    const inline = ioInlineLimit(id);
    this.#qsize = qsize;
    this.#inline = inline;
    const groups: Group[] = [];
    for (const type of HCTX_TYPES) {
      // One tag space per hctx shared by its queues: queue_size tags, so CIDs are unique across the group.
      for (const qids of map[type]) groups.push({ type, qids, tags: new TagSet(Math.min(MAX_TAGS, qsize)) });
    }
    const queues = await this.#connectAll(
      groups.flatMap((g) => g.qids.map((qid) => ({ qid, tags: g.tags }))),
      qsize,
      inline,
      o.connectConcurrency,
    );
    const hctxs = noHctxs();
    for (const g of groups) hctxs[g.type].push(new Hctx(hctxs[g.type].length, g.type, g.qids.map((q) => queues.get(q) as IoQueue), g.tags));
    this.#hctxs = hctxs;
    this.#log.info({ queues: this.#queues.length, hctxs: hctxs.default.length, perHctx: map.queuesPerHctx, qsize, inline }, 'I/O queues live');
  }

  /** Set Features Number of Queues (FID 07h): how many of `requested` the controller grants. */
  async #negotiate(requested: number): Promise<number> {
    const c = await this.#host.adminCmd({ sqe: encodeSetFeaturesCmd({ cid: 0, fid: FeatureId.NUM_QUEUES, cdw11: encodeNumQueues(requested, requested) }) });
    const got = decodeNumQueues(c.dw0);
    const granted = Math.min(requested, got.nsqr, got.ncqr);
    this.#granted = granted;
    if (granted < requested) this.#log.info({ requested, granted }, 'controller granted fewer I/O queues');
    return granted;
  }

  async #connectAll(slots: readonly Slot[], qsize: number, inline: number, concurrency: number): Promise<Map<number, IoQueue>> {
    const limit = pLimit(concurrency);
    const queues = new Map<number, IoQueue>();
    const results = await Promise.allSettled(
      slots.map((s) =>
        limit(async () => {
          const qp = await this.#host.openQueue(s.qid, s.tags, inline);
          queues.set(s.qid, qp);
          await this.#host.connectQueue(qp, qsize - 1);
        }),
      ),
    );
    this.#queues = [...queues.values()].sort((a, b) => a.qid - b.qid);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    return queues;
  }

  /** Close every I/O queue; their in-flight commands fail with `err`. */
  teardown(err: Error): void {
    for (const q of this.#queues) q.close(err);
    this.#queues = [];
    this.#hctxs = noHctxs();
  }

  /**
   * Reconnect I/O queue `qid` through `host.openQueue` (which places it anew): submissions wait while the old queue
   * drains, the old one is closed, the new one connects and takes its place in the hctx, then the waiting
   * submissions go to it. A failed reconnect leaves the closed queue in place and is thrown (the caller starts error
   * recovery, as for a dropped socket).
   */
  async moveQueue(qid: number, drainTimeoutMs: number): Promise<void> {
    const old = this.#queues.find((q) => q.qid === qid);
    const h = HCTX_TYPES.flatMap((t) => this.#hctxs[t]).find((x) => x.queues.includes(old as IoQueue));
    if (old === undefined || h === undefined) throw new RangeError(`no I/O queue ${qid}`);
    const parked = new ParkedQueue(old);
    h.replace(old, parked);
    this.#replaceQueue(old, parked);
    let next: IoQueue = old;
    try {
      const until = Date.now() + drainTimeoutMs;
      while (old.inFlight > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 1));
      old.close();
      // The controller may not have torn the old queue down yet when the new Connect for the same QID arrives, and
      // refuses it with Command Sequence Error (NVMe-oF 1.1 §3.3: the queue is still in use): retry, backing off,
      // for up to a second.
      for (let wait = 5; ; wait *= 2) {
        const prev = next === old ? parked : next;
        next = await this.#host.openQueue(qid, old.tags, this.#inline);
        this.#replaceQueue(prev, next);
        try {
          await this.#host.connectQueue(next, this.#qsize - 1);
          break;
        } catch (e) {
          if (!(e instanceof NvmeStatusError) || (e.status & 0x7ff) !== Status.CMD_SEQ_ERROR || wait > 640) throw e;
          next.close();
          await new Promise((r) => setTimeout(r, wait));
        }
      }
    } finally {
      h.replace(parked, next);
      this.#replaceQueue(parked, next);
      parked.replay(next);
    }
  }

  #replaceQueue(prev: IoQueue, next: IoQueue): void {
    const i = this.#queues.indexOf(prev);
    if (i >= 0) this.#queues[i] = next;
  }

  queueInfo(traddr: string, trsvcid: number): QueueInfo[] {
    const out: QueueInfo[] = [];
    for (const type of HCTX_TYPES) {
      for (const h of this.#hctxs[type]) {
        for (const q of h.queues) {
          out.push({
            qid: q.qid,
            hctx: h.index,
            type,
            owner: q.worker < 0 ? 'main' : `worker ${q.worker}`,
            worker: q.worker,
            cpu: q.worker < 0 ? undefined : this.#host.workerCpu(q.worker),
            source: q.source,
            destination: q.destination.startsWith('?') ? `${traddr}:${trsvcid}` : q.destination,
            state: q.state,
            inFlight: q.inFlight,
            ...q.counters,
          });
        }
      }
    }
    return out.sort((a, b) => a.qid - b.qid);
  }
}

/**
 * Stands in for a queue being moved to another io worker: submissions wait here (closures: a rare path) and go to the
 * queue's successor once it is connected; counters and in-flight are the old queue's.
 */
class ParkedQueue implements IoQueue {
  readonly #old: IoQueue;
  readonly #waiting: IoRequest[] = [];

  constructor(old: IoQueue) {
    this.#old = old;
  }

  get qid(): number {
    return this.#old.qid;
  }

  get tags(): TagSet {
    return this.#old.tags;
  }

  get state(): string {
    return 'moving';
  }

  get inFlight(): number {
    return this.#old.inFlight + this.#waiting.length;
  }

  get counters(): QueueCounters {
    return this.#old.counters;
  }

  get worker(): number {
    return this.#old.worker;
  }

  get source(): string {
    return this.#old.source;
  }

  get destination(): string {
    return this.#old.destination;
  }

  submitIo(io: IoRequest): void {
    this.#waiting.push(io);
  }

  close(err?: Error): void {
    this.#old.close(err);
  }

  replay(next: IoQueue): void {
    for (const io of this.#waiting.splice(0)) next.submitIo(io);
  }
}
