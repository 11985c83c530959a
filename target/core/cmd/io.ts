// NVM command set on I/O queues (NVM Command Set 1.0 §3): Read, Write, Compare, Flush, Write Zeroes, DSM.
// Follows nvmet io-cmd-file.c / io-cmd-bdev.c: parse checks everything before data moves, execute ends in complete().
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { DNR, DsmAttr, NvmOpcode, RwCdw12, SqeOffset, Status, rd16, rd32, NSID_BROADCAST } from '../../../protocol/index.js';
import { ReadLent } from '../../backend/index.js';
import type { Controller } from '../controller.js';
import type { QueueModel } from '../queue-model.js';
import type { Request } from '../request.js';
import type { Namespace } from '../namespace.js';
import { parseResvCmd } from './reservation.js';

/** SLBA, CDW10–11 of a Read/Write/Compare/Write Zeroes SQE (NVM Command Set 1.0 §3.2.4). */
function sqeSlba(sqe: Buffer): number {
  return rd32(sqe, 40) + rd32(sqe, 44) * 0x1_0000_0000;
}

export function parseIoCmd(ctrl: Controller, q: QueueModel, req: Request): number {
  const subsys = ctrl.subsys;
  const op = req.opcode;
  req.lat = subsys.countIoOpcode(op);
  if (op === NvmOpcode.FLUSH && req.nsid === NSID_BROADCAST) {
    req.execute = executeFlushAll;
    return 0;
  }
  switch (op) {
    case NvmOpcode.READ:
    case NvmOpcode.WRITE:
    case NvmOpcode.COMPARE:
    case NvmOpcode.FLUSH:
    case NvmOpcode.WRITE_ZEROES:
    case NvmOpcode.DSM:
      break;
    case NvmOpcode.RESV_REGISTER:
    case NvmOpcode.RESV_REPORT:
    case NvmOpcode.RESV_ACQUIRE:
    case NvmOpcode.RESV_RELEASE:
      if (subsys.reservationsSupported) break;
      req.errorLoc = 0;
      return Status.INVALID_OPCODE | DNR;
    default:
      req.errorLoc = 0;
      return Status.INVALID_OPCODE | DNR;
  }
  const ns = subsys.namespaces.get(req.nsid);
  // A disabled namespace is inactive (NVMe Base 2.0 §3.2.1.4): Invalid Namespace, as nvmet_req_find_ns answers in
  // Linux 6.1 (a disabled nvmet_ns is not in subsys->namespaces there). A namespace masked from this host is the
  // same to it: it does not exist (docs/target.md, namespace masking).
  if (ns === undefined || !ns.enabled || (ns.hostMask !== undefined && !ns.hostMask.has(ctrl.hostnqn))) {
    req.errorLoc = 4;
    return Status.INVALID_NS | DNR;
  }
  req.ns = ns;
  // ANA state of the namespace's group on the controller's port (nvmet_check_ana_state).
  if (subsys.ana && q.port.anaStates.size > 0) {
    const st = q.port.anaState(ns.anaGroup);
    if (st === 'inaccessible') return Status.ANA_INACCESSIBLE;
    if (st === 'persistent-loss') return Status.ANA_PERSISTENT_LOSS;
    if (st === 'change') return Status.ANA_TRANSITION;
  }
  // Reservation commands follow their own rules (NVMe Base 2.0 §8.19); every other command meets the access table.
  if (op === NvmOpcode.RESV_REGISTER || op === NvmOpcode.RESV_REPORT || op === NvmOpcode.RESV_ACQUIRE || op === NvmOpcode.RESV_RELEASE) {
    return parseResvCmd(ctrl, req, ns);
  }
  const rs = ns.resv;
  if (rs.rtype !== 0) {
    const st = rs.checkAccess(ctrl.hostKey, op);
    if (st !== 0) {
      req.errorLoc = 0;
      return st;
    }
  }
  req.resvGen = rs.abortGen;
  if (ns.readOnly && (op === NvmOpcode.WRITE || op === NvmOpcode.WRITE_ZEROES || op === NvmOpcode.DSM)) {
    req.errorLoc = 0;
    return Status.NS_WRITE_PROTECTED;
  }
  switch (op) {
    case NvmOpcode.READ:
    case NvmOpcode.WRITE:
    case NvmOpcode.COMPARE: {
      const sqe = req.sqe;
      const slba = sqeSlba(sqe);
      const nlb = rd16(sqe, 48) + 1;
      if (slba + nlb > ns.nsze || rd32(sqe, 44) >= 0x20_0000) {
        req.errorLoc = 40;
        return Status.LBA_RANGE | DNR;
      }
      const len = nlb * ns.blockSize;
      const max = subsys.maxTransfer;
      if (max > 0 && len > max) {
        req.errorLoc = 48;
        return Status.INVALID_FIELD | DNR;
      }
      req.dataLen = len;
      req.dir = op === NvmOpcode.READ ? 'c2h' : 'h2c';
      req.execute = op === NvmOpcode.READ ? executeRead : op === NvmOpcode.WRITE ? executeWrite : executeCompare;
      return 0;
    }
    case NvmOpcode.FLUSH:
      req.execute = executeFlush;
      return 0;
    case NvmOpcode.WRITE_ZEROES: {
      const sqe = req.sqe;
      const slba = sqeSlba(sqe);
      const nlb = (sqe.readUInt16LE(48) as number) + 1;
      if (slba + nlb > ns.nsze) {
        req.errorLoc = 40;
        return Status.LBA_RANGE | DNR;
      }
      req.execute = executeWriteZeroes;
      return 0;
    }
    case NvmOpcode.DSM: {
      const nr = ((req.sqe.readUInt32LE(40) & 0xff) + 1) * 16;
      // nvmet_check_data_len_lte: the SGL must hold the NR+1 ranges; it may be longer (Linux 6.1 always sends a
      // 4096-byte range buffer whatever NR says), and only the first NR+1 ranges count.
      if (req.sglLen < nr) {
        req.errorLoc = 32;
        return Status.SGL_INVALID_DATA | DNR;
      }
      req.dataLen = req.sglLen;
      req.dir = 'h2c';
      req.execute = executeDsm;
      return 0;
    }
    default:
      return Status.INVALID_OPCODE | DNR;
  }
}

/** Completion with the I/O fault knobs (failNext, commandLatencyUs) applied. */
function finish(req: Request, status: number): void {
  if (!faulted(req)) deliver(req, status);
}

/**
 * The failNext knob: when armed, consumes one count and completes the command with the configured status instead.
 * Read and write paths call it before counting the transfer, so a failed command is a namespace error and not a
 * read/write (nor bytes or SMART units).
 */
function faulted(req: Request): boolean {
  const subsys = (req.queueRef as QueueModel | undefined)?.ctrl?.subsys;
  if (subsys === undefined || subsys.failRemaining <= 0) return false;
  subsys.failRemaining--;
  req.out = undefined;
  if (req.ns !== undefined) req.ns.counters.errors++;
  deliver(req, subsys.failStatus);
  return true;
}

/**
 * Status of a command aborted by a preempt-and-abort. DNR: the host lost its registration, so a silent retry would
 * hide the preemption from the application (and meet the new reservation anyway).
 */
const PREEMPT_ABORTED = Status.ABORTED_PREEMPT_ABORT | DNR;

/** Completes now, or after faults.commandLatencyUs. */
function deliver(req: Request, status: number): void {
  const q = req.queueRef as QueueModel;
  const lat = q.ctrl?.subsys.faults.commandLatencyUs ?? 0;
  if (lat > 0) {
    // Data a backend lends only for the callback or the task (ReadLent) must outlive the delay: keep a copy.
    if (req.outLent !== ReadLent.STABLE && req.out !== undefined) {
      req.out = [Buffer.concat(req.out)];
      req.outLent = ReadLent.STABLE;
    }
    // Node timers count whole ms from the loop's cached clock and can fire up to ~1 ms early: wait out the remainder.
    const due = performance.now() + lat / 1000;
    const fire = (): void => {
      const left = due - performance.now();
      if (left > 0) setTimeout(fire, left);
      else completeIo(q, req, status);
    };
    setTimeout(fire, lat / 1000);
    return;
  }
  completeIo(q, req, status);
}

/**
 * The completion itself. A command whose host was preempted with abort after it passed its access check completes
 * as aborted (NVMe Base 2.0 §8.19.8: Command Aborted due to Preempt and Abort); one compare when nothing was.
 */
function completeIo(q: QueueModel, req: Request, status: number): void {
  const ns = req.ns;
  if (ns !== undefined && ns.resv.abortGen > req.resvGen && q.ctrl !== undefined && ns.resv.aborted(q.ctrl.hostKey, req.resvGen)) {
    req.out = undefined;
    q.complete(req, PREEMPT_ABORTED);
    return;
  }
  q.complete(req, status);
}

function executeRead(req: Request): void {
  const ns = req.ns as Namespace;
  const off = sqeSlba(req.sqe) * ns.blockSize;
  // With data digests on the queue, the backend may hand back the data's CRC32C (RAM: from its block cache).
  const wantCrc = (req.queueRef as QueueModel | undefined)?.ops.dataDigest === true;
  // One callback per Request, made on its first read and kept while the transport recycles the Request: no closure
  // per command. A Request is recycled only after its completion, so the callback never outlives its command.
  const cb = (req.readDone ??= (err, bufs, crc, lent) => readDone(req, err, bufs, crc, lent));
  ns.backend.read(off, req.dataLen, cb, wantCrc);
}

function readDone(req: Request, err: Error | null, bufs: Buffer[], crc: number | undefined, lent: ReadLent | undefined): void {
  const ns = req.ns as Namespace;
  if (err) {
    ns.counters.errors++;
    return deliver(req, Status.READ_ERROR);
  }
  if (faulted(req)) return;
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

/** The command was aborted by a preempt-and-abort while it waited (for its data, or in the queue): do not run it. */
function abortedBeforeRun(req: Request): boolean {
  const ns = req.ns as Namespace;
  const ctrl = (req.queueRef as QueueModel | undefined)?.ctrl;
  if (ns.resv.abortGen <= req.resvGen || ctrl === undefined || !ns.resv.aborted(ctrl.hostKey, req.resvGen)) return false;
  deliver(req, PREEMPT_ABORTED);
  return true;
}

function executeWrite(req: Request): void {
  if (abortedBeforeRun(req)) return;
  const ns = req.ns as Namespace;
  const off = sqeSlba(req.sqe) * ns.blockSize;
  const fua = (rd32(req.sqe, SqeOffset.cdw12) & RwCdw12.FUA) !== 0;
  const len = req.dataLen;
  ns.backend.write(off, req.data ?? [], fua, (err) => {
    if (err) {
      ns.counters.errors++;
      return deliver(req, Status.WRITE_FAULT);
    }
    if (faulted(req)) return;
    ns.counters.writes++;
    ns.counters.bytesWritten += len;
    const ctrl = (req.queueRef as QueueModel | undefined)?.ctrl;
    if (ctrl !== undefined) {
      ctrl.smart.writeCmds++;
      ctrl.smart.bytesWritten += len;
    }
    deliver(req, 0);
  });
}

function executeCompare(req: Request): void {
  const ns = req.ns as Namespace;
  const off = sqeSlba(req.sqe) * ns.blockSize;
  ns.backend.read(off, req.dataLen, (err, bufs) => {
    if (err) return finish(req, Status.READ_ERROR);
    const a = Buffer.concat(bufs, req.dataLen);
    const b = Buffer.concat(req.data ?? [], req.dataLen);
    finish(req, a.equals(b) ? 0 : Status.COMPARE_FAILED);
  });
}

function executeFlush(req: Request): void {
  const ns = req.ns as Namespace;
  ns.backend.flush((err) => {
    if (err) {
      ns.counters.errors++;
      return deliver(req, Status.WRITE_FAULT);
    }
    if (faulted(req)) return;
    ns.counters.flushes++;
    deliver(req, 0);
  });
}

function executeFlushAll(req: Request): void {
  const subsys = (req.queueRef as QueueModel | undefined)?.ctrl?.subsys;
  const ctrl = (req.queueRef as QueueModel | undefined)?.ctrl;
  const ids = subsys === undefined || ctrl === undefined ? [] : subsys.visibleNsids(ctrl.hostnqn);
  const list = subsys === undefined ? [] : ids.map((id) => subsys.namespaces.get(id) as Namespace);
  let left = list.length;
  let status = 0;
  if (left === 0) return finish(req, 0);
  for (const ns of list) {
    ns.counters.flushes++;
    ns.backend.flush((err) => {
      if (err) status = Status.WRITE_FAULT;
      if (--left === 0) finish(req, status);
    });
  }
}

function executeWriteZeroes(req: Request): void {
  if (abortedBeforeRun(req)) return;
  const ns = req.ns as Namespace;
  const sqe = req.sqe;
  const slba = sqeSlba(sqe);
  const cdw12 = sqe.readUInt32LE(48);
  const nlb = (cdw12 & 0xffff) + 1;
  const fua = (cdw12 & RwCdw12.FUA) !== 0;
  ns.backend.writeZeroes(slba * ns.blockSize, nlb * ns.blockSize, (cdw12 & RwCdw12.DEAC) !== 0, (err) => {
    if (err) return finish(req, Status.WRITE_FAULT);
    if (fua) return ns.backend.flush((e2) => finish(req, e2 ? Status.WRITE_FAULT : 0));
    finish(req, 0);
  });
}

function executeDsm(req: Request): void {
  if (abortedBeforeRun(req)) return;
  const ns = req.ns as Namespace;
  if ((req.sqe.readUInt32LE(SqeOffset.cdw11) & DsmAttr.AD) === 0) return finish(req, 0);
  const nrBytes = ((req.sqe.readUInt32LE(40) & 0xff) + 1) * 16;
  const data = Buffer.concat(req.data ?? [], req.dataLen).subarray(0, nrBytes);
  const ranges: Array<{ off: number; len: number }> = [];
  for (let o = 0; o + 16 <= data.length; o += 16) {
    const nlb = data.readUInt32LE(o + 4);
    const slba = data.readUInt32LE(o + 8) + data.readUInt32LE(o + 12) * 0x1_0000_0000;
    if (nlb === 0) continue;
    if (slba + nlb > ns.nsze) {
      req.errorLoc = 40;
      return finish(req, Status.LBA_RANGE | DNR);
    }
    ranges.push({ off: slba * ns.blockSize, len: nlb * ns.blockSize });
  }
  const next = (i: number): void => {
    const r = ranges[i];
    if (r === undefined) return finish(req, 0);
    ns.backend.writeZeroes(r.off, r.len, true, (err) => (err ? finish(req, Status.WRITE_FAULT) : next(i + 1)));
  };
  next(0);
}
