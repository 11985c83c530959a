// Batches the ranges that writes in this process changed in shared RAM namespaces, so the other processes' read
// caches (ShmBackend's ReadCache) drop them in one message per event-loop turn instead of one per write: a QD32 batch
// of writes that arrived in one socket read costs one round trip to the other workers (docs/target.md, "Target
// workers").

/** One changed range: [subsystem NQN, NSID, byte offset, byte length]. */
export type InvRange = [string, number, number, number];

export class InvalidationBatcher {
  #ranges: InvRange[] = [];
  #done: (() => void)[] = [];
  #queued = false;

  /** `send` delivers a batch and calls its argument once every other process dropped those ranges. */
  constructor(private readonly send: (ranges: InvRange[], done: () => void) => void) {}

  add(nqn: string, nsid: number, offset: number, length: number, done: () => void): void {
    this.#ranges.push([nqn, nsid, offset, length]);
    this.#done.push(done);
    if (this.#queued) return;
    this.#queued = true;
    queueMicrotask(() => this.#flush());
  }

  #flush(): void {
    this.#queued = false;
    const ranges = this.#ranges;
    const done = this.#done;
    this.#ranges = [];
    this.#done = [];
    this.send(ranges, () => {
      for (const d of done) d();
    });
  }
}
