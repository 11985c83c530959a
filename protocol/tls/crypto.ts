/**
 * TLS PSK derivations of NVMe/TCP Transport 1.0 with TP 8011 §3.6.1.4 (RFC 5869 HKDF, RFC 8446 §7.1
 * HKDF-Expand-Label): configured → retained PSK (label "HostNQN", context the host NQN), retained → TLS PSK (label
 * "nvme-tls-psk", context the identity for version 0, "<hh> <digest>" for version 1), the version 1 PSK digest, and
 * the generated PSK of secure channel concatenation. With protocol/auth/crypto.ts the only protocol/ modules that
 * import node:crypto (computation only).
 *
 * Two encodings of HkdfLabel exist in the field. 'rfc8446' is RFC 8446's: u16 length big-endian, then the label and
 * the context each prefixed by a one-byte length; the Linux kernel uses it and libnvme since its 2025 fix. 'pre-2025'
 * is what libnvme (hence nvme-cli's `check-tls-key --insert`) did before: the length in host (little-endian) order
 * and label and context concatenated without length bytes. Keys inserted by such a libnvme derive differently, so
 * both are supported; 'rfc8446' is the default.
 */
import { Buffer } from 'node:buffer';
import { createHmac, hkdfSync } from 'node:crypto';
import { formatTlsIdentity, type TlsIdentityVersion } from './identity.js';
import { TLS_HASH_LENGTH, TLS_HASH_NAME, type TlsConfiguredKey, type TlsHash } from './keys.js';

export type HkdfLabelEncoding = 'rfc8446' | 'pre-2025';
export const DEFAULT_HKDF_ENCODING: HkdfLabelEncoding = 'rfc8446';

const TLS13 = 'tls13 ';
const SEED = 'NVMe-over-Fabrics';

/** The HkdfLabel info bytes for `label`/`context`, in the given encoding. */
export function hkdfLabel(encoding: HkdfLabelEncoding, length: number, label: string, context: string): Buffer {
  const l = Buffer.from(TLS13 + label, 'utf8');
  const c = Buffer.from(context, 'utf8');
  if (encoding === 'pre-2025') {
    const len = Buffer.alloc(2);
    len.writeUInt16LE(length);
    return Buffer.concat([len, l, c]);
  }
  if (l.length > 255 || c.length > 255) throw new RangeError('HKDF label or context longer than 255 bytes');
  const out = Buffer.alloc(2 + 1 + l.length + 1 + c.length);
  out.writeUInt16BE(length, 0);
  out[2] = l.length;
  l.copy(out, 3);
  out[3 + l.length] = c.length;
  c.copy(out, 4 + l.length);
  return out;
}

/** HKDF-Expand-Label(HKDF-Extract(0, ikm), label, context, length) with the hash's zero salt. */
export function hkdfExtractExpandLabel(hash: TlsHash, ikm: Uint8Array, label: string, context: string, length: number, encoding: HkdfLabelEncoding): Buffer {
  const salt = Buffer.alloc(TLS_HASH_LENGTH[hash]);
  return Buffer.from(hkdfSync(TLS_HASH_NAME[hash], ikm, salt, hkdfLabel(encoding, length, label, context), length));
}

/** Retained PSK = HKDF-Expand-Label(HKDF-Extract(0, configured), "HostNQN", NQNh, len); hh 00: the configured PSK itself. */
export function deriveRetainedPsk(key: TlsConfiguredKey, hostnqn: string, encoding: HkdfLabelEncoding = DEFAULT_HKDF_ENCODING): Buffer {
  const bytes = key.bytes();
  if (key.hmac === 0) return bytes;
  try {
    return hkdfExtractExpandLabel(key.hmac, bytes, 'HostNQN', hostnqn, bytes.length, encoding);
  } finally {
    bytes.fill(0);
  }
}

/** PSK digest (version 1 identities) = base64(HMAC(hash, PSK, NQNh || " " || NQNc || " NVMe-over-Fabrics")). */
export function derivePskDigest(hash: TlsHash, psk: Uint8Array, hostnqn: string, subnqn: string): string {
  return createHmac(TLS_HASH_NAME[hash], psk).update(`${hostnqn} ${subnqn} ${SEED}`, 'utf8').digest('base64');
}

/**
 * TLS PSK = HKDF-Expand-Label(HKDF-Extract(0, input PSK), "nvme-tls-psk", context, L): context is the whole identity
 * for version 0 and "<hh> <digest>" for version 1 (the 'pre-2025' encoding writes the same bytes, unprefixed).
 */
export function deriveTlsPskFrom(hash: TlsHash, inputPsk: Uint8Array, context: string, encoding: HkdfLabelEncoding = DEFAULT_HKDF_ENCODING): Buffer {
  return hkdfExtractExpandLabel(hash, inputPsk, 'nvme-tls-psk', context, inputPsk.length, encoding);
}

/** Generated PSK of secure channel concatenation = HMAC(hash, session key, C1 || C2) (TP 8011 §8.13.5.9). */
export function deriveGeneratedPsk(hash: TlsHash, sessionKey: Uint8Array, c1: Uint8Array, c2: Uint8Array): Buffer {
  return createHmac(TLS_HASH_NAME[hash], sessionKey).update(c1).update(c2).digest();
}

export interface DerivedTlsPsk {
  /** The identity the host sends in its ClientHello for this key. */
  identity: string;
  /** The TLS 1.3 external PSK. Secret: do not log. */
  psk: Buffer;
}

/**
 * Identity and TLS PSK of a configured key for one host/subsystem pair (retained PSK, 'R'), as libnvme's
 * nvme_insert_tls_key_versioned / nvme_generate_tls_key_identity compute them.
 */
export function deriveTlsPsk(
  key: TlsConfiguredKey,
  hostnqn: string,
  subnqn: string,
  version: TlsIdentityVersion = 0,
  encoding: HkdfLabelEncoding = DEFAULT_HKDF_ENCODING,
): DerivedTlsPsk {
  const hash = key.hash;
  const retained = deriveRetainedPsk(key, hostnqn, encoding);
  try {
    if (version === 0) {
      const identity = formatTlsIdentity({ version: 0, type: 'R', hash, hostnqn, subnqn });
      return { identity, psk: deriveTlsPskFrom(hash, retained, identity, encoding) };
    }
    const digest = derivePskDigest(hash, retained, hostnqn, subnqn);
    const identity = formatTlsIdentity({ version: 1, type: 'R', hash, hostnqn, subnqn, digest });
    return { identity, psk: deriveTlsPskFrom(hash, retained, `0${hash} ${digest}`, encoding) };
  } finally {
    retained.fill(0);
  }
}

/**
 * Identity and TLS PSK for the generated PSK of secure channel concatenation (TP 8018; Linux nvme_auth_secure_concat /
 * nvmet_auth_insert_psk, nvme_tls_psk_refresh): always a version 1 identity `NVMe1G<hh> <hostnqn> <subnqn> <digest>`,
 * the digest and the TLS PSK derived from the generated PSK as for a retained one (context "<hh> <digest>").
 */
export function deriveConcatTlsPsk(
  hash: TlsHash,
  generatedPsk: Uint8Array,
  hostnqn: string,
  subnqn: string,
  encoding: HkdfLabelEncoding = DEFAULT_HKDF_ENCODING,
): DerivedTlsPsk {
  const digest = derivePskDigest(hash, generatedPsk, hostnqn, subnqn);
  const identity = formatTlsIdentity({ version: 1, type: 'G', hash, hostnqn, subnqn, digest });
  return { identity, psk: deriveTlsPskFrom(hash, generatedPsk, `0${hash} ${digest}`, encoding) };
}
