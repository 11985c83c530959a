// A zoned namespace's commands from the host side (ZNS 1.1 §3.4): report zones, the zone actions, Zone Append.
// ns.zones; the same commands nvme-cli's `nvme zns report-zones|open-zone|...|zone-append` send.
import { Buffer } from 'node:buffer';
import { NvmOpcode, ZoneReportFilter, ZoneSendAction, decodeZoneReport, encodeZoneMgmtRecvCmd, encodeZoneMgmtSendCmd, type ZoneDescriptor } from '../protocol/index.js';
import { InvalidArgumentError } from './errors.js';
import type { Completion } from './queue-pair.js';

/** What NamespaceZones needs of its namespace: the NSID, the block size, and the one I/O path. */
export interface ZonedNamespaceIo {
  readonly nsid: number;
  readonly blockSize: number;
  execIo(build: () => { sqe: Buffer; h2c?: Buffer; c2h?: Buffer }, write: boolean): Promise<Completion>;
  /** A Read/Write-family SQE from the namespace's one writer (CID and SGL left to the queue). */
  rwSqe(opcode: number, lba: number, blocks: number, fua: boolean): Buffer;
}

/** Report filters by name (ZNS 1.1 Figure 36, ZRASF). */
export type ZoneFilterName = 'all' | 'empty' | 'imp-open' | 'exp-open' | 'closed' | 'full' | 'read-only' | 'offline';
const FILTER: Readonly<Record<ZoneFilterName, number>> = {
  all: ZoneReportFilter.ALL,
  empty: ZoneReportFilter.EMPTY,
  'imp-open': ZoneReportFilter.IMP_OPEN,
  'exp-open': ZoneReportFilter.EXP_OPEN,
  closed: ZoneReportFilter.CLOSED,
  full: ZoneReportFilter.FULL,
  'read-only': ZoneReportFilter.READ_ONLY,
  offline: ZoneReportFilter.OFFLINE,
};

export interface ZoneReportOptions {
  /** Report from the zone holding this LBA (default 0). */
  slba?: number;
  filter?: ZoneFilterName;
  /** Number of Zones counts only the descriptors returned (ZNS 1.1 §3.4.2.2.1). */
  partial?: boolean;
  /** Bytes to ask for (NUMD): 64 header bytes and 64 per zone; default 4096. */
  length?: number;
}

export class NamespaceZones {
  readonly #io: ZonedNamespaceIo;

  constructor(io: ZonedNamespaceIo) {
    this.#io = io;
  }

  /** Zone Management Receive, Report Zones. */
  async report(o: ZoneReportOptions = {}): Promise<{ nrZones: bigint; zones: ZoneDescriptor[] }> {
    const len = o.length ?? 4096;
    if (!Number.isInteger(len) || len < 64 || len % 4 !== 0) throw new InvalidArgumentError('length', `${len}: use a multiple of 4, at least 64`);
    const buf = Buffer.alloc(len);
    const sqe = encodeZoneMgmtRecvCmd({ cid: 0, nsid: this.#io.nsid, slba: lbaArg(o.slba ?? 0), length: len, filter: FILTER[o.filter ?? 'all'], partial: o.partial === true });
    await this.#io.execIo(() => ({ sqe, c2h: buf }), false);
    return decodeZoneReport(buf);
  }

  open(zslba: number, o: { all?: boolean } = {}): Promise<void> {
    return this.#send(ZoneSendAction.OPEN, zslba, o.all);
  }

  close(zslba: number, o: { all?: boolean } = {}): Promise<void> {
    return this.#send(ZoneSendAction.CLOSE, zslba, o.all);
  }

  finish(zslba: number, o: { all?: boolean } = {}): Promise<void> {
    return this.#send(ZoneSendAction.FINISH, zslba, o.all);
  }

  reset(zslba: number, o: { all?: boolean } = {}): Promise<void> {
    return this.#send(ZoneSendAction.RESET, zslba, o.all);
  }

  offline(zslba: number, o: { all?: boolean } = {}): Promise<void> {
    return this.#send(ZoneSendAction.OFFLINE, zslba, o.all);
  }

  /** Zone Append of `data` (whole blocks) to the zone starting at `zslba`: resolves with the LBA it went to. */
  async append(zslba: number, data: Buffer, o: { fua?: boolean } = {}): Promise<number> {
    const bs = this.#io.blockSize;
    if (data.length === 0 || data.length % bs !== 0 || data.length / bs > 0x1_0000) throw new InvalidArgumentError('data', `${data.length} bytes: use 1..65536 whole ${bs}-byte blocks`);
    const sqe = this.#io.rwSqe(NvmOpcode.ZONE_APPEND, lbaNumber(zslba), data.length / bs, o.fua === true);
    const c = await this.#io.execIo(() => ({ sqe, h2c: data }), true);
    // The LBA written, CQE DW0 (low) and DW1 (high) (ZNS 1.1 §3.4.1.1).
    return c.dw1 * 0x1_0000_0000 + (c.dw0 >>> 0);
  }

  async #send(zsa: number, zslba: number, all: boolean | undefined): Promise<void> {
    const sqe = encodeZoneMgmtSendCmd({ cid: 0, nsid: this.#io.nsid, slba: lbaArg(zslba), zsa, selectAll: all === true });
    await this.#io.execIo(() => ({ sqe }), true);
  }
}

function lbaNumber(lba: number): number {
  if (!Number.isSafeInteger(lba) || lba < 0) throw new InvalidArgumentError('lba', `${lba}: use a non-negative safe integer`);
  return lba;
}

function lbaArg(lba: number): bigint {
  return BigInt(lbaNumber(lba));
}
