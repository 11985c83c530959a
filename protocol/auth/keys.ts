/**
 * DH-HMAC-CHAP secrets in the NVMe Base 2.0 §8.13.5.8 representation `DHHC-1:<hh>:<base64(key || crc32le)>:`
 * (what `nvme gen-dhchap-key` prints and nvmet's configfs `dhchap_key` takes), and the key transform
 * Kh' = HMAC(hh, Kh, NQN || "NVMe-over-Fabrics") (Linux nvme_auth_transform_key).
 */
import { HASH_INFO, isHashId } from './constants.js';
import type { HashId } from './constants.js';
import { crc32Ieee } from './crc32.js';
import { defaultRandomBytes, hmac } from './crypto.js';
import type { RandomBytes } from './crypto.js';
import { DhchapKeyError } from './errors.js';

/** `hh` of a secret: 0 = use as is, 1/2/3 = transform with SHA-256/384/512 (NVMe Base 2.0 §8.13.5.8). */
export type KeyTransform = 0 | HashId;

const INSPECT = Symbol.for('nodejs.util.inspect.custom');
const SEED = Buffer.from('NVMe-over-Fabrics', 'ascii');

/**
 * A parsed DH-HMAC-CHAP secret. The key bytes live in a private field; `toString`, `toJSON` and
 * util.inspect print only the transform id and length, so a key that reaches a logger or an
 * error message leaks nothing. `format()` is the one deliberate way to get the secret back out.
 */
export class DhchapKey {
  readonly #bytes: Buffer;

  constructor(
    readonly transform: KeyTransform,
    bytes: Uint8Array,
  ) {
    if (bytes.length !== 32 && bytes.length !== 48 && bytes.length !== 64) {
      throw new DhchapKeyError(`DH-HMAC-CHAP key must be 32, 48 or 64 bytes, got ${bytes.length}`);
    }
    this.#bytes = Buffer.from(bytes);
  }

  get length(): number {
    return this.#bytes.length;
  }

  /** The `DHHC-1:...:` representation (contains the secret: do not log it). */
  format(): string {
    return formatDhchapSecret(this.transform, this.#bytes);
  }

  /**
   * The HMAC key for responses: Kh' = HMAC(hash(hh), key, nqn || "NVMe-over-Fabrics"), or the key
   * itself for hh 00. The host key is transformed with the host NQN, the controller key with the
   * subsystem NQN (Linux host/auth.c; nvmet target/auth.c does the same).
   */
  transformedFor(nqn: string): Buffer {
    if (this.transform === 0) return Buffer.from(this.#bytes);
    return transformKey(this.transform, this.#bytes, nqn);
  }

  /** Whether two keys hold the same secret (for config reloads), without exposing either. */
  equals(other: DhchapKey): boolean {
    return this.transform === other.transform && this.#bytes.equals(other.#bytes);
  }

  toString(): string {
    return `DhchapKey(hh=${this.transform}, ${this.length} bytes, <redacted>)`;
  }

  toJSON(): { transform: KeyTransform; length: number; secret: '<redacted>' } {
    return { transform: this.transform, length: this.length, secret: '<redacted>' };
  }

  [INSPECT](): string {
    return this.toString();
  }
}

/** Kh' = HMAC(hash, key, nqn || "NVMe-over-Fabrics") (NVMe Base 2.0 §8.13.5.8, Linux nvme_auth_transform_key). */
export function transformKey(hashId: HashId, key: Uint8Array, nqn: string): Buffer {
  return hmac(hashId, key, Buffer.from(nqn, 'utf8'), SEED);
}

const SECRET_RE = /^DHHC-1:(\d\d):([A-Za-z0-9+/]*={0,2}):?$/;

/**
 * Parse `DHHC-1:<hh>:<base64>:` (trailing ':' optional, surrounding whitespace ignored, as nvmet's
 * strim + Linux nvme_auth_extract_key accept). Checks hh in 00..03, a decoded length of 36/52/68
 * bytes and the trailing little-endian CRC-32. Errors never include the secret.
 */
export function parseDhchapSecret(secret: string): DhchapKey {
  const m = SECRET_RE.exec(secret.trim());
  if (!m) throw new DhchapKeyError('DH-HMAC-CHAP secret is not in the form DHHC-1:<hh>:<base64>:');
  const hh = Number.parseInt(m[1] as string, 10);
  if (hh !== 0 && !isHashId(hh)) {
    throw new DhchapKeyError(`DH-HMAC-CHAP secret has invalid key transform hh=${m[1] as string} (must be 00-03)`);
  }
  const b64 = m[2] as string;
  if (b64.length % 4 !== 0) throw new DhchapKeyError('DH-HMAC-CHAP secret has malformed base64');
  const raw = Buffer.from(b64, 'base64');
  if (raw.length !== 36 && raw.length !== 52 && raw.length !== 68) {
    throw new DhchapKeyError(`DH-HMAC-CHAP secret decodes to ${raw.length} bytes; expected 36, 52 or 68 (key + CRC-32)`);
  }
  const key = raw.subarray(0, raw.length - 4);
  const stored = raw.readUInt32LE(raw.length - 4);
  const computed = crc32Ieee(key);
  raw.fill(0, raw.length - 4);
  if (stored !== computed) {
    key.fill(0);
    throw new DhchapKeyError('DH-HMAC-CHAP secret CRC-32 mismatch (corrupted or mistyped secret)');
  }
  const k = new DhchapKey(hh as KeyTransform, key);
  key.fill(0);
  return k;
}

/** `DHHC-1:%02x:base64(key || crc32le):` exactly as nvme-cli gen-dhchap-key prints it. */
export function formatDhchapSecret(transform: KeyTransform, key: Uint8Array): string {
  const buf = Buffer.alloc(key.length + 4);
  buf.set(key, 0);
  buf.writeUInt32LE(crc32Ieee(key), key.length);
  const s = `DHHC-1:${transform.toString(16).padStart(2, '0')}:${buf.toString('base64')}:`;
  buf.fill(0);
  return s;
}

export interface GenerateDhchapKeyOptions {
  /** 0 (default) = no transform, 1/2/3 = SHA-256/384/512 (`--hmac`). */
  hmac?: KeyTransform;
  /** 32, 48 or 64 (`--key-length`); defaults to the hash length for hmac 1-3, else 32. */
  length?: number;
  /** NQN the key is tied to (`--nqn`); required for hmac 1-3. */
  hostnqn?: string;
  /** Raw secret to use instead of random bytes (`--secret`, given as bytes). */
  secret?: Uint8Array;
  randomBytes?: RandomBytes;
}

/**
 * Like `nvme gen-dhchap-key` (nvme-cli + libnvme nvme_gen_dhchap_key): random bytes of `length`,
 * and for hmac 1-3 the stored key is HMAC(hash, raw, hostnqn || "NVMe-over-Fabrics") — the
 * key length must then equal the hash length, as nvme-cli enforces.
 */
export function generateDhchapKey(opts: GenerateDhchapKeyOptions = {}): DhchapKey {
  const transform: KeyTransform = opts.hmac ?? 0;
  if (transform !== 0 && !isHashId(transform)) throw new DhchapKeyError(`invalid hmac ${String(transform)}`);
  const length = opts.length ?? (transform === 0 ? 32 : HASH_INFO[transform].length);
  if (length !== 32 && length !== 48 && length !== 64) {
    throw new DhchapKeyError(`key length must be 32, 48 or 64, got ${length}`);
  }
  if (transform !== 0 && length !== HASH_INFO[transform].length) {
    throw new DhchapKeyError(`key length ${length} does not match hmac ${transform} (${HASH_INFO[transform].name})`);
  }
  const raw = opts.secret ? Buffer.from(opts.secret) : (opts.randomBytes ?? defaultRandomBytes)(length);
  if (raw.length !== length) throw new DhchapKeyError(`secret must be ${length} bytes, got ${raw.length}`);
  let key: Buffer = raw;
  if (transform !== 0) {
    if (opts.hostnqn === undefined) throw new DhchapKeyError('hostnqn is required when hmac is 1, 2 or 3');
    key = transformKey(transform, raw, opts.hostnqn);
    raw.fill(0);
  }
  const k = new DhchapKey(transform, key);
  key.fill(0);
  return k;
}
