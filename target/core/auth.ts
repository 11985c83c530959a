// In-band authentication on the target (NVMe Base 2.0 §8.13, TP 8006): the per-host key registry (nvmet
// /sys/kernel/config/nvmet/hosts/<nqn>/dhchap_*) and one DH-HMAC-CHAP session per queue (nvmet_sq dhchap_*),
// modelled on Linux drivers/nvme/target/{auth.c,fabrics-cmd-auth.c}. Key material never reaches a log line:
// DhchapKey prints itself redacted, and only hash/group names and explanation codes are logged here.
import type { Logger } from 'pino';
import type { HostLogLimiter } from './host-log.js';
import {
  DhchapController,
  DH_GROUP_NAMES,
  DhGroupId,
  HASH_INFO,
  HashId,
  failureExplanationName,
  type DhchapKey,
  type DhchapReceiveResult,
  type DhchapResult,
} from '../../protocol/auth/index.js';
import { setLongTimeout, type LongTimeout } from '../../protocol/index.js';

/** nvmet `dhchap_hash` / `dhchap_dhgroup` spellings, as written to configfs. */
export const HASH_NAMES: Readonly<Record<string, HashId>> = { 'hmac(sha256)': HashId.SHA256, 'hmac(sha384)': HashId.SHA384, 'hmac(sha512)': HashId.SHA512 };
export const DH_GROUP_BY_NAME: Readonly<Record<string, DhGroupId>> = {
  null: DhGroupId.NULL,
  ffdhe2048: DhGroupId.FFDHE2048,
  ffdhe3072: DhGroupId.FFDHE3072,
  ffdhe4096: DhGroupId.FFDHE4096,
  ffdhe6144: DhGroupId.FFDHE6144,
  ffdhe8192: DhGroupId.FFDHE8192,
};

/** What the target knows about one host's authentication (parsed; never printed in clear). */
export interface HostAuth {
  /** The secret the host proves (nvmet dhchap_key). Its presence makes authentication mandatory. */
  hostKey: DhchapKey;
  /** The secret the controller proves when the host asks for bidirectional authentication (dhchap_ctrl_key). */
  ctrlKey?: DhchapKey;
  /** Acceptable hashes, preference order (nvmet dhchap_hash); default SHA-256, SHA-384, SHA-512. */
  hashes?: readonly HashId[];
  /** Acceptable DH groups, preference order (nvmet dhchap_dhgroup); default null, ffdhe2048..8192. */
  dhGroups?: readonly DhGroupId[];
}

/** Redacted view for listings and logs. */
export interface HostAuthView {
  hostnqn: string;
  hostKey: '<redacted>';
  ctrlKey?: '<redacted>';
  hashes?: string[];
  dhGroups?: string[];
}

/** listControllers() view of one queue's authentication (no key material). */
export interface QueueAuthView {
  state: string;
  authenticated: boolean;
  hash?: string;
  dhgroup?: string;
  bidirectional?: boolean;
}

/** Counters for tests and the management API (secrets never included). */
export interface AuthStats {
  /** Queues that completed a DH-HMAC-CHAP transaction. */
  succeeded: number;
  /** Transactions that ended in AUTH_Failure1/Failure2 (each tears its controller down). */
  failed: number;
  /** Transactions reset because the host went quiet for KATO (or 120 s). */
  expired: number;
}

/** hostnqn → keys. The Connect path asks it whether a queue must authenticate. */
export class AuthRegistry {
  readonly #hosts = new Map<string, HostAuth>();
  readonly stats: AuthStats = { succeeded: 0, failed: 0, expired: 0 };

  set(hostnqn: string, auth: HostAuth): void {
    this.#hosts.set(hostnqn, { ...auth });
  }

  delete(hostnqn: string): boolean {
    return this.#hosts.delete(hostnqn);
  }

  get(hostnqn: string): HostAuth | undefined {
    return this.#hosts.get(hostnqn);
  }

  list(): HostAuthView[] {
    return [...this.#hosts].map(([hostnqn, a]) => redactHostAuth(hostnqn, a));
  }
}

export function redactHostAuth(hostnqn: string, a: HostAuth): HostAuthView {
  const v: HostAuthView = { hostnqn, hostKey: '<redacted>' };
  if (a.ctrlKey !== undefined) v.ctrlKey = '<redacted>';
  if (a.hashes !== undefined) v.hashes = a.hashes.map((h) => `hmac(${HASH_INFO[h].name})`);
  if (a.dhGroups !== undefined) v.dhGroups = a.dhGroups.map((g) => DH_GROUP_NAMES[g]);
  return v;
}

/** AUTH_Negotiate: auth_type 00h (common message), auth_id 00h (NVMe Base 2.0 §8.13.5.1). */
function isNegotiate(payload: Buffer): boolean {
  return payload.length >= 2 && payload[0] === 0x00 && payload[1] === 0x00;
}

/** nvmet resets a transaction the host leaves idle for KATO, or 120 s when KATO is 0 (nvmet_execute_auth_send). */
export const AUTH_IDLE_DEFAULT_MS = 120_000;

export interface QueueAuthOptions {
  hostnqn: string;
  subsysnqn: string;
  auth: HostAuth;
  /** Controller KATO in ms (0 = none: the 120 s default applies). */
  katoMs: number;
  stats: AuthStats;
  logger: Logger;
  /** The controller's limit on host-caused log lines (host-log.ts). */
  hostLog: HostLogLimiter;
  qid: number;
  cntlid: number;
  /** Secure channel concatenation this queue accepts (TP 8018): see DhchapControllerOptions.concat. */
  concat?: 'none' | 'new' | 'replace';
  /** Only a NEWTLSPSK transaction may run (cleartext admin queue of a TLS 'required' port). */
  concatRequired?: boolean;
  /** The queue starts authenticated (a TLS session on a generated PSK: nvmet sets no ATR) and may re-authenticate. */
  preAuthenticated?: boolean;
}

/**
 * Node 20 does TLS 1.3 external PSKs with SHA-256 suites only (protocol/tls SHA384_UNSUPPORTED), so a concatenated
 * transaction picks SHA-256: the generated PSK's hash is the TLS suite's.
 */
const CONCAT_HASHES: readonly HashId[] = [HashId.SHA256];

/**
 * The authentication state of one queue (nvmet_sq: dhchap_step/tid/c1/c2/s1/s2 and `authenticated`).
 * Until `authenticated` is true every command on the queue except Connect and Authentication Send/Receive
 * fails with AUTH_REQUIRED (nvmet_check_auth_status).
 */
export class QueueAuth {
  #session: DhchapController;
  /** Set when an idle transaction was reset after the queue had authenticated (nvmet keeps sq->authenticated). */
  #carried = false;
  #timer: LongTimeout | undefined;
  #reported = false;
  readonly #o: QueueAuthOptions;

  /** The keys this queue authenticates with (the registry entry at Connect or at the last Negotiate). */
  get hostAuth(): HostAuth {
    return this.#o.auth;
  }

  constructor(o: QueueAuthOptions) {
    this.#o = o;
    this.#session = this.#newSession();
    if (o.preAuthenticated === true) this.#carried = true;
  }

  /** The result whose generated PSK was handed out (a re-authentication's new result is handed out again). */
  #concatTaken: DhchapResult | null = null;

  /** The generated PSK of a finished concatenated transaction, once (the caller installs it and wipes it). */
  takeConcat(): NonNullable<DhchapResult['concat']> | undefined {
    const r = this.#session.state === 'authenticated' ? this.#session.result : null;
    if (r === null || r.concat === undefined || this.#concatTaken === r) return undefined;
    this.#concatTaken = r;
    return r.concat;
  }

  #newSession(): DhchapController {
    const a = this.#o.auth;
    return new DhchapController({
      hostnqn: this.#o.hostnqn,
      subsysnqn: this.#o.subsysnqn,
      hostKey: a.hostKey,
      ...(a.ctrlKey !== undefined ? { ctrlKey: a.ctrlKey } : {}),
      ...(a.hashes !== undefined ? { hashes: a.hashes } : {}),
      ...(a.dhGroups !== undefined ? { dhGroups: a.dhGroups } : {}),
      ...(this.#o.concat !== undefined ? { concat: this.#o.concat, concatHashes: CONCAT_HASHES } : {}),
      ...(this.#o.concatRequired === true ? { concatRequired: true } : {}),
    });
  }

  get authenticated(): boolean {
    const s = this.#session;
    if (s.authenticated) return true;
    return this.#carried && s.state !== 'failure1' && s.state !== 'failed';
  }

  get state(): DhchapController['state'] {
    return this.#session.state;
  }

  /** The session has failed: the controller must be torn down (nvmet_ctrl_fatal_error). */
  get failed(): boolean {
    return this.#session.state === 'failed';
  }

  get result(): DhchapResult | null {
    return this.#session.result;
  }

  /**
   * Authentication Send data (completes with success; protocol failures surface on the next Receive). `current` is
   * the host's entry in the registry now: a new AUTH_Negotiate picks up rotated keys, as nvmet re-runs
   * nvmet_setup_auth on every Negotiate.
   */
  send(payload: Buffer, current?: HostAuth): void {
    if (current !== undefined && current !== this.#o.auth && isNegotiate(payload) && !this.failed) {
      this.#o.auth = current;
      this.#carried = this.authenticated;
      this.#session = this.#newSession();
      this.#reported = false;
    }
    this.#session.handleSend(payload);
    this.#afterStep();
  }

  /** Authentication Receive: AL bytes of message, or a status for the command. */
  receive(al: number): DhchapReceiveResult {
    const r = this.#session.handleReceive(al);
    this.#afterStep();
    return r;
  }

  #afterStep(): void {
    const s = this.#session;
    const log = this.#o.logger;
    if (s.state === 'authenticated' || s.state === 'failed') {
      this.#clearTimer();
      if (this.#reported) return;
      this.#reported = true;
      if (s.state === 'authenticated') {
        const r = s.result;
        this.#o.stats.succeeded++;
        log.info(
          { hostnqn: this.#o.hostnqn, cntlid: this.#o.cntlid, qid: this.#o.qid, hash: r ? HASH_INFO[r.hashId].name : undefined, dhgroup: r ? DH_GROUP_NAMES[r.dhGroupId] : undefined, bidirectional: r?.bidirectional },
          'host authenticated',
        );
      } else {
        const e = s.error;
        this.#o.stats.failed++;
        if (this.#o.hostLog.allow('auth')) log.warn(
          { hostnqn: this.#o.hostnqn, cntlid: this.#o.cntlid, qid: this.#o.qid, explanation: e ? failureExplanationName(e.explanation) : undefined, detectedBy: e?.detectedBy, reason: e?.reason },
          'authentication failed',
        );
      }
      return;
    }
    // A transaction is in progress (or re-authentication restarted it): arm the idle reset.
    if (s.state !== 'await-negotiate') this.#reported = false;
    this.#armTimer();
  }

  #armTimer(): void {
    this.#clearTimer();
    const ms = this.#o.katoMs > 0 ? this.#o.katoMs : AUTH_IDLE_DEFAULT_MS;
    // KATO is a 32-bit ms count from the host: past setTimeout's 2^31−1 ms, so a LongTimeout.
    this.#timer = setLongTimeout(() => this.#expire(), ms, 'KATO').unref();
  }

  #clearTimer(): void {
    this.#timer?.clear();
    this.#timer = undefined;
  }

  /** nvmet_auth_expired_work: forget the transaction; a new AUTH_Negotiate starts over. */
  #expire(): void {
    this.#timer = undefined;
    if (this.failed) return;
    this.#carried = this.authenticated;
    this.#o.stats.expired++;
    if (this.#o.hostLog.allow('auth')) this.#o.logger.warn({ cntlid: this.#o.cntlid, qid: this.#o.qid, state: this.#session.state }, 'authentication transaction expired, resetting');
    this.#session = this.#newSession();
    this.#reported = false;
  }

  view(): QueueAuthView {
    const v: QueueAuthView = { state: this.state, authenticated: this.authenticated };
    const r = this.result;
    if (r !== null) {
      v.hash = HASH_INFO[r.hashId].name;
      v.dhgroup = DH_GROUP_NAMES[r.dhGroupId];
      v.bidirectional = r.bidirectional;
    }
    return v;
  }

  dispose(): void {
    this.#clearTimer();
  }
}
