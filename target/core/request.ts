// One command as the core sees it (nvmet_req). A transport embeds it in its own command record and recycles both.
import type { Buffer } from 'node:buffer';
import { Sgl1Offset, SglDescType, SqeOffset, rd16, rd32 } from '../../protocol/index.js';
import { ReadLent, type ReadCallback } from '../backend/index.js';
import type { PendingFault } from './fault-engine.js';
import type { TargetNamespace } from './namespace.js';
import type { LatencyHistogram } from './stats.js';
import type { ReqDir, ReqState, Transitions } from './types.js';

/** The queue as a command sees it: where its completion goes. QueueModel (queue-model.ts) is the full view. */
export interface RequestQueue {
  complete(req: Request, status?: number): void;
  /** Forget the command without a completion (see QueueModel.abandon). */
  abandon(req: Request): void;
}

/** Error Information "parameter error location" when no field is at fault (FFFFh, NVMe Base 2.0 §5.16.1.2). */
export const NO_ERROR_LOCATION = 0xffff;


/**
 * A command's lifecycle (nvmet_req): free (pooled) → exec (parsed, executing) or need-data (waiting for R2T/H2CData)
 * → done (completion handed to the transport) → free. Teardown may release a command from any state but free.
 * Request.setState refuses every other edge.
 */
export const REQUEST_TRANSITIONS: Transitions<ReqState> = {
  free: ['exec'],
  exec: ['need-data', 'done', 'free'],
  'need-data': ['exec', 'done', 'free'],
  done: ['free'],
};

/** The lifecycle states as the small integers a Request keeps (index into REQ_STATE_NAMES); setState takes these. */
export const ReqStateId = { FREE: 0, EXEC: 1, NEED_DATA: 2, DONE: 3 } as const;
export type ReqStateId = (typeof ReqStateId)[keyof typeof ReqStateId];
export const REQ_STATE_NAMES: readonly ReqState[] = ['free', 'exec', 'need-data', 'done'];
const REQ_ID: Readonly<Record<ReqState, ReqStateId>> = { free: 0, exec: 1, 'need-data': 2, done: 3 };
/**
 * REQUEST_TRANSITIONS as one bit per allowed next state, by state id: the per-command check is a load and an AND,
 * ~8 ns for a command's three edges in a micro-benchmark, where a lookup by state name and Array.includes took ~100.
 */
const REQ_EDGES = Uint8Array.from(REQ_STATE_NAMES, (s) => REQUEST_TRANSITIONS[s].reduce((m, n) => m | (1 << REQ_ID[n]), 0));

export class Request {
  /** The 64-byte SQE (a view into the received chunk; valid until completion). */
  sqe!: Buffer;
  opcode = 0;
  flags = 0;
  cid = 0;
  nsid = 0;
  /** SGL1 type byte (SglType: transport data block or in-capsule offset). */
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
  /** How long `out` stays as it is (ReadLent): CALL until this completion is handed to the transport, TASK until the task ends. */
  outLent: ReadLent = ReadLent.STABLE;
  dw0 = 0;
  dw1 = 0;
  status = 0;
  #state: ReqStateId = ReqStateId.FREE;

  get state(): ReqState {
    return REQ_STATE_NAMES[this.#state] as ReqState;
  }

  /** The state as its ReqStateId: what the per-command checks compare (a small integer, no name lookup). */
  get stateId(): ReqStateId {
    return this.#state;
  }

  /** The one place the lifecycle state changes: refuses (returns false) any edge not in REQUEST_TRANSITIONS. */
  setState(next: ReqStateId): boolean {
    if (((REQ_EDGES[this.#state] as number) & (1 << next)) === 0) return false;
    this.#state = next;
    return true;
  }
  ns: TargetNamespace | undefined = undefined;
  /** The command is counted in ns.executing (from execute to completion). */
  nsHeld = false;
  /** Byte offset of the SQE field that failed parsing (Error Information "parameter error location"). */
  errorLoc = NO_ERROR_LOCATION;
  /** Set by parse: runs once the data (if any) is present; must end in queue.complete(req). */
  execute: ((req: Request) => void) | undefined = undefined;
  /** The queue the command arrived on. */
  queueRef: RequestQueue | undefined = undefined;
  /**
   * The transport's record that embeds this request (as nvmet_tcp_cmd embeds nvmet_req): set once by the transport
   * that made both, so it can find its record from a completion without a lookup. The core never reads it.
   */
  owner: object | undefined = undefined;
  /** SQ head reported in the CQE (set at completion). */
  sqhd = 0;
  /** Capsule receipt, performance.now() ms (a double: no allocation, unlike hrtime.bigint). */
  t0 = 0;
  /** Latency histogram of the command's opcode, set by parse; recorded once at completion. */
  lat: LatencyHistogram | undefined = undefined;
  /** The namespace's reservation abortGen when the command passed its access check (preempt-and-abort). */
  resvGen = 0;
  /** The read path's backend callback for this Request (cmd/io.ts executeRead): made once, kept across recycling. */
  readDone: ReadCallback | undefined = undefined;
  /** A completion-time fault a rule put on this command (fault-engine.ts); undefined on every unfaulted command. */
  fault: PendingFault | undefined = undefined;
  /** The other half of a fused Compare and Write (target/core/fused.ts), once both have arrived. */
  partner: Request | undefined = undefined;
  /** A fused half whose data is in: it waits for its partner's. */
  fusedReady = false;

  reset(): void {
    this.inCapsule = undefined;
    this.inCapsuleLen = 0;
    this.dir = 'none';
    this.dataLen = 0;
    this.data = undefined;
    this.out = undefined;
    this.outCrc = undefined;
    this.outLent = ReadLent.STABLE;
    this.dw0 = 0;
    this.dw1 = 0;
    this.status = 0;
    this.ns = undefined;
    this.nsHeld = false;
    this.fault = undefined;
    this.errorLoc = NO_ERROR_LOCATION;
    this.execute = undefined;
    this.t0 = 0;
    this.lat = undefined;
    this.resvGen = 0;
    this.partner = undefined;
    this.fusedReady = false;
  }

  /** Load the SQE fields the core needs on every command (hot path: direct reads, no object decode). */
  load(sqe: Buffer, inCapsule: Buffer[] | undefined): void {
    this.sqe = sqe;
    this.opcode = sqe[SqeOffset.opcode] as number;
    this.flags = sqe[SqeOffset.flags] as number;
    this.cid = rd16(sqe, SqeOffset.cid);
    this.nsid = rd32(sqe, SqeOffset.nsid);
    const sglType = sqe[Sgl1Offset.type] as number;
    this.sglType = sglType;
    // A Keyed SGL Data Block's length is 3 bytes, its key the next 4 (NVMe Base 2.0 §4.3.2, Figure 117): a keyed
    // descriptor of length 0 with a key is still "no data" (SPDK's target reads it the same way).
    this.sglLen = sglType >>> 4 === SglDescType.KEYED_DATA_BLOCK ? rd32(sqe, Sgl1Offset.length) & 0xffffff : rd32(sqe, Sgl1Offset.length);
    if (inCapsule !== undefined && inCapsule.length > 0) {
      let n = 0;
      for (const b of inCapsule) n += b.length;
      this.inCapsule = inCapsule;
      this.inCapsuleLen = n;
    }
  }

  /** SGL1 address (SQE bytes 24..31), as a number: only compared against 0 (in-capsule offset). */
  sglAddrIsZero(): boolean {
    return this.sqe.readUInt32LE(SqeOffset.dptr) === 0 && this.sqe.readUInt32LE(SqeOffset.dptr + 4) === 0;
  }

  cdw(n: 10 | 11 | 12 | 13 | 14 | 15): number {
    return this.sqe.readUInt32LE(SqeOffset.cdw10 + (n - 10) * 4);
  }
}
