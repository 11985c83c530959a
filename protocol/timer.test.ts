// LongTimeout: a duration from outside runs its full length past setTimeout's 2^31−1 ms. vitest's fake timers clamp
// an overlong delay to 1 ms as Node does, so a plain setTimeout fails these tests (the first one shows it).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { InvalidArgumentError } from './errors.js';
import { MAX_TIMER_DELAY_MS, setLongTimeout } from './timer.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** Fires `ms` later: not one ms before. */
function expectFiresAt(ms: number): void {
  const fn = vi.fn();
  const t = setLongTimeout(fn, ms);
  if (ms > 0) {
    vi.advanceTimersByTime(ms - 1);
    expect(fn).not.toHaveBeenCalled();
    expect(t.pending).toBe(true);
  }
  vi.advanceTimersByTime(1);
  expect(fn).toHaveBeenCalledTimes(1);
  expect(t.pending).toBe(false);
  vi.advanceTimersByTime(MAX_TIMER_DELAY_MS * 3);
  expect(fn).toHaveBeenCalledTimes(1);
}

describe('setLongTimeout', () => {
  it('the fake clock clamps an overlong setTimeout to 1 ms, as Node does', () => {
    const fn = vi.fn();
    setTimeout(fn, 2 ** 31);
    vi.advanceTimersByTime(1);
    expect(fn).toHaveBeenCalledTimes(1);
  });

  it.each([0, 1, 1000, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 4_294_968_000, 3 * 2 ** 31 + 5])('fires after exactly %d ms', (ms) => {
    expectFiresAt(ms);
  });

  it('the limit is Node’s TIMEOUT_MAX', () => {
    expect(MAX_TIMER_DELAY_MS).toBe(2 ** 31 - 1);
  });

  it.each([2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1])('clear() at any point of a %d ms chain stops it', (ms) => {
    for (const at of [1, MAX_TIMER_DELAY_MS - 1, MAX_TIMER_DELAY_MS, ms - 1].filter((a) => a < ms)) {
      const fn = vi.fn();
      const t = setLongTimeout(fn, ms);
      vi.advanceTimersByTime(at);
      t.clear();
      expect(t.pending).toBe(false);
      vi.advanceTimersByTime(ms * 2);
      expect(fn).not.toHaveBeenCalled();
    }
  });

  it.each([-1, Number.NaN, Number.POSITIVE_INFINITY])('refuses %d ms with an InvalidArgumentError naming the source', (ms) => {
    expect(() => setLongTimeout(() => undefined, ms, 'KATO')).toThrow(InvalidArgumentError);
    expect(() => setLongTimeout(() => undefined, ms, 'KATO')).toThrow(/^KATO: /);
  });
});
