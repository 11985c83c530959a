/**
 * DH-HMAC-CHAP computations (NVMe Base 2.0 §8.13.5.3-8.13.5.7), byte-for-byte as Linux
 * drivers/nvme/common/auth.c, host/auth.c and target/auth.c compute them. The only module of
 * protocol/ allowed to import node:crypto (computation only; no I/O).
 */
import { createDiffieHellman, createHash, createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import type { DiffieHellman } from 'node:crypto';
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
  readonly #dh: DiffieHellman;
  readonly #len: number;
  readonly publicValue: Buffer;

  constructor(
    readonly groupId: FfdheGroupId,
    random: RandomBytes,
  ) {
    const g = GROUPS[groupId];
    this.#dh = createDiffieHellman(g.prime, GENERATOR);
    // x must be in [2, q-1]; a short random exponent is far below q, so only 0 and 1 need fixing.
    const priv = Buffer.from(random(g.privateKeyBytes));
    if (priv.subarray(0, -1).every((b) => b === 0) && (priv[priv.length - 1] ?? 0) < 2) {
      priv[priv.length - 1] = 2;
    }
    this.#dh.setPrivateKey(priv);
    this.#dh.generateKeys();
    this.#len = g.prime.length;
    this.publicValue = leftPad(this.#dh.getPublicKey(), this.#len);
  }

  /** g^xy mod p, zero-padded to the prime length as Linux's kpp output; null for an invalid peer value. */
  computeSecret(peerPublic: Uint8Array): Buffer | null {
    if (!isValidPublicValue(this.groupId, peerPublic)) return null;
    try {
      return leftPad(this.#dh.computeSecret(peerPublic), this.#len);
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
