// One command as the NVMe/TCP transport tracks it (nvmet_tcp_cmd): the core Request it owns, plus the fields only the
// transport reads (R2T tag, H2C progress, data digest outcome). Pooled per connection together with its Request.
import type { Buffer } from 'node:buffer';
import { ReqStateId, Request } from '../../core/index.js';

export class TcpCommand {
  readonly req = new Request();
  /** R2T transfer tag while host data is awaited (NVMe-TCP 1.0 §3.6.2, R2T TTAG). */
  ttag = 0;
  /** H2CData bytes received so far (the next H2CData DATAO must equal it: NVMe-TCP 1.0 §3.6.2, H2CData). */
  received = 0;
  /** Read bytes counted in the connection's in-flight total while an asynchronous backend read runs. */
  pendingRead = 0;
  /** H2CData payloads gathered for req.data. */
  h2c: Buffer[] = [];
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
    if (this.h2c.length > 0) this.h2c = [];
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
    if (this.h2c.length > 0) this.h2c = [];
  }
}
