// The fault engine (docs/faults.md): rules that make the target misbehave on purpose, matched at the one point a
// parsed command is dispatched (CoreQueue.submit), at its completion (CoreQueue.complete) and at ICReq.
import { Buffer } from 'node:buffer';
import { randomInt } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { AdminOpcode, ConnectDataOffset, DNR, FABRICS_OPCODE, FabricsSqeOffset, FabricsType, FeatureId, NvmOpcode, Status, InvalidArgumentError, setLongTimeout } from '../../protocol/index.js';
import type { FaultAction, FaultMatch, FaultRule } from '../config/fault-rules.js';
import { ReadLent } from '../backend/index.js';
import type { QueueModel } from './queue-model.js';
import type { Request } from './request.js';

/** A stored rule as `list` shows it: the rule, how often it matched and fired, and the seed that replays it. */
export interface FaultRuleView {
  id: string;
  rule: FaultRule;
  matches: number;
  hits: number;
  seed?: number;
}

/** What an ICReq rule does to the ICResp (NVMe-TCP 1.0 §3.6.2.3), or how it closes the connection. */
export type IcReqFault = Extract<FaultAction, { kind: 'icresp' }> | Extract<FaultAction, { kind: 'close' }>;

type AnyAction = FaultAction;

/** Opcodes with SLBA in CDW10/11 and NLB in CDW12 bits 15:0 (NVMe NVM Command Set 1.0 §3.2). */
const LBA_OPCODES = new Set<number>([NvmOpcode.WRITE, NvmOpcode.READ, NvmOpcode.WRITE_UNCOR, NvmOpcode.COMPARE, NvmOpcode.WRITE_ZEROES, NvmOpcode.VERIFY]);
/** Commands that read the medium: a media-error range fails them. */
const READS_MEDIUM = new Set<number>([NvmOpcode.READ, NvmOpcode.COMPARE, NvmOpcode.VERIFY]);
/** Commands that rewrite the medium: they clear what they cover of a media-error range. */
const WRITES_MEDIUM = new Set<number>([NvmOpcode.WRITE, NvmOpcode.WRITE_ZEROES]);

/** Unknown CID: bit 15 flipped, which also changes the Linux host's generation bits (nvme_cid_to_rq / genctr). */
const UNKNOWN_CID_FLIP = 0x8000;

/** Status of a read of a range a media-error rule marked bad (NVMe Base 2.0 §4.2.3.2.6, Unrecovered Read Error). */
const MEDIA_READ_ERROR = Status.READ_ERROR;

/** A rule with its counters and schedule state. */
class ArmedRule {
  matches = 0;
  hits = 0;
  readonly addedAt = performance.now();
  /** mulberry32 state (PRNG for `probability` and drawn delays): the same seed draws the same sequence. */
  #rng: number;
  readonly seed: number | undefined;
  /** media-error: the blocks still bad, as sorted disjoint [start, end) ranges; a write removes what it covers. */
  bad: [number, number][] = [];

  constructor(
    readonly id: string,
    readonly rule: FaultRule,
  ) {
    const s = rule.schedule;
    this.seed = s?.probability !== undefined || (rule.action.kind === 'delay' && rule.action.us === undefined) ? (s?.seed ?? randomInt(0, 0xffffffff)) : undefined;
    this.#rng = this.seed ?? 0;
    if (rule.action.kind === 'media-error' && rule.match?.lba !== undefined) this.bad = [[rule.match.lba.start, rule.match.lba.start + rule.match.lba.count]];
  }

  /** mulberry32: a uniform draw in [0, 1). */
  draw(): number {
    this.#rng = (this.#rng + 0x6d2b79f5) | 0;
    let t = this.#rng;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Counts a match and says whether the schedule fires on it: window, Nth / every Kth, probability, times. */
  scheduled(): boolean {
    const s = this.rule.schedule;
    if (s === undefined) {
      this.matches++;
      return true;
    }
    if (s.afterMs !== undefined || s.forMs !== undefined) {
      const age = performance.now() - this.addedAt;
      const from = s.afterMs ?? 0;
      if (age < from || (s.forMs !== undefined && age >= from + s.forMs)) return false;
    }
    const m = ++this.matches;
    if (s.times !== undefined && this.hits >= s.times) return false;
    const nth = s.nth ?? 1;
    if (s.every !== undefined) {
      if (m < nth || (m - nth) % s.every !== 0) return false;
    } else if (s.nth !== undefined && m !== nth) return false;
    if (s.probability !== undefined && this.draw() >= s.probability) return false;
    return true;
  }

  view(): FaultRuleView {
    const v: FaultRuleView = { id: this.id, rule: this.rule, matches: this.matches, hits: this.hits };
    if (this.seed !== undefined) v.seed = this.seed;
    return v;
  }
}

/** The event a command is: Connect, an authentication step (Authentication Send / Receive), a Keep Alive, or other. */
function commandEvent(q: QueueModel, req: Request): string {
  if (req.opcode === FABRICS_OPCODE) {
    const fctype = req.sqe[FabricsSqeOffset.fctype] as number;
    if (fctype === FabricsType.CONNECT) return 'connect';
    if (fctype === FabricsType.AUTH_SEND || fctype === FabricsType.AUTH_RECV) return 'auth';
    return 'command';
  }
  return q.qid === 0 && req.opcode === AdminOpcode.KEEP_ALIVE ? 'keep-alive' : 'command';
}

/** An NQN field of a Connect's data (NVMe-oF 1.1 §3.3, Figure 20): NUL-terminated ASCII. */
function connectNqn(req: Request, offset: number): string | undefined {
  const d = req.inCapsule?.[0];
  if (d === undefined || d.length < offset + 256) return undefined;
  const end = d.indexOf(0, offset);
  return d.toString('latin1', offset, end < 0 || end > offset + 256 ? offset + 256 : end);
}

function qidMatches(want: NonNullable<FaultMatch['qid']>, qid: number): boolean {
  if (want === 'admin') return qid === 0;
  if (want === 'io') return qid > 0;
  return typeof want === 'number' ? want === qid : want.includes(qid);
}

/** The queue id a command is for: a Connect's QID field before the queue is bound (NVMe-oF 1.1 §3.3, Figure 19). */
function cmdQid(q: QueueModel, req: Request, event: string): number {
  return event === 'connect' && q.qid < 0 ? req.sqe.readUInt16LE(42) : q.qid;
}

/** [slba, slba + nlb) of an LBA command (NVM Command Set 1.0 §3.2), or undefined for one without LBAs. */
function lbaRange(req: Request, qid: number): [number, number] | undefined {
  if (qid <= 0 || !LBA_OPCODES.has(req.opcode)) return undefined;
  const slba = req.sqe.readUInt32LE(40) + req.sqe.readUInt32LE(44) * 2 ** 32;
  return [slba, slba + (req.sqe.readUInt16LE(48) + 1)];
}

/** Every field of `m` holds for this command (fields left out match anything). */
function commandMatches(m: FaultMatch, q: QueueModel, req: Request, event: string, qid: number): boolean {
  if ((m.event ?? 'command') !== 'command' && m.event !== event) return false;
  if (m.port !== undefined && m.port !== q.port.id) return false;
  if (m.qid !== undefined && !qidMatches(m.qid, qid)) return false;
  if (m.set !== undefined) {
    const set = req.opcode === FABRICS_OPCODE ? 'fabrics' : qid === 0 ? 'admin' : 'io';
    if (set !== m.set) return false;
  }
  if (m.opcode !== undefined && (typeof m.opcode === 'number' ? m.opcode !== req.opcode : !m.opcode.includes(req.opcode))) return false;
  if (m.fctype !== undefined && (req.opcode !== FABRICS_OPCODE || req.sqe[FabricsSqeOffset.fctype] !== m.fctype)) return false;
  if (m.nsid !== undefined && (qid === 0 || req.nsid !== m.nsid)) return false;
  const ctrl = q.ctrl;
  if (m.hostnqn !== undefined && (ctrl?.hostnqn ?? (event === 'connect' ? connectNqn(req, ConnectDataOffset.hostnqn) : undefined)) !== m.hostnqn) return false;
  if (m.subnqn !== undefined && (ctrl?.subsys.nqn ?? (event === 'connect' ? connectNqn(req, ConnectDataOffset.subnqn) : undefined)) !== m.subnqn) return false;
  if (m.cntlid !== undefined && (ctrl?.cntlid ?? (event === 'connect' ? req.inCapsule?.[0]?.readUInt16LE(ConnectDataOffset.cntlid) : undefined)) !== m.cntlid) return false;
  return true;
}

function overlaps(r: [number, number], ranges: readonly (readonly [number, number])[]): boolean {
  for (const [s, e] of ranges) if (r[0] < e && s < r[1]) return true;
  return false;
}

/** `ranges` without [s, e): what a write leaves of a media-error range. */
function subtract(ranges: [number, number][], s: number, e: number): [number, number][] {
  const out: [number, number][] = [];
  for (const [a, b] of ranges) {
    if (e <= a || b <= s) out.push([a, b]);
    else {
      if (a < s) out.push([a, s]);
      if (e < b) out.push([e, b]);
    }
  }
  return out;
}

/**
 * The rules of one target. `armed` is the one check the data path makes when nothing is armed (docs/faults.md,
 * "Cost"); a rule added or removed takes effect on the next command of every connected queue.
 */
export class FaultEngine {
  /** True while any rule is stored: CoreQueue.submit and TargetTcpQueue's ICReq handler look no further otherwise. */
  armed = false;
  #rules: ArmedRule[] = [];
  #nextId = 1;
  /** Firings since start, every rule together (also per rule in list()). */
  firings = 0;

  /** Where add/remove are logged (firings go to the queue's target logger); none for a subsystem's knob rules. */
  constructor(readonly logger?: Logger) {}

  /** Stores a validated rule (parseFaultRule); its id is given or made ("r1", "r2", ...). Throws on a used id. */
  add(rule: FaultRule): FaultRuleView {
    let id = rule.id;
    if (id === undefined) {
      do id = `r${this.#nextId++}`;
      while (this.#rules.some((r) => r.id === id));
    } else if (this.#rules.some((r) => r.id === id)) throw new InvalidArgumentError('id', `rule ${JSON.stringify(id)} already exists; remove it first or pick another id`);
    const r = new ArmedRule(id, { ...rule, id });
    this.#rules = [...this.#rules, r];
    this.armed = true;
    this.logger?.info({ rule: id, action: rule.action.kind }, 'fault rule added');
    return r.view();
  }

  /** Removes one rule; false when no rule has that id. */
  remove(id: string): boolean {
    const next = this.#rules.filter((r) => r.id !== id);
    if (next.length === this.#rules.length) return false;
    this.#rules = next;
    this.armed = next.length > 0;
    this.logger?.info({ rule: id }, 'fault rule removed');
    return true;
  }

  /** Removes every rule whose id starts with `prefix` (all when omitted); returns how many went. */
  clear(prefix = ''): number {
    const next = this.#rules.filter((r) => !r.id.startsWith(prefix));
    const n = this.#rules.length - next.length;
    this.#rules = next;
    this.armed = next.length > 0;
    return n;
  }

  list(): FaultRuleView[] {
    return this.#rules.map((r) => r.view());
  }

  /** Hits of one rule (undefined when it is gone). */
  hitsOf(id: string): number | undefined {
    return this.#rules.find((r) => r.id === id)?.hits;
  }

  /**
   * A parsed command is about to run (or fetch its data). True when a rule took it over (completed it with a status,
   * dropped it, closed the connection); otherwise it runs, perhaps with a completion-time fault on req.fault.
   */
  onCommand(q: QueueModel, req: Request): boolean {
    const event = commandEvent(q, req);
    const qid = cmdQid(q, req, event);
    for (const r of this.#rules) {
      const m = r.rule.match ?? {};
      if (!commandMatches(m, q, req, event, qid)) continue;
      const a = r.rule.action;
      const lbas = m.lba !== undefined || a.kind === 'media-error' ? lbaRange(req, qid) : undefined;
      if (a.kind === 'media-error') {
        if (lbas === undefined) continue;
        if (WRITES_MEDIUM.has(req.opcode)) {
          r.bad = subtract(r.bad, lbas[0], lbas[1]);
          continue;
        }
        if (!READS_MEDIUM.has(req.opcode) || !overlaps(lbas, r.bad)) continue;
      } else if (m.lba !== undefined && (lbas === undefined || !overlaps(lbas, [[m.lba.start, m.lba.start + m.lba.count]]))) continue;
      if (a.kind === 'grant-queues' && !(q.qid === 0 && req.opcode === AdminOpcode.SET_FEATURES && (req.sqe.readUInt32LE(40) & 0xff) === FeatureId.NUM_QUEUES)) continue;
      if (m.event === 'icreq' || a.kind === 'icresp') continue;
      if (COMPLETION_ACTIONS.has(a.kind) && req.fault !== undefined) continue;
      if (!r.scheduled()) continue;
      if (this.#fire(r, q, req, qid)) return true;
    }
    return false;
  }

  /** An ICReq arrived on `portId`: the first rule for it that fires, or undefined (NVMe-TCP 1.0 §3.6.2.2). */
  onIcReq(portId: number, peer: string): IcReqFault | undefined {
    for (const r of this.#rules) {
      const m = r.rule.match;
      if (m?.event !== 'icreq' || (m.port !== undefined && m.port !== portId)) continue;
      if (!r.scheduled()) continue;
      r.hits++;
      this.firings++;
      this.logger?.info({ rule: r.id, action: r.rule.action.kind, port: portId, peer }, 'fault fired');
      return r.rule.action as IcReqFault;
    }
    return undefined;
  }

  /** Applies a firing rule's action; true when the command is taken over (it does not run). */
  #fire(r: ArmedRule, q: QueueModel, req: Request, qid: number): boolean {
    r.hits++;
    this.firings++;
    const a = r.rule.action;
    // Knob rules (no logger of their own) fire on every command they cover: logged at debug, not info.
    const log = q.target.logger;
    if (this.logger !== undefined || log.isLevelEnabled('debug')) log[this.logger !== undefined ? 'info' : 'debug']({ rule: r.id, action: a.kind, qid, cid: req.cid, opcode: req.opcode, peer: q.ops.peer }, 'fault fired');
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
        if (q.ctrl !== undefined) q.ctrl.csts |= CSTS_CFS;
        return false;
      case 'icresp':
        return false;
    }
  }
}

/** CSTS.CFS, bit 1 (NVMe Base 2.0 §3.1.4.2). */
const CSTS_CFS = 0x2;

const COMPLETION_ACTIONS = new Set<AnyAction['kind']>(['delay', 'duplicate', 'cid', 'grant-queues']);

/** A completion-time fault a rule put on a command (Request.fault). */
export interface PendingFault {
  action: Extract<FaultAction, { kind: 'delay' | 'duplicate' | 'cid' | 'grant-queues' }>;
  /** The draw for a delay between minUs and maxUs, made when the rule fired (so a seed replays it). */
  draw: number;
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

/** AEN dw0 values (NVMe Base 2.0 Figure 151): ANA change, namespace attribute changed, discovery log change. */
const AEN_DW0 = { ana: 0x030002, ns: 0x000002, disc: 0xf00002 } as const;

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
  req.fault = undefined;
  const a = f.action;
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
  }
}

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
    else q.complete(req, status);
  };
  setLongTimeout(fire, us / 1000, 'fault delay');
}
