// An NVM or discovery subsystem (nvmet_subsys): namespaces, host ACL, faults, its controllers and per-opcode stats.
import { createHash } from 'node:crypto';
import type { Buffer } from 'node:buffer';
import { CRD_MASK, CRD_SHIFT, DNR, MORE, opcodeLabel } from '../../protocol/index.js';
import type { FaultConfig, SubsystemConfig } from '../model/config.js';
import { FaultEngine } from './fault-engine.js';
import type { TargetNamespace } from './namespace.js';
import type { CorePort } from './port.js';
import type { Request } from './request.js';
import { ReservationState } from './reservation.js';
import type { ResvNotifType } from '../../protocol/index.js';
import { OpcodeStat, type LatencyHistogram, type OpcodeCounters } from './stats.js';
import type { AenKind, ControllerState, QueueHandle } from './types.js';

export const SUBSYS_DEFAULTS = {
  maxIoQueues: 128,
  maxQueueSize: 1024,
  mdts: 8,
  model: 'nvme-tcp-ts',
  firmware: '0.1.0',
} as const;

/** Highest NSID the controller reports (NN) unless a configured NSID is larger; nvmet uses 1024 (NVMET_MAX_NAMESPACES). */
export const DEFAULT_NN = 1024;
/** Valid dynamic controller IDs (NVMe-oF 1.1 §4.2: 0xFFF0..0xFFFF are reserved/special). */
export const CNTLID_MIN = 1;
export const CNTLID_MAX = 0xffef;

/**
 * A controller as its subsystem lists it (Controller implements it). The subsystem's registry is typed by this
 * view, not by the Controller class, because Controller refers to its Subsystem: the two modules would import
 * each other.
 */
/** How a worker hands a reservation command to the owner of the state (Subsystem.resvForward). */
export type ResvForward = (ctrl: { hostKey: string; hostid: Buffer; cntlid: number }, nsid: number, opcode: number, cdw10: number, data: Buffer, done: (status: number) => void) => void;

/** Subsystem.resvShared: `mutate` decides on a ReservationState holding the group's state and returns the status. */
export type ResvShared = (nsid: number, mutate: (rs: ReservationState) => number) => Promise<number>;

export interface ControllerEntry {
  readonly cntlid: number;
  readonly hostnqn: string;
  readonly hostid: Buffer;
  /** Hex of hostid: the key reservations know a host by. */
  readonly hostKey: string;
  readonly port: CorePort;
  readonly state: ControllerState;
  readonly discovery: boolean;
  readonly createdAt: number;
  readonly queues: ReadonlyMap<number, QueueHandle>;
  readonly aers: readonly Request[];
  readonly grantedIoQueues: number;
  readonly katoMs: number;
  readonly cc: number;
  readonly csts: number;
  readonly lastKeepAliveAt: number;
  readonly lastCommandAt: number;
  addEvent(kind: AenKind): void;
  nsChanged(nsid: number): void;
  /** A reservation notification for namespace `nsid` (log page 80h entry + AEN unless masked). */
  resvNotice(nsid: number, type: ResvNotifType): void;
  teardown(reason: string): void;
}

export class Subsystem {
  /** Every configured namespace, enabled or not (nvmet's subsys->namespaces); the active ones are `nsids`. */
  readonly namespaces = new Map<number, TargetNamespace>();
  /** Sorted NSIDs of the enabled namespaces, rebuilt on every change (Identify CNS 02h, ANA log, Flush all). */
  nsids: number[] = [];
  readonly controllers = new Map<number, ControllerEntry>();
  readonly hosts: Set<string>;
  allowAnyHost: boolean;
  faults: FaultConfig;
  /** The fault knobs (failNext, commandLatencyUs, connectLatencyMs) as rules of this subsystem (setFaults). */
  readonly faultRules = new FaultEngine();
  /** Per-opcode command count and latency by stats name (admin/discovery/I/O names never collide). */
  readonly #stats = new Map<string, OpcodeStat>();
  /** The same OpcodeStat objects for I/O opcodes, indexed by opcode: no string key on the data path. */
  readonly #ioStats: (OpcodeStat | undefined)[] = new Array<OpcodeStat | undefined>(256).fill(undefined);
  #nextCntlid: number;
  /** I/O queue cap for Set Features Number of Queues (nvmet subsys->max_qid); TargetService.updateSubsystem changes it. */
  maxIoQueues: number;
  /** Dynamic controller ID range (nvmet subsys->cntlid_min/max). */
  cntlidMin: number;
  cntlidMax: number;
  readonly serial: string;
  /** Largest transfer in bytes (MDTS in 4 KiB units, CAP.MPSMIN = 0); 0 = unlimited. Fields, not getters over the
   * config: both are read on every I/O command and the config never changes after construction. */
  readonly maxTransfer: number;
  /**
   * Largest transfer whose size the host chooses outright (Get Log Page NUMD, the DSM and reservation SGLs,
   * Authentication Send/Receive TL/AL): MDTS, or with MDTS 0 the default MDTS's 1 MiB. Each such command makes the
   * target allocate (or gather) that many bytes, so even a controller that advertises no limit (the discovery
   * controller, as nvmet's) bounds it; read and write are bounded by NLB instead.
   */
  readonly hostSizedMax: number;
  readonly ana: boolean;
  /** Whether this subsystem offers reservations (ONCS bit 5, RESCAP, the four commands, features 82h/83h). */
  reservationsSupported = true;
  /**
   * Reservation state per NSID, one object for all controllers (NVMe Base 2.0 §8.19). Kept by NSID rather than by
   * Namespace object so a re-mapped namespace keeps its registrations; dropped when the namespace is removed.
   */
  readonly reservations = new Map<number, ReservationState>();
  /** Called after a namespace's reservation state changed or went away (TargetService persists PTPL state). */
  onResvChanged: ((subsys: Subsystem, nsid: number) => void) | undefined = undefined;
  /**
   * On the owner of the reservation state with target workers: resolves once every worker applied the namespace's
   * latest state (a successful Register / Acquire / Release completes only then). Undefined in one process.
   */
  resvCommit: ((nsid: number) => Promise<void>) | undefined = undefined;
  /**
   * On a worker process: sends Register / Acquire / Release to the owner of the state; `done` gets the status once
   * every worker applied the result. Undefined where the state lives.
   */
  resvForward: ResvForward | undefined = undefined;
  /**
   * In a gateway group (target/gateway/shared.ts): runs a state-changing reservation operation on the group's copy
   * of the namespace's state in etcd instead of this one, and resolves to its NVMe status once the change committed
   * and was applied here (and on the workers). Undefined outside a group.
   */
  resvShared: ResvShared | undefined = undefined;

  /**
   * Format NVM's change of a namespace's LBA size (target/core/cmd/format.ts): re-maps the namespace under the same
   * NSID with the new blockSize, as a config change does (TargetService.updateNamespace; every controller gets the
   * Namespace Attribute Changed notice). Set by TargetService; undefined where namespaces are not managed here.
   */
  formatNs: ((nsid: number, blockSize: 512 | 4096) => Promise<void>) | undefined = undefined;

  /**
   * Whether a namespace's media state (Write Uncorrectable's marked blocks, the host's write protection) lives in this
   * process alone: not with target workers or in a gateway group, where each process holds its own copy of the
   * namespace and nothing carries that state between them, so the commands that set it are not offered there.
   */
  get mediaStateLocal(): boolean {
    return this.resvCommit === undefined && this.resvForward === undefined && this.resvShared === undefined;
  }

  constructor(
    readonly config: SubsystemConfig,
    readonly kind: 'nvm' | 'discovery' = 'nvm',
  ) {
    this.hosts = new Set(config.hosts ?? []);
    this.allowAnyHost = config.allowAnyHost ?? this.hosts.size === 0;
    this.faults = { ...(config.faults ?? {}) };
    this.setFaults(this.faults);
    // nvmet generates a random serial per boot; a hash of the NQN keeps it stable across restarts.
    this.serial = config.serial ?? createHash('sha256').update(config.nqn).digest('hex').slice(0, 20);
    const mdts = this.mdts;
    this.maxTransfer = mdts === 0 ? 0 : 4096 * 2 ** mdts;
    this.hostSizedMax = this.maxTransfer > 0 ? this.maxTransfer : 4096 * 2 ** SUBSYS_DEFAULTS.mdts;
    this.ana = kind === 'nvm' && (config.ana ?? true);
    this.maxIoQueues = config.maxIoQueues ?? SUBSYS_DEFAULTS.maxIoQueues;
    this.cntlidMin = config.cntlidMin ?? CNTLID_MIN;
    this.cntlidMax = config.cntlidMax ?? CNTLID_MAX;
    this.#nextCntlid = this.cntlidMin;
  }

  get nqn(): string {
    return this.config.nqn;
  }
  get maxControllers(): number {
    return this.config.maxControllers ?? this.cntlidMax - this.cntlidMin + 1;
  }
  get maxQueueSize(): number {
    return this.config.maxQueueSize ?? SUBSYS_DEFAULTS.maxQueueSize;
  }
  get mdts(): number {
    return this.config.mdts ?? SUBSYS_DEFAULTS.mdts;
  }
  get model(): string {
    return this.config.model ?? SUBSYS_DEFAULTS.model;
  }
  get firmware(): string {
    return this.config.firmware ?? SUBSYS_DEFAULTS.firmware;
  }
  get nn(): number {
    const max = this.nsids.length > 0 ? (this.nsids[this.nsids.length - 1] as number) : 0;
    return Math.max(DEFAULT_NN, max);
  }

  exportedOn(portId: number): boolean {
    return this.config.ports === undefined || this.config.ports.length === 0 || this.config.ports.includes(portId);
  }

  hostAllowed(hostnqn: string): boolean {
    return this.allowAnyHost || this.hosts.has(hostnqn);
  }

  /** The reservation state of `nsid`, created on first use. */
  reservation(nsid: number): ReservationState {
    let rs = this.reservations.get(nsid);
    if (rs === undefined) {
      rs = new ReservationState(nsid, {
        notify: (hostKey, type) => {
          for (const c of this.controllers.values()) if (c.hostKey === hostKey) c.resvNotice(nsid, type);
        },
        changed: () => this.onResvChanged?.(this, nsid),
      });
      this.reservations.set(nsid, rs);
    }
    return rs;
  }

  addNamespace(ns: TargetNamespace): void {
    ns.resv = this.reservation(ns.nsid);
    this.namespaces.set(ns.nsid, ns);
    this.#rebuildNsids();
  }

  removeNamespace(nsid: number): TargetNamespace | undefined {
    const ns = this.namespaces.get(nsid);
    this.namespaces.delete(nsid);
    if (ns !== undefined) ns.enabled = false;
    if (this.reservations.delete(nsid)) this.onResvChanged?.(this, nsid);
    this.#rebuildNsids();
    return ns;
  }

  /** The namespace `nsid` when it exists and is enabled: what Identify, Get Log Page and I/O may see. */
  activeNs(nsid: number): TargetNamespace | undefined {
    const ns = this.namespaces.get(nsid);
    return ns !== undefined && ns.enabled ? ns : undefined;
  }

  /** activeNs as host `hostnqn` sees it: a namespace masked from the host does not exist for it. */
  visibleNs(nsid: number, hostnqn: string): TargetNamespace | undefined {
    const ns = this.namespaces.get(nsid);
    return ns !== undefined && ns.enabled && ns.visibleTo(hostnqn) ? ns : undefined;
  }

  /** Sorted active NSIDs host `hostnqn` may see (Identify CNS 02h, ANA log). */
  visibleNsids(hostnqn: string): number[] {
    return this.nsids.filter((id) => (this.namespaces.get(id) as TargetNamespace).visibleTo(hostnqn));
  }

  /**
   * Replace a namespace's host list (undefined: visible to all). Returns the host NQNs whose view changed, so only
   * their controllers get the Namespace Attribute Changed notice.
   */
  setNamespaceHosts(ns: TargetNamespace, hosts: ReadonlySet<string> | undefined): Set<string> {
    const affected = new Set<string>();
    for (const c of this.controllers.values()) {
      const before = ns.visibleTo(c.hostnqn);
      const after = hosts === undefined || hosts.has(c.hostnqn);
      if (before !== after) affected.add(c.hostnqn);
    }
    ns.hostMask = hosts === undefined ? undefined : new Set(hosts);
    return affected;
  }

  /** Attach or detach a namespace (nvmet_ns_enable / nvmet_ns_disable); false when it already was in that state. */
  setNamespaceEnabled(ns: TargetNamespace, enabled: boolean): boolean {
    if (ns.enabled === enabled) return false;
    ns.enabled = enabled;
    this.#rebuildNsids();
    return true;
  }

  /** Put `next` where the namespace of the same NSID was (re-mapping); the old one is detached and returned. */
  replaceNamespace(next: TargetNamespace): TargetNamespace | undefined {
    const old = this.namespaces.get(next.nsid);
    if (old !== undefined) old.enabled = false;
    next.resv = this.reservation(next.nsid);
    this.namespaces.set(next.nsid, next);
    this.#rebuildNsids();
    return old;
  }

  #rebuildNsids(): void {
    const ids: number[] = [];
    for (const [id, ns] of this.namespaces) if (ns.enabled) ids.push(id);
    this.nsids = ids.sort((a, b) => a - b);
  }

  /**
   * The fault knobs, each a thin front onto a fault rule (docs/faults.md, "The knobs"): commandLatencyUs delays every
   * I/O completion, failNext completes the next `count` I/O commands with its status, connectLatencyMs delays the
   * Connect's completion. A rule added later by id is the knob's state (failNext's remaining count comes from it).
   */
  setFaults(f: FaultConfig): void {
    this.faults = { ...f };
    const rules = this.faultRules;
    rules.clear();
    if ((f.commandLatencyUs ?? 0) > 0) rules.add({ id: 'commandLatencyUs', match: { set: 'io' }, action: { kind: 'delay', us: f.commandLatencyUs as number } });
    if (f.failNext !== undefined && f.failNext.count > 0) rules.add({ id: 'failNext', match: { set: 'io' }, schedule: { times: f.failNext.count }, action: { kind: 'status', ...statusFields(f.failNext.status) } });
    if ((f.connectLatencyMs ?? 0) > 0) rules.add({ id: 'connectLatencyMs', match: { event: 'connect' }, action: { kind: 'delay', us: (f.connectLatencyMs as number) * 1000 } });
  }

  /** failNext's remaining count (its rule's times less its hits). */
  get failRemaining(): number {
    const n = this.faults.failNext?.count ?? 0;
    return n - (this.faultRules.hitsOf('failNext') ?? n);
  }

  /**
   * Next free cntlid in cntlidMin..cntlidMax, wrapping; undefined when all are in use, which nvmet_alloc_ctrl answers
   * with Controller Busy (its ida_alloc_range over the same range fails).
   */
  allocCntlid(): number | undefined {
    const min = this.cntlidMin;
    const max = this.cntlidMax;
    if (this.#nextCntlid < min || this.#nextCntlid > max) this.#nextCntlid = min;
    for (let i = 0; i <= max - min; i++) {
      const id = this.#nextCntlid;
      this.#nextCntlid = id >= max ? min : id + 1;
      if (!this.controllers.has(id)) return id;
    }
    return undefined;
  }

  /** Counts a parsed command and returns its opcode's latency histogram (for req.lat). */
  countOpcode(name: string): LatencyHistogram {
    let st = this.#stats.get(name);
    if (st === undefined) {
      st = new OpcodeStat();
      this.#stats.set(name, st);
    }
    st.count++;
    return st.lat;
  }

  /** countOpcode for an I/O opcode (0..255): an array slot instead of building and hashing the name per command. */
  countIoOpcode(op: number): LatencyHistogram {
    let st = this.#ioStats[op];
    if (st === undefined) {
      const name = opcodeLabel('io', op);
      st = this.#stats.get(name);
      if (st === undefined) {
        st = new OpcodeStat();
        this.#stats.set(name, st);
      }
      this.#ioStats[op] = st;
    }
    st.count++;
    return st.lat;
  }

  /** Parsed commands per opcode name (stats()). */
  get opcodeCounts(): OpcodeCounters {
    const out: OpcodeCounters = {};
    for (const [name, st] of this.#stats) out[name] = st.count;
    return out;
  }

  /** Per-opcode latency, same keys as opcodeCounts (AERs are never recorded: they are held open by design). */
  get latency(): Record<string, LatencyHistogram> {
    const out: Record<string, LatencyHistogram> = {};
    for (const [name, st] of this.#stats) out[name] = st.lat;
    return out;
  }

  /** Config snapshot with live ACL, faults and namespaces. */
  snapshot(): SubsystemConfig {
    const out: SubsystemConfig = { ...this.config, allowAnyHost: this.allowAnyHost, hosts: [...this.hosts] };
    if (this.maxIoQueues !== (this.config.maxIoQueues ?? SUBSYS_DEFAULTS.maxIoQueues) || this.config.maxIoQueues !== undefined) out.maxIoQueues = this.maxIoQueues;
    if (this.cntlidMin !== CNTLID_MIN || this.config.cntlidMin !== undefined) out.cntlidMin = this.cntlidMin;
    if (this.cntlidMax !== CNTLID_MAX || this.config.cntlidMax !== undefined) out.cntlidMax = this.cntlidMax;
    const faults: FaultConfig = { ...this.faults };
    if (this.failRemaining > 0) faults.failNext = { count: this.failRemaining, status: this.faults.failNext?.status ?? 0 };
    else delete faults.failNext;
    if (Object.keys(faults).length > 0) out.faults = faults;
    else delete out.faults;
    out.namespaces = [...this.namespaces.values()].sort((a, b) => a.nsid - b.nsid).map((ns) => ns.snapshot());
    return out;
  }
}

/** A Linux-form status (SCT << 8 | SC with CRD, More, DNR) as a status action's fields. */
function statusFields(s: number): { status: number; dnr: boolean; more: boolean; crd: number } {
  return { status: s & 0x7ff, dnr: (s & DNR) !== 0, more: (s & MORE) !== 0, crd: (s & CRD_MASK) >> CRD_SHIFT };
}
