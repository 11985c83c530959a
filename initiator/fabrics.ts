// Fabrics Connect of one queue and the in-band authentication that may follow it (NVMe-oF 1.1 §3.3; NVMe Base 2.0
// §8.13; Linux drivers/nvme/host/fabrics.c nvmf_connect_admin_queue / nvmf_connect_io_queue). The connector owns
// the controller's DH-HMAC-CHAP transaction counter and what the queues' authentications agreed on.
import type { Logger } from 'pino';
import { decodeConnectResult } from '../protocol/index.js';
import { authRequested, authenticateQueue, describeAuth } from './auth.js';
import { connectCmd, connectData } from './fabrics-cmds.js';
import type { ResolvedOptions } from './options.js';
import type { QueuePair } from './queue-pair.js';

/** What one authentication agreed on, as logged and reported. */
export type AuthInfo = ReturnType<typeof describeAuth>;

export class FabricsConnector {
  readonly #opts: ResolvedOptions;
  readonly #log: Logger;
  /** DH-HMAC-CHAP T_ID counter shared by all queues (Linux ctrl->transaction). */
  #authTid = 0;
  #authenticatedQueues = 0;
  #authInfo: AuthInfo | undefined;
  /** The generated PSK of the admin queue's last concatenated transaction, until taken. */
  #concat: { hashId: number; psk: Buffer } | undefined;

  constructor(opts: ResolvedOptions, log: Logger) {
    this.#opts = opts;
    this.#log = log;
  }

  /** Queues that completed DH-HMAC-CHAP in this controller's lifetime (reconnects included). */
  get authenticatedQueues(): number {
    return this.#authenticatedQueues;
  }

  /** What the admin queue's last DH-HMAC-CHAP transaction agreed on (undefined: not authenticated). */
  get authInfo(): AuthInfo | undefined {
    return this.#authInfo;
  }

  /**
   * Connect `qp` with in-capsule Connect data (always in-capsule, as Linux sends it), authenticate it when the
   * controller asks (ATR), mark it live and return the controller ID.
   */
  async connect(qp: QueuePair, sqsize: number, kato: number, cntlid: number, concat?: 'new' | 'replace'): Promise<number> {
    const o = this.#opts;
    const c = await qp.submit({
      sqe: connectCmd({ qid: qp.qid, sqsize, kato, disableSqflow: o.disableSqflow }),
      h2c: connectData({ hostid: o.hostid, cntlid, subnqn: o.nqn, hostnqn: o.hostnqn }),
      forceInCapsule: true,
      timeoutMs: o.adminTimeoutMs,
    });
    // ATR: authenticate this queue before anything else; ASCR is refused inside authRequested.
    if (authRequested(qp.qid, c.dw0, o.hostKey !== undefined, concat !== undefined)) await this.#authenticate(qp, qp.qid === 0 ? concat : undefined);
    qp.setLive();
    return decodeConnectResult(c.dw0).cntlid;
  }

  /**
   * DH-HMAC-CHAP parameters for a queue an io worker connects: the secrets and the next T_ID of this controller's one
   * counter (Linux ctrl->transaction); undefined without a host key (the worker then refuses an ATR like this side).
   */
  remoteAuth(): { hostSecret: string; ctrlSecret: string | undefined; transactionId: number } | undefined {
    const o = this.#opts;
    if (o.hostKey === undefined) return undefined;
    return { hostSecret: o.hostKey.format(), ctrlSecret: o.ctrlKey?.format(), transactionId: this.#authTid++ & 0xffff };
  }

  /** An io worker's queue completed DH-HMAC-CHAP: count and log it as for a queue on this thread. */
  remoteAuthenticated(qid: number, info: AuthInfo): void {
    this.#authenticatedQueues++;
    this.#log.info({ qid, ...info, worker: true }, info.bidirectional ? 'authenticated; controller authenticated' : 'authenticated');
  }

  /**
   * The generated PSK (spec session key form, KS = H(g^xy)) of the last concatenated admin-queue transaction, once;
   * the caller derives the TLS identity from it and wipes it.
   */
  takeGeneratedPsk(): { hashId: number; psk: Buffer } | undefined {
    const c = this.#concat;
    this.#concat = undefined;
    return c;
  }

  async #authenticate(qp: QueuePair, concat?: 'new' | 'replace'): Promise<void> {
    const o = this.#opts;
    const r = await authenticateQueue(qp, {
      hostnqn: o.hostnqn,
      subsysnqn: o.nqn,
      hostKey: o.hostKey,
      ctrlKey: o.ctrlKey,
      transactionId: this.#authTid++ & 0xffff,
      timeoutMs: o.adminTimeoutMs,
      ...(concat !== undefined ? { concat } : {}),
    });
    if (r.concat !== undefined) {
      this.#concat?.psk.fill(0);
      this.#concat = { hashId: r.hashId, psk: r.concat.generatedPsk };
    }
    this.#authenticatedQueues++;
    const info = describeAuth(r);
    if (qp.qid === 0) this.#authInfo = info;
    this.#log.info({ qid: qp.qid, ...info }, r.bidirectional ? 'authenticated; controller authenticated' : 'authenticated');
  }
}
