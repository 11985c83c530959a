// Which io worker owns which I/O queue: the io_cpu analogue of Linux drivers/nvme/host/tcp.c
// nvme_tcp_set_queue_io_cpu (queue q on CPU (q − 1) mod N), with per-queue overrides kept across reconnects as the
// proposed writable io_cpu attribute keeps them (−1 reverts to the default).
import { InvalidArgumentError } from '../errors.js';

/**
 * Workers to run: io_workers, capped at the NIC's queue count when match_hw_queues found one (more workers than
 * hardware queues would only share the NIC's interrupt CPUs).
 */
export function effectiveWorkers(ioWorkers: number, matchHwQueues: boolean, nicQueues: number | undefined): number {
  if (ioWorkers <= 0) return 0;
  if (matchHwQueues && nicQueues !== undefined && nicQueues > 0) return Math.min(ioWorkers, nicQueues);
  return ioWorkers;
}

/**
 * Default worker of I/O queue `qid` among `workers`: (qid − 1) mod N. Queue groups (queues_per_hctx) take consecutive
 * qids, so the queues of one group land on distinct workers whenever the group is no larger than N.
 */
export function defaultWorker(qid: number, workers: number): number {
  return (qid - 1) % workers;
}

/** Per-queue placement: defaults plus overrides (setQueueWorker), which survive reconnects. */
export class Placement {
  readonly workers: number;
  readonly #overrides = new Map<number, number>();

  constructor(workers: number) {
    this.workers = workers;
  }

  workerOf(qid: number): number {
    return this.#overrides.get(qid) ?? defaultWorker(qid, this.workers);
  }

  /** The override of `qid`, or −1 when it follows the default. */
  overrideOf(qid: number): number {
    return this.#overrides.get(qid) ?? -1;
  }

  /**
   * Place `qid` on `worker` (−1: back to the default). `queues` is the current number of I/O queues; a qid or worker
   * outside them is refused and nothing changes. Returns the worker the queue is now placed on.
   */
  set(qid: number, worker: number, queues: number): number {
    if (this.workers === 0) throw new InvalidArgumentError('worker', 'this controller has no io workers (io_workers=0)');
    if (!Number.isInteger(qid) || qid < 1 || qid > queues) {
      throw new InvalidArgumentError('qid', `${qid}: no such I/O queue (this controller has ${queues === 0 ? 'none' : `1..${queues}`})`);
    }
    if (!Number.isInteger(worker) || worker < -1 || worker >= this.workers) {
      throw new InvalidArgumentError('worker', `${worker}: no such io worker (0..${this.workers - 1}, or -1 for the default)`);
    }
    if (worker === -1) this.#overrides.delete(qid);
    else this.#overrides.set(qid, worker);
    return this.workerOf(qid);
  }
}
