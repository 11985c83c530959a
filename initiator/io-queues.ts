// The controller's I/O queues (Linux drivers/nvme/host/tcp.c nvme_tcp_alloc_io_queues / nvme_tcp_start_io_queues and
// fabrics.c nvmf_set_io_queues): Number of Queues negotiated by Set Features, granted queues laid out over hctxs,
// opened and connected with bounded parallelism. The set owns the queue pairs and hctxs of one controller incarnation.
import pLimit from 'p-limit';
import type { Logger } from 'pino';
import { FeatureId, decodeCap, decodeNumQueues, encodeNumQueues, encodeSetFeaturesCmd, type IdentifyController } from '../protocol/index.js';
import type { AdminChannel } from './admin.js';
import { Hctx, type HctxType, mapQueues } from './dispatch/hctx.js';
import { ioInlineLimit } from './identify.js';
import type { ResolvedOptions } from './options.js';
import { type QueueCounters, type QueuePair, TagSet } from './queue-pair.js';

/** Per I/O queue information (io_queue_info). */
export interface QueueInfo extends QueueCounters {
  qid: number;
  /** Hctx index within its type. */
  hctx: number;
  type: HctxType;
  /** Which event loop owns the queue (the io_cpu analogue); always the main loop in this implementation. */
  owner: 'main';
  source: string;
  destination: string;
  state: string;
  inFlight: number;
}

/** What the queue set needs from its controller to bring one queue up. */
export interface IoQueueHost extends AdminChannel {
  /** Open the socket and run ICReq/ICResp for `qid`. */
  openQueue(qid: number, tags: TagSet, inlineLimit: number): Promise<QueuePair>;
  /** Fabrics Connect (and authentication) of an opened I/O queue with SQSIZE `sqsize` (0's based). */
  connectQueue(qp: QueuePair, sqsize: number): Promise<void>;
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
  #queues: QueuePair[] = [];
  #hctxs = noHctxs();
  #granted = 0;

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
    for (const g of groups) hctxs[g.type].push(new Hctx(hctxs[g.type].length, g.type, g.qids.map((q) => queues.get(q) as QueuePair), g.tags));
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

  async #connectAll(slots: readonly Slot[], qsize: number, inline: number, concurrency: number): Promise<Map<number, QueuePair>> {
    const limit = pLimit(concurrency);
    const queues = new Map<number, QueuePair>();
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

  queueInfo(traddr: string, trsvcid: number): QueueInfo[] {
    const out: QueueInfo[] = [];
    for (const type of HCTX_TYPES) {
      for (const h of this.#hctxs[type]) {
        for (const q of h.queues) {
          out.push({
            qid: q.qid,
            hctx: h.index,
            type,
            owner: 'main',
            source: `${q.tcp.localAddress ?? '?'}:${q.tcp.localPort ?? 0}`,
            destination: `${q.tcp.remoteAddress ?? traddr}:${q.tcp.remotePort ?? trsvcid}`,
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
