// Asynchronous events on the host (NVMe Base 2.0 §5.2 Asynchronous Event Request, enabled by Set Features FID 0Bh;
// Linux drivers/nvme/host/core.c nvme_enable_aen / nvme_async_event_work / nvme_handle_aen_notice):
// one AER kept outstanding on the admin queue; namespace-change notices rescan, ANA-change notices re-read ANA.
import { Buffer } from 'node:buffer';
import type { Logger } from 'pino';
import { AdminOpcode, AenConfig, AenNotice, AenType, CHANGED_NS_LIST_SIZE, FeatureId, LogPageId, NvmeStatusError, decodeAenResult, encodeGetLogPageCmd, encodeSetFeaturesCmd, encodeSqe, type AnaStateName, type IdentifyController, NSID_BROADCAST } from '../protocol/index.js';
import type { AdminChannel } from './admin.js';
import type { NamespaceScanner } from './scan.js';

/** An asynchronous event as delivered to listeners of 'aen'. */
export interface AsyncEvent {
  type: number;
  info: number;
  lid: number;
  dw0: number;
}

/** Where the handler reports what it saw (the controller's events). */
export interface AenSink {
  aen(ev: AsyncEvent): void;
  namespacesChanged(nsids: number[]): void;
  anaChange(states: Map<number, AnaStateName>): void;
}

/** Linux NVME_AQ_BLK_MQ_DEPTH: the AER uses CID 31, outside the admin tag set. */
export const AER_CID = 31;
/** The AER has no timeout of its own (Linux leaves it outstanding); a day stands in for "never". */
const AER_TIMEOUT_MS = 86_400_000;
/** The events this host asks for (when the controller supports them, OAES). */
const AEN_WANTED = AenConfig.NS_ATTR | AenConfig.FW_ACT | AenConfig.ANA | AenConfig.DISC;

export class AenHandler {
  readonly #admin: AdminChannel;
  readonly #scanner: NamespaceScanner;
  readonly #sink: AenSink;
  readonly #log: Logger;

  constructor(admin: AdminChannel, scanner: NamespaceScanner, sink: AenSink, log: Logger) {
    this.#admin = admin;
    this.#scanner = scanner;
    this.#sink = sink;
    this.#log = log;
  }

  /** Enable the supported events (Set Features 0Bh) and post the AER; called on every (re)connect. */
  async configure(id: IdentifyController): Promise<void> {
    const mask = (id.oaes & AEN_WANTED) >>> 0;
    if (mask !== 0) await this.#admin.adminCmd({ sqe: encodeSetFeaturesCmd({ cid: 0, fid: FeatureId.ASYNC_EVENT, cdw11: mask }) });
    this.#post();
  }

  #post(): void {
    const a = this.#admin.adminQueue;
    if (a === undefined || a.state !== 'live') return;
    a.submit({ sqe: encodeSqe({ opcode: AdminOpcode.ASYNC_EVENT, cid: 0 }), timeoutMs: AER_TIMEOUT_MS, reservedCid: AER_CID }).then(
      (c) => {
        this.#post();
        void this.#handle(c.dw0);
      },
      (e: unknown) => {
        if (e instanceof NvmeStatusError) this.#log.warn({ err: e }, 'AER failed');
      },
    );
  }

  async #handle(dw0: number): Promise<void> {
    const r = decodeAenResult(dw0);
    this.#sink.aen({ ...r, dw0 });
    if (r.type !== AenType.NOTICE) return;
    try {
      if (r.info === AenNotice.NS_CHANGED) {
        // Reading the Changed Namespace List clears the event; the rescan finds what changed.
        const log = Buffer.alloc(CHANGED_NS_LIST_SIZE);
        await this.#admin.adminCmd({ sqe: encodeGetLogPageCmd({ cid: 0, lid: LogPageId.CHANGED_NS, length: CHANGED_NS_LIST_SIZE, nsid: NSID_BROADCAST }), c2h: log });
        this.#sink.namespacesChanged(await this.#scanner.scan());
      } else if (r.info === AenNotice.ANA) {
        await this.#scanner.refreshAna();
        this.#sink.anaChange(new Map(this.#scanner.anaStates));
      }
    } catch (e) {
      this.#log.warn({ err: e }, 'AEN handling failed');
    }
  }
}
