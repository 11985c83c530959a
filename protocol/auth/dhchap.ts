/**
 * DH-HMAC-CHAP session state machines (NVMe Base 2.0 §8.13.5), one per queue, I/O-free: the host
 * side is driven step by step by the initiator (each step = one Authentication Send or Receive),
 * the controller side is fed the commands the target receives. Behaviour mirrors Linux
 * drivers/nvme/host/auth.c (nvme_queue_auth_work) and drivers/nvme/target/fabrics-cmd-auth.c.
 */
import { DNR, Status } from '../nvme/index.js';
import {
  DH_GROUP_NAMES,
  DHCHAP_AUTH_ID,
  DhGroupId,
  FailureExplanation,
  HASH_INFO,
  HashId,
  isDhGroupId,
  isHashId,
  LINUX_AUTH_RECEIVE_LENGTH,
  ScC,
} from './constants.js';
import {
  augmentedChallenge,
  controllerResponse,
  defaultRandomBytes,
  DhKeyPair,
  dhValueLength,
  hashLength,
  hostResponse,
  randomNonZeroU32,
  responsesEqual,
  sessionKeyFromSecret,
  hmac,
} from './crypto.js';
import type { FfdheGroupId, RandomBytes } from './crypto.js';
import { DhchapAuthError } from './errors.js';
import type { DhchapKey } from './keys.js';
import { decodeAuthMessage, encodeAuthMessage, failureMessage } from './messages.js';
import type { AuthMessage, DhchapChallenge, DhchapReply, DhchapSuccess1 } from './messages.js';

const INSPECT = Symbol.for('nodejs.util.inspect.custom');

/** Linux host offers every hash and group, in this order (nvme_auth_set_dhchap_negotiate_data). */
export const ALL_HASHES: readonly HashId[] = [HashId.SHA256, HashId.SHA384, HashId.SHA512];
export const ALL_DH_GROUPS: readonly DhGroupId[] = [
  DhGroupId.NULL,
  DhGroupId.FFDHE2048,
  DhGroupId.FFDHE3072,
  DhGroupId.FFDHE4096,
  DhGroupId.FFDHE6144,
  DhGroupId.FFDHE8192,
];

/**
 * Sequence numbers as Linux nvme_auth_get_seqnum: a process-wide counter with a random start,
 * incremented per use and never 0 (0 in the Reply means "no bidirectional authentication").
 */
let seqnumCounter = 0;
export function defaultNextSeqnum(): number {
  seqnumCounter = seqnumCounter === 0 ? randomNonZeroU32() : (seqnumCounter + 1) >>> 0;
  if (seqnumCounter === 0) seqnumCounter = 1;
  return seqnumCounter;
}

/** What a finished session agreed on. */
export interface DhchapResult {
  hashId: HashId;
  dhGroupId: DhGroupId;
  /** The controller proved knowledge of the controller key too. */
  bidirectional: boolean;
  transactionId: number;
  /** Secure channel concatenation (TP 8018): present when AUTH_Negotiate carried NEWTLSPSK or REPLACETLSPSK. */
  concat?: DhchapConcatResult;
}

/** The generated PSK of a concatenated transaction, HMAC(KS, C1 || C2) (NVMe Base 2.1 §8.3.4.5.9). Secret. */
export interface DhchapConcatResult {
  scC: number;
  /** Keyed with KS = H(g^xy mod p). */
  generatedPsk: Buffer;
}

/**
 * The generated PSK from the DH shared secret and the two challenges. Linux 6.15..6.x keys this HMAC with g^xy itself
 * and 7.x with H(g^xy); both give the same bytes, because HMAC first hashes a key longer than its block (RFC 2104
 * §2), and every FFDHE secret (256+ bytes) is longer than a SHA-256/384 block.
 */
export function generatedPsks(hashId: HashId, sharedSecret: Uint8Array, c1: Uint8Array, c2: Uint8Array): { generatedPsk: Buffer } {
  const ks = sessionKeyFromSecret(hashId, sharedSecret);
  try {
    return { generatedPsk: hmac(hashId, ks, c1, c2) };
  } finally {
    ks.fill(0);
  }
}

export function describeResult(r: DhchapResult): string {
  return `hash ${HASH_INFO[r.hashId].name} dhgroup ${DH_GROUP_NAMES[r.dhGroupId]}${r.bidirectional ? ' bidirectional' : ''}`;
}

interface Negotiated {
  hashId: HashId;
  dhGroupId: DhGroupId;
  hl: number;
}

/** Session key g^xy mod p (prime-length) or null for the NULL group, and the challenge to use. */
function maybeAugment(hashId: HashId, sessionKey: Buffer | null, challenge: Buffer): Buffer {
  return sessionKey ? augmentedChallenge(hashId, sessionKey, challenge) : challenge;
}

// =====================================================================================
// Host
// =====================================================================================

export interface DhchapHostOptions {
  hostnqn: string;
  subsysnqn: string;
  /** `--dhchap-secret`: proves the host's identity. */
  hostKey: DhchapKey;
  /** `--dhchap-ctrl-secret`: when set, the host also challenges the controller (bidirectional). */
  ctrlKey?: DhchapKey;
  /** T_ID; Linux uses a per-controller counter (ctrl->transaction++) shared by all queues. */
  transactionId: number;
  /** Hash functions to offer, in preference order (default: SHA-256, SHA-384, SHA-512). */
  hashes?: readonly HashId[];
  /** DH groups to offer (default: null, ffdhe2048 .. ffdhe8192). */
  dhGroups?: readonly DhGroupId[];
  /** AL for each Authentication Receive (default 4096, Linux CHAP_BUF_SIZE). */
  receiveLength?: number;
  randomBytes?: RandomBytes;
  nextSeqnum?: () => number;
  /**
   * Secure channel concatenation (TP 8018; Linux `nvme connect --concat`): 'new' sends SC_C NEWTLSPSK (cleartext
   * admin queue), 'replace' REPLACETLSPSK (re-authentication over the TLS admin queue). Needs a DH group (not
   * NULL); the Reply then carries a random C2 (CVALID=1) and S2 = 0 unless a controller key is set.
   */
  concat?: 'new' | 'replace';
}

/** One instruction for the initiator: issue a command, or stop. */
export type DhchapHostStep =
  /** Issue Authentication Send with this payload (TL = payload.length), then call next(). */
  | { kind: 'send'; payload: Buffer }
  /** Issue Authentication Receive with this AL, then call next(data). */
  | { kind: 'receive'; allocationLength: number }
  | { kind: 'done'; result: DhchapResult }
  | { kind: 'failed'; error: DhchapAuthError };

export type DhchapHostState =
  /** Nothing sent yet. */
  | 'start'
  /** AUTH_Negotiate handed out for sending. */
  | 'negotiate'
  /** Waiting for the Receive that returns DH-HMAC-CHAP_Challenge. */
  | 'await-challenge'
  /** Reply handed out for sending. */
  | 'reply'
  /** Waiting for the Receive that returns Success1. */
  | 'await-success1'
  /** Success2 handed out (bidirectional only). */
  | 'success2'
  /** Failure2 handed out; the session ends failed after it is sent. */
  | 'failure2'
  | 'authenticated'
  | 'failed';

const HOST_TRANSITIONS: Record<DhchapHostState, readonly DhchapHostState[]> = {
  start: ['negotiate', 'failed'],
  negotiate: ['await-challenge', 'failed'],
  'await-challenge': ['reply', 'failure2', 'failed'],
  reply: ['await-success1', 'failed'],
  'await-success1': ['success2', 'authenticated', 'failure2', 'failed'],
  success2: ['authenticated', 'failed'],
  failure2: ['failed'],
  authenticated: [],
  failed: [],
};

export class DhchapHost {
  #state: DhchapHostState = 'start';
  readonly #o: Required<Omit<DhchapHostOptions, 'ctrlKey' | 'concat'>> & { ctrlKey: DhchapKey | undefined };
  readonly #scC: number;
  #neg: Negotiated | null = null;
  #sessionKey: Buffer | null = null;
  #c1: Buffer | null = null;
  #s1 = 0;
  #s2 = 0;
  #c2: Buffer | null = null;
  #error: DhchapAuthError | null = null;
  #result: DhchapResult | null = null;

  constructor(opts: DhchapHostOptions) {
    this.#o = {
      hostnqn: opts.hostnqn,
      subsysnqn: opts.subsysnqn,
      hostKey: opts.hostKey,
      ctrlKey: opts.ctrlKey,
      transactionId: opts.transactionId & 0xffff,
      hashes: opts.hashes ?? ALL_HASHES,
      dhGroups: opts.dhGroups ?? ALL_DH_GROUPS,
      receiveLength: opts.receiveLength ?? LINUX_AUTH_RECEIVE_LENGTH,
      randomBytes: opts.randomBytes ?? defaultRandomBytes,
      nextSeqnum: opts.nextSeqnum ?? defaultNextSeqnum,
    };
    this.#scC = opts.concat === 'new' ? ScC.NEWTLSPSK : opts.concat === 'replace' ? ScC.REPLACETLSPSK : ScC.NOSC;
  }

  get state(): DhchapHostState {
    return this.#state;
  }

  get error(): DhchapAuthError | null {
    return this.#error;
  }

  get result(): DhchapResult | null {
    return this.#result;
  }

  #setState(next: DhchapHostState): void {
    if (!HOST_TRANSITIONS[this.#state].includes(next)) {
      throw new Error(`DhchapHost: illegal transition ${this.#state} -> ${next}`);
    }
    this.#state = next;
  }

  /**
   * Advance the session. Call first with no argument; after a 'send' step call again with no
   * argument once the command completed successfully; after a 'receive' step call with the
   * returned data. A command that fails with an NVMe status should end the session via abort().
   */
  next(received?: Buffer): DhchapHostStep {
    switch (this.#state) {
      case 'start': {
        this.#setState('negotiate');
        const payload = encodeAuthMessage({
          type: 'negotiate',
          tId: this.#o.transactionId,
          scC: this.#scC,
          protocols: [{ authId: DHCHAP_AUTH_ID, hashIds: [...this.#o.hashes], dhGroupIds: [...this.#o.dhGroups] }],
        });
        return { kind: 'send', payload };
      }
      case 'negotiate':
        this.#setState('await-challenge');
        return { kind: 'receive', allocationLength: this.#o.receiveLength };
      case 'await-challenge':
        return this.#onChallenge(this.#requireData(received));
      case 'reply':
        this.#setState('await-success1');
        return { kind: 'receive', allocationLength: this.#o.receiveLength };
      case 'await-success1':
        return this.#onSuccess1(this.#requireData(received));
      case 'success2':
        return this.#finish();
      case 'failure2':
        this.#setState('failed');
        return { kind: 'failed', error: this.#error as DhchapAuthError };
      case 'authenticated':
        return { kind: 'done', result: this.#result as DhchapResult };
      case 'failed':
        return { kind: 'failed', error: this.#error as DhchapAuthError };
    }
  }

  /** End the session because a command failed (NVMe status, timeout, connection loss). */
  abort(reason: string): DhchapAuthError {
    if (this.#state === 'failed') return this.#error as DhchapAuthError;
    this.#error = new DhchapAuthError(FailureExplanation.FAILED, 'host', reason);
    this.#setState('failed');
    this.#wipe();
    return this.#error;
  }

  #requireData(received: Buffer | undefined): Buffer {
    return received ?? Buffer.alloc(0);
  }

  /** Controller-side failure or a message Linux would not answer with Failure2 (receive_validate). */
  #fail(explanation: number, detectedBy: 'host' | 'controller', reason: string): DhchapHostStep {
    this.#error = new DhchapAuthError(explanation, detectedBy, reason);
    this.#setState('failed');
    this.#wipe();
    return { kind: 'failed', error: this.#error };
  }

  /** Problems with the message's content: tell the controller with AUTH_Failure2 (Linux "fail2"). */
  #failure2(explanation: number, reason: string): DhchapHostStep {
    this.#error = new DhchapAuthError(explanation, 'host', reason);
    this.#setState('failure2');
    this.#wipe();
    return { kind: 'send', payload: encodeAuthMessage(failureMessage('failure2', this.#o.transactionId, explanation)) };
  }

  /** Common checks of nvme_auth_receive_validate: Failure1, message type, transaction id. */
  #validateReceived(data: Buffer, expected: AuthMessage['type']): AuthMessage | DhchapHostStep {
    const d = decodeAuthMessage(data);
    if (!d.ok) {
      return d.explanation === FailureExplanation.INCORRECT_MESSAGE
        ? this.#fail(d.explanation, 'host', d.reason)
        : this.#failure2(d.explanation, d.reason);
    }
    const m = d.message;
    if (m.type === 'failure1') {
      return this.#fail(m.explanation, 'controller', 'controller sent AUTH_Failure1');
    }
    if (m.type !== expected) return this.#fail(FailureExplanation.INCORRECT_MESSAGE, 'host', `expected ${expected}, got ${m.type}`);
    if (m.tId !== this.#o.transactionId) {
      return this.#fail(FailureExplanation.INCORRECT_MESSAGE, 'host', `transaction id ${m.tId} != ${this.#o.transactionId}`);
    }
    return m;
  }

  #onChallenge(data: Buffer): DhchapHostStep {
    const v = this.#validateReceived(data, 'challenge');
    if ('kind' in v) return v;
    const m = v as DhchapChallenge;
    // nvme_auth_process_dhchap_challenge, plus a check that the controller chose from our offer.
    if (!isHashId(m.hashId) || !this.#o.hashes.includes(m.hashId)) {
      return this.#failure2(FailureExplanation.HASH_UNUSABLE, `controller chose hash ${m.hashId}`);
    }
    const hl = hashLength(m.hashId);
    if (m.challenge.length !== hl) return this.#failure2(FailureExplanation.HASH_UNUSABLE, `HL ${m.challenge.length} for hash ${m.hashId}`);
    if (!isDhGroupId(m.dhGroupId) || !this.#o.dhGroups.includes(m.dhGroupId)) {
      return this.#failure2(FailureExplanation.DHGROUP_UNUSABLE, `controller chose DH group ${m.dhGroupId}`);
    }
    if (m.dhGroupId !== DhGroupId.NULL && m.dhValue.length === 0) {
      return this.#failure2(FailureExplanation.DHGROUP_UNUSABLE, 'empty DH value');
    }
    if (m.dhGroupId === DhGroupId.NULL && m.dhValue.length !== 0) {
      return this.#failure2(FailureExplanation.INCORRECT_PAYLOAD, 'DH value with the NULL group');
    }
    if (this.#scC !== ScC.NOSC && m.dhGroupId === DhGroupId.NULL) {
      return this.#failure2(FailureExplanation.CONCAT_MISMATCH, 'secure channel concatenation needs a DH group, the controller chose NULL');
    }
    this.#neg = { hashId: m.hashId, dhGroupId: m.dhGroupId, hl };
    this.#s1 = m.seqnum;
    this.#c1 = Buffer.from(m.challenge);
    let hostDhValue: Buffer = Buffer.alloc(0);
    if (m.dhGroupId !== DhGroupId.NULL) {
      const kp = new DhKeyPair(m.dhGroupId as FfdheGroupId, this.#o.randomBytes);
      const secret = kp.computeSecret(m.dhValue);
      // Linux maps a shared-secret failure to INCORRECT_PAYLOAD (nvme_auth_dhchap_exponential).
      if (!secret) return this.#failure2(FailureExplanation.INCORRECT_PAYLOAD, 'invalid controller DH value');
      this.#sessionKey = secret;
      hostDhValue = kp.publicValue;
    }
    const r1 = hostResponse({
      hashId: m.hashId,
      key: this.#o.hostKey.transformedFor(this.#o.hostnqn),
      challenge: maybeAugment(m.hashId, this.#sessionKey, m.challenge),
      seqnum: this.#s1,
      transactionId: this.#o.transactionId,
      hostnqn: this.#o.hostnqn,
      subsysnqn: this.#o.subsysnqn,
      scC: this.#scC,
    });
    let c2: Buffer = Buffer.alloc(hl);
    const concat = this.#scC !== ScC.NOSC;
    if (this.#o.ctrlKey || concat) {
      // Concatenation needs C2 for the generated PSK even without controller authentication (S2 = 0 then).
      c2 = Buffer.from(this.#o.randomBytes(hl));
      this.#c2 = c2;
      this.#s2 = this.#o.ctrlKey ? this.#o.nextSeqnum() >>> 0 || 1 : 0;
    }
    const reply: DhchapReply = {
      type: 'reply',
      tId: this.#o.transactionId,
      cvalid: this.#o.ctrlKey !== undefined || concat,
      seqnum: this.#s2,
      response: r1,
      challenge: c2,
      dhValue: hostDhValue,
    };
    this.#setState('reply');
    return { kind: 'send', payload: encodeAuthMessage(reply) };
  }

  #onSuccess1(data: Buffer): DhchapHostStep {
    const v = this.#validateReceived(data, 'success1');
    if ('kind' in v) return v;
    const m = v as DhchapSuccess1;
    const neg = this.#neg as Negotiated;
    if (m.hl !== neg.hl) return this.#failure2(FailureExplanation.HASH_UNUSABLE, `success1 HL ${m.hl}`);
    if (this.#c2 && this.#o.ctrlKey) {
      // Stricter than Linux, which accepts RVALID=0 here and skips controller authentication.
      if (!m.response) return this.#failure2(FailureExplanation.FAILED, 'controller did not answer the host challenge');
      const expected = controllerResponse({
        hashId: neg.hashId,
        key: this.#o.ctrlKey.transformedFor(this.#o.subsysnqn),
        challenge: maybeAugment(neg.hashId, this.#sessionKey, this.#c2),
        seqnum: this.#s2,
        transactionId: this.#o.transactionId,
        hostnqn: this.#o.hostnqn,
        subsysnqn: this.#o.subsysnqn,
        scC: this.#scC,
      });
      if (!responsesEqual(expected, m.response)) {
        return this.#failure2(FailureExplanation.FAILED, 'controller response R2 mismatch');
      }
      this.#result = { hashId: neg.hashId, dhGroupId: neg.dhGroupId, bidirectional: true, transactionId: this.#o.transactionId, ...this.#concatResult(neg) };
      this.#setState('success2');
      return { kind: 'send', payload: encodeAuthMessage({ type: 'success2', tId: this.#o.transactionId }) };
    }
    this.#result = { hashId: neg.hashId, dhGroupId: neg.dhGroupId, bidirectional: false, transactionId: this.#o.transactionId, ...this.#concatResult(neg) };
    return this.#finish();
  }

  #concatResult(neg: Negotiated): { concat?: DhchapConcatResult } {
    if (this.#scC === ScC.NOSC || !this.#sessionKey || !this.#c1 || !this.#c2) return {};
    return { concat: { scC: this.#scC, ...generatedPsks(neg.hashId, this.#sessionKey, this.#c1, this.#c2) } };
  }

  #finish(): DhchapHostStep {
    this.#setState('authenticated');
    this.#wipe();
    return { kind: 'done', result: this.#result as DhchapResult };
  }

  #wipe(): void {
    this.#sessionKey?.fill(0);
    this.#sessionKey = null;
    this.#c1 = null;
    this.#c2 = null;
  }

  [INSPECT](): string {
    return `DhchapHost { state: '${this.#state}', tId: ${this.#o.transactionId} }`;
  }
}

// =====================================================================================
// Controller
// =====================================================================================

export interface DhchapControllerOptions {
  hostnqn: string;
  subsysnqn: string;
  /** nvmet `dhchap_key`: the secret the host must prove. */
  hostKey: DhchapKey;
  /** nvmet `dhchap_ctrl_key`: lets the controller answer a host challenge (bidirectional). */
  ctrlKey?: DhchapKey;
  /** Acceptable hashes in preference order (nvmet `dhchap_hash`; default SHA-256, SHA-384, SHA-512). */
  hashes?: readonly HashId[];
  /** Acceptable DH groups in preference order (nvmet `dhchap_dhgroup`; default null then ffdhe2048..8192). */
  dhGroups?: readonly DhGroupId[];
  randomBytes?: RandomBytes;
  nextSeqnum?: () => number;
  /**
   * Which SC_C this queue accepts besides NOSC (TP 8018, nvmet_auth_negotiate): 'new' on a cleartext admin queue of
   * a port that offers concatenation, 'replace' on an admin queue already inside TLS, 'none' (default) elsewhere.
   */
  concat?: 'none' | 'new' | 'replace';
  /** Refuse a Negotiate without concatenation (SC_C NOSC) with CONCAT_MISMATCH: the queue exists only for it. */
  concatRequired?: boolean;
  /** Hashes usable with concatenation (the generated PSK must suit a TLS suite); default SHA-256, SHA-384. */
  concatHashes?: readonly HashId[];
}

export type DhchapControllerState =
  /** Waiting for AUTH_Negotiate (Authentication Send). */
  | 'await-negotiate'
  /** Negotiated; the next Authentication Receive returns the Challenge. */
  | 'challenge'
  /** Waiting for DH-HMAC-CHAP_Reply (Authentication Send). */
  | 'await-reply'
  /** Host verified; the next Authentication Receive returns Success1. */
  | 'success1'
  /** Waiting for Success2 (bidirectional only). */
  | 'await-success2'
  /** The next Authentication Receive returns AUTH_Failure1, then the session is failed. */
  | 'failure1'
  | 'authenticated'
  /** Terminal: the target should tear the controller down (nvmet_ctrl_fatal_error). */
  | 'failed';

const CTRL_TRANSITIONS: Record<DhchapControllerState, readonly DhchapControllerState[]> = {
  'await-negotiate': ['challenge', 'failure1', 'failed'],
  challenge: ['await-reply', 'challenge', 'failure1', 'failed'],
  'await-reply': ['success1', 'challenge', 'failure1', 'failed'],
  success1: ['await-success2', 'authenticated', 'challenge', 'failure1', 'failed'],
  'await-success2': ['authenticated', 'challenge', 'failure1', 'failed'],
  failure1: ['failed', 'challenge', 'failure1'],
  authenticated: ['challenge', 'failure1', 'failed'],
  failed: [],
};

/** Result of an Authentication Receive: data to return (exactly AL bytes, zero-padded), or a status. */
export type DhchapReceiveResult = { kind: 'data'; payload: Buffer } | { kind: 'status'; status: number };

/** Largest AL the session pads to; beyond it the message is returned unpadded. */
const MAX_PAD = 64 * 1024;

export class DhchapController {
  #state: DhchapControllerState = 'await-negotiate';
  readonly #o: Required<Omit<DhchapControllerOptions, 'ctrlKey'>> & { ctrlKey: DhchapKey | undefined };
  #authenticated = false;
  #tId = 0;
  #scC: number = ScC.NOSC;
  #concat: DhchapConcatResult | null = null;
  #neg: Negotiated | null = null;
  #keyPair: DhKeyPair | null = null;
  #sessionKey: Buffer | null = null;
  #c1: Buffer | null = null;
  #s1 = 0;
  #c2: Buffer | null = null;
  #s2 = 0;
  #failureExplanation: number = FailureExplanation.FAILED;
  #error: DhchapAuthError | null = null;
  #result: DhchapResult | null = null;

  constructor(opts: DhchapControllerOptions) {
    this.#o = {
      hostnqn: opts.hostnqn,
      subsysnqn: opts.subsysnqn,
      hostKey: opts.hostKey,
      ctrlKey: opts.ctrlKey,
      hashes: opts.hashes ?? ALL_HASHES,
      dhGroups: opts.dhGroups ?? ALL_DH_GROUPS,
      randomBytes: opts.randomBytes ?? defaultRandomBytes,
      nextSeqnum: opts.nextSeqnum ?? defaultNextSeqnum,
      concat: opts.concat ?? 'none',
      concatRequired: opts.concatRequired ?? false,
      concatHashes: opts.concatHashes ?? [HashId.SHA256, HashId.SHA384],
    };
  }

  get state(): DhchapControllerState {
    return this.#state;
  }

  /**
   * Whether commands other than Connect/Authentication may run on this queue (nvmet
   * sq->authenticated). Stays true during a re-authentication until it fails.
   */
  get authenticated(): boolean {
    return this.#authenticated;
  }

  get error(): DhchapAuthError | null {
    return this.#error;
  }

  get result(): DhchapResult | null {
    return this.#result;
  }

  #setState(next: DhchapControllerState): void {
    if (!CTRL_TRANSITIONS[this.#state].includes(next)) {
      throw new Error(`DhchapController: illegal transition ${this.#state} -> ${next}`);
    }
    this.#state = next;
  }

  #toFailure1(explanation: number, reason: string): void {
    this.#failureExplanation = explanation;
    this.#error = new DhchapAuthError(explanation, 'controller', reason);
    this.#authenticated = false;
    this.#wipe();
    this.#setState('failure1');
  }

  /**
   * Handle the payload of an Authentication Send that passed checkAuthCmd. Never throws; the
   * command itself completes with success (nvmet reports protocol failures through the next
   * Authentication Receive, i.e. AUTH_Failure1).
   */
  handleSend(payload: Buffer): void {
    if (this.#state === 'failed') return;
    const d = decodeAuthMessage(payload);
    if (!d.ok) return this.#toFailure1(d.explanation, d.reason);
    const m = d.message;
    if (m.type === 'negotiate') return this.#onNegotiate(m);
    if (m.type === 'failure2') {
      // The host gave up (bad challenge or bad R2): nvmet marks the queue unauthenticated and
      // tears the controller down.
      this.#error = new DhchapAuthError(m.explanation, 'host', 'host sent AUTH_Failure2');
      this.#authenticated = false;
      this.#wipe();
      this.#setState('failed');
      return;
    }
    const expected = this.#state === 'await-reply' ? 'reply' : this.#state === 'await-success2' ? 'success2' : null;
    if (m.type !== expected) {
      return this.#toFailure1(FailureExplanation.INCORRECT_MESSAGE, `unexpected ${m.type} in state ${this.#state}`);
    }
    if (m.tId !== this.#tId) {
      return this.#toFailure1(FailureExplanation.INCORRECT_PAYLOAD, `transaction id ${m.tId} != ${this.#tId}`);
    }
    if (m.type === 'reply') return this.#onReply(m);
    this.#authenticated = true;
    this.#wipe();
    this.#setState('authenticated');
  }

  /** nvmet_auth_negotiate: a Negotiate (re)starts the transaction in any non-terminal state. */
  #onNegotiate(m: Extract<AuthMessage, { type: 'negotiate' }>): void {
    this.#wipe();
    this.#tId = m.tId;
    this.#neg = null;
    this.#result = null;
    this.#concat = null;
    this.#scC = m.scC;
    if (m.scC === ScC.NOSC && this.#o.concatRequired) {
      return this.#toFailure1(FailureExplanation.CONCAT_MISMATCH, 'SC_C NOSC: this cleartext queue is admitted only for secure channel concatenation (NEWTLSPSK)');
    }
    if (m.scC !== ScC.NOSC) {
      const want = this.#o.concat === 'new' ? ScC.NEWTLSPSK : this.#o.concat === 'replace' ? ScC.REPLACETLSPSK : null;
      if (want === null) return this.#toFailure1(FailureExplanation.CONCAT_MISMATCH, `SC_C ${m.scC}: secure channel concatenation is not offered on this queue`);
      if (m.scC !== want) return this.#toFailure1(FailureExplanation.CONCAT_MISMATCH, `SC_C ${m.scC}: this queue accepts only ${want === ScC.NEWTLSPSK ? 'NEWTLSPSK (cleartext admin queue)' : 'REPLACETLSPSK (admin queue inside TLS)'}`);
    }
    if (m.protocols.length !== 1) return this.#toFailure1(FailureExplanation.HASH_UNUSABLE, `napd ${m.protocols.length}`);
    const p = m.protocols[0] as (typeof m.protocols)[number];
    if (p.authId !== DHCHAP_AUTH_ID) return this.#toFailure1(FailureExplanation.INCORRECT_PAYLOAD, `auth protocol ${p.authId}`);
    const concat = m.scC !== ScC.NOSC;
    const hashId = this.#o.hashes.find((h) => p.hashIds.includes(h) && (!concat || this.#o.concatHashes.includes(h)));
    if (hashId === undefined) return this.#toFailure1(FailureExplanation.HASH_UNUSABLE, concat ? 'no common hash function usable for a TLS PSK' : 'no common hash function');
    // nvmet: "NULL DH group invalid for secure channel concatenation" (there is no session key to derive from).
    const dhGroupId = this.#o.dhGroups.find((g) => p.dhGroupIds.includes(g) && (!concat || g !== DhGroupId.NULL));
    if (dhGroupId === undefined) return this.#toFailure1(concat ? FailureExplanation.CONCAT_MISMATCH : FailureExplanation.DHGROUP_UNUSABLE, concat ? 'no common non-NULL DH group for secure channel concatenation' : 'no common DH group');
    this.#neg = { hashId, dhGroupId, hl: hashLength(hashId) };
    this.#setState('challenge');
  }

  /** nvmet_auth_reply: derive the session key, check R1, remember C2/S2. */
  #onReply(m: DhchapReply): void {
    const neg = this.#neg as Negotiated;
    if (m.response.length !== neg.hl) return this.#toFailure1(FailureExplanation.FAILED, `reply HL ${m.response.length}`);
    if (m.dhValue.length > 0) {
      if (!this.#keyPair) return this.#toFailure1(FailureExplanation.INCORRECT_PAYLOAD, 'DH value with the NULL group');
      const secret = this.#keyPair.computeSecret(m.dhValue);
      if (!secret) return this.#toFailure1(FailureExplanation.DHGROUP_UNUSABLE, 'invalid host DH value');
      this.#sessionKey = secret;
    } else if (this.#keyPair) {
      return this.#toFailure1(FailureExplanation.INCORRECT_PAYLOAD, 'missing host DH value');
    }
    const expected = hostResponse({
      hashId: neg.hashId,
      key: this.#o.hostKey.transformedFor(this.#o.hostnqn),
      challenge: maybeAugment(neg.hashId, this.#sessionKey, this.#c1 as Buffer),
      seqnum: this.#s1,
      transactionId: this.#tId,
      hostnqn: this.#o.hostnqn,
      subsysnqn: this.#o.subsysnqn,
      scC: this.#scC,
    });
    if (!responsesEqual(expected, m.response)) return this.#toFailure1(FailureExplanation.FAILED, 'host response R1 mismatch');
    if (this.#scC !== ScC.NOSC) {
      // nvmet_auth_reply: concatenation without C2 ("invalid challenge"); the PSK needs both challenges.
      if (!m.cvalid) return this.#toFailure1(FailureExplanation.FAILED, 'secure channel concatenation without a host challenge C2 (CVALID=0)');
      this.#concat = { scC: this.#scC, ...generatedPsks(neg.hashId, this.#sessionKey as Buffer, this.#c1 as Buffer, m.challenge) };
    }
    this.#s2 = m.seqnum;
    this.#c2 = m.cvalid && m.seqnum !== 0 ? m.challenge : null;
    // S2 = 0 or no C2: unidirectional, the host is authenticated now (nvmet).
    if (!this.#c2) this.#authenticated = true;
    this.#setState('success1');
  }

  /**
   * Produce the data for an Authentication Receive with allocation length `al`. A too-small AL
   * for the Challenge fails the command with Internal Error, as nvmet does; for other messages
   * with Invalid Field (nvmet fails the transfer-length check).
   */
  handleReceive(al: number): DhchapReceiveResult {
    switch (this.#state) {
      case 'challenge':
        return this.#sendChallenge(al);
      case 'success1':
        return this.#sendSuccess1(al);
      case 'failure1':
        return this.#sendFailure1(al);
      default:
        // nvmet "unhandled step": answer with Failure1 and give up.
        if (this.#state === 'failed') return { kind: 'status', status: Status.CMD_SEQ_ERROR | DNR };
        this.#toFailure1(FailureExplanation.FAILED, `Authentication Receive in state ${this.#state}`);
        return this.#sendFailure1(al);
    }
  }

  #pad(msg: Buffer, al: number): DhchapReceiveResult {
    if (al < msg.length) return { kind: 'status', status: Status.INVALID_FIELD | DNR };
    if (al === msg.length || al > MAX_PAD) return { kind: 'data', payload: msg };
    const out = Buffer.alloc(al);
    msg.copy(out);
    return { kind: 'data', payload: out };
  }

  #sendChallenge(al: number): DhchapReceiveResult {
    const neg = this.#neg as Negotiated;
    const dhLen = neg.dhGroupId === DhGroupId.NULL ? 0 : dhValueLength(neg.dhGroupId as FfdheGroupId);
    if (al < 16 + neg.hl + dhLen) return { kind: 'status', status: Status.INTERNAL };
    this.#wipe();
    this.#s1 = this.#o.nextSeqnum() >>> 0;
    this.#c1 = Buffer.from(this.#o.randomBytes(neg.hl));
    let dhValue: Buffer = Buffer.alloc(0);
    if (neg.dhGroupId !== DhGroupId.NULL) {
      this.#keyPair = new DhKeyPair(neg.dhGroupId as FfdheGroupId, this.#o.randomBytes);
      dhValue = this.#keyPair.publicValue;
    }
    const msg = encodeAuthMessage({
      type: 'challenge',
      tId: this.#tId,
      hashId: neg.hashId,
      dhGroupId: neg.dhGroupId,
      seqnum: this.#s1,
      challenge: this.#c1,
      dhValue,
    });
    this.#setState('await-reply');
    return this.#pad(msg, al);
  }

  #sendSuccess1(al: number): DhchapReceiveResult {
    const neg = this.#neg as Negotiated;
    let r2: Buffer | null = null;
    if (this.#c2) {
      if (!this.#o.ctrlKey) {
        // nvmet_auth_success1: the host asked for bidirectional authentication we cannot give.
        this.#toFailure1(FailureExplanation.FAILED, 'host requested bidirectional authentication but no controller key is set');
        return this.#sendFailure1(al);
      }
      r2 = controllerResponse({
        hashId: neg.hashId,
        key: this.#o.ctrlKey.transformedFor(this.#o.subsysnqn),
        challenge: maybeAugment(neg.hashId, this.#sessionKey, this.#c2),
        seqnum: this.#s2,
        transactionId: this.#tId,
        hostnqn: this.#o.hostnqn,
        subsysnqn: this.#o.subsysnqn,
        scC: this.#scC,
      });
    }
    const res = this.#pad(encodeAuthMessage({ type: 'success1', tId: this.#tId, hl: neg.hl, response: r2 }), al);
    if (res.kind === 'status') return res;
    this.#result = { hashId: neg.hashId, dhGroupId: neg.dhGroupId, bidirectional: r2 !== null, transactionId: this.#tId, ...(this.#concat ? { concat: this.#concat } : {}) };
    this.#concat = null;
    if (r2) {
      this.#setState('await-success2');
    } else {
      this.#wipe();
      this.#setState('authenticated');
    }
    return res;
  }

  #sendFailure1(al: number): DhchapReceiveResult {
    const res = this.#pad(encodeAuthMessage(failureMessage('failure1', this.#tId, this.#failureExplanation)), al);
    if (res.kind === 'data') this.#setState('failed');
    return res;
  }

  #wipe(): void {
    this.#sessionKey?.fill(0);
    this.#sessionKey = null;
    this.#keyPair = null;
    this.#c1 = null;
    this.#c2 = null;
  }

  [INSPECT](): string {
    return `DhchapController { state: '${this.#state}', authenticated: ${this.#authenticated} }`;
  }
}
