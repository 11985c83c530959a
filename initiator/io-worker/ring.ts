// A single-producer single-consumer ring of fixed-size Int32 entries in a SharedArrayBuffer, the thread crossing of an
// io worker's submission and completion queues (the shape of an NVMe SQ/CQ pair: head and tail indices, a doorbell).
// The producer writes entries in place and publishes them with one store of the tail; the consumer is woken through a
// doorbell word only when it said it was going to sleep, so a batch costs one wake-up, not one per entry
// (Atomics.waitAsync / Atomics.notify). A full ring is reported to the producer, which waits for the consumer to free
// space (waitSpace) and tries again.

/** Header words (Int32 indices). head and tail are free-running counters; entries are at index & (capacity − 1). */
const HEAD = 0;
const TAIL = 1;
/** Bumped by the producer to wake a sleeping consumer. */
const DOORBELL = 2;
/** 1 while the consumer is (about to be) asleep on DOORBELL. */
const SLEEPING = 3;
/** Bumped by the consumer to wake a producer waiting for space. */
const SPACE = 4;
/** 1 while the producer waits for space. */
const FULL = 5;
const HEADER_WORDS = 8;

/** Atomics.waitAsync (ES2024, in Node 20) typed here because the project's lib predates it. */
const waitAsync = (Atomics as unknown as {
  waitAsync(a: Int32Array, index: number, value: number): { async: false; value: string } | { async: true; value: Promise<string> };
}).waitAsync;

export interface RingLayout {
  /** Entries, a power of two. */
  capacity: number;
  /** Int32 words per entry. */
  entryWords: number;
}

/** Bytes of SharedArrayBuffer a ring of this layout needs. */
export function ringBytes(l: RingLayout): number {
  return (HEADER_WORDS + l.capacity * l.entryWords) * 4;
}

/** A new ring's shared memory (capacity rounded up to a power of two). */
export function createRingBuffer(capacity: number, entryWords: number): { sab: SharedArrayBuffer; layout: RingLayout } {
  if (!Number.isInteger(capacity) || capacity < 1 || capacity > 1 << 20) throw new RangeError(`ring capacity ${capacity} outside 1..${1 << 20}`);
  if (!Number.isInteger(entryWords) || entryWords < 1) throw new RangeError(`ring entry of ${entryWords} words`);
  let cap = 1;
  while (cap < capacity) cap <<= 1;
  const layout = { capacity: cap, entryWords };
  return { sab: new SharedArrayBuffer(ringBytes(layout)), layout };
}

/** Counters of one ring end (plain numbers, read by observability). */
export interface RingCounters {
  /** Entries produced or consumed. */
  entries: number;
  /** Producer: publishes that made entries visible; consumer: drains that found entries. */
  batches: number;
  /** Producer: doorbell notifications sent; consumer: wake-ups received. */
  wakeups: number;
  /** Producer: reserve() calls refused because the ring was full. */
  full: number;
}

abstract class RingEnd {
  /** The whole ring as Int32 words; an entry starts at `base` returned by reserve()/entry(). */
  readonly words: Int32Array;
  readonly capacity: number;
  readonly entryWords: number;
  readonly #mask: number;
  readonly counters: RingCounters = { entries: 0, batches: 0, wakeups: 0, full: 0 };

  constructor(sab: SharedArrayBuffer, layout: RingLayout) {
    if ((layout.capacity & (layout.capacity - 1)) !== 0) throw new RangeError(`ring capacity ${layout.capacity} is not a power of two`);
    if (sab.byteLength < ringBytes(layout)) throw new RangeError('ring buffer smaller than its layout');
    this.words = new Int32Array(sab);
    this.capacity = layout.capacity;
    this.entryWords = layout.entryWords;
    this.#mask = layout.capacity - 1;
  }

  protected baseOf(index: number): number {
    return HEADER_WORDS + (index & this.#mask) * this.entryWords;
  }

  /** Entries published and not yet consumed. */
  get pending(): number {
    return (Atomics.load(this.words, TAIL) - Atomics.load(this.words, HEAD)) | 0;
  }
}

/** The producing end: reserve() → write words[base..] → commit(), any number of times, then publish() once. */
export class RingProducer extends RingEnd {
  /** Tail including reserved-and-committed entries not yet published. */
  #tail: number;

  constructor(sab: SharedArrayBuffer, layout: RingLayout) {
    super(sab, layout);
    this.#tail = Atomics.load(this.words, TAIL);
  }

  /** Base word of the next free entry, or −1 when the ring is full (call waitSpace, then try again). */
  reserve(): number {
    if (((this.#tail - Atomics.load(this.words, HEAD)) | 0) >= this.capacity) {
      this.counters.full++;
      return -1;
    }
    return this.baseOf(this.#tail);
  }

  /** The entry last reserved is complete. */
  commit(): void {
    this.#tail = (this.#tail + 1) | 0;
    this.counters.entries++;
  }

  /** Committed entries not yet published. */
  get unpublished(): number {
    return (this.#tail - Atomics.load(this.words, TAIL)) | 0;
  }

  /** Make every committed entry visible; wake the consumer once if it sleeps. Returns whether a wake-up was sent. */
  publish(): boolean {
    const w = this.words;
    if (Atomics.load(w, TAIL) === this.#tail) return false;
    Atomics.store(w, TAIL, this.#tail);
    this.counters.batches++;
    if (Atomics.load(w, SLEEPING) === 0) return false;
    Atomics.store(w, SLEEPING, 0);
    Atomics.add(w, DOORBELL, 1);
    Atomics.notify(w, DOORBELL);
    this.counters.wakeups++;
    return true;
  }

  /** Resolves once the consumer has freed space (at once when there is some). */
  async waitSpace(): Promise<void> {
    const w = this.words;
    for (;;) {
      Atomics.store(w, FULL, 1);
      const seen = Atomics.load(w, SPACE);
      if (((this.#tail - Atomics.load(w, HEAD)) | 0) < this.capacity) {
        Atomics.store(w, FULL, 0);
        return;
      }
      const r = waitAsync(w, SPACE, seen);
      if (r.async) await r.value;
    }
  }
}

/** The consuming end: drain() hands every published entry's base to a callback, then frees them in one store. */
export class RingConsumer extends RingEnd {
  #closed = false;

  /** Consume everything published, up to `max` entries; returns how many. `fn` must not keep `base`. */
  drain(fn: (words: Int32Array, base: number) => void, max = Infinity): number {
    const w = this.words;
    let head = Atomics.load(w, HEAD);
    const tail = Atomics.load(w, TAIL);
    let n = 0;
    while (head !== tail && n < max) {
      fn(w, this.baseOf(head));
      head = (head + 1) | 0;
      n++;
    }
    if (n === 0) return 0;
    Atomics.store(w, HEAD, head);
    this.counters.entries += n;
    this.counters.batches++;
    if (Atomics.load(w, FULL) === 1) {
      Atomics.store(w, FULL, 0);
      Atomics.add(w, SPACE, 1);
      Atomics.notify(w, SPACE);
    }
    return n;
  }

  /**
   * Resolves when entries are pending: at once if some are, else after the producer's next publish (one wake-up per
   * batch). The sleeping flag is set before the last look at the tail, so a publish in between is never lost.
   */
  async wait(): Promise<void> {
    const w = this.words;
    for (;;) {
      if (this.#closed) return;
      const seen = Atomics.load(w, DOORBELL);
      Atomics.store(w, SLEEPING, 1);
      if (this.pending > 0) {
        Atomics.store(w, SLEEPING, 0);
        return;
      }
      const r = waitAsync(w, DOORBELL, seen);
      if (r.async) {
        await r.value;
        this.counters.wakeups++;
      }
    }
  }

  /** Stop waiting: a pending wait() resolves (the owner then sees its queue closed). */
  close(): void {
    this.#closed = true;
    Atomics.add(this.words, DOORBELL, 1);
    Atomics.notify(this.words, DOORBELL);
  }
}
