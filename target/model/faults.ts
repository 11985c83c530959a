// The fault rule vocabulary (docs/faults.md): a rule is a match, a schedule and an action. target/config/fault-rules.ts
// validates unknown input (the rules file, the HTTP API, `target ctl faults add`) into these types; the fault engine
// in target/core consumes them.
import type { AnaStateName } from '../../protocol/index.js';

/** Connection and command events a rule can match (docs/faults.md, "Match"). */
export const FAULT_EVENTS = ['command', 'icreq', 'connect', 'auth', 'keep-alive', 'pdu'] as const;
export type FaultEvent = (typeof FAULT_EVENTS)[number];

/** Command sets: Fabrics (opcode 7Fh), admin (qid 0) and I/O (qid > 0) commands (NVMe-oF 1.1 §3.2). */
export const FAULT_COMMAND_SETS = ['fabrics', 'admin', 'io'] as const;
export type FaultCommandSet = (typeof FAULT_COMMAND_SETS)[number];

/**
 * Actions on the PDUs of one command's reply or data request (docs/faults.md, "NVMe/TCP-level actions"): a firing rule
 * marks the command (Request.fault) and the transport's completion writer or R2T sender takes its slow branch.
 */
export const FAULT_WIRE_ACTIONS = [
  'c2h-reorder',
  'c2h-duplicate',
  'c2h-overrun',
  'c2h-split',
  'success-flag',
  'c2h-term-req',
  'header-digest-error',
  'data-digest-error',
  'r2t-past-maxr2t',
  'r2t-past-transfer',
  'stall',
  'drip',
] as const;
export type FaultWireKind = (typeof FAULT_WIRE_ACTIONS)[number];

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
  | { kind: 'close'; rst?: boolean }
  | FaultWireAction;

/** The PDU-shaping actions (FAULT_WIRE_ACTIONS), NVMe-TCP 1.0 §3.6.2.x (docs/faults.md). */
export type FaultWireAction =
  /** C2HData in pieces of `size` bytes (default: halves) sent highest DATAO first (§3.6.2.9). */
  | { kind: 'c2h-reorder'; size?: number }
  /** The first C2HData piece (of `size` bytes, default the whole PDU) sent twice. */
  | { kind: 'c2h-duplicate'; size?: number }
  /** The last C2HData carries `bytes` more than the command transfers (DATAO + DATAL past the end). */
  | { kind: 'c2h-overrun'; bytes?: number }
  /** C2HData in pieces of `size` bytes (default 1: split at every byte). */
  | { kind: 'c2h-split'; size?: number }
  /** The last C2HData has SUCCESS whatever SQ flow control says; with `resp` a CapsuleResp still follows. */
  | { kind: 'success-flag'; resp?: boolean }
  /** C2HTermReq with this FES (and FEI) after the first half of the reply (§3.6.2.5), then the connection ends. */
  | { kind: 'c2h-term-req'; fes: number; fei?: number }
  /** The reply's first PDU with a wrong HDGST (§3.6.1.3); only on connections with header digests. */
  | { kind: 'header-digest-error' }
  /** The reply's first C2HData with a wrong DDGST (§3.6.1.4); only on connections with data digests. */
  | { kind: 'data-digest-error' }
  /** The transfer asked for with `count` R2Ts at once (default 2), past a MAXR2T of 0's based 0 (§3.6.2.2, §3.6.2.10). */
  | { kind: 'r2t-past-maxr2t'; count?: number }
  /** One R2T asking for `bytes` more than the command transfers (R2TO + R2TL past the end, §3.6.2.10). */
  | { kind: 'r2t-past-transfer'; bytes?: number }
  /** The reply's first `afterBytes` bytes (default 4: mid-header) go out, the rest `ms` later (never without `ms`). */
  | { kind: 'stall'; afterBytes?: number; ms?: number }
  /** The reply (and what follows it) goes out `bytes` bytes (default 1) every `intervalMs` (default 10). */
  | { kind: 'drip'; bytes?: number; intervalMs?: number };

export interface FaultRule {
  id?: string;
  match?: FaultMatch;
  schedule?: FaultSchedule;
  action: FaultAction;
}
