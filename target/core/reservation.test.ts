import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { Cptpl, DNR, NvmOpcode, ResvNotifType, Status } from '../../protocol/index.js';
import { ReservationState, ResvLogQueue, RESV_LOG_QUEUE_DEPTH, type ResvEvents } from './reservation.js';

const CONFLICT = Status.RESERVATION_CONFLICT | DNR;
const INVALID = Status.INVALID_FIELD | DNR;

/**
 * NVMe Base 2.0 §8.19, "Command Behavior in the Presence of a Reservation", copied row by row from the spec's table
 * (not from reservation.ts): reservation type, then Read group and Write group outcomes for the reservation holder,
 * a registrant (not holder), a non-registrant.
 */
const SPEC_TABLE = `
  type  read:H R N   write:H R N
  1     A A A        A C C
  2     A C C        A C C
  3     A A A        A A C
  4     A A C        A A C
  5     A A A        A A C
  6     A A C        A A C
`;
const READ_GROUP = [NvmOpcode.READ, NvmOpcode.COMPARE, NvmOpcode.VERIFY];
const WRITE_GROUP = [NvmOpcode.WRITE, NvmOpcode.WRITE_ZEROES, NvmOpcode.DSM, NvmOpcode.FLUSH, NvmOpcode.WRITE_UNCOR, NvmOpcode.COPY];

interface Note {
  host: string;
  type: number;
}

function setup(): { rs: ReservationState; notes: Note[]; changes: number[] } {
  const notes: Note[] = [];
  const changes: number[] = [];
  const ev: ResvEvents = {
    notify: (host, type) => notes.push({ host, type }),
    changed: () => changes.push(1),
  };
  return { rs: new ReservationState(1, ev), notes, changes };
}

const id = (k: string): Buffer => Buffer.from(k.padEnd(32, '0'), 'hex');
function reg(rs: ReservationState, host: string, key: bigint): number {
  return rs.register(host, id(host), { rrega: 0, iekey: false, cptpl: 0, crkey: 0n, nrkey: key });
}
function acq(rs: ReservationState, host: string, rtype: number, crkey: bigint, racqa = 0, prkey = 0n): number {
  return rs.acquire(host, { racqa, iekey: false, rtype, crkey, prkey });
}
function rel(rs: ReservationState, host: string, rtype: number, crkey: bigint, rrela = 0): number {
  return rs.release(host, { rrela, iekey: false, rtype, crkey });
}

describe('access per reservation type (table-driven from the spec)', () => {
  const rows = SPEC_TABLE.trim().split('\n').slice(1).map((l) => l.trim().split(/\s+/));
  for (const [t, rh, rr, rn, wh, wr, wn] of rows as string[][]) {
    it(`type ${t}`, () => {
      const { rs } = setup();
      // hosts: h holds (acquired), r is registered, n is not
      expect(reg(rs, 'aa', 1n)).toBe(0);
      expect(reg(rs, 'bb', 2n)).toBe(0);
      expect(acq(rs, 'aa', Number(t), 1n)).toBe(0);
      const want = (c: string | undefined): number => (c === 'C' ? CONFLICT : 0);
      for (const op of READ_GROUP) {
        expect(rs.checkAccess('aa', op), `read H op ${op}`).toBe(want(rh));
        expect(rs.checkAccess('bb', op), `read R op ${op}`).toBe(want(rr));
        expect(rs.checkAccess('cc', op), `read N op ${op}`).toBe(want(rn));
      }
      for (const op of WRITE_GROUP) {
        expect(rs.checkAccess('aa', op), `write H op ${op}`).toBe(want(wh));
        expect(rs.checkAccess('bb', op), `write R op ${op}`).toBe(want(wr));
        expect(rs.checkAccess('cc', op), `write N op ${op}`).toBe(want(wn));
      }
      // reservation commands are never refused by the table
      for (const op of [NvmOpcode.RESV_REGISTER, NvmOpcode.RESV_REPORT, NvmOpcode.RESV_ACQUIRE, NvmOpcode.RESV_RELEASE]) expect(rs.checkAccess('cc', op)).toBe(0);
    });
  }
  it('no reservation: everyone may do everything', () => {
    const { rs } = setup();
    reg(rs, 'aa', 1n);
    for (const op of [...READ_GROUP, ...WRITE_GROUP]) expect(rs.checkAccess('cc', op)).toBe(0);
  });
});

describe('Register', () => {
  it('register, same key again is a no-op, another key conflicts; unregister/replace need the current key unless IEKEY', () => {
    const { rs, changes } = setup();
    expect(reg(rs, 'aa', 5n)).toBe(0);
    expect(reg(rs, 'aa', 5n)).toBe(0);
    expect(reg(rs, 'aa', 6n)).toBe(CONFLICT);
    expect(rs.gen).toBe(2);
    expect(rs.register('aa', id('aa'), { rrega: 2, iekey: false, cptpl: 0, crkey: 9n, nrkey: 7n })).toBe(CONFLICT);
    expect(rs.register('aa', id('aa'), { rrega: 2, iekey: true, cptpl: 0, crkey: 9n, nrkey: 7n })).toBe(0);
    expect(rs.registrants.get('aa')?.rkey).toBe(7n);
    expect(rs.register('aa', id('aa'), { rrega: 1, iekey: false, cptpl: 0, crkey: 5n, nrkey: 0n })).toBe(CONFLICT);
    expect(rs.register('aa', id('aa'), { rrega: 1, iekey: false, cptpl: 0, crkey: 7n, nrkey: 0n })).toBe(0);
    expect(rs.registrants.size).toBe(0);
    expect(rs.register('bb', id('bb'), { rrega: 2, iekey: true, cptpl: 0, crkey: 0n, nrkey: 1n })).toBe(CONFLICT);
    expect(rs.register('bb', id('bb'), { rrega: 3, iekey: false, cptpl: 0, crkey: 0n, nrkey: 1n })).toBe(INVALID);
    expect(changes.length).toBe(rs.gen);
  });
  it('CPTPL sets and clears PTPL; 01b is reserved', () => {
    const { rs } = setup();
    expect(rs.register('aa', id('aa'), { rrega: 0, iekey: false, cptpl: Cptpl.RESERVED, crkey: 0n, nrkey: 1n })).toBe(INVALID);
    expect(rs.register('aa', id('aa'), { rrega: 0, iekey: false, cptpl: Cptpl.SET, crkey: 0n, nrkey: 1n })).toBe(0);
    expect(rs.ptpl).toBe(true);
    expect(rs.register('aa', id('aa'), { rrega: 0, iekey: false, cptpl: Cptpl.CLEAR, crkey: 0n, nrkey: 1n })).toBe(0);
    expect(rs.ptpl).toBe(false);
  });
  it('the holder unregistering from a Registrants Only reservation releases it and tells the others', () => {
    const { rs, notes } = setup();
    reg(rs, 'aa', 1n);
    reg(rs, 'bb', 2n);
    acq(rs, 'aa', 3, 1n);
    rs.register('aa', id('aa'), { rrega: 1, iekey: false, cptpl: 0, crkey: 1n, nrkey: 0n });
    expect(rs.rtype).toBe(0);
    expect(notes).toEqual([{ host: 'bb', type: ResvNotifType.RESERVATION_RELEASED }]);
  });
  it('All Registrants: the reservation lasts until the last registrant goes', () => {
    const { rs } = setup();
    reg(rs, 'aa', 1n);
    reg(rs, 'bb', 2n);
    acq(rs, 'aa', 6, 1n);
    expect(rs.role('bb')).toBe('holder');
    rs.register('aa', id('aa'), { rrega: 1, iekey: true, cptpl: 0, crkey: 0n, nrkey: 0n });
    expect(rs.rtype).toBe(6);
    rs.register('bb', id('bb'), { rrega: 1, iekey: true, cptpl: 0, crkey: 0n, nrkey: 0n });
    expect(rs.rtype).toBe(0);
  });
});

describe('Acquire', () => {
  it('needs a registration with the right key; a second acquire by the holder of the same type succeeds', () => {
    const { rs } = setup();
    expect(acq(rs, 'aa', 1, 1n)).toBe(CONFLICT);
    reg(rs, 'aa', 1n);
    reg(rs, 'bb', 2n);
    expect(acq(rs, 'aa', 1, 9n)).toBe(CONFLICT);
    expect(acq(rs, 'aa', 0, 1n)).toBe(INVALID);
    expect(acq(rs, 'aa', 7, 1n)).toBe(INVALID);
    expect(acq(rs, 'aa', 1, 1n, 3)).toBe(INVALID);
    expect(rs.acquire('aa', { racqa: 0, iekey: true, rtype: 1, crkey: 1n, prkey: 0n })).toBe(INVALID);
    expect(acq(rs, 'aa', 1, 1n)).toBe(0);
    expect(acq(rs, 'aa', 1, 1n)).toBe(0);
    expect(acq(rs, 'aa', 2, 1n)).toBe(CONFLICT);
    expect(acq(rs, 'bb', 1, 2n)).toBe(CONFLICT);
    expect(rs.gen).toBe(2);
  });
  it('preempt with the holder key moves the reservation and removes the preempted registration', () => {
    const { rs, notes } = setup();
    reg(rs, 'aa', 1n);
    reg(rs, 'bb', 2n);
    reg(rs, 'cc', 3n);
    acq(rs, 'aa', 1, 1n);
    expect(acq(rs, 'bb', 2, 2n, 1, 1n)).toBe(0);
    expect(rs.holder).toBe('bb');
    expect(rs.rtype).toBe(2);
    expect([...rs.registrants.keys()]).toEqual(['bb', 'cc']);
    expect(notes).toEqual([
      { host: 'aa', type: ResvNotifType.REGISTRATION_PREEMPTED },
      { host: 'cc', type: ResvNotifType.RESERVATION_RELEASED },
    ]);
  });
  it('preempt of a non-holder key removes only that registration; PRKEY 0 is invalid; an unknown key conflicts', () => {
    const { rs } = setup();
    reg(rs, 'aa', 1n);
    reg(rs, 'bb', 2n);
    reg(rs, 'cc', 3n);
    acq(rs, 'aa', 1, 1n);
    expect(acq(rs, 'bb', 1, 2n, 1, 0n)).toBe(INVALID);
    expect(acq(rs, 'bb', 1, 2n, 1, 99n)).toBe(CONFLICT);
    expect(acq(rs, 'bb', 1, 2n, 1, 3n)).toBe(0);
    expect(rs.holder).toBe('aa');
    expect([...rs.registrants.keys()]).toEqual(['aa', 'bb']);
  });
  it('All Registrants with PRKEY 0: everyone else goes and the issuer holds the new type', () => {
    const { rs, notes } = setup();
    reg(rs, 'aa', 1n);
    reg(rs, 'bb', 2n);
    reg(rs, 'cc', 3n);
    acq(rs, 'aa', 5, 1n);
    expect(acq(rs, 'bb', 1, 2n, 1, 0n)).toBe(0);
    expect(rs.rtype).toBe(1);
    expect(rs.holder).toBe('bb');
    expect(notes.map((n) => n.host)).toEqual(['aa', 'cc']);
  });
  it('preempt-and-abort marks the preempted host so its outstanding commands are aborted', () => {
    const { rs } = setup();
    reg(rs, 'aa', 1n);
    reg(rs, 'bb', 2n);
    acq(rs, 'aa', 2, 1n);
    const before = rs.abortGen;
    expect(acq(rs, 'bb', 2, 2n, 2, 1n)).toBe(0);
    expect(rs.aborted('aa', before)).toBe(true);
    expect(rs.aborted('aa', rs.abortGen)).toBe(false);
    expect(rs.aborted('bb', before)).toBe(false);
  });
});

describe('Release', () => {
  it('release by the holder (type must match), by a non-holder (no effect), clear (everyone preempted)', () => {
    const { rs, notes } = setup();
    reg(rs, 'aa', 1n);
    reg(rs, 'bb', 2n);
    acq(rs, 'aa', 4, 1n);
    expect(rel(rs, 'cc', 4, 0n)).toBe(CONFLICT);
    expect(rel(rs, 'bb', 4, 9n)).toBe(CONFLICT);
    expect(rel(rs, 'bb', 4, 2n)).toBe(0);
    expect(rs.rtype).toBe(4);
    expect(rel(rs, 'aa', 3, 1n)).toBe(INVALID);
    expect(rel(rs, 'aa', 4, 1n, 2)).toBe(INVALID);
    expect(rs.release('aa', { rrela: 0, iekey: true, rtype: 4, crkey: 1n })).toBe(INVALID);
    expect(rel(rs, 'aa', 4, 1n)).toBe(0);
    expect(rs.rtype).toBe(0);
    expect(notes).toEqual([{ host: 'bb', type: ResvNotifType.RESERVATION_RELEASED }]);
    acq(rs, 'aa', 1, 1n);
    const gen = rs.gen;
    expect(rel(rs, 'bb', 0, 2n, 1)).toBe(0);
    expect(rs.rtype).toBe(0);
    expect(rs.registrants.size).toBe(0);
    expect(rs.gen).toBe(gen + 1);
    expect(notes[1]).toEqual({ host: 'aa', type: ResvNotifType.RESERVATION_PREEMPTED });
  });
  it('release of Write Exclusive / Exclusive Access sends no notice', () => {
    const { rs, notes } = setup();
    reg(rs, 'aa', 1n);
    reg(rs, 'bb', 2n);
    acq(rs, 'aa', 1, 1n);
    rel(rs, 'aa', 1, 1n);
    expect(notes).toEqual([]);
  });
});

describe('report and persistence', () => {
  it('status lists registrants with holder flags; snapshot/restore round-trips (host key = hex of the host identifier)', () => {
    const { rs } = setup();
    const a = id('aa').toString('hex');
    const b = id('bb').toString('hex');
    reg(rs, a, 1n);
    reg(rs, b, 0xffff_ffff_ffff_ffffn);
    acq(rs, b, 2, 0xffff_ffff_ffff_ffffn);
    rs.setPtpl(true);
    const st = rs.status();
    expect(st).toMatchObject({ gen: 2, rtype: 2, ptpls: true });
    expect(st.regctls.map((r) => [r.cntlid, r.holder, r.rkey])).toEqual([
      [0xffff, false, 1n],
      [0xffff, true, 0xffff_ffff_ffff_ffffn],
    ]);
    const copy = setup().rs;
    copy.restore(JSON.parse(JSON.stringify(rs.snapshot())) as ReturnType<ReservationState['snapshot']>);
    expect(copy.status()).toEqual(st);
    expect(copy.checkAccess(a, NvmOpcode.READ)).toBe(CONFLICT);
    expect(copy.checkAccess(b, NvmOpcode.WRITE)).toBe(0);
    expect(() => copy.restore({ ...rs.snapshot(), rtype: 9 })).toThrow(/rtype/);
  });
});

describe('ResvLogQueue', () => {
  it('counts from 1, reports the entries left, empties to the empty page', () => {
    const q = new ResvLogQueue();
    expect(q.take()).toEqual({ count: 0n, type: 0, nalp: 0, nsid: 0 });
    q.push(ResvNotifType.REGISTRATION_PREEMPTED, 3);
    q.push(ResvNotifType.RESERVATION_RELEASED, 4);
    expect(q.take()).toEqual({ count: 1n, type: 1, nalp: 1, nsid: 3 });
    expect(q.take()).toEqual({ count: 2n, type: 2, nalp: 0, nsid: 4 });
  });
  it('a full queue loses the new entry and gives its count to the last queued one', () => {
    const q = new ResvLogQueue();
    for (let i = 0; i < RESV_LOG_QUEUE_DEPTH + 3; i++) q.push(ResvNotifType.RESERVATION_PREEMPTED, 1);
    expect(q.length).toBe(RESV_LOG_QUEUE_DEPTH);
    let last = q.take();
    while (q.length > 0) last = q.take();
    expect(last.count).toBe(BigInt(RESV_LOG_QUEUE_DEPTH + 3));
  });
});
