/** Errors of the DH-HMAC-CHAP module. Messages never contain key material (issue 6: secrets never logged). */
import { NvmeTcpError } from '../errors.js';
import { failureExplanationName } from './constants.js';

/** A configured DH-HMAC-CHAP secret is malformed (bad prefix, base64, length or CRC). */
export class DhchapKeyError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_DHCHAP_KEY';
}

/**
 * Authentication did not succeed. `explanation` is the AUTH_Failure reason code explanation
 * (FailureExplanation); `detectedBy` says which side found the problem ('host' when the host
 * rejected the controller's message, 'controller' when a Failure1 arrived or the controller
 * rejected the host), and `reason` is a short non-secret detail.
 */
export class DhchapAuthError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_DHCHAP_AUTH';
  constructor(
    readonly explanation: number,
    readonly detectedBy: 'host' | 'controller',
    readonly reason: string,
  ) {
    super(`DH-HMAC-CHAP ${failureExplanationName(explanation)} (detected by ${detectedBy}): ${reason}`);
  }
}
