// An io worker: one worker_thread event loop owning the sockets of its I/O queues, like a Linux io_work running on
// its queue's io_cpu (drivers/nvme/host/tcp.c nvme_tcp_io_work). Each queue is a HostTcpQueue + QueuePair here, driven
// from its submission ring; completions go back through its completion ring, published once per batch. The worker
// processes submissions for at most io_budget_us before yielding to its event loop (nvme_tcp_io_work's 1 ms budget,
// counted as a relinquish when work was left).
import fs from 'node:fs';
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { parentPort } from 'node:worker_threads';
import { ConnectionClosedError, NvmeStatusError, TimeoutError, TransportFatalError, decodeConnectResult } from '../../protocol/index.js';
import { authRequested, authenticateQueue, describeAuth, parseSecretOption } from '../auth.js';
import { connectCmd, connectData } from '../fabrics-cmds.js';
import { type IoRequest, type IoResult, type IoSink, type IoSqeBuilder, QueuePair, TagSet } from '../queue-pair.js';
import { HostTcpQueue } from '../transport/index.js';
import { RingConsumer, RingProducer } from './ring.js';
import { CqKind, Cqe, type FromWorker, type OpenQueueMsg, SqFlag, Sqe, type ToWorker, WorkerStat, toWireError } from './wire.js';

const port = parentPort;
if (port === null) throw new Error('initiator/io-worker/worker.ts runs as a worker_thread only');

let pool: Buffer = Buffer.alloc(0);
let stats: Float64Array<ArrayBufferLike> = new Float64Array(WorkerStat.words);

function bump(i: number): void {
  stats[i] = (stats[i] as number) + 1;
}
let budgetMs = 1;

function post(m: FromWorker): void {
  port?.postMessage(m);
}

/** One preallocated request per tag: the ring entry's SQE and a view of its data (IoRequest for QueuePair.submitIo). */
class WorkerIo implements IoRequest {
  write = false;
  lba = 0;
  blocks = 0;
  buf: Buffer = pool;
  readonly sqe = Buffer.alloc(64);
  length = 0;
  /** CQE Dwords 0 and 1 on success (command-specific results, NVMe Base 2.0 §4.2.1), for the completion ring. */
  readonly result: IoResult = { dw0: 0, dw1: 0 };
  readonly builder: IoSqeBuilder = copySqe;
  readonly sink: IoSink;
  readonly hctx = 0;
  readonly retries = 0;
  /** From the ring entry. */
  rqTimeoutMs = 0;
  readonly tag: number;
  readonly #q: WorkerQueue;

  constructor(tag: number, q: WorkerQueue) {
    this.tag = tag;
    this.#q = q;
    this.sink = q;
  }

  ioDone(): void {
    // Never called: the queue's sink receives every outcome.
    void this.#q;
  }
}

/** Builds the worker-side SQE: the 64 bytes the calling thread wrote into the ring (CID and SGL follow). */
const copySqe: IoSqeBuilder = {
  buildIoSqe(sqe: Buffer, io: IoRequest): number {
    const w = io as WorkerIo;
    w.sqe.copy(sqe, 0, 0, 64);
    return w.length;
  },
};

class WorkerQueue implements IoSink {
  readonly qid: number;
  readonly key: number;
  readonly qp: QueuePair;
  readonly #sq: RingConsumer;
  readonly #cq: RingProducer;
  readonly #ios: WorkerIo[];
  readonly #bounce: Buffer;
  readonly #slotBytes: number;
  /** Views of the shared pool by offset (the engine reuses its buffers, so views are made once). */
  readonly #poolViews = new Map<number, Buffer>();
  /** Views of the bounce area by tag and length (a 4 KiB read in a 128 KiB slot reuses one view). */
  readonly #bounceViews = new Map<number, Buffer>();
  readonly #empty = Buffer.alloc(0);
  #publishScheduled = false;
  #closed = false;
  readonly #publish = (): void => {
    this.#publishScheduled = false;
    if (this.#cq.publish() || this.#cq.unpublished === 0) bump(WorkerStat.cqBatches);
  };
  readonly #onEntry = (w: Int32Array, b: number): void => this.#submit(w, b);

  constructor(m: OpenQueueMsg, qp: QueuePair) {
    this.qid = m.qid;
    this.key = m.key;
    this.qp = qp;
    const layoutSq = { capacity: m.ringCapacity, entryWords: Sqe.words };
    const layoutCq = { capacity: m.ringCapacity, entryWords: Cqe.words };
    this.#sq = new RingConsumer(m.sq, layoutSq);
    this.#cq = new RingProducer(m.cq, layoutCq);
    this.#ios = Array.from({ length: m.depth }, (_, t) => new WorkerIo(t, this));
    this.#bounce = Buffer.from(m.bounce);
    this.#slotBytes = m.slotBytes;
  }

  #view(flags: number, tag: number, offset: number, length: number): Buffer {
    if ((flags & SqFlag.pool) === 0) {
      const k = tag * (this.#slotBytes + 1) + length;
      let b = this.#bounceViews.get(k);
      if (b === undefined) {
        if (this.#bounceViews.size > 65536) this.#bounceViews.clear();
        b = this.#bounce.subarray(tag * this.#slotBytes, tag * this.#slotBytes + length);
        this.#bounceViews.set(k, b);
      }
      return b;
    }
    let v = this.#poolViews.get(offset);
    if (v === undefined || v.length !== length) {
      if (this.#poolViews.size > 65536) this.#poolViews.clear();
      v = pool.subarray(offset, offset + length);
      this.#poolViews.set(offset, v);
    }
    return v;
  }

  #submit(w: Int32Array, b: number): void {
    const tag = w[b + Sqe.tag] as number;
    const io = this.#ios[tag] as WorkerIo;
    const flags = w[b + Sqe.flags] as number;
    const length = w[b + Sqe.length] as number;
    io.write = (flags & SqFlag.write) !== 0;
    io.length = length;
    io.buf = length === 0 ? this.#empty : this.#view(flags, tag, w[b + Sqe.offset] as number, length);
    for (let i = 0; i < 16; i++) io.sqe.writeInt32LE(w[b + Sqe.sqe + i] as number, i * 4);
    bump(WorkerStat.ios);
    io.rqTimeoutMs = w[b + Sqe.timeoutMs] as number;
    this.qp.submitIo(io);
  }

  /** IoSink: one completion entry; the ring is published once at the end of this tick's work. */
  ioCompleted(io: IoRequest, err: Error | undefined): void {
    const w = this.#cq.words;
    let b = this.#cq.reserve();
    if (b < 0) {
      // Cannot happen: the ring holds as many entries as the queue has tags. Publish and count it as a protocol bug.
      this.#cq.publish();
      b = this.#cq.reserve();
      if (b < 0) throw new Error(`queue ${this.qid}: completion ring full`);
    }
    const wio = io as WorkerIo;
    w[b + Cqe.tag] = wio.tag;
    let kind: number = CqKind.ok;
    let status = 0;
    let dw0 = err === undefined ? wio.result.dw0 : 0;
    const dw1 = err === undefined ? wio.result.dw1 : 0;
    if (err !== undefined) {
      if (err instanceof NvmeStatusError) {
        kind = CqKind.status;
        status = err.status;
        dw0 = err.dw0;
      } else if (err instanceof TimeoutError) kind = CqKind.timeout;
      else if (err instanceof TransportFatalError) {
        kind = CqKind.fatal;
        status = err.fes;
      } else kind = CqKind.closed;
    }
    w[b + Cqe.kind] = kind;
    w[b + Cqe.status] = status;
    w[b + Cqe.dw0] = dw0;
    w[b + Cqe.dw1] = dw1;
    this.#cq.commit();
    bump(WorkerStat.completions);
    if (!this.#publishScheduled) {
      this.#publishScheduled = true;
      queueMicrotask(this.#publish);
    }
  }

  /** Drain the submission ring within io_budget_us; yield (a relinquish) when work is left. */
  async run(): Promise<void> {
    for (;;) {
      await this.#sq.wait();
      if (this.#closed) return;
      const t0 = performance.now();
      let found = false;
      while (this.#sq.drain(this.#onEntry, 8) > 0) {
        found = true;
        if (this.#closed || performance.now() - t0 >= budgetMs) break;
      }
      if (found) bump(WorkerStat.batches);
      if (this.#sq.pending > 0 && !this.#closed) {
        bump(WorkerStat.relinquish);
        await new Promise<void>((r) => setImmediate(r));
      }
    }
  }

  /** The queue died: fail what is still in the submission ring, publish, stop and tell the calling thread. */
  finish(err: Error): void {
    if (this.#closed) return;
    this.#sq.drain(this.#onEntry);
    this.#closed = true;
    this.#sq.close();
    this.#cq.publish();
    queues.delete(this.key);
    post({ t: 'closed', key: this.key, err: toWireError(err) });
  }
}

const queues = new Map<number, WorkerQueue>();
/** Queues being opened, and those of them the calling thread closed meanwhile. */
const opening = new Set<number>();
const closedWhileOpening = new Set<number>();

/** Linux nvme_tcp_alloc_queue + nvmf_connect_io_queue, on this thread: socket, ICReq/ICResp, Fabrics Connect. */
async function open(m: OpenQueueMsg): Promise<void> {
  const tcp = new HostTcpQueue({ host: m.host, port: m.port, hdgst: m.hdgst, ddgst: m.ddgst, label: m.label, ...(m.localAddress !== undefined ? { localAddress: m.localAddress } : {}) });
  let wq: WorkerQueue | undefined;
  const qp = new QueuePair({
    qid: m.qid,
    tcp,
    tags: new TagSet(m.depth),
    inlineLimit: m.inlineLimit,
    // Called once the queue is dying; the close path that fails every command runs synchronously after it.
    onError: (_q, err) => queueMicrotask(() => wq?.finish(err)),
  });
  opening.add(m.key);
  let auth: ReturnType<typeof describeAuth> | undefined;
  try {
    await tcp.connect();
    const c = await qp.submit({
      sqe: connectCmd({ qid: m.qid, sqsize: m.sqsize, kato: 0, disableSqflow: m.disableSqflow }),
      h2c: connectData({ hostid: m.hostid, cntlid: m.cntlid, subnqn: m.subnqn, hostnqn: m.hostnqn }),
      forceInCapsule: true,
      timeoutMs: m.connectTimeoutMs,
    });
    // ATR: the queue authenticates on this thread, as Linux runs nvmf_connect_io_queue's auth on the queue's context.
    if (authRequested(m.qid, c.dw0, m.auth !== undefined)) {
      const a = m.auth as NonNullable<OpenQueueMsg['auth']>;
      const r = await authenticateQueue(qp, {
        hostnqn: m.hostnqn,
        subsysnqn: m.subnqn,
        hostKey: parseSecretOption('dhchap_secret', a.hostSecret),
        ctrlKey: parseSecretOption('dhchap_ctrl_secret', a.ctrlSecret),
        transactionId: a.transactionId,
        timeoutMs: m.connectTimeoutMs,
      });
      auth = describeAuth(r);
    }
    decodeConnectResult(c.dw0);
    if (closedWhileOpening.has(m.key)) throw new ConnectionClosedError(`queue ${m.qid}: closed by host while connecting`);
    qp.setLive();
  } catch (e) {
    qp.close(e instanceof Error ? e : new Error(String(e)));
    post({ t: 'openFailed', key: m.key, err: toWireError(e) });
    return;
  } finally {
    opening.delete(m.key);
    closedWhileOpening.delete(m.key);
  }
  wq = new WorkerQueue(m, qp);
  queues.set(m.key, wq);
  if (qp.state === 'closed') {
    wq.finish(tcp.closeError ?? new ConnectionClosedError(`queue ${m.qid} closed`));
    return;
  }
  post({ t: 'opened', key: m.key, local: `${tcp.localAddress ?? '?'}:${tcp.localPort ?? 0}`, remote: `${tcp.remoteAddress ?? m.host}:${tcp.remotePort ?? m.port}`, ...(auth === undefined ? {} : { auth }) });
  void wq.run();
}

/** This thread's kernel task id (readlink /proc/thread-self → PID/task/TID), for per-thread affinity and CPU time. */
function threadId(): number {
  try {
    return Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
  } catch {
    return 0;
  }
}

let eluStart = performance.eventLoopUtilization();
setInterval(() => {
  stats[WorkerStat.busyMs] = performance.eventLoopUtilization(eluStart).active;
}, 100).unref();

port.on('message', (m: ToWorker) => {
  switch (m.t) {
    case 'init':
      pool = Buffer.from(m.pool);
      stats = new Float64Array(m.stats);
      budgetMs = m.budgetUs / 1000;
      eluStart = performance.eventLoopUtilization();
      post({ t: 'ready', tid: threadId() });
      return;
    case 'open':
      void open(m);
      return;
    case 'close':
      if (opening.has(m.key)) closedWhileOpening.add(m.key);
      queues.get(m.key)?.qp.close(new ConnectionClosedError(`queue ${queues.get(m.key)?.qid ?? '?'}: closed by host`));
      return;
  }
});
