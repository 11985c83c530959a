// The one rate limit on log lines a host can cause (refused commands and connects, transport errors, TLS and
// authentication failures): per owner (a controller, or a port for what happens before a controller exists) the first
// few lines of an interval are written, the rest counted and told in one summary line. Every event is counted by
// reason for /metrics (nvme_tcp_host_refusals_total), logged or not, so nothing a host sends grows the log unbounded.
import type { Logger } from 'pino';

/** Why a host-caused line was written: the label values of nvme_tcp_host_refusals_total (a closed set). */
export const HOST_REFUSAL_REASONS = [
  'connect',
  'set_features',
  'cc_rejected',
  'transport_fatal',
  'h2c_term_req',
  'data_digest',
  'idle_connection',
  'connection_limit',
  'tls',
  'auth',
] as const;
export type HostRefusalReason = (typeof HOST_REFUSAL_REASONS)[number];

/** Per-process counts (CoreStats.refusals): events by reason, and lines the limiters left out. */
export interface HostRefusalCounts {
  byReason: Record<HostRefusalReason, number>;
  suppressed: number;
}

export function newHostRefusalCounts(): HostRefusalCounts {
  return { byReason: Object.fromEntries(HOST_REFUSAL_REASONS.map((r) => [r, 0])) as Record<HostRefusalReason, number>, suppressed: 0 };
}

/** Lines per owner per interval before the rest are only counted. */
export const HOST_LOG_LIMIT = { burst: 5, intervalMs: 10_000 } as const;

export class HostLogLimiter {
  #windowEnd = 0;
  #written = 0;
  #suppressed = 0;
  #suppressedBy: Partial<Record<HostRefusalReason, number>> = {};
  #timer: NodeJS.Timeout | undefined;

  constructor(
    readonly logger: Logger,
    readonly counts: HostRefusalCounts,
    /** Who this limiter speaks for (cntlid and host, or port): the summary line carries it. */
    readonly owner: Readonly<Record<string, unknown>>,
    readonly limit: { burst: number; intervalMs: number } = HOST_LOG_LIMIT,
  ) {}

  /**
   * A host-caused event: counted; true when its line may be written (the caller writes it with its own logger and
   * level), false once this owner wrote `burst` lines in the current interval: the summary at its end tells how many.
   */
  allow(reason: HostRefusalReason): boolean {
    this.counts.byReason[reason]++;
    const now = performance.now();
    if (now >= this.#windowEnd) {
      this.#windowEnd = now + this.limit.intervalMs;
      this.#written = 0;
    }
    if (this.#written < this.limit.burst) {
      this.#written++;
      return true;
    }
    this.#suppressed++;
    this.#suppressedBy[reason] = (this.#suppressedBy[reason] ?? 0) + 1;
    this.counts.suppressed++;
    if (this.#timer === undefined) {
      this.#timer = setTimeout(() => this.#summary(), this.#windowEnd - now);
      this.#timer.unref();
    }
    return false;
  }

  /** The owner goes away (controller teardown, port removed): its last count is written now. */
  close(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#summary();
  }

  #summary(): void {
    this.#timer = undefined;
    if (this.#suppressed === 0) return;
    this.logger.warn(
      { ...this.owner, suppressed: this.#suppressedBy, intervalS: this.limit.intervalMs / 1000 },
      `${this.#suppressed} more host-caused log lines left out (at most ${this.limit.burst} per ${this.limit.intervalMs / 1000} s each)`,
    );
    this.#suppressed = 0;
    this.#suppressedBy = {};
  }
}
