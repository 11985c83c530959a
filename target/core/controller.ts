// One controller (nvmet_ctrl): its state, CC/CSTS, keep-alive timer, asynchronous events, error log and queues.
import { Buffer } from 'node:buffer';
import { HOST_BEHAVIOR_SIZE, AEN_RESV_LOG_AVAILABLE, AenConfig, AenDw0, CQE_SIZE, CcCss, CstsShst, DNR, LogPageId, NvmeVersion, SQE_SIZE, Status, decodeCc, encodeCsts, KATO_MAX_MS, setLongTimeout, type LongTimeout, type ResvNotifType } from '../../protocol/index.js';
import { HostLogLimiter } from './host-log.js';
import { ResvLogQueue } from './reservation.js';
import type { HostAuth } from './auth.js';
import type { TargetCore } from './core.js';
import type { CorePort } from './port.js';
import type { Request } from './request.js';
import type { ControllerEntry, Subsystem } from './subsystem.js';
import type { AenKind, ControllerState, ErrorRecord, QueueHandle, Transitions } from './types.js';

/** CSTS bits the controller sets (NVMe Base 2.0 §3.1.3.6), as masks of protocol's CSTS layout. */
export const Csts = { RDY: encodeCsts({ rdy: true }), CFS: encodeCsts({ cfs: true }), SHST_CMPLT: encodeCsts({ shst: CstsShst.COMPLETE }) } as const;
/**
 * VS 1.4.0 (NVMe Base 2.0 §3.1.3.2): what the controller advertises is NVMe 1.4's (CTRATT TBKAS, ANA reporting), so
 * a 1.3 version would contradict CTRATT. Not 2.0: the command-set Identify structures are here (cmd/iocs.ts), but a
 * 2.0 controller also has CRTO and CAP.CRMS and the Supported Log Pages log, which this one does not (docs/target.md,
 * "Why VS stays 1.4").
 */
export const NVME_VS = NvmeVersion.V1_4;
/** AERL 3 → four outstanding AERs (nvmet NVMET_ASYNC_EVENTS). */
export const MAX_AERS = 4;
/** Discovery controllers connected with KATO 0 get 120 s (nvmet NVMET_DISC_KATO_MS). */
export const DISC_KATO_MS = 120_000;
export const ERROR_LOG_SLOTS = 128;

/** CC.IOSQES / CC.IOCQES an NVM controller requires: log2 of the 64-byte SQE and 16-byte CQE (NVMe Base 2.0 §3.1.3.5). */
const IOSQES = Math.log2(SQE_SIZE);
const IOCQES = Math.log2(CQE_SIZE);

/** Controller transitions: SHN set / cleared moves live ↔ shutdown; teardown ends either. */
export const CONTROLLER_TRANSITIONS: Transitions<ControllerState> = {
  live: ['shutdown', 'dead'],
  shutdown: ['live', 'dead'],
  dead: [],
};

export class TargetController implements ControllerEntry {
  #state: ControllerState = 'live';
  cc = 0;
  csts = 0;
  katoMs: number;
  readonly queues = new Map<number, QueueHandle>();
  /** I/O queues granted by Set Features Number of Queues (defaults to the subsystem maximum). */
  grantedIoQueues: number;
  aenEnabled: number;
  readonly aers: Request[] = [];
  readonly events: number[] = [];
  /** Log pages whose notice was sent and not yet cleared by a read without RAE (NVMe Base 2.0 §5.2). */
  readonly masked = new Set<number>();
  readonly changedNs = new Set<number>();
  /** The Host Behavior Support structure the host set (FID 16h, NVMe Base 2.0 §5.27.1.18); zeros until it does. */
  readonly hostBehavior = Buffer.alloc(HOST_BEHAVIOR_SIZE);
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
  /** Hex of the host identifier: the reservation registrant key (NVMe Base 2.0 §8.19.2). */
  readonly hostKey: string;
  /** Reservation Notification log queue of this controller (log page 80h). */
  readonly resvLog = new ResvLogQueue();
  /** Reservation Notification Mask (Set Features 82h) per NSID; absent = nothing masked. */
  readonly resvMask = new Map<number, number>();
  #kaTimer: LongTimeout | undefined;
  /** The rate limit on the log lines this controller's host causes (host-log.ts). */
  readonly hostLog: HostLogLimiter;

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
    this.hostKey = hostid.toString('hex');
    this.hostLog = new HostLogLimiter(target.logger, target.stats.refusals, { cntlid, subnqn: subsys.nqn, hostnqn });
  }

  get state(): ControllerState {
    return this.#state;
  }

  /** The one place the controller state changes: refuses (returns false) any edge not in CONTROLLER_TRANSITIONS. */
  setState(next: ControllerState): boolean {
    const from = this.#state;
    if (!CONTROLLER_TRANSITIONS[from].includes(next)) {
      this.target.logger.debug({ cntlid: this.cntlid, from, to: next }, 'controller state change refused');
      return false;
    }
    this.#state = next;
    this.target.logger.debug({ cntlid: this.cntlid, from, to: next }, 'controller state');
    return true;
  }

  get discovery(): boolean {
    return this.subsys.kind === 'discovery';
  }

  /** OAES: NS attribute + ANA notices on I/O controllers, discovery log change on discovery controllers. */
  get supportedAens(): number {
    if (this.discovery) return AenConfig.DISC;
    return AenConfig.NS_ATTR | (this.subsys.ana ? AenConfig.ANA : 0);
  }

  /**
   * Asynchronous Event Configuration bits a host may set (FID 0Bh, NVMe Base 2.0 Figure 326): the OAES notices, and
   * on an I/O controller the SMART / health critical warnings (bits 7:0), which a host may always enable (nvmet's
   * NVMET_AEN_CFG_ALL; the SPDK host sets 0x091F). OAES itself has no bits 7:0.
   */
  get settableAens(): number {
    return this.discovery ? this.supportedAens : (this.supportedAens | AenConfig.SMART_MASK) >>> 0;
  }

  get ready(): boolean {
    return (this.csts & Csts.RDY) !== 0;
  }

  startKeepAlive(): void {
    this.#kaTimer?.clear();
    this.#kaTimer = undefined;
    if (this.katoMs === 0 || this.#state === 'dead') return;
    this.kaSeen = false;
    // KATO is a 32-bit ms count, past what setTimeout keeps (2^31−1 ms): a LongTimeout runs it out in full.
    this.#kaTimer = setLongTimeout(() => this.#kaTick(), this.katoMs, 'KATO').unref();
  }

  #kaTick(): void {
    this.#kaTimer = undefined;
    if (this.#state === 'dead') return;
    if (this.kaSeen) return this.startKeepAlive();
    this.target.stats.katoExpiries++;
    this.target.logger.warn({ cntlid: this.cntlid, subnqn: this.subsys.nqn, hostnqn: this.hostnqn, katoMs: this.katoMs }, 'keep alive timeout: tearing down controller');
    this.teardown('keep-alive timeout');
  }

  setKato(ms: number): void {
    this.katoMs = roundKato(ms);
    this.startKeepAlive();
  }

  /** Handle a CC write (NVMe Base 2.0 §3.1.3.5, §3.6; nvmet_update_cc); a rejected configuration sets CSTS.CFS. */
  writeCc(val: number): void {
    const old = decodeCc(this.cc);
    const cc = decodeCc(val);
    this.cc = val >>> 0;
    if (cc.en && !old.en) {
      const sizesOk = this.discovery
        ? (cc.iosqes === 0 || cc.iosqes === IOSQES) && (cc.iocqes === 0 || cc.iocqes === IOCQES)
        : cc.iosqes === IOSQES && cc.iocqes === IOCQES;
      if (!sizesOk || cc.mps !== 0 || cc.ams !== 0 || (cc.css !== CcCss.NVM && cc.css !== CcCss.CSI)) this.csts = Csts.CFS;
      else this.csts = Csts.RDY;
    }
    if (!cc.en && old.en) this.#clear();
    if (cc.shn !== 0 && old.shn === 0) {
      this.#clear();
      this.csts |= Csts.SHST_CMPLT;
      this.setState('shutdown');
    }
    if (cc.shn === 0 && old.shn !== 0) {
      this.csts &= ~Csts.SHST_CMPLT;
      if (this.#state === 'shutdown') this.setState('live');
    }
  }

  /**
   * Controller reset (EN 1→0) or shutdown. Outstanding AERs are forgotten, never completed: a Controller Level Reset
   * stops processing outstanding commands (NVMe Base 2.0 §3.7.2), nvmet_clear_ctrl and SPDK's nvmf_tgt leave them
   * alone, and the SPDK host aborts its AERs locally before CC.SHN and fails the association on a completion for a
   * CID it no longer holds (docs/peers.md).
   */
  #clear(): void {
    this.csts &= ~Csts.RDY;
    for (const req of this.aers.splice(0)) req.queueRef?.abandon(req);
  }

  /** Queue an async event (NVMe Base 2.0 §5.2): only if enabled by Set Features 0x0B and not masked. */
  addEvent(kind: AenKind): void {
    if (kind === 'resv') {
      // Reservation notices are not in Asynchronous Event Configuration: the Reservation Notification Mask gates them.
      if (this.masked.has(LogPageId.RESV_NOTIF)) return;
      this.masked.add(LogPageId.RESV_NOTIF);
      this.events.push(AEN_RESV_LOG_AVAILABLE);
      this.deliverEvents();
      return;
    }
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

  /** Log page read without RAE: the notice may fire again (NVMe Base 2.0 §5.16, Retain Asynchronous Event). */
  logRead(lid: number, rae: boolean): void {
    if (rae) return;
    this.masked.delete(lid);
    if (lid === LogPageId.CHANGED_NS) this.changedNs.clear();
  }

  nsChanged(nsid: number): void {
    this.changedNs.add(nsid);
    this.addEvent('ns');
  }

  /** A reservation notification for `nsid`: unless masked, a log page 80h entry and its AEN (NVMe Base 2.0 §8.19.4). */
  resvNotice(nsid: number, type: ResvNotifType): void {
    const mask = this.resvMask.get(nsid) ?? 0;
    if ((mask & (1 << type)) !== 0) return;
    this.resvLog.push(type, nsid);
    this.addEvent('resv');
  }

  recordError(req: Request, sqid: number): void {
    this.errorCount++;
    this.errors.unshift({ errorCount: this.errorCount, sqid, cmdid: req.cid, status: req.status, paramErrorLocation: req.errorLoc, nsid: req.nsid });
    if (this.errors.length > ERROR_LOG_SLOTS) this.errors.pop();
  }

  /** Close every queue of this controller and forget it (KATO expiry, admin queue gone, service stop). */
  teardown(reason: string): void {
    if (!this.setState('dead')) return;
    this.#kaTimer?.clear();
    this.#kaTimer = undefined;
    this.aers.length = 0;
    this.hostLog.close();
    this.subsys.controllers.delete(this.cntlid);
    this.target.logger.info({ cntlid: this.cntlid, subnqn: this.subsys.nqn, hostnqn: this.hostnqn, reason }, 'controller teardown');
    for (const q of [...this.queues.values()]) q.closeTransport(reason);
    this.queues.clear();
  }
}

/**
 * nvmet stores KATO in whole seconds, rounded up (Set Features 0x0F, Connect): the controller may round KATO up to its
 * granularity, Identify KAS = 10 (1 s; NVMe Base 2.0 §5.27.1.12). Above 4,294,967,000 ms the next whole second does
 * not fit the 32 bits Get Features reports (nvmet's `kato * 1000` wraps there): keep the host's value instead.
 */
export function roundKato(ms: number): number {
  return Math.min(Math.ceil(ms / 1000) * 1000, KATO_MAX_MS);
}
