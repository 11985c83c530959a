// Zoned Namespace Command Set 1.1 commands on I/O queues: Zone Management Send (79h) and Receive (7Ah), Zone Append
// (7Dh), and the zone rules Write, Write Zeroes, Read and Compare meet on a zoned namespace (ZNS 1.1 §3.4, §5).
// The zone state itself is target/core/zoned.ts's; its persistence for file namespaces is target/zone-state.ts's.
import { Buffer } from 'node:buffer';
import { DNR, NvmOpcode, SqeOffset, Status, ZMR_PARTIAL, ZMS_SELECT_ALL, ZONE_REPORT_HEADER_SIZE, ZoneRecvAction, ZoneReportFilter, ZoneSendAction, encodeZoneReportInto, rd32, zoneReportCapacity } from '../../../protocol/index.js';
import type { TargetController } from '../controller.js';
import type { TargetNamespace } from '../namespace.js';
import type { QueueModel } from '../queue-model.js';
import type { Request } from '../request.js';
import type { ZoneSet } from '../zoned.js';

function slbaOf(sqe: Buffer): number {
  return rd32(sqe, SqeOffset.cdw10) + rd32(sqe, SqeOffset.cdw11) * 0x1_0000_0000;
}

function fail(req: Request, loc: number, status: number): number {
  req.errorLoc = loc;
  return status;
}

/**
 * Parse of the three zoned opcodes (a conventional namespace answers them Invalid Opcode, as nvmet does). Zone
 * Append also passes `checkRw` (range, MDTS: ZASL 0 makes MDTS its limit) and must name a zone's first LBA.
 */
export function parseZoneCmd(ctrl: TargetController, req: Request, ns: TargetNamespace, checkRw: (ctrl: TargetController, req: Request, ns: TargetNamespace) => number): number {
  const zones = ns.zones;
  if (zones === undefined) return fail(req, SqeOffset.opcode, Status.INVALID_OPCODE | DNR);
  const slba = slbaOf(req.sqe);
  switch (req.opcode) {
    case NvmOpcode.ZONE_APPEND: {
      const st = checkRw(ctrl, req, ns);
      if (st !== 0) return st;
      // ZSLBA must be the lowest LBA of a zone (ZNS 1.1 §3.4.1).
      if (slba % zones.zoneSize !== 0) return fail(req, SqeOffset.cdw10, Status.INVALID_FIELD | DNR);
      return 0;
    }
    case NvmOpcode.ZONE_MGMT_SEND:
      return parseSend(req, ns, zones, slba);
    default:
      return parseRecv(ctrl, req, ns, zones, slba);
  }
}

function parseSend(req: Request, ns: TargetNamespace, zones: ZoneSet, slba: number): number {
  const cdw13 = rd32(req.sqe, SqeOffset.cdw13);
  const zsa = cdw13 & 0xff;
  const all = (cdw13 & ZMS_SELECT_ALL) !== 0;
  // Set Zone Descriptor Extension needs ZDES > 0, which this namespace reports as 0: Invalid Field, as any unknown action.
  if (zsa < ZoneSendAction.CLOSE || zsa > ZoneSendAction.OFFLINE) return fail(req, SqeOffset.cdw13, Status.INVALID_FIELD | DNR);
  if (!all) {
    // The SLBA names a zone by its first LBA (ZNS 1.1 §3.4.3); with Select All it is ignored.
    if (slba >= ns.nsze) return fail(req, SqeOffset.cdw10, Status.LBA_RANGE | DNR);
    if (slba % zones.zoneSize !== 0) return fail(req, SqeOffset.cdw10, Status.INVALID_FIELD | DNR);
  }
  const z = all ? 0 : zones.zoneOf(slba);
  req.execute = (r) => executeSend(r, ns, zones, zsa, zones.targets(zsa, z, all));
  return 0;
}

function parseRecv(ctrl: TargetController, req: Request, ns: TargetNamespace, zones: ZoneSet, slba: number): number {
  const numd = rd32(req.sqe, SqeOffset.cdw12);
  const cdw13 = rd32(req.sqe, SqeOffset.cdw13);
  // (NUMD + 1) dwords, up to 2^34 bytes: bounded by what the host may size before anything is allocated.
  const len = (numd + 1) * 4;
  if (len > ctrl.subsys.hostSizedMax || len < ZONE_REPORT_HEADER_SIZE) return fail(req, SqeOffset.cdw12, Status.INVALID_FIELD | DNR);
  // Extended reports need zone descriptor extensions (ZDES 0 here); report filters are 0..7 (ZNS 1.1 Figure 36).
  if ((cdw13 & 0xff) !== ZoneRecvAction.REPORT || ((cdw13 >>> 8) & 0xff) > ZoneReportFilter.OFFLINE) return fail(req, SqeOffset.cdw13, Status.INVALID_FIELD | DNR);
  if (slba >= ns.nsze) return fail(req, SqeOffset.cdw10, Status.LBA_RANGE | DNR);
  // The data buffer is what NUMD says (nvmet_check_transfer_len: SGL and NUMD must agree).
  if (req.sglLen !== len) return fail(req, SqeOffset.dptr + 8, Status.SGL_INVALID_DATA | DNR);
  req.dir = 'c2h';
  req.dataLen = len;
  const filter = (cdw13 >>> 8) & 0xff;
  const partial = (cdw13 & ZMR_PARTIAL) !== 0;
  req.execute = (r) => {
    const out = Buffer.alloc(len);
    const { total, descs } = zones.report(slba, filter, zoneReportCapacity(len));
    // Number of Zones: every matching zone from SLBA on, or with Partial Report those returned (ZNS 1.1 §3.4.2.2.1).
    encodeZoneReportInto(out, partial ? descs.length : total, descs);
    r.out = [out];
    (r.queueRef as QueueModel).complete(r, 0);
  };
  return 0;
}

/** Checks the action on every zone, zeroes the data of zones it resets, applies it, then makes it durable. */
function executeSend(req: Request, ns: TargetNamespace, zones: ZoneSet, zsa: number, targets: number[]): void {
  const q = req.queueRef as QueueModel;
  const st = zones.check(zsa, targets);
  if (st !== 0) return q.complete(req, st);
  // A reset zone reads as zeroes (DLFEAT); other actions leave the data. The state changes first: a command the host
  // sends before this one completes overlaps it, and NVMe does not order overlapping commands (Base 2.0 §3.4.1).
  const reset = zsa === ZoneSendAction.RESET ? targets.filter((z) => zones.state(z) !== 'empty') : [];
  zones.apply(zsa, targets);
  const bs = ns.blockSize;
  const next = (i: number): void => {
    const z = reset[i];
    if (z === undefined) return saveZones(ns, (err) => q.complete(req, err ? Status.WRITE_FAULT : 0));
    ns.backend.writeZeroes(z * zones.zoneSize * bs, zones.zoneSize * bs, true, (err) => (err ? q.complete(req, Status.WRITE_FAULT) : next(i + 1)));
  };
  next(0);
}

/** Makes the zone state durable where the namespace keeps it (a file namespace's zone-state file) and it changed. */
export function saveZones(ns: TargetNamespace, cb: (err: Error | null) => void): void {
  const zones = ns.zones;
  if (zones === undefined || ns.zoneStore === undefined || !zones.takeDirty()) return cb(null);
  ns.zoneStore.save(zones.snapshot(), cb);
}

/**
 * Where a Write, Write Zeroes or Zone Append of a zoned namespace goes, after the zone rules (ZoneSet.write, .append):
 * the LBA, or a negative status. A Zone Append's LBA goes back in CQE DW0/DW1 (ZNS 1.1 §3.4.1.1).
 */
export function zoneWriteLba(req: Request, zones: ZoneSet, slba: number, nlb: number): number {
  if (req.opcode !== NvmOpcode.ZONE_APPEND) {
    const st = zones.write(slba, nlb);
    return st === 0 ? slba : -st;
  }
  const lba = zones.append(slba, nlb);
  if (lba >= 0) {
    req.dw0 = lba % 0x1_0000_0000;
    req.dw1 = Math.floor(lba / 0x1_0000_0000);
  }
  return lba;
}

/** Read and Compare: Zone Is Offline for a range touching an offline zone (ZNS 1.1 §5.1). */
export function zoneReadStatus(req: Request, zones: ZoneSet, nlb: number): number {
  const st = zones.read(slbaOf(req.sqe), nlb);
  return st === 0 ? 0 : fail(req, SqeOffset.cdw10, st);
}
