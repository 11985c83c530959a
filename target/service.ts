// TargetService: the one management surface (config load, CLI and HTTP API all call it). It owns the core registry
// and the TCP listeners and translates config objects into core objects.
import pino, { type Logger } from 'pino';
import { Buffer } from 'node:buffer';
import { DNR, InvalidArgumentError, Status, formatUuid, validateNqn, validateNvmetName } from '../protocol/index.js';
import { FileBackend, NullBackend, RamBackend, type NamespaceBackend } from './backend/index.js';
import { nqnWarning } from './config/schema.js';
import { parseSize } from './config/size.js';
import { DhchapKeyError, parseDhchapSecret, type DhGroupId, type HashId } from '../protocol/auth/index.js';
import { DEFAULT_HKDF_ENCODING, TlsKeyError, deriveConcatTlsPsk, parseTlsKey } from '../protocol/tls/index.js';
import type { AnaStateName, FaultConfig, HostConfig, NamespaceConfig, PortConfig, ReferralConfig, SubsystemConfig, TargetConfig } from './config/types.js';
import { DH_GROUP_BY_NAME, HASH_NAMES, type AuthStats, type HostAuth, type HostAuthView } from './core/auth.js';
import { CNTLID_MAX, CNTLID_MIN, CorePort, LATENCY_BOUNDS_US, Namespace, Subsystem, TargetCore, WELL_KNOWN_DISCOVERY_NQN, runResvCommand, type QueueCounters } from './core/index.js';
import type { NamespaceCounters } from './core/namespace.js';
import { TcpListener, TlsKeyStore, type TlsStats } from './transport/tcp/index.js';
import { ShmBackend, WorkerPool, isPlacement, PLACEMENTS, type NsOpen, type Placement, type PortSpec, type SubsysSpec, type WorkerView } from './workers/index.js';
import type { PersistedResv } from './core/reservation.js';
import { loadResvState, resvStateKey, saveResvState } from './resv-state.js';

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

export interface QueueInfo extends QueueCounters {
  qid: number;
  peer: string;
  state: string;
  inFlight: number;
  sqsize: number;
  /** DH-HMAC-CHAP state of the queue when its host must authenticate (no key material). */
  auth?: { state: string; authenticated: boolean; hash?: string; dhgroup?: string; bidirectional?: boolean };
  /** The queue's connection is a TLS 1.3 session (TP 8011). */
  tls?: boolean;
  /** Worker process serving this I/O queue (workers > 1); absent: this process (admin queues, authenticated hosts). */
  worker?: number;
}

export interface ControllerInfo {
  cntlid: number;
  subnqn: string;
  hostnqn: string;
  hostid: string;
  kato: number;
  discovery: boolean;
  portId: number;
  /** Epoch ms of the last Keep Alive command, or null if none came yet. */
  lastKeepAlive: number | null;
  /**
   * Epoch ms of the last command on any of its queues, or null. The target advertises TBKAS (CTRATT bit 6), so
   * any command also keeps the controller alive: the Linux host skips Keep Alive while I/O flows.
   */
  lastCommand: number | null;
  queues: QueueInfo[];
}

/** Latency of one opcode from capsule receipt to completion (nvme_tcp_command_latency_seconds). */
export interface LatencyStats {
  /** Upper bucket bounds in µs (log-spaced 10 µs .. 100 ms). */
  boundsUs: readonly number[];
  /** Per bucket, not cumulative: counts[i] is commands in (boundsUs[i-1], boundsUs[i]]; one extra last +Inf bucket. */
  counts: readonly number[];
  sumUs: number;
  count: number;
}

export interface NamespaceStats extends NamespaceCounters {
  nsid: number;
}

export interface TargetStats {
  subsystems: Record<string, { controllers: number; opcodes: Record<string, number>; latency: Record<string, LatencyStats>; namespaces: NamespaceStats[] }>;
  pduErrorsByFes: Record<string, number>;
  dataDigestErrors: number;
  katoExpiries: number;
  /** rejected: closed at accept because the port's maxConnections was reached. */
  connections: { accepted: number; active: number; rejected: number };
  connects: { ok: number; failed: number };
  /** TLS handshakes on TLS ports (TP 8011). */
  tls?: { handshakesOk: number; handshakesFailed: number };
}

/** Leak-counting view of the live object graph (reliability tests compare it before and after faults). */
export interface DebugCounts {
  /** Live controllers, discovery controllers included. */
  controllers: number;
  /** Queues bound to those controllers (admin + I/O). */
  queues: number;
  /** Accepted TCP connections not yet closed, in any state (waiting for ICReq/Connect included). */
  connections: number;
  /** Connections not yet bound to a controller (no ICReq or no Connect yet). */
  unboundConnections: number;
  /** Commands received and not completed, AERs excluded (they stay posted by design). */
  pendingRequests: number;
  /** Posted Asynchronous Event Requests. */
  aersPosted: number;
  /** Node handles of this process by type (TCPSocketWrap, Timeout, FSReqCallback, ...). */
  handles: Record<string, number>;
}

export class TargetService {
  readonly #core: TargetCore;
  readonly #listeners = new Map<number, TcpListener>();
  readonly #log: Logger;
  readonly #icReqTimeoutMs: number;
  /** Host entries as configured (with their secrets), for getConfig({ includeSecrets: true }) / write-back. */
  readonly #hostConfigs = new Map<string, HostConfig>();
  /** TLS PSKs by host (TP 8011), shared by every TLS port, and the entries as configured for getConfig. */
  readonly #tlsKeys = new TlsKeyStore();
  readonly #tlsHosts = new Map<string, Pick<HostConfig, 'tlsKey' | 'tlsHkdf'>>();
  #stopped = false;
  #nsChain: Promise<void> = Promise.resolve();
  readonly #workerCount: number;
  #placement: Placement;
  readonly #workerEntry: string | undefined;
  #pool: WorkerPool | undefined;
  #poolStart: Promise<void> | undefined;
  readonly #resvPath: string | undefined;
  /** Persisted reservations by resvStateKey: what is on disk (PTPL on), plus entries for namespaces not yet added. */
  readonly #resvState: Map<string, PersistedResv>;

  constructor(opts: TargetServiceOptions = {}) {
    this.#log = opts.logger ?? pino({ level: 'silent' });
    this.#icReqTimeoutMs = Math.max(1, Math.round((opts.icReqTimeoutS ?? 10) * 1000));
    this.#core = new TargetCore(this.#log);
    this.#core.onGeneratedPsk = (e) => this.#installGeneratedPsk(e);
    // NVME_TCP_TARGET_WORKERS / NVME_TCP_TARGET_PLACEMENT: defaults for services that set neither (lets a whole
    // suite, e.g. test/interop, run against workers without changing its code).
    const envWorkers = process.env.NVME_TCP_TARGET_WORKERS;
    const n = opts.workers ?? (envWorkers !== undefined && envWorkers !== '' ? Number(envWorkers) : 1);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('workers', `${String(n)} is not a worker count; use an integer >= 1`);
    this.#workerCount = n;
    const p = opts.placement ?? (process.env.NVME_TCP_TARGET_PLACEMENT || 'queue');
    if (!isPlacement(p)) throw new InvalidArgumentError('placement', `unknown placement ${JSON.stringify(p)}; use one of ${PLACEMENTS.join(', ')}`);
    this.#placement = p;
    this.#workerEntry = opts.workerEntry;
    this.#resvPath = opts.resvStatePath;
    this.#resvState = this.#resvPath === undefined ? new Map() : loadResvState(this.#resvPath);
  }

  /**
   * Start the worker processes (workers > 1); apply() and addPort() call it first. Rejects with the reason when a
   * worker cannot start, with none left running.
   */
  async startWorkers(): Promise<void> {
    if (this.#workerCount <= 1 || this.#stopped) return;
    if (this.#poolStart === undefined) {
      const pool = new WorkerPool({
        count: this.#workerCount,
        placement: this.#placement,
        logger: this.#log,
        logLevel: this.#log.level,
        state: () => this.#workerState(),
        resvCommand: (m) => this.#forwardedResv(m.nqn, m.nsid, m.hostid, m.opcode, m.cdw10, m.data),
        ...(this.#workerEntry !== undefined ? { entry: this.#workerEntry } : {}),
      });
      this.#poolStart = pool.start().then(() => {
        this.#pool = pool;
        this.#log.info({ workers: pool.count, placement: pool.placement }, 'worker processes ready');
      });
    }
    await this.#poolStart;
  }

  /** Worker processes (empty with workers 1): state, queues, CPU, I/Os, bytes, event-loop lag. */
  workers(): WorkerView[] {
    return this.#pool?.workers() ?? [];
  }

  get placement(): Placement {
    return this.#placement;
  }

  /** Change the placement policy for queues connected from now on (queues already placed stay where they are). */
  setPlacement(p: string): void {
    if (!isPlacement(p)) throw new InvalidArgumentError('placement', `unknown placement ${JSON.stringify(p)}; use one of ${PLACEMENTS.join(', ')}`);
    this.#placement = p;
    if (this.#pool !== undefined) this.#pool.placement = p;
  }

  /**
   * Placement for I/O queues arriving on port `portId` from now on (PortConfig.placement); null: back to the
   * target-wide one. Queues already placed stay where they are.
   */
  setPortPlacement(portId: number, p: string | null): void {
    const port = this.#port(portId);
    if (p !== null && !isPlacement(p)) throw new InvalidArgumentError('ports.placement', `unknown placement ${JSON.stringify(p)}; use one of ${PLACEMENTS.join(', ')}, or null for the target-wide one`);
    port.placement = p ?? undefined;
    this.#pool?.setPortPlacement(portId, port.placement);
  }

  /** Every port's own placement (null: none) and the one its new queues get. */
  portPlacements(): { portId: number; placement: Placement | null; effective: Placement }[] {
    return [...this.#core.ports.values()].map((p) => ({ portId: p.id, placement: p.placement ?? null, effective: p.placement ?? this.#placement }));
  }

  #portSpec(p: CorePort): PortSpec {
    return { config: p.snapshot(), anaChangeCount: p.anaChangeCount.toString() };
  }

  #subsysSpec(sub: Subsystem): SubsysSpec {
    const { namespaces: _n, ...config } = sub.snapshot();
    return {
      config,
      faults: { ...sub.faults },
      namespaces: [...sub.namespaces.values()].map((ns) => ({ config: ns.config, enabled: ns.enabled, open: nsOpen(ns) })),
      resv: [...sub.reservations].map(([nsid, rs]) => [nsid, rs.replica()]),
    };
  }

  #workerState(): { ports: PortSpec[]; subsystems: SubsysSpec[] } {
    return { ports: [...this.#core.ports.values()].map((p) => this.#portSpec(p)), subsystems: [...this.#core.subsystems.values()].map((s) => this.#subsysSpec(s)) };
  }

  /** Bring the workers' copy of a subsystem in line (before its AENs go out, so a host's next I/O finds it there). */
  async #syncSubsystem(sub: Subsystem): Promise<void> {
    if (this.#pool !== undefined && this.#core.subsystems.get(sub.nqn) === sub) await this.#pool.syncSubsystem(this.#subsysSpec(sub));
  }

  /** A namespace's reservation state changed: keep the file in step when PTPL is (or was) on. */
  #resvChanged(sub: Subsystem, nsid: number): void {
    const key = resvStateKey(sub.nqn, nsid);
    const rs = sub.reservations.get(nsid);
    if (rs !== undefined && rs.ptpl) this.#resvState.set(key, rs.snapshot());
    else if (!this.#resvState.delete(key)) return;
    if (this.#resvPath === undefined) return;
    try {
      saveResvState(this.#resvPath, this.#resvState);
    } catch (err) {
      this.#log.error({ err, file: this.#resvPath, subnqn: sub.nqn, nsid }, 'saving reservation state failed; it will not survive a restart');
    }
  }

  /** The latest replication of each namespace's reservation state to the workers (resolves when all applied it). */
  readonly #resvSynced = new Map<string, Promise<void>>();

  /** Send a namespace's changed reservation state to every worker; never rejects (a dead worker gets it on restart). */
  #replicateResv(sub: Subsystem, nsid: number): void {
    const pool = this.#pool;
    const rs = sub.reservations.get(nsid);
    if (pool === undefined || rs === undefined || this.#core.subsystems.get(sub.nqn) !== sub) return;
    const key = resvStateKey(sub.nqn, nsid);
    const p = pool.syncResv(sub.nqn, nsid, rs.replica()).catch((err: Error) => {
      this.#log.error({ err: err.message, subnqn: sub.nqn, nsid }, 'reservation state not applied on a worker');
    });
    this.#resvSynced.set(key, p);
    void p.then(() => {
      if (this.#resvSynced.get(key) === p) this.#resvSynced.delete(key);
    });
  }

  /** A Register / Acquire / Release from a worker queue, run on the one state; the status once every worker has it. */
  async #forwardedResv(nqn: string, nsid: number, hostidHex: string, opcode: number, cdw10: number, data: string): Promise<number> {
    const sub = this.#core.subsystems.get(nqn);
    const ns = sub?.namespaces.get(nsid);
    if (sub === undefined || ns === undefined || !ns.enabled) return Status.INVALID_NS | DNR;
    const hostid = Buffer.from(hostidHex, 'hex');
    const status = runResvCommand(sub.reservation(nsid), hostidHex, hostid, opcode, cdw10, Buffer.from(data, 'base64'));
    if (status === 0) await sub.resvCommit?.(nsid);
    return status;
  }

  /** Bring back a namespace's persisted reservations (target start, or the namespace added again). */
  #restoreResv(sub: Subsystem, nsid: number): void {
    const p = this.#resvState.get(resvStateKey(sub.nqn, nsid));
    if (p === undefined || !p.ptpl) return;
    try {
      sub.reservation(nsid).restore(p);
      this.#log.info({ subnqn: sub.nqn, nsid, rtype: p.rtype, registrants: p.registrants.length }, 'reservations restored (PTPL)');
    } catch (err) {
      this.#log.error({ err, subnqn: sub.nqn, nsid }, 'persisted reservation state is malformed; starting without it');
    }
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
    for (const p of config.ports) await this.addPort(p);
    for (const s of config.subsystems) await this.addSubsystem(s);
  }

  /**
   * Require DH-HMAC-CHAP from a host (nvmet hosts/<nqn>/dhchap_key, dhchap_ctrl_key, dhchap_hash, dhchap_dhgroup).
   * Applies to controllers created afterwards; established ones keep the keys they connected with. Secrets are
   * parsed here and never logged or echoed in errors.
   */
  setHostAuth(h: HostConfig): void {
    this.#checkName('hosts.nqn', 'host', h.nqn);
    if (h.dhchapKey === undefined) throw new InvalidArgumentError('hosts.dhchapKey', 'is required to enable authentication (use clearHostAuth to disable it)');
    const auth: HostAuth = { hostKey: parseSecret('hosts.dhchapKey', h.dhchapKey) };
    if (h.dhchapCtrlKey !== undefined) auth.ctrlKey = parseSecret('hosts.dhchapCtrlKey', h.dhchapCtrlKey);
    if (h.dhchapHash !== undefined) auth.hashes = namesToIds('hosts.dhchapHash', h.dhchapHash, HASH_NAMES);
    if (h.dhchapDhgroup !== undefined) auth.dhGroups = namesToIds('hosts.dhchapDhgroup', h.dhchapDhgroup, DH_GROUP_BY_NAME);
    this.#core.hostAuth.set(h.nqn, auth);
    this.#hostConfigs.set(h.nqn, { ...h });
    this.#log.info({ hostnqn: h.nqn, bidirectional: auth.ctrlKey !== undefined }, 'host authentication keys set');
  }

  /**
   * Give a host a TLS PSK (TP 8011; nvmet keys it in the kernel keyring by identity, we by host NQN): new TLS
   * connections whose ClientHello identity names this host use it. Parsed here; never logged or echoed in errors.
   */
  setHostTlsKey(h: HostConfig): void {
    this.#checkName('hosts.nqn', 'host', h.nqn);
    if (h.tlsKey === undefined) throw new InvalidArgumentError('hosts.tlsKey', 'is required to set a TLS key');
    let key;
    try {
      key = parseTlsKey(h.tlsKey);
    } catch (e) {
      if (e instanceof TlsKeyError) throw new InvalidArgumentError('hosts.tlsKey', e.message);
      throw e;
    }
    this.#tlsKeys.set(h.nqn, key, h.tlsHkdf ?? DEFAULT_HKDF_ENCODING);
    this.#tlsHosts.set(h.nqn, { tlsKey: h.tlsKey, ...(h.tlsHkdf !== undefined ? { tlsHkdf: h.tlsHkdf } : {}) });
    this.#log.info({ hostnqn: h.nqn, hash: key.hash, hkdf: h.tlsHkdf ?? DEFAULT_HKDF_ENCODING }, 'host TLS key set');
  }

  /**
   * Secure channel concatenation (TP 8018): the TLS identities and PSKs of a generated PSK, one per session-key form
   * (protocol/auth DhchapConcatResult), for the host's reconnect inside TLS. Only SHA-256 is ever negotiated here.
   */
  #installGeneratedPsk(e: { hostnqn: string; subnqn: string; hashId: number; scC: number; psks: Buffer[] }): void {
    const hash = e.hashId === 2 ? 2 : 1;
    const entries = e.psks.map((p) => {
      const d = deriveConcatTlsPsk(hash, p, e.hostnqn, e.subnqn);
      p.fill(0);
      return d;
    });
    this.#tlsKeys.setGenerated(e.hostnqn, e.subnqn, entries);
    this.#log.info({ hostnqn: e.hostnqn, subnqn: e.subnqn, scC: e.scC, hash: `0${hash}` }, 'secure channel concatenation: generated TLS PSK installed');
  }

  clearHostTlsKey(hostnqn: string): void {
    if (!this.#tlsKeys.delete(hostnqn)) throw new InvalidArgumentError('hostnqn', `no TLS key for ${hostnqn}`);
    this.#tlsHosts.delete(hostnqn);
    this.#log.info({ hostnqn }, 'host TLS key cleared');
  }

  /** TLS handshakes completed and failed since start, failures by reason. */
  tlsStats(): TlsStats {
    const st = this.#tlsKeys.stats;
    return { handshakesOk: st.handshakesOk, handshakesFailed: st.handshakesFailed, failuresByReason: { ...st.failuresByReason } };
  }

  /** Stop requiring authentication from a host (new controllers only). */
  clearHostAuth(hostnqn: string): void {
    if (!this.#core.hostAuth.delete(hostnqn)) throw new InvalidArgumentError('hostnqn', `no authentication keys for ${hostnqn}`);
    this.#hostConfigs.delete(hostnqn);
    // Generated PSKs came from these keys: new TLS sessions on them end with the keys (open sessions continue).
    this.#tlsKeys.dropGenerated(hostnqn);
    this.#log.info({ hostnqn }, 'host authentication keys cleared');
  }

  /** Hosts with keys, secrets shown as "<redacted>". */
  listHostAuth(): HostAuthView[] {
    return this.#core.hostAuth.list();
  }

  /** DH-HMAC-CHAP transactions completed, failed and expired since start. */
  authStats(): AuthStats {
    return { ...this.#core.hostAuth.stats };
  }

  async addPort(p: PortConfig): Promise<BoundPort> {
    if (this.#listeners.has(p.id)) throw new InvalidArgumentError('ports.id', `port ${p.id} already exists`);
    const maxh2c = p.maxH2CData ?? 131072;
    if (maxh2c < 4096 || maxh2c % 4 !== 0) throw new InvalidArgumentError('ports.maxH2CData', 'must be a multiple of 4 and at least 4096 (NVMe/TCP 1.0 §3.6.2.3)');
    if ((p.inlineDataSize ?? 16384) % 16 !== 0) throw new InvalidArgumentError('ports.inlineDataSize', 'must be a multiple of 16 (IOCCSZ is in 16-byte units)');
    if ((p.c2hDataSize ?? 131072) < 512) throw new InvalidArgumentError('ports.c2hDataSize', 'must be at least 512');
    if (p.tlsConcat === true && (p.tls ?? 'none') === 'none') throw new InvalidArgumentError('ports.tlsConcat', 'needs a TLS port; set tls to "allowed" or "required"');
    await this.startWorkers();
    const port = new CorePort(p);
    const pool = this.#pool;
    if (pool !== undefined) await pool.syncPort(this.#portSpec(port));
    const tlsMode = p.tls ?? 'none';
    const tls =
      tlsMode === 'none'
        ? undefined
        : { mode: tlsMode, keys: this.#tlsKeys, handshakeTimeoutMs: Math.round((p.tlsHandshakeTimeoutS ?? 10) * 1000), ...(p.tlsConcat === true ? { concat: true } : {}) };
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
    await this.#pool?.removePort(id);
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
    // nvmet_subsys_make refuses only the discovery NQNs (and nvmet_subsys_alloc names over 223 bytes).
    if (s.nqn === WELL_KNOWN_DISCOVERY_NQN || s.nqn === this.#core.uniqueDiscoveryNqn) throw new InvalidArgumentError('subsystems.nqn', 'is a discovery NQN');
    if (this.#core.subsystems.has(s.nqn)) throw new InvalidArgumentError('subsystems.nqn', `${s.nqn} already exists`);
    const v = validateNvmetName(s.nqn);
    if (!v.ok) throw new InvalidArgumentError('subsystems.nqn', `${s.nqn}: ${v.reason}`);
    for (const h of s.hosts ?? []) {
      const hv = validateNvmetName(h);
      if (!hv.ok) throw new InvalidArgumentError('subsystems.hosts', `${h}: ${hv.reason}`);
    }
    checkCntlidRange(s.cntlidMin ?? CNTLID_MIN, s.cntlidMax ?? CNTLID_MAX);
    this.#warnName('subsystem', s.nqn);
    for (const h of s.hosts ?? []) this.#warnName('host', h);
    await this.startWorkers();
    const sub = new Subsystem({ ...s, namespaces: [] });
    sub.onResvChanged = (x, nsid) => {
      this.#resvChanged(x, nsid);
      this.#replicateResv(x, nsid);
    };
    // With workers the primary owns the state; a change completes once every worker has it (docs/target.md).
    if (this.#workerCount > 1) sub.resvCommit = (nsid) => this.#resvSynced.get(resvStateKey(sub.nqn, nsid)) ?? Promise.resolve();
    this.#core.subsystems.set(s.nqn, sub);
    try {
      for (const ns of s.namespaces ?? []) await this.#addNs(sub, ns, false);
      await this.#syncSubsystem(sub);
    } catch (err) {
      this.#core.subsystems.delete(s.nqn);
      await this.#pool?.removeSubsystem(s.nqn).catch(() => undefined);
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
    await this.#pool?.removeSubsystem(nqn);
    for (const ns of sub.namespaces.values()) await ns.backend.close();
    this.#core.discoveryChanged();
    this.#log.info({ subnqn: nqn }, 'subsystem removed');
  }

  async addNamespace(subnqn: string, ns: NamespaceConfig): Promise<void> {
    await this.#nsOp(() => this.#addNs(this.#subsys(subnqn), ns, true));
  }

  async removeNamespace(subnqn: string, nsid: number): Promise<void> {
    await this.#nsOp(async () => {
      const sub = this.#subsys(subnqn);
      const ns = sub.removeNamespace(nsid);
      if (ns === undefined) throw new InvalidArgumentError('nsid', `no namespace ${nsid} in ${subnqn}`);
      await this.#syncSubsystem(sub);
      this.#core.nsChanged(sub, nsid);
      await this.#retire(ns);
      this.#log.info({ subnqn, nsid }, 'namespace removed');
    });
  }

  /**
   * Change a namespace in place (nvmet namespaces/<nsid>/{enable,device_path,device_uuid,...}); `next` is its whole
   * new config, nsid unchanged. Only `enabled` different: the namespace is attached or detached, keeping its backend
   * and identifiers. Anything else different: it is re-mapped, a new namespace under the same NSID (the backend
   * reopened when its config changed). Either way every controller gets a Namespace Attribute Changed notice for the
   * NSID (nvmet_ns_changed), so hosts rescan. Commands already executing on a replaced backend finish on it; it is
   * closed once they have (nvmet_ns_disable waits for the namespace's references the same way).
   */
  async updateNamespace(subnqn: string, next: NamespaceConfig): Promise<void> {
    await this.#nsOp(async () => {
      const sub = this.#subsys(subnqn);
      const cur = sub.namespaces.get(next.nsid);
      if (cur === undefined) throw new InvalidArgumentError('nsid', `no namespace ${next.nsid} in ${subnqn}`);
      const enabled = next.enabled ?? true;
      const { enabled: _a, ...want } = next;
      const { enabled: _b, ...have } = cur.config;
      if (sameJson(want, have)) {
        if (!sub.setNamespaceEnabled(cur, enabled)) return;
        await this.#syncSubsystem(sub);
        this.#core.nsChanged(sub, next.nsid);
        this.#log.info({ subnqn, nsid: next.nsid }, enabled ? 'namespace enabled' : 'namespace disabled');
        return;
      }
      const reuse = sameJson(want.backend, have.backend) ? cur.backend : undefined;
      const ns = await this.#buildNs(sub, next, reuse, cur);
      Object.assign(ns.counters, cur.counters);
      sub.replaceNamespace(ns);
      await this.#syncSubsystem(sub);
      this.#core.nsChanged(sub, next.nsid);
      this.#log.info({ subnqn, nsid: next.nsid, backend: ns.backend.kind, bytes: ns.backend.size, uuid: formatUuid(ns.uuid), enabled: ns.enabled }, 'namespace re-mapped');
      if (reuse === undefined) await this.#retire(cur);
    });
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
    this.#checkName('hostnqn', 'host', hostnqn);
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
    if (this.#pool === undefined) this.#core.anaChanged(portId);
    else
      this.#pool.syncPort(this.#portSpec(port)).then(
        () => this.#core.anaChanged(portId),
        (err: Error) => {
          this.#log.error({ err: err.message, portId }, 'ANA change not applied on a worker');
          this.#core.anaChanged(portId);
        },
      );
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
    if (this.#pool !== undefined) void this.#syncSubsystem(sub).catch((err: Error) => this.#log.error({ err: err.message, subnqn }, 'faults not applied on a worker'));
  }

  /** nvmet's name rules (1..223 bytes, no NUL); a name that is not a well-formed NQN passes with one warning line. */
  /** A namespace may be attached only to a host the subsystem lets in (namespaces[].hosts, attach). */
  #checkMaskHost(sub: Subsystem, hostnqn: string): void {
    this.#checkName('namespaces.hosts', 'host', hostnqn);
    if (!sub.allowAnyHost && !sub.hosts.has(hostnqn)) {
      throw new InvalidArgumentError('namespaces.hosts', `${JSON.stringify(hostnqn)} is not a host of ${sub.nqn}; allow it on the subsystem first or leave it out`);
    }
  }

  /**
   * Namespace masking at runtime: attach `nsid` to one more host, or detach it from one (the first attach turns an
   * all-hosts namespace into a masked one; detaching the last host leaves it visible to nobody). Only the controllers
   * of the host whose view changed get the Namespace Attribute Changed notice.
   */
  attachNamespaceHost(subnqn: string, nsid: number, hostnqn: string): void {
    const sub = this.#subsys(subnqn);
    const ns = sub.namespaces.get(nsid);
    if (ns === undefined) throw new InvalidArgumentError('nsid', `no namespace ${nsid} in ${subnqn}`);
    this.#checkMaskHost(sub, hostnqn);
    const next = new Set(ns.hostMask ?? []);
    next.add(hostnqn);
    this.#setMask(sub, nsid, next);
  }

  detachNamespaceHost(subnqn: string, nsid: number, hostnqn: string): void {
    const sub = this.#subsys(subnqn);
    const ns = sub.namespaces.get(nsid);
    if (ns === undefined) throw new InvalidArgumentError('nsid', `no namespace ${nsid} in ${subnqn}`);
    if (ns.hostMask !== undefined && !ns.hostMask.has(hostnqn)) throw new InvalidArgumentError('hostnqn', `namespace ${nsid} is not attached to ${hostnqn}`);
    // Detaching from an all-hosts namespace: every allowed host but this one keeps it.
    const next = new Set(ns.hostMask ?? [...sub.hosts]);
    next.delete(hostnqn);
    this.#setMask(sub, nsid, next);
  }

  /** Hosts a namespace is attached to; undefined = every allowed host. */
  namespaceHosts(subnqn: string, nsid: number): string[] | undefined {
    const ns = this.#subsys(subnqn).namespaces.get(nsid);
    if (ns === undefined) throw new InvalidArgumentError('nsid', `no namespace ${nsid} in ${subnqn}`);
    return ns.hostMask === undefined ? undefined : [...ns.hostMask];
  }

  #setMask(sub: Subsystem, nsid: number, hosts: Set<string>): void {
    const ns = sub.namespaces.get(nsid) as Namespace;
    const affected = sub.setNamespaceHosts(ns, hosts);
    ns.config.hosts = [...hosts];
    const notify = (): void => {
      if (ns.enabled && affected.size > 0) this.#core.nsChanged(sub, nsid, affected);
    };
    // Workers apply the new mask to their I/O queues before the affected hosts hear of it (as for namespace changes).
    if (this.#pool === undefined) notify();
    else
      this.#syncSubsystem(sub).then(notify, (err: unknown) => {
        this.#log.error({ err, subnqn: sub.nqn, nsid }, 'workers did not take the new host mask');
        notify();
      });
    this.#log.info({ subnqn: sub.nqn, nsid, hosts: [...hosts], notified: [...affected] }, 'namespace host mask changed');
  }

  #checkName(field: string, kind: 'subsystem' | 'host', name: string): void {
    const v = validateNvmetName(name);
    if (!v.ok) throw new InvalidArgumentError(field, `${name}: ${v.reason}`);
    this.#warnName(kind, name);
  }

  #warnName(kind: 'subsystem' | 'host', name: string): void {
    const w = nqnWarning(kind, name);
    if (w !== undefined) this.#log.warn(w);
  }

  /** Runs namespace changes one at a time, in call order: a rapid disable/re-map/enable sequence applies as sent. */
  #nsOp<T>(op: () => Promise<T>): Promise<T> {
    const run = this.#nsChain.then(op);
    this.#nsChain = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  /** Closes a detached namespace's backend once the commands executing on it are done (bounded: 10 s). */
  async #retire(ns: Namespace): Promise<void> {
    const end = Date.now() + 10_000;
    while (ns.executing > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 2));
    if (ns.executing > 0) this.#log.warn({ subnqn: ns.subnqn, nsid: ns.nsid, executing: ns.executing }, 'closing a namespace backend with commands still executing');
    await ns.backend.close();
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
    if (this.#hostConfigs.size > 0) {
      cfg.hosts = [...this.#hostConfigs.values()].map((h) => {
        if (opts.includeSecrets === true) return { ...h };
        const r: HostConfig = { ...h, dhchapKey: REDACTED };
        if (h.dhchapCtrlKey !== undefined) r.dhchapCtrlKey = REDACTED;
        return r;
      });
    }
    for (const [nqn, t] of this.#tlsHosts) {
      const hosts = (cfg.hosts ??= []);
      let entry = hosts.find((h) => h.nqn === nqn);
      if (entry === undefined) hosts.push((entry = { nqn }));
      entry.tlsKey = opts.includeSecrets === true ? (t.tlsKey as string) : REDACTED;
      if (t.tlsHkdf !== undefined) entry.tlsHkdf = t.tlsHkdf;
    }
    if (this.#core.uniqueDiscoveryNqn !== undefined) cfg.discoveryNqn = this.#core.uniqueDiscoveryNqn;
    if (this.#icReqTimeoutMs !== 10_000) cfg.icReqTimeoutS = this.#icReqTimeoutMs / 1000;
    return cfg;
  }

  listControllers(): ControllerInfo[] {
    const out: ControllerInfo[] = [];
    const subs = [this.#core.discovery, ...this.#core.subsystems.values()];
    for (const s of subs) {
      for (const c of s.controllers.values()) {
        out.push({
          cntlid: c.cntlid,
          subnqn: s.kind === 'discovery' ? this.#core.discoveryNqn : s.nqn,
          hostnqn: c.hostnqn,
          hostid: formatUuid(c.hostid),
          kato: c.katoMs,
          discovery: c.discovery,
          portId: c.port.id,
          lastKeepAlive: c.lastKeepAliveAt > 0 ? Math.round(c.lastKeepAliveAt) : null,
          lastCommand: c.lastCommandAt > 0 ? Math.round(c.lastCommandAt) : null,
          queues: [...c.queues.values()].sort((a, b) => a.qid - b.qid).map((q) => q.info()),
        });
      }
    }
    return out;
  }

  /** Counts for leak checks (reliability suites, fuzzer): every number must return to its baseline once connections die. */
  debugCounts(): DebugCounts {
    let controllers = 0;
    let queues = 0;
    let aersPosted = 0;
    for (const s of [this.#core.discovery, ...this.#core.subsystems.values()]) {
      for (const c of s.controllers.values()) {
        controllers++;
        queues += c.queues.size;
        aersPosted += c.aers.length;
      }
    }
    let connections = 0;
    let unboundConnections = 0;
    let inFlight = 0;
    for (const l of this.#listeners.values()) {
      for (const q of l.queues) {
        connections++;
        if (q.core.state !== 'live') unboundConnections++;
        else inFlight += q.core.inFlight;
      }
    }
    const handles: Record<string, number> = {};
    for (const h of process.getActiveResourcesInfo()) handles[h] = (handles[h] ?? 0) + 1;
    return { controllers, queues, connections, unboundConnections, pendingRequests: inFlight - aersPosted, aersPosted, handles };
  }

  stats(): TargetStats {
    const subsystems: TargetStats['subsystems'] = {};
    for (const s of this.#core.subsystems.values()) {
      const latency: Record<string, LatencyStats> = {};
      for (const [op, h] of Object.entries(s.latency)) {
        if (h.count > 0) latency[op] = { boundsUs: [...LATENCY_BOUNDS_US], counts: [...h.counts], sumUs: h.sumUs, count: h.count };
      }
      subsystems[s.nqn] = {
        controllers: s.controllers.size,
        opcodes: { ...s.opcodeCounts },
        latency,
        namespaces: s.nsids.map((id) => this.#withWorkerCounters(s.nqn, id, (s.namespaces.get(id) as Namespace).counters)),
      };
    }
    const st = this.#core.stats;
    return {
      subsystems,
      pduErrorsByFes: { ...st.pduErrorsByFes },
      dataDigestErrors: st.dataDigestErrors,
      katoExpiries: st.katoExpiries,
      connections: { accepted: st.connectionsAccepted, active: st.connectionsActive, rejected: st.connectionsRejected },
      connects: { ok: st.connectsOk, failed: st.connectsFailed },
      tls: { handshakesOk: this.#tlsKeys.stats.handshakesOk, handshakesFailed: this.#tlsKeys.stats.handshakesFailed },
    };
  }

  /** A namespace's counters here plus its workers' latest (each worker counts the commands it executed). */
  #withWorkerCounters(subnqn: string, nsid: number, own: NamespaceCounters): NamespaceStats {
    const out: NamespaceStats = { nsid, ...own };
    for (const list of this.#pool?.namespaceReports() ?? []) {
      for (const r of list) {
        if (r.nqn !== subnqn || r.nsid !== nsid) continue;
        out.reads += r.reads;
        out.writes += r.writes;
        out.bytesRead += r.bytesRead;
        out.bytesWritten += r.bytesWritten;
        out.flushes += r.flushes;
        out.errors += r.errors;
      }
    }
    return out;
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    const listeners = [...this.#listeners.values()];
    this.#listeners.clear();
    // Stop accepting, let in-flight commands finish (bounded), then close every connection.
    const closing = listeners.map((l) => l.close(false));
    await Promise.all(listeners.flatMap((l) => [...l.queues].map((q) => q.drain(2000))));
    // Workers finish their in-flight commands, close their queues and fsync/close their namespaces, then exit.
    await this.#poolStart?.catch(() => undefined);
    await this.#pool?.stop();
    for (const s of [this.#core.discovery, ...this.#core.subsystems.values()]) for (const c of [...s.controllers.values()]) c.teardown('target stopping');
    for (const l of listeners) for (const q of [...l.queues]) q.close('target stopping');
    await Promise.all(closing);
    for (const ns of this.#core.allNamespaces()) await ns.backend.close();
    this.#core.ports.clear();
    this.#log.info('target stopped');
  }

  #subsys(nqn: string): Subsystem {
    const s = this.#core.subsystems.get(nqn);
    if (s === undefined) throw new InvalidArgumentError('subnqn', `no subsystem ${nqn}`);
    return s;
  }

  #port(id: number): CorePort {
    const p = this.#core.ports.get(id);
    if (p === undefined) throw new InvalidArgumentError('portId', `no port ${id}`);
    return p;
  }

  async #addNs(sub: Subsystem, cfg: NamespaceConfig, notify: boolean): Promise<void> {
    if (sub.namespaces.has(cfg.nsid)) throw new InvalidArgumentError('namespaces.nsid', `NSID ${cfg.nsid} already exists in ${sub.nqn}`);
    const ns = await this.#buildNs(sub, cfg, undefined, undefined);
    sub.addNamespace(ns);
    this.#restoreResv(sub, cfg.nsid);
    if (notify) {
      try {
        await this.#syncSubsystem(sub);
      } catch (err) {
        // A worker could not open it: the namespace does not exist anywhere (no AEN went out).
        sub.removeNamespace(cfg.nsid);
        await this.#syncSubsystem(sub).catch(() => undefined);
        await ns.backend.close();
        throw new InvalidArgumentError('namespaces.backend', (err as Error).message);
      }
    }
    this.#log.info({ subnqn: sub.nqn, nsid: cfg.nsid, backend: ns.backend.kind, bytes: ns.backend.size, blockSize: ns.blockSize, enabled: ns.enabled }, 'namespace added');
    if (notify && ns.enabled) this.#core.nsChanged(sub, cfg.nsid);
  }

  /**
   * Checks a namespace config and builds the Namespace, opening its backend unless `reuse` is given. `replacing` is
   * the namespace it will take the place of (its identifiers may be kept); a backend opened here is closed on failure.
   */
  async #buildNs(sub: Subsystem, cfg: NamespaceConfig, reuse: NamespaceBackend | undefined, replacing: Namespace | undefined): Promise<Namespace> {
    if (!Number.isInteger(cfg.nsid) || cfg.nsid < 1 || cfg.nsid >= 0xffff_fffe) throw new InvalidArgumentError('namespaces.nsid', `invalid NSID ${cfg.nsid}`);
    const bs = cfg.blockSize ?? 512;
    if (bs !== 512 && bs !== 4096) throw new InvalidArgumentError('namespaces.blockSize', 'must be 512 or 4096');
    if ((cfg.anaGroup ?? 1) < 1 || (cfg.anaGroup ?? 1) > 128) throw new InvalidArgumentError('namespaces.anaGroup', 'must be 1..128');
    for (const h of cfg.hosts ?? []) this.#checkMaskHost(sub, h);
    const backend = reuse ?? (await openBackend(cfg, this.#workerCount > 1));
    try {
      const ns = new Namespace(sub.nqn, cfg, backend);
      // Writes from queues served here (TLS, DH-HMAC-CHAP) must reach the workers' read caches too.
      if (backend.sharing?.().kind === 'shm' && workerCache(cfg)) {
        const nqn = sub.nqn;
        const nsid = cfg.nsid;
        backend.setCoherence?.((off, len, done) => (this.#pool === undefined ? done() : this.#pool.invalidate(nqn, nsid, off, len, done)));
      }
      if (ns.nsze === 0) throw new InvalidArgumentError('namespaces.backend.size', `smaller than one ${bs}-byte block`);
      for (const other of this.#core.allNamespaces()) {
        if (other === replacing) continue;
        if (other.nguid.equals(ns.nguid) || other.uuid.equals(ns.uuid)) throw new InvalidArgumentError('namespaces.uuid', `NGUID/UUID of ${sub.nqn} nsid ${cfg.nsid} collides with ${other.subnqn} nsid ${other.nsid}`);
      }
      return ns;
    } catch (err) {
      if (reuse === undefined) await backend.close();
      throw err;
    }
  }
}

const REDACTED = '<redacted>';

function parseSecret(field: string, secret: string): ReturnType<typeof parseDhchapSecret> {
  try {
    return parseDhchapSecret(secret);
  } catch (e) {
    // DhchapKeyError messages never contain the secret; keep it that way in the wrapper.
    if (e instanceof DhchapKeyError) throw new InvalidArgumentError(field, e.message);
    throw e;
  }
}

function namesToIds<T extends HashId | DhGroupId>(field: string, names: readonly string[], table: Readonly<Record<string, T>>): T[] {
  if (names.length === 0) throw new InvalidArgumentError(field, 'must list at least one value');
  return names.map((n) => {
    const id = table[n];
    if (id === undefined) throw new InvalidArgumentError(field, `unknown value ${JSON.stringify(n)}; use one of ${Object.keys(table).join(', ')}`);
    return id;
  });
}

/** The controller-ID range rules of nvmet attr_cntlid_min/max: 1 <= min <= max <= FFEFh. */
function checkCntlidRange(min: number, max: number): void {
  if (!Number.isInteger(min) || min < CNTLID_MIN || min > CNTLID_MAX) throw new InvalidArgumentError('cntlidMin', `${min} is not a controller ID; use ${CNTLID_MIN}..${CNTLID_MAX}`);
  if (!Number.isInteger(max) || max < CNTLID_MIN || max > CNTLID_MAX) throw new InvalidArgumentError('cntlidMax', `${max} is not a controller ID; use ${CNTLID_MIN}..${CNTLID_MAX}`);
  if (min > max) throw new InvalidArgumentError('cntlidMin', `${min} is above cntlidMax ${max}; make cntlidMin <= cntlidMax`);
}

/** Deep equality of two config values, key order ignored (a body may list keys in any order). */
function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v).sort()) out[k] = canonical((v as Record<string, unknown>)[k]);
  return out;
}

/** Whether workers cache a shared RAM namespace's blocks (BackendConfig workerCache, default true). */
function workerCache(cfg: NamespaceConfig): boolean {
  return cfg.backend.type !== 'ram' || cfg.backend.workerCache !== false;
}

/** How a worker opens the namespace's backend (the primary created it: shared RAM file, file, null). */
function nsOpen(ns: Namespace): NsOpen {
  const s = ns.backend.sharing?.();
  if (s?.kind === 'shm') return { kind: 'shm', path: s.path, size: s.size, cache: workerCache(ns.config) };
  if (s?.kind === 'file') return { kind: 'file', path: s.path, readOnly: ns.readOnly };
  if (s?.kind === 'null') return { kind: 'null', size: s.size };
  throw new InvalidArgumentError('namespaces.backend', `namespace ${ns.nsid}: a process-local RAM backend cannot be shared with workers`);
}

/** `shared`: workers > 1, so a RAM namespace lives in a tmpfs file every worker maps (target/workers/shm-backend.ts). */
async function openBackend(cfg: NamespaceConfig, shared: boolean): Promise<NamespaceBackend> {
  const b = cfg.backend;
  switch (b.type) {
    case 'ram':
      if (shared) return ShmBackend.create(parseSize(b.size, 'backend.size'));
      return new RamBackend(parseSize(b.size, 'backend.size'));
    case 'null':
      return new NullBackend(parseSize(b.size, 'backend.size'));
    case 'file': {
      const opts: { path: string; size?: number; readOnly?: boolean } = { path: b.path };
      if (b.size !== undefined) opts.size = parseSize(b.size, 'backend.size');
      if (cfg.readOnly === true) opts.readOnly = true;
      return FileBackend.open(opts);
    }
  }
}
