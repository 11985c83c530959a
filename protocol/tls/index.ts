/**
 * Public face of protocol/tls: NVMe/TCP TLS 1.3 (TP 8011) key interchange format, PSK identities and the HKDF
 * derivations. Pure computation; crypto.ts is the one module here allowed node:crypto.
 */
export * from './errors.js';
export * from './keys.js';
export * from './identity.js';
export * from './crypto.js';
