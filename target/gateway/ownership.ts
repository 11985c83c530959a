// Who owns each ANA group of a gateway group: a pure function of the live members, the current owners, the failback
// delay and the time, so every gateway computes the same answer from the same etcd record and the record's
// transaction (compare on its revision) only decides whose write lands, never what it says.
//
// ANA (NVMe Base 2.0 §8.1.2, Asymmetric Namespace Access Reporting): a group is reported `optimized` on the ports of
// the gateway that owns it and `inaccessible` (or `non-optimized`, by config) on the others; while it moves from a
// live owner to another gateway it is in `change` (ANA Transition) on the releasing side. A group never has two
// owners: a live owner gives a group away only by releasing it (releaseGroup), and a dead owner's group is reassigned
// only once etcd expired its lease (liveness here is "its leased member key still exists"), by which time the owner
// has fenced itself (it stops reporting ownership before its lease can expire; see GatewayGroup).

export interface LiveMember {
  id: string;
  /** Order of (re)joining, from the group record: the deterministic tie-break of the spread. */
  joinSeq: number;
  /** When it last joined (ms since the epoch): failback waits failbackDelayMs after this. */
  joinedAt: number;
  /** Drained by an operator (`ctl gateway disable`): owns nothing, is given nothing, keeps its membership. */
  draining?: boolean;
}

export interface GroupOwnership {
  grpid: number;
  /** The gateway this group belongs on when it is alive (sticky in the record); undefined: no preference. */
  preferred?: string;
  /** null: nobody (no live member). */
  owner: string | null;
  /** Set while a live owner is asked to hand the group over (failback); the owner releases, then `next` owns it. */
  next?: string;
  /** Why `next` was set and when: the release's transition carries them (cause, and the handoff's duration). */
  nextCause?: TransitionCause;
  nextAt?: number;
  /** An operator's placement (`ctl group failover --to`): while this member is live and not draining it owns the
   *  group, whatever `preferred` says; `ctl group failback` clears it. */
  hold?: string;
  /** When `owner` last changed (ms since the epoch). */
  since: number;
}

export type TransitionCause = 'initial' | 'failover' | 'failback' | 'manual' | 'drain';

export interface Transition {
  grpid: number;
  from: string | null;
  to: string | null;
  cause: TransitionCause;
  at: number;
  /** When the move was decided (a handoff's request; a failover's decision is its `at`): at - startedAt is the
   *  time the group spent moving. */
  startedAt: number;
}

export interface PlanInput {
  members: readonly LiveMember[];
  groups: readonly GroupOwnership[];
  failbackDelayMs: number;
  now: number;
}

export interface Plan {
  groups: GroupOwnership[];
  /** Owner changes made by this plan, in grpid order. */
  transitions: Transition[];
  /** A failback request made by this plan (the current owner must release; see releaseGroup). */
  handoffs: { grpid: number; from: string; to: string }[];
  /** The earliest time the plan would change with no membership change (a failback delay ending), if any. */
  nextCheckAt?: number;
}

/** The next owners. Pure and deterministic: same input, same output, whichever gateway computes it. */
export function planOwnership(input: PlanInput): Plan {
  const { failbackDelayMs, now } = input;
  const members = [...input.members].sort((a, b) => a.joinSeq - b.joinSeq || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const live = new Map(members.map((m) => [m.id, m]));
  // Eligible: live and not drained. A drained member keeps its groups only until it released them.
  const eligible = (id: string | null | undefined): id is string => id !== undefined && id !== null && live.has(id) && live.get(id)?.draining !== true;
  const groups = [...input.groups].map((g) => ({ ...g })).sort((a, b) => a.grpid - b.grpid);
  // Load = groups a member owns or is about to own; a reassigned group goes to the least loaded survivor, ties to the
  // earliest joined, so a dead gateway's groups spread instead of piling onto one survivor.
  const load = new Map(members.map((m) => [m.id, 0]));
  for (const g of groups) {
    const holder = g.next !== undefined && live.has(g.next) ? g.next : g.owner;
    if (holder !== null && load.has(holder)) load.set(holder, (load.get(holder) ?? 0) + 1);
  }
  const leastLoaded = (except?: string): string | null => {
    let best: string | null = null;
    for (const m of members) {
      if (!eligible(m.id) || m.id === except) continue;
      if (best === null || (load.get(m.id) ?? 0) < (load.get(best) ?? 0)) best = m.id;
    }
    return best;
  };
  const transitions: Transition[] = [];
  const handoffs: Plan['handoffs'] = [];
  let nextCheckAt: number | undefined;
  const handOff = (g: GroupOwnership, to: string, cause: TransitionCause): void => {
    g.next = to;
    g.nextCause = cause;
    g.nextAt = now;
    handoffs.push({ grpid: g.grpid, from: g.owner as string, to });
    load.set(to, (load.get(to) ?? 0) + 1);
    load.set(g.owner as string, (load.get(g.owner as string) ?? 1) - 1);
  };
  for (const g of groups) {
    if (g.hold !== undefined && !live.has(g.hold)) delete g.hold;
    const ownerLive = g.owner !== null && live.has(g.owner);
    if (!ownerLive) {
      // Owner gone (its lease expired, so it has fenced itself) or never assigned: assign directly. The preferred
      // gateway takes it at once when alive: there is no live owner to wait for, so no reason for the delay.
      const cause: TransitionCause = g.owner === null && g.next === undefined ? 'initial' : 'failover';
      const to = eligible(g.next) ? g.next : eligible(g.hold) ? g.hold : eligible(g.preferred) ? g.preferred : leastLoaded();
      if (g.next === undefined || g.next !== to) {
        if (to !== null) load.set(to, (load.get(to) ?? 0) + 1);
      }
      clearNext(g);
      if (to !== g.owner) {
        transitions.push({ grpid: g.grpid, from: g.owner, to, cause, at: now, startedAt: now });
        g.owner = to;
        g.since = now;
      }
      continue;
    }
    if (g.next !== undefined) {
      // A handoff in progress whose target died (or was drained) meanwhile is dropped: the live owner keeps the group.
      if (eligible(g.next)) continue;
      clearNext(g);
    }
    const owner = g.owner as string;
    if (!eligible(owner)) {
      // Drain: the owner hands every group over (to the operator's or preferred choice when eligible).
      const to = eligible(g.hold) && g.hold !== owner ? g.hold : eligible(g.preferred) && g.preferred !== owner ? g.preferred : leastLoaded(owner);
      if (to !== null) handOff(g, to, 'drain');
      continue;
    }
    if (eligible(g.hold)) {
      if (g.hold !== owner) handOff(g, g.hold, 'manual');
      continue;
    }
    if (g.preferred !== undefined && g.preferred !== owner && eligible(g.preferred)) {
      const pref = live.get(g.preferred) as LiveMember;
      const due = pref.joinedAt + failbackDelayMs;
      if (now >= due) handOff(g, pref.id, 'failback');
      else if (nextCheckAt === undefined || due < nextCheckAt) nextCheckAt = due;
    }
  }
  const plan: Plan = { groups, transitions, handoffs };
  if (nextCheckAt !== undefined) plan.nextCheckAt = nextCheckAt;
  return plan;
}

function clearNext(g: GroupOwnership): void {
  delete g.next;
  delete g.nextCause;
  delete g.nextAt;
}

/**
 * The owner of `grpid` gives it to `next` after it stopped reporting it optimized (its ports are in ANA change or
 * inaccessible): only then may the new owner report optimized. Returns undefined when `by` is not the owner or no
 * handoff is pending (a stale release must change nothing).
 */
export function releaseGroup(
  groups: readonly GroupOwnership[],
  grpid: number,
  by: string,
  now: number,
): { groups: GroupOwnership[]; transition: Transition } | undefined {
  const g = groups.find((x) => x.grpid === grpid);
  if (g === undefined || g.owner !== by || g.next === undefined) return undefined;
  const to = g.next;
  const { next: _n, nextCause, nextAt, ...keep } = g;
  const out = groups.map((x) => (x.grpid === grpid ? { ...keep, owner: to, since: now } : { ...x }));
  return { groups: out, transition: { grpid, from: by, to, cause: nextCause ?? 'failback', at: now, startedAt: nextAt ?? now } };
}

/** The ANA state (NVMe Base 2.0 §8.1.2) `self`'s ports report for a group. */
export type AnaStateName = 'optimized' | 'non-optimized' | 'inaccessible' | 'change';

export function anaStateOn(g: GroupOwnership, self: string, notOwned: 'inaccessible' | 'non-optimized' = 'inaccessible'): AnaStateName {
  if (g.owner !== self) return notOwned;
  return g.next !== undefined ? 'change' : 'optimized';
}
