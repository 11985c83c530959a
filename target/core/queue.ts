// Core side of one queue (one TCP connection): Connect binding, SQ head, command dispatch and completion (nvmet_sq).
import { performance } from 'node:perf_hooks';
import { DNR, FABRICS_OPCODE, PduType, Psdt, Sgl1Offset, SglType, SqeFlags, SqeOffset, Status } from '../../protocol/index.js';
import { parseAdminCmd } from './cmd/admin.js';
import { parseDiscoveryCmd } from './cmd/discovery.js';
import { parseFabricsCmd } from './cmd/fabrics.js';
import { parseIoCmd } from './cmd/io.js';
import { FusedPairing } from './fused.js';
import type { QueueAuth } from './auth.js';
import { faultCompletion, fireFault } from './fault-actions.js';
import type { TargetController } from './controller.js';
import type { TargetCore } from './core.js';
import { FABRICS_IN_CAPSULE_MAX, type CorePort } from './port.js';
import type { QueueModel, QueueTransportOps } from './queue-model.js';
import type { TargetNamespace } from './namespace.js';
import { ReqStateId, type Request } from './request.js';
import type { LatencyHistogram } from './stats.js';
import type { QueueCounters, QueueHandle, QueueInfoView, QueueState, Transitions } from './types.js';

/** performance.timeOrigin is a getter into the binding: read once (it never changes in a process). */
const TIME_ORIGIN = performance.timeOrigin;

/** Queue transitions: a Connect binds the queue (live) or the connection goes first; a live queue ends closed. */
export const QUEUE_TRANSITIONS: Transitions<QueueState> = {
  connecting: ['live', 'closed'],
  live: ['closed'],
  closed: [],
};

export class CoreQueue implements QueueModel {
  #state: QueueState = 'connecting';
  ctrl: TargetController | undefined;
  qid = -1;
  /** 0's based SQ size from Connect. */
  sqsize = 0;
  sqhd = 0;
  sqflowDisabled = false;
  inFlight = 0;
  lastCid = 0;
  auth: QueueAuth | undefined = undefined;
  readonly counters: QueueCounters = { commands: 0, bytesIn: 0, bytesOut: 0, errors: 0 };
  /**
   * Clock of the received chunk being handled (beginChunk/endChunk; -1 outside one). Two clock reads per chunk instead
   * of two per command (docs/performance.md): a command's latency starts when its chunk began to be handled, and a
   * completion inside a chunk is timed at the chunk's end, just before its replies are written. Resolution is thus
   * one chunk's handling time (a few µs at QD32, below the first 10 µs bucket); completions from outside a chunk
   * (async backends, injected latency) read the clock themselves.
   */
  #clock = -1;
  readonly #fused = new FusedPairing();
  /**
   * Setup times (performance.now() ms; -1 until seen): the ICReq (the transport calls icReqReceived), the last capsule
   * received while connecting (its Connect), the first command once live. After that first command submit pays
   * one comparison (firstCommandAt >= 0) and reads no clock for them.
   */
  #icReqAt = -1;
  #connectAt = -1;
  #firstCommandAt = -1;
  readonly #pendLat: LatencyHistogram[] = [];
  readonly #pendT0: number[] = [];
  #pendN = 0;

  constructor(
    readonly target: TargetCore,
    readonly port: CorePort,
    readonly ops: QueueTransportOps,
  ) {}

  get state(): QueueState {
    return this.#state;
  }

  /**
   * The one place the queue state changes: refuses (returns false) any edge not in QUEUE_TRANSITIONS. Going live
   * tells the transport (QueueTransportOps.queueLive), which owns its own connection state.
   */
  setState(next: QueueState): boolean {
    const from = this.#state;
    if (!QUEUE_TRANSITIONS[from].includes(next)) {
      this.target.logger.debug({ qid: this.qid, peer: this.ops.peer, from, to: next }, 'queue state change refused');
      return false;
    }
    this.#state = next;
    if (this.target.logger.isLevelEnabled('trace')) this.target.logger.trace({ qid: this.qid, peer: this.ops.peer, from, to: next }, 'queue state');
    if (next === 'live') this.ops.queueLive?.();
    return true;
  }

  /** A command capsule arrived: parse, check the SGL, then fetch data or execute (nvmet_req_init + nvmet_tcp_map_data). */
  submit(req: Request): void {
    req.queueRef = this;
    req.setState(ReqStateId.EXEC);
    // Latency start and the controller's last-command time (one clock read per received chunk: see clock).
    const t0 = this.#clock >= 0 ? this.#clock : performance.now();
    req.t0 = t0;
    req.lat = undefined;
    this.inFlight++;
    this.counters.commands++;
    if (this.#firstCommandAt < 0) {
      if (this.#state === 'connecting') this.#connectAt = t0;
      else this.#firstCommandAt = t0;
    }
    const ctrl = this.ctrl;
    if (ctrl !== undefined) {
      ctrl.kaSeen = true;
      ctrl.lastCommandAt = TIME_ORIGIN + t0;
    }
    let status = this.#parse(req);
    if (status === 0) status = this.#mapSgl(req);
    if (status !== 0) {
      this.complete(req, status);
      return;
    }
    // The fault engine's one check when nothing is armed (docs/faults.md, "Cost"); knob rules live on the subsystem.
    const faults = this.target.faults;
    if ((faults.armed && faults.onCommand(this, req, fireFault)) || (ctrl !== undefined && ctrl.subsys.faultRules.armed && ctrl.subsys.faultRules.onCommand(this, req, fireFault))) return;
    if (req.dir === 'h2c' && req.dataLen > 0) {
      if (req.inCapsule !== undefined) {
        req.data = req.inCapsule;
        this.execute(req);
      } else {
        req.setState(ReqStateId.NEED_DATA);
        this.ops.requestData(req);
      }
      return;
    }
    this.execute(req);
  }

  /**
   * An H2CData PDU of `req` arrived (NVMe-TCP 1.0 §3.6.2.8): target rules with match.event "pdu" count it. True when
   * one took the connection down (close at the Nth PDU). Called only while target.faults.armed.
   */
  faultDataPdu(req: Request): boolean {
    return this.target.faults.onCommand(this, req, fireFault, PduType.H2C_DATA);
  }

  /** Complete a command without parsing it (transport-level failure such as a data digest error on in-capsule data). */
  reject(req: Request, status: number): void {
    req.queueRef = this;
    req.setState(ReqStateId.EXEC);
    req.lat = undefined;
    this.inFlight++;
    this.counters.commands++;
    this.complete(req, status);
  }

  /** Data (if any) is in req.data: run the command. */
  execute(req: Request): void {
    // From need-data once the data is in; a command executed straight from submit is in exec already.
    if (req.stateId === ReqStateId.NEED_DATA) req.setState(ReqStateId.EXEC);
    const ns = req.ns;
    if (ns !== undefined && !req.nsHeld) {
      // A fused Compare and Write holds the namespace: run once it is done (target/core/fused.ts).
      if (ns.exclusive !== undefined) {
        ns.exclusive.waiters.push(() => {
          if (this.#state !== 'closed') this.execute(req);
        });
        return;
      }
      ns.executing++;
      req.nsHeld = true;
    }
    const exec = req.execute;
    if (exec === undefined) {
      this.complete(req, Status.INTERNAL | DNR);
      return;
    }
    try {
      exec(req);
    } catch (err) {
      this.target.logger.error({ err, opcode: req.opcode, qid: this.qid, peer: this.ops.peer }, 'command handler threw');
      if (req.stateId === ReqStateId.EXEC) this.complete(req, Status.INTERNAL | DNR);
    }
  }

  /** Finish a command: status, SQ head, counters, error log; then the transport sends the response. */
  complete(req: Request, status = req.status): void {
    if (req.fault !== undefined && req.stateId !== ReqStateId.DONE && faultCompletion(this, req, status)) return;
    if (!req.setState(ReqStateId.DONE)) return;
    this.lastCid = req.cid;
    if ((req.flags & SqeFlags.FUSE_MASK) !== 0) this.#fused.completed(this, req);
    req.status = status;
    this.inFlight--;
    if (req.nsHeld) {
      req.nsHeld = false;
      const ns = req.ns as TargetNamespace;
      ns.executing--;
      ns.exclusive?.check();
    }
    if (this.sqflowDisabled) req.sqhd = 0xffff;
    else {
      // nvmet advances the head at completion (__nvmet_req_complete): (sqhd + 1) % (sqsize + 1), without a division.
      const next = this.sqhd + 1;
      this.sqhd = next > this.sqsize ? 0 : next;
      req.sqhd = this.sqhd;
    }
    if (status !== 0) {
      this.counters.errors++;
      this.ctrl?.recordError(req, this.qid < 0 ? 0 : this.qid);
    }
    const lat = req.lat;
    if (lat !== undefined) {
      req.lat = undefined;
      if (this.#clock < 0) lat.record((performance.now() - req.t0) * 1000);
      else {
        this.#pendLat[this.#pendN] = lat;
        this.#pendT0[this.#pendN] = req.t0;
        this.#pendN++;
      }
    }
    if (this.#state === 'closed') return;
    // Completions also arrive from backend callbacks, outside the socket handler's try/catch: never let one escape.
    try {
      this.ops.queueResponse(req);
    } catch (err) {
      this.target.logger.error({ err, qid: this.qid, peer: this.ops.peer }, 'sending a completion failed; closing connection');
      this.ops.close('internal error');
    }
  }

  abandon(req: Request): void {
    if (!req.setState(ReqStateId.DONE)) return;
    req.lat = undefined;
    this.inFlight--;
  }

  /** The transport starts handling one received chunk. */
  beginChunk(): void {
    this.#clock = performance.now();
  }

  /** The chunk is handled (its replies are about to be written): record the latencies of what completed in it. */
  endChunk(): void {
    this.#clock = -1;
    const n = this.#pendN;
    if (n === 0) return;
    this.#pendN = 0;
    const now = performance.now();
    const lats = this.#pendLat;
    const t0s = this.#pendT0;
    for (let i = 0; i < n; i++) (lats[i] as LatencyHistogram).record((now - (t0s[i] as number)) * 1000);
  }

  #parse(req: Request): number {
    // Common checks (nvmet_req_init): PSDT must select SGLs (NVMe-oF 1.1 §2.1). A fused command (Compare and Write
    // only) pairs on this queue first (target/core/fused.ts).
    this.#fused.beforeParse(this, req);
    if ((req.flags & SqeFlags.FUSE_MASK) !== 0) return this.#fused.parse(this, req, this.ctrl?.subsys.mediaStateLocal === true, () => this.#parseOne(req));
    return this.#parseOne(req);
  }

  #parseOne(req: Request): number {
    if ((req.flags & SqeFlags.PSDT_MASK) !== Psdt.SGL) {
      req.errorLoc = SqeOffset.flags;
      return Status.INVALID_FIELD | DNR;
    }
    if (req.opcode === FABRICS_OPCODE) return parseFabricsCmd(this, req);
    const ctrl = this.ctrl;
    if (this.#state !== 'live' || ctrl === undefined) {
      req.errorLoc = SqeOffset.opcode;
      return Status.CMD_SEQ_ERROR | DNR;
    }
    // nvmet_check_auth_status: before authentication only Connect and Authentication Send/Receive run (NVMe Base 2.0 §8.13.1).
    if (this.auth !== undefined && !this.auth.authenticated) {
      req.errorLoc = SqeOffset.opcode;
      return Status.AUTH_REQUIRED | DNR;
    }
    if (this.qid === 0) {
      if (!ctrl.ready) {
        req.errorLoc = SqeOffset.opcode;
        return Status.CMD_SEQ_ERROR | DNR;
      }
      return ctrl.discovery ? parseDiscoveryCmd(ctrl, req) : parseAdminCmd(ctrl, req);
    }
    if (!ctrl.ready) {
      req.errorLoc = SqeOffset.opcode;
      return Status.CMD_SEQ_ERROR | DNR;
    }
    return parseIoCmd(ctrl, this, req);
  }

  /**
   * SGL checks of nvmet_tcp_map_data and nvmet_check_transfer_len (NVMe-TCP 1.0 §3.3.3), before any data moves.
   * A descriptor of length 0 describes no data (NVMe Base 2.0 §4.3.2), whatever its type: the SPDK host sends an
   * in-capsule Data Block / Offset descriptor of length 0 on every opcode whose bits 1:0 are 01b (Set Features
   * 07h/0Bh), the Linux host a Transport Data Block; nvmet_tcp_map_data returns early on a zero length and SPDK's
   * spdk_nvmf_req_get_xfer makes any zero-length SGL "no data". It then only has to agree with the command's transfer.
   */
  #mapSgl(req: Request): number {
    const t = req.sglType;
    if (req.sglLen === 0) {
      if (req.inCapsuleLen !== 0) {
        req.errorLoc = Sgl1Offset.length;
        return Status.SGL_INVALID_DATA | DNR;
      }
    } else if (t === SglType.DATA_BLOCK_OFFSET) {
      if (req.dir !== 'h2c') {
        req.errorLoc = Sgl1Offset.address;
        return Status.INVALID_FIELD | DNR;
      }
      if (!req.sglAddrIsZero()) {
        req.errorLoc = Sgl1Offset.address;
        return Status.SGL_INVALID_OFFSET | DNR;
      }
      const limit = this.qid > 0 && req.opcode !== FABRICS_OPCODE ? this.port.inlineDataSize : FABRICS_IN_CAPSULE_MAX;
      if (req.sglLen > limit) {
        req.errorLoc = Sgl1Offset.length;
        return Status.SGL_INVALID_OFFSET | DNR;
      }
      if (req.inCapsuleLen !== req.sglLen) {
        req.errorLoc = Sgl1Offset.length;
        return Status.SGL_INVALID_DATA | DNR;
      }
    } else if (t === SglType.TRANSPORT_DATA_BLOCK) {
      if (req.inCapsule !== undefined) {
        req.errorLoc = Sgl1Offset.type;
        return Status.SGL_INVALID_DATA | DNR;
      }
    } else {
      // Keyed SGL Data Block (RDMA), Bit Bucket, Segment: not for data on NVMe/TCP (NVMe-TCP 1.0 §3.3.3).
      req.errorLoc = Sgl1Offset.type;
      return Status.SGL_INVALID_TYPE | DNR;
    }
    if (req.sglLen !== req.dataLen) {
      req.errorLoc = Sgl1Offset.length;
      return Status.SGL_INVALID_DATA | DNR;
    }
    return 0;
  }

  /** The transport received this connection's ICReq (NVMe-TCP 1.0 §3.6.2.2): the queue's setup begins. */
  icReqReceived(): void {
    this.#icReqAt = performance.now();
  }

  /** The ICReq and Connect times, epoch ms (a worker taking the queue over shows them: setupTimes of HandedOffQueue). */
  setupTimes(): { icReqAt?: number; connectAt?: number } {
    return { ...(this.#icReqAt >= 0 ? { icReqAt: TIME_ORIGIN + this.#icReqAt } : {}), ...(this.#connectAt >= 0 ? { connectAt: TIME_ORIGIN + this.#connectAt } : {}) };
  }

  /** Counters view for listControllers(). */
  info(): QueueInfoView {
    const v: QueueInfoView = { qid: this.qid, peer: this.ops.peer, state: this.#state, inFlight: this.inFlight, ...this.counters, sqsize: this.sqsize, tls: this.ops.tls === true, ...this.setupTimes() };
    if (this.#firstCommandAt >= 0) v.firstCommandAt = TIME_ORIGIN + this.#firstCommandAt;
    if (this.auth !== undefined) v.auth = this.auth.view();
    return v;
  }

  /** Transport reports the connection is gone. */
  onTransportClosed(): void {
    const wasLive = this.#state === 'live';
    if (!this.setState('closed')) return;
    this.auth?.dispose();
    const ctrl = this.ctrl;
    if (ctrl === undefined || !wasLive) return;
    ctrl.queues.delete(this.qid);
    this.target.logger.info({ cntlid: ctrl.cntlid, subnqn: ctrl.subsys.nqn, hostnqn: ctrl.hostnqn, qid: this.qid, peer: this.ops.peer }, 'queue disconnected');
    // The host closes the admin queue last (nvme_tcp teardown order); its loss ends the controller, as in nvmet.
    if (this.qid === 0) ctrl.teardown('admin queue closed');
  }

  /**
   * This queue's connection moved to a worker process after its Connect completed (target/workers): `remote` stands
   * for it in the controller from now on, and this object is done without tearing anything down.
   */
  handOver(remote: QueueHandle): void {
    const ctrl = this.ctrl;
    if (this.#state !== 'live' || ctrl === undefined) return;
    this.setState('closed');
    this.auth?.dispose();
    ctrl.queues.set(this.qid, remote);
  }

  /**
   * A worker process serves an I/O queue the primary connected (target/workers): bind it to `ctrl` as the primary's
   * Connect did (executeConnect), without a Connect on this side.
   */
  bindHandedOff(ctrl: TargetController, qid: number, sqsize: number, sqflowDisabled: boolean): void {
    this.ctrl = ctrl;
    this.qid = qid;
    this.sqsize = sqsize;
    this.sqflowDisabled = sqflowDisabled;
    this.sqhd = 0;
    ctrl.queues.set(qid, this);
    this.setState('live');
  }

  /** Core-initiated close (controller teardown). */
  closeTransport(reason: string): void {
    this.ops.close(reason);
  }

  abortWaiting(cid: number): boolean {
    return this.ops.abortWaiting?.(cid) ?? false;
  }
}
