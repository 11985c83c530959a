// TargetService: the one management surface (config load, CLI and HTTP API all call it). It owns the core registry
// and the TCP listeners; its parts each keep one concern (target/service/): host keys, persisted reservations, config
// checks and backends, replication to worker processes, and the read views.
import pino, { type Logger } from 'pino';
import { InvalidArgumentError, validateNqn } from '../../protocol/index.js';
import type { FaultRule } from '../config/fault-rules.js';
import type { AnaStateName, FaultConfig, HostConfig, NamespaceConfig, PortConfig, ReferralConfig, SubsystemConfig, TargetConfig } from '../model/config.js';
import type { AuthStats, HostAuthView } from '../core/auth.js';
import { CorePort, Subsystem, TargetCore, WELL_KNOWN_DISCOVERY_NQN, type FaultRuleView, type TargetNamespace } from '../core/index.js';
import type { PersistedResv } from '../core/reservation.js';
import { TcpListener, type TlsStats } from '../transport/tcp/index.js';
import type { Placement, WorkerView } from '../workers/index.js';
import { checkCntlidRange, checkName, checkPlacement, checkPort, checkSubsystem } from './config-translation.js';
import { HostKeys } from './keys.js';
import { debugCounts, listControllers, targetStats, type ControllerInfo, type DebugCounts, type TargetStats } from './reports.js';
import { Replication } from './replication.js';
import { ReservationStore } from './reservations-store.js';
import { Namespaces } from './namespaces.js';
import { GatewayPart, type GatewayStats, type GroupView } from './gateway.js';
import { setZoneCondition, zoneView, type ZoneView } from './zone-state.js';
import { saveZones } from '../core/cmd/zns.js';

export type { GatewayStats, GroupView } from './gateway.js';
export type { ControllerInfo, DebugCounts, LatencyStats, NamespaceStats, QueueInfo, TargetStats } from './reports.js';

export interface TargetServiceOptions {
  logger?: Logger;
  /** Seconds a new connection may stay silent before ICReq (and before Connect); fractions allowed for tests. */
  icReqTimeoutS?: number;
  /**
   * Worker processes serving I/O queues (target/workers; docs/target.md "Target workers"). 1 (default): everything
   * runs in this process, as before. N > 1: this process keeps accept, ICReq/Connect, admin queues and all
   * controller-wide state, and hands every connected I/O queue to one of N workers chosen by `placement`.
   */
  workers?: number;
  /** Which worker gets a new I/O queue (default 'queue'); changeable at runtime with setPlacement. */
  placement?: Placement;
  /** Worker entry module (tests); default target/workers/worker-main.ts. */
  workerEntry?: string;
  /** Node flags for the worker processes only (e.g. --cpu-prof); the bin takes them from NVME_TCP_WORKER_NODE_ARGS. */
  workerNodeArgs?: readonly string[];
  /** OpenSSL's trace of every TLS handshake on stderr; the bin sets it from NVME_TCP_TLS_TRACE=1 (docs/tls.md). */
  tlsTrace?: boolean;
  /**
   * File holding the reservations of namespaces with Persist Through Power Loss on (NVMe Base 2.0 §8.19.3): read at
   * construction, replaced atomically on every change. Omitted: PTPL can be set but nothing survives a restart.
   */
  resvStatePath?: string;
}

export interface BoundPort {
  id: number;
  addr: string;
  /** Actual TCP port (differs from the config when it asked for 0). */
  port: number;
}

export class TargetService {
  readonly #core: TargetCore;
  readonly #listeners = new Map<number, TcpListener>();
  readonly #log: Logger;
  readonly #icReqTimeoutMs: number;
  readonly #tlsTrace: boolean;
  readonly #keys: HostKeys;
  readonly #resv: ReservationStore;
  readonly #workers: Replication;
  #placement: Placement;
  #stopped = false;
  readonly #ns: Namespaces;
  readonly #gw: GatewayPart;

  constructor(opts: TargetServiceOptions = {}) {
    this.#log = opts.logger ?? pino({ level: 'silent' });
    this.#icReqTimeoutMs = Math.max(1, Math.round((opts.icReqTimeoutS ?? 10) * 1000));
    this.#core = new TargetCore(this.#log);
    this.#keys = new HostKeys(this.#core, this.#log);
    this.#tlsTrace = opts.tlsTrace === true;
    const n = opts.workers ?? 1;
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('workers', `${String(n)} is not a worker count; use an integer >= 1`);
    const p = checkPlacement('placement', opts.placement ?? 'queue');
    this.#placement = p;
    this.#workers = new Replication(this.#core, this.#log, { count: n, placement: p, entry: opts.workerEntry, nodeArgs: opts.workerNodeArgs });
    // Every change to exported state reaches the workers through the core (TargetCore.changed), never by each operation.
    if (this.#workers.enabled) this.#core.mirror = this.#workers;
    this.#resv = new ReservationStore(opts.resvStatePath, this.#log);
    this.#ns = new Namespaces(this.#core, this.#log, this.#workers, this.#resv, (nqn) => this.#subsys(nqn));
    this.#gw = new GatewayPart(this.#core, this.#log, (portId, grpid, state) => this.setAnaState(portId, grpid, state), () => this.#keys.configEntries(true), this.#ns);
  }

  /**
   * Start the worker processes (workers > 1); apply() and addPort() call it first. Rejects with the reason when a
   * worker cannot start, with none left running.
   */
  async startWorkers(): Promise<void> {
    if (!this.#stopped) await this.#workers.start();
  }

  /** Worker processes (empty with workers 1): state, queues, CPU, I/Os, bytes, event-loop lag. */
  workers(): WorkerView[] {
    return this.#workers.workers();
  }

  get placement(): Placement {
    return this.#placement;
  }

  /** Change the placement policy for queues connected from now on (queues already placed stay where they are). */
  setPlacement(p: string): void {
    this.#placement = checkPlacement('placement', p);
    const pool = this.#workers.pool;
    if (pool !== undefined) pool.placement = this.#placement;
  }

  /**
   * Placement for I/O queues arriving on port `portId` from now on (PortConfig.placement); null: back to the
   * target-wide one. Queues already placed stay where they are.
   */
  setPortPlacement(portId: number, p: string | null): void {
    const port = this.#port(portId);
    port.placement = p === null ? undefined : checkPlacement('ports.placement', p, true);
    this.#workers.pool?.setPortPlacement(portId, port.placement);
  }

  /** Every port's own placement (null: none) and the one its new queues get. */
  portPlacements(): { portId: number; placement: Placement | null; effective: Placement }[] {
    return [...this.#core.ports.values()].map((p) => ({ portId: p.id, placement: p.placement ?? null, effective: p.placement ?? this.#placement }));
  }

  /** Reservation state of one namespace as the API and ctl show it. */
  reservationStatus(subnqn: string, nsid: number): PersistedResv {
    const sub = this.#subsys(subnqn);
    if (!sub.namespaces.has(nsid)) throw new InvalidArgumentError('nsid', `no namespace ${nsid} in ${subnqn}`);
    return sub.reservation(nsid).snapshot();
  }

  async apply(config: TargetConfig): Promise<void> {
    await this.startWorkers();
    if (config.discoveryNqn !== undefined) this.setDiscoveryNqn(config.discoveryNqn);
    for (const h of config.hosts ?? []) if (h.dhchapKey !== undefined) this.setHostAuth(h);
    for (const h of config.hosts ?? []) if (h.tlsKey !== undefined) this.setHostTlsKey(h);
    if (config.gateway === undefined) {
      for (const p of config.ports) await this.addPort(p);
      for (const s of config.subsystems) await this.addSubsystem(s);
      return;
    }
    // A gateway: subsystems first (the group's description needs the backends' sizes), then join (which gives this
    // gateway its controller-ID range and the ANA states it reports), and only then listen, so no host ever meets a
    // port whose states or CNTLIDs are not the group's.
    // Its file namespaces write through the gateway's fence, set with the ports' deadline from the join on.
    this.#ns.writeFence = this.#gw.writeFence;
    for (const s of config.subsystems) await this.addSubsystem(s);
    await this.#gw.join(config.gateway, config.ports);
    for (const p of config.ports) await this.addPort(this.#gw.portConfig(p));
    this.#gw.portAdded();
  }

  /** The gateway group as this gateway sees it (GET /group); throws when this target is not a gateway. */
  groupView(): Promise<GroupView> {
    return this.#gw.view();
  }

  /** Move ANA group `grpid` to member `to` (default: the least loaded other one) and keep it there until failback. */
  groupFailover(grpid: number, to?: string): Promise<GroupView> {
    return this.#gw.failover(grpid, to);
  }

  /** Return ANA group `grpid` to its preferred gateway (after the failback delay). */
  groupFailback(grpid: number): Promise<GroupView> {
    return this.#gw.failback(grpid);
  }

  /** Drain (`ctl gateway disable`: hand every group away, take none) or undrain a member (default this one). */
  setGatewayDraining(draining: boolean, id?: string): Promise<GroupView> {
    return this.#gw.setDraining(draining, id);
  }

  /** Fencing and transition counters for /metrics; undefined when this target is not a gateway. */
  gatewayStats(): GatewayStats | undefined {
    return this.#gw.stats();
  }

  /**
   * Require DH-HMAC-CHAP from a host (nvmet hosts/<nqn>/dhchap_key, dhchap_ctrl_key, dhchap_hash, dhchap_dhgroup).
   * Applies to controllers created afterwards; established ones keep the keys they connected with. Secrets are
   * parsed here and never logged or echoed in errors.
   */
  setHostAuth(h: HostConfig): void {
    this.#keys.setHostAuth(h);
  }

  /**
   * Give a host a TLS PSK (TP 8011; nvmet keys it in the kernel keyring by identity, we by host NQN): new TLS
   * connections whose ClientHello identity names this host use it. Parsed here; never logged or echoed in errors.
   */
  setHostTlsKey(h: HostConfig): void {
    this.#keys.setHostTlsKey(h);
  }

  clearHostTlsKey(hostnqn: string): void {
    this.#keys.clearHostTlsKey(hostnqn);
  }

  /** TLS handshakes completed and failed since start, failures by reason. */
  tlsStats(): TlsStats {
    return this.#keys.tlsStats();
  }

  /** Stop requiring authentication from a host (new controllers only). */
  clearHostAuth(hostnqn: string): void {
    this.#keys.clearHostAuth(hostnqn);
  }

  /** Hosts with keys, secrets shown as "<redacted>". */
  listHostAuth(): HostAuthView[] {
    return this.#keys.listHostAuth();
  }

  /** DH-HMAC-CHAP transactions completed, failed and expired since start. */
  authStats(): AuthStats {
    return this.#keys.authStats();
  }

  async addPort(p: PortConfig): Promise<BoundPort> {
    if (this.#listeners.has(p.id)) throw new InvalidArgumentError('ports.id', `port ${p.id} already exists`);
    checkPort(p);
    await this.startWorkers();
    const port = new CorePort(p);
    await this.#core.changed({ kind: 'port', port });
    const pool = this.#workers.pool;
    const tlsMode = p.tls ?? 'none';
    const tls =
      tlsMode === 'none'
        ? undefined
        : { mode: tlsMode, keys: this.#keys.tls, handshakeTimeoutMs: Math.round((p.tlsHandshakeTimeoutS ?? 10) * 1000), ...(p.tlsConcat === true ? { concat: true } : {}), ...(this.#tlsTrace ? { trace: true } : {}) };
    const l = new TcpListener(this.#core, port, { icReqTimeoutMs: this.#icReqTimeoutMs, ...(pool !== undefined ? { handOff: pool } : {}) }, tls);
    const bound = await l.listen();
    this.#core.ports.set(p.id, port);
    pool?.setPortPlacement(p.id, port.placement);
    this.#listeners.set(p.id, l);
    this.#core.discoveryChanged();
    return { id: p.id, addr: bound.addr, port: bound.port };
  }

  async removePort(id: number): Promise<void> {
    const l = this.#listeners.get(id);
    if (l === undefined) throw new InvalidArgumentError('portId', `no port ${id}`);
    this.#listeners.delete(id);
    this.#core.ports.delete(id);
    const closing = l.close(true);
    await this.#core.changed({ kind: 'port-removed', id });
    await closing;
    this.#core.discoveryChanged();
  }

  boundPorts(): BoundPort[] {
    const out: BoundPort[] = [];
    for (const [id, l] of this.#listeners) {
      const b = l.bound;
      if (b !== undefined) out.push({ id, addr: b.addr, port: b.port });
    }
    return out;
  }

  async addSubsystem(s: SubsystemConfig): Promise<void> {
    checkSubsystem(this.#log, this.#core, s);
    await this.startWorkers();
    const sub = new Subsystem({ ...s, namespaces: [] });
    sub.onResvChanged = (x, nsid) => {
      this.#resv.changed(x, nsid);
      this.#workers.resvChanged(x, nsid);
    };
    // With workers the primary owns the state; a change completes once every worker has it (docs/target.md).
    sub.resvCommit = this.#workers.resvCommit(sub);
    sub.formatNs = async (nsid, blockSize) => {
      const cur = sub.namespaces.get(nsid);
      if (cur !== undefined) await this.updateNamespace(sub.nqn, { ...cur.snapshot(), blockSize });
    };
    this.#core.subsystems.set(s.nqn, sub);
    try {
      for (const ns of s.namespaces ?? []) await this.#ns.addToNew(sub, ns);
      await this.#core.changed({ kind: 'subsystem', sub });
    } catch (err) {
      this.#core.subsystems.delete(s.nqn);
      await this.#core.changed({ kind: 'subsystem-removed', nqn: s.nqn }).catch(() => undefined);
      for (const ns of sub.namespaces.values()) await ns.backend.close();
      throw err;
    }
    this.#core.discoveryChanged();
    this.#log.info({ subnqn: s.nqn, namespaces: sub.nsids.length }, 'subsystem added');
  }

  async removeSubsystem(nqn: string): Promise<void> {
    const sub = this.#subsys(nqn);
    this.#core.subsystems.delete(nqn);
    for (const c of [...sub.controllers.values()]) c.teardown('subsystem removed');
    await this.#core.changed({ kind: 'subsystem-removed', nqn });
    for (const ns of sub.namespaces.values()) await ns.backend.close();
    this.#core.discoveryChanged();
    this.#log.info({ subnqn: nqn }, 'subsystem removed');
  }

  async addNamespace(subnqn: string, ns: NamespaceConfig): Promise<void> {
    await this.#ns.addNamespace(subnqn, ns);
  }

  async removeNamespace(subnqn: string, nsid: number): Promise<void> {
    await this.#ns.removeNamespace(subnqn, nsid);
  }

  /**
   * Change a namespace in place (nvmet namespaces/<nsid>/{enable,device_path,device_uuid,...}); `next` is its whole
   * new config, nsid unchanged. Only `enabled` different: attached or detached, keeping its backend and identifiers;
   * anything else: re-mapped, a new namespace under the same NSID. Either way hosts get a Namespace Attribute Changed
   * notice (nvmet_ns_changed).
   */
  async updateNamespace(subnqn: string, next: NamespaceConfig): Promise<void> {
    await this.#ns.updateNamespace(subnqn, next);
  }

  /**
   * Change subsystem attributes at runtime. maxIoQueues (nvmet attr_qid_max): every controller of the subsystem is
   * disconnected so hosts reconnect and negotiate the new count, as nvmet_subsys_attr_qid_max_store forces. The
   * controller-ID range (attr_cntlid_min/max) applies to controllers created afterwards.
   */
  updateSubsystem(nqn: string, patch: Pick<SubsystemConfig, 'maxIoQueues' | 'cntlidMin' | 'cntlidMax'>): void {
    const sub = this.#subsys(nqn);
    const min = patch.cntlidMin ?? sub.cntlidMin;
    const max = patch.cntlidMax ?? sub.cntlidMax;
    checkCntlidRange(min, max);
    const q = patch.maxIoQueues;
    if (q !== undefined && (!Number.isInteger(q) || q < 1 || q > 65535)) throw new InvalidArgumentError('maxIoQueues', `${q} is not a queue count; use 1..65535`);
    sub.cntlidMin = min;
    sub.cntlidMax = max;
    if (q !== undefined && q !== sub.maxIoQueues) {
      sub.maxIoQueues = q;
      this.#log.info({ subnqn: nqn, maxIoQueues: q, controllers: sub.controllers.size }, 'maxIoQueues changed: disconnecting controllers so hosts reconnect with it');
      for (const c of [...sub.controllers.values()]) c.teardown('maxIoQueues changed');
    }
  }

  addAllowedHost(subnqn: string, hostnqn: string): void {
    const sub = this.#subsys(subnqn);
    checkName(this.#log, 'hostnqn', 'host', hostnqn);
    sub.hosts.add(hostnqn);
    if (sub.config.allowAnyHost !== true) sub.allowAnyHost = false;
    this.#core.discoveryChanged();
  }

  removeAllowedHost(subnqn: string, hostnqn: string): void {
    const sub = this.#subsys(subnqn);
    sub.hosts.delete(hostnqn);
    this.#core.discoveryChanged();
  }

  /** Allow every host, or only the listed ones. */
  setAllowAnyHost(subnqn: string, allow: boolean): void {
    this.#subsys(subnqn).allowAnyHost = allow;
    this.#core.discoveryChanged();
  }

  setAnaState(portId: number, anaGroup: number, state: AnaStateName): void {
    const port = this.#port(portId);
    if (!Number.isInteger(anaGroup) || anaGroup < 1 || anaGroup > 128) throw new InvalidArgumentError('anaGroup', 'must be 1..128');
    port.anaStates.set(anaGroup, state);
    port.anaChangeCount++;
    // Workers check ANA on every I/O command (nvmet_check_ana_state) and apply the new state before the hosts hear
    // of it, so I/O a host sends after the AEN meets it everywhere.
    this.#core.changedThen({ kind: 'port', port }, 'ANA change', { portId }, () => this.#core.anaChanged(portId));
    this.#log.info({ portId, anaGroup, state }, 'ANA state changed');
  }

  addReferral(portId: number, r: ReferralConfig): void {
    const port = this.#port(portId);
    port.referrals.push({ ...r });
    this.#core.discoveryChanged();
  }

  removeReferral(portId: number, addr: string, port: number): void {
    const p = this.#port(portId);
    const i = p.referrals.findIndex((r) => r.addr === addr && r.port === port);
    if (i < 0) throw new InvalidArgumentError('referral', `no referral ${addr}:${port} on port ${portId}`);
    p.referrals.splice(i, 1);
    this.#core.discoveryChanged();
  }

  setFaults(subnqn: string, f: FaultConfig): void {
    const sub = this.#subsys(subnqn);
    sub.setFaults(f);
    this.#core.changedThen({ kind: 'subsystem', sub }, 'faults', { subnqn });
  }

  /**
   * Arms a fault rule (validated by parseFaultRule; docs/faults.md) for every queue from its next command on. The
   * rules act in this process: with worker processes, I/O queues handed to a worker do not see them.
   */
  addFaultRule(rule: FaultRule): FaultRuleView {
    return this.#core.faults.add(rule);
  }

  /** Disarms one fault rule; false when none has that id. */
  removeFaultRule(id: string): boolean {
    return this.#core.faults.remove(id);
  }

  /** Disarms every fault rule; returns how many there were. */
  clearFaultRules(): number {
    return this.#core.faults.clear();
  }

  /** The fault rules with their match and hit counts. */
  listFaultRules(): FaultRuleView[] {
    return this.#core.faults.list();
  }

  /** Namespace masking at runtime: attach `nsid` to one more host (only that host's controllers get the notice). */
  attachNamespaceHost(subnqn: string, nsid: number, hostnqn: string): Promise<void> | undefined {
    // A promise in a gateway group (the change goes through etcd); applied at once otherwise.
    return this.#ns.attachNamespaceHost(subnqn, nsid, hostnqn);
  }

  /** Detach `nsid` from one host (from an all-hosts namespace: every allowed host but this one keeps it). */
  detachNamespaceHost(subnqn: string, nsid: number, hostnqn: string): Promise<void> | undefined {
    return this.#ns.detachNamespaceHost(subnqn, nsid, hostnqn);
  }

  /** Hosts a namespace is attached to; undefined = every allowed host. */
  namespaceHosts(subnqn: string, nsid: number): string[] | undefined {
    return this.#ns.namespaceHosts(subnqn, nsid);
  }

  /** The zones of a zoned namespace as Zone Management Receive reports them; undefined for a conventional one. */
  zones(subnqn: string, nsid: number): ZoneView[] | undefined {
    return zoneView(this.#nsOf(subnqn, nsid));
  }

  /**
   * A zone's medium condition (ZNS 1.1 §2.1.1.6–7): read only, or offline, as a drive reports a failing zone. The
   * zone state table refuses what a medium cannot do (an offline zone never comes back).
   */
  setZoneCondition(subnqn: string, nsid: number, zone: number, cond: 'read-only' | 'offline'): void {
    setZoneCondition(this.#nsOf(subnqn, nsid), zone, cond);
  }

  setDiscoveryNqn(nqn: string): void {
    const v = validateNqn(nqn);
    if (!v.ok) throw new InvalidArgumentError('discoveryNqn', v.reason);
    this.#core.uniqueDiscoveryNqn = nqn === WELL_KNOWN_DISCOVERY_NQN ? undefined : nqn;
    this.#core.discoveryChanged();
  }

  /**
   * The live configuration. Host DH-HMAC-CHAP secrets read "<redacted>" unless `includeSecrets` is set (only for
   * writing the config file back, never for API responses or logs).
   */
  getConfig(opts: { includeSecrets?: boolean } = {}): TargetConfig {
    const cfg: TargetConfig = {
      ports: [...this.#core.ports.values()].map((p) => p.snapshot()),
      subsystems: [...this.#core.subsystems.values()].map((s) => s.snapshot()),
    };
    const hosts = this.#keys.configEntries(opts.includeSecrets === true);
    if (hosts !== undefined) cfg.hosts = hosts;
    if (this.#core.uniqueDiscoveryNqn !== undefined) cfg.discoveryNqn = this.#core.uniqueDiscoveryNqn;
    if (this.#icReqTimeoutMs !== 10_000) cfg.icReqTimeoutS = this.#icReqTimeoutMs / 1000;
    if (this.#gw.config !== undefined) cfg.gateway = structuredClone(this.#gw.config);
    return cfg;
  }

  listControllers(): ControllerInfo[] {
    return listControllers(this.#core);
  }

  /** Counts for leak checks (reliability suites, fuzzer): every number must return to its baseline once connections die. */
  debugCounts(): DebugCounts {
    return debugCounts(this.#core, this.#listeners.values());
  }

  stats(): TargetStats {
    return targetStats(this.#core, this.#keys.tls.stats, this.#workers.namespaceReports(), this.#workers.refusalReports());
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    // Leave the group first: hosts hear every group go not-optimized here and move while the ports still answer.
    await this.#gw.leave();
    const listeners = [...this.#listeners.values()];
    this.#listeners.clear();
    // Stop accepting, let in-flight commands finish (bounded), then close every connection.
    const closing = listeners.map((l) => l.close(false));
    await Promise.all(listeners.flatMap((l) => [...l.queues].map((q) => q.drain(2000))));
    await this.#workers.stop();
    for (const s of [this.#core.discovery, ...this.#core.subsystems.values()]) for (const c of [...s.controllers.values()]) c.teardown('target stopping');
    for (const l of listeners) for (const q of [...l.queues]) q.close('target stopping');
    await Promise.all(closing);
    for (const ns of this.#core.allNamespaces()) {
      // A zoned file namespace's zones as they are at stop (target/zone-state.ts); a failed save leaves the last one.
      await new Promise<void>((resolve) => saveZones(ns, () => resolve()));
      await ns.backend.close();
    }
    this.#core.ports.clear();
    this.#log.info('target stopped');
  }

  #subsys(nqn: string): Subsystem {
    const s = this.#core.subsystems.get(nqn);
    if (s === undefined) throw new InvalidArgumentError('subnqn', `no subsystem ${nqn}`);
    return s;
  }

  #nsOf(subnqn: string, nsid: number): TargetNamespace {
    const ns = this.#subsys(subnqn).namespaces.get(nsid);
    if (ns === undefined) throw new InvalidArgumentError('nsid', `no namespace ${nsid} in ${subnqn}`);
    return ns;
  }

  #port(id: number): CorePort {
    const p = this.#core.ports.get(id);
    if (p === undefined) throw new InvalidArgumentError('portId', `no port ${id}`);
    return p;
  }

}
