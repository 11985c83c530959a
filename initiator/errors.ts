// Initiator error tiers: the shared protocol errors (NVMe status, transport fatal, local) plus the host's own, each
// with a stable code.
import {
  ConnectionClosedError,
  InvalidArgumentError,
  NvmeStatusError,
  NvmeTcpError,
  StatusCodeType,
  TimeoutError,
  TransportFatalError,
} from '../protocol/index.js';

export { ConnectionClosedError, InvalidArgumentError, NvmeStatusError, NvmeTcpError, TimeoutError, TransportFatalError };

/** The controller is in a state that cannot take the operation (deleted, dead, not yet live). */
export class ControllerStateError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_CTRL_STATE';
  constructor(
    readonly state: string,
    message: string,
  ) {
    super(`${message} (controller state ${state})`);
  }
}

/** The controller broke a rule the Linux host enforces during initialisation (nvme_check_ctrl_fabric_info and friends). */
export class ControllerInitError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_CTRL_INIT';
  constructor(
    readonly field: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${field}: ${message}`, options);
  }
}

/** An io worker could not be started, pinned or reached (worker_threads; per-thread affinity). */
export class IoWorkerError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_IO_WORKER';
}

/** Every path of a multipath namespace is unusable. */
export class NoPathError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_NO_PATH';
}

/** Errors after which the same command may be retried on another queue, controller incarnation or path. */
export function isTransportError(e: unknown): boolean {
  return e instanceof ConnectionClosedError || e instanceof TransportFatalError || e instanceof TimeoutError;
}

/** NVMe path-related status (SCT 3, NVMe Base 2.0 §4.6.1.2.4): the command may succeed on another path. */
export function isPathStatus(e: unknown): boolean {
  return e instanceof NvmeStatusError && e.sct === StatusCodeType.PATH;
}
