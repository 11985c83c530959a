/**
 * DH-HMAC-CHAP computations (NVMe Base 2.0 §8.13.5.3-8.13.5.7), byte-for-byte as Linux
 * drivers/nvme/common/auth.c, host/auth.c and target/auth.c compute them. The only module of
 * protocol/ allowed to import node:crypto (computation only; no I/O).
 */
import { createHash, createHmac, createPrivateKey, createPublicKey, diffieHellman, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { DhGroupId, HASH_INFO } from './constants.js';
import type { HashId } from './constants.js';
import { FFDHE_PRIMES_HEX } from './ffdhe-primes.js';

export type RandomBytes = (n: number) => Buffer;

/** CSPRNG bytes; sessions and key generation take a RandomBytes so tests can inject their own. */
export const defaultRandomBytes: RandomBytes = (n) => randomBytes(n);

/** A uniformly random u32 in [1, 2^32-1] (Linux seeds its sequence counter with get_random_u32). */
export function randomNonZeroU32(): number {
  return randomInt(1, 0xffffffff);
}

export function hashLength(hashId: HashId): number {
  return HASH_INFO[hashId].length;
}

export function hmac(hashId: HashId, key: Uint8Array, ...parts: Uint8Array[]): Buffer {
  const h = createHmac(HASH_INFO[hashId].name, key);
  for (const p of parts) h.update(p);
  return h.digest();
}

export function digest(hashId: HashId, data: Uint8Array): Buffer {
  return createHash(HASH_INFO[hashId].name).update(data).digest();
}

/** Constant-time equality for responses (nvmet uses crypto_memneq). */
export function responsesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * §8.13.5.7 augmented challenge: Ca = HMAC(H(g^xy mod p), C). Linux nvme_auth_augmented_challenge
 * hashes the whole shared secret (prime-length, zero-padded) and keys the HMAC with the digest.
 */
export function augmentedChallenge(hashId: HashId, sessionKey: Uint8Array, challenge: Uint8Array): Buffer {
  return hmac(hashId, digest(hashId, sessionKey), challenge);
}

const NUL = Buffer.alloc(1);
const HOST_HOST = Buffer.from('HostHost', 'ascii');
const CONTROLLER = Buffer.from('Controller', 'ascii');

export interface ResponseInput {
  hashId: HashId;
  /** The transformed secret (transformKey) used as HMAC key. */
  key: Uint8Array;
  /** C1 for the host response, C2 for the controller response; already augmented when DH is used. */
  challenge: Uint8Array;
  seqnum: number;
  transactionId: number;
  hostnqn: string;
  subsysnqn: string;
  /** SC_C of the transaction's AUTH_Negotiate: the byte after T_ID (00h without secure channel concatenation). */
  scC?: number;
}

function scCByte(scC: number | undefined): Buffer {
  return scC === undefined || scC === 0 ? NUL : Buffer.from([scC & 0xff]);
}

/** Session key KS = H(g^xy mod p) (NVMe Base 2.1 §8.3.4.5.9; Linux 7.x nvme_auth_gen_session_key). */
export function sessionKeyFromSecret(hashId: HashId, sharedSecret: Uint8Array): Buffer {
  return digest(hashId, sharedSecret);
}

function seqTid(seqnum: number, transactionId: number): Buffer {
  const b = Buffer.alloc(6);
  b.writeUInt32LE(seqnum >>> 0, 0);
  b.writeUInt16LE(transactionId & 0xffff, 4);
  return b;
}

/** The response both sides compute (NVMe Base 2.0 §8.13.5): HMAC(key, C || S(le32) || T_ID(le16) || SC_C || role || first NQN || 00h || second NQN). */
function response(i: ResponseInput, role: Buffer, first: string, second: string): Buffer {
  return hmac(i.hashId, i.key, i.challenge, seqTid(i.seqnum, i.transactionId), scCByte(i.scC), role, Buffer.from(first, 'utf8'), NUL, Buffer.from(second, 'utf8'));
}

/**
 * Host response R1 = HMAC(Kh', C1 || S1(le32) || T_ID(le16) || SC_C (00h) || "HostHost" || NQNh || 00h || NQNc)
 * (Linux nvme_auth_dhchap_setup_host_response / nvmet_auth_host_hash).
 */
export function hostResponse(i: ResponseInput): Buffer {
  return response(i, HOST_HOST, i.hostnqn, i.subsysnqn);
}

/**
 * Controller response R2 = HMAC(Kc', C2 || S2(le32) || T_ID(le16) || SC_C (00h) || "Controller" || NQNc || 00h || NQNh)
 * (Linux nvme_auth_dhchap_setup_ctrl_response / nvmet_auth_ctrl_hash).
 */
export function controllerResponse(i: ResponseInput): Buffer {
  return response(i, CONTROLLER, i.subsysnqn, i.hostnqn);
}

// ---- finite-field Diffie-Hellman (RFC 7919) ----

export type FfdheGroupId = Exclude<DhGroupId, typeof DhGroupId.NULL>;

interface GroupInfo {
  readonly prime: Buffer;
  /**
   * Private exponent size in bytes: RFC 7919 §5.2 / NIST SP 800-56A short exponents of twice the
   * group's security strength (225/275/325/375/400 bits, the sizes OpenSSL uses for these groups).
   */
  readonly privateKeyBytes: number;
}

const GROUPS: Record<FfdheGroupId, GroupInfo> = {
  [DhGroupId.FFDHE2048]: { prime: Buffer.from(FFDHE_PRIMES_HEX.ffdhe2048, 'hex'), privateKeyBytes: 29 },
  [DhGroupId.FFDHE3072]: { prime: Buffer.from(FFDHE_PRIMES_HEX.ffdhe3072, 'hex'), privateKeyBytes: 35 },
  [DhGroupId.FFDHE4096]: { prime: Buffer.from(FFDHE_PRIMES_HEX.ffdhe4096, 'hex'), privateKeyBytes: 41 },
  [DhGroupId.FFDHE6144]: { prime: Buffer.from(FFDHE_PRIMES_HEX.ffdhe6144, 'hex'), privateKeyBytes: 47 },
  [DhGroupId.FFDHE8192]: { prime: Buffer.from(FFDHE_PRIMES_HEX.ffdhe8192, 'hex'), privateKeyBytes: 50 },
};

const GENERATOR = Buffer.from([2]);

// ---- DER for DH keys (PKCS #3 DHParameter in PKCS #8 / SubjectPublicKeyInfo, OID dhKeyAgreement 1.2.840.113549.1.3.1).
// DH keys go through KeyObjects rather than createDiffieHellman(prime): Node 24 checks the prime in that constructor,
// seconds to minutes per key pair for these groups (docs/testing.md, Node versions); a KeyObject import does not.
const DH_KEY_AGREEMENT_OID = Buffer.from('06092a864886f70d010301', 'hex');

function derLength(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function der(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), derLength(body.length), body]);
}

/** DER INTEGER of an unsigned big-endian value: no leading zero bytes, one 00h when the top bit is set. */
function derUint(v: Uint8Array): Buffer {
  let i = 0;
  while (i < v.length - 1 && v[i] === 0) i++;
  const b = Buffer.from(v.subarray(i));
  return der(0x02, (b[0] ?? 0) & 0x80 ? Buffer.from([0]) : Buffer.alloc(0), b);
}

function dhAlgorithm(prime: Buffer): Buffer {
  return der(0x30, DH_KEY_AGREEMENT_OID, der(0x30, derUint(prime), derUint(GENERATOR)));
}

/** Reads one TLV at `at`: its tag, where its content starts and ends. */
function derRead(b: Buffer, at: number): { tag: number; start: number; end: number } {
  const tag = b[at] ?? -1;
  let len = b[at + 1] ?? 0;
  let start = at + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    len = 0;
    for (let k = 0; k < n; k++) len = len * 256 + (b[start + k] ?? 0);
    start += n;
  }
  return { tag, start, end: start + len };
}

/** y from a DH SubjectPublicKeyInfo: SEQUENCE { AlgorithmIdentifier, BIT STRING { INTEGER y } }. */
function spkiPublicValue(spki: Buffer): Buffer {
  const outer = derRead(spki, 0);
  const alg = derRead(spki, outer.start);
  const bits = derRead(spki, alg.end);
  const y = derRead(spki, bits.start + 1);
  if (outer.tag !== 0x30 || alg.tag !== 0x30 || bits.tag !== 0x03 || y.tag !== 0x02) throw new Error('unexpected DH SubjectPublicKeyInfo');
  // A DER INTEGER carries a 00h before a value whose top bit is set; the caller pads to the prime's length.
  let start = y.start;
  while (start < y.end - 1 && spki[start] === 0) start++;
  return spki.subarray(start, y.end);
}

export function ffdhePrime(groupId: FfdheGroupId): Buffer {
  return GROUPS[groupId].prime;
}

/** Public value / shared secret size on the wire: the prime's length (Linux crypto_kpp_maxsize). */
export function dhValueLength(groupId: FfdheGroupId): number {
  return GROUPS[groupId].prime.length;
}

function leftPad(b: Buffer, len: number): Buffer {
  if (b.length === len) return b;
  const out = Buffer.alloc(len);
  b.copy(out, len - b.length);
  return out;
}

/** One side's ephemeral DH key pair. The private exponent stays inside (never exposed or printed). */
export class DhKeyPair {
  readonly #privateKey: KeyObject;
  readonly #algorithm: Buffer;
  readonly #len: number;
  readonly publicValue: Buffer;

  constructor(
    readonly groupId: FfdheGroupId,
    random: RandomBytes,
  ) {
    const g = GROUPS[groupId];
    // x must be in [2, q-1]; a short random exponent is far below q, so only 0 and 1 need fixing.
    const priv = Buffer.from(random(g.privateKeyBytes));
    if (priv.subarray(0, -1).every((b) => b === 0) && (priv[priv.length - 1] ?? 0) < 2) {
      priv[priv.length - 1] = 2;
    }
    this.#algorithm = dhAlgorithm(g.prime);
    // PKCS #8 PrivateKeyInfo { version 0, algorithm, OCTET STRING { INTEGER x } }; OpenSSL derives y = g^x mod p.
    const pkcs8 = der(0x30, der(0x02, Buffer.from([0])), this.#algorithm, der(0x04, derUint(priv)));
    this.#privateKey = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
    this.#len = g.prime.length;
    this.publicValue = leftPad(spkiPublicValue(createPublicKey(this.#privateKey).export({ format: 'der', type: 'spki' })), this.#len);
  }

  /** g^xy mod p, zero-padded to the prime length as Linux's kpp output; null for an invalid peer value. */
  computeSecret(peerPublic: Uint8Array): Buffer | null {
    if (!isValidPublicValue(this.groupId, peerPublic)) return null;
    try {
      const spki = der(0x30, this.#algorithm, der(0x03, Buffer.from([0]), derUint(peerPublic)));
      const publicKey = createPublicKey({ key: spki, format: 'der', type: 'spki' });
      return leftPad(diffieHellman({ privateKey: this.#privateKey, publicKey }), this.#len);
    } catch {
      return null;
    }
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `DhKeyPair { group: ${this.groupId}, private: <redacted> }`;
  }
}

/** SP 800-56A §5.6.2.3.1 partial public key validation, as Linux dh_is_pubkey_valid: 1 < y < p-1. */
export function isValidPublicValue(groupId: FfdheGroupId, y: Uint8Array): boolean {
  const p = GROUPS[groupId].prime;
  if (y.length === 0 || y.length > p.length) return false;
  const yv = BigInt(`0x${Buffer.from(y.buffer, y.byteOffset, y.byteLength).toString('hex')}`);
  const pv = BigInt(`0x${p.toString('hex')}`);
  return yv > 1n && yv < pv - 1n;
}
