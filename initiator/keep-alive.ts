// Host keep-alive (NVMe Base 2.0 §3.9, Keep Alive command §5.16; Linux drivers/nvme/host/core.c nvme_keep_alive_work):
// a Keep Alive on the admin queue every KATO/2, or KATO/4 with Traffic Based Keep Alive where any completion in the
// period stands in for the command.
import { AdminOpcode, encodeSqe, Ctratt } from '../protocol/index.js';
import type { QueuePair } from './queue-pair.js';

/** What the keep-alive needs from its controller. */
export interface KeepAliveHost {
  /** Keep-alive traffic flows only while the controller is live. */
  readonly live: boolean;
  /** Where the Keep Alive goes; undefined while the queues are torn down. */
  readonly adminQueue: QueuePair | undefined;
  /** A Keep Alive failed or timed out: the controller starts error recovery. */
  keepAliveFailed(err: Error): void;
}

export class KeepAlive {
  readonly #host: KeepAliveHost;
  #timer: NodeJS.Timeout | undefined;
  #activity = false;
  #periodMs = 0;
  #katoMs = 0;
  #tbkas = false;

  constructor(host: KeepAliveHost) {
    this.#host = host;
  }

  /** Arm for KATO `katoSec` seconds (0: keep-alive off); `ctratt` decides whether traffic counts. */
  start(katoSec: number, ctratt: number): void {
    this.stop();
    if (katoSec === 0) return;
    this.#katoMs = katoSec * 1000;
    this.#tbkas = (ctratt & Ctratt.TBKAS) !== 0;
    this.#periodMs = this.#katoMs / (this.#tbkas ? 4 : 2);
    this.#activity = false;
    this.#arm();
  }

  stop(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** A completion arrived on some queue (the queue pairs call this for every completion). */
  readonly noteActivity = (): void => {
    this.#activity = true;
  };

  #arm(): void {
    this.#timer = setTimeout(this.#tick, this.#periodMs);
    this.#timer.unref();
  }

  readonly #tick = (): void => {
    this.#timer = undefined;
    if (!this.#host.live) return;
    // With TBKAS a completion in the period is keep-alive traffic: skip the command, as Linux does.
    if (this.#tbkas && this.#activity) {
      this.#activity = false;
      this.#arm();
      return;
    }
    const admin = this.#host.adminQueue;
    if (admin === undefined) return;
    admin.submit({ sqe: encodeSqe({ opcode: AdminOpcode.KEEP_ALIVE, cid: 0 }), timeoutMs: this.#katoMs }).then(
      () => {
        if (this.#host.live) this.#arm();
      },
      (e: unknown) => this.#host.keepAliveFailed(e instanceof Error ? e : new Error(String(e))),
    );
  };
}
