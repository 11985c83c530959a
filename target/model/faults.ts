// The fault rule vocabulary (docs/faults.md): a rule is a match, a schedule and an action. target/config/fault-rules.ts
// validates unknown input (the rules file, the HTTP API, `target ctl faults add`) into these types; the fault engine
// in target/core consumes them.
import type { AnaStateName } from '../../protocol/index.js';

/** Connection and command events a rule can match (docs/faults.md, "Match"). */
export const FAULT_EVENTS = ['command', 'icreq', 'connect', 'auth', 'keep-alive'] as const;
export type FaultEvent = (typeof FAULT_EVENTS)[number];

/** Command sets: Fabrics (opcode 7Fh), admin (qid 0) and I/O (qid > 0) commands (NVMe-oF 1.1 §3.2). */
export const FAULT_COMMAND_SETS = ['fabrics', 'admin', 'io'] as const;
export type FaultCommandSet = (typeof FAULT_COMMAND_SETS)[number];

/**
 * Actions that need the data path's PDU writer and reader (C2HData/R2T shaping, digests, partial PDUs): named so a rule
 * using one is refused with that reason instead of being stored and never firing.
 */
export const FAULT_ACTIONS_NOT_IMPLEMENTED = [
  'c2h-reorder',
  'c2h-duplicate',
  'c2h-overrun',
  'c2h-split',
  'r2t-past-maxr2t',
  'r2t-past-transfer',
  'success-flag',
  'c2h-term-req',
  'header-digest-error',
  'data-digest-error',
  'stall',
  'drip',
] as const;

export interface FaultMatch {
  port?: number;
  hostnqn?: string;
  subnqn?: string;
  cntlid?: number;
  /** A qid, a list of qids, or every admin / every I/O queue. */
  qid?: number | number[] | 'admin' | 'io';
  event?: FaultEvent;
  set?: FaultCommandSet;
  opcode?: number | number[];
  fctype?: number;
  nsid?: number;
  lba?: { start: number; count: number };
  pduType?: number;
}

export interface FaultSchedule {
  /** Fire on the Nth match only (with `every`: from the Nth on). */
  nth?: number;
  /** Fire on every Kth match. */
  every?: number;
  /** Fire with this probability, drawn from a PRNG seeded with `seed` (the same seed replays the same run). */
  probability?: number;
  seed?: number;
  /** Time window, from when the rule was added: matches before afterMs or after afterMs + forMs do not count. */
  afterMs?: number;
  forMs?: number;
  /** Stop firing after this many firings. */
  times?: number;
}

export type FaultAnaState = AnaStateName;

export type FaultAction =
  | { kind: 'status'; status: number | string; dnr?: boolean; more?: boolean; crd?: number }
  | { kind: 'delay'; us?: number; minUs?: number; maxUs?: number }
  | { kind: 'drop' }
  | { kind: 'duplicate' }
  | { kind: 'cid'; cid: 'stale' | 'unknown' | number }
  | { kind: 'media-error'; dnr?: boolean }
  | { kind: 'grant-queues'; count: number }
  | { kind: 'ana'; group: number; state: FaultAnaState; aen?: boolean }
  | { kind: 'aen'; event: 'ana' | 'ns' | 'disc'; count?: number }
  | { kind: 'fatal' }
  | { kind: 'icresp'; delayMs?: number; never?: boolean; maxh2cdata?: number; cpda?: number; hdgst?: boolean; ddgst?: boolean }
  | { kind: 'close'; rst?: boolean };

export interface FaultRule {
  id?: string;
  match?: FaultMatch;
  schedule?: FaultSchedule;
  action: FaultAction;
}
