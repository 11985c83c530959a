// NVM command set on I/O queues (NVM Command Set 1.0 §3): Read, Write, Compare, Flush, Write Zeroes, DSM, Verify,
// Write Uncorrectable, Copy.
// Follows nvmet io-cmd-file.c / io-cmd-bdev.c: parse checks everything before data moves, execute ends in complete().
import { Buffer } from 'node:buffer';
import { COPY_RANGE_SIZE, CopyCdw12, CopyRangeOffset, DNR, DsmAttr, NvmOpcode, RwCdw12, Sgl1Offset, SqeOffset, Status, rd16, rd32, NSID_BROADCAST } from '../../../protocol/index.js';
import { ReadLent, isFencedError } from '../../backend/index.js';
import type { TargetController } from '../controller.js';
import type { QueueModel } from '../queue-model.js';
import type { Request } from '../request.js';
import type { TargetNamespace } from '../namespace.js';
import { parseResvCmd } from './reservation.js';
import { parseZoneCmd, saveZones, zoneReadStatus, zoneWriteLba } from './zns.js';

/** SLBA, CDW10–11 of a Read/Write/Compare/Write Zeroes SQE (NVM Command Set 1.0 §3.2.4). */
function sqeSlba(sqe: Buffer): number {
  return rd32(sqe, 40) + rd32(sqe, 44) * 0x1_0000_0000;
}

/** Which SQE checks an opcode needs before it may run (NVM Command Set 1.0 §3). */
type IoCheck = 'rw' | 'lba' | 'dsm' | 'copy' | 'none' | 'resv' | 'zone';

/**
 * What the target does with an NVM opcode it implements (any other is Invalid Command Opcode), as
 * nvmet_parse_io_cmd and nvmet_bdev_parse_io_cmd. Plain data that parseIoCmd reads: a parse function per entry,
 * called through the table, was not inlined and made parseIoCmd ~20 % slower (4 ns of ~20 ns per 4 KiB read/write,
 * CPU time over 10⁶ calls against the switch it replaced); with the checks as direct calls it is within ~4 %.
 */
interface IoOp {
  readonly check: IoCheck;
  /** Set on the request once the checks pass (reservation commands set their own). */
  readonly execute: ((req: Request) => void) | undefined;
  /** The command moves data this way; undefined: it moves none. */
  readonly dir: 'c2h' | 'h2c' | undefined;
  /** Changes the namespace's data: refused with Namespace is Write Protected on a read-only namespace. */
  readonly writes: boolean;
}

const op = (check: IoCheck, execute: IoOp['execute'], dir: IoOp['dir'], writes: boolean): IoOp => ({ check, execute, dir, writes });
/** Reservation commands (NVMe Base 2.0 §8.19): only where reservations are on, and exempt from the access table. */
const RESV_OP = op('resv', undefined, undefined, false);
/** Write Uncorrectable (NVM Command Set 1.0 §3.2.7): only where the marked blocks live in one process (mediaStateLocal). */
const WRITE_UNCOR_OP = op('lba', executeWriteUncor, undefined, true);

/** By opcode; a dense array so the lookup is one indexed load. */
const IO_OPS: readonly (IoOp | undefined)[] = opTable({
  [NvmOpcode.READ]: op('rw', executeRead, 'c2h', false),
  [NvmOpcode.WRITE]: op('rw', executeWrite, 'h2c', true),
  [NvmOpcode.COMPARE]: op('rw', executeCompare, 'h2c', false),
  [NvmOpcode.FLUSH]: op('none', executeFlush, undefined, false),
  [NvmOpcode.WRITE_ZEROES]: op('lba', executeWriteZeroes, undefined, true),
  [NvmOpcode.DSM]: op('dsm', executeDsm, 'h2c', true),
  [NvmOpcode.VERIFY]: op('lba', executeVerify, undefined, false),
  [NvmOpcode.WRITE_UNCOR]: WRITE_UNCOR_OP,
  [NvmOpcode.COPY]: op('copy', executeCopy, 'h2c', true),
  [NvmOpcode.RESV_REGISTER]: RESV_OP,
  [NvmOpcode.RESV_REPORT]: RESV_OP,
  [NvmOpcode.RESV_ACQUIRE]: RESV_OP,
  [NvmOpcode.RESV_RELEASE]: RESV_OP,
  // Zoned namespaces only (ZNS 1.1 §3.4; cmd/zns.ts): Zone Append is a Write whose LBA the zone picks.
  [NvmOpcode.ZONE_MGMT_SEND]: op('zone', undefined, undefined, true),
  [NvmOpcode.ZONE_MGMT_RECV]: op('zone', undefined, undefined, false),
  [NvmOpcode.ZONE_APPEND]: op('zone', executeWrite, 'h2c', true),
});

function opTable(byOpcode: Readonly<Record<number, IoOp>>): (IoOp | undefined)[] {
  const t: (IoOp | undefined)[] = [];
  for (let code = 0; code < 256; code++) t.push(byOpcode[code]);
  return t;
}

export function parseIoCmd(ctrl: TargetController, q: QueueModel, req: Request): number {
  const subsys = ctrl.subsys;
  const code = req.opcode;
  req.lat = subsys.countIoOpcode(code);
  if (code === NvmOpcode.FLUSH && req.nsid === NSID_BROADCAST) {
    req.execute = executeFlushAll;
    return 0;
  }
  const io = IO_OPS[code];
  if (io === undefined || (io.check === 'resv' && !subsys.reservationsSupported) || (io === WRITE_UNCOR_OP && !subsys.mediaStateLocal)) {
    req.errorLoc = SqeOffset.opcode;
    return Status.INVALID_OPCODE | DNR;
  }
  const ns = subsys.namespaces.get(req.nsid);
  // A disabled namespace is inactive (NVMe Base 2.0 §3.2.1.4): Invalid Namespace, as nvmet_req_find_ns answers in
  // Linux 6.1 (a disabled nvmet_ns is not in subsys->namespaces there). A namespace masked from this host is the
  // same to it: it does not exist (docs/target.md, namespace masking).
  if (ns === undefined || !ns.enabled || (ns.hostMask !== undefined && !ns.hostMask.has(ctrl.hostnqn))) {
    req.errorLoc = SqeOffset.nsid;
    return Status.INVALID_NS | DNR;
  }
  req.ns = ns;
  const ana = anaStatus(ctrl, q, ns);
  if (ana !== 0) return ana;
  // Reservation commands follow their own rules (NVMe Base 2.0 §8.19); every other command meets the access table.
  if (io.check === 'resv') return parseResvCmd(ctrl, req, ns);
  const access = accessStatus(ctrl, req, ns, io.writes);
  if (access !== 0) return access;
  const st = io.check === 'rw' ? checkRw(ctrl, req, ns) : io.check === 'lba' ? checkLbaRange(req, ns) : io.check === 'dsm' ? checkDsm(ctrl, req) : io.check === 'copy' ? checkCopy(ctrl, req) : io.check === 'zone' ? parseZoneCmd(ctrl, req, ns, checkRw) : 0;
  if (st !== 0) return st;
  if (ns.zones !== undefined && io.check === 'rw' && !io.writes) {
    const zst = zoneReadStatus(req, ns.zones, sqeNlb(req.sqe));
    if (zst !== 0) return zst;
  }
  if (io.dir !== undefined) req.dir = io.dir;
  if (io.execute !== undefined) req.execute = io.execute;
  return 0;
}

/** ANA state of the namespace's group on the controller's port, as nvmet_check_ana_state; 0 when it may be accessed. */
function anaStatus(ctrl: TargetController, q: QueueModel, ns: TargetNamespace): number {
  if (!ctrl.subsys.ana || q.port.anaStates.size === 0) return 0;
  const st = q.port.anaState(ns.anaGroup);
  if (st === 'inaccessible') return Status.ANA_INACCESSIBLE;
  if (st === 'persistent-loss') return Status.ANA_PERSISTENT_LOSS;
  if (st === 'change') return Status.ANA_TRANSITION;
  return 0;
}

/** The reservation access table (NVMe Base 2.0 §8.19) and write protection; 0 when the command may run. */
function accessStatus(ctrl: TargetController, req: Request, ns: TargetNamespace, writes: boolean): number {
  const rs = ns.resv;
  if (rs.rtype !== 0) {
    const st = rs.checkAccess(ctrl.hostKey, req.opcode);
    if (st !== 0) {
      req.errorLoc = SqeOffset.opcode;
      return st;
    }
  }
  req.resvGen = rs.abortGen;
  if (writes && ns.readOnly) {
    req.errorLoc = SqeOffset.opcode;
    return Status.NS_WRITE_PROTECTED;
  }
  return 0;
}

/** NLB, CDW12 bits 15:0, is 0's based (NVM Command Set 1.0 §3.2.4). */
function sqeNlb(sqe: Buffer): number {
  return rd16(sqe, 48) + 1;
}

/** Read, Write and Compare: the LBA range, and the transfer size against MDTS; sets the data length. */
function checkRw(ctrl: TargetController, req: Request, ns: TargetNamespace): number {
  const sqe = req.sqe;
  const nlb = sqeNlb(sqe);
  if (sqeSlba(sqe) + nlb > ns.nsze || rd32(sqe, 44) >= 0x20_0000) {
    req.errorLoc = SqeOffset.cdw10;
    return Status.LBA_RANGE | DNR;
  }
  const len = nlb * ns.blockSize;
  const max = ctrl.subsys.maxTransfer;
  if (max > 0 && len > max) {
    req.errorLoc = SqeOffset.cdw12;
    return Status.INVALID_FIELD | DNR;
  }
  req.dataLen = len;
  return 0;
}

/** Write Zeroes: the LBA range only (it moves no data). */
function checkLbaRange(req: Request, ns: TargetNamespace): number {
  const sqe = req.sqe;
  if (sqeSlba(sqe) + sqeNlb(sqe) > ns.nsze) {
    req.errorLoc = SqeOffset.cdw10;
    return Status.LBA_RANGE | DNR;
  }
  return 0;
}

/** Dataset Management: the SGL holds the NR+1 ranges; sets the data length. */
function checkDsm(ctrl: TargetController, req: Request): number {
  return checkRangeList(ctrl, req, ((req.sqe.readUInt32LE(40) & 0xff) + 1) * 16);
}

/**
 * A list of ranges a command carries as its data (DSM, Copy): the SGL must hold `need` bytes. nvmet_check_data_len_lte:
 * it may be longer (Linux 6.1 always sends a 4096-byte range buffer for DSM whatever NR says), and only the first
 * ranges count. Sets the data length.
 */
function checkRangeList(ctrl: TargetController, req: Request, need: number): number {
  if (req.sglLen < need) {
    req.errorLoc = Sgl1Offset.length;
    return Status.SGL_INVALID_DATA | DNR;
  }
  // The rest of a longer SGL is gathered too: no more than the host may size (Subsystem.hostSizedMax, MDTS).
  if (req.sglLen > ctrl.subsys.hostSizedMax) {
    req.errorLoc = Sgl1Offset.length;
    return Status.INVALID_FIELD | DNR;
  }
  req.dataLen = req.sglLen;
  return 0;
}

/**
 * Copy limits of every namespace (Identify Namespace MSSRL, MCL, MSRC; NVM Command Set 1.0 §4.1.5.1): up to 128 source
 * ranges of up to 1,024 blocks each, 4,096 blocks in all. executeCopy holds every source block in memory before it
 * writes any (so a destination overlapping a source still gets the source's old data), at most 16 MiB with 4 KiB
 * blocks.
 */
export const COPY_MSSRL = 1024;
export const COPY_MCL = 4096;
/** 0's based: 128 ranges. */
export const COPY_MSRC = 127;

/** Copy: the Descriptor Format (0 and 1 offered, OCFS), the range count against MSRC, and the SGL holding the ranges. */
function checkCopy(ctrl: TargetController, req: Request): number {
  const cdw12 = rd32(req.sqe, SqeOffset.cdw12);
  const format = (cdw12 & CopyCdw12.DESC_FORMAT_MASK) >>> CopyCdw12.DESC_FORMAT_SHIFT;
  if (format > 1) {
    req.errorLoc = SqeOffset.cdw12;
    return Status.INVALID_FIELD | DNR;
  }
  const nr = cdw12 & CopyCdw12.NR_MASK;
  if (nr > COPY_MSRC) {
    req.errorLoc = SqeOffset.cdw12;
    return Status.CMD_SIZE_LIMIT_EXCEEDED | DNR;
  }
  return checkRangeList(ctrl, req, (nr + 1) * (COPY_RANGE_SIZE[format as 0 | 1]));
}

/**
 * Status of a command aborted by a preempt-and-abort. DNR: the host lost its registration, so a silent retry would
 * hide the preemption from the application (and meet the new reservation anyway).
 */
const PREEMPT_ABORTED = Status.ABORTED_PREEMPT_ABORT | DNR;

/** Completes the command (fault rules, failNext and commandLatencyUs among them, act in CoreQueue: fault-engine.ts). */
function deliver(req: Request, status: number): void {
  completeIo(req.queueRef as QueueModel, req, status);
}

/**
 * The completion itself. A command whose host was preempted with abort after it passed its access check completes
 * as aborted (NVMe Base 2.0 §8.19.8: Command Aborted due to Preempt and Abort); one compare when nothing was.
 */
function completeIo(q: QueueModel, req: Request, status: number): void {
  q.complete(req, ioStatus(q, req, status));
}

/**
 * `status`, or Command Aborted due to Preempt and Abort when the host was preempted with abort after the command
 * passed its access check (its read data then dropped). Also asked again by a fault rule's delay when it ends
 * (fault-actions.ts), since a preemption may come while the completion waits.
 */
export function ioStatus(q: QueueModel, req: Request, status: number): number {
  const ns = req.ns;
  if (ns !== undefined && ns.resv.abortGen > req.resvGen && q.ctrl !== undefined && ns.resv.aborted(q.ctrl.hostKey, req.resvGen)) {
    req.out = undefined;
    return PREEMPT_ABORTED;
  }
  return status;
}

function executeRead(req: Request): void {
  const ns = req.ns as TargetNamespace;
  if (ns.uncor.set.size !== 0 && unrecovered(req, ns)) return;
  const off = sqeSlba(req.sqe) * ns.blockSize;
  // With data digests on the queue, the backend may hand back the data's CRC32C (RAM: from its block cache).
  const wantCrc = (req.queueRef as QueueModel | undefined)?.ops.dataDigest === true;
  // One callback per Request, made on its first read and kept while the transport recycles the Request: no closure
  // per command. A Request is recycled only after its completion, so the callback never outlives its command.
  const cb = (req.readDone ??= (err, bufs, crc, lent) => readDone(req, err, bufs, crc, lent));
  ns.backend.read(off, req.dataLen, cb, wantCrc);
}

function readDone(req: Request, err: Error | null, bufs: Buffer[], crc: number | undefined, lent: ReadLent | undefined): void {
  const ns = req.ns as TargetNamespace;
  if (err) {
    ns.counters.errors++;
    return deliver(req, Status.READ_ERROR);
  }
  const len = req.dataLen;
  ns.counters.reads++;
  ns.counters.bytesRead += len;
  const ctrl = (req.queueRef as QueueModel | undefined)?.ctrl;
  if (ctrl !== undefined) {
    ctrl.smart.readCmds++;
    ctrl.smart.bytesRead += len;
  }
  req.out = bufs;
  req.outCrc = crc;
  req.outLent = lent ?? (ns.backend.transientReads === true ? ReadLent.CALL : ReadLent.STABLE);
  deliver(req, 0);
}

/**
 * A write that passed parse must still not run when, while it waited (for its data, or with the whole process
 * stopped), either its gateway was fenced (port.anaValidUntil passed: the host may already have retried it through
 * the ANA group's new owner, and running it now would put older data over newer; docs/gateway-groups.md, fencing),
 * or a preempt-and-abort aborted it (NVMe Base 2.0 §8.19.7). Completes it with that status and returns true. A write
 * that passes here and then waits in its backend is checked again at the storage call when the backend is fenced
 * (FileBackendOptions.fence; writeFailed).
 */
function stoppedBeforeRun(req: Request): boolean {
  const q = req.queueRef as QueueModel | undefined;
  const ns = req.ns as TargetNamespace;
  if (q !== undefined && q.port.anaValidUntil !== Infinity && Date.now() >= q.port.anaValidUntil) {
    ns.counters.fenced++;
    deliver(req, Status.ANA_INACCESSIBLE);
    return true;
  }
  const ctrl = q?.ctrl;
  if (ns.resv.abortGen <= req.resvGen || ctrl === undefined || !ns.resv.aborted(ctrl.hostKey, req.resvGen)) return false;
  deliver(req, PREEMPT_ABORTED);
  return true;
}

/**
 * The status of a failed write-type operation: a write the gateway's fence refused before its syscall (a fenced
 * file backend, docs/gateway-groups.md "Fencing at the storage call") did not happen, and the host must retry it
 * through another path, as for a refusal by stoppedBeforeRun; anything else is the medium's failure.
 */
function writeFailed(ns: TargetNamespace, err: Error): number {
  if (isFencedError(err)) {
    ns.counters.fenced++;
    return Status.ANA_INACCESSIBLE;
  }
  ns.counters.errors++;
  return Status.WRITE_FAULT;
}

function executeWrite(req: Request): void {
  if (stoppedBeforeRun(req)) return;
  const ns = req.ns as TargetNamespace;
  const lba = ns.zones === undefined ? sqeSlba(req.sqe) : zoneWriteLba(req, ns.zones, sqeSlba(req.sqe), sqeNlb(req.sqe));
  if (lba < 0) return deliver(req, -lba);
  const off = lba * ns.blockSize;
  const fua = (rd32(req.sqe, SqeOffset.cdw12) & RwCdw12.FUA) !== 0;
  const len = req.dataLen;
  ns.backend.write(off, req.data ?? [], fua, (err) => {
    if (err) return deliver(req, writeFailed(ns, err));
    if (ns.uncor.set.size !== 0 && rewritten(req, ns, sqeSlba(req.sqe), sqeNlb(req.sqe))) return;
    // A FUA write on a zoned file namespace is durable with its write pointer (target/zone-state.ts).
    if (fua && ns.zoneStore !== undefined) return saveZones(ns, (e2) => (e2 ? deliver(req, Status.WRITE_FAULT) : writeDone(req, ns, len)));
    writeDone(req, ns, len);
  });
}

function writeDone(req: Request, ns: TargetNamespace, len: number): void {
  ns.counters.writes++;
  ns.counters.bytesWritten += len;
  const ctrl = (req.queueRef as QueueModel | undefined)?.ctrl;
  if (ctrl !== undefined) {
    ctrl.smart.writeCmds++;
    ctrl.smart.bytesWritten += len;
  }
  deliver(req, 0);
}

function executeCompare(req: Request): void {
  const ns = req.ns as TargetNamespace;
  if (ns.uncor.set.size !== 0 && unrecovered(req, ns)) return;
  const off = sqeSlba(req.sqe) * ns.blockSize;
  ns.backend.read(off, req.dataLen, (err, bufs) => {
    if (err) return deliver(req, Status.READ_ERROR);
    const a = Buffer.concat(bufs, req.dataLen);
    const b = Buffer.concat(req.data ?? [], req.dataLen);
    deliver(req, a.equals(b) ? 0 : Status.COMPARE_FAILED);
  });
}

function executeFlush(req: Request): void {
  const ns = req.ns as TargetNamespace;
  ns.backend.flush((err) => {
    // The zone state is as durable as the data a Flush makes durable (target/zone-state.ts).
    if (!err && ns.zoneStore !== undefined) return saveZones(ns, (e2) => flushDone(req, ns, e2));
    flushDone(req, ns, err);
  });
}

function flushDone(req: Request, ns: TargetNamespace, err: Error | null): void {
  if (err) {
    ns.counters.errors++;
    return deliver(req, Status.WRITE_FAULT);
  }
  ns.counters.flushes++;
  deliver(req, 0);
}

function executeFlushAll(req: Request): void {
  const subsys = (req.queueRef as QueueModel | undefined)?.ctrl?.subsys;
  const ctrl = (req.queueRef as QueueModel | undefined)?.ctrl;
  const ids = subsys === undefined || ctrl === undefined ? [] : subsys.visibleNsids(ctrl.hostnqn);
  const list = subsys === undefined ? [] : ids.map((id) => subsys.namespaces.get(id) as TargetNamespace);
  let left = list.length;
  let status = 0;
  if (left === 0) return deliver(req, 0);
  for (const ns of list) {
    ns.counters.flushes++;
    ns.backend.flush((err) => {
      if (err) status = Status.WRITE_FAULT;
      saveZones(ns, (e2) => {
        if (e2) status = Status.WRITE_FAULT;
        if (--left === 0) deliver(req, status);
      });
    });
  }
}

function executeWriteZeroes(req: Request): void {
  if (stoppedBeforeRun(req)) return;
  const ns = req.ns as TargetNamespace;
  const sqe = req.sqe;
  const slba = sqeSlba(sqe);
  const cdw12 = sqe.readUInt32LE(48);
  const nlb = (cdw12 & 0xffff) + 1;
  const fua = (cdw12 & RwCdw12.FUA) !== 0;
  if (ns.zones !== undefined) {
    const zst = ns.zones.write(slba, nlb);
    if (zst !== 0) return deliver(req, zst);
  }
  ns.backend.writeZeroes(slba * ns.blockSize, nlb * ns.blockSize, (cdw12 & RwCdw12.DEAC) !== 0, (err) => {
    if (err) return deliver(req, writeFailed(ns, err));
    if (ns.uncor.set.size !== 0 && rewritten(req, ns, slba, nlb)) return;
    if (fua) return ns.backend.flush((e2) => deliver(req, e2 ? Status.WRITE_FAULT : 0));
    deliver(req, 0);
  });
}

function executeDsm(req: Request): void {
  if (stoppedBeforeRun(req)) return;
  const ns = req.ns as TargetNamespace;
  if ((req.sqe.readUInt32LE(SqeOffset.cdw11) & DsmAttr.AD) === 0) return deliver(req, 0);
  const nrBytes = ((req.sqe.readUInt32LE(40) & 0xff) + 1) * 16;
  // Only the NR+1 ranges count: copy those, not the whole (up to MDTS) SGL.
  const data = Buffer.concat(req.data ?? [], nrBytes);
  const ranges: Array<{ off: number; len: number }> = [];
  for (let o = 0; o + 16 <= data.length; o += 16) {
    const nlb = data.readUInt32LE(o + 4);
    const slba = data.readUInt32LE(o + 8) + data.readUInt32LE(o + 12) * 0x1_0000_0000;
    if (nlb === 0) continue;
    if (slba + nlb > ns.nsze) {
      req.errorLoc = SqeOffset.cdw10;
      return deliver(req, Status.LBA_RANGE | DNR);
    }
    ranges.push({ off: slba * ns.blockSize, len: nlb * ns.blockSize });
  }
  const next = (i: number): void => {
    const r = ranges[i];
    if (r === undefined) {
      // Deallocated blocks read as zeroes (DLFEAT), no longer as the Unrecovered Read Error of a marked block.
      let cleared = false;
      for (const d of ranges) cleared = ns.uncor.set.remove(d.off / ns.blockSize, d.len / ns.blockSize) || cleared;
      if (!cleared) return deliver(req, 0);
      return ns.uncor.save((e) => deliver(req, e ? writeFailed(ns, e) : 0));
    }
    ns.backend.writeZeroes(r.off, r.len, true, (err) => (err ? deliver(req, writeFailed(ns, err)) : next(i + 1)));
  };
  next(0);
}

/**
 * Read, Compare and Verify of a range that holds a block Write Uncorrectable marked: Unrecovered Read Error (NVM
 * Command Set 1.0 §3.2.7), with DNR since reading it again meets the same mark. Completes it and returns true.
 */
function unrecovered(req: Request, ns: TargetNamespace): boolean {
  if (ns.uncor.set.firstIn(sqeSlba(req.sqe), sqeNlb(req.sqe)) < 0) return false;
  ns.counters.errors++;
  req.out = undefined;
  deliver(req, Status.READ_ERROR | DNR);
  return true;
}

/**
 * A Write or Write Zeroes over marked blocks clears their mark (NVM Command Set 1.0 §3.2.7); on a file namespace the
 * command completes once the smaller set is saved, so a restart does not bring the mark back over new data. Returns
 * true when it took over the completion.
 */
function rewritten(req: Request, ns: TargetNamespace, slba: number, nlb: number): boolean {
  if (!ns.uncor.set.remove(slba, nlb)) return false;
  ns.uncor.save((err) => {
    if (err) return deliver(req, writeFailed(ns, err));
    if (req.opcode === NvmOpcode.WRITE) {
      ns.counters.writes++;
      ns.counters.bytesWritten += req.dataLen;
    }
    deliver(req, 0);
  });
  return true;
}

/**
 * Verify (NVM Command Set 1.0 §3.2.9): reads the range without returning it, so a marked block or a medium error
 * shows. In pieces of VERIFY_CHUNK bytes, one after another: NLB reaches 65,536 blocks (256 MiB of 4 KiB blocks),
 * which no single read should hold in memory.
 */
const VERIFY_CHUNK = 1 << 20;

function executeVerify(req: Request): void {
  const ns = req.ns as TargetNamespace;
  if (ns.uncor.set.size !== 0 && unrecovered(req, ns)) return;
  const start = sqeSlba(req.sqe) * ns.blockSize;
  const end = start + sqeNlb(req.sqe) * ns.blockSize;
  const next = (off: number): void => {
    if (off >= end) return deliver(req, 0);
    const len = Math.min(VERIFY_CHUNK, end - off);
    ns.backend.read(off, len, (err) => {
      if (err) {
        ns.counters.errors++;
        return deliver(req, Status.READ_ERROR);
      }
      next(off + len);
    });
  };
  next(start);
}

/**
 * Write Uncorrectable (NVM Command Set 1.0 §3.2.7): marks the range so that reads of it fail until it is written
 * again. The data stays where it is; only the mark changes, saved beside a file namespace's data before completion.
 */
function executeWriteUncor(req: Request): void {
  if (stoppedBeforeRun(req)) return;
  const ns = req.ns as TargetNamespace;
  ns.uncor.set.add(sqeSlba(req.sqe), sqeNlb(req.sqe));
  ns.uncor.save((err) => deliver(req, err ? writeFailed(ns, err) : 0));
}

/**
 * Copy (NVM Command Set 1.0 §3.2.2), Descriptor Formats 0 and 1 without protection information: every source range
 * is checked (MSSRL, MCL: Command Size Limit Exceeded; past NSZE: LBA Out of Range) and read before the destination
 * is written, in source order from SDLBA. A marked source block (Write Uncorrectable) is Unrecovered Read Error;
 * destination blocks lose their marks as a Write's do.
 */
function executeCopy(req: Request): void {
  if (stoppedBeforeRun(req)) return;
  const ns = req.ns as TargetNamespace;
  const sqe = req.sqe;
  const cdw12 = rd32(sqe, SqeOffset.cdw12);
  const size = COPY_RANGE_SIZE[((cdw12 & CopyCdw12.DESC_FORMAT_MASK) >>> CopyCdw12.DESC_FORMAT_SHIFT) as 0 | 1];
  const nr = (cdw12 & CopyCdw12.NR_MASK) + 1;
  const data = Buffer.concat(req.data ?? [], nr * size);
  const sources: Array<{ slba: number; nlb: number }> = [];
  let total = 0;
  for (let i = 0; i < nr; i++) {
    const o = i * size;
    const hi = data.readUInt32LE(o + CopyRangeOffset.slba + 4);
    const slba = data.readUInt32LE(o + CopyRangeOffset.slba) + hi * 0x1_0000_0000;
    const nlb = data.readUInt16LE(o + CopyRangeOffset.nlb) + 1;
    if (nlb > COPY_MSSRL) return deliver(req, Status.CMD_SIZE_LIMIT_EXCEEDED | DNR);
    if (hi >= 0x20_0000 || slba + nlb > ns.nsze) return deliver(req, Status.LBA_RANGE | DNR);
    total += nlb;
    sources.push({ slba, nlb });
  }
  if (total > COPY_MCL) return deliver(req, Status.CMD_SIZE_LIMIT_EXCEEDED | DNR);
  const sdlba = sqeSlba(sqe);
  if (rd32(sqe, 44) >= 0x20_0000 || sdlba + total > ns.nsze) {
    req.errorLoc = SqeOffset.cdw10;
    return deliver(req, Status.LBA_RANGE | DNR);
  }
  if (ns.uncor.set.size !== 0 && sources.some((r) => ns.uncor.set.firstIn(r.slba, r.nlb) >= 0)) {
    ns.counters.errors++;
    return deliver(req, Status.READ_ERROR | DNR);
  }
  const bs = ns.blockSize;
  const held: Buffer[] = [];
  const readNext = (i: number): void => {
    const r = sources[i];
    if (r === undefined) return write();
    ns.backend.read(r.slba * bs, r.nlb * bs, (err, bufs) => {
      if (err) {
        ns.counters.errors++;
        return deliver(req, Status.READ_ERROR);
      }
      // A copy: a backend may lend its read buffers only until this callback returns (ReadLent).
      held.push(Buffer.concat(bufs, r.nlb * bs));
      readNext(i + 1);
    });
  };
  const write = (): void => {
    ns.backend.write(sdlba * bs, held, (cdw12 & CopyCdw12.FUA) !== 0, (err) => {
      if (err) return deliver(req, writeFailed(ns, err));
      if (ns.uncor.set.size !== 0 && ns.uncor.set.remove(sdlba, total)) return ns.uncor.save((e) => deliver(req, e ? writeFailed(ns, e) : 0));
      deliver(req, 0);
    });
  };
  readNext(0);
}
