// A timer-backed pause that an AbortSignal cuts short (reconnect delay, CSTS polling).
import { setLongTimeout } from '../protocol/index.js';

/** Resolve after `ms`, or at once when `signal` aborts; never rejects. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    // The reconnect delay is an option: a LongTimeout keeps any length (setTimeout turns > 2^31−1 ms into 1 ms).
    const t = setLongTimeout(resolve, ms, 'delay');
    signal?.addEventListener('abort', () => {
      t.clear();
      resolve();
    });
  });
}
