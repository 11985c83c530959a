// The host-log limiter over time: `burst` lines per interval, one summary line at the interval's end naming what was
// left out, a fresh allowance after it, and every event counted by reason whether written or not.
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { HostLogLimiter, newHostRefusalCounts } from './host-log.js';

afterEach(() => vi.useRealTimers());

describe('HostLogLimiter', () => {
  it('allows burst lines per interval, then summarises the rest once per interval', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const lines: Array<{ msg: string; suppressed?: Record<string, number>; cntlid?: number }> = [];
    const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as (typeof lines)[number]) });
    const counts = newHostRefusalCounts();
    const l = new HostLogLimiter(logger, counts, { cntlid: 7 }, { burst: 3, intervalMs: 1000 });
    const allowed = Array.from({ length: 10 }, (_, i) => l.allow(i % 2 === 0 ? 'set_features' : 'connect'));
    expect(allowed).toEqual([true, true, true, false, false, false, false, false, false, false]);
    expect(lines).toEqual([]);
    vi.advanceTimersByTime(999);
    expect(lines).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ cntlid: 7, suppressed: { connect: 4, set_features: 3 } });
    // A new interval: a fresh allowance, and nothing left out means no summary.
    expect([l.allow('tls'), l.allow('tls'), l.allow('tls')]).toEqual([true, true, true]);
    vi.advanceTimersByTime(5000);
    expect(lines).toHaveLength(1);
    expect(l.allow('tls')).toBe(true);
    expect(counts.byReason).toMatchObject({ set_features: 5, connect: 5, tls: 4, auth: 0 });
    expect(counts.suppressed).toBe(7);
  });

  it('close() writes the pending count at once and clears the timer', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const lines: Array<{ suppressed?: Record<string, number> }> = [];
    const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as (typeof lines)[number]) });
    const l = new HostLogLimiter(logger, newHostRefusalCounts(), { port: 1 }, { burst: 1, intervalMs: 1000 });
    l.allow('connect');
    l.allow('connect');
    expect(vi.getTimerCount()).toBe(1);
    l.close();
    expect(vi.getTimerCount()).toBe(0);
    expect(lines.map((x) => x.suppressed)).toEqual([{ connect: 1 }]);
  });
});
