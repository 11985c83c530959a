// Error tiers shared by target and initiator: NVMe status, transport fatal, local.

/** Base for every error this package throws: a stable string `code` and an optional `cause`. */
export abstract class NvmeTcpError extends Error {
  abstract readonly code: string;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A command completed with a non-zero NVMe status (tier a). `status` is the Linux-style 15-bit value. */
export class NvmeStatusError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_STATUS';
  readonly sct: number;
  readonly sc: number;
  readonly dnr: boolean;
  constructor(
    readonly status: number,
    readonly cid: number,
    statusName: string,
    readonly dw0 = 0,
  ) {
    super(`NVMe status ${statusName} (0x${status.toString(16).padStart(3, '0')}) for cid ${cid}`);
    this.sct = (status >> 8) & 0x7;
    this.sc = status & 0xff;
    this.dnr = (status & 0x4000) !== 0;
  }
}

/** The connection hit a fatal transport error (tier b): a TermReq was sent or received, or framing broke. */
export class TransportFatalError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_TRANSPORT';
  constructor(
    message: string,
    readonly fes: number,
    readonly fei: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A wait ran out (tier c). */
export class TimeoutError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_TIMEOUT';
}

/** The connection closed while the operation was pending (tier c). */
export class ConnectionClosedError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_CLOSED';
}

/** A caller passed an option or argument that cannot work (tier c); `field` names it. */
export class InvalidArgumentError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_INVALID_ARG';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
  }
}
