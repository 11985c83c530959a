// The controller's io workers: N worker_threads started on first use and again after one dies, each optionally pinned
// to a CPU by thread id (sched_setaffinity through `taskset -p`, as Linux binds an io_work to its io_cpu), the shared
// I/O buffer pool they all see, and per-worker counters read from shared memory.
import { Buffer } from 'node:buffer';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { ConnectionClosedError, IoWorkerError } from '../errors.js';
import type { HostRemoteQueue, RemoteQueueWorker } from './remote-queue.js';
import { type FromWorker, type OpenQueueMsg, type OpenedQueue, type ToWorker, WorkerStat, fromWireError } from './wire.js';

/** Per io worker, as queueInfo's companion ioWorkerInfo() and the harness report show it. */
export interface IoWorkerInfo {
  worker: number;
  /** Kernel thread id (0: not running). */
  tid: number;
  /** CPU it is pinned to, or undefined. */
  cpu: number | undefined;
  alive: boolean;
  /** Times this worker slot was started (1 + restarts after a death). */
  starts: number;
  queues: number;
  /** Submissions processed. */
  ios: number;
  /** Submission-ring drains that found work. */
  batches: number;
  /** Event-loop busy time (ms). */
  busyMs: number;
  /** Yields with submissions pending because io_budget_us ran out. */
  relinquish: number;
  completions: number;
  /** Completion-ring publishes (≈ wake-ups of the calling thread). */
  cqBatches: number;
  /** Thread CPU time (user + system, ms) from /proc/self/task/TID/stat; undefined where unreadable. */
  cpuMs: number | undefined;
}

/** The worker entry: worker.ts beside this file (worker.js once compiled). */
const ENTRY = new URL(import.meta.url.endsWith('.ts') ? './worker.ts' : './worker.js', import.meta.url).href;

/** Worker bootstrap: register tsx's loader in the worker when the entry is TypeScript (workers do not inherit it). */
function bootCode(): string {
  let tsx = '';
  // require.resolve finds the CommonJS build; the worker imports its ESM sibling (the package's "import" export).
  if (ENTRY.endsWith('.ts')) tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm/api').replace(/\.cjs$/, '.mjs')).href;
  return `import(${JSON.stringify(tsx || 'node:process')}).then((m) => { ${tsx ? 'm.register();' : ''} return import(${JSON.stringify(ENTRY)}); })`;
}

const CLK_TCK = 100;

function threadCpuMs(tid: number): number | undefined {
  if (tid === 0) return undefined;
  try {
    const stat = fs.readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    // Fields after the ")" of comm: state is field 3, utime 14, stime 15.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
  } catch {
    return undefined;
  }
}

function taskset(cpu: number, tid: number): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('taskset', ['-p', '-c', String(cpu), String(tid)], (err, _out, stderr) => {
      if (err === null) resolve();
      else reject(new IoWorkerError(`io_worker_cpus: cannot pin thread ${tid} to CPU ${cpu}: ${String(stderr).trim() || err.message}`));
    });
  });
}

/** One io worker thread as the queues see it. */
class IoWorkerHandle implements RemoteQueueWorker {
  readonly index: number;
  readonly pool: SharedArrayBuffer;
  readonly stats: Float64Array;
  readonly #worker: Worker;
  tid = 0;
  readonly cpu: number | undefined;
  alive = true;
  readonly #opens = new Map<number, { resolve: (e: OpenedQueue) => void; reject: (e: Error) => void }>();
  readonly queues = new Map<number, HostRemoteQueue>();
  readonly #log: Logger;
  readonly ready: Promise<void>;

  constructor(index: number, pool: SharedArrayBuffer, cpu: number | undefined, budgetUs: number, log: Logger, onExit: (h: IoWorkerHandle) => void) {
    this.index = index;
    this.pool = pool;
    this.cpu = cpu;
    this.#log = log;
    const statsSab = new SharedArrayBuffer(WorkerStat.words * 8);
    this.stats = new Float64Array(statsSab);
    this.#worker = new Worker(bootCode(), { eval: true, name: `nvme-io-${index}` });
    this.ready = new Promise<void>((resolve, reject) => {
      const onReady = (m: FromWorker): void => {
        if (m.t !== 'ready') return;
        this.#worker.off('message', onReady);
        this.tid = m.tid;
        resolve();
      };
      this.#worker.on('message', onReady);
      this.#worker.once('exit', (code) => reject(new IoWorkerError(`io worker ${index} exited (code ${code}) before it was ready`)));
      this.#worker.once('error', (e) => reject(new IoWorkerError(`io worker ${index} failed to start: ${e.message}`)));
    });
    this.#worker.on('message', (m: FromWorker) => this.#onMessage(m));
    this.#worker.on('error', (e) => this.#log.warn({ worker: index, err: e.message }, 'io worker error'));
    this.#worker.once('exit', (code) => {
      this.alive = false;
      this.#log.warn({ worker: index, code }, 'io worker exited');
      // Worker death is an error on its queues (as a dropped socket is), and pending opens fail.
      const err = new ConnectionClosedError(`io worker ${index} exited (code ${code})`);
      for (const o of this.#opens.values()) o.reject(err);
      this.#opens.clear();
      for (const q of [...this.queues.values()]) q.workerClosed(err);
      this.queues.clear();
      onExit(this);
    });
    this.#post({ t: 'init', pool, stats: statsSab, budgetUs });
  }

  #post(m: ToWorker): void {
    this.#worker.postMessage(m);
  }

  #onMessage(m: FromWorker): void {
    switch (m.t) {
      case 'ready':
        return;
      case 'opened': {
        const o = this.#opens.get(m.key);
        this.#opens.delete(m.key);
        o?.resolve({ local: m.local, remote: m.remote, ...(m.auth === undefined ? {} : { auth: m.auth }) });
        return;
      }
      case 'openFailed': {
        const o = this.#opens.get(m.key);
        this.#opens.delete(m.key);
        this.queues.delete(m.key);
        o?.reject(fromWireError(m.err));
        return;
      }
      case 'closed': {
        const q = this.queues.get(m.key);
        this.queues.delete(m.key);
        q?.workerClosed(fromWireError(m.err));
        return;
      }
    }
  }

  open(q: HostRemoteQueue, msg: Omit<OpenQueueMsg, 't'>): Promise<OpenedQueue> {
    if (!this.alive) return Promise.reject(new ConnectionClosedError(`io worker ${this.index} is not running`));
    this.queues.set(msg.key, q);
    return new Promise((resolve, reject) => {
      this.#opens.set(msg.key, { resolve, reject });
      this.#post({ t: 'open', ...msg });
    });
  }

  close(key: number): void {
    if (this.alive) this.#post({ t: 'close', key });
  }

  terminate(): Promise<number> {
    return this.#worker.terminate();
  }

  unref(): void {
    this.#worker.unref();
  }
}

/** Bytes of the shared I/O buffer pool (virtual until touched): what allocIoBuffer hands out. */
const POOL_BYTES = 64 << 20;
const POOL_ALIGN = 4096;

/**
 * The process's io worker pools, one per (workers, CPUs, budget): controllers with the same io_workers,
 * io_worker_cpus and io_budget_us share threads, as every Linux nvme-tcp controller queues its io_work on the one
 * nvme_tcp_wq and queue q of any controller runs on the same io_cpu. Duplicate controllers then add queues to the
 * same workers instead of a thread set each (4 controllers × 2 workers were 8 threads on one CPU, docs/harness.md).
 */
const sharedPools = new Map<string, { pool: IoWorkerPool; refs: number }>();

/** A pool for one controller: the shared one for these settings, started on first use; release() once when done. */
export function acquireIoWorkerPool(size: number, cpus: readonly number[], budgetUs: number, log: Logger): { pool: IoWorkerPool; release(): Promise<void> } {
  const key = `${size}|${cpus.join(',')}|${budgetUs}`;
  let entry = sharedPools.get(key);
  if (entry === undefined) {
    entry = { pool: new IoWorkerPool(size, cpus, budgetUs, log), refs: 0 };
    sharedPools.set(key, entry);
  }
  entry.refs++;
  const e = entry;
  let released = false;
  return {
    pool: e.pool,
    release: async () => {
      if (released) return;
      released = true;
      if (--e.refs > 0) return;
      if (sharedPools.get(key) === e) sharedPools.delete(key);
      await e.pool.close();
    },
  };
}

export class IoWorkerPool {
  readonly size: number;
  readonly #cpus: readonly number[];
  readonly #budgetUs: number;
  readonly #log: Logger;
  readonly #handles: Array<IoWorkerHandle | undefined>;
  readonly #starting: Array<Promise<IoWorkerHandle> | undefined>;
  readonly #starts: number[];
  readonly #poolSab = new SharedArrayBuffer(POOL_BYTES);
  readonly #poolBuf = Buffer.from(this.#poolSab);
  #poolNext = 0;
  /** Freed pool buffers by size, reused before the bump pointer moves on. */
  readonly #free = new Map<number, number[]>();
  #closed = false;
  #nextKey = 1;

  constructor(size: number, cpus: readonly number[], budgetUs: number, log: Logger) {
    this.size = size;
    this.#cpus = cpus;
    this.#budgetUs = budgetUs;
    this.#log = log;
    this.#handles = new Array<IoWorkerHandle | undefined>(size).fill(undefined);
    this.#starting = new Array<Promise<IoWorkerHandle> | undefined>(size).fill(undefined);
    this.#starts = new Array<number>(size).fill(0);
  }

  get sharedPool(): SharedArrayBuffer {
    return this.#poolSab;
  }

  /** A key for a new queue incarnation. */
  nextKey(): number {
    return this.#nextKey++;
  }

  /** Worker `i`, started (and pinned) if it is not running. */
  worker(i: number): Promise<IoWorkerHandle> {
    if (this.#closed) return Promise.reject(new ConnectionClosedError('io workers are shut down'));
    const h = this.#handles[i];
    if (h?.alive === true) return Promise.resolve(h);
    const s = this.#starting[i];
    if (s !== undefined) return s;
    const p = this.#start(i).finally(() => {
      this.#starting[i] = undefined;
    });
    this.#starting[i] = p;
    return p;
  }

  async #start(i: number): Promise<IoWorkerHandle> {
    const cpu = this.#cpus.length > 0 ? this.#cpus[i % this.#cpus.length] : undefined;
    this.#starts[i] = (this.#starts[i] ?? 0) + 1;
    const h = new IoWorkerHandle(i, this.#poolSab, cpu, this.#budgetUs, this.#log, (dead) => {
      if (this.#handles[i] === dead) this.#handles[i] = undefined;
    });
    try {
      await h.ready;
      if (cpu !== undefined) {
        if (h.tid === 0) throw new IoWorkerError(`io_worker_cpus: cannot pin io worker ${i}: no thread id (/proc/thread-self unreadable)`);
        await taskset(cpu, h.tid);
      }
    } catch (e) {
      await h.terminate();
      throw e;
    }
    // The pool's threads must not keep the process alive on their own (sockets inside them are unref'd by nothing).
    h.unref();
    this.#handles[i] = h;
    this.#log.info({ worker: i, tid: h.tid, cpu }, 'io worker started');
    return h;
  }

  /** The worker currently running slot i (undefined: none). */
  handle(i: number): IoWorkerHandle | undefined {
    return this.#handles[i];
  }

  /** Kill worker i (worker.terminate(), as a crash would end it): its queues fail and error recovery takes over. */
  async kill(i: number): Promise<void> {
    await this.#handles[i]?.terminate();
  }

  info(): IoWorkerInfo[] {
    const out: IoWorkerInfo[] = [];
    for (let i = 0; i < this.size; i++) {
      const h = this.#handles[i];
      const s = h?.stats;
      out.push({
        worker: i,
        tid: h?.tid ?? 0,
        cpu: h?.cpu ?? (this.#cpus.length > 0 ? this.#cpus[i % this.#cpus.length] : undefined),
        alive: h?.alive === true,
        starts: this.#starts[i] ?? 0,
        queues: h?.queues.size ?? 0,
        ios: s?.[WorkerStat.ios] ?? 0,
        batches: s?.[WorkerStat.batches] ?? 0,
        busyMs: s?.[WorkerStat.busyMs] ?? 0,
        relinquish: s?.[WorkerStat.relinquish] ?? 0,
        completions: s?.[WorkerStat.completions] ?? 0,
        cqBatches: s?.[WorkerStat.cqBatches] ?? 0,
        cpuMs: h === undefined ? undefined : threadCpuMs(h.tid),
      });
    }
    return out;
  }

  /** A buffer in shared memory for I/O (used in place by the workers); a plain Buffer when the pool is used up. */
  allocBuffer(bytes: number): Buffer {
    const size = Math.max(POOL_ALIGN, Math.ceil(bytes / POOL_ALIGN) * POOL_ALIGN);
    const reuse = this.#free.get(size)?.pop();
    if (reuse !== undefined) return this.#poolBuf.subarray(reuse, reuse + bytes);
    if (this.#poolNext + size > POOL_BYTES) return Buffer.alloc(bytes);
    const at = this.#poolNext;
    this.#poolNext += size;
    return this.#poolBuf.subarray(at, at + bytes);
  }

  /** Give a buffer from allocBuffer back (others are ignored). */
  freeBuffer(buf: Buffer): void {
    if (buf.buffer !== this.#poolSab) return;
    const size = Math.max(POOL_ALIGN, Math.ceil(buf.length / POOL_ALIGN) * POOL_ALIGN);
    let l = this.#free.get(size);
    if (l === undefined) {
      l = [];
      this.#free.set(size, l);
    }
    l.push(buf.byteOffset);
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all(this.#handles.map((h) => h?.terminate()));
  }
}
