// GatewayGroup: one gateway's membership in a named gateway group, coordinated through etcd (v3 API, etcd3 client).
//
// etcd keys under `${prefix}/${group}/`:
//   members/<id>  this gateway's liveness: written with its lease, so etcd deletes it when the lease expires (etcd
//                 leases: a key attached to a lease lives exactly as long as the lease; the lease expires TTL seconds
//                 after the last keep-alive the server received).
//   state         the one record that is the truth for membership, the owner of each ANA group and a change counter.
//   resv/<nqn>/<nsid>, masks/<nqn>/<nsid>
//                 state the gateways share besides ownership (target/gateway/shared.ts: reservations, host masks),
//                 written by updateShared (a transaction comparing the key's mod revision and that this gateway's
//                 member key still carries its lease) and announced to every gateway by the watch ('shared' event).
//                 Every write is a transaction comparing the record's mod revision with the one the writer read (etcd
//                 txn: the `then` ops apply only if every compare holds, atomically), so two gateways never both
//                 write a conflicting owner map: the loser re-reads and recomputes (planOwnership is pure).
//
// Fencing: this gateway knows when its lease can expire at the earliest: the send time of the last keep-alive (or
// grant) etcd answered, plus the TTL (etcd starts the new TTL when it receives the request, which is later). It stops
// reporting any group owned a margin before that instant, by a timer and by the synchronous check in ownsNow() (for a
// process that was stalled past its timers), so it is fenced before etcd lets anyone else take its groups over.
import { EventEmitter } from 'node:events';
import type { Etcd3, Lease, Watcher } from 'etcd3';
import { anaGroupIds, describeDifference, descriptionDigest, type GroupDescription } from './description.js';
import { DescriptionMismatchError, DuplicateGatewayError, EtcdUnreachableError, GatewayFencedError, GroupOperationError } from './errors.js';
import { anaStateOn, planOwnership, releaseGroup, type AnaStateName, type GroupOwnership, type Transition } from './ownership.js';

export type { AnaStateName, GroupOwnership, Transition } from './ownership.js';

export interface GatewayPort {
  traddr: string;
  trsvcid: string;
}

export interface GatewayGroupOptions {
  group: string;
  id: string;
  etcd: string[];
  description: GroupDescription;
  ports?: GatewayPort[];
  /** ANA group ids this gateway is the preferred owner of (sticky in the record once set). */
  preferred?: number[];
  /** Lease TTL in seconds (etcd's minimum is 1). Default 3. */
  ttlSec?: number;
  failbackDelayMs?: number;
  /** Controller IDs per gateway (NVMe cntlid 1..0xFFEF). Default 1000. */
  cntlidRangeSize?: number;
  notOwned?: 'inaccessible' | 'non-optimized';
  prefix?: string;
  /** Retry interval of the rejoin loop after fencing. Default 500 ms. */
  rejoinMs?: number;
}

export interface MemberRecord {
  joinSeq: number;
  joinedAt: number;
  ports: GatewayPort[];
  cntlid: [number, number];
  /** Drained by an operator: owns nothing, is given nothing (planOwnership). */
  draining?: boolean;
}

export interface GroupRecord {
  counter: number;
  digest: string;
  description: GroupDescription;
  members: Record<string, MemberRecord>;
  cntlidSlots: Record<string, number>;
  nextJoinSeq: number;
  groups: GroupOwnership[];
  transitions: Transition[];
}

export interface OwnershipEvent {
  /** ANA groups this gateway reports optimized. */
  owned: number[];
  /** Per ANA group, the state this gateway's ports report (NVMe 2.0 §8.1.2). */
  states: Record<number, AnaStateName>;
  fenced: boolean;
  counter: number;
  at: number;
  reason: string;
}

const MAX_TRANSITIONS = 32;
const CONNECT_MS = 5000;

/**
 * Controller-ID ranges: a sticky slot per gateway id, so the same gateway keeps its range and a fenced gateway's hosts
 * (still connected to it) never meet their cntlid on another gateway.
 */
function claimCntlidRange(rec: GroupRecord, opts: GatewayGroupOptions): [number, number] {
  const size = opts.cntlidRangeSize ?? 1000;
  let slot = rec.cntlidSlots[opts.id];
  if (slot === undefined) {
    const used = new Set(Object.values(rec.cntlidSlots));
    slot = 0;
    while (used.has(slot)) slot++;
    rec.cntlidSlots[opts.id] = slot;
  }
  const lo = 1 + slot * size;
  if (lo > MAX_CNTLID) throw new DescriptionMismatchError(opts.group, `no controller-ID range left for '${opts.id}'`);
  return [lo, Math.min(lo + size - 1, MAX_CNTLID)];
}

function claimPreferred(rec: GroupRecord, opts: GatewayGroupOptions): void {
  if (opts.preferred !== undefined) {
    for (const g of rec.groups) if (opts.preferred.includes(g.grpid) && g.preferred === undefined) g.preferred = opts.id;
  } else if (!rec.groups.some((g) => g.preferred === opts.id)) {
    // No preference given: claim the lowest ANA group nobody prefers yet, so N gateways over N groups each get their
    // own (the Ceph layout) and a returning gateway gets its group back (failback).
    const free = rec.groups.find((g) => g.preferred === undefined);
    if (free !== undefined) free.preferred = opts.id;
  }
}

/** One shared key as read or written: relative key, value, etcd mod revision (decimal string). */
export interface SharedKv {
  key: string;
  value: string;
  modRev: string;
}

/** `d` with the host mask of every namespace named by a masks/<nqn>/<nsid> key replaced by the key's. */
function withMasks(d: GroupDescription, masks: SharedKv[]): GroupDescription {
  if (masks.length === 0) return d;
  const byNs = new Map(masks.map((m) => [m.key.slice('masks/'.length), m.value]));
  return {
    ...d,
    subsystems: d.subsystems.map((s) => ({
      ...s,
      namespaces: s.namespaces.map((ns) => {
        const v = byNs.get(`${s.nqn}/${ns.nsid}`);
        return v === undefined ? ns : { ...ns, hosts: (JSON.parse(v) as { hosts: string[] | null }).hosts };
      }),
    })),
  };
}

const ownedCount = (rec: GroupRecord, id: string): number => rec.groups.filter((g) => (g.next ?? g.owner) === id).length;
const MAX_CNTLID = 0xffef;

export class GatewayGroup extends EventEmitter {
  /** Replaced when a rejoin starts (and after every five failed attempts): a partition can leave the old channel
   *  half-dead, its watch silent for good. */
  private client: Etcd3;
  private readonly ttlMs: number;
  private readonly marginMs: number;
  private lease: Lease | undefined;
  /** The id of `lease` once granted: updateShared's transactions compare the member key's lease with it. */
  private leaseId: string | undefined;
  private validUntil = 0;
  private fenceTimer: NodeJS.Timeout | undefined;
  private keepTimer: NodeJS.Timeout | undefined;
  private checkTimer: NodeJS.Timeout | undefined;
  private watcher: Watcher | undefined;
  private fenced = true;
  private closed = false;
  private record: GroupRecord | undefined;
  private lastKey = '';
  private chain: Promise<void> = Promise.resolve();
  private rejoining = false;
  /** When this gateway saw each member's key deleted (lease expired or revoked): a failover's startedAt. */
  private readonly goneAt = new Map<string, number>();
  cntlidRange: [number, number] = [0, 0];

  private constructor(
    readonly opts: GatewayGroupOptions,
    private readonly Client: typeof Etcd3,
  ) {
    super();
    this.client = new Client({ hosts: opts.etcd });
    this.ttlMs = (opts.ttlSec ?? 3) * 1000;
    this.marginMs = Math.min(500, this.ttlMs / 4);
  }

  private get prefix(): string {
    return `${this.opts.prefix ?? '/nvme-tcp/gateway-groups'}/${this.opts.group}/`;
  }
  private get stateKey(): string {
    return `${this.prefix}state`;
  }
  private memberKey(id = this.opts.id): string {
    return `${this.prefix}members/${id}`;
  }

  /** Join: refused with DuplicateGatewayError, DescriptionMismatchError, or EtcdUnreachableError. */
  static async join(opts: GatewayGroupOptions): Promise<GatewayGroup> {
    // Loaded here, not at import: etcd3 brings gRPC and protobufjs (~7 MB of heap), which every process that imports
    // the target (hosts and benches through harness/nvme.ts) would carry and scavenge without ever joining a group.
    const { Etcd3: Client } = await import('etcd3');
    const gw = new GatewayGroup(opts, Client);
    // A member key with our id may be a crashed predecessor's (a restart within its TTL): it expires within one TTL,
    // while a live duplicate keeps renewing it. So the refusal stands only once the key outlived a TTL.
    const refuseAt = Date.now() + gw.ttlMs + gw.marginMs;
    for (;;) {
      try {
        await gw.joinOnce();
        break;
      } catch (err) {
        if (err instanceof DuplicateGatewayError && Date.now() < refuseAt) {
          await new Promise((r) => setTimeout(r, 200));
          continue;
        }
        gw.client.close();
        throw err;
      }
    }
    await gw.startWatch();
    gw.schedule('joined');
    return gw;
  }

  /** Watch the group's prefix on the current client (a fresh watch after each rejoin). */
  private async startWatch(): Promise<void> {
    void this.watcher?.cancel().catch(() => undefined);
    const w = await this.withDeadline(this.client.watch().prefix(this.prefix).create());
    this.watcher = w;
    w.on('put', (kv) => {
      const key = kv.key.toString();
      // Shared keys (reservations, masks) are not the ownership record's business: no reconcile for them.
      if (this.isSharedKey(key)) this.emit('shared', key.slice(this.prefix.length), kv.value.toString(), kv.mod_revision);
      else this.schedule('watch');
    });
    w.on('delete', (kv) => {
      const key = kv.key.toString();
      if (this.isSharedKey(key)) return;
      if (key.startsWith(`${this.prefix}members/`)) this.goneAt.set(key.slice(`${this.prefix}members/`.length), Date.now());
      this.schedule('member lost');
    });
    w.on('error', () => undefined);
  }

  private async withDeadline<T>(p: Promise<T>, ms = this.ttlMs): Promise<T> {
    let t: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      t = setTimeout(() => reject(new EtcdUnreachableError(this.opts.etcd)), ms);
    });
    try {
      return await Promise.race([p, timeout]);
    } finally {
      clearTimeout(t);
    }
  }

  private async readState(): Promise<{ record: GroupRecord | undefined; modRev: string; live: Set<string> }> {
    const res = await this.withDeadline(this.client.get(this.stateKey).exec());
    const kv = res.kvs[0];
    const keys = await this.withDeadline(this.client.getAll().prefix(`${this.prefix}members/`).keys());
    const live = new Set(keys.map((k) => k.slice(`${this.prefix}members/`.length)));
    return {
      record: kv ? (JSON.parse(kv.value.toString()) as GroupRecord) : undefined,
      modRev: kv ? kv.mod_revision : '0',
      live,
    };
  }

  private async joinOnce(): Promise<void> {
    const { opts } = this;
    const lease = this.client.lease(this.ttlMs / 1000, { autoKeepAlive: false });
    lease.on('lost', () => undefined);
    const tGrant = Date.now();
    let leaseId: string;
    try {
      // The first contact (a new gRPC channel, maybe a busy machine) gets at least 5 s before "unreachable".
      leaseId = await this.withDeadline(lease.grant(), Math.max(this.ttlMs, CONNECT_MS));
    } catch (cause) {
      throw new EtcdUnreachableError(opts.etcd, { cause });
    }
    for (let attempt = 0; ; attempt++) {
      const { record: prev, modRev, live } = await this.readState();
      if (live.has(opts.id)) {
        lease.release();
        throw new DuplicateGatewayError(opts.group, opts.id);
      }
      if (prev) {
        const diff = await this.describeDifferenceNow(prev.description);
        if (diff !== undefined) {
          lease.release();
          throw new DescriptionMismatchError(opts.group, diff);
        }
      }
      const now = Date.now();
      const rec: GroupRecord = prev
        ? structuredClone(prev)
        : {
            counter: 0,
            digest: descriptionDigest(opts.description),
            description: opts.description,
            members: {},
            cntlidSlots: {},
            nextJoinSeq: 1,
            groups: anaGroupIds(opts.description).map((grpid) => ({ grpid, owner: null, since: now })),
            transitions: [],
          };
      const [lo, hi] = claimCntlidRange(rec, opts);
      claimPreferred(rec, opts);
      const wasDraining = prev?.members[opts.id]?.draining === true;
      rec.members[opts.id] = { joinSeq: rec.nextJoinSeq++, joinedAt: now, ports: opts.ports ?? [], cntlid: [lo, hi], ...(wasDraining ? { draining: true } : {}) };
      live.add(opts.id);
      this.applyPlan(rec, live, now);
      rec.counter++;
      const txn = this.client
        .if(this.stateKey, 'Mod', '==', modRev)
        .and(this.memberKey(), 'Create', '==', 0)
        .then(
          this.client.put(this.stateKey).value(JSON.stringify(rec)),
          this.client.put(this.memberKey()).value(JSON.stringify({ id: opts.id, ports: opts.ports ?? [] })).lease(leaseId),
        );
      const res = await this.withDeadline(txn.commit());
      if (res.succeeded) {
        this.lease = lease;
        this.leaseId = leaseId;
        this.cntlidRange = [lo, hi];
        this.renewed(tGrant);
        this.keepTimer = setInterval(() => this.keepAlive(), this.ttlMs / 3);
        this.fenced = false;
        this.observe(rec, 'joined');
        return;
      }
      if (attempt > 20) throw new EtcdUnreachableError(opts.etcd);
    }
  }

  /**
   * The join check. A host mask changed at runtime (masks/ keys) overrides the configured one on every gateway, so the
   * configured masks of those namespaces are not compared: the joiner adopts the group's. The keys are read only when
   * the descriptions differ, so a join costs no extra round trip inside its compare-and-swap loop.
   */
  private async describeDifferenceNow(recorded: GroupDescription): Promise<string | undefined> {
    if (describeDifference(this.opts.description, recorded) === undefined) return undefined;
    const masks = await this.readShared('masks/');
    return describeDifference(withMasks(this.opts.description, masks), withMasks(recorded, masks));
  }

  /** Prune members to the live keys and apply planOwnership; returns whether anything changed. */
  private applyPlan(rec: GroupRecord, live: Set<string>, now: number): boolean {
    let changed = false;
    for (const id of Object.keys(rec.members)) {
      if (!live.has(id)) {
        delete rec.members[id];
        changed = true;
      }
    }
    const members = Object.entries(rec.members).map(([id, m]) => ({ id, joinSeq: m.joinSeq, joinedAt: m.joinedAt, ...(m.draining === true ? { draining: true } : {}) }));
    const plan = planOwnership({ members, groups: rec.groups, failbackDelayMs: this.opts.failbackDelayMs ?? 5000, now });
    if (JSON.stringify(plan.groups) !== JSON.stringify(rec.groups)) changed = true;
    rec.groups = plan.groups;
    for (const t of plan.transitions) if (t.cause === 'failover' && t.from !== null) t.startedAt = Math.min(now, this.goneAt.get(t.from) ?? now);
    rec.transitions = [...rec.transitions, ...plan.transitions].slice(-MAX_TRANSITIONS);
    clearTimeout(this.checkTimer);
    if (plan.nextCheckAt !== undefined && !this.closed) {
      this.checkTimer = setTimeout(() => this.schedule('failback-delay'), Math.max(0, plan.nextCheckAt - now) + 10);
    }
    return changed;
  }

  private renewed(sentAt: number): void {
    this.validUntil = sentAt + this.ttlMs;
    this.emit('lease', this.ownedUntil);
    clearTimeout(this.fenceTimer);
    this.fenceTimer = setTimeout(() => this.fence('lease could expire'), Math.max(0, this.validUntil - this.marginMs - Date.now()));
  }

  private keepAlive(): void {
    const lease = this.lease;
    if (!lease || this.fenced) return;
    const sentAt = Date.now();
    lease
      .keepaliveOnce({ deadline: sentAt + this.ttlMs })
      .then(() => {
        if (this.lease === lease && !this.fenced) this.renewed(sentAt);
      })
      .catch((err: unknown) => {
        // A lease etcd says is gone (TTL 0) is lost now; other errors (unreachable) wait for the fence timer.
        if ((err as { name?: string }).name === 'EtcdLeaseInvalidError') this.fence('lease lost');
      });
  }

  /** Report nothing owned, at once, then rejoin when etcd answers again. */
  private fence(reason: string): void {
    if (this.fenced || this.closed) return;
    this.fenced = true;
    clearTimeout(this.fenceTimer);
    clearInterval(this.keepTimer);
    this.emitState(reason);
    this.lease?.release();
    void this.rejoin();
  }

  /**
   * Until etcd answers again: a new client (new gRPC channels: a partition that dropped packets without a reset can
   * leave the old connection open but dead, and a watch on it silent for good), the stale lease revoked, a new watch,
   * join, and 'rejoined' so that what changed meanwhile (shared keys) is read again. The loop runs while this gateway
   * is fenced, so a fence that comes while it rejoins (a join whose lease was granted long ago under a slow etcd)
   * goes round again rather than being dropped by the guard. The first attempt waits rejoinMs too: the group has moved
   * on already, and a gateway that lost its lease stays visibly fenced for a moment.
   */
  private async rejoin(): Promise<void> {
    if (this.rejoining) return;
    this.rejoining = true;
    try {
      // A new client when the rejoin starts and after every few failed attempts: not per attempt, since a client's
      // first connection can take its time to come up once etcd is reachable again.
      for (let attempt = 0; !this.closed && this.fenced; attempt++) {
        await new Promise((r) => setTimeout(r, this.opts.rejoinMs ?? 500));
        if (this.closed) break;
        const stale = this.leaseId;
        this.lease = undefined;
        this.leaseId = undefined;
        if (attempt % 5 === 0) this.renewClient();
        try {
          // Our old member key may outlive the partition (the lease not yet expired, or restored by an etcd restart):
          // revoke it so the rejoin is not refused as a duplicate of ourselves.
          if (stale !== undefined) await this.withDeadline(this.client.leaseClient.leaseRevoke({ ID: stale })).catch(() => undefined);
          if (this.watcher === undefined) await this.startWatch();
          await this.joinOnce();
          this.schedule('rejoined');
          this.emit('rejoined');
        } catch (err) {
          if (err instanceof DescriptionMismatchError || err instanceof DuplicateGatewayError) {
            this.emit('error', err);
            break;
          }
        }
      }
    } finally {
      this.rejoining = false;
    }
  }

  private renewClient(): void {
    void this.watcher?.cancel().catch(() => undefined);
    this.watcher = undefined;
    this.client.close();
    this.client = new this.Client({ hosts: this.opts.etcd });
  }

  private schedule(reason: string): void {
    this.chain = this.chain.then(() => this.reconcile(reason)).catch(() => undefined);
  }

  private async reconcile(reason: string): Promise<void> {
    for (let attempt = 0; attempt < 20 && !this.closed; attempt++) {
      const { record: prev, modRev, live } = await this.readState();
      if (!prev) return;
      const rec = structuredClone(prev);
      const now = Date.now();
      let changed = this.applyPlan(rec, live, now);
      // Complete handoffs of groups we own: our ports already report them `change` (observe emitted it before this).
      this.observe(rec, reason);
      if (!this.fenced && this.ownsNowCheck()) {
        for (const g of rec.groups) {
          if (g.owner === this.opts.id && g.next !== undefined) {
            const r = releaseGroup(rec.groups, g.grpid, this.opts.id, now);
            if (r) {
              rec.groups = r.groups;
              rec.transitions = [...rec.transitions, r.transition].slice(-MAX_TRANSITIONS);
              changed = true;
            }
          }
        }
      }
      if (!changed) return;
      rec.counter++;
      const res = await this.withDeadline(
        this.client.if(this.stateKey, 'Mod', '==', modRev).then(this.client.put(this.stateKey).value(JSON.stringify(rec))).commit(),
      );
      if (res.succeeded) {
        this.observe(rec, reason);
        return;
      }
    }
  }

  /**
   * One operator change to the record (failover, failback, drain), written by compare-and-swap like every other
   * change; `edit` throws GroupOperationError for a request that names no member or group, and nothing is written.
   */
  private async operate(reason: string, edit: (rec: GroupRecord, live: Set<string>) => void): Promise<GroupRecord> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const { record: prev, modRev, live } = await this.readState();
      if (!prev) throw new GroupOperationError(`gateway group '${this.opts.group}' has no record in etcd`);
      const rec = structuredClone(prev);
      edit(rec, live);
      this.applyPlan(rec, live, Date.now());
      rec.counter++;
      const res = await this.withDeadline(
        this.client.if(this.stateKey, 'Mod', '==', modRev).then(this.client.put(this.stateKey).value(JSON.stringify(rec))).commit(),
      );
      if (res.succeeded) {
        this.observe(rec, reason);
        this.schedule(reason);
        return rec;
      }
    }
    throw new GroupOperationError(`gateway group '${this.opts.group}': the record kept changing; retry`);
  }

  private groupOf(rec: GroupRecord, grpid: number): GroupOwnership {
    const g = rec.groups.find((x) => x.grpid === grpid);
    if (g === undefined) throw new GroupOperationError(`ANA group ${grpid} is not in gateway group '${this.opts.group}'; its groups are ${rec.groups.map((x) => x.grpid).join(', ')}`);
    return g;
  }

  /** Move `grpid` to member `to` (default: the least loaded other member) and keep it there until failback(). */
  async failover(grpid: number, to?: string): Promise<GroupRecord> {
    return this.operate('manual failover', (rec, live) => {
      const g = this.groupOf(rec, grpid);
      const members = Object.keys(rec.members).filter((id) => live.has(id) && rec.members[id]?.draining !== true);
      if (to !== undefined && !members.includes(to)) {
        throw new GroupOperationError(`'${to}' is not a serving member of gateway group '${this.opts.group}'; members: ${members.join(', ') || 'none'}`);
      }
      const target = to ?? members.filter((id) => id !== g.owner).sort((a, b) => ownedCount(rec, a) - ownedCount(rec, b))[0];
      if (target === undefined) throw new GroupOperationError(`ANA group ${grpid}: no other serving member to fail over to`);
      g.hold = target;
    });
  }

  /** Drop the operator's placement of `grpid`: it returns to its preferred gateway (after the failback delay). */
  async failback(grpid: number): Promise<GroupRecord> {
    return this.operate('manual failback', (rec) => {
      delete this.groupOf(rec, grpid).hold;
    });
  }

  /** Drain (true: hand every group away and take none) or undrain member `id` (default this gateway). */
  async setDraining(draining: boolean, id = this.opts.id): Promise<GroupRecord> {
    return this.operate(draining ? 'drain' : 'undrain', (rec, live) => {
      const m = rec.members[id];
      if (m === undefined || !live.has(id)) throw new GroupOperationError(`'${id}' is not a member of gateway group '${this.opts.group}'`);
      if (draining) m.draining = true;
      else delete m.draining;
    });
  }

  private isSharedKey(key: string): boolean {
    return key.startsWith(`${this.prefix}resv/`) || key.startsWith(`${this.prefix}masks/`);
  }

  /** Every shared key under `dir` ('resv/' or 'masks/'), keys relative to the group's prefix. */
  async readShared(dir: 'resv/' | 'masks/'): Promise<SharedKv[]> {
    const res = await this.withDeadline(this.client.getAll().prefix(`${this.prefix}${dir}`).exec());
    return res.kvs.map((kv) => ({ key: kv.key.toString().slice(this.prefix.length), value: kv.value.toString(), modRev: kv.mod_revision }));
  }

  /**
   * Compare-and-swap of one shared key (relative to the group's prefix). `edit` gets the current value (undefined when
   * absent) and returns the value to write (none: nothing is written) and a result; it must be pure, as it is run
   * again on the new value when another gateway wrote first. The write lands only while this gateway's member key
   * still carries its lease (a fenced gateway, or one whose lease etcd already expired, changes nothing) and the key
   * is unchanged since the read. Throws GatewayFencedError when fenced, EtcdUnreachableError when etcd does not answer.
   */
  async updateShared<T>(key: string, edit: (cur: string | undefined) => { value?: string; result: T }): Promise<{ result: T; written?: SharedKv }> {
    const full = `${this.prefix}${key}`;
    for (let attempt = 0; attempt < 50; attempt++) {
      const leaseId = this.leaseId;
      if (leaseId === undefined || !this.ownsNowCheck()) throw new GatewayFencedError(this.opts.group, this.opts.id);
      const kv = (await this.withDeadline(this.client.get(full).exec())).kvs[0];
      const out = edit(kv?.value.toString());
      if (out.value === undefined) return { result: out.result };
      const res = await this.withDeadline(
        this.client
          .if(full, 'Mod', '==', kv?.mod_revision ?? '0')
          .and(this.memberKey(), 'Lease', '==', leaseId)
          .then(this.client.put(full).value(out.value))
          .else(this.client.get(this.memberKey()))
          .commit(),
      );
      if (res.succeeded) return { result: out.result, written: { key, value: out.value, modRev: res.header.revision } };
      const member = res.responses[0]?.response_range?.kvs[0];
      if (member === undefined || member.lease !== leaseId) throw new GatewayFencedError(this.opts.group, this.opts.id);
    }
    throw new GroupOperationError(`gateway group '${this.opts.group}': ${key} kept changing; retry`);
  }

  /** Per live member, its lease id and the seconds etcd says it has left (etcd LeaseTimeToLive). */
  async leases(ms = this.ttlMs): Promise<Record<string, { lease: string; ttlLeftS: number }>> {
    const res = await this.withDeadline(this.client.getAll().prefix(`${this.prefix}members/`).exec(), ms);
    const out: Record<string, { lease: string; ttlLeftS: number }> = {};
    // One round trip for all members, not one after another.
    await Promise.all(
      res.kvs.map(async (kv) => {
        const ttl = await this.withDeadline(this.client.leaseClient.leaseTimeToLive({ ID: kv.lease }), ms).catch(() => undefined);
        out[kv.key.toString().slice(`${this.prefix}members/`.length)] = { lease: kv.lease, ttlLeftS: Number(ttl?.TTL ?? -1) };
      }),
    );
    return out;
  }

  private observe(rec: GroupRecord, reason: string): void {
    if (this.record && rec.counter < this.record.counter) return;
    const seen = this.record?.counter;
    this.record = rec;
    if (rec.counter !== seen) this.emit('record', rec);
    this.emitState(reason);
  }

  private ownsNowCheck(): boolean {
    return !this.fenced && Date.now() < this.validUntil - this.marginMs;
  }

  /** Per ANA group, what this gateway's ports report now (all not-owned while fenced). */
  states(): Record<number, AnaStateName> {
    const out: Record<number, AnaStateName> = {};
    const notOwned = this.opts.notOwned ?? 'inaccessible';
    const live = this.ownsNowCheck();
    for (const g of this.record?.groups ?? []) out[g.grpid] = live ? anaStateOn(g, this.opts.id, notOwned) : notOwned;
    return out;
  }

  /** Whether this gateway may serve I/O of `grpid` as its owner right now (checked against the lease deadline). */
  ownsNow(grpid: number): boolean {
    return this.states()[grpid] === 'optimized';
  }

  owned(): number[] {
    return Object.entries(this.states())
      .filter(([, s]) => s === 'optimized')
      .map(([k]) => Number(k));
  }

  /** The instant (ms since the epoch) this gateway stops owning anything unless a keep-alive lands first. */
  get ownedUntil(): number {
    return this.fenced ? 0 : this.validUntil - this.marginMs;
  }

  get isFenced(): boolean {
    return this.fenced;
  }

  /** The last record this gateway saw. */
  get snapshot(): GroupRecord | undefined {
    return this.record;
  }

  private emitState(reason: string): void {
    const states = this.states();
    const key = JSON.stringify([states, this.fenced]);
    if (key === this.lastKey) return;
    this.lastKey = key;
    const ev: OwnershipEvent = {
      owned: this.owned(),
      states,
      fenced: this.fenced,
      counter: this.record?.counter ?? 0,
      at: Date.now(),
      reason,
    };
    this.emit('ownership', ev);
  }

  /** Simulate a crash for tests: stop keep-alives and watching without telling etcd (the lease expires by itself). */
  abandon(): void {
    this.closed = true;
    clearInterval(this.keepTimer);
    clearTimeout(this.fenceTimer);
    clearTimeout(this.checkTimer);
    void this.watcher?.cancel().catch(() => undefined);
    this.client.close();
  }

  /** Leave: report nothing owned, then revoke the lease so the others take over at once. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.fenced = true;
    this.emitState('closing');
    this.closed = true;
    clearInterval(this.keepTimer);
    clearTimeout(this.fenceTimer);
    clearTimeout(this.checkTimer);
    await this.watcher?.cancel().catch(() => undefined);
    await this.withDeadline(this.lease?.revoke() ?? Promise.resolve()).catch(() => undefined);
    this.client.close();
  }
}
