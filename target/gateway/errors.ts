// Typed errors of a gateway group, each with a stable `code` (the convention of target/: NvmeTcpError subclasses).
import { NvmeTcpError } from '../../protocol/errors.js';

/** A gateway joined with a subsystem/namespace description that differs from the group's record: it must never serve
 *  a namespace the other gateways describe differently. `message` is one line naming the difference. */
export class DescriptionMismatchError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_GATEWAY_DESCRIPTION';
  constructor(
    readonly group: string,
    readonly difference: string,
  ) {
    super(`gateway group '${group}': ${difference}`);
  }
}

/** A second live member with the same gateway id (its leased member key already exists in etcd). */
export class DuplicateGatewayError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_GATEWAY_DUPLICATE';
  constructor(
    readonly group: string,
    readonly id: string,
  ) {
    super(`gateway group '${group}': a gateway with id '${id}' is already a member`);
  }
}

/** etcd could not be reached (at join: the caller prints this line and exits 2). */
export class EtcdUnreachableError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_ETCD_UNREACHABLE';
  constructor(readonly urls: readonly string[], options?: { cause?: unknown }) {
    super(`etcd unreachable at ${urls.join(',')}`, options);
  }
}

/** An operator request the group cannot do (`ctl group failover` to a non-member, an unknown ANA group): nothing moved. */
export class GroupOperationError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_GATEWAY_OPERATION';
}

/** A group operation on a target that is not a gateway (no --gateway-group / config gateway). */
export class GatewayNotConfiguredError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_GATEWAY_NONE';
  constructor() {
    super('this target is not in a gateway group; start it with --gateway-group NAME --etcd URL');
  }
}

/**
 * A change to the group's shared state (reservations, host masks) by a gateway that is fenced: its lease may have
 * expired, so it must not write (another gateway may already serve its groups). Nothing was written.
 */
export class GatewayFencedError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_GATEWAY_FENCED';
  constructor(
    readonly group: string,
    readonly id: string,
  ) {
    super(`gateway group '${group}': gateway '${id}' is fenced (its etcd lease may have expired); nothing was changed`);
  }
}
