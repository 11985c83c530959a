// One command as the NVMe/TCP transport tracks it (nvmet_tcp_cmd): the core Request it owns, plus the fields only the
// transport reads (R2T tag, H2C progress, data digest outcome). Pooled per connection together with its Request.
import { Buffer } from 'node:buffer';
import type { DataSink } from '../../../protocol/index.js';
import { ReqStateId, Request } from '../../core/index.js';

const EMPTY = Buffer.alloc(0);

/**
 * It is also where its received data goes (DataSink): the reader copies in-capsule data or H2CData straight into `buf`
 * at `at`, so a command's data is one buffer of its own whatever the reads were.
 */
export class TcpCommand implements DataSink {
  readonly req = new Request();
  /** R2T transfer tag while host data is awaited (NVMe-TCP 1.0 §3.6.2, R2T TTAG). */
  ttag = 0;
  /** H2CData bytes received so far (the next H2CData DATAO must equal it: NVMe-TCP 1.0 §3.6.2, H2CData). */
  received = 0;
  /** Read bytes counted in the connection's in-flight total while an asynchronous backend read runs. */
  pendingRead = 0;
  /** Where received data goes (DataSink): the in-capsule data, or the whole H2C transfer (req.data once complete). */
  buf: Buffer = EMPTY;
  /** DataSink: where the data of the PDU being received starts in `buf` (its DATAO; 0 for in-capsule data). */
  at = 0;
  /** Bytes of the data PDU being received (its DATAL). */
  rxLen = 0;
  /** The SQE of a capsule whose in-capsule data is still arriving (ownSqe when the receive buffer is reused). */
  sqe: Buffer = EMPTY;
  /** This record's own SQE memory: a received SQE kept past its read is copied here, not into a new allocation. */
  readonly ownSqe = Buffer.alloc(64);
  /**
   * An H2CData PDU of this command failed its data digest. The command still takes the rest of its data, then
   * completes with Transient Transport Error instead of executing (NVMe-TCP 1.0 §3.6.1.4).
   */
  dataDigestError = false;
  /**
   * An Abort named this command while its data was awaited (NVMe Base 2.0 §5.1, Abort): it still takes the data it
   * asked for with its R2T, then completes with Command Abort Requested instead of executing.
   */
  abortRequested = false;

  constructor() {
    this.req.owner = this;
  }

  /** The record a Request of this transport belongs to: every Request the TCP transport hands the core is made here. */
  static of(req: Request): TcpCommand {
    return req.owner as TcpCommand;
  }

  /** Ready for a new capsule (pool allocation). */
  reset(): void {
    this.req.reset();
    this.ttag = 0;
    this.received = 0;
    this.pendingRead = 0;
    this.buf = EMPTY;
    this.sqe = EMPTY;
    this.dataDigestError = false;
    this.abortRequested = false;
  }

  /** Back to the pool: drop every buffer reference so a pooled record pins no received data. */
  release(): void {
    const req = this.req;
    if (req.stateId !== ReqStateId.FREE) req.setState(ReqStateId.FREE);
    req.out = undefined;
    req.data = undefined;
    req.inCapsule = undefined;
    this.buf = EMPTY;
    this.sqe = EMPTY;
  }
}
