// FaultEngine without sockets: schedules (Nth, every Kth, seeded probability, window, times) and the registry.
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FAULT_ACTIONS_NOT_IMPLEMENTED, parseFaultRule, type FaultRuleInput } from '../config/fault-rules.js';
import { FaultEngine, type FaultCommand, type FaultQueue } from './fault-engine.js';

afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});

const Q: FaultQueue = { qid: 1, port: { id: 1 }, ctrl: { hostnqn: 'h', cntlid: 1, subsys: { nqn: 's' } } };
function cmd(opcode = 0): FaultCommand {
  return { opcode, sqe: Buffer.alloc(64), nsid: 1, inCapsule: undefined, fault: undefined };
}

/** Which of `n` matching commands the rule fires on (1-based). */
function firings(rule: FaultRuleInput, n: number, engine = new FaultEngine()): number[] {
  engine.add(parseFaultRule(rule));
  const out: number[] = [];
  for (let i = 1; i <= n; i++) engine.onCommand(Q, cmd(), () => (out.push(i), true));
  return out;
}

describe('schedules', () => {
  it('nth, every, nth with every, times', () => {
    const drop = { kind: 'drop' } as const;
    expect(firings({ schedule: { nth: 3 }, action: drop }, 10)).toEqual([3]);
    expect(firings({ schedule: { every: 4 }, action: drop }, 10)).toEqual([4, 8]);
    expect(firings({ schedule: { nth: 2, every: 3 }, action: drop }, 10)).toEqual([2, 5, 8]);
    expect(firings({ schedule: { times: 2 }, action: drop }, 10)).toEqual([1, 2]);
    expect(firings({ action: drop }, 3)).toEqual([1, 2, 3]);
  });

  it('the same seed replays the same firings; another seed differs; the rate follows the probability', () => {
    const rule = { schedule: { probability: 0.3, seed: 12345 }, action: { kind: 'drop' } } as const;
    const a = firings(rule, 2000);
    expect(firings(rule, 2000)).toEqual(a);
    expect(firings({ ...rule, schedule: { probability: 0.3, seed: 54321 } }, 2000)).not.toEqual(a);
    expect(a.length / 2000).toBeGreaterThan(0.25);
    expect(a.length / 2000).toBeLessThan(0.35);
    expect(firings({ schedule: { probability: 1, seed: 0 }, action: { kind: 'drop' } }, 5)).toEqual([1, 2, 3, 4, 5]);
    expect(firings({ schedule: { probability: 0, seed: 0xffffffff }, action: { kind: 'drop' } }, 50)).toEqual([]);
  });

  it('a probability without a seed gets one, shown by list() so the run can be replayed', () => {
    const e = new FaultEngine();
    const unseeded = firings({ schedule: { probability: 0.5 }, action: { kind: 'drop' } }, 200, e);
    const seed = e.list()[0]?.seed as number;
    expect(seed).toBeTypeOf('number');
    expect(firings({ schedule: { probability: 0.5, seed }, action: { kind: 'drop' } }, 200)).toEqual(unseeded);
  });

  it('time window: nothing before afterMs nor after afterMs + forMs', () => {
    vi.useFakeTimers();
    // The window reads node:perf_hooks' performance.now(), which the fake clock does not replace: read Date instead.
    vi.spyOn(performance, 'now').mockImplementation(() => Date.now());
    const e = new FaultEngine();
    e.add(parseFaultRule({ schedule: { afterMs: 100, forMs: 50 }, action: { kind: 'drop' } }));
    const fired = (): boolean => e.onCommand(Q, cmd(), () => true);
    expect(fired()).toBe(false);
    vi.advanceTimersByTime(100);
    expect(fired()).toBe(true);
    vi.advanceTimersByTime(49);
    expect(fired()).toBe(true);
    vi.advanceTimersByTime(1);
    expect(fired()).toBe(false);
  });
});

describe('registry', () => {
  it('ids given or made, a used id refused, remove and clear disarm', () => {
    const e = new FaultEngine();
    expect(e.armed).toBe(false);
    expect(e.add(parseFaultRule({ action: { kind: 'drop' } })).id).toBe('r1');
    expect(e.add(parseFaultRule({ id: 'r2', action: { kind: 'drop' } })).id).toBe('r2');
    expect(e.add(parseFaultRule({ action: { kind: 'drop' } })).id).toBe('r3');
    expect(() => e.add(parseFaultRule({ id: 'r1', action: { kind: 'drop' } }))).toThrow(/already exists/);
    expect(e.armed).toBe(true);
    expect(e.remove('r2')).toBe(true);
    expect(e.remove('r2')).toBe(false);
    expect(e.clear()).toBe(2);
    expect(e.armed).toBe(false);
  });
});

describe('rule validation', () => {
  it.each(FAULT_ACTIONS_NOT_IMPLEMENTED)('%s is refused as not yet implemented, naming the action', (kind) => {
    expect(() => parseFaultRule({ action: { kind } })).toThrow(`action.kind: action "${kind}" is not yet implemented`);
  });

  it.each([
    [{ match: { event: 'icreq', qid: 0 }, action: { kind: 'close' } }, 'match.qid'],
    [{ match: { event: 'icreq' }, action: { kind: 'drop' } }, 'action.kind'],
    [{ match: { pduType: 5 }, action: { kind: 'drop' } }, 'match.pduType'],
    [{ schedule: { seed: 1 }, action: { kind: 'drop' } }, 'schedule.seed'],
    [{ action: { kind: 'delay' } }, 'action.us'],
    [{ action: { kind: 'status', status: 'NOT_A_STATUS' } }, 'action.status'],
    [{ action: { kind: 'icresp', maxh2cdata: 4095 }, match: { event: 'icreq' } }, 'action.maxh2cdata'],
    [{ action: { kind: 'grant-queues', count: 0 } }, 'action.count'],
    [{ action: { kind: 'ana', group: 129, state: 'optimized' } }, 'action.group'],
  ])('%j: refused at %s', (rule, path) => {
    expect(() => parseFaultRule(rule)).toThrow(expect.objectContaining({ path }));
  });

  it('accepts the edges a host or user controls', () => {
    expect(() => parseFaultRule({ match: { nsid: 0xffffffff, lba: { start: 2 ** 53 - 1, count: 1 }, cntlid: 0xffff, qid: 65535 }, action: { kind: 'drop' } })).not.toThrow();
    expect(() => parseFaultRule({ schedule: { probability: 0, seed: 0xffffffff, nth: 2 ** 31 - 1 }, action: { kind: 'status', status: 0x7ff, crd: 3, dnr: true, more: true } })).not.toThrow();
  });
});
