// Unions and plain shapes the model modules share. Imports no class module of target/core, so any of them may
// import it without forming a cycle.
import type { QueueAuthView } from './auth.js';
import type { HostRefusalCounts } from './host-log.js';

/** Core queue states (nvmet_sq): waiting for Connect, bound to a controller, gone. */
export type QueueState = 'connecting' | 'live' | 'closed';

/**
 * Controller states (nvmet_ctrl): enabled or disabled by CC.EN alike is 'live' (CSTS.RDY tells which);
 * 'shutdown' after a CC.SHN notification until SHN is cleared (NVMe Base 2.0 §3.6.2); 'dead' once torn down.
 */
export type ControllerState = 'live' | 'shutdown' | 'dead';

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

/**
 * Asynchronous event kinds the target raises (NVMe Base 2.0 §5.2): namespace attribute, ANA, discovery log change,
 * reservation log page available.
 */
export type AenKind = 'ns' | 'ana' | 'disc' | 'resv';

export interface QueueCounters {
  commands: number;
  bytesIn: number;
  bytesOut: number;
  errors: number;
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
  /** The queue's connection runs over TLS 1.3 (TP 8011). */
  tls?: boolean;
  /** Worker process serving the queue (target/workers); absent: the primary process. */
  worker?: number;
  /**
   * Setup times, epoch ms (fractional): the ICReq received, the Connect capsule received, and the first command
   * after the queue went live. Absent until seen; a queue a worker serves has no firstCommandAt (docs/management.md).
   */
  icReqAt?: number;
  connectAt?: number;
  firstCommandAt?: number;
}

/** A queue as its controller holds it (Controller.queues): enough to list it and to close it. */
export interface QueueHandle {
  readonly qid: number;
  info(): QueueInfoView;
  closeTransport(reason: string): void;
  /** Abort the command with this CID if it has not started (QueueTransportOps.abortWaiting); absent: never aborts. */
  abortWaiting?(cid: number): boolean;
}

/** One Error Information log entry (NVMe Base 2.0 §5.16.1.2). */
export interface ErrorRecord {
  errorCount: bigint;
  sqid: number;
  cmdid: number;
  status: number;
  paramErrorLocation: number;
  nsid: number;
}

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
  /** Host-caused log events by reason, and the lines the per-owner limiters left out (host-log.ts). */
  refusals: HostRefusalCounts;
}

/** An allowed-transition table: for each state, the states setState may move to from it. */
export type Transitions<S extends string> = Readonly<Record<S, readonly S[]>>;
