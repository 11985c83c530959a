/** Errors of the NVMe/TCP TLS module (TP 8011). Messages never contain key material. */
import { NvmeTcpError } from '../errors.js';

/** Why a configured TLS PSK in the interchange format was refused. */
export type TlsKeyProblem = 'format' | 'hash' | 'base64' | 'length' | 'crc';

/** A configured PSK `NVMeTLSkey-1:<hh>:<base64>:` is malformed (prefix, hash id, base64, length or CRC-32). */
export class TlsKeyError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_TLS_KEY';
  constructor(
    readonly problem: TlsKeyProblem,
    message: string,
  ) {
    super(message);
  }
}

/** Why a TLS PSK identity string was refused. */
export type TlsIdentityProblem = 'format' | 'version' | 'hash' | 'unsupported-hash';

/** A TLS PSK identity (`NVMe<v><R|G><hh> <hostnqn> <subnqn>[ <digest>]`) is malformed or not usable here. */
export class TlsIdentityError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_TLS_IDENTITY';
  constructor(
    readonly problem: TlsIdentityProblem,
    message: string,
  ) {
    super(message);
  }
}
