// Namespace scan on the host (Linux drivers/nvme/host/core.c nvme_scan_work / nvme_scan_ns_list / nvme_identify_ns):
// the active NSID list (CNS 2), Identify Namespace (CNS 0) and the descriptor list (CNS 3) per NSID. The scanner
// owns the controller's namespaces; their ANA state comes from the AnaTracker.
import { Buffer } from 'node:buffer';
import { ACTIVE_NS_LIST_MAX, Cns, IDENTIFY_DATA_SIZE, NidType, NvmeStatusError, decodeActiveNsList, decodeIdentifyNamespace, decodeNsDescList, encodeIdentifyCmd, flbasIndex, formatUuid, type AnaStateName, Nmic, Nsattr } from '../protocol/index.js';
import type { AdminChannel } from './admin.js';
import { AnaTracker } from './ana.js';
import { Namespace, type IoExecutor, type NamespaceInfo } from './namespace.js';

function hexOrEmpty(b: Buffer): string {
  return b.every((x) => x === 0) ? '' : b.toString('hex');
}

export class NamespaceScanner {
  readonly #admin: AdminChannel;
  readonly #exec: IoExecutor;
  readonly #ana: AnaTracker;
  readonly #namespaces = new Map<number, Namespace>();

  constructor(admin: AdminChannel, exec: IoExecutor) {
    this.#admin = admin;
    this.#exec = exec;
    this.#ana = new AnaTracker(admin);
  }

  get ana(): AnaTracker {
    return this.#ana;
  }

  /** Active namespaces in NSID order. */
  get list(): Namespace[] {
    return [...this.#namespaces.values()].sort((a, b) => a.nsid - b.nsid);
  }

  get(nsid: number): Namespace | undefined {
    return this.#namespaces.get(nsid);
  }

  clear(): void {
    this.#namespaces.clear();
  }

  /** Re-read the ANA log for every namespace (no-op when the controller does not report ANA). */
  refreshAna(): Promise<void> {
    return this.#ana.refresh(this.#namespaces.values());
  }

  get anaStates(): ReadonlyMap<number, AnaStateName> {
    return this.#ana.states;
  }

  /** Rescan: add new namespaces, update resized ones, drop vanished ones; returns the NSIDs that changed, ascending. */
  async scan(): Promise<number[]> {
    const changed: number[] = [];
    const seen = new Set<number>();
    for (const nsid of await this.#activeNsids()) {
      const info = await this.#identifyNs(nsid);
      if (info === undefined) continue;
      seen.add(nsid);
      if (this.#upsert(info)) changed.push(nsid);
    }
    for (const nsid of [...this.#namespaces.keys()]) {
      if (!seen.has(nsid)) {
        this.#namespaces.delete(nsid);
        changed.push(nsid);
      }
    }
    if (this.#ana.reporting) await this.refreshAna();
    return changed.sort((a, b) => a - b);
  }

  /** Add or update one namespace; true when it is new or its geometry changed. */
  #upsert(info: NamespaceInfo): boolean {
    const old = this.#namespaces.get(info.nsid);
    if (old === undefined) {
      this.#namespaces.set(info.nsid, new Namespace(this.#exec, info));
      return true;
    }
    if (old.info.blocks === info.blocks && old.info.blockSize === info.blockSize) return false;
    old.info = info;
    return true;
  }

  /** The active NSID list, in pages of ACTIVE_NS_LIST_MAX starting after the last NSID of the previous page. */
  async #activeNsids(): Promise<number[]> {
    const nsids: number[] = [];
    for (let start = 0; ; ) {
      const page = await this.#identify(Cns.NS_ACTIVE_LIST, start, decodeActiveNsList);
      nsids.push(...page);
      if (page.length < ACTIVE_NS_LIST_MAX) return nsids;
      start = page[page.length - 1] as number;
    }
  }

  /** Identify one namespace; undefined when it has no capacity (NCAP 0: inactive). */
  async #identifyNs(nsid: number): Promise<NamespaceInfo | undefined> {
    const ns = await this.#identify(Cns.NS, nsid, decodeIdentifyNamespace);
    if (ns.ncap === 0n) return undefined;
    const ids = await this.#descriptorIds(nsid);
    return {
      nsid,
      blocks: ns.nsze,
      blockSize: 2 ** (ns.lbaf[flbasIndex(ns.flbas)]?.lbads ?? 9),
      nguid: hexOrEmpty(ns.nguid) || ids.nguid,
      uuid: ids.uuid,
      eui64: hexOrEmpty(ns.eui64),
      anagrpid: ns.anagrpid,
      shared: (ns.nmic & Nmic.SHARED) !== 0,
      readOnly: (ns.nsattr & Nsattr.WRITE_PROTECTED) !== 0,
    };
  }

  /** UUID and NGUID from the descriptor list; a controller that rejects CNS 3 simply has none. */
  async #descriptorIds(nsid: number): Promise<{ uuid: string; nguid: string }> {
    const out = { uuid: '', nguid: '' };
    try {
      for (const desc of await this.#identify(Cns.NS_DESC_LIST, nsid, decodeNsDescList)) {
        if (desc.nidt === NidType.UUID) out.uuid = formatUuid(desc.nid);
        if (desc.nidt === NidType.NGUID && out.nguid === '') out.nguid = desc.nid.toString('hex');
      }
    } catch (e) {
      if (!(e instanceof NvmeStatusError)) throw e;
    }
    return out;
  }

  /** One Identify (NVMe Base 2.0 §5.17) of `cns` for `nsid`, decoded. */
  async #identify<T>(cns: number, nsid: number, decode: (b: Buffer) => T): Promise<T> {
    const buf = Buffer.alloc(IDENTIFY_DATA_SIZE);
    await this.#admin.adminCmd({ sqe: encodeIdentifyCmd({ cid: 0, cns, nsid }), c2h: buf });
    return decode(buf);
  }
}
