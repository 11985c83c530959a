// Submission contexts like blk-mq hctxs: each owns one queue or a queue group (queues_per_hctx) with one shared tag
// space and a round-robin rotor. Batching per tick happens in the transport (cork on first write, uncork next tick),
// so a burst submitted in one tick leaves as one writev on every queue that received work.
import type { IoQueue, IoRequest, TagSet } from '../queue-pair.js';

/** Hctx types as blk-mq has them: default (reads, and writes without write queues), write (nr_write_queues), poll. */
export type HctxType = 'default' | 'write' | 'poll';

export class Hctx {
  readonly index: number;
  readonly type: HctxType;
  readonly #queues: IoQueue[];
  readonly tags: TagSet;
  #rotor = 0;

  constructor(index: number, type: HctxType, queues: readonly IoQueue[], tags: TagSet) {
    if (queues.length === 0) throw new RangeError('an hctx needs at least one queue');
    this.index = index;
    this.type = type;
    this.#queues = [...queues];
    this.tags = tags;
  }

  get queues(): readonly IoQueue[] {
    return this.#queues;
  }

  /** Put `next` where `prev` was (a queue moved to another io worker); false when `prev` is not in this hctx. */
  replace(prev: IoQueue, next: IoQueue): boolean {
    const i = this.#queues.indexOf(prev);
    if (i < 0) return false;
    this.#queues[i] = next;
    return true;
  }

  /** Next queue of the group by rotor (one queue: always that one). */
  pick(): IoQueue {
    const qs = this.#queues;
    if (qs.length === 1) return qs[0] as IoQueue;
    // A compare instead of two integer divisions per command.
    let r = this.#rotor;
    if (r >= qs.length) r = 0;
    this.#rotor = r + 1;
    return qs[r] as IoQueue;
  }

  /** Submit (QueuePair.submitIo; the promise API arrives here as a PromiseRequest) on the next queue of the group. */
  submitIo(io: IoRequest): void {
    this.pick().submitIo(io);
  }

  get inFlight(): number {
    let n = 0;
    for (const q of this.queues) n += q.inFlight;
    return n;
  }
}

/** How granted I/O queues are laid out: per hctx type, the list of groups, each a list of qids. */
export interface QueueMap {
  default: number[][];
  write: number[][];
  poll: number[][];
  /** Queues per default hctx after fallback. */
  queuesPerHctx: number;
}

/**
 * Lay out `granted` I/O queues (qid 1..granted) over hctxs. Default hctxs get `perHctx` queues each; when fewer queues
 * were granted than hctxs × perHctx only whole groups are kept, and with not even one whole group each hctx gets one
 * queue (the queues_per_hctx RFC's fallback). Left-over queues go to write hctxs, then poll hctxs, one queue each
 * (Linux nvmf_set_io_queues gives the default type priority too).
 */
export function mapQueues(granted: number, nrHctx: number, perHctx: number, nrWrite: number, nrPoll: number): QueueMap {
  let per = perHctx;
  let want = nrHctx * perHctx;
  let groups = nrHctx;
  if (granted < want) {
    groups = Math.floor(granted / per);
    if (groups < 1) {
      per = 1;
      groups = Math.min(granted, nrHctx);
    }
    want = groups * per;
  }
  let qid = 1;
  const def: number[][] = [];
  for (let h = 0; h < groups; h++) {
    const g: number[] = [];
    for (let i = 0; i < per; i++) g.push(qid++);
    def.push(g);
  }
  const rest = granted - want;
  const write: number[][] = [];
  for (let i = 0; i < Math.min(nrWrite, Math.max(0, rest)); i++) write.push([qid++]);
  const poll: number[][] = [];
  for (let i = 0; i < Math.min(nrPoll, Math.max(0, rest - write.length)); i++) poll.push([qid++]);
  return { default: def, write, poll, queuesPerHctx: per };
}
