import { describe, expect, it } from 'vitest';
import { anaStateOn, planOwnership, releaseGroup, type GroupOwnership, type LiveMember } from './ownership.js';

const m = (id: string, joinSeq: number, joinedAt = 0): LiveMember => ({ id, joinSeq, joinedAt });
const g = (grpid: number, preferred: string | undefined, owner: string | null): GroupOwnership => ({
  grpid,
  ...(preferred !== undefined ? { preferred } : {}),
  owner,
  since: 0,
});

describe('planOwnership', () => {
  it('gives each group to its preferred gateway at start', () => {
    const p = planOwnership({
      members: [m('a', 1), m('b', 2), m('c', 3)],
      groups: [g(1, 'a', null), g(2, 'b', null), g(3, 'c', null)],
      failbackDelayMs: 5000,
      now: 10,
    });
    expect(p.groups.map((x) => x.owner)).toEqual(['a', 'b', 'c']);
    expect(p.transitions.map((t) => [t.grpid, t.from, t.to, t.cause])).toEqual([
      [1, null, 'a', 'initial'],
      [2, null, 'b', 'initial'],
      [3, null, 'c', 'initial'],
    ]);
  });

  it("spreads a dead gateway's groups over survivors, deterministically", () => {
    const groups = [g(1, 'a', 'a'), g(2, 'a', 'a'), g(3, 'a', 'a'), g(4, 'a', 'a'), g(5, 'b', 'b'), g(6, 'c', 'c')];
    const input = { members: [m('c', 3), m('b', 2)], groups, failbackDelayMs: 0, now: 100 };
    const p = planOwnership(input);
    const owners = p.groups.map((x) => x.owner);
    expect(owners).toEqual(['b', 'c', 'b', 'c', 'b', 'c']);
    expect(p.transitions.every((t) => t.from === 'a' && t.cause === 'failover')).toBe(true);
    expect(planOwnership(input)).toEqual(p);
  });

  it('fails back only after the delay, through a handoff the owner releases', () => {
    const groups = [g(1, 'a', 'b'), g(2, 'b', 'b')];
    const members = [m('b', 2), m('a', 4, 1000)];
    const early = planOwnership({ members, groups, failbackDelayMs: 500, now: 1200 });
    expect(early.groups[0]).toMatchObject({ owner: 'b' });
    expect(early.groups[0]?.next).toBeUndefined();
    expect(early.nextCheckAt).toBe(1500);
    const due = planOwnership({ members, groups, failbackDelayMs: 500, now: 1500 });
    expect(due.handoffs).toEqual([{ grpid: 1, from: 'b', to: 'a' }]);
    expect(due.groups[0]).toMatchObject({ owner: 'b', next: 'a' });
    expect(anaStateOn(due.groups[0]!, 'b')).toBe('change');
    expect(anaStateOn(due.groups[0]!, 'a')).toBe('inaccessible');
    expect(releaseGroup(due.groups, 1, 'a', 1600)).toBeUndefined();
    const rel = releaseGroup(due.groups, 1, 'b', 1600)!;
    expect(rel.transition).toEqual({ grpid: 1, from: 'b', to: 'a', cause: 'failback', at: 1600, startedAt: 1500 });
    expect(rel.groups[0]).toEqual({ grpid: 1, preferred: 'a', owner: 'a', since: 1600 });
    expect(anaStateOn(rel.groups[0]!, 'a')).toBe('optimized');
    expect(anaStateOn(rel.groups[0]!, 'b', 'non-optimized')).toBe('non-optimized');
  });

  it('a handoff whose releasing owner dies completes as a failover to the target', () => {
    const groups: GroupOwnership[] = [{ grpid: 1, preferred: 'a', owner: 'b', next: 'a', since: 0 }];
    const p = planOwnership({ members: [m('a', 4)], groups, failbackDelayMs: 500, now: 9 });
    expect(p.groups[0]).toEqual({ grpid: 1, preferred: 'a', owner: 'a', since: 9 });
    expect(p.transitions[0]).toMatchObject({ from: 'b', to: 'a', cause: 'failover' });
  });

  it('drops a handoff whose target died; the live owner keeps the group', () => {
    const groups: GroupOwnership[] = [{ grpid: 1, preferred: 'a', owner: 'b', next: 'a', since: 0 }];
    const p = planOwnership({ members: [m('b', 2)], groups, failbackDelayMs: 0, now: 9 });
    expect(p.groups[0]).toEqual({ grpid: 1, preferred: 'a', owner: 'b', since: 0 });
    expect(p.transitions).toEqual([]);
  });

  it('with nobody alive, groups are owned by nobody', () => {
    const p = planOwnership({ members: [], groups: [g(1, 'a', 'a')], failbackDelayMs: 0, now: 5 });
    expect(p.groups[0]?.owner).toBeNull();
    expect(p.transitions[0]).toMatchObject({ from: 'a', to: null, cause: 'failover' });
  });

  it('does not move groups between live gateways other than failback', () => {
    const groups = [g(1, undefined, 'b'), g(2, undefined, 'b'), g(3, 'c', 'c')];
    const p = planOwnership({ members: [m('a', 9), m('b', 2), m('c', 3)], groups, failbackDelayMs: 0, now: 5 });
    expect(p.transitions).toEqual([]);
    expect(p.handoffs).toEqual([]);
  });

  it("an operator's hold moves a group through a handoff and beats failback until cleared", () => {
    const groups: GroupOwnership[] = [{ grpid: 1, preferred: 'a', owner: 'a', hold: 'c', since: 0 }];
    const members = [m('a', 1), m('b', 2), m('c', 3)];
    const p = planOwnership({ members, groups, failbackDelayMs: 0, now: 7 });
    expect(p.groups[0]).toMatchObject({ owner: 'a', next: 'c', nextCause: 'manual', nextAt: 7 });
    const rel = releaseGroup(p.groups, 1, 'a', 9)!;
    expect(rel.transition).toEqual({ grpid: 1, from: 'a', to: 'c', cause: 'manual', at: 9, startedAt: 7 });
    // Held on c: the preferred gateway a does not take it back.
    const held = planOwnership({ members, groups: rel.groups, failbackDelayMs: 0, now: 10 });
    expect(held.handoffs).toEqual([]);
    // Hold cleared (ctl group failback): a gets it back.
    const { hold: _h, ...cleared } = rel.groups[0]!;
    const back = planOwnership({ members, groups: [cleared], failbackDelayMs: 0, now: 11 });
    expect(back.handoffs).toEqual([{ grpid: 1, from: 'c', to: 'a' }]);
    // A hold on a member that died is dropped.
    expect(planOwnership({ members: [m('a', 1)], groups: rel.groups, failbackDelayMs: 0, now: 12 }).groups[0]?.hold).toBeUndefined();
  });

  it('a drained member hands its groups to the others, spread, and is given none', () => {
    const groups = [g(1, 'a', 'a'), g(2, 'a', 'a'), g(3, 'b', 'b')];
    const members = [{ ...m('a', 1), draining: true }, m('b', 2), m('c', 3)];
    const p = planOwnership({ members, groups, failbackDelayMs: 0, now: 5 });
    expect(p.groups.map((x) => [x.owner, x.next, x.nextCause])).toEqual([
      ['a', 'c', 'drain'],
      ['a', 'b', 'drain'],
      ['b', undefined, undefined],
    ]);
    // Nobody else alive: the drained member keeps serving rather than leaving the group with no owner.
    expect(planOwnership({ members: [members[0]!], groups, failbackDelayMs: 0, now: 5 }).handoffs).toEqual([]);
    // A dead owner's group never goes to a drained member.
    const dead = planOwnership({ members: [members[0]!, m('c', 3)], groups: [g(4, 'x', 'x')], failbackDelayMs: 0, now: 5 });
    expect(dead.groups[0]?.owner).toBe('c');
  });
});
