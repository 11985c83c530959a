// The fault engine (docs/faults.md): the rules of a target or subsystem, their matching and schedules; what a firing
// rule does is fault-actions.ts. Matched where a parsed command is dispatched (CoreQueue.submit) and at ICReq.
import type { Buffer } from 'node:buffer';
import { randomInt } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { AdminOpcode, ConnectDataOffset, FABRICS_OPCODE, FabricsSqeOffset, FabricsType, FeatureId, InvalidArgumentError, NvmOpcode } from '../../protocol/index.js';
import { LbaRangeSet } from '../backend/index.js';
import { FAULT_WIRE_ACTIONS, type FaultAction, type FaultMatch, type FaultRule, type FaultWireAction } from '../model/faults.js';

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

/** What matching reads of a queue (CoreQueue, as QueueModel): a structural view, so the engine imports no queue. */
export interface FaultQueue {
  readonly qid: number;
  /** The connection's digests: a digest-error rule matches only where that digest was negotiated. */
  readonly ops: { readonly dataDigest: boolean; readonly headerDigest?: boolean };
  readonly port: { readonly id: number };
  readonly ctrl: { readonly hostnqn: string; readonly cntlid: number; readonly subsys: { readonly nqn: string } } | undefined;
}

/** What matching reads of a command (Request). */
export interface FaultCommand {
  readonly opcode: number;
  readonly sqe: Buffer;
  readonly nsid: number;
  readonly inCapsule: Buffer[] | undefined;
  /** Data direction and length, once parsed: the C2HData and R2T actions match only commands that move data that way. */
  readonly dir: string | undefined;
  readonly dataLen: number;
  fault: PendingFault | undefined;
}

/** A completion-time fault a rule put on a command (Request.fault; fault-actions.ts faultCompletion). */
export interface PendingFault {
  action: Extract<FaultAction, { kind: 'delay' | 'duplicate' | 'cid' | 'grant-queues' }> | FaultWireAction;
  /** The draw for a delay between minUs and maxUs, made when the rule fired (so a seed replays it). */
  draw: number;
}

/** A rule that fires: its id, action and PRNG (for a drawn delay). */
export interface FiredRule {
  readonly id: string;
  readonly rule: FaultRule;
  draw(): number;
}

/** Applies a firing rule's action to a command; true when the command is taken over (fault-actions.ts fireFault). */
export type FireFault<Q extends FaultQueue, C extends FaultCommand> = (r: FiredRule, q: Q, req: C, qid: number) => boolean;

/** Actions that mark the command (Request.fault): one mark per command, the first rule's. */
const COMPLETION_ACTIONS = new Set<FaultAction['kind']>(['delay', 'duplicate', 'cid', 'grant-queues', ...FAULT_WIRE_ACTIONS]);

/** PDU types counted by a rule with match.event "pdu" (NVMe-TCP 1.0 §3.6.2.6, §3.6.2.8). */
const CAPSULE_CMD = 0x04;

/**
 * Whether a PDU-shaping action can act on this command on this connection: C2HData actions need read data, R2T
 * actions a transfer by R2T, digest errors the digest negotiated (a rule does not match where it cannot act).
 */
function wireApplies(a: FaultAction, q: FaultQueue, req: FaultCommand): boolean {
  switch (a.kind) {
    case 'c2h-reorder':
    case 'c2h-duplicate':
    case 'c2h-overrun':
    case 'c2h-split':
    case 'success-flag':
      return req.dir === 'c2h' && req.dataLen > 0;
    case 'data-digest-error':
      return req.dir === 'c2h' && req.dataLen > 0 && q.ops.dataDigest;
    case 'header-digest-error':
      return q.ops.headerDigest === true;
    case 'r2t-past-maxr2t':
    case 'r2t-past-transfer':
      return req.dir === 'h2c' && req.dataLen > 0 && req.inCapsule === undefined;
    default:
      return true;
  }
}

/** Opcodes with SLBA in CDW10/11 and NLB in CDW12 bits 15:0 (NVMe NVM Command Set 1.0 §3.2). */
const LBA_OPCODES = new Set<number>([NvmOpcode.WRITE, NvmOpcode.READ, NvmOpcode.WRITE_UNCOR, NvmOpcode.COMPARE, NvmOpcode.WRITE_ZEROES, NvmOpcode.VERIFY]);
/** Commands that read the medium: a media-error range fails them. */
const READS_MEDIUM = new Set<number>([NvmOpcode.READ, NvmOpcode.COMPARE, NvmOpcode.VERIFY]);
/** Commands that rewrite the medium: they clear what they cover of a media-error range. */
const WRITES_MEDIUM = new Set<number>([NvmOpcode.WRITE, NvmOpcode.WRITE_ZEROES]);

/** A rule with its counters and schedule state. */
class ArmedRule implements FiredRule {
  matches = 0;
  hits = 0;
  readonly addedAt = performance.now();
  /** mulberry32 state (PRNG for `probability` and drawn delays): the same seed draws the same sequence. */
  #rng: number;
  readonly seed: number | undefined;
  /** media-error: the blocks still bad (the set Write Uncorrectable keeps too); a write removes what it covers. */
  readonly bad = new LbaRangeSet();

  constructor(
    readonly id: string,
    readonly rule: FaultRule,
  ) {
    const s = rule.schedule;
    this.seed = s?.probability !== undefined || (rule.action.kind === 'delay' && rule.action.us === undefined) ? (s?.seed ?? randomInt(0, 0xffffffff)) : undefined;
    this.#rng = this.seed ?? 0;
    if (rule.action.kind === 'media-error' && rule.match?.lba !== undefined) this.bad.add(rule.match.lba.start, rule.match.lba.count);
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
    // Every Kth alone fires on the Kth, 2Kth, ...; with nth, on the Nth and every Kth after it.
    const nth = s.nth ?? s.every ?? 1;
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
function commandEvent(q: FaultQueue, req: FaultCommand): string {
  if (req.opcode === FABRICS_OPCODE) {
    const fctype = req.sqe[FabricsSqeOffset.fctype] as number;
    if (fctype === FabricsType.CONNECT) return 'connect';
    if (fctype === FabricsType.AUTH_SEND || fctype === FabricsType.AUTH_RECV) return 'auth';
    return 'command';
  }
  return q.qid === 0 && req.opcode === AdminOpcode.KEEP_ALIVE ? 'keep-alive' : 'command';
}

/** An NQN field of a Connect's data (NVMe-oF 1.1 §3.3, Figure 20): NUL-terminated ASCII. */
function connectNqn(req: FaultCommand, offset: number): string | undefined {
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
function cmdQid(q: FaultQueue, req: FaultCommand, event: string): number {
  return event === 'connect' && q.qid < 0 ? req.sqe.readUInt16LE(42) : q.qid;
}

/** [slba, slba + nlb) of an LBA command (NVM Command Set 1.0 §3.2), or undefined for one without LBAs. */
function lbaRange(req: FaultCommand, qid: number): [number, number] | undefined {
  if (qid <= 0 || !LBA_OPCODES.has(req.opcode)) return undefined;
  const slba = req.sqe.readUInt32LE(40) + req.sqe.readUInt32LE(44) * 2 ** 32;
  return [slba, slba + (req.sqe.readUInt16LE(48) + 1)];
}

/** Every field of `m` holds for this command (fields left out match anything). */
function commandMatches(m: FaultMatch, q: FaultQueue, req: FaultCommand, event: string, qid: number, pduType: number): boolean {
  const want = m.event ?? 'command';
  if (want === 'pdu') {
    if (m.pduType !== undefined && m.pduType !== pduType) return false;
  } else if (pduType !== CAPSULE_CMD || (want !== 'command' && want !== event)) return false;
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
   * A parsed command is about to run (or fetch its data), or (`pduType` 6) an H2CData of it arrived. True when a rule
   * took it over (completed it with a status, dropped it, closed the connection); otherwise it runs, perhaps with a
   * completion-time or PDU-shaping fault on req.fault. Rules with match.event "pdu" count both kinds (docs/faults.md).
   */
  onCommand<Q extends FaultQueue, C extends FaultCommand>(q: Q, req: C, fire: FireFault<Q, C>, pduType = CAPSULE_CMD): boolean {
    const event = commandEvent(q, req);
    const qid = cmdQid(q, req, event);
    for (const r of this.#rules) {
      const m = r.rule.match ?? {};
      if (!commandMatches(m, q, req, event, qid, pduType)) continue;
      const a = r.rule.action;
      const lbas = m.lba !== undefined || a.kind === 'media-error' ? lbaRange(req, qid) : undefined;
      if (a.kind === 'media-error') {
        if (lbas === undefined) continue;
        if (WRITES_MEDIUM.has(req.opcode)) {
          r.bad.remove(lbas[0], lbas[1] - lbas[0]);
          continue;
        }
        if (!READS_MEDIUM.has(req.opcode) || r.bad.firstIn(lbas[0], lbas[1] - lbas[0]) < 0) continue;
      } else if (m.lba !== undefined && (lbas === undefined || !(lbas[0] < m.lba.start + m.lba.count && m.lba.start < lbas[1]))) continue;
      if (a.kind === 'grant-queues' && !(q.qid === 0 && req.opcode === AdminOpcode.SET_FEATURES && (req.sqe.readUInt32LE(40) & 0xff) === FeatureId.NUM_QUEUES)) continue;
      if (m.event === 'icreq' || a.kind === 'icresp') continue;
      if (COMPLETION_ACTIONS.has(a.kind) && (req.fault !== undefined || !wireApplies(a, q, req))) continue;
      if (!r.scheduled()) continue;
      r.hits++;
      this.firings++;
      if (fire(r, q, req, qid)) return true;
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
}
