// Host keep-alive (NVMe Base 2.0 §3.9, Keep Alive command §5.16; Linux drivers/nvme/host/core.c nvme_keep_alive_work
// and nvme_keep_alive_finish): a Keep Alive on the admin queue every KATO/2, or KATO/4 with Traffic Based Keep Alive
// where any completion in the period stands in for the command. It runs from the moment the admin queue is connected
// and enabled (the controller's KATO timer starts at the admin Connect, §3.9), through I/O queue setup, so the tick
// re-arms while the controller is connecting as well as live (Linux 6.7+, "start keep-alive after admin queue setup").
import { performance } from 'node:perf_hooks';
import { AdminOpcode, encodeSqe, Ctratt, setLongTimeout, type LongTimeout } from '../protocol/index.js';
import type { QueuePair } from './queue-pair.js';

/** What the keep-alive needs from its controller. */
export interface KeepAliveHost {
  /** Keep-alive traffic flows while the controller is connecting (setup after the admin queue) or live. */
  readonly keepAliveWanted: boolean;
  /** Where the Keep Alive goes; undefined while the queues are torn down. */
  readonly adminQueue: QueuePair | undefined;
  /** A Keep Alive failed or timed out: the controller starts error recovery (or, while connecting, fails the setup). */
  keepAliveFailed(err: Error): void;
}

export class KeepAlive {
  readonly #host: KeepAliveHost;
  #timer: LongTimeout | undefined;
  #activity = false;
  #periodMs = 0;
  #katoMs = 0;
  #tbkas = false;
  /** Bumped by start/stop: a Keep Alive completing after them belongs to an earlier run and must not re-arm. */
  #epoch = 0;
  /** Keep Alive commands sent and completed since this object was made (observability and tests). */
  sent = 0;
  completed = 0;

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
    this.#arm(this.#periodMs);
  }

  stop(): void {
    this.#epoch++;
    this.#timer?.clear();
    this.#timer = undefined;
  }

  /** A completion arrived on some queue (the queue pairs call this for every completion). */
  readonly noteActivity = (): void => {
    this.#activity = true;
  };

  #arm(ms: number): void {
    // The period comes from keep_alive_tmo (up to the 32-bit KATO's 4294967 s; half of it just fits setTimeout's
    // 2^31−1 ms): a LongTimeout, as every timer an option sets, so no range change can overflow it.
    this.#timer = setLongTimeout(this.#tick, ms, 'keep_alive_tmo').unref();
  }

  readonly #tick = (): void => {
    this.#timer = undefined;
    if (!this.#host.keepAliveWanted) return;
    // With TBKAS a completion in the period is keep-alive traffic: skip the command, as Linux does.
    if (this.#tbkas && this.#activity) {
      this.#activity = false;
      this.#arm(this.#periodMs);
      return;
    }
    const admin = this.#host.adminQueue;
    if (admin === undefined) return;
    const epoch = this.#epoch;
    const sentAt = performance.now();
    this.sent++;
    admin.submit({ sqe: encodeSqe({ opcode: AdminOpcode.KEEP_ALIVE, cid: 0 }), timeoutMs: this.#katoMs }).then(
      () => {
        if (epoch !== this.#epoch) return;
        this.completed++;
        this.#activity = false;
        // The round trip counts against the period (nvme_keep_alive_finish subtracts the RTT).
        if (this.#host.keepAliveWanted) this.#arm(Math.max(0, this.#periodMs - (performance.now() - sentAt)));
      },
      (e: unknown) => {
        if (epoch !== this.#epoch) return;
        this.#host.keepAliveFailed(e instanceof Error ? e : new Error(String(e)));
      },
    );
  };
}
