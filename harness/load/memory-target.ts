// In-memory BlockTarget: what the engine's unit tests (and `bench/harness-engine.ts`) drive, no sockets involved.
import type { BlockIo, BlockTarget, QueueCounter, SubmitContext } from './types.js';

export interface MemoryTargetOptions {
  blockSize?: number;
  capacityBlocks: number;
  /** Simulated queues; a submitter maps to queue `index % queues`, like a hctx on one queue. Default 1. */
  queues?: number;
  /** Added completion latency (µs); 0 completes on the next macrotask (setImmediate). */
  latencyUs?: number;
}

export class MemoryBlockTarget implements BlockTarget {
  readonly blockSize: number;
  readonly capacityBlocks: number;
  readonly data: Buffer;
  readonly #queues: QueueCounter[];
  readonly #latencyUs: number;
  /** Every call, for tests that check what the engine submitted. */
  readonly log: { op: 'read' | 'write'; lba: number; blocks: number; hctx: string }[] = [];
  logEnabled = false;

  constructor(opts: MemoryTargetOptions) {
    this.blockSize = opts.blockSize ?? 512;
    this.capacityBlocks = opts.capacityBlocks;
    this.data = Buffer.alloc(this.blockSize * this.capacityBlocks);
    this.#queues = Array.from({ length: opts.queues ?? 1 }, (_, i) => ({ queue: `q${i + 1}`, commands: 0, bytes: 0 }));
    this.#latencyUs = opts.latencyUs ?? 0;
  }

  read(lba: number, blocks: number, ctx: SubmitContext, into?: Buffer): Promise<Uint8Array> {
    this.#check(lba, blocks);
    this.#count(ctx, blocks);
    if (this.logEnabled) this.log.push({ op: 'read', lba, blocks, hctx: ctx.hctx });
    const src = this.data.subarray(lba * this.blockSize, (lba + blocks) * this.blockSize);
    const out = into === undefined ? Buffer.from(src) : into.subarray(0, src.length);
    if (into !== undefined) src.copy(out);
    return this.#complete(out);
  }

  write(lba: number, data: Uint8Array, ctx: SubmitContext): Promise<void> {
    const blocks = data.length / this.blockSize;
    this.#check(lba, blocks);
    this.#count(ctx, blocks);
    if (this.logEnabled) this.log.push({ op: 'write', lba, blocks, hctx: ctx.hctx });
    this.data.set(data, lba * this.blockSize);
    return this.#complete(undefined);
  }

  /** The callback API, completing the same way as read/write (next macrotask, or after latencyUs). */
  submit(io: BlockIo): void {
    const done = io.write ? this.write(io.lba, io.buf, io.ctx) : this.read(io.lba, io.blocks, io.ctx, io.buf);
    done.then(
      () => io.ioDone(undefined),
      (e: unknown) => io.ioDone(e as Error),
    );
  }

  queueCounters(): QueueCounter[] {
    return this.#queues.map((q) => ({ ...q }));
  }

  /** Flips one byte, as a media or wire error would. */
  corrupt(lba: number, byteInBlock: number): void {
    const i = lba * this.blockSize + byteInBlock;
    this.data[i] = (this.data[i] as number) ^ 0xff;
  }

  #check(lba: number, blocks: number): void {
    if (!Number.isInteger(blocks) || blocks < 1 || lba < 0 || lba + blocks > this.capacityBlocks) {
      throw new RangeError(`LBA range ${lba}+${blocks} outside 0..${this.capacityBlocks}`);
    }
  }

  #count(ctx: SubmitContext, blocks: number): void {
    const q = this.#queues[ctx.index % this.#queues.length] as QueueCounter;
    q.commands++;
    q.bytes += blocks * this.blockSize;
  }

  #complete<T>(v: T): Promise<T> {
    return new Promise((resolve) => {
      if (this.#latencyUs > 0) setTimeout(() => resolve(v), this.#latencyUs / 1000);
      else setImmediate(() => resolve(v));
    });
  }
}
