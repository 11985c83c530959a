// Asymmetric Namespace Access on the host (NVMe Base 2.0 §8.1; Linux drivers/nvme/host/multipath.c nvme_read_ana_log /
// nvme_update_ana_state): the ANA log read on connect, on ANA change notices and on path errors, and each
// namespace's state taken from its ANA group.
import { Buffer } from 'node:buffer';
import { LogPageId, anaLogMaxSize, anaStateName, decodeAnaLog, encodeGetLogPageCmd, type AnaStateName, type IdentifyController, Cmic } from '../protocol/index.js';
import type { AdminChannel } from './admin.js';
import type { Namespace } from './namespace.js';

export class AnaTracker {
  readonly #admin: AdminChannel;
  /** Bytes of the ANA log to read; 0 when the controller does not report ANA. */
  #logSize = 0;
  #states: ReadonlyMap<number, AnaStateName> = new Map();

  constructor(admin: AdminChannel) {
    this.#admin = admin;
  }

  /** Take the log size from a fresh Identify Controller (the whole log, bounded by one command's transfer). */
  configure(id: IdentifyController, maxTransferBytes: number): void {
    this.#logSize = (id.cmic & Cmic.ANA_REPORTING) !== 0 ? Math.min(anaLogMaxSize(id.nanagrpid, id.mnan), maxTransferBytes) : 0;
  }

  get reporting(): boolean {
    return this.#logSize > 0;
  }

  /** ANA state by group id as last read (empty when the controller does not report ANA). */
  get states(): ReadonlyMap<number, AnaStateName> {
    return this.#states;
  }

  /** Re-read the ANA log and set every namespace's state; a group the log omits reads as optimized. */
  async refresh(namespaces: Iterable<Namespace>): Promise<void> {
    if (this.#logSize === 0) return;
    const buf = Buffer.alloc(this.#logSize);
    await this.#admin.adminCmd({ sqe: encodeGetLogPageCmd({ cid: 0, lid: LogPageId.ANA, length: this.#logSize }), c2h: buf });
    const byGroup = new Map<number, AnaStateName>();
    for (const g of decodeAnaLog(buf).groups) byGroup.set(g.grpid, anaStateName(g.state));
    this.#states = byGroup;
    for (const ns of namespaces) ns.anaState = byGroup.get(ns.info.anagrpid) ?? 'optimized';
  }
}
