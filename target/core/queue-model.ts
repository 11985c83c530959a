// The seams around one queue: QueueModel (what commands and controllers use of the core queue, CoreQueue in
// queue.ts) and QueueTransportOps (what the core queue asks of its transport connection).
import type { QueueAuth } from './auth.js';
import type { Controller } from './controller.js';
import type { TargetCore } from './core.js';
import type { CorePort } from './port.js';
import type { Request, RequestQueue } from './request.js';
import type { QueueCounters, QueueHandle, QueueInfoView, QueueState } from './types.js';

/** What commands and controllers need from a queue (implemented by CoreQueue). */
export interface QueueModel extends RequestQueue, QueueHandle {
  readonly state: QueueState;
  ctrl: Controller | undefined;
  qid: number;
  /** 0's based SQ size from Connect. */
  sqsize: number;
  sqhd: number;
  sqflowDisabled: boolean;
  inFlight: number;
  /** DH-HMAC-CHAP state when the host must authenticate this queue (set by Connect; see auth.ts). */
  auth: QueueAuth | undefined;
  readonly counters: QueueCounters;
  readonly target: TargetCore;
  readonly port: CorePort;
  readonly ops: QueueTransportOps;
  /** The one place the queue state changes: refuses (returns false) any edge not in QUEUE_TRANSITIONS. */
  setState(next: QueueState): boolean;
  complete(req: Request, status?: number): void;
  closeTransport(reason: string): void;
  info(): QueueInfoView;
}

export interface QueueTransportOps {
  /** The command completed (status/dw0/dw1/sqhd set, `out` holds read data): send C2HData/CapsuleResp, then release the request. */
  queueResponse(req: Request): void;
  /** Parse succeeded and the command needs host data not sent in-capsule: fetch it (R2T/H2CData), then call queue.execute(req). */
  requestData(req: Request): void;
  /**
   * The core queue went live: a Connect bound it to a controller (NVMe-oF 1.1 §3.3). Called once, before the
   * Connect's completion is queued; the transport moves its own state from here instead of watching the core's.
   */
  queueLive?(): void;
  /** Close the connection (controller teardown, keep-alive expiry). Idempotent. */
  close(reason: string): void;
  /** Remote "addr:port". */
  readonly peer: string;
  /** Local address the host reached us on (discovery TRADDR when listening on a wildcard). */
  readonly localAddress: string;
  readonly localPort: number;
  /** Data digests are on for this connection (reads then ask the backend for the data's CRC32C). */
  readonly dataDigest: boolean;
  /** The connection is a TLS 1.3 session (TP 8011); absent = cleartext. */
  readonly tls?: boolean;
}
