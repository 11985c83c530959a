// Timers whose length comes from outside (the wire, a config file, the API or a flag), at any length a 32-bit field
// or a config range can hold. NVMe counts KATO in 32-bit milliseconds (Connect CDW12, NVMe-oF 1.1 §3.3; Set Features
// FID 0Fh, NVMe Base 2.0 §5.27.1.12), about 49.7 days, while Node's setTimeout and setInterval turn any delay above
// 2^31−1 ms (about 24.8 days) into 1 ms with a TimeoutOverflowWarning: a legal KATO would fire at once.
//
// It lives in protocol/ because that is the one layer target/core and initiator/ may both import (target/core may not
// import connection/). It does no I/O: it reads no socket, file or clock of its own and only asks the event loop for a
// callback, as the standard timers do; nothing else in protocol/ arms a timer.
import { InvalidArgumentError } from './errors.js';

/** The longest delay Node's timers keep (TIMEOUT_MAX in lib/internal/timers.js); a longer one becomes 1 ms. */
export const MAX_TIMER_DELAY_MS = 0x7fff_ffff;

/**
 * One timeout of any finite length: at most MAX_TIMER_DELAY_MS is armed at a time and the remainder is re-armed when
 * that slice fires, so a duration up to Number.MAX_SAFE_INTEGER ms runs its full length.
 */
export class LongTimeout {
  readonly #fn: () => void;
  #timer: NodeJS.Timeout | undefined;
  /** What is still to run after the slice now armed. */
  #left: number;
  #unref = false;

  constructor(fn: () => void, ms: number, what = 'timer') {
    if (!Number.isFinite(ms) || ms < 0) throw new InvalidArgumentError(what, `${ms} ms is not a duration: use a finite number >= 0`);
    this.#fn = fn;
    this.#left = ms;
    this.#arm();
  }

  /** Whether it is still to fire (not fired, not cleared). */
  get pending(): boolean {
    return this.#timer !== undefined;
  }

  /** As Timeout.unref(): the timer does not hold the process open, for every slice. */
  unref(): this {
    this.#unref = true;
    this.#timer?.unref();
    return this;
  }

  clear(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#left = 0;
  }

  #arm(): void {
    const slice = Math.min(this.#left, MAX_TIMER_DELAY_MS);
    this.#left -= slice;
    this.#timer = setTimeout(this.#fire, slice);
    if (this.#unref) this.#timer.unref();
  }

  readonly #fire = (): void => {
    this.#timer = undefined;
    if (this.#left > 0) return this.#arm();
    this.#fn();
  };
}

/**
 * setTimeout for a duration that comes from outside: `fn` runs after `ms` however long (see LongTimeout). `what`
 * names the source in the InvalidArgumentError thrown for a negative or non-finite `ms`, which callers validate first.
 */
export function setLongTimeout(fn: () => void, ms: number, what?: string): LongTimeout {
  return new LongTimeout(fn, ms, what);
}
