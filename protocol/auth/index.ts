/**
 * Public face of protocol/auth: NVMe in-band authentication (DH-HMAC-CHAP, NVMe Base 2.0 §8.13,
 * TP 8006). Pure computation; the only protocol/ folder that uses node:crypto.
 */
export * from './constants.js';
export * from './errors.js';
export { crc32Ieee } from './crc32.js';
export {
  augmentedChallenge,
  controllerResponse,
  DhKeyPair,
  dhValueLength,
  ffdhePrime,
  hashLength,
  hostResponse,
  isValidPublicValue,
  sessionKeyFromSecret,
} from './crypto.js';
export type { FfdheGroupId, RandomBytes, ResponseInput } from './crypto.js';
export * from './keys.js';
export * from './messages.js';
export * from './dhchap.js';
