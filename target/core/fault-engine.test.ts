// FaultEngine without sockets: schedules (Nth, every Kth, seeded probability, window, times) and the registry.
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FAULT_WIRE_ACTIONS, parseFaultRule, type FaultRuleInput } from '../config/fault-rules.js';
import { FaultEngine, type FaultCommand, type FaultQueue } from './fault-engine.js';

afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});

const Q: FaultQueue = { qid: 1, port: { id: 1 }, ops: { dataDigest: false }, ctrl: { hostnqn: 'h', cntlid: 1, subsys: { nqn: 's' } } };
function cmd(opcode = 0, dir = 'none', dataLen = 0): FaultCommand {
  return { opcode, sqe: Buffer.alloc(64), nsid: 1, inCapsule: undefined, dir, dataLen, fault: undefined };
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

describe('PDU-shaping rules match only where they can act', () => {
  const marks = (action: FaultRuleInput['action'], q: FaultQueue, c: FaultCommand): boolean => {
    const e = new FaultEngine();
    e.add(parseFaultRule({ action }));
    e.onCommand(q, c, (r, _q, req) => ((req.fault = { action: r.rule.action as never, draw: 0 }), false));
    return c.fault !== undefined;
  };
  const withDigests: FaultQueue = { ...Q, ops: { dataDigest: true, headerDigest: true } };

  it('C2HData actions: reads with data only', () => {
    for (const kind of ['c2h-reorder', 'c2h-duplicate', 'c2h-overrun', 'c2h-split', 'success-flag'] as const) {
      expect(marks({ kind }, Q, cmd(2, 'c2h', 4096))).toBe(true);
      expect(marks({ kind }, Q, cmd(1, 'h2c', 4096))).toBe(false);
      expect(marks({ kind }, Q, cmd(0, 'none', 0))).toBe(false);
    }
  });

  it('R2T actions: writes by R2T only (not in-capsule data)', () => {
    for (const kind of ['r2t-past-maxr2t', 'r2t-past-transfer'] as const) {
      expect(marks({ kind }, Q, cmd(1, 'h2c', 4096))).toBe(true);
      expect(marks({ kind }, Q, { ...cmd(1, 'h2c', 512), inCapsule: [Buffer.alloc(512)] })).toBe(false);
      expect(marks({ kind }, Q, cmd(2, 'c2h', 4096))).toBe(false);
    }
  });

  it('digest errors: only on connections that negotiated that digest', () => {
    expect(marks({ kind: 'header-digest-error' }, Q, cmd())).toBe(false);
    expect(marks({ kind: 'header-digest-error' }, withDigests, cmd())).toBe(true);
    expect(marks({ kind: 'data-digest-error' }, Q, cmd(2, 'c2h', 512))).toBe(false);
    expect(marks({ kind: 'data-digest-error' }, withDigests, cmd(2, 'c2h', 512))).toBe(true);
    expect(marks({ kind: 'data-digest-error' }, withDigests, cmd(0, 'none', 0))).toBe(false);
  });

  it('event "pdu" counts capsules and H2CData; other rules count capsules only', () => {
    const e = new FaultEngine();
    e.add(parseFaultRule({ id: 'pdu', match: { event: 'pdu' }, action: { kind: 'close' } }));
    e.add(parseFaultRule({ id: 'h2c', match: { event: 'pdu', pduType: 6 }, action: { kind: 'close' } }));
    e.add(parseFaultRule({ id: 'cmd', action: { kind: 'close' } }));
    const seen: string[] = [];
    const fire = (r: { id: string }): boolean => (seen.push(r.id), false);
    e.onCommand(Q, cmd(), fire);
    e.onCommand(Q, cmd(), fire, 6);
    expect(seen).toEqual(['pdu', 'cmd', 'pdu', 'h2c']);
  });
});

describe('rule validation', () => {
  it.each(FAULT_WIRE_ACTIONS.filter((k) => k !== 'c2h-term-req'))('%s is accepted with no fields', (kind) => {
    expect(parseFaultRule({ action: { kind } }).action.kind).toBe(kind);
  });

  it.each([
    [{ kind: 'c2h-split', size: 0 }, 'action.size'],
    [{ kind: 'c2h-split', size: 2 ** 31 }, 'action.size'],
    [{ kind: 'c2h-reorder', size: -1 }, 'action.size'],
    [{ kind: 'c2h-overrun', bytes: 0 }, 'action.bytes'],
    [{ kind: 'c2h-term-req' }, 'action.fes'],
    [{ kind: 'c2h-term-req', fes: 256 }, 'action.fes'],
    [{ kind: 'c2h-term-req', fes: 1, fei: 2 ** 32 }, 'action.fei'],
    [{ kind: 'r2t-past-maxr2t', count: 1 }, 'action.count'],
    [{ kind: 'r2t-past-transfer', bytes: 2 ** 32 }, 'action.bytes'],
    [{ kind: 'stall', ms: 2 ** 31 }, 'action.ms'],
    [{ kind: 'drip', bytes: 0 }, 'action.bytes'],
    [{ kind: 'drip', intervalMs: 60_001 }, 'action.intervalMs'],
  ])('wire action %j is refused naming %s', (action, path) => {
    expect(() => parseFaultRule({ action })).toThrow(`${path}:`);
  });

  it('wire actions at their edges are accepted', () => {
    for (const action of [
      { kind: 'c2h-split', size: 1 },
      { kind: 'c2h-split', size: 2 ** 31 - 1 },
      { kind: 'c2h-term-req', fes: 0, fei: 0 },
      { kind: 'c2h-term-req', fes: 255, fei: 2 ** 32 - 1 },
      { kind: 'r2t-past-maxr2t', count: 64 },
      { kind: 'stall', afterBytes: 0, ms: 0 },
      { kind: 'drip', bytes: 65536, intervalMs: 0 },
    ]) expect(parseFaultRule({ action }).action).toEqual(action);
  });

  it('event "pdu": close only, H2CData (6) only with it, no command fields', () => {
    expect(parseFaultRule({ match: { event: 'pdu', pduType: 6, qid: 1 }, action: { kind: 'close' } }).match?.pduType).toBe(6);
    expect(() => parseFaultRule({ match: { pduType: 6 }, action: { kind: 'close' } })).toThrow('match.pduType:');
    expect(() => parseFaultRule({ match: { event: 'pdu' }, action: { kind: 'drop' } })).toThrow('action.kind:');
    expect(() => parseFaultRule({ match: { event: 'pdu', opcode: 1 }, action: { kind: 'close' } })).toThrow('match.opcode:');
  });

  it.each([
    [{ match: { event: 'icreq', qid: 0 }, action: { kind: 'close' } }, 'match.qid'],
    [{ match: { event: 'icreq' }, action: { kind: 'drop' } }, 'action.kind'],
    [{ match: { pduType: 5 }, action: { kind: 'drop' } }, 'match.pduType'],
    [{ match: { pduType: 7 }, action: { kind: 'drop' } }, 'match.pduType'],
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
