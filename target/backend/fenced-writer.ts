// The event-loop side of a fenced file backend's writer thread (fenced-writer-thread.ts; docs/gateway-groups.md
// "Fencing at the storage call"): copies each write into a buffer of its own, batches the operations of one event-loop
// task into one message (transferred, not cloned), and completes them from the thread's replies. Nothing here blocks:
// the thread does the syscalls.
import { Buffer } from 'node:buffer';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { IoCallback } from './types.js';
import { FENCED, FencedWriteError, type WriteFence } from './write-fence.js';

/** The writer thread is gone (it crashed or the backend closed): its operations and later ones fail with this. */
export class WriterThreadError extends Error {
  readonly code = 'WRITER_THREAD_EXITED';
}

/** One operation: `data` written at `offset`, or (`data` absent) `zeroes` zero bytes; `fua`: fdatasync before the reply. */
export interface WriterOp {
  id: number;
  offset: number;
  data?: Uint8Array;
  zeroes?: number;
  fua: boolean;
}

/** The answer for one operation: `code` absent when it succeeded ('FENCED' when the deadline passed before it). */
export interface WriterDone {
  id: number;
  code?: string;
  message?: string;
}

// The compiled package (dist/) runs the .js; the sources run the .ts under Node's type stripping (as pool.ts's ENTRY).
const THREAD = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? './fenced-writer-thread.ts' : './fenced-writer-thread.js', import.meta.url));

export class FencedWriter {
  readonly #thread: Worker;
  readonly #waiting = new Map<number, { offset: number; cb: IoCallback }>();
  #batch: WriterOp[] = [];
  #transfer: ArrayBuffer[] = [];
  #nextId = 1;
  #gone: Error | undefined;
  /** close() began: the thread stays referenced until it exited (the close's final fsync must still run). */
  #closing = false;
  #drained: (() => void) | undefined;

  constructor(fd: number, fence: WriteFence) {
    // execArgv []: the thread needs no loader (it imports node: modules only), and a parent's --import would only
    // slow its start.
    this.#thread = new Worker(THREAD, { workerData: { fd, deadline: fence.buffer }, execArgv: [] });
    // Held only while operations are out: an idle backend never keeps the process alive.
    this.#thread.unref();
    this.#thread.on('message', (done: WriterDone[]) => this.#onDone(done));
    this.#thread.on('error', (err: Error) => this.#fail(new WriterThreadError(`writer thread failed: ${err.message}`)));
    this.#thread.on('exit', (code) => this.#fail(new WriterThreadError(`writer thread exited (${code})`)));
  }

  /** Write the concatenation of `data` at `offset` (copied now: the caller may reuse its buffers). */
  write(offset: number, data: readonly Buffer[], fua: boolean, cb: IoCallback): void {
    let total = 0;
    for (const b of data) total += b.length;
    // allocUnsafeSlow: an ArrayBuffer of its own (a pooled Buffer's cannot be transferred).
    const copy = Buffer.allocUnsafeSlow(total);
    let at = 0;
    for (const b of data) at += b.copy(copy, at);
    this.#queue({ id: 0, offset, data: copy, fua }, cb, copy.buffer as ArrayBuffer);
  }

  /** Write `length` zero bytes at `offset`. */
  zeroes(offset: number, length: number, cb: IoCallback): void {
    this.#queue({ id: 0, offset, zeroes: length, fua: false }, cb, undefined);
  }

  #queue(op: WriterOp, cb: IoCallback, transfer: ArrayBuffer | undefined): void {
    if (this.#gone !== undefined) {
      const err = this.#gone;
      queueMicrotask(() => cb(err));
      return;
    }
    op.id = this.#nextId++;
    if (this.#waiting.size === 0) this.#thread.ref();
    this.#waiting.set(op.id, { offset: op.offset, cb });
    this.#batch.push(op);
    if (transfer !== undefined) this.#transfer.push(transfer);
    // One message for every write of this task (a socket read often carries many).
    if (this.#batch.length === 1) queueMicrotask(() => this.#post());
  }

  #post(): void {
    const ops = this.#batch;
    const transfer = this.#transfer;
    this.#batch = [];
    this.#transfer = [];
    if (ops.length > 0 && this.#gone === undefined) this.#thread.postMessage(ops, transfer);
  }

  #onDone(done: WriterDone[]): void {
    for (const d of done) {
      const w = this.#waiting.get(d.id);
      if (w === undefined) continue;
      this.#waiting.delete(d.id);
      w.cb(d.code === undefined ? null : d.code === FENCED ? new FencedWriteError(w.offset) : errnoError(d));
    }
    this.#idle();
  }

  #idle(): void {
    if (this.#waiting.size > 0) return;
    if (!this.#closing) this.#thread.unref();
    this.#drained?.();
  }

  #fail(err: Error): void {
    if (this.#gone !== undefined) return;
    this.#gone = err;
    const waiting = [...this.#waiting.values()];
    this.#waiting.clear();
    for (const w of waiting) w.cb(err);
    this.#idle();
  }

  /** Once every operation sent has its answer, stop the thread; later operations fail (WriterThreadError). */
  async close(): Promise<void> {
    this.#closing = true;
    this.#thread.ref();
    this.#post();
    if (this.#waiting.size > 0) await new Promise<void>((resolve) => (this.#drained = resolve));
    this.#fail(new WriterThreadError('file backend closed'));
    await this.#thread.terminate();
  }
}

/** The thread's errno failure as an Error with the same code (EIO, ENOSPC, ...). */
function errnoError(d: WriterDone): Error {
  return Object.assign(new Error(d.message ?? d.code), { code: d.code });
}
