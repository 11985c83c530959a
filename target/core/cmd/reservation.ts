// Reservation Register / Report / Acquire / Release on I/O queues (NVMe Base 2.0 §7.2-§7.5, §8.19). Parse fixes
// the data length; execute decodes the payload and hands the decision to the namespace's ReservationState.
import { Buffer } from 'node:buffer';
import {
  DNR,
  NvmOpcode,
  RESV_ACQUIRE_DATA_SIZE,
  RESV_REGISTER_DATA_SIZE,
  RESV_RELEASE_DATA_SIZE,
  RESV_REPORT_EDS,
  SqeOffset,
  Status,
  decodeResvAcquireCdw10,
  decodeResvKey,
  decodeResvRegisterCdw10,
  decodeResvReleaseCdw10,
  encodeResvStatus,
} from '../../../protocol/index.js';
import type { TargetController } from '../controller.js';
import type { TargetNamespace } from '../namespace.js';
import type { QueueModel } from '../queue-model.js';
import type { Request } from '../request.js';
import type { ReservationState } from '../reservation.js';

/** Largest Reservation Report the target returns: header + 4095 extended entries is far above any real count. */
const MAX_REPORT_BYTES = 256 * 1024;

function complete(req: Request, status: number): void {
  (req.queueRef as QueueModel).complete(req, status);
}

function payload(req: Request, len: number): Buffer {
  const d = req.data ?? [];
  const first = d[0];
  if (d.length === 1 && first !== undefined && first.length >= len) return first;
  return Buffer.concat(d, req.dataLen);
}

/**
 * Register / Acquire / Release on `rs` for host `hostKey` (hostid: its 128-bit identifier) from CDW10 and the data
 * (the keys). The owner of the state runs this for its own queues and for commands a worker forwarded.
 */
export function runResvCommand(rs: ReservationState, hostKey: string, hostid: Buffer, opcode: number, cdw10: number, d: Buffer): number {
  switch (opcode) {
    case NvmOpcode.RESV_REGISTER:
      return rs.register(hostKey, hostid, { ...decodeResvRegisterCdw10(cdw10), crkey: decodeResvKey(d, 0), nrkey: decodeResvKey(d, 1) });
    case NvmOpcode.RESV_ACQUIRE:
      return rs.acquire(hostKey, { ...decodeResvAcquireCdw10(cdw10), crkey: decodeResvKey(d, 0), prkey: decodeResvKey(d, 1) });
    case NvmOpcode.RESV_RELEASE:
      return rs.release(hostKey, { ...decodeResvReleaseCdw10(cdw10), crkey: decodeResvKey(d, 0) });
    default:
      return Status.INVALID_OPCODE | DNR;
  }
}

/** Parse one of the four reservation opcodes for namespace `ns`; any other opcode is not ours (returns -1). */
export function parseResvCmd(ctrl: TargetController, req: Request, ns: TargetNamespace): number {
  switch (req.opcode) {
    case NvmOpcode.RESV_REGISTER:
      return needData(ctrl, req, RESV_REGISTER_DATA_SIZE, (r) => executeChange(ctrl, r, ns, RESV_REGISTER_DATA_SIZE));
    case NvmOpcode.RESV_ACQUIRE:
      return needData(ctrl, req, RESV_ACQUIRE_DATA_SIZE, (r) => executeChange(ctrl, r, ns, RESV_ACQUIRE_DATA_SIZE));
    case NvmOpcode.RESV_RELEASE:
      return needData(ctrl, req, RESV_RELEASE_DATA_SIZE, (r) => executeChange(ctrl, r, ns, RESV_RELEASE_DATA_SIZE));
    case NvmOpcode.RESV_REPORT:
      return parseReport(req, ns.resv);
    default:
      return -1;
  }
}

/**
 * A state-changing command. On a worker (subsys.resvForward) it goes to the owner, which answers once every worker
 * applied the result; on the owner it completes once the workers have the new state (subsys.resvCommit), so no
 * queue anywhere decides an I/O on the old state after the host saw the change.
 */
function executeChange(ctrl: TargetController, r: Request, ns: TargetNamespace, len: number): void {
  const sub = ctrl.subsys;
  const d = payload(r, len);
  const fwd = sub.resvForward;
  if (fwd !== undefined) {
    fwd(ctrl, ns.nsid, r.opcode, r.cdw(10), Buffer.from(d.subarray(0, len)), (status) => complete(r, status));
    return;
  }
  const shared = sub.resvShared;
  if (shared !== undefined) {
    // A gateway group: decided on the group's state in etcd, answered once committed (target/gateway/shared.ts).
    const { hostKey, hostid } = ctrl;
    const { opcode } = r;
    const cdw10 = r.cdw(10);
    const keys = Buffer.from(d.subarray(0, len));
    shared(ns.nsid, (rs) => runResvCommand(rs, hostKey, hostid, opcode, cdw10, keys)).then(
      (status) => complete(r, status),
      () => complete(r, Status.INTERNAL),
    );
    return;
  }
  const status = runResvCommand(ns.resv, ctrl.hostKey, ctrl.hostid, r.opcode, r.cdw(10), d);
  const commit = status === 0 ? sub.resvCommit?.(ns.nsid) : undefined;
  if (commit === undefined) return complete(r, status);
  commit.then(
    () => complete(r, 0),
    () => complete(r, Status.INTERNAL),
  );
}

/** Register/Acquire/Release carry their keys host → controller; the SGL must cover them (nvmet_copy_from_sgl). */
function needData(ctrl: TargetController, req: Request, len: number, exec: (r: Request) => void): number {
  if (req.sglLen < len) {
    req.errorLoc = SqeOffset.dptr;
    return Status.SGL_INVALID_DATA | DNR;
  }
  // The rest of a longer SGL is gathered too: no more than the host may size (Subsystem.hostSizedMax, MDTS).
  if (req.sglLen > ctrl.subsys.hostSizedMax) {
    req.errorLoc = SqeOffset.dptr;
    return Status.INVALID_FIELD | DNR;
  }
  req.dataLen = req.sglLen;
  req.dir = 'h2c';
  req.execute = exec;
  return 0;
}

function parseReport(req: Request, rs: ReservationState): number {
  const len = (req.cdw(10) + 1) * 4;
  // NVMe over Fabrics host identifiers are 128-bit (Connect HOSTID), so only the extended structure can carry them
  // (Base 2.0 §7.4: EDS cleared with 128-bit host identifiers → Host Identifier Inconsistent Format).
  if ((req.cdw(11) & RESV_REPORT_EDS) === 0) {
    req.errorLoc = SqeOffset.cdw11;
    return Status.HOST_ID_INCONSIST | DNR;
  }
  if (len > MAX_REPORT_BYTES) {
    req.errorLoc = SqeOffset.cdw10;
    return Status.INVALID_FIELD | DNR;
  }
  req.dataLen = len;
  req.dir = 'c2h';
  req.execute = (r) => {
    const full = encodeResvStatus(rs.status(), true);
    const out = Buffer.alloc(r.dataLen);
    full.copy(out, 0, 0, Math.min(full.length, out.length));
    r.out = [out];
    complete(r, 0);
  };
  return 0;
}
