// Keep Alive (NVMe Base 2.0 §5.18 Keep Alive command, §5.27 Set Features KATO; NVMe-oF 1.1 §3.3 KATO in Connect): with no command
// and no Keep Alive within KATO the controller is torn down and all its queues closed; any command counts
// (traffic-based keep alive, CTRATT.TBKAS); KATO 0 disables the timer. The timer is the nvmet model: armed for KATO,
// and at each expiry it is re-armed if anything arrived in the window, else the controller goes.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Buffer } from 'node:buffer';
import { AdminOpcode, DNR, FeatureId, NvmOpcode, Status, decodeIdentifyController, encodeSqe } from '../../protocol/index.js';
import { WELL_KNOWN_DISCOVERY_NQN } from './index.js';
import { HostQueue, makeTarget } from './testing/fake-transport.js';

const KATO = 5000;

beforeEach(() => {
  vi.useFakeTimers();
});

afterEach(() => {
  vi.useRealTimers();
});

/**
 * Admin Connect + CC.EN, then one full KATO so the window the CC write fell in has passed: on return the timer was
 * just re-armed with nothing seen, so the controller goes exactly KATO later unless something arrives.
 */
function connected(kato: number, opts: { subnqn?: string } = {}) {
  const t = makeTarget();
  const admin = new HostQueue(t.target, t.port);
  const cntlid = admin.connectAndEnable({ kato, ...opts });
  const subsys = opts.subnqn === WELL_KNOWN_DISCOVERY_NQN ? t.target.discovery : t.subsys;
  const ctrl = subsys.controllers.get(cntlid);
  if (ctrl === undefined) throw new Error('no controller after Connect');
  vi.advanceTimersByTime(ctrl.katoMs);
  expect(subsys.controllers.has(cntlid)).toBe(true);
  const io = (qid: number): HostQueue => {
    const q = new HostQueue(t.target, t.port);
    expect(q.connect({ qid, cntlid }).status).toBe(0);
    return q;
  };
  return { ...t, admin, cntlid, ctrl, io, alive: (): boolean => subsys.controllers.has(cntlid) };
}

describe('KATO expiry', () => {
  it('no traffic for KATO: controller torn down, every queue closed, expiry counted', () => {
    const { target, admin, io, alive, ctrl } = connected(KATO);
    const q1 = io(1);
    const q2 = io(2);
    vi.advanceTimersByTime(KATO - 1);
    expect(alive()).toBe(true);
    expect(admin.transport.closes).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(alive()).toBe(false);
    expect(ctrl.state).toBe('dead');
    for (const q of [admin, q1, q2]) {
      expect(q.transport.closes).toEqual(['keep-alive timeout']);
      expect(q.core.state).toBe('closed');
    }
    expect(ctrl.queues.size).toBe(0);
    expect(target.stats.katoExpiries).toBe(1);
  });

  it('a Keep Alive inside the window re-arms the timer for another KATO', () => {
    const { admin, alive, target } = connected(KATO);
    vi.advanceTimersByTime(KATO - 1000);
    const ka = admin.keepAlive();
    expect(ka.status).toBe(0);
    vi.advanceTimersByTime(1000);
    expect(alive()).toBe(true);
    vi.advanceTimersByTime(KATO - 1);
    expect(alive()).toBe(true);
    vi.advanceTimersByTime(1);
    expect(alive()).toBe(false);
    expect(target.stats.katoExpiries).toBe(1);
  });

  it('regular Keep Alives keep the controller forever', () => {
    const { admin, alive } = connected(KATO);
    for (let i = 0; i < 20; i++) {
      vi.advanceTimersByTime(KATO / 2);
      expect(admin.keepAlive().status).toBe(0);
    }
    expect(alive()).toBe(true);
    expect(admin.transport.closes).toEqual([]);
  });

  it('any admin command counts as keep-alive traffic (TBKAS)', () => {
    const { admin, alive } = connected(KATO);
    for (let i = 0; i < 6; i++) {
      vi.advanceTimersByTime(KATO - 1);
      expect(admin.identify(0x01).status).toBe(0);
    }
    expect(alive()).toBe(true);
  });

  it('I/O queue traffic alone keeps the controller alive', () => {
    const { io, alive, admin } = connected(KATO);
    const q = io(1);
    for (let i = 0; i < 6; i++) {
      vi.advanceTimersByTime(KATO - 1);
      // A Flush to an inactive namespace fails, but it is still traffic.
      expect(q.exec(flush(q.cid())).status).toBe(Status.INVALID_NS | DNR);
    }
    expect(alive()).toBe(true);
    expect(admin.transport.closes).toEqual([]);
    vi.advanceTimersByTime(2 * KATO);
    expect(alive()).toBe(false);
    expect(q.transport.closes).toEqual(['keep-alive timeout']);
  });

  it('Identify Controller advertises TBKAS and a 100 ms keep-alive granularity', () => {
    const { admin } = connected(KATO);
    const id = decodeIdentifyController(admin.identify(0x01).data ?? Buffer.alloc(0));
    expect(id.ctratt & 0x40).toBe(0x40);
    expect(id.kas).toBe(10);
  });

  it('the Keep Alive completion records when it arrived', () => {
    const { admin, ctrl } = connected(KATO);
    vi.setSystemTime(new Date('2030-01-02T03:04:05Z'));
    expect(admin.keepAlive().status).toBe(0);
    expect(ctrl.lastKeepAliveAt).toBe(Date.parse('2030-01-02T03:04:05Z'));
    // The Keep Alive is also the last command, whichever clock recorded the command's arrival.
    expect(ctrl.lastCommandAt).toBeGreaterThanOrEqual(ctrl.lastKeepAliveAt);
  });

  it('KATO is kept in whole seconds, rounded up', () => {
    const { ctrl, alive } = connected(1500);
    expect(ctrl.katoMs).toBe(2000);
    vi.advanceTimersByTime(1999);
    expect(alive()).toBe(true);
    vi.advanceTimersByTime(1);
    expect(alive()).toBe(false);
  });

  it('Get Features KATO reports the rounded value', () => {
    const { admin } = connected(1500);
    const c = admin.getFeatures(FeatureId.KATO);
    expect(c.status).toBe(0);
    expect(c.dw0).toBe(2000);
  });

  it('an I/O queue Connect is not keep-alive traffic (the queue has no controller until it completes)', () => {
    const { io, alive } = connected(KATO);
    vi.advanceTimersByTime(KATO - 1);
    io(1);
    vi.advanceTimersByTime(1);
    expect(alive()).toBe(false);
  });

  it('a torn-down controller ignores later traffic and is not torn down twice', () => {
    const { admin, alive, target } = connected(KATO);
    vi.advanceTimersByTime(KATO);
    expect(alive()).toBe(false);
    const before = admin.completions.length;
    admin.submit(encodeSqe({ opcode: AdminOpcode.KEEP_ALIVE, cid: admin.cid() }));
    vi.advanceTimersByTime(10 * KATO);
    expect(target.stats.katoExpiries).toBe(1);
    expect(admin.completions.length).toBe(before);
    expect(admin.transport.closes).toEqual(['keep-alive timeout']);
  });

  it('the admin queue closing stops the timer (no expiry counted afterwards)', () => {
    const { admin, alive, target } = connected(KATO);
    admin.transport.hostClose();
    expect(alive()).toBe(false);
    vi.advanceTimersByTime(10 * KATO);
    expect(target.stats.katoExpiries).toBe(0);
  });
});

describe('KATO 0 and Set Features KATO', () => {
  it('KATO 0 disables the timer; Keep Alive then fails with Keep Alive Timeout Invalid', () => {
    const { admin, alive, target } = connected(0);
    vi.advanceTimersByTime(24 * 3600 * 1000);
    expect(alive()).toBe(true);
    expect(target.stats.katoExpiries).toBe(0);
    const ka = admin.keepAlive();
    expect(ka.status).toBe(Status.KA_TIMEOUT_INVALID);
    expect(ka.status & DNR).toBe(0);
    expect(admin.getFeatures(FeatureId.KATO).dw0).toBe(0);
  });

  it('Set Features KATO starts a timer on a controller connected with KATO 0', () => {
    const { admin, alive } = connected(0);
    vi.advanceTimersByTime(60_000);
    expect(admin.setKato(3000).status).toBe(0);
    vi.advanceTimersByTime(2999);
    expect(alive()).toBe(true);
    vi.advanceTimersByTime(1);
    expect(alive()).toBe(false);
    expect(admin.transport.closes).toEqual(['keep-alive timeout']);
  });

  it('Set Features KATO 0 stops a running timer', () => {
    const { admin, alive } = connected(KATO);
    vi.advanceTimersByTime(KATO - 1);
    expect(admin.setKato(0).status).toBe(0);
    vi.advanceTimersByTime(24 * 3600 * 1000);
    expect(alive()).toBe(true);
  });

  it('Set Features KATO restarts the window with the new value', () => {
    const { admin, alive } = connected(KATO);
    vi.advanceTimersByTime(KATO - 1);
    expect(admin.setKato(10_000).status).toBe(0);
    vi.advanceTimersByTime(9_999);
    expect(alive()).toBe(true);
    vi.advanceTimersByTime(1);
    expect(alive()).toBe(false);
  });

  it('a discovery controller connected with KATO 0 gets 120 s', () => {
    const { alive, admin } = connected(0, { subnqn: WELL_KNOWN_DISCOVERY_NQN });
    vi.advanceTimersByTime(119_999);
    expect(alive()).toBe(true);
    vi.advanceTimersByTime(1);
    expect(alive()).toBe(false);
    expect(admin.transport.closes).toEqual(['keep-alive timeout']);
  });
});

/**
 * KATO is a 32-bit ms count (NVMe-oF 1.1 §3.3 Connect CDW12, NVMe Base 2.0 §5.27.1.12): every value runs its full
 * length, past setTimeout's 2^31−1 ms (which the fake clock, like Node, clamps to 1 ms). Rounded up to whole seconds
 * as nvmet stores it, except where the next second does not fit the 32 bits Get Features reports.
 */
describe('KATO past 2^31−1 ms', () => {
  const cases: Array<[number, number]> = [
    [2 ** 31 - 1, 2_147_484_000],
    [2 ** 31, 2_147_484_000],
    [3_448_883_000, 3_448_883_000],
    [4_294_967_000, 4_294_967_000],
    [2 ** 32 - 1, 2 ** 32 - 1],
  ];

  it.each(cases)('Connect KATO %d ms: the controller lives %d ms without traffic, then goes', (kato, kept) => {
    const { admin, alive, target } = connected(kato);
    expect(admin.getFeatures(FeatureId.KATO).dw0).toBe(kept);
    // Get Features was traffic: the window it fell in ends at `kept`, the next one at 2 × kept.
    vi.advanceTimersByTime(2 * kept - 1);
    expect(alive()).toBe(true);
    expect(target.stats.katoExpiries).toBe(0);
    vi.advanceTimersByTime(1);
    expect(alive()).toBe(false);
    expect(target.stats.katoExpiries).toBe(1);
  });

  it.each(cases)('Set Features KATO %d ms: the controller lives %d ms without traffic, then goes', (kato, kept) => {
    const { admin, alive, target } = connected(KATO);
    expect(admin.setKato(kato).status).toBe(0);
    expect(admin.getFeatures(FeatureId.KATO).dw0).toBe(kept);
    // Get Features was traffic: the window it fell in ends at `kept` after Set Features, the next one at 2 × kept.
    vi.advanceTimersByTime(2 * kept - 1);
    expect(alive()).toBe(true);
    vi.advanceTimersByTime(1);
    expect(alive()).toBe(false);
    expect(target.stats.katoExpiries).toBe(1);
  });

  it('a Keep Alive every minute keeps a 3,448,883,000 ms controller for days of traffic', () => {
    const { admin, alive, target } = connected(KATO);
    expect(admin.setKato(3_448_883_000).status).toBe(0);
    for (let i = 0; i < 60 * 24 * 3; i++) {
      vi.advanceTimersByTime(60_000);
      expect(admin.keepAlive().status).toBe(0);
    }
    expect(alive()).toBe(true);
    expect(target.stats.katoExpiries).toBe(0);
  });
});

/** NVM Flush of NSID 1 (no data). */
function flush(cid: number): Buffer {
  return encodeSqe({ opcode: NvmOpcode.FLUSH, cid, nsid: 1 });
}
