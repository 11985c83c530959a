// What a firing fault rule does (docs/faults.md): the NVMe-level actions at dispatch (fireFault) and at completion
// (faultCompletion), and the connection-level ones through QueueTransportOps (hangUp, sendCqe).
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { AenDw0, DNR, Status, setLongTimeout } from '../../protocol/index.js';
import type { FaultAction } from '../model/faults.js';
import { ReadLent } from '../backend/index.js';
import { ioStatus } from './cmd/io.js';
import { Csts } from './controller.js';
import type { FiredRule, PendingFault } from './fault-engine.js';
import type { QueueModel } from './queue-model.js';
import type { Request } from './request.js';

/** Ids of the subsystem knob rules (Subsystem.setFaults): they fire on every command they cover, logged at debug. */
const KNOB_RULES = new Set(['failNext', 'commandLatencyUs', 'connectLatencyMs']);

/** Unknown CID: bit 15 flipped, which also changes the Linux host's generation bits (nvme_cid_to_rq / genctr). */
const UNKNOWN_CID_FLIP = 0x8000;

/** Status of a read of a range a media-error rule marked bad (NVMe Base 2.0 §4.2.3.2.6, Unrecovered Read Error). */
const MEDIA_READ_ERROR = Status.READ_ERROR;

/**
 * Applies a firing rule's action (FireFault); true when the command is taken over (it does not run). Every firing is
 * logged with its rule, queue and CID.
 */
export function fireFault(r: FiredRule, q: QueueModel, req: Request, qid: number): boolean {
  const a = r.rule.action;
  // Knob rules (no logger of their own) fire on every command they cover: logged at debug, not info.
  const log = q.target.logger;
  if (!KNOB_RULES.has(r.id) || log.isLevelEnabled('debug')) log[KNOB_RULES.has(r.id) ? 'debug' : 'info']({ rule: r.id, action: a.kind, qid, cid: req.cid, opcode: req.opcode, peer: q.ops.peer }, 'fault fired');
  switch (a.kind) {
    case 'status':
      return failWith(q, req, faultStatus(a));
    case 'media-error':
      return failWith(q, req, MEDIA_READ_ERROR | (a.dnr === false ? 0 : DNR));
    case 'drop':
      // Never completes (NVMe Base 2.0 §3.4.4: the host's timeout decides); the command stays in flight.
      return true;
    case 'close':
      if (q.ops.hangUp !== undefined) q.ops.hangUp(a.rst === true);
      else q.ops.close('fault rule close');
      return true;
    case 'delay':
    case 'duplicate':
    case 'cid':
    case 'grant-queues':
      req.fault = { action: a, draw: a.kind === 'delay' && a.us === undefined ? r.draw() : 0 };
      return false;
    case 'ana':
      setAna(q, a);
      return false;
    case 'aen':
      aenStorm(q, a);
      return false;
    case 'fatal':
      // CSTS.CFS (NVMe Base 2.0 §3.1.4.2): the host sees it on its next Property Get of CSTS.
      if (q.ctrl !== undefined) q.ctrl.csts |= Csts.CFS;
      return false;
    case 'icresp':
      return false;
    default:
      // A PDU-shaping action (FAULT_WIRE_ACTIONS): the command runs; its R2T or reply takes the transport's slow branch.
      req.fault = { action: a, draw: 0 };
      return false;
  }
}

/** A status action's Linux-form status: SCT/SC plus CRD, More and DNR as asked (NVMe Base 2.0 §4.2.3, Figure 92). */
export function faultStatus(a: Extract<FaultAction, { kind: 'status' }>): number {
  const base = typeof a.status === 'number' ? a.status : ((Status as Record<string, number>)[a.status] ?? 0);
  return (base & 0x7ff) | ((a.crd ?? 0) << 11) | (a.more === true ? 0x2000 : 0) | (a.dnr === true ? DNR : 0);
}

function failWith(q: QueueModel, req: Request, status: number): true {
  // Counted as the namespace's error, not as a read or write (nor its bytes): the command never ran.
  if (req.ns !== undefined) req.ns.counters.errors++;
  req.out = undefined;
  q.complete(req, status);
  return true;
}

/** ANA state change on the queue's port, with or without the AEN (NVMe Base 2.0 §8.1.3, Asynchronous Event). */
function setAna(q: QueueModel, a: Extract<FaultAction, { kind: 'ana' }>): void {
  const port = q.port;
  port.anaStates.set(a.group, a.state);
  port.anaChangeCount++;
  const target = q.target;
  target.changedThen({ kind: 'port', port }, 'ANA change (fault rule)', { portId: port.id }, a.aen === false ? undefined : () => target.anaChanged(port.id));
}

/** AEN dw0 by event (NVMe Base 2.0 §5.2, Figure 151): notice type, information and the log page to read. */
const AEN_DW0 = { ana: AenDw0.ANA_CHANGE, ns: AenDw0.NS_CHANGED, disc: AenDw0.DISC_CHANGE } as const;

/**
 * `count` notices to the queue's controller whatever the masking (NVMe Base 2.0 §5.2.2 masks an event type until its
 * log is read; a storm ignores that), and without changing the log: a notice the log page then contradicts.
 */
function aenStorm(q: QueueModel, a: Extract<FaultAction, { kind: 'aen' }>): void {
  const ctrl = q.ctrl;
  if (ctrl === undefined) return;
  for (let i = 0; i < (a.count ?? 1); i++) ctrl.events.push(AEN_DW0[a.event]);
  ctrl.deliverEvents();
}

/**
 * A command with a completion-time fault is completing (CoreQueue.complete, before anything else). True when the
 * fault took the completion over (a delay: it completes later); otherwise the completion goes on as changed here.
 */
export function faultCompletion(q: QueueModel, req: Request, status: number): boolean {
  const f = req.fault as PendingFault;
  const a = f.action;
  // A PDU-shaping mark stays for the transport (TargetTcpQueue.queueResponse reads and clears it).
  if (!COMPLETION_KINDS.has(a.kind)) return false;
  req.fault = undefined;
  switch (a.kind) {
    case 'delay':
      delayCompletion(q, req, status, a.us ?? (a.minUs as number) + Math.floor(f.draw * ((a.maxUs as number) - (a.minUs as number) + 1)));
      return true;
    case 'grant-queues': {
      // Fewer I/O queues than asked (NVMe Base 2.0 §5.27.1.5): NSQA/NCQA in dw0, 0's based, and Connect beyond refused.
      const ctrl = q.ctrl;
      if (status !== 0 || ctrl === undefined) return false;
      const g = Math.min(ctrl.grantedIoQueues, a.count);
      ctrl.grantedIoQueues = g;
      req.dw0 = ((g - 1) | ((g - 1) << 16)) >>> 0;
      return false;
    }
    case 'cid':
      req.cid = a.cid === 'stale' ? q.lastCid : a.cid === 'unknown' ? req.cid ^ UNKNOWN_CID_FLIP : a.cid;
      return false;
    case 'duplicate': {
      // Complete twice: the same CQE again once the first is queued (NVMe Base 2.0 §4.2.4: a host must not see this).
      const { cid, dw0, dw1 } = req;
      queueMicrotask(() => q.ops.sendCqe?.(cid, status, dw0, dw1, req.sqhd));
      return false;
    }
    default:
      return false;
  }
}

/** The marks faultCompletion acts on; the rest are PDU-shaping marks for the transport. */
const COMPLETION_KINDS = new Set<string>(['delay', 'grant-queues', 'cid', 'duplicate']);

/** Completes `us` microseconds from now (any length: a LongTimeout; Node's timers fire up to ~1 ms early). */
function delayCompletion(q: QueueModel, req: Request, status: number, us: number): void {
  // Data a backend lends only for the callback or the task (ReadLent) must outlive the delay: keep a copy.
  if (req.outLent !== ReadLent.STABLE && req.out !== undefined) {
    req.out = [Buffer.concat(req.out)];
    req.outLent = ReadLent.STABLE;
  }
  const due = performance.now() + us / 1000;
  const fire = (): void => {
    const left = due - performance.now();
    if (left > 0) setTimeout(fire, left);
    else q.complete(req, q.qid > 0 ? ioStatus(q, req, status) : status);
  };
  setLongTimeout(fire, us / 1000, 'fault delay');
}
