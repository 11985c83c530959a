// The target's side of a gateway group (target/gateway, docs/gateway-groups.md): join at start with a description of
// the subsystems this target serves, give every subsystem this gateway's controller-ID range, and turn each ownership
// change into per-port ANA states through the one ANA change path (TargetService.setAnaState: port state, CHGCNT,
// workers, then the ANA-change AEN to every host on the port, NVMe Base 2.0 §8.1.2 and §5.27.1.2).
import os from 'node:os';
import type { Logger } from 'pino';
import type { ResvNotifType } from '../../protocol/index.js';
import { WriteFence } from '../backend/index.js';
import type { AnaStateName as PortAnaState, GatewayConfig, HostConfig, PortConfig } from '../model/config.js';
import type { TargetCore } from '../core/index.js';
import { keysDigest, type GroupDescription } from '../gateway/description.js';
import { GatewayNotConfiguredError } from '../gateway/errors.js';
import { GatewayGroup, type GroupRecord, type OwnershipEvent, type Transition } from '../gateway/group.js';
import { GroupSharedState, type SharedResv } from '../gateway/shared.js';
import type { Namespaces } from './namespaces.js';

/** How long GET /group waits for each etcd call of the members' lease TTLs (two round trips at most). */
const LEASE_VIEW_MS = 1000;

/** What GET /group and `ctl group status` show. */
export interface GroupView {
  group: string;
  self: string;
  /** When (ms since the epoch) `anaGroups[].state` was read: the instant this view describes. */
  at: number;
  fenced: boolean;
  /** Until when (ms since the epoch) this gateway may report ownership without another keep-alive; 0 while fenced. */
  ownedUntil: number;
  counter: number;
  members: { id: string; joinedAt: number; cntlid: [number, number]; draining: boolean; ports: { traddr: string; trsvcid: string }[]; lease?: string; ttlLeftS?: number }[];
  anaGroups: { grpid: number; owner: string | null; preferred: string | null; next: string | null; hold: string | null; since: number; state: string }[];
  transitions: (Transition & { durationMs: number })[];
}

/** Counters for /metrics. */
export interface GatewayStats {
  fenced: boolean;
  fences: number;
  owned: number;
  /** Per cause: transitions seen in the group record since start, and the sum of their durations (s). */
  transitions: Record<string, { count: number; seconds: number }>;
}

/** This gateway's id in its group: the configured one, else the host name. */
export function gatewayId(cfg: GatewayConfig): string {
  return cfg.id ?? os.hostname();
}

export class GatewayPart {
  #group: GatewayGroup | undefined;
  #shared: GroupSharedState | undefined;
  #cfg: GatewayConfig | undefined;
  #fences = 0;
  #lastSeenAt = 0;
  readonly #transitions: Record<string, { count: number; seconds: number }> = {};
  /**
   * This process's write fence: the file namespaces of a gateway write through it (FileBackendOptions.fence), and it
   * holds the same deadline as the ports' anaValidUntil (docs/gateway-groups.md, "Fencing at the storage call").
   */
  readonly writeFence = new WriteFence();

  constructor(
    private readonly core: TargetCore,
    private readonly log: Logger,
    /** TargetService.setAnaState: the ANA change path of `ctl ana set`. */
    private readonly setAnaState: (portId: number, grpid: number, state: PortAnaState) => void,
    /** HostKeys.configEntries(true): the host key configuration, only ever hashed here (description keys digest). */
    private readonly hostKeys: () => HostConfig[] | undefined,
    /** The namespace lifecycle: host masks decided by the group are applied through it (applyMask). */
    private readonly namespaces: Pick<Namespaces, 'applyMask' | 'groupMask'>,
  ) {}

  /** The gateway block this target joined with (getConfig round-trips it). */
  get config(): GatewayConfig | undefined {
    return this.#cfg;
  }

  /**
   * Join the group with what this target serves (its subsystems must already be added: the description needs the
   * backends' sizes). Throws the group's typed errors (etcd unreachable, duplicate id, description mismatch).
   */
  async join(cfg: GatewayConfig, ports: readonly PortConfig[]): Promise<void> {
    const id = gatewayId(cfg);
    const group = await GatewayGroup.join({
      group: cfg.group,
      id,
      etcd: cfg.etcd,
      description: this.#describe(),
      ports: ports.map((p) => ({ traddr: p.advertiseAddr ?? p.addr, trsvcid: String(p.advertisePort ?? p.port) })),
      ttlSec: (cfg.leaseTtlMs ?? 3000) / 1000,
      failbackDelayMs: cfg.failbackDelayMs ?? 5000,
      notOwned: cfg.notOwned ?? 'inaccessible',
      ...(cfg.preferred !== undefined ? { preferred: cfg.preferred } : {}),
      ...(cfg.cntlidRangeSize !== undefined ? { cntlidRangeSize: cfg.cntlidRangeSize } : {}),
    });
    this.#group = group;
    this.#cfg = cfg;
    // Disjoint controller IDs per gateway: a host connected to several gateways of one subsystem must see a distinct
    // CNTLID on each (NVMe Base 2.0 §3.1.2: unique within the NVM subsystem).
    const [lo, hi] = group.cntlidRange;
    for (const sub of this.core.subsystems.values()) {
      sub.cntlidMin = lo;
      sub.cntlidMax = hi;
    }
    group.on('ownership', (e: OwnershipEvent) => this.#onOwnership(e));
    group.on('lease', () => this.#fenceAt());
    group.on('record', (rec: GroupRecord) => this.#onRecord(rec));
    group.on('error', (err: Error) => this.log.error({ err }, 'gateway group: rejoin refused'));
    this.#onRecord(group.snapshot);
    await this.#share(group);
    this.log.info({ group: cfg.group, id, cntlid: group.cntlidRange, owned: group.owned() }, 'gateway group joined');
  }

  /**
   * Reservations and host masks through the group (target/gateway/shared.ts): load the group's copies before any
   * port listens (a namespace's PTPL state restored here seeds the group only where it has none), then send every
   * state-changing reservation command and mask change through etcd.
   */
  async #share(group: GatewayGroup): Promise<void> {
    const sink = {
      resv: (nqn: string, nsid: number, v: SharedResv, notify: boolean) => this.#applyResv(nqn, nsid, v, notify),
      mask: (nqn: string, nsid: number, hosts: string[] | null) => this.namespaces.applyMask(nqn, nsid, hosts),
    };
    const shared = new GroupSharedState(group, sink, (msg, err) => this.log.error({ err }, msg));
    const seed = [...this.core.subsystems.values()].flatMap((sub) =>
      [...sub.reservations].filter(([, rs]) => rs.ptpl).map(([nsid, rs]) => ({ nqn: sub.nqn, nsid, replica: rs.replica() })),
    );
    await shared.start(seed);
    this.#shared = shared;
    for (const sub of this.core.subsystems.values()) {
      sub.resvShared = async (nsid, mutate) => {
        const status = await shared.resvCommand(sub.nqn, nsid, mutate);
        // With workers: answered once every worker has the new state, as outside a group (Subsystem.resvCommit).
        if (status === 0) await sub.resvCommit?.(nsid);
        return status;
      };
    }
    this.namespaces.groupMask = (nqn, nsid, edit) => shared.setMask(nqn, nsid, edit);
  }

  /** The group's reservation state of a namespace: applied to the local copy, notices to this gateway's controllers. */
  #applyResv(nqn: string, nsid: number, v: SharedResv, notify: boolean): void {
    const sub = this.core.subsystems.get(nqn);
    if (sub === undefined || !sub.namespaces.has(nsid)) return;
    const rs = sub.reservation(nsid);
    rs.applyReplica(v.replica);
    if (notify) for (const [host, type] of v.notices) rs.events.notify(host, type as ResvNotifType);
    // Persistence (this gateway's PTPL file) and the workers' copies, as for a local change.
    sub.onResvChanged?.(sub, nsid);
  }

  /** The port config a listener starts with: every ANA group in the state this gateway reports now. */
  portConfig(p: PortConfig): PortConfig {
    const g = this.#group;
    if (g === undefined) return p;
    return { ...p, anaStates: { ...p.anaStates, ...Object.fromEntries(Object.entries(g.states()).map(([k, v]) => [k, v])) } };
  }

  /** After a port was added: bind its ANA states to the lease. */
  portAdded(): void {
    this.#fenceAt();
  }

  /** Everything hosts must see identically on every gateway (target/gateway/description.ts says why each field). */
  #describe(): GroupDescription {
    return {
      subsystems: [...this.core.subsystems.values()].map((s) => ({
        nqn: s.nqn,
        serial: s.serial,
        model: s.model,
        allowAnyHost: s.allowAnyHost,
        hosts: [...s.hosts],
        namespaces: [...s.namespaces.values()].map((ns) => ({
          nsid: ns.nsid,
          size: String(ns.backend.size),
          blockSize: ns.blockSize,
          anagrpid: ns.anaGroup,
          uuid: ns.uuid.toString('hex'),
          nguid: ns.nguid.toString('hex'),
          readOnly: ns.readOnly,
          hosts: ns.hostMask === undefined ? null : [...ns.hostMask],
        })),
      })),
      keys: keysDigest(this.hostKeys()),
    };
  }

  #fenceAt(): void {
    const until = this.#group?.ownedUntil ?? Infinity;
    for (const port of this.core.ports.values()) port.anaValidUntil = until;
    // The storage call's check: a write already past stoppedBeforeRun is still refused by its writer thread.
    this.writeFence.set(until);
    // Workers serve I/O queues of these ports in other processes: their writes check the same deadline.
    this.core.changed({ kind: 'ana-deadline', until }).catch(() => undefined);
  }

  #onOwnership(e: OwnershipEvent): void {
    if (e.fenced) this.#fences++;
    this.log[e.fenced ? 'warn' : 'info']({ owned: e.owned, states: e.states, fenced: e.fenced, reason: e.reason, counter: e.counter }, e.fenced ? 'gateway group: fenced, reporting no group optimized' : 'gateway group: ownership');
    // States first (fenced: every group not-owned), then the lease deadline the I/O path checks.
    for (const port of this.core.ports.values()) {
      for (const [k, state] of Object.entries(e.states)) {
        const grpid = Number(k);
        if (port.anaStates.get(grpid) !== state) this.setAnaState(port.id, grpid, state);
      }
    }
    this.#fenceAt();
  }

  #onRecord(rec: GroupRecord | undefined): void {
    for (const t of rec?.transitions ?? []) {
      if (t.at <= this.#lastSeenAt) continue;
      const c = (this.#transitions[t.cause] ??= { count: 0, seconds: 0 });
      c.count++;
      c.seconds += Math.max(0, t.at - t.startedAt) / 1000;
    }
    const last = rec?.transitions.at(-1);
    if (last !== undefined) this.#lastSeenAt = Math.max(this.#lastSeenAt, last.at);
  }

  #need(): GatewayGroup {
    if (this.#group === undefined) throw new GatewayNotConfiguredError();
    return this.#group;
  }

  async view(): Promise<GroupView> {
    const g = this.#need();
    // One instant for the states, the record and the fence (sampling tests compare views of several gateways).
    const at = Date.now();
    const rec = g.snapshot;
    const states = g.states();
    const fenced = g.isFenced;
    const ownedUntil = g.ownedUntil;
    // The lease TTLs are etcd's to tell, within LEASE_VIEW_MS: a slow or unreachable etcd (a loaded machine, a
    // partition) leaves them out rather than holding GET /group, which must answer from this gateway's own state.
    const leases = await g.leases(LEASE_VIEW_MS).catch(() => ({}) as Awaited<ReturnType<GatewayGroup['leases']>>);
    return {
      group: g.opts.group,
      self: g.opts.id,
      at,
      fenced,
      ownedUntil,
      counter: rec?.counter ?? 0,
      members: Object.entries(rec?.members ?? {}).map(([id, m]) => ({
        id,
        joinedAt: m.joinedAt,
        cntlid: m.cntlid,
        draining: m.draining === true,
        ports: m.ports,
        ...(leases[id] !== undefined ? { lease: leases[id].lease, ttlLeftS: leases[id].ttlLeftS } : {}),
      })),
      anaGroups: (rec?.groups ?? []).map((x) => ({
        grpid: x.grpid,
        owner: x.owner,
        preferred: x.preferred ?? null,
        next: x.next ?? null,
        hold: x.hold ?? null,
        since: x.since,
        state: states[x.grpid] ?? 'inaccessible',
      })),
      transitions: (rec?.transitions ?? []).map((t) => ({ ...t, durationMs: t.at - t.startedAt })),
    };
  }

  stats(): GatewayStats | undefined {
    const g = this.#group;
    if (g === undefined) return undefined;
    return { fenced: g.isFenced, fences: this.#fences, owned: g.owned().length, transitions: structuredClone(this.#transitions) };
  }

  async failover(grpid: number, to?: string): Promise<GroupView> {
    await this.#need().failover(grpid, to);
    return this.view();
  }

  async failback(grpid: number): Promise<GroupView> {
    await this.#need().failback(grpid);
    return this.view();
  }

  async setDraining(draining: boolean, id?: string): Promise<GroupView> {
    await this.#need().setDraining(draining, id);
    return this.view();
  }

  /** Leave the group: report nothing owned (ANA changes sent), then revoke the lease so the others take over now. */
  async leave(): Promise<void> {
    const g = this.#group;
    if (g === undefined) return;
    this.#shared?.stop();
    await g.close();
    this.log.info({ group: this.#cfg?.group }, 'gateway group left');
  }
}
