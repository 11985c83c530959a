// The core model in one module so its mutually referencing types form no import cycle (layering check):
// Request (one command), Subsystem (nvmet_subsys), Controller (nvmet_ctrl), TargetCore (the registry) and the
// QueueModel/QueueTransportOps seams a queue and a transport implement.
import type { Buffer } from 'node:buffer';
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { AenConfig, AenDw0, DNR, LogPageId, Status, rd16, rd32 } from '../../protocol/index.js';
import type { FaultConfig, SubsystemConfig } from '../config/types.js';
import { AuthRegistry, type HostAuth, type QueueAuth, type QueueAuthView } from './auth.js';
import type { Namespace } from './namespace.js';
import type { CorePort } from './port.js';

/** Queue states: waiting for Connect, bound to a controller, gone. */
export type QueueState = 'connecting' | 'live' | 'closed';

/** What commands and controllers need from a queue (implemented by QueueModel in queue.ts). */
export interface QueueModel {
  state: QueueState;
  ctrl: Controller | undefined;
  qid: number;
  /** 0's based SQ size from Connect. */
  sqsize: number;
  sqhd: number;
  sqflowDisabled: boolean;
  inFlight: number;
  /** DH-HMAC-CHAP state when the host must authenticate this queue (set by Connect; see auth.ts). */
  auth: QueueAuth | undefined;
  readonly counters: QueueCounters;
  readonly target: TargetCore;
  readonly port: CorePort;
  readonly ops: QueueTransportOps;
  setState(next: QueueState): boolean;
  complete(req: Request, status?: number): void;
  closeTransport(reason: string): void;
  info(): QueueInfoView;
}

export interface QueueInfoView {
  qid: number;
  peer: string;
  state: QueueState;
  inFlight: number;
  commands: number;
  bytesIn: number;
  bytesOut: number;
  errors: number;
  sqsize: number;
  /** Present when the queue must authenticate (DH-HMAC-CHAP); no key material. */
  auth?: QueueAuthView;
}

export interface QueueTransportOps {
  /** The command completed (status/dw0/dw1/sqhd set, `out` holds read data): send C2HData/CapsuleResp, then release the request. */
  queueResponse(req: Request): void;
  /** Parse succeeded and the command needs host data not sent in-capsule: fetch it (R2T/H2CData), then call queue.execute(req). */
  requestData(req: Request): void;
  /** Close the connection (controller teardown, keep-alive expiry). Idempotent. */
  close(reason: string): void;
  /** Remote "addr:port". */
  readonly peer: string;
  /** Local address the host reached us on (discovery TRADDR when listening on a wildcard). */
  readonly localAddress: string;
  readonly localPort: number;
  /** Data digests are on for this connection (reads then ask the backend for the data's CRC32C). */
  readonly dataDigest: boolean;
}

export interface QueueCounters {
  commands: number;
  bytesIn: number;
  bytesOut: number;
  errors: number;
}


/** Data direction of the command as the transport must move it. */
export type ReqDir = 'none' | 'h2c' | 'c2h';

/** Per-request state; the transport recycles Request objects, so `reset` must clear everything. */
export type ReqState =
  /** parsed, waiting for R2T/H2CData */
  | 'need-data'
  /** executing in core/backend */
  | 'exec'
  /** completion handed to the transport */
  | 'done'
  | 'free';

export class Request {
  /** The 64-byte SQE (a view into the received chunk; valid until completion). */
  sqe!: Buffer;
  opcode = 0;
  flags = 0;
  cid = 0;
  nsid = 0;
  /** SGL1 type byte (0x5A transport data block, 0x01 in-capsule offset). */
  sglType = 0;
  sglLen = 0;
  /** In-capsule data as received (undefined: none). */
  inCapsule: Buffer[] | undefined = undefined;
  inCapsuleLen = 0;
  dir: ReqDir = 'none';
  /** Bytes the command moves (host→controller for h2c, controller→host for c2h). */
  dataLen = 0;
  /** Host→controller data once available (in-capsule or gathered H2CData views). */
  data: Buffer[] | undefined = undefined;
  /** Controller→host payload (C2HData). */
  out: Buffer[] | undefined = undefined;
  /** CRC32C of all of `out` when the backend supplied it (then `out` is immutable: NamespaceBackend.read). */
  outCrc: number | undefined = undefined;
  dw0 = 0;
  dw1 = 0;
  status = 0;
  state: ReqState = 'free';
  ns: Namespace | undefined = undefined;
  /** Byte offset of the field that failed parsing (error log param_error_location). */
  errorLoc = 0xffff;
  /** Set by parse: runs once the data (if any) is present; must end in queue.complete(req). */
  execute: ((req: Request) => void) | undefined = undefined;
  /** Transport-private: the R2T transfer tag / bytes received so far. */
  ttag = 0;
  received = 0;
  /** Transport-private scratch list for gathered H2C data. */
  h2c: Buffer[] = [];
  /** The queue the command arrived on. */
  queueRef: QueueModel | undefined = undefined;
  /** SQ head reported in the CQE (set at completion). */
  sqhd = 0;
  /** Capsule receipt, performance.now() ms (a double: no allocation, unlike hrtime.bigint). */
  t0 = 0;
  /** Latency histogram of the command's opcode, set by parse; recorded once at completion. */
  lat: LatencyHistogram | undefined = undefined;

  reset(): void {
    this.inCapsule = undefined;
    this.inCapsuleLen = 0;
    this.dir = 'none';
    this.dataLen = 0;
    this.data = undefined;
    this.out = undefined;
    this.outCrc = undefined;
    this.dw0 = 0;
    this.dw1 = 0;
    this.status = 0;
    this.ns = undefined;
    this.errorLoc = 0xffff;
    this.execute = undefined;
    this.received = 0;
    if (this.h2c.length > 0) this.h2c = [];
    this.t0 = 0;
    this.lat = undefined;
  }

  /** Load the SQE fields the core needs on every command (hot path: direct reads, no object decode). */
  load(sqe: Buffer, inCapsule: Buffer[] | undefined): void {
    this.sqe = sqe;
    this.opcode = sqe[0] as number;
    this.flags = sqe[1] as number;
    this.cid = rd16(sqe, 2);
    this.nsid = rd32(sqe, 4);
    this.sglLen = rd32(sqe, 32);
    this.sglType = sqe[39] as number;
    if (inCapsule !== undefined && inCapsule.length > 0) {
      let n = 0;
      for (const b of inCapsule) n += b.length;
      this.inCapsule = inCapsule;
      this.inCapsuleLen = n;
    }
  }

  /** SGL address (SQE bytes 24..31), as a number: only compared against 0 (in-capsule offset). */
  sglAddrIsZero(): boolean {
    return this.sqe.readUInt32LE(24) === 0 && this.sqe.readUInt32LE(28) === 0;
  }

  cdw(n: 10 | 11 | 12 | 13 | 14 | 15): number {
    return this.sqe.readUInt32LE(40 + (n - 10) * 4);
  }
}


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

/** Per-opcode counters for one subsystem (stats()). */
export type OpcodeCounters = Record<string, number>;

/**
 * Command latency bucket bounds (µs), log-spaced 10 µs .. 100 ms, plus a final +Inf bucket. Fixed, so a
 * histogram is a preallocated array and recording a command allocates nothing.
 */
export const LATENCY_BOUNDS_US: readonly number[] = [10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000];

/** Capsule-receipt-to-completion latency of one opcode in one subsystem. */
export class LatencyHistogram {
  /** counts[i]: commands with latency in (bounds[i-1], bounds[i]] µs; the last entry is the +Inf bucket. */
  readonly counts: number[] = new Array<number>(LATENCY_BOUNDS_US.length + 1).fill(0);
  sumUs = 0;
  count = 0;

  record(us: number): void {
    const b = LATENCY_BOUNDS_US;
    let i = 0;
    while (i < b.length && us > (b[i] as number)) i++;
    this.counts[i] = (this.counts[i] as number) + 1;
    this.sumUs += us;
    this.count++;
  }
}

/** Stats names of the NVM command set opcodes (others: `0x..`). */
const IO_OPNAME: Readonly<Record<number, string>> = { 0: 'flush', 1: 'write', 2: 'read', 5: 'compare', 8: 'write-zeroes', 9: 'dsm' };

/** One opcode's parsed-command count and completion latency. */
class OpcodeStat {
  count = 0;
  readonly lat = new LatencyHistogram();
}

export class Subsystem {
  readonly namespaces = new Map<number, Namespace>();
  /** Sorted active NSIDs, rebuilt on add/remove (Identify CNS 0x02, ANA log). */
  nsids: number[] = [];
  readonly controllers = new Map<number, Controller>();
  readonly hosts: Set<string>;
  allowAnyHost: boolean;
  faults: FaultConfig;
  /** Remaining commands to fail under faults.failNext. */
  failRemaining = 0;
  failStatus = 0;
  /** Per-opcode command count and latency by stats name (admin/discovery/I/O names never collide). */
  readonly #stats = new Map<string, OpcodeStat>();
  /** The same OpcodeStat objects for I/O opcodes, indexed by opcode: no string key on the data path. */
  readonly #ioStats: (OpcodeStat | undefined)[] = new Array<OpcodeStat | undefined>(256).fill(undefined);
  #nextCntlid = CNTLID_MIN;
  readonly serial: string;
  /** Largest transfer in bytes (MDTS in 4 KiB units, CAP.MPSMIN = 0); 0 = unlimited. Fields, not getters over the
   * config: both are read on every I/O command and the config never changes after construction. */
  readonly maxTransfer: number;
  readonly ana: boolean;

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
    this.ana = kind === 'nvm' && (config.ana ?? true);
  }

  get nqn(): string {
    return this.config.nqn;
  }
  get maxIoQueues(): number {
    return this.config.maxIoQueues ?? SUBSYS_DEFAULTS.maxIoQueues;
  }
  get maxControllers(): number {
    return this.config.maxControllers ?? CNTLID_MAX - CNTLID_MIN + 1;
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

  addNamespace(ns: Namespace): void {
    this.namespaces.set(ns.nsid, ns);
    this.nsids = [...this.namespaces.keys()].sort((a, b) => a - b);
  }

  removeNamespace(nsid: number): Namespace | undefined {
    const ns = this.namespaces.get(nsid);
    this.namespaces.delete(nsid);
    this.nsids = [...this.namespaces.keys()].sort((a, b) => a - b);
    return ns;
  }

  setFaults(f: FaultConfig): void {
    this.faults = { ...f };
    this.failRemaining = f.failNext?.count ?? 0;
    this.failStatus = f.failNext?.status ?? 0;
  }

  /** Next free cntlid in CNTLID_MIN..CNTLID_MAX, wrapping; undefined when all are in use (→ Controller Busy). */
  allocCntlid(): number | undefined {
    for (let i = 0; i <= CNTLID_MAX - CNTLID_MIN; i++) {
      const id = this.#nextCntlid;
      this.#nextCntlid = id >= CNTLID_MAX ? CNTLID_MIN : id + 1;
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
      const name = IO_OPNAME[op] ?? `0x${op.toString(16)}`;
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
    const faults: FaultConfig = { ...this.faults };
    if (this.failRemaining > 0) faults.failNext = { count: this.failRemaining, status: this.failStatus };
    else delete faults.failNext;
    if (Object.keys(faults).length > 0) out.faults = faults;
    else delete out.faults;
    out.namespaces = this.nsids.map((id) => ({ ...(this.namespaces.get(id) as Namespace).config }));
    return out;
  }
}


/** CSTS bits (NVMe Base 2.0 Figure 41). */
export const Csts = { RDY: 0x1, CFS: 0x2, SHST_CMPLT: 0x8 } as const;
/** Version 1.3.0: keeps the Linux host off the CNS 0x08 / CSI paths (reference §21 traps 10, 11). */
export const NVME_VS = 0x0001_0300;
/** AERL 3 → four outstanding AERs (nvmet NVMET_ASYNC_EVENTS). */
export const MAX_AERS = 4;
/** Discovery controllers connected with KATO 0 get 120 s (nvmet NVMET_DISC_KATO_MS). */
export const DISC_KATO_MS = 120_000;
export const ERROR_LOG_SLOTS = 128;

export type ControllerState = 'live' | 'shutdown' | 'dead';

export interface ErrorRecord {
  errorCount: bigint;
  sqid: number;
  cmdid: number;
  status: number;
  paramErrorLocation: number;
  nsid: number;
}

export class Controller {
  state: ControllerState = 'live';
  cc = 0;
  csts = 0;
  katoMs: number;
  readonly queues = new Map<number, QueueModel>();
  /** I/O queues granted by Set Features Number of Queues (defaults to the subsystem maximum). */
  grantedIoQueues: number;
  aenEnabled: number;
  readonly aers: Request[] = [];
  readonly events: number[] = [];
  /** Log pages whose notice was sent and not yet cleared by a read without RAE (NVMe Base 2.0 §5.2). */
  readonly masked = new Set<number>();
  readonly changedNs = new Set<number>();
  readonly errors: ErrorRecord[] = [];
  errorCount = 0n;
  readonly smart = { bytesRead: 0, bytesWritten: 0, readCmds: 0, writeCmds: 0 };
  readonly createdAt = Date.now();
  /** TBKAS: any command since the last timer tick counts as a keep-alive (CTRATT bit6). */
  kaSeen = false;
  /** Epoch ms of the last Keep Alive command that succeeded; 0 = none yet. */
  lastKeepAliveAt = 0;
  /** Epoch ms of the last command on any queue (each one also keeps the controller alive under TBKAS); 0 = none. */
  lastCommandAt = 0;
  /** DH-HMAC-CHAP keys of this controller: taken at admin Connect, refreshed by each Negotiate on the admin queue (nvmet_setup_auth). */
  hostAuth: HostAuth | undefined = undefined;
  #kaTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly target: TargetCore,
    readonly subsys: Subsystem,
    readonly cntlid: number,
    readonly hostnqn: string,
    readonly hostid: Buffer,
    readonly port: CorePort,
    katoMs: number,
  ) {
    this.katoMs = subsys.kind === 'discovery' && katoMs === 0 ? DISC_KATO_MS : roundKato(katoMs);
    this.grantedIoQueues = subsys.maxIoQueues;
    this.aenEnabled = this.supportedAens;
  }

  get discovery(): boolean {
    return this.subsys.kind === 'discovery';
  }

  /** OAES: NS attribute + ANA notices on I/O controllers, discovery log change on discovery controllers. */
  get supportedAens(): number {
    if (this.discovery) return AenConfig.DISC;
    return AenConfig.NS_ATTR | (this.subsys.ana ? AenConfig.ANA : 0);
  }

  get ready(): boolean {
    return (this.csts & Csts.RDY) !== 0;
  }

  startKeepAlive(): void {
    if (this.#kaTimer !== undefined) clearTimeout(this.#kaTimer);
    this.#kaTimer = undefined;
    if (this.katoMs === 0 || this.state === 'dead') return;
    this.kaSeen = false;
    this.#kaTimer = setTimeout(() => this.#kaTick(), this.katoMs);
    this.#kaTimer.unref();
  }

  #kaTick(): void {
    this.#kaTimer = undefined;
    if (this.state === 'dead') return;
    if (this.kaSeen) return this.startKeepAlive();
    this.target.stats.katoExpiries++;
    this.target.logger.warn({ cntlid: this.cntlid, subnqn: this.subsys.nqn, hostnqn: this.hostnqn, katoMs: this.katoMs }, 'keep alive timeout: tearing down controller');
    this.teardown('keep-alive timeout');
  }

  setKato(ms: number): void {
    this.katoMs = roundKato(ms);
    this.startKeepAlive();
  }

  /** Handle a CC write (NVMe Base 2.0 §3.7; nvmet_update_cc). Returns false when the value is rejected. */
  writeCc(val: number): void {
    const old = this.cc;
    this.cc = val >>> 0;
    const en = (val & 1) !== 0;
    const wasEn = (old & 1) !== 0;
    const shn = (val >>> 14) & 3;
    const oldShn = (old >>> 14) & 3;
    if (en && !wasEn) {
      const iosqes = (val >>> 16) & 0xf;
      const iocqes = (val >>> 20) & 0xf;
      const mps = (val >>> 7) & 0xf;
      const ams = (val >>> 11) & 0x7;
      const css = (val >>> 4) & 0x7;
      const sizesOk = this.discovery ? (iosqes === 0 || iosqes === 6) && (iocqes === 0 || iocqes === 4) : iosqes === 6 && iocqes === 4;
      if (!sizesOk || mps !== 0 || ams !== 0 || (css !== 0 && css !== 6)) this.csts = Csts.CFS;
      else this.csts = Csts.RDY;
    }
    if (!en && wasEn) this.#clear();
    if (shn !== 0 && oldShn === 0) {
      this.#clear();
      this.csts |= Csts.SHST_CMPLT;
      this.state = 'shutdown';
    }
    if (shn === 0 && oldShn !== 0) {
      this.csts &= ~Csts.SHST_CMPLT;
      if (this.state === 'shutdown') this.state = 'live';
    }
  }

  /** Controller reset (EN 1→0) or shutdown: outstanding AERs complete like nvmet (INTERNAL|DNR). */
  #clear(): void {
    this.csts &= ~Csts.RDY;
    // After the CC write's own completion, as nvmet orders it in the capture (io.json).
    process.nextTick(() => this.failAers(Status.INTERNAL | DNR));
  }

  failAers(status: number): void {
    for (const req of this.aers.splice(0)) {
      req.queueRef?.complete(req, status);
    }
  }

  /** Queue an async event (NVMe Base 2.0 §5.2): only if enabled by Set Features 0x0B and not masked. */
  addEvent(kind: 'ns' | 'ana' | 'disc'): void {
    const { bit, lid, dw0 } =
      kind === 'ns'
        ? { bit: AenConfig.NS_ATTR, lid: LogPageId.CHANGED_NS, dw0: AenDw0.NS_CHANGED }
        : kind === 'ana'
          ? { bit: AenConfig.ANA, lid: LogPageId.ANA, dw0: AenDw0.ANA_CHANGE }
          : { bit: AenConfig.DISC, lid: LogPageId.DISCOVERY, dw0: AenDw0.DISC_CHANGE };
    if ((this.supportedAens & bit) === 0 || (this.aenEnabled & bit) === 0) return;
    if (this.masked.has(lid)) return;
    this.masked.add(lid);
    this.events.push(dw0);
    this.deliverEvents();
  }

  deliverEvents(): void {
    while (this.aers.length > 0 && this.events.length > 0) {
      const req = this.aers.shift() as Request;
      req.dw0 = this.events.shift() as number;
      req.queueRef?.complete(req, 0);
    }
  }

  /** Log page read without RAE: the notice may fire again (NVMe Base 2.0 §5.16, reference trap 19). */
  logRead(lid: number, rae: boolean): void {
    if (rae) return;
    this.masked.delete(lid);
    if (lid === LogPageId.CHANGED_NS) this.changedNs.clear();
  }

  nsChanged(nsid: number): void {
    this.changedNs.add(nsid);
    this.addEvent('ns');
  }

  recordError(req: Request, sqid: number): void {
    this.errorCount++;
    this.errors.unshift({ errorCount: this.errorCount, sqid, cmdid: req.cid, status: req.status, paramErrorLocation: req.errorLoc, nsid: req.nsid });
    if (this.errors.length > ERROR_LOG_SLOTS) this.errors.pop();
  }

  /** Close every queue of this controller and forget it (KATO expiry, admin queue gone, service stop). */
  teardown(reason: string): void {
    if (this.state === 'dead') return;
    this.state = 'dead';
    if (this.#kaTimer !== undefined) clearTimeout(this.#kaTimer);
    this.#kaTimer = undefined;
    this.aers.length = 0;
    this.subsys.controllers.delete(this.cntlid);
    this.target.logger.info({ cntlid: this.cntlid, subnqn: this.subsys.nqn, hostnqn: this.hostnqn, reason }, 'controller teardown');
    for (const q of [...this.queues.values()]) q.closeTransport(reason);
    this.queues.clear();
  }
}

/** nvmet stores KATO in whole seconds, rounded up (Set Features 0x0F, Connect). */
export function roundKato(ms: number): number {
  return Math.ceil(ms / 1000) * 1000;
}


export const WELL_KNOWN_DISCOVERY_NQN = 'nqn.2014-08.org.nvmexpress.discovery';

export interface CoreStats {
  /** PDU-level fatal errors by FES ("0x01" ...). */
  pduErrorsByFes: Record<string, number>;
  dataDigestErrors: number;
  katoExpiries: number;
  connectionsAccepted: number;
  /** Connections closed at accept because the port's maxConnections was reached. */
  connectionsRejected: number;
  connectionsActive: number;
  connectsOk: number;
  connectsFailed: number;
}

export class TargetCore {
  readonly subsystems = new Map<string, Subsystem>();
  readonly ports = new Map<number, CorePort>();
  /** The discovery subsystem; answers the well-known NQN and the unique one when configured. */
  readonly discovery: Subsystem;
  uniqueDiscoveryNqn: string | undefined;
  /** Discovery log generation counter: bumped whenever any host's log could have changed. */
  genctr = 1n;
  /** Per-host DH-HMAC-CHAP keys (nvmet hosts/<nqn>/dhchap_*). */
  readonly hostAuth = new AuthRegistry();
  readonly stats: CoreStats = { pduErrorsByFes: {}, dataDigestErrors: 0, katoExpiries: 0, connectionsAccepted: 0, connectionsRejected: 0, connectionsActive: 0, connectsOk: 0, connectsFailed: 0 };
  readonly startedAt = Date.now();

  constructor(readonly logger: Logger) {
    this.discovery = new Subsystem({ nqn: WELL_KNOWN_DISCOVERY_NQN, allowAnyHost: true, mdts: 0 }, 'discovery');
  }

  /** The subsystem a Connect names, or undefined (unknown NQN or not exported on this port). */
  findSubsystem(nqn: string, portId: number): Subsystem | undefined {
    if (nqn === WELL_KNOWN_DISCOVERY_NQN || (this.uniqueDiscoveryNqn !== undefined && nqn === this.uniqueDiscoveryNqn)) return this.discovery;
    const s = this.subsystems.get(nqn);
    if (s === undefined || !s.exportedOn(portId)) return undefined;
    return s;
  }

  /** NQN the discovery controller reports as its own (SUBTYPE 3 entry, Identify SUBNQN). */
  get discoveryNqn(): string {
    return this.uniqueDiscoveryNqn ?? WELL_KNOWN_DISCOVERY_NQN;
  }

  /** Discovery content changed: bump GENCTR and notify discovery controllers (AEN 0x0070F002). */
  discoveryChanged(): void {
    this.genctr++;
    for (const c of this.discovery.controllers.values()) c.addEvent('disc');
  }

  /** Namespace added/removed: changed-NS list + AEN to every controller of the subsystem (nvmet_ns_changed). */
  nsChanged(subsys: Subsystem, nsid: number): void {
    for (const c of subsys.controllers.values()) c.nsChanged(nsid);
  }

  anaChanged(portId: number): void {
    for (const s of this.subsystems.values()) {
      for (const c of s.controllers.values()) if (c.port.id === portId) c.addEvent('ana');
    }
  }

  *allNamespaces(): Iterable<Namespace> {
    for (const s of this.subsystems.values()) yield* s.namespaces.values();
  }

  countPduError(fes: number): void {
    const k = `0x${fes.toString(16).padStart(2, '0')}`;
    this.stats.pduErrorsByFes[k] = (this.stats.pduErrorsByFes[k] ?? 0) + 1;
  }
}
