// A timer-backed pause that an AbortSignal cuts short (reconnect delay, CSTS polling).

/** Resolve after `ms`, or at once when `signal` aborts; never rejects. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    });
  });
}
