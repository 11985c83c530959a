// Admin commands of an I/O controller (NVMe Base 2.0 §5; nvmet admin-cmd.c): Identify, Get Log Page, features, AER, KA, Abort.
import { Buffer } from 'node:buffer';
import { ABORT_NOT_ABORTED, ANA_STATE_CODE, AdminOpcode, CmdEffects, Cns, Csi, DNR, FeatureId, IDENTIFY_DATA_SIZE, LogPageId, NidType, NvmOpcode, SqeOffset, Status, encodeActiveNsList, encodeAnaLog, encodeChangedNsList, encodeCmdEffectsLog, encodeErrorLog, encodeFwSlotLog, encodeIdentifyController, encodeIdentifyNamespace, encodeIdentifyNvmController, encodeNsDescList, encodeSmartLog, encodeResvNotifLog, selectActiveNsids, ONCS_RESERVATIONS, RESV_NOTIF_MASK_ALL, RESV_PERSIST_PTPL, Rescap, opcodeLabel, sliceLogPage, Cmic, Ctratt, Sgls, Nmic, NSID_BROADCAST, Oncs, Nwpc, NwpState, HOST_BEHAVIOR_SIZE, HostBehaviorOffset, FeatureEffects, encodeFeatureEffectsLog, encodeSupportedLogPages, Ocfs, Oacs } from '../../../protocol/index.js';
import { COPY_MCL, COPY_MSRC, COPY_MSSRL } from './io.js';
import { LBA_FORMATS, formatOffered, parseFormatNvm } from './format.js';
import { namedNs } from './named-ns.js';
import { type TargetController, MAX_AERS, NVME_VS } from '../controller.js';
import type { QueueModel } from '../queue-model.js';
import type { Request } from '../request.js';
import type { TargetNamespace } from '../namespace.js';
import { RESCAP_ALL, effectsLogFor, nsCsi, parseCsIdentify, setIocsProfile } from './iocs.js';

/** ANAGRPMAX / NANAGRPID, like nvmet NVMET_MAX_ANAGRPS. */
export const MAX_ANA_GROUPS = 128;

/** Admin opcodes this controller implements (effects log ACS). */
const ADMIN_SUPPORTED = [AdminOpcode.GET_LOG_PAGE, AdminOpcode.IDENTIFY, AdminOpcode.ABORT, AdminOpcode.SET_FEATURES, AdminOpcode.GET_FEATURES, AdminOpcode.ASYNC_EVENT, AdminOpcode.KEEP_ALIVE];

type Handler = (ctrl: TargetController, req: Request) => number;

export function parseAdminCmd(ctrl: TargetController, req: Request): number {
  const lat = ctrl.subsys.countOpcode(opcodeLabel('admin', req.opcode));
  // An AER stays posted until an event (minutes, hours): its "latency" would only swamp the histogram.
  if (req.opcode !== AdminOpcode.ASYNC_EVENT) req.lat = lat;
  const h = ADMIN[req.opcode];
  if (h === undefined) {
    req.errorLoc = SqeOffset.opcode;
    return Status.INVALID_OPCODE | DNR;
  }
  return h(ctrl, req);
}

const ADMIN: Readonly<Record<number, Handler>> = {
  [AdminOpcode.IDENTIFY]: parseIdentify,
  [AdminOpcode.GET_LOG_PAGE]: parseGetLogPage,
  [AdminOpcode.SET_FEATURES]: parseSetFeatures,
  [AdminOpcode.GET_FEATURES]: parseGetFeatures,
  [AdminOpcode.ASYNC_EVENT]: parseAsyncEvent,
  [AdminOpcode.KEEP_ALIVE]: parseKeepAlive,
  [AdminOpcode.ABORT]: parseAbort,
  [AdminOpcode.FORMAT_NVM]: parseFormatNvm,
};

/**
 * Abort (NVMe Base 2.0 §5.1): CDW10 SQID bits 15:0, CID bits 31:16. A command still waiting in its queue's transport
 * (for R2T data, or parked over the in-flight limit) is aborted: it completes with Command Abort Requested and never
 * runs, and the Abort's dw0 bit 0 is 0. Any other command (running, done, unknown, on a queue served by a target
 * worker) is not aborted (bit 0 set), as nvmet answers every Abort; SPDK aborts waiting commands the same way.
 */
function parseAbort(ctrl: TargetController, req: Request): number {
  const cdw10 = req.sqe.readUInt32LE(SqeOffset.cdw10);
  req.execute = (r) => {
    const aborted = ctrl.queues.get(cdw10 & 0xffff)?.abortWaiting?.(cdw10 >>> 16) ?? false;
    r.dw0 = aborted ? 0 : ABORT_NOT_ABORTED;
    done(r, 0);
  };
  return 0;
}

export function done(req: Request, status: number): void {
  (req.queueRef as QueueModel).complete(req, status);
}

/** Reply with a data buffer (C2H). */
function replyData(req: Request, buf: Buffer): void {
  req.out = [buf.length === req.dataLen ? buf : sliceLogPage(buf, 0n, req.dataLen)];
  done(req, 0);
}

// ---------------------------------------------------------------------------------------------
// Identify (NVMe Base 2.0 §5.17)

export function parseIdentify(ctrl: TargetController, req: Request): number {
  const cns = req.sqe.readUInt32LE(SqeOffset.cdw10) & 0xff;
  req.dir = 'c2h';
  req.dataLen = IDENTIFY_DATA_SIZE;
  switch (cns) {
    case Cns.NS:
      if (req.nsid === NSID_BROADCAST) {
        req.errorLoc = SqeOffset.nsid;
        return Status.INVALID_NS | DNR;
      }
      req.execute = (r) => replyData(r, identifyNs(ctrl, ctrl.subsys.visibleNs(r.nsid, ctrl.hostnqn)));
      return 0;
    case Cns.CTRL:
      req.execute = (r) => replyData(r, identifyController(ctrl));
      return 0;
    case Cns.NS_ACTIVE_LIST:
      if (req.nsid >= 0xffff_fffe) {
        req.errorLoc = SqeOffset.nsid;
        return Status.INVALID_NS | DNR;
      }
      req.execute = (r) => replyData(r, encodeActiveNsList(selectActiveNsids(ctrl.subsys.visibleNsids(ctrl.hostnqn), r.nsid)));
      return 0;
    case Cns.NS_DESC_LIST: {
      const ns = ctrl.subsys.visibleNs(req.nsid, ctrl.hostnqn);
      if (ns === undefined) {
        req.errorLoc = SqeOffset.nsid;
        return Status.INVALID_NS | DNR;
      }
      req.execute = (r) =>
        replyData(
          r,
          encodeNsDescList([
            { nidt: NidType.UUID, nid: ns.uuid },
            { nidt: NidType.NGUID, nid: ns.nguid },
            { nidt: NidType.CSI, nid: Buffer.from([nsCsi(ns)]) },
          ]),
        );
      return 0;
    }
    default: {
      const st = parseCsIdentify(ctrl, req, cns, replyData);
      if (st !== undefined) return st;
      req.errorLoc = SqeOffset.cdw10;
      return Status.INVALID_FIELD | DNR;
    }
  }
}

/** Identify Controller with the values nvmet reports (NVMe Base 2.0 §5.17.2.1; nvmet_execute_identify_ctrl). */
export function identifyController(ctrl: TargetController): Buffer {
  const s = ctrl.subsys;
  const port = ctrl.port;
  if (ctrl.discovery) {
    return encodeIdentifyController({
      sn: s.serial,
      mn: s.model,
      fr: s.firmware,
      cntlid: ctrl.cntlid,
      ver: NVME_VS,
      lpa: 0x04,
      maxcmd: s.maxQueueSize,
      sgls: Sgls.SUPPORTED | (port.inlineDataSize > 0 ? Sgls.OFFSET : 0),
      kas: 10,
      oaes: ctrl.supportedAens,
      cntrltype: 2,
      subnqn: ctrl.target.discoveryNqn,
      sqes: 0x66,
      cqes: 0x44,
      ioccsz: (64 + port.inlineDataSize) / 16,
      iorcsz: 1,
      msdbd: 1,
    });
  }
  const nn = s.nn;
  return encodeIdentifyController({
    sn: s.serial,
    mn: s.model,
    fr: s.firmware,
    rab: 6,
    oacs: formatOffered(ctrl) ? Oacs.FORMAT_NVM : 0,
    cmic: Cmic.MULTI_PORT | Cmic.MULTI_CTRL | (s.ana ? Cmic.ANA_REPORTING : 0),
    mdts: s.mdts,
    cntlid: ctrl.cntlid,
    ver: NVME_VS,
    oaes: ctrl.supportedAens,
    ctratt: Ctratt.HOST_ID_128 | Ctratt.TBKAS,
    cntrltype: 1,
    acl: 3,
    aerl: MAX_AERS - 1,
    frmw: 0x03,
    lpa: 0x07,
    elpe: 127,
    npss: 0,
    kas: 10,
    anatt: s.ana ? 10 : 0,
    anacap: s.ana ? 0x1f : 0,
    anagrpmax: s.ana ? MAX_ANA_GROUPS : 0,
    nanagrpid: s.ana ? MAX_ANA_GROUPS : 0,
    sqes: 0x66,
    cqes: 0x44,
    maxcmd: s.maxQueueSize,
    nn,
    // Write Uncorrectable only where its marks live in one process (Subsystem.mediaStateLocal).
    oncs: Oncs.COMPARE | Oncs.DSM | Oncs.WRITE_ZEROES | Oncs.VERIFY | Oncs.COPY | (s.mediaStateLocal ? Oncs.WRITE_UNCOR : 0) | (s.reservationsSupported ? ONCS_RESERVATIONS : 0),
    vwc: 0x01,
    // Fused Compare and Write where no other process writes the namespace (target/core/fused.ts).
    fuses: s.mediaStateLocal ? 1 : 0,
    // FID 84h where the state lives in one process; no Permanent Write Protect (a target restart is the power cycle).
    nwpc: s.mediaStateLocal ? Nwpc.WRITE_PROTECT | Nwpc.UNTIL_POWER_CYCLE : 0,
    // Copy Descriptor Formats 0h and 1h (executeCopy, target/core/cmd/io.ts).
    ocfs: Ocfs.FORMAT0 | Ocfs.FORMAT1,
    sgls: Sgls.SUPPORTED | (port.inlineDataSize > 0 ? Sgls.OFFSET : 0),
    mnan: s.ana ? nn : 0,
    subnqn: s.nqn,
    ioccsz: (64 + port.inlineDataSize) / 16,
    iorcsz: 1,
    icdoff: 0,
    fcatt: 0,
    msdbd: 1,
    ofcs: 0,
    psd0: { maxPower: 0x9c4, flags: 0, entryLatency: 0x10, exitLatency: 0x4, rrt: 0, rrl: 0, rwt: 0, rwl: 0 },
  });
}

/** Identify Namespace; an inactive NSID returns zeros with success (NVMe Base 2.0 §5.17.2.1, CNS 00h). */
export function identifyNs(ctrl: TargetController, ns: TargetNamespace | undefined): Buffer {
  if (ns === undefined) return Buffer.alloc(IDENTIFY_DATA_SIZE);
  const size = BigInt(ns.nsze);
  const st = ctrl.port.anaState(ns.anaGroup);
  const reachable = !ctrl.subsys.ana || (st !== 'inaccessible' && st !== 'persistent-loss');
  return encodeIdentifyNamespace({
    nsze: size,
    ncap: size,
    nuse: reachable ? size : 0n,
    // LBAF0 512-byte and LBAF1 4096-byte LBAs, both offered by Format NVM (target/core/cmd/format.ts).
    nlbaf: LBA_FORMATS.length - 1,
    flbas: LBA_FORMATS.indexOf(ns.blockSize as 512 | 4096),
    nmic: Nmic.SHARED,
    // DLFEAT: deallocated blocks read as zeroes (bits 2:0 = 1), Write Zeroes DEAC supported (bit 3).
    dlfeat: 0x09,
    anagrpid: ctrl.subsys.ana ? ns.anaGroup : 0,
    nsattr: ns.readOnly ? 1 : 0,
    rescap: ctrl.subsys.reservationsSupported ? RESCAP_ALL : 0,
    nguid: ns.nguid,
    mssrl: COPY_MSSRL,
    mcl: COPY_MCL,
    msrc: COPY_MSRC,
    lbaf: LBA_FORMATS.map((size) => ({ ms: 0, lbads: size === 4096 ? 12 : 9, rp: 0 })),
  });
}

// ---------------------------------------------------------------------------------------------
// Get Log Page (NVMe Base 2.0 §5.16)

interface LogArgs {
  lid: number;
  lsp: number;
  rae: boolean;
  lpo: bigint;
  length: number;
}

export function decodeLogArgs(req: Request): LogArgs {
  const cdw10 = req.sqe.readUInt32LE(40);
  const cdw11 = req.sqe.readUInt32LE(44);
  const numd = (((cdw11 & 0xffff) << 16) | (cdw10 >>> 16)) >>> 0;
  const lpo = (BigInt(req.sqe.readUInt32LE(52)) << 32n) | BigInt(req.sqe.readUInt32LE(48));
  return { lid: cdw10 & 0xff, lsp: (cdw10 >>> 8) & 0x7f, rae: (cdw10 & 0x8000) !== 0, lpo, length: (numd + 1) * 4 };
}

/**
 * The checks every Get Log Page passes (NVMe Base 2.0 §5.16): LPO dword-aligned, and NUMD within the transfer the
 * host may size (Subsystem.hostSizedMax; a transfer past MDTS is Invalid Field, Figure 275 MDTS). NUMD + 1 dwords
 * reach 2^34 bytes, past any SGL length, and each byte is allocated: the bound comes before anything is built.
 */
export function checkLogArgs(ctrl: TargetController, req: Request, a: LogArgs): number {
  if ((a.lpo & 3n) !== 0n) {
    req.errorLoc = SqeOffset.cdw12;
    return Status.INVALID_FIELD | DNR;
  }
  if (a.length > ctrl.subsys.hostSizedMax) {
    req.errorLoc = SqeOffset.cdw10;
    return Status.INVALID_FIELD | DNR;
  }
  return 0;
}

function parseGetLogPage(ctrl: TargetController, req: Request): number {
  const a = decodeLogArgs(req);
  const bad = checkLogArgs(ctrl, req, a);
  if (bad !== 0) return bad;
  req.dir = 'c2h';
  req.dataLen = a.length;
  let build: (() => Buffer) | undefined;
  switch (a.lid) {
    case LogPageId.SUPPORTED:
      build = () => encodeSupportedLogPages(supportedLogs(ctrl));
      break;
    case LogPageId.FEATURE_EFFECTS:
      build = () => encodeFeatureEffectsLog(featureEffects(ctrl));
      break;
    case LogPageId.ERROR:
      build = () => encodeErrorLog(ctrl.errors, 128);
      break;
    case LogPageId.SMART: {
      if (req.nsid !== NSID_BROADCAST && req.nsid !== 0 && ctrl.subsys.visibleNs(req.nsid, ctrl.hostnqn) === undefined) {
        req.errorLoc = SqeOffset.nsid;
        return Status.INVALID_NS | DNR;
      }
      build = () => smartLog(ctrl, req.nsid);
      break;
    }
    case LogPageId.FW_SLOT:
      build = () => encodeFwSlotLog({ afi: 1, frs: [ctrl.subsys.firmware] });
      break;
    case LogPageId.CHANGED_NS:
      build = () => encodeChangedNsList([...ctrl.changedNs].sort((x, y) => x - y));
      break;
    case LogPageId.CMD_EFFECTS: {
      // CSI in CDW14 bits 31:24 (NVMe Base 2.0 Figure 199): one log per command set.
      const log = effectsLogFor(req.sqe.readUInt32LE(SqeOffset.cdw14) >>> 24, ADMIN_SUPPORTED, ctrl.subsys.reservationsSupported, formatOffered(ctrl));
      if (log === undefined) {
        req.errorLoc = SqeOffset.cdw14;
        return Status.INVALID_FIELD | DNR;
      }
      build = () => log;
      break;
    }
    case LogPageId.RESV_NOTIF:
      // Each read takes the oldest entry off this controller's queue (NVMe Base 2.0 §5.16.1.24).
      build = () => encodeResvNotifLog(ctrl.resvLog.take());
      break;
    case LogPageId.ANA:
      if (!ctrl.subsys.ana) break;
      build = () => anaLog(ctrl, (a.lsp & 1) !== 0);
      break;
    default:
      break;
  }
  if (build === undefined) {
    req.errorLoc = SqeOffset.cdw10;
    return Status.INVALID_LOG_PAGE | DNR;
  }
  const make = build;
  req.execute = (r) => {
    const full = make();
    ctrl.logRead(a.lid, a.rae);
    r.out = [sliceLogPage(full, a.lpo, a.length)];
    done(r, 0);
  };
  return 0;
}

function u128(n: number): bigint {
  return BigInt(Math.trunc(n));
}

function smartLog(ctrl: TargetController, nsid: number): Buffer {
  const list = nsid === NSID_BROADCAST || nsid === 0 ? [...ctrl.subsys.namespaces.values()] : [ctrl.subsys.namespaces.get(nsid)].filter((n): n is TargetNamespace => n !== undefined);
  let br = 0;
  let bw = 0;
  let rc = 0;
  let wc = 0;
  for (const ns of list) {
    br += ns.counters.bytesRead;
    bw += ns.counters.bytesWritten;
    rc += ns.counters.reads;
    wc += ns.counters.writes;
  }
  // Data units are thousands of 512-byte units, rounded up (NVMe Base 2.0 Figure 207).
  return encodeSmartLog({
    compositeTemperature: 300,
    availableSpare: 100,
    availableSpareThreshold: 10,
    dataUnitsRead: u128(Math.ceil(br / 512_000)),
    dataUnitsWritten: u128(Math.ceil(bw / 512_000)),
    hostReadCommands: u128(rc),
    hostWriteCommands: u128(wc),
    powerCycles: 1n,
    powerOnHours: u128((Date.now() - ctrl.target.startedAt) / 3_600_000),
    numErrLogEntries: ctrl.errorCount,
  });
}

/** ANA log for the controller's port: group 1 always, plus every group holding a namespace (nvmet_execute_get_log_page_ana). */
export function anaLog(ctrl: TargetController, rgo: boolean): Buffer {
  const port = ctrl.port;
  const groups = new Map<number, number[]>([[1, []]]);
  for (const nsid of ctrl.subsys.visibleNsids(ctrl.hostnqn)) {
    const ns = ctrl.subsys.namespaces.get(nsid) as TargetNamespace;
    const g = groups.get(ns.anaGroup) ?? [];
    g.push(nsid);
    groups.set(ns.anaGroup, g);
  }
  const ids = [...groups.keys()].sort((a, b) => a - b);
  return encodeAnaLog(
    {
      chgcnt: port.anaChangeCount,
      groups: ids.map((id) => ({ grpid: id, chgcnt: port.anaChangeCount, state: ANA_STATE_CODE[port.anaState(id)], nsids: groups.get(id) ?? [] })),
    },
    { rgo },
  );
}

// ---------------------------------------------------------------------------------------------
// Features (NVMe Base 2.0 §5.27) and the rest

/** Which Set Features field a refusal points at, by its error location (the log line says why). */
const SET_FEATURES_FIELD: Readonly<Record<number, string>> = { 4: 'NSID', 40: 'CDW10 (FID)', 44: 'CDW11 (value)' };

export function parseSetFeatures(ctrl: TargetController, req: Request): number {
  const status = setFeature(ctrl, req);
  if (status !== 0 && ctrl.hostLog.allow('set_features')) {
    const fid = req.sqe.readUInt32LE(40) & 0xff;
    const cdw11 = req.sqe.readUInt32LE(44);
    ctrl.target.logger.warn(
      { cntlid: ctrl.cntlid, hostnqn: ctrl.hostnqn, fid: hex(fid, 2), cdw11: hex(cdw11, 8), status: hex(status, 4) },
      `Set Features refused: ${SET_FEATURES_FIELD[req.errorLoc] ?? `byte ${req.errorLoc}`} not accepted for FID ${hex(fid, 2)}`,
    );
  }
  return status;
}

function hex(v: number, digits: number): string {
  return `0x${(v >>> 0).toString(16).padStart(digits, '0')}`;
}

function setFeature(ctrl: TargetController, req: Request): number {
  const fid = req.sqe.readUInt32LE(40) & 0xff;
  const v = req.sqe.readUInt32LE(44);
  switch (fid) {
    case FeatureId.NUM_QUEUES: {
      const nsqr = v & 0xffff;
      const ncqr = v >>> 16;
      if (ctrl.discovery || nsqr === 0xffff || ncqr === 0xffff) {
        req.errorLoc = SqeOffset.cdw11;
        return Status.INVALID_FIELD | DNR;
      }
      req.execute = (r) => {
        const granted = Math.max(1, Math.min(Math.min(nsqr, ncqr) + 1, ctrl.subsys.maxIoQueues));
        ctrl.grantedIoQueues = granted;
        r.dw0 = ((granted - 1) | ((granted - 1) << 16)) >>> 0;
        done(r, 0);
      };
      return 0;
    }
    case FeatureId.KATO:
      req.execute = (r) => {
        ctrl.setKato(v);
        done(r, 0);
      };
      return 0;
    case FeatureId.ASYNC_EVENT:
      if ((v & ~ctrl.settableAens) !== 0) {
        req.errorLoc = SqeOffset.cdw11;
        return Status.INVALID_FIELD | DNR;
      }
      req.execute = (r) => {
        ctrl.aenEnabled = v >>> 0;
        r.dw0 = v >>> 0;
        done(r, 0);
      };
      return 0;
    case FeatureId.HOST_ID:
      req.errorLoc = SqeOffset.cdw10;
      return Status.CMD_SEQ_ERROR | DNR;
    case FeatureId.IOCS_PROFILE:
      return setIocsProfile(ctrl, req, v);
    case FeatureId.HOST_BEHAVIOR:
      return setHostBehavior(ctrl, req);
    case FeatureId.WRITE_PROTECT:
      return setWriteProtect(ctrl, req, v);
    case FeatureId.RESV_MASK: {
      // Reservation Notification Mask (NVMe Base 2.0 §5.27.1.22): per namespace, or every namespace with NSID FFFFFFFFh.
      if (ctrl.discovery || !ctrl.subsys.reservationsSupported || (v & ~RESV_NOTIF_MASK_ALL) !== 0) {
        req.errorLoc = SqeOffset.cdw11;
        return Status.INVALID_FIELD | DNR;
      }
      const ids = req.nsid === NSID_BROADCAST ? ctrl.subsys.visibleNsids(ctrl.hostnqn) : [req.nsid];
      if (req.nsid !== NSID_BROADCAST && ctrl.subsys.visibleNs(req.nsid, ctrl.hostnqn) === undefined) {
        req.errorLoc = SqeOffset.nsid;
        return Status.INVALID_NS | DNR;
      }
      req.execute = (r) => {
        for (const id of ids) ctrl.resvMask.set(id, v);
        r.dw0 = v >>> 0;
        done(r, 0);
      };
      return 0;
    }
    case FeatureId.RESV_PERSIST: {
      // Reservation Persistence (NVMe Base 2.0 §5.27.1.23): PTPL of one namespace; it is subsystem-wide state.
      const ns = resvFeatureNs(ctrl, req);
      if (typeof ns === 'number') return ns;
      req.execute = (r) => setPtpl(ctrl, r, ns, (v & RESV_PERSIST_PTPL) !== 0);
      return 0;
    }
    default:
      req.errorLoc = SqeOffset.cdw10;
      return Status.INVALID_FIELD | DNR;
  }
}

export function parseGetFeatures(ctrl: TargetController, req: Request): number {
  const fid = req.sqe.readUInt32LE(40) & 0xff;
  const v = req.sqe.readUInt32LE(44);
  let dw0: number | undefined;
  switch (fid) {
    case FeatureId.ARBITRATION:
    case FeatureId.POWER_MGMT:
    case FeatureId.ERR_RECOVERY:
    case FeatureId.IRQ_COALESCE:
    case FeatureId.IRQ_CONFIG:
    case FeatureId.WRITE_ATOMIC:
      dw0 = ctrl.discovery ? undefined : 0;
      break;
    case FeatureId.TEMP_THRESH:
      // Over-temperature threshold of the composite sensor, Kelvin (nvmet's default for NVMET_...: 0x157 = 343 K).
      dw0 = ctrl.discovery ? undefined : 0x157;
      break;
    case FeatureId.VOLATILE_WC:
      dw0 = ctrl.discovery ? undefined : 1;
      break;
    case FeatureId.NUM_QUEUES:
      dw0 = ctrl.discovery ? undefined : ((ctrl.grantedIoQueues - 1) | ((ctrl.grantedIoQueues - 1) << 16)) >>> 0;
      break;
    case FeatureId.ASYNC_EVENT:
      dw0 = ctrl.aenEnabled >>> 0;
      break;
    case FeatureId.KATO:
      dw0 = ctrl.katoMs;
      break;
    case FeatureId.IOCS_PROFILE:
      // The one I/O Command Set Combination, index 0 (iocs.ts IOCS_VECTOR).
      dw0 = ctrl.discovery ? undefined : 0;
      break;
    case FeatureId.HOST_ID:
      if ((v & 1) === 0) {
        req.errorLoc = SqeOffset.cdw11;
        return Status.INVALID_FIELD | DNR;
      }
      req.dir = 'c2h';
      req.dataLen = 16;
      req.execute = (r) => replyData(r, Buffer.from(ctrl.hostid));
      return 0;
    case FeatureId.HOST_BEHAVIOR:
      if (ctrl.discovery) break;
      req.dir = 'c2h';
      req.dataLen = HOST_BEHAVIOR_SIZE;
      req.execute = (r) => replyData(r, Buffer.from(ctrl.hostBehavior));
      return 0;
    case FeatureId.WRITE_PROTECT: {
      const ns = writeProtectNs(ctrl, req);
      if (typeof ns === 'number') return ns;
      // The config's readOnly reads as Write Protect; the host cannot lift it (setWriteProtect).
      dw0 = ns.writeProtect === NwpState.NONE && ns.readOnly ? NwpState.WRITE_PROTECT : ns.writeProtect;
      break;
    }
    case FeatureId.RESV_MASK:
    case FeatureId.RESV_PERSIST: {
      const ns = resvFeatureNs(ctrl, req);
      if (typeof ns === 'number') return ns;
      dw0 = fid === FeatureId.RESV_MASK ? (ctrl.resvMask.get(ns.nsid) ?? 0) : ns.resv.ptpl ? RESV_PERSIST_PTPL : 0;
      break;
    }
    default:
      break;
  }
  if (dw0 === undefined) {
    req.errorLoc = SqeOffset.cdw10;
    return Status.INVALID_FIELD | DNR;
  }
  const val = dw0;
  req.execute = (r) => {
    r.dw0 = val;
    done(r, 0);
  };
  return 0;
}

export function parseAsyncEvent(ctrl: TargetController, req: Request): number {
  req.execute = (r) => {
    if (ctrl.aers.length >= MAX_AERS) return done(r, Status.ASYNC_LIMIT | DNR);
    ctrl.aers.push(r);
    ctrl.deliverEvents();
  };
  return 0;
}

export function parseKeepAlive(ctrl: TargetController, req: Request): number {
  req.execute = (r) => {
    if (ctrl.katoMs === 0) return done(r, Status.KA_TIMEOUT_INVALID);
    ctrl.kaSeen = true;
    ctrl.lastKeepAliveAt = Date.now();
    // A Keep Alive is a command too. lastCommandAt comes from the monotonic clock (performance.timeOrigin + now(),
    // read once per received chunk), which drifts from Date.now() by milliseconds: without this the last command
    // could read as older than the last Keep Alive.
    if (ctrl.lastCommandAt < ctrl.lastKeepAliveAt) ctrl.lastCommandAt = ctrl.lastKeepAliveAt;
    done(r, 0);
  };
  return 0;
}

/**
 * Set Features Reservation Persistence (NVMe Base 2.0 §5.27.1.23): PTPL of one namespace, subsystem-wide state. In a
 * gateway group it is part of the group's reservation state (subsys.resvShared, target/gateway/shared.ts). With
 * target workers the Reservation Report (PTPLS) is answered from each worker's copy: complete once every worker has
 * the new state, as a Register/Acquire/Release does (subsys.resvCommit).
 */
function setPtpl(ctrl: TargetController, r: Request, ns: TargetNamespace, on: boolean): void {
  r.dw0 = on ? RESV_PERSIST_PTPL : 0;
  const shared = ctrl.subsys.resvShared;
  let commit: Promise<number> | undefined;
  if (shared !== undefined) {
    commit = shared(ns.nsid, (rs) => {
      rs.setPtpl(on);
      return 0;
    });
  } else {
    ns.resv.setPtpl(on);
    commit = ctrl.subsys.resvCommit?.(ns.nsid).then(() => 0);
  }
  if (commit === undefined) return done(r, 0);
  commit.then(
    (status) => done(r, status),
    () => done(r, Status.INTERNAL),
  );
}

/**
 * The namespace Reservation Persistence or the Reservation Notification Mask (features 83h/82h, NVMe Base 2.0
 * §5.27.1.22–23) names, or the status that refuses it: Invalid Field where reservations are not offered (target
 * workers), Invalid Namespace for one this host cannot see.
 */
function resvFeatureNs(ctrl: TargetController, req: Request): TargetNamespace | number {
  if (!ctrl.subsys.reservationsSupported) {
    req.errorLoc = SqeOffset.cdw10;
    return Status.INVALID_FIELD | DNR;
  }
  const ns = ctrl.discovery ? undefined : ctrl.subsys.visibleNs(req.nsid, ctrl.hostnqn);
  if (ns === undefined) {
    req.errorLoc = SqeOffset.nsid;
    return Status.INVALID_NS | DNR;
  }
  return ns;
}

// ---------------------------------------------------------------------------------------------
// Supported Log Pages (LID 00h), Feature Identifiers Supported and Effects (LID 12h), FID 16h and FID 84h

/** The log pages parseGetLogPage answers on an I/O controller (NVMe Base 2.0 §5.16.1.1; nvmet_execute_get_supported_log_pages). */
function supportedLogs(ctrl: TargetController): number[] {
  const lids: number[] = [LogPageId.SUPPORTED, LogPageId.ERROR, LogPageId.SMART, LogPageId.FW_SLOT, LogPageId.CHANGED_NS, LogPageId.CMD_EFFECTS, LogPageId.FEATURE_EFFECTS];
  if (ctrl.subsys.ana) lids.push(LogPageId.ANA);
  if (ctrl.subsys.reservationsSupported) lids.push(LogPageId.RESV_NOTIF);
  return lids;
}

/**
 * The features Get/Set Features answer on an I/O controller, with their scope and what a Set changes (NVMe Base 2.0
 * §5.16.1.17). Get-only ones (temperature threshold, volatile write cache, ...) are supported all the same.
 */
function featureEffects(ctrl: TargetController): number[] {
  const ctrlScope = FeatureEffects.FSUPP | FeatureEffects.CTRLSCP;
  const nsScope = FeatureEffects.FSUPP | FeatureEffects.NSCPE;
  const out: number[] = [];
  for (const fid of [FeatureId.ARBITRATION, FeatureId.POWER_MGMT, FeatureId.TEMP_THRESH, FeatureId.ERR_RECOVERY, FeatureId.VOLATILE_WC, FeatureId.NUM_QUEUES, FeatureId.IRQ_COALESCE, FeatureId.IRQ_CONFIG, FeatureId.WRITE_ATOMIC, FeatureId.ASYNC_EVENT, FeatureId.KATO, FeatureId.HOST_BEHAVIOR, FeatureId.HOST_ID, FeatureId.IOCS_PROFILE]) out[fid] = ctrlScope;
  if (ctrl.subsys.reservationsSupported) {
    out[FeatureId.RESV_MASK] = nsScope;
    out[FeatureId.RESV_PERSIST] = nsScope;
  }
  // Write protection changes what the namespace accepts (NCC), announced by the Namespace Attribute Changed notice.
  if (ctrl.subsys.mediaStateLocal) out[FeatureId.WRITE_PROTECT] = nsScope | FeatureEffects.NCC;
  return out;
}

/**
 * Set Features Host Behavior Support (FID 16h, NVMe Base 2.0 §5.27.1.18): the host's 512-byte structure, kept per
 * controller for Get Features. ACRE, ETDAS and LBAFEE are each 0 or 1 (SPDK's nvmf_ctrlr_set_features_host_behavior
 * refuses other values the same way); this controller retries nothing itself, so they change no behaviour here.
 */
function setHostBehavior(ctrl: TargetController, req: Request): number {
  if (ctrl.discovery) {
    req.errorLoc = SqeOffset.cdw10;
    return Status.INVALID_FIELD | DNR;
  }
  req.dir = 'h2c';
  req.dataLen = HOST_BEHAVIOR_SIZE;
  req.execute = (r) => {
    const data = Buffer.concat(r.data ?? [], HOST_BEHAVIOR_SIZE);
    for (const off of Object.values(HostBehaviorOffset)) {
      if ((data[off] as number) > 1) return done(r, Status.INVALID_FIELD | DNR);
    }
    data.copy(ctrl.hostBehavior);
    done(r, 0);
  };
  return 0;
}

/**
 * The namespace FID 84h names, or the status that refuses it: Invalid Field where write protection is not offered
 * (Subsystem.mediaStateLocal), Invalid Namespace for any NSID that is not one namespace this host sees (the broadcast
 * NSID included, as nvmet_set_feat_write_protect finds no namespace for it).
 */
function writeProtectNs(ctrl: TargetController, req: Request): TargetNamespace | number {
  if (ctrl.discovery || !ctrl.subsys.mediaStateLocal) {
    req.errorLoc = SqeOffset.cdw10;
    return Status.INVALID_FIELD | DNR;
  }
  return namedNs(ctrl, req);
}

/**
 * Set Features Namespace Write Protection Config (FID 84h; NVMe Base 2.0 §5.27.1.25 and "Namespace Write Protection"): No Write Protect, Write Protect, or
 * Write Protect Until Power Cycle (here: until the target restarts). Permanent Write Protect is not offered (NWPC), and
 * neither a namespace in Write Protect Until Power Cycle nor one the config makes read-only may change (Feature Not
 * Changeable). Completed writes are flushed before the namespace turns read-only, as nvmet_write_protect_flush_sync;
 * every controller that sees the namespace gets the Namespace Attribute Changed notice (NSATTR changed).
 */
function setWriteProtect(ctrl: TargetController, req: Request, v: number): number {
  const ns = writeProtectNs(ctrl, req);
  if (typeof ns === 'number') return ns;
  const wps = v & 0x7;
  if (wps !== NwpState.NONE && wps !== NwpState.WRITE_PROTECT && wps !== NwpState.UNTIL_POWER_CYCLE) {
    req.errorLoc = SqeOffset.cdw11;
    return Status.INVALID_FIELD | DNR;
  }
  if (ns.writeProtect === NwpState.UNTIL_POWER_CYCLE || (ns.config.readOnly ?? false)) {
    req.errorLoc = SqeOffset.cdw11;
    return Status.FEATURE_NOT_CHANGEABLE | DNR;
  }
  req.execute = (r) => {
    const apply = (): void => {
      const changed = ns.writeProtect !== wps;
      ns.setWriteProtect(wps);
      if (changed) ctrl.target.nsChanged(ctrl.subsys, ns.nsid);
      r.dw0 = wps;
      done(r, 0);
    };
    if (wps === NwpState.NONE) return apply();
    ns.backend.flush((err) => (err ? done(r, Status.WRITE_FAULT) : apply()));
  };
  return 0;
}
