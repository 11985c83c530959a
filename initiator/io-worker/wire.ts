// What crosses between the calling thread and an io worker: the ring entry layouts of one I/O queue's submission and
// completion rings, the control messages (postMessage: open, close, their answers; rare), and the per-worker counters
// in shared memory. The data path is the rings only.
import { ConnectionClosedError, NvmeStatusError, TimeoutError, TransportFatalError, statusName } from '../../protocol/index.js';

/** Submission entry (Int32 words): the 64-byte SQE (CID and SGL filled in by the worker's QueuePair) and its data. */
export const Sqe = {
  tag: 0,
  /** SqFlag bits. */
  flags: 1,
  /** Byte offset of the data in the pool the flags name. */
  offset: 2,
  /** Transfer length in bytes (0: no data). */
  length: 3,
  timeoutMs: 4,
  /** First word of the 16-word SQE. */
  sqe: 8,
  words: 24,
} as const;

export const SqFlag = {
  /** Host-to-controller data (a write); else controller-to-host. */
  write: 1,
  /** The data lies in the controller's shared I/O buffer pool; else in the queue's bounce area. */
  pool: 2,
} as const;

/** Completion entry (Int32 words). */
export const Cqe = {
  tag: 0,
  /** CqKind. */
  kind: 1,
  /** Linux-style 15-bit status (CqKind.status). */
  status: 2,
  dw0: 3,
  dw1: 4,
  words: 8,
} as const;

export const CqKind = {
  ok: 0,
  /** An NVMe status (NvmeStatusError). */
  status: 1,
  /** The queue was torn down (ConnectionClosedError). */
  closed: 2,
  /** This command timed out (TimeoutError). */
  timeout: 3,
  /** A fatal transport error (TransportFatalError). */
  fatal: 4,
} as const;
export type CqKind = (typeof CqKind)[keyof typeof CqKind];

/** Per-worker counters (Float64 words in shared memory; written by the worker, read by the calling thread). */
export const WorkerStat = {
  /** Submissions processed. */
  ios: 0,
  /** Submission-ring drains that found work. */
  batches: 1,
  /** Milliseconds the worker's event loop was busy (performance.eventLoopUtilization). */
  busyMs: 2,
  /** Times the worker yielded with submissions pending because io_budget_us ran out. */
  relinquish: 3,
  /** Completions posted. */
  completions: 4,
  /** Completion-ring publishes. */
  cqBatches: 5,
  words: 8,
} as const;

/** An error as it crosses threads. */
export interface WireError {
  name: string;
  message: string;
  code?: string;
  status?: number;
  cid?: number;
  dw0?: number;
  fes?: number;
  fei?: number;
}

export function toWireError(e: unknown): WireError {
  if (e instanceof NvmeStatusError) return { name: e.name, message: e.message, code: e.code, status: e.status, cid: e.cid, dw0: e.dw0 };
  if (e instanceof TransportFatalError) return { name: e.name, message: e.message, code: e.code, fes: e.fes, fei: e.fei };
  if (e instanceof Error) {
    const code = (e as { code?: unknown }).code;
    return typeof code === 'string' ? { name: e.name, message: e.message, code } : { name: e.name, message: e.message };
  }
  return { name: 'Error', message: String(e) };
}

/** The typed error again on the calling thread, so recovery and retry policy see what a local queue would give them. */
export function fromWireError(w: WireError): Error {
  if (w.status !== undefined) return new NvmeStatusError(w.status, w.cid ?? 0, statusName(w.status), w.dw0 ?? 0);
  if (w.fes !== undefined) return new TransportFatalError(w.message, w.fes, w.fei ?? 0);
  if (w.code === 'NVMEOF_ERR_TIMEOUT') return new TimeoutError(w.message);
  if (w.code === 'NVMEOF_ERR_CLOSED') return new ConnectionClosedError(w.message);
  const e = new Error(w.message);
  e.name = w.name;
  return e;
}

/** Everything a worker needs to open, connect (ICReq + Fabrics Connect) and run one I/O queue. */
export interface OpenQueueMsg {
  t: 'open';
  /** Routes messages: unique per queue incarnation (a qid reconnects under a new key). */
  key: number;
  qid: number;
  host: string;
  port: number;
  localAddress: string | undefined;
  hdgst: boolean;
  ddgst: boolean;
  label: string;
  /** Tags of the queue's worker-side slot table (the group's tag space size). */
  depth: number;
  inlineLimit: number;
  /** SQSIZE (0's based) for Connect. */
  sqsize: number;
  cntlid: number;
  hostnqn: string;
  hostid: string;
  subnqn: string;
  disableSqflow: boolean;
  connectTimeoutMs: number;
  /**
   * DH-HMAC-CHAP for this queue when the controller asks (ATR): the secrets in their DHHC-1 form (they cross threads
   * once per queue connect, never logged) and the T_ID the controller's counter gave this transaction.
   */
  auth?: { hostSecret: string; ctrlSecret: string | undefined; transactionId: number };
  sq: SharedArrayBuffer;
  cq: SharedArrayBuffer;
  ringCapacity: number;
  /** The queue's bounce area: tag t's data at t × slotBytes. */
  bounce: SharedArrayBuffer;
  slotBytes: number;
}

/** A queue its worker opened: socket ends, and what DH-HMAC-CHAP agreed on when the controller asked for it. */
export interface OpenedQueue {
  local: string;
  remote: string;
  auth?: { hash: string; dhgroup: string; bidirectional: boolean };
}

export type ToWorker = OpenQueueMsg | { t: 'close'; key: number } | { t: 'init'; pool: SharedArrayBuffer; stats: SharedArrayBuffer; budgetUs: number };

export type FromWorker =
  | { t: 'ready'; tid: number }
  | { t: 'opened'; key: number; local: string; remote: string; auth?: { hash: string; dhgroup: string; bidirectional: boolean } }
  | { t: 'openFailed'; key: number; err: WireError }
  /** The queue is gone; every completion it owes is in its completion ring, published. */
  | { t: 'closed'; key: number; err: WireError };

/** Read a wire error back from a CQE kind (the message names the queue; the command's own error stays generic). */
export function cqError(kind: number, status: number, dw0: number, qid: number, cid: number): Error {
  switch (kind) {
    case CqKind.status:
      return new NvmeStatusError(status, cid, statusName(status), dw0);
    case CqKind.timeout:
      return new TimeoutError(`queue ${qid}: command timed out`);
    case CqKind.fatal:
      return new TransportFatalError(`queue ${qid}: fatal transport error`, status, 0);
    default:
      return new ConnectionClosedError(`queue ${qid}: torn down`);
  }
}
