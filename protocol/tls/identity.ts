/**
 * TLS PSK identities (NVMe/TCP Transport 1.0 with TP 8011 §3.6.1.3): `NVMe0<R|G><hh> <hostnqn> <subnqn>` and, version
 * 1, `NVMe1<R|G><hh> <hostnqn> <subnqn> <PSK digest>`. R = retained PSK (configured), G = generated PSK (secure
 * channel concatenation); hh 01 = SHA-256, 02 = SHA-384.
 */
import { TlsIdentityError } from './errors.js';
import type { TlsHash } from './keys.js';

export type TlsPskType = 'R' | 'G';
export type TlsIdentityVersion = 0 | 1;

export interface TlsIdentity {
  version: TlsIdentityVersion;
  type: TlsPskType;
  hash: TlsHash;
  hostnqn: string;
  subnqn: string;
  /** Base64 PSK digest; present exactly when version is 1. */
  digest?: string;
}

export function formatTlsIdentity(id: TlsIdentity): string {
  const head = `NVMe${id.version}${id.type}0${id.hash} ${id.hostnqn} ${id.subnqn}`;
  if (id.version === 0) return head;
  if (id.digest === undefined) throw new TlsIdentityError('format', 'a version 1 TLS PSK identity needs a PSK digest');
  return `${head} ${id.digest}`;
}

const ID_RE = /^NVMe([0-9])([RG])([0-9]{2}) (\S+) (\S+)(?: (\S+))?$/;

/** Parse an identity a client sent. NQNs contain no spaces (NVMe Base 2.0 §4.5), so fields split at single spaces. */
export function parseTlsIdentity(text: string): TlsIdentity {
  const m = ID_RE.exec(text);
  if (!m) throw new TlsIdentityError('format', 'TLS PSK identity is not NVMe<v><R|G><hh> <hostnqn> <subnqn>[ <digest>]');
  const version = Number(m[1]);
  if (version !== 0 && version !== 1) throw new TlsIdentityError('version', `TLS PSK identity version ${version} is not 0 or 1`);
  const hash = Number(m[3]);
  if (hash !== 1 && hash !== 2) throw new TlsIdentityError('hash', `TLS PSK identity hash ${m[3] as string} is not 01 or 02`);
  const digest = m[6];
  if (version === 0 && digest !== undefined) throw new TlsIdentityError('format', 'a version 0 TLS PSK identity has no digest field');
  if (version === 1 && digest === undefined) throw new TlsIdentityError('format', 'a version 1 TLS PSK identity lacks the PSK digest');
  return {
    version,
    type: m[2] as TlsPskType,
    hash,
    hostnqn: m[4] as string,
    subnqn: m[5] as string,
    ...(digest !== undefined ? { digest } : {}),
  };
}

/**
 * Node 20's TLS 1.3 external PSKs go through OpenSSL's legacy PSK callback, which only pairs with SHA-256 suites: a
 * SHA-384 PSK falls back to certificate authentication and fails. So hh 02 is refused with this reason.
 */
export const SHA384_UNSUPPORTED =
  'SHA-384 TLS PSKs (TLS_AES_256_GCM_SHA384, identity hash 02) are not supported: Node 20 does TLS 1.3 external PSK only through OpenSSL\'s legacy PSK callback, which works with SHA-256 suites only';

/** Throws TlsIdentityError('unsupported-hash') for hash 02. */
export function assertSupportedHash(hash: TlsHash): void {
  if (hash === 2) throw new TlsIdentityError('unsupported-hash', SHA384_UNSUPPORTED);
}
