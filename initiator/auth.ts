// In-band authentication on the host (NVMe Base 2.0 §8.13, DH-HMAC-CHAP): drive one DhchapHost per queue over
// Authentication Send/Receive right after Fabrics Connect, as Linux nvmf_connect_{admin,io}_queue → nvme_auth_negotiate
// → nvme_queue_auth_work does. Secrets live in DhchapKey objects that print themselves redacted.
import { Buffer } from 'node:buffer';
import {
  AuthFctype,
  CONNECT_AUTHREQ_ASCR,
  CONNECT_AUTHREQ_ATR,
  DH_GROUP_NAMES,
  DhchapAuthError,
  DhchapHost,
  DhchapKeyError,
  HASH_INFO,
  HashId,
  LINUX_AUTH_RECEIVE_LENGTH,
  encodeAuthCmdInto,
  parseDhchapSecret,
  type DhchapKey,
  type DhchapResult,
} from '../protocol/auth/index.js';
import { SQE_SIZE } from '../protocol/index.js';
import { InvalidArgumentError, NvmeTcpError } from './errors.js';
import type { QueuePair } from './queue-pair.js';

export { DhchapAuthError };

/**
 * The controller set ATR in the Connect response but no `dhchap_secret` was configured (Linux: -ENOKEY,
 * "qid N: authentication setup failed"), or it asked for secure channel concatenation (ASCR), which this host
 * does not implement (Linux: -EOPNOTSUPP). Permanent: reconnecting cannot help.
 */
export class AuthenticationRequiredError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_AUTH_REQUIRED';
  constructor(
    readonly qid: number,
    readonly reason: 'no-key' | 'secure-concatenation',
  ) {
    super(
      reason === 'no-key'
        ? `qid ${qid}: controller requires DH-HMAC-CHAP authentication but no dhchap_secret is configured`
        : `qid ${qid}: controller requires secure channel concatenation, which is not supported`,
    );
  }
}

/**
 * Secure channel concatenation was asked for (concat) but the controller did not set ATR on the admin Connect, so no
 * DH-HMAC-CHAP transaction ran and no TLS PSK was generated (Linux: "no PSK generated", -ENOKEY). Permanent.
 */
export class ConcatNotOfferedError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_CONCAT_NOT_OFFERED';
  constructor() {
    super('qid 0: secure channel concatenation: the controller did not ask for DH-HMAC-CHAP (no ATR), so no TLS PSK was generated; give the target a DH-HMAC-CHAP key for this host');
  }
}

/** Authentication failures are never retried (Linux treats them as non-retryable connect errors). */
export function isAuthFailure(e: unknown): boolean {
  return e instanceof DhchapAuthError || e instanceof AuthenticationRequiredError || e instanceof ConcatNotOfferedError;
}

/** Parse a `--dhchap-secret` / `--dhchap-ctrl-secret` value; the error names the option, never the secret. */
export function parseSecretOption(field: string, v: unknown): DhchapKey | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.length === 0) throw new InvalidArgumentError(field, 'must be a DHHC-1 secret string');
  try {
    return parseDhchapSecret(v);
  } catch (e) {
    if (e instanceof DhchapKeyError) throw new InvalidArgumentError(field, e.message);
    throw e;
  }
}

export interface QueueAuthParams {
  hostnqn: string;
  subsysnqn: string;
  hostKey: DhchapKey | undefined;
  ctrlKey: DhchapKey | undefined;
  /** T_ID for this transaction (Linux: ctrl->transaction++, one counter per controller). */
  transactionId: number;
  timeoutMs: number;
  /** Secure channel concatenation on this transaction (admin queue only): NEWTLSPSK or REPLACETLSPSK. */
  concat?: 'new' | 'replace';
}

/** What the Connect response asks for: nothing, or authentication on this queue. Throws for what we cannot do. */
export function authRequested(qid: number, dw0: number, hasKey: boolean, concat = false): boolean {
  // Linux nvmf_connect_admin_queue: ASCR is fine when the host asked for concatenation itself.
  if ((dw0 & CONNECT_AUTHREQ_ASCR) !== 0 && !(concat && qid === 0)) throw new AuthenticationRequiredError(qid, 'secure-concatenation');
  if ((dw0 & CONNECT_AUTHREQ_ATR) === 0) return false;
  if (!hasKey) throw new AuthenticationRequiredError(qid, 'no-key');
  return true;
}

/**
 * Run one DH-HMAC-CHAP transaction on a connected queue: Negotiate, Challenge, Reply, Success1 [, Success2].
 * Resolves with what was agreed; rejects with DhchapAuthError (carrying the failure explanation and which side
 * detected it) when either side refuses, including when an authentication command itself fails.
 */
export async function authenticateQueue(qp: QueuePair, p: QueueAuthParams): Promise<DhchapResult> {
  if (p.hostKey === undefined) throw new AuthenticationRequiredError(qp.qid, 'no-key');
  const host = new DhchapHost({
    hostnqn: p.hostnqn,
    subsysnqn: p.subsysnqn,
    hostKey: p.hostKey,
    ...(p.ctrlKey !== undefined ? { ctrlKey: p.ctrlKey } : {}),
    transactionId: p.transactionId,
    receiveLength: LINUX_AUTH_RECEIVE_LENGTH,
    // Concatenation: the generated PSK's hash is the TLS suite's, and Node 20 has SHA-256 suites only.
    ...(p.concat !== undefined ? { concat: p.concat, hashes: [HashId.SHA256] } : {}),
  });
  let step = host.next();
  for (;;) {
    switch (step.kind) {
      case 'done':
        return step.result;
      case 'failed':
        throw step.error;
      case 'send': {
        // Linux nvme_auth_submit: data in-capsule, TL = payload length.
        const sqe = authSqe(AuthFctype.SEND, step.payload.length);
        try {
          await qp.submit({ sqe, h2c: step.payload, forceInCapsule: true, timeoutMs: p.timeoutMs });
        } catch (e) {
          throw abort(host, 'Authentication Send', e);
        }
        step = host.next();
        break;
      }
      case 'receive': {
        const buf = Buffer.alloc(step.allocationLength);
        const sqe = authSqe(AuthFctype.RECEIVE, step.allocationLength);
        try {
          await qp.submit({ sqe, c2h: buf, timeoutMs: p.timeoutMs });
        } catch (e) {
          throw abort(host, 'Authentication Receive', e);
        }
        step = host.next(buf);
        break;
      }
    }
  }
}

/** SQE for Authentication Send/Receive (encodeAuthCmdInto sets PSDT to SGL; the queue pair fills the SGL). */
function authSqe(fctype: AuthFctype, length: number): Buffer {
  return encodeAuthCmdInto(Buffer.alloc(SQE_SIZE), { fctype, cid: 0, length });
}

function abort(host: DhchapHost, what: string, e: unknown): DhchapAuthError {
  const msg = e instanceof Error ? e.message : String(e);
  const err = host.abort(`${what} failed: ${msg}`);
  if (err.cause === undefined) Object.defineProperty(err, 'cause', { value: e, enumerable: false });
  return err;
}

/** One log-friendly line, like Linux's "qid 0: authenticated with hash hmac(sha256) dhgroup ffdhe2048". */
export function describeAuth(r: DhchapResult): { hash: string; dhgroup: string; bidirectional: boolean } {
  return { hash: `hmac(${HASH_INFO[r.hashId].name})`, dhgroup: DH_GROUP_NAMES[r.dhGroupId], bidirectional: r.bidirectional };
}
