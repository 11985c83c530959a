// Reservation state of one namespace (NVMe Base 2.0 §8.19), shared by every controller of the subsystem. Registrants
// are keyed by host identifier, so all controllers of one host share one registration (§8.19.2). The narrow face the
// data path uses is checkAccess(hostKey, opcode); the reservation commands call register/acquire/release/report.
// Everything here is plain data and synchronous: the subsystem wires notifications, aborts and persistence.
import { Buffer } from 'node:buffer';
import {
  Cptpl,
  DNR,
  NvmOpcode,
  RESV_CNTLID_DYNAMIC,
  ResvAcquireAction,
  ResvNotifType,
  ResvRegisterAction,
  ResvReleaseAction,
  ResvType,
  Status,
  isAllRegistrants,
  type ResvNotifLog,
  type ResvStatus,
} from '../../protocol/index.js';

/** What a host is to the namespace's reservation. */
export type ResvRole = 'holder' | 'registrant' | 'non-registrant';
/** The command groups of NVMe Base 2.0 §8.19 "Command Behavior in the Presence of a Reservation". */
export type ResvCmdGroup = 'read' | 'write';
/** A: allowed, C: Reservation Conflict. */
export type ResvAccess = 'A' | 'C';

/**
 * NVMe Base 2.0 §8.19, table "Command Behavior in the Presence of a Reservation": per reservation type and command
 * group, the outcome for the holder, a registrant that is not the holder, and a non-registrant. Under the All
 * Registrants types every registrant is a holder, so their registrant column repeats the holder column.
 */
export const RESV_ACCESS_TABLE: Readonly<Record<1 | 2 | 3 | 4 | 5 | 6, Readonly<Record<ResvCmdGroup, Readonly<Record<ResvRole, ResvAccess>>>>>> = {
  [ResvType.WRITE_EXCLUSIVE]: { read: { holder: 'A', registrant: 'A', 'non-registrant': 'A' }, write: { holder: 'A', registrant: 'C', 'non-registrant': 'C' } },
  [ResvType.EXCLUSIVE_ACCESS]: { read: { holder: 'A', registrant: 'C', 'non-registrant': 'C' }, write: { holder: 'A', registrant: 'C', 'non-registrant': 'C' } },
  [ResvType.WRITE_EXCLUSIVE_REG_ONLY]: { read: { holder: 'A', registrant: 'A', 'non-registrant': 'A' }, write: { holder: 'A', registrant: 'A', 'non-registrant': 'C' } },
  [ResvType.EXCLUSIVE_ACCESS_REG_ONLY]: { read: { holder: 'A', registrant: 'A', 'non-registrant': 'C' }, write: { holder: 'A', registrant: 'A', 'non-registrant': 'C' } },
  [ResvType.WRITE_EXCLUSIVE_ALL_REGS]: { read: { holder: 'A', registrant: 'A', 'non-registrant': 'A' }, write: { holder: 'A', registrant: 'A', 'non-registrant': 'C' } },
  [ResvType.EXCLUSIVE_ACCESS_ALL_REGS]: { read: { holder: 'A', registrant: 'A', 'non-registrant': 'C' }, write: { holder: 'A', registrant: 'A', 'non-registrant': 'C' } },
};

/**
 * Command group of each NVM opcode (0 none, 1 read, 2 write), the §8.19 table's lists: Read group = Compare, Read,
 * Verify; Write group = Dataset Management, Flush, Write, Write Uncorrectable, Write Zeroes, Copy, Zone Append,
 * Zone Management Send (Zone Management Receive reads). Reservation commands are in neither: their own rules decide.
 */
const GROUP_OF = new Uint8Array(256);
for (const op of [NvmOpcode.READ, NvmOpcode.COMPARE, NvmOpcode.VERIFY, NvmOpcode.ZONE_MGMT_RECV]) GROUP_OF[op] = 1;
for (const op of [NvmOpcode.DSM, NvmOpcode.FLUSH, NvmOpcode.WRITE, NvmOpcode.WRITE_UNCOR, NvmOpcode.WRITE_ZEROES, NvmOpcode.COPY, NvmOpcode.ZONE_APPEND, NvmOpcode.ZONE_MGMT_SEND]) GROUP_OF[op] = 2;

/** Per (type, role) a bit per group (1 read, 2 write) that conflicts: the table folded for the data path. */
const CONFLICT_BITS = new Uint8Array(7 * 3);
const ROLE_INDEX: Readonly<Record<ResvRole, number>> = { holder: 0, registrant: 1, 'non-registrant': 2 };
for (const [t, groups] of Object.entries(RESV_ACCESS_TABLE)) {
  for (const role of ['holder', 'registrant', 'non-registrant'] as const) {
    const bits = (groups.read[role] === 'C' ? 1 : 0) | (groups.write[role] === 'C' ? 2 : 0);
    CONFLICT_BITS[Number(t) * 3 + ROLE_INDEX[role]] = bits;
  }
}

export const RESV_CONFLICT = Status.RESERVATION_CONFLICT | DNR;
const INVALID_FIELD = Status.INVALID_FIELD | DNR;

export interface Registrant {
  /** 128-bit host identifier (Connect HOSTID). */
  hostid: Buffer;
  /** Reservation key. */
  rkey: bigint;
}

/** What the namespace's reservation tells the rest of the subsystem. */
export interface ResvEvents {
  /** A notification for every controller of host `hostKey` (Base 2.0 §8.19.4; the controller applies its mask). */
  notify(hostKey: string, type: ResvNotifType): void;
  /** The state changed (for persistence through power loss). */
  changed(): void;
}

/** Persisted form (PTPL): everything that must survive a power loss, JSON-safe. */
export interface PersistedResv {
  rtype: number;
  holder: string | null;
  gen: number;
  ptpl: boolean;
  registrants: Array<{ hostid: string; rkey: string }>;
}

/**
 * What a worker process needs to decide conflicts and aborts exactly as the owner would: the persisted state plus
 * the preempt-and-abort generations (docs/target.md, "Reservations with target workers").
 */
export interface ResvReplica extends PersistedResv {
  abortGen: number;
  abortedAt: Array<[string, number]>;
}

export interface ResvRegisterArgs {
  rrega: number;
  iekey: boolean;
  cptpl: number;
  crkey: bigint;
  nrkey: bigint;
}
export interface ResvAcquireArgs {
  racqa: number;
  iekey: boolean;
  rtype: number;
  crkey: bigint;
  prkey: bigint;
}
export interface ResvReleaseArgs {
  rrela: number;
  iekey: boolean;
  rtype: number;
  crkey: bigint;
}

export class ReservationState {
  /** Type of the reservation held, 0 when none is (the data path reads this first: no reservation, no lookup). */
  rtype = 0;
  /** Host key of the holder for types 1-4; undefined under the All Registrants types, where every registrant holds. */
  holder: string | undefined = undefined;
  /** Registrants by host key (hex of the host identifier), in registration order. */
  readonly registrants = new Map<string, Registrant>();
  /** Generation (Reservation Report GEN). */
  gen = 0;
  /** Persist Through Power Loss State. */
  ptpl = false;
  /** Bumped by each preempt-and-abort; a command remembers the value at parse to know whether it was aborted. */
  abortGen = 0;
  readonly #abortedAt = new Map<string, number>();

  constructor(
    readonly nsid: number,
    readonly events: ResvEvents,
  ) {}

  role(hostKey: string): ResvRole {
    if (!this.registrants.has(hostKey)) return 'non-registrant';
    if (this.rtype !== 0 && (isAllRegistrants(this.rtype) || this.holder === hostKey)) return 'holder';
    return 'registrant';
  }

  /** 0 or Reservation Conflict for an I/O command of `opcode` from host `hostKey` (the §8.19 table). */
  checkAccess(hostKey: string, opcode: number): number {
    const t = this.rtype;
    if (t === 0) return 0;
    const g = GROUP_OF[opcode] as number;
    if (g === 0) return 0;
    const r = this.registrants.has(hostKey) ? (isAllRegistrants(t) || this.holder === hostKey ? 0 : 1) : 2;
    return ((CONFLICT_BITS[t * 3 + r] as number) & g) !== 0 ? RESV_CONFLICT : 0;
  }

  /** True when a command of `hostKey` parsed at abortGen `gen` was aborted by a later preempt-and-abort. */
  aborted(hostKey: string, gen: number): boolean {
    const at = this.#abortedAt.get(hostKey);
    return at !== undefined && at > gen;
  }

  /** Reservation Register (Base 2.0 §7.3, §8.19.5 / §8.19.6). */
  register(hostKey: string, hostid: Buffer, a: ResvRegisterArgs): number {
    if (a.cptpl === Cptpl.RESERVED) return INVALID_FIELD;
    const reg = this.registrants.get(hostKey);
    switch (a.rrega) {
      case ResvRegisterAction.REGISTER:
        // Registering again with the key already held is a no-op success; any other key conflicts.
        if (reg !== undefined) {
          if (reg.rkey !== a.nrkey) return RESV_CONFLICT;
        } else this.registrants.set(hostKey, { hostid: Buffer.from(hostid), rkey: a.nrkey });
        break;
      case ResvRegisterAction.UNREGISTER:
        if (reg === undefined || (!a.iekey && reg.rkey !== a.crkey)) return RESV_CONFLICT;
        this.#unregister(hostKey);
        break;
      case ResvRegisterAction.REPLACE:
        if (reg === undefined || (!a.iekey && reg.rkey !== a.crkey)) return RESV_CONFLICT;
        reg.rkey = a.nrkey;
        break;
      default:
        return INVALID_FIELD;
    }
    if (a.cptpl === Cptpl.SET) this.ptpl = true;
    else if (a.cptpl === Cptpl.CLEAR) this.ptpl = false;
    this.gen = (this.gen + 1) >>> 0;
    this.events.changed();
    return 0;
  }

  /** Reservation Acquire (Base 2.0 §7.2, §8.19.7 / §8.19.8). IEKEY is not used by Acquire (RESCAP.IEKEY_X). */
  acquire(hostKey: string, a: ResvAcquireArgs): number {
    if (a.iekey || a.rtype < ResvType.WRITE_EXCLUSIVE || a.rtype > ResvType.EXCLUSIVE_ACCESS_ALL_REGS) return INVALID_FIELD;
    if (a.racqa > ResvAcquireAction.PREEMPT_AND_ABORT) return INVALID_FIELD;
    const reg = this.registrants.get(hostKey);
    if (reg === undefined || reg.rkey !== a.crkey) return RESV_CONFLICT;
    if (a.racqa === ResvAcquireAction.ACQUIRE) {
      if (this.rtype === 0) {
        this.#hold(hostKey, a.rtype);
        this.events.changed();
        return 0;
      }
      // Acquiring what one already holds succeeds; a different type, or someone else's reservation, conflicts.
      return this.role(hostKey) === 'holder' && this.rtype === a.rtype ? 0 : RESV_CONFLICT;
    }
    const abort = a.racqa === ResvAcquireAction.PREEMPT_AND_ABORT;
    const status = this.#preempt(hostKey, a.rtype, a.prkey, abort);
    if (status === 0) {
      this.gen = (this.gen + 1) >>> 0;
      this.events.changed();
    }
    return status;
  }

  #preempt(hostKey: string, rtype: number, prkey: bigint, abort: boolean): number {
    if (this.rtype === 0) return this.#removeByKey(prkey, hostKey, abort);
    if (isAllRegistrants(this.rtype)) {
      if (prkey !== 0n) return this.#removeByKey(prkey, hostKey, abort);
      // PRKEY 0 under All Registrants: every other registration goes and the issuer holds a reservation of RTYPE.
      this.#hold(hostKey, rtype);
      for (const k of [...this.registrants.keys()]) if (k !== hostKey) this.#removePreempted(k, abort);
      return 0;
    }
    const holderKey = this.holder as string;
    const holderReg = this.registrants.get(holderKey) as Registrant;
    if (prkey === holderReg.rkey) {
      const oldType = this.rtype;
      this.#hold(hostKey, rtype);
      for (const [k, r] of [...this.registrants]) if (k !== hostKey && r.rkey === prkey) this.#removePreempted(k, abort);
      if (oldType !== rtype) this.#notifyOthers(hostKey, ResvNotifType.RESERVATION_RELEASED);
      return 0;
    }
    if (prkey === 0n) return INVALID_FIELD;
    return this.#removeByKey(prkey, hostKey, abort);
  }

  /** Preempt of registrations by key: Conflict when none has it. The issuer's own registration goes without a notice. */
  #removeByKey(prkey: bigint, issuer: string, abort: boolean): number {
    let found = false;
    for (const [k, r] of [...this.registrants]) {
      if (r.rkey !== prkey) continue;
      found = true;
      if (k === issuer) this.#unregister(k);
      else this.#removePreempted(k, abort);
    }
    return found ? 0 : RESV_CONFLICT;
  }

  #removePreempted(k: string, abort: boolean): void {
    if (abort) {
      this.abortGen++;
      this.#abortedAt.set(k, this.abortGen);
    }
    this.#unregister(k);
    this.events.notify(k, ResvNotifType.REGISTRATION_PREEMPTED);
  }

  #clearResv(): void {
    this.rtype = 0;
    this.holder = undefined;
  }

  #hold(hostKey: string, rtype: number): void {
    this.rtype = rtype;
    this.holder = isAllRegistrants(rtype) ? undefined : hostKey;
  }

  /**
   * Drop one registration. A holder unregistering releases the reservation (under the All Registrants types only
   * when it was the last registrant); from a Registrants Only reservation the others get Reservation Released.
   */
  #unregister(k: string): void {
    this.registrants.delete(k);
    if (this.rtype === 0) return;
    if (isAllRegistrants(this.rtype)) {
      if (this.registrants.size === 0) this.#clearResv();
      return;
    }
    if (this.holder !== k) return;
    const t = this.rtype;
    this.#clearResv();
    if (t === ResvType.WRITE_EXCLUSIVE_REG_ONLY || t === ResvType.EXCLUSIVE_ACCESS_REG_ONLY) this.#notifyOthers(k, ResvNotifType.RESERVATION_RELEASED);
  }

  #notifyOthers(except: string, type: ResvNotifType): void {
    for (const k of this.registrants.keys()) if (k !== except) this.events.notify(k, type);
  }

  /** Reservation Release (Base 2.0 §7.5, §8.19.9 / §8.19.10). */
  release(hostKey: string, a: ResvReleaseArgs): number {
    if (a.iekey) return INVALID_FIELD;
    if (a.rrela > ResvReleaseAction.CLEAR) return INVALID_FIELD;
    const reg = this.registrants.get(hostKey);
    if (reg === undefined || reg.rkey !== a.crkey) return RESV_CONFLICT;
    if (a.rrela === ResvReleaseAction.CLEAR) {
      const others = [...this.registrants.keys()].filter((k) => k !== hostKey);
      this.registrants.clear();
      this.#clearResv();
      this.gen = (this.gen + 1) >>> 0;
      for (const k of others) this.events.notify(k, ResvNotifType.RESERVATION_PREEMPTED);
      this.events.changed();
      return 0;
    }
    // A registrant that holds nothing releases nothing, successfully (§8.19.9).
    if (this.rtype === 0 || this.role(hostKey) !== 'holder') return 0;
    if (a.rtype !== this.rtype) return INVALID_FIELD;
    const t = this.rtype;
    this.#clearResv();
    if (t !== ResvType.WRITE_EXCLUSIVE && t !== ResvType.EXCLUSIVE_ACCESS) this.#notifyOthers(hostKey, ResvNotifType.RESERVATION_RELEASED);
    this.events.changed();
    return 0;
  }

  /** Reservation Status for Report (extended form: 128-bit host identifiers; dynamic controller model CNTLID). */
  status(): ResvStatus {
    const regctls = [...this.registrants].map(([k, r]) => ({ cntlid: RESV_CNTLID_DYNAMIC, holder: this.role(k) === 'holder', hostid: r.hostid, rkey: r.rkey }));
    return { gen: this.gen, rtype: this.rtype, ptpls: this.ptpl, regctls };
  }

  /** Set Features Reservation Persistence (FID 83h). */
  setPtpl(on: boolean): void {
    if (this.ptpl === on) return;
    this.ptpl = on;
    this.events.changed();
  }

  snapshot(): PersistedResv {
    return {
      rtype: this.rtype,
      holder: this.holder ?? null,
      gen: this.gen,
      ptpl: this.ptpl,
      registrants: [...this.registrants.values()].map((r) => ({ hostid: r.hostid.toString('hex'), rkey: r.rkey.toString() })),
    };
  }

  /** The owner's state for a worker's copy (replica, then applyReplica there). */
  replica(): ResvReplica {
    return { ...this.snapshot(), abortGen: this.abortGen, abortedAt: [...this.#abortedAt] };
  }

  /**
   * Take over the owner's state on a worker, abort generations included, so a command there that passed its access
   * check before a preempt-and-abort is aborted as the owner's own would be. Raises no notification: the owner did.
   */
  applyReplica(r: ResvReplica): void {
    this.restore(r);
    this.abortGen = r.abortGen;
    this.#abortedAt.clear();
    for (const [k, g] of r.abortedAt) this.#abortedAt.set(k, g);
  }

  /** Restore a persisted state (target start with PTPL on); malformed input throws before anything changes. */
  restore(p: PersistedResv): void {
    const regs = p.registrants.map((r) => {
      if (!/^[0-9a-f]{32}$/.test(r.hostid) || !/^[0-9]+$/.test(r.rkey)) throw new TypeError(`bad registrant ${JSON.stringify(r)}`);
      return [r.hostid, { hostid: Buffer.from(r.hostid, 'hex'), rkey: BigInt(r.rkey) }] as const;
    });
    if (!Number.isInteger(p.rtype) || p.rtype < 0 || p.rtype > 6) throw new TypeError(`bad rtype ${p.rtype}`);
    this.registrants.clear();
    for (const [k, r] of regs) this.registrants.set(k, r);
    this.rtype = p.rtype;
    this.holder = p.holder ?? undefined;
    if (this.rtype !== 0 && !isAllRegistrants(this.rtype) && (this.holder === undefined || !this.registrants.has(this.holder))) this.#clearResv();
    this.gen = p.gen >>> 0;
    this.ptpl = p.ptpl === true;
  }
}

/** Entries a controller keeps before the lost-entry rule applies (Number of Available Log Pages is 8 bits). */
export const RESV_LOG_QUEUE_DEPTH = 64;

/**
 * One controller's Reservation Notification log queue (Base 2.0 §5.16.1.24): a counter per new entry that rolls
 * from FFFFFFFFFFFFFFFFh to 1; a read returns and removes the oldest entry, with the number still queued behind it.
 * When the queue is full the new entry is lost and the last queued entry takes its count, so the host sees the gap.
 */
export class ResvLogQueue {
  #counter = 0n;
  readonly #q: ResvNotifLog[] = [];

  push(type: ResvNotifType, nsid: number): void {
    this.#counter = this.#counter === 0xffff_ffff_ffff_ffffn ? 1n : this.#counter + 1n;
    if (this.#q.length >= RESV_LOG_QUEUE_DEPTH) {
      (this.#q[this.#q.length - 1] as ResvNotifLog).count = this.#counter;
      return;
    }
    this.#q.push({ count: this.#counter, type, nalp: 0, nsid });
  }

  get length(): number {
    return this.#q.length;
  }

  /** The oldest entry (removed), or the empty page when nothing is queued. */
  take(): ResvNotifLog {
    const e = this.#q.shift();
    if (e === undefined) return { count: 0n, type: ResvNotifType.EMPTY, nalp: 0, nsid: 0 };
    return { ...e, nalp: Math.min(255, this.#q.length) };
  }
}
