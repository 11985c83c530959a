// The gateway's write fence at the storage call (docs/gateway-groups.md, "Fencing at the storage call"): one deadline
// per process in shared memory, read by every fenced file backend's writer thread immediately before each write
// syscall. The gateway sets it whenever it sets the ports' anaValidUntil (target/service/gateway.ts #fenceAt); a
// worker process keeps its own copy from the primary's 'ana-deadline' messages (target/workers/worker.ts), since a
// SharedArrayBuffer cannot cross processes. The deadline is absolute, so a copy that stops being updated (the primary
// frozen) still fences on time.

/** The code of a write refused because the lease deadline passed: the I/O path answers ANA Inaccessible for it. */
export const FENCED = 'FENCED';

/** A write refused by the fence before its syscall: none of its bytes reached the file. */
export class FencedWriteError extends Error {
  readonly code = FENCED;
  constructor(offset: number) {
    super(`write at byte ${offset} refused: the gateway's lease deadline passed (fenced)`);
  }
}

/** Whether `err` is the fence's refusal (also when it came back from the writer thread as a plain code). */
export function isFencedError(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === FENCED;
}

/** Stored for "no deadline": later than any Date.now(). */
const NEVER = 2n ** 63n - 1n;

/**
 * The deadline (ms since the epoch) in a BigInt64Array over a SharedArrayBuffer: Atomics on it are single-copy
 * atomic by the memory model (a Float64Array's plain accesses are not guaranteed to be), and the writer thread reads it
 * without any message from this thread, so a busy or frozen event loop delays nothing.
 */
export class WriteFence {
  readonly buffer: SharedArrayBuffer;
  readonly #cell: BigInt64Array;

  /** A new store (not fenced), or a view of one another thread created (`buffer` from its workerData). */
  constructor(buffer?: SharedArrayBuffer) {
    this.buffer = buffer ?? new SharedArrayBuffer(8);
    this.#cell = new BigInt64Array(this.buffer);
    if (buffer === undefined) Atomics.store(this.#cell, 0, NEVER);
  }

  /** Writes are refused from `until` on (ms since the epoch); Infinity: never. */
  set(until: number): void {
    Atomics.store(this.#cell, 0, until === Infinity ? NEVER : BigInt(Math.ceil(Math.max(0, until))));
  }

  get until(): number {
    const v = Atomics.load(this.#cell, 0);
    return v === NEVER ? Infinity : Number(v);
  }

  /** Whether a write starting now must be refused (`now` >= deadline; Date.now() ms are integers, so ceil is exact). */
  passed(now = Date.now()): boolean {
    return BigInt(now) >= Atomics.load(this.#cell, 0);
  }
}
