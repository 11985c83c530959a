/**
 * Configured TLS PSKs in the PSK interchange format `NVMeTLSkey-1:<hh>:<base64(key || CRC-32 LE)>:` (NVMe/TCP
 * Transport 1.0 with TP 8011 §3.6.1.5; what `nvme gen-tls-key` prints and nvmet's configfs takes). `hh` is the hash
 * used to turn the configured PSK into the retained PSK: 00 none, 01 SHA-256, 02 SHA-384.
 */
import { Buffer } from 'node:buffer';
import { crc32Ieee } from '../auth/crc32.js';
import { TlsKeyError } from './errors.js';

/** PSK hash of a key or identity: 1 = SHA-256 (TLS_AES_128_GCM_SHA256), 2 = SHA-384 (TLS_AES_256_GCM_SHA384). */
export type TlsHash = 1 | 2;
/** `hh` of a configured key: 0 = use the configured PSK as the retained PSK, else the HKDF hash. */
export type TlsKeyHmac = 0 | TlsHash;

export const TLS_HASH_LENGTH: Readonly<Record<TlsHash, number>> = { 1: 32, 2: 48 };
export const TLS_HASH_NAME: Readonly<Record<TlsHash, 'sha256' | 'sha384'>> = { 1: 'sha256', 2: 'sha384' };

const INSPECT = Symbol.for('nodejs.util.inspect.custom');

/**
 * A parsed configured PSK. The bytes live in a private field; toString/toJSON/inspect show only hh and length, so a
 * key reaching a logger leaks nothing. `bytes()` and `format()` are the deliberate ways back to the secret.
 */
export class TlsConfiguredKey {
  readonly #bytes: Buffer;

  constructor(
    readonly hmac: TlsKeyHmac,
    bytes: Uint8Array,
  ) {
    if (bytes.length !== 32 && bytes.length !== 48) {
      throw new TlsKeyError('length', `TLS PSK must be 32 or 48 bytes, got ${bytes.length}`);
    }
    if (hmac !== 0 && bytes.length !== TLS_HASH_LENGTH[hmac]) {
      throw new TlsKeyError('length', `TLS PSK with hash ${formatHh(hmac)} must be ${TLS_HASH_LENGTH[hmac]} bytes, got ${bytes.length}`);
    }
    this.#bytes = Buffer.from(bytes);
  }

  get length(): number {
    return this.#bytes.length;
  }

  /**
   * The PSK hash the TLS PSK and identity use: hh for a transformed key, else the one its length implies (32 bytes
   * SHA-256, 48 bytes SHA-384), as libnvme and the kernel choose it.
   */
  get hash(): TlsHash {
    if (this.hmac !== 0) return this.hmac;
    return this.#bytes.length === 48 ? 2 : 1;
  }

  /** A copy of the key bytes (secret: do not log). */
  bytes(): Buffer {
    return Buffer.from(this.#bytes);
  }

  /** The interchange representation (secret: do not log). */
  format(): string {
    return formatTlsKey(this.hmac, this.#bytes);
  }

  equals(other: TlsConfiguredKey): boolean {
    return this.hmac === other.hmac && this.#bytes.equals(other.#bytes);
  }

  toString(): string {
    return `TlsConfiguredKey(hh=${formatHh(this.hmac)}, ${this.length} bytes, <redacted>)`;
  }

  toJSON(): { hmac: TlsKeyHmac; length: number; secret: '<redacted>' } {
    return { hmac: this.hmac, length: this.length, secret: '<redacted>' };
  }

  [INSPECT](): string {
    return this.toString();
  }
}

function formatHh(h: number): string {
  return h.toString(16).padStart(2, '0');
}

const KEY_RE = /^NVMeTLSkey-1:([0-9a-fA-F]{2}):([A-Za-z0-9+/]*={0,2}):?$/;

/**
 * Parse `NVMeTLSkey-1:<hh>:<base64>:` (surrounding whitespace ignored; the trailing ':' optional, as libnvme
 * nvme_import_tls_key accepts it). Checks hh 00-02, a decoded length of 36 or 52 bytes (key + CRC-32), the length
 * hh implies, and the little-endian CRC-32 of the key. Errors never include the secret.
 */
export function parseTlsKey(text: string): TlsConfiguredKey {
  const m = KEY_RE.exec(text.trim());
  if (!m) throw new TlsKeyError('format', 'TLS PSK is not in the interchange format NVMeTLSkey-1:<hh>:<base64>:');
  const hh = Number.parseInt(m[1] as string, 16);
  if (hh !== 0 && hh !== 1 && hh !== 2) {
    throw new TlsKeyError('hash', `TLS PSK has hash id ${m[1] as string}; expected 00 (none), 01 (SHA-256) or 02 (SHA-384)`);
  }
  const b64 = m[2] as string;
  if (b64.length % 4 !== 0) throw new TlsKeyError('base64', 'TLS PSK has malformed base64');
  const raw = Buffer.from(b64, 'base64');
  if (raw.length !== 36 && raw.length !== 52) {
    raw.fill(0);
    throw new TlsKeyError('length', `TLS PSK decodes to ${raw.length} bytes; expected 36 or 52 (32/48-byte key + CRC-32)`);
  }
  const key = raw.subarray(0, raw.length - 4);
  const stored = raw.readUInt32LE(raw.length - 4);
  try {
    if (stored !== crc32Ieee(key)) throw new TlsKeyError('crc', 'TLS PSK CRC-32 mismatch (corrupted or mistyped key)');
    return new TlsConfiguredKey(hh, key);
  } finally {
    raw.fill(0);
  }
}

/** `NVMeTLSkey-1:%02x:base64(key || crc32le):` exactly as `nvme gen-tls-key` prints it. */
export function formatTlsKey(hmac: TlsKeyHmac, key: Uint8Array): string {
  const buf = Buffer.alloc(key.length + 4);
  buf.set(key, 0);
  buf.writeUInt32LE(crc32Ieee(key), key.length);
  const s = `NVMeTLSkey-1:${formatHh(hmac)}:${buf.toString('base64')}:`;
  buf.fill(0);
  return s;
}
