// Fabrics commands (NVMe-oF 1.1 §3.3-3.5): Connect, Property Get/Set; nvmet fabrics-cmd.c is the model.
import { Buffer } from 'node:buffer';
import {
  CNTLID_DYNAMIC,
  CONNECT_DATA_SIZE,
  CONNECT_RECFMT,
  CapCss,
  ConnectCattr,
  ConnectCmdOffset,
  ConnectDataOffset,
  DNR,
  FabricsSqeOffset,
  FabricsType,
  NQN_FIELD_SIZE,
  NQN_MAX_LENGTH,
  PropertyAttrib,
  PropertyCmdOffset,
  PropertyOffset,
  SqeOffset,
  Status,
  connectInvalidParamDw0,
  connectResultDw0,
  decodeConnectData,
  encodeCap,
  validateNvmetName,
} from '../../../protocol/index.js';
import { fireFault } from '../fault-actions.js';
import { AuthCmdOffset, AuthFctype, checkAuthCmd, decodeAuthCmd } from '../../../protocol/auth/index.js';
import { QueueAuth } from '../auth.js';
import { TargetController, Csts, NVME_VS } from '../controller.js';
import type { QueueModel } from '../queue-model.js';
import type { Request } from '../request.js';

/** CAP.TO: 15 × 500 ms = 7.5 s, like nvmet. */
const CAP_TO = 15;

export function parseFabricsCmd(q: QueueModel, req: Request): number {
  const fctype = req.sqe[FabricsSqeOffset.fctype] as number;
  if (fctype === FabricsType.CONNECT) {
    if (q.state !== 'connecting') {
      req.errorLoc = FabricsSqeOffset.fctype;
      return Status.CMD_SEQ_ERROR | DNR;
    }
    req.dir = 'h2c';
    req.dataLen = CONNECT_DATA_SIZE;
    req.execute = executeConnect;
    return 0;
  }
  // NVMe-oF 1.1 §3.3: a queue accepts no other command until Connect binds it; nvmet answers a sequence error.
  if (q.state !== 'live' || q.ctrl === undefined) {
    req.errorLoc = FabricsSqeOffset.fctype;
    return Status.CMD_SEQ_ERROR | DNR;
  }
  // Authentication Send/Receive run on every queue, before and after authentication (nvmet_parse_fabrics_{admin,io}_cmd).
  if (fctype === AuthFctype.SEND || fctype === AuthFctype.RECEIVE) return parseAuthCmd(q, req, fctype);
  // NVMe Base 2.0 §8.13.1: until the queue is authenticated only Connect and the two authentication commands run.
  if (q.auth !== undefined && !q.auth.authenticated) {
    req.errorLoc = SqeOffset.opcode;
    return Status.AUTH_REQUIRED | DNR;
  }
  // Property Get/Set are admin-queue only (NVMe-oF 1.1 §3.4); Disconnect is unsupported like nvmet.
  if (q.qid !== 0) {
    req.errorLoc = FabricsSqeOffset.fctype;
    return Status.INVALID_OPCODE | DNR;
  }
  switch (fctype) {
    case FabricsType.PROPERTY_GET:
      req.execute = executePropertyGet;
      return 0;
    case FabricsType.PROPERTY_SET:
      req.execute = executePropertySet;
      return 0;
    default:
      req.errorLoc = FabricsSqeOffset.fctype;
      return Status.INVALID_OPCODE | DNR;
  }
}

/**
 * Authentication Send (05h) / Receive (06h): nvmet_execute_auth_send/receive. SECP/SPSP/TL checks first, then the
 * SGL length must equal TL/AL (nvmet_check_transfer_len, checked by the queue's SGL mapping).
 */
function parseAuthCmd(q: QueueModel, req: Request, fctype: number): number {
  const f = decodeAuthCmd(req.sqe);
  const bad = checkAuthCmd(f);
  if (bad !== null) {
    req.errorLoc = bad.errorLoc;
    return bad.status;
  }
  // No key for this host: the controller offers no authentication (ATR was not set), as a target without it would.
  if (q.auth === undefined) {
    req.errorLoc = FabricsSqeOffset.fctype;
    return Status.INVALID_OPCODE | DNR;
  }
  // TL / AL are 32 bits, and the target allocates that much (nvmet kmallocs it): no more than the host may size.
  if (f.length > (q.ctrl?.subsys.hostSizedMax ?? 0)) {
    req.errorLoc = AuthCmdOffset.LENGTH;
    return Status.INVALID_FIELD | DNR;
  }
  req.dataLen = f.length;
  if (fctype === AuthFctype.SEND) {
    req.dir = 'h2c';
    req.execute = executeAuthSend;
  } else {
    req.dir = 'c2h';
    req.execute = executeAuthReceive;
  }
  return 0;
}

function executeAuthSend(req: Request): void {
  const q = req.queueRef as QueueModel;
  const auth = q.auth as QueueAuth;
  const ctrl = q.ctrl as TargetController;
  // Rotated keys take effect at the next Negotiate; the admin queue's choice becomes the controller's (nvmet_setup_auth).
  const current = ctrl.subsys.kind === 'discovery' ? undefined : q.target.hostAuth.get(ctrl.hostnqn);
  auth.send(Buffer.concat(req.data ?? [], req.dataLen), current);
  if (q.qid === 0) ctrl.hostAuth = auth.hostAuth;
  q.complete(req, 0);
  afterAuthStep(q, auth);
}

function executeAuthReceive(req: Request): void {
  const q = req.queueRef as QueueModel;
  const auth = q.auth as QueueAuth;
  const r = auth.receive(req.dataLen);
  if (r.kind === 'status') {
    req.errorLoc = SqeOffset.cdw11;
    q.complete(req, r.status);
  } else {
    req.out = [r.payload];
    q.complete(req, 0);
  }
  afterAuthStep(q, auth);
}

/**
 * After AUTH_Failure1 went out or AUTH_Failure2 came in, nvmet calls nvmet_ctrl_fatal_error: the whole controller goes,
 * whichever queue failed. Deferred one turn so the Failure1 data and its completion are written first.
 */
function afterAuthStep(q: QueueModel, auth: QueueAuth): void {
  const concat = q.qid === 0 ? auth.takeConcat() : undefined;
  if (concat !== undefined && q.ctrl !== undefined) {
    const r = auth.result;
    const hook = q.target.onGeneratedPsk;
    const psks = [concat.generatedPsk];
    if (hook !== undefined && r !== null) hook({ hostnqn: q.ctrl.hostnqn, subnqn: q.ctrl.subsys.nqn, hashId: r.hashId, scC: concat.scC, psks });
    else for (const p of psks) p.fill(0);
  }
  if (!auth.failed) return;
  const ctrl = q.ctrl;
  if (ctrl === undefined) return;
  ctrl.csts |= Csts.CFS;
  setImmediate(() => ctrl.teardown('authentication failed'));
}

function invalidParam(req: Request, inData: boolean, offset: number): number {
  req.dw0 = connectInvalidParamDw0({ inData, offset });
  req.errorLoc = offset;
  return Status.CONNECT_INVALID_PARAM | DNR;
}

/**
 * Empty or over-long names are refused (NVMe Base 2.0 §4.5: 223 bytes, NUL-terminated in the 256-byte field). A name
 * that is not a well-formed NQN is looked up like any other, as nvmet_execute_admin_connect does (it only forces the
 * NUL terminator): a subsystem named "testnqn" is reachable, an unknown name gets "unknown subsystem".
 */
export function nqnProblem(nqn: string, field: Buffer): string | undefined {
  if (field.indexOf(0) < 0 || Buffer.byteLength(nqn) > NQN_MAX_LENGTH) return 'NQN longer than 223 bytes';
  const v = validateNvmetName(nqn);
  return v.ok ? undefined : v.reason;
}

/** Why a Connect is refused: the status to complete it with (dw0/errorLoc already set on the request) and a log line. */
interface Refusal {
  refused: number;
  reason: string;
}

type ConnectData = ReturnType<typeof decodeConnectData>;
type Subsys = NonNullable<ReturnType<QueueModel['target']['findSubsystem']>>;
type Logger = QueueModel['target']['logger'];

/** Connect Invalid Host (NVMe-oF 1.1 §3.3.1), pointing at HOSTNQN in the data. */
function invalidHost(req: Request, reason: string): Refusal {
  req.dw0 = connectInvalidParamDw0({ inData: true, offset: ConnectDataOffset.hostnqn });
  return { refused: Status.CONNECT_INVALID_HOST | DNR, reason };
}

function executeConnect(req: Request): void {
  const q = req.queueRef as QueueModel;
  const target = q.target;
  const sqe = req.sqe;
  const data = Buffer.concat(req.data ?? [], CONNECT_DATA_SIZE);
  const qid = sqe.readUInt16LE(ConnectCmdOffset.qid);
  const sqsize = sqe.readUInt16LE(ConnectCmdOffset.sqsize);
  const cd = decodeConnectData(data);
  const log = target.logger.child({ hostnqn: cd.hostnqn, subnqn: cd.subnqn, qid, peer: q.ops.peer });
  const admitted = admitConnect(req, q, cd, data, log);
  const ctrl = 'refused' in admitted ? admitted : bindController(req, q, admitted, cd, log);
  if ('refused' in ctrl) {
    target.stats.connectsFailed++;
    if (target.portHostLog(q.port).allow('connect')) log.warn({ status: `0x${ctrl.refused.toString(16)}` }, `connect refused: ${ctrl.reason}`);
    q.complete(req, ctrl.refused);
    return;
  }
  const subsys = ctrl.subsys;
  q.ctrl = ctrl;
  q.qid = qid;
  q.sqsize = sqsize;
  // CATTR bit2: SQ flow control disabled → SQHD 0xFFFF and C2H SUCCESS allowed (NVMe-oF 1.1 §3.3; NVMe-TCP 1.0 §3.3.4).
  q.sqflowDisabled = ((sqe[ConnectCmdOffset.cattr] as number) & ConnectCattr.DISABLE_SQFLOW) !== 0;
  q.sqhd = 0;
  ctrl.queues.set(qid, q);
  q.setState('live');
  target.stats.connectsOk++;
  const { atr, concat } = setupQueueAuth(q, ctrl, qid);
  req.dw0 = connectResultDw0({ cntlid: ctrl.cntlid, atr, ascr: q.ops.concatOnly === true });
  const generated = q.ops.tlsPsk?.type === 'G';
  log.info({ cntlid: ctrl.cntlid, sqsize, sqflowDisabled: q.sqflowDisabled, authRequired: atr, ...(concat !== 'none' ? { concat } : {}), ...(generated ? { tlsPsk: 'generated' } : {}) }, 'queue connected');
  // The subsystem's knob rules (connectLatencyMs: a completion delay) see the Connect once it is bound; the
  // target's rules saw it before it ran (CoreQueue.submit).
  if (subsys.faultRules.armed) subsys.faultRules.onCommand(q, req, fireFault);
  q.complete(req, 0);
}

/** The checks every Connect passes before a controller is looked at: format, names, host access, TLS, queue size. */
function admitConnect(req: Request, q: QueueModel, cd: ConnectData, data: Buffer, log: Logger): Subsys | Refusal {
  const target = q.target;
  const sqe = req.sqe;
  const recfmt = sqe.readUInt16LE(ConnectCmdOffset.recfmt);
  const qid = sqe.readUInt16LE(ConnectCmdOffset.qid);
  const sqsize = sqe.readUInt16LE(ConnectCmdOffset.sqsize);
  if (recfmt !== CONNECT_RECFMT) return { refused: Status.CONNECT_INCOMPATIBLE_FORMAT | DNR, reason: `record format ${recfmt}` };
  const subProblem = nqnProblem(cd.subnqn, data.subarray(ConnectDataOffset.subnqn, ConnectDataOffset.subnqn + NQN_FIELD_SIZE));
  if (subProblem !== undefined) return { refused: invalidParam(req, true, ConnectDataOffset.subnqn), reason: `subsystem NQN: ${subProblem}` };
  // An empty HOSTNQN (the SPDK host's perf and identify send one unless given hostnqn:) names no host. nvmet and SPDK's
  // nvmf_tgt admit it where any host is allowed, and so do we, with a warning; a subsystem with an allow list cannot
  // match it and refuses it as a host it does not know (NVMe-oF 1.1 §3.3.1, Connect Invalid Host). docs/peers.md.
  const emptyHost = cd.hostnqn === '';
  const hostProblem = emptyHost ? undefined : nqnProblem(cd.hostnqn, data.subarray(ConnectDataOffset.hostnqn, ConnectDataOffset.hostnqn + NQN_FIELD_SIZE));
  if (hostProblem !== undefined) return { refused: invalidParam(req, true, ConnectDataOffset.hostnqn), reason: `host NQN: ${hostProblem}` };
  const subsys = target.findSubsystem(cd.subnqn, q.port.id);
  if (subsys === undefined) return { refused: invalidParam(req, true, ConnectDataOffset.subnqn), reason: 'unknown subsystem' };
  if (!subsys.hostAllowed(cd.hostnqn)) return invalidHost(req, emptyHost ? 'empty host NQN, and the subsystem admits listed hosts only' : 'host not allowed');
  if (emptyHost && qid === 0) log.warn('empty host NQN admitted (the subsystem allows any host, as nvmet and SPDK nvmf_tgt do); give the host an NQN (SPDK: hostnqn: in the transport ID)');
  // Secure channel concatenation (TP 8018): a generated PSK names one host and subsystem; a cleartext connection on a
  // TLS 'required' port is there only to authenticate an admin queue with NEWTLSPSK (docs/tls.md).
  const psk = q.ops.tlsPsk;
  if (psk?.type === 'G' && (psk.hostnqn !== cd.hostnqn || psk.subnqn !== cd.subnqn)) return invalidHost(req, `the generated TLS PSK was made for host ${psk.hostnqn} and ${psk.subnqn}`);
  if (q.ops.concatOnly === true) {
    if (qid !== 0) return { refused: invalidParam(req, false, ConnectCmdOffset.qid), reason: 'cleartext I/O queue on a port that requires TLS (only the admin queue may authenticate in cleartext, for secure channel concatenation)' };
    if (subsys.kind === 'discovery' || target.hostAuth.get(cd.hostnqn) === undefined) {
      return invalidHost(req, 'cleartext connection on a port that requires TLS: secure channel concatenation needs a DH-HMAC-CHAP key for this host (hosts[].dhchapKey)');
    }
  }
  const mqes = subsys.maxQueueSize - 1;
  if (sqsize === 0 || sqsize > mqes) return { refused: invalidParam(req, false, ConnectCmdOffset.sqsize), reason: `sqsize ${sqsize} (MQES ${mqes})` };
  return subsys;
}

/** Admin queue: a new controller (NVMe-oF 1.1 §3.3: CNTLID FFFFh, dynamic model). I/O queue: the host's controller. */
function bindController(req: Request, q: QueueModel, subsys: Subsys, cd: ConnectData, log: Logger): TargetController | Refusal {
  const target = q.target;
  const qid = req.sqe.readUInt16LE(ConnectCmdOffset.qid);
  if (qid === 0) {
    if (cd.cntlid !== CNTLID_DYNAMIC) return { refused: invalidParam(req, true, ConnectDataOffset.cntlid), reason: `admin connect with cntlid ${cd.cntlid}` };
    // nvmet answers an exhausted cntlid range with Controller Busy; a configured cap is the same condition, sooner.
    if (subsys.controllers.size >= subsys.maxControllers) return { refused: Status.CONNECT_CTRL_BUSY | DNR, reason: `controller limit ${subsys.maxControllers} reached` };
    const cntlid = subsys.allocCntlid();
    if (cntlid === undefined) return { refused: Status.CONNECT_CTRL_BUSY | DNR, reason: 'no free controller ID' };
    const ctrl = new TargetController(target, subsys, cntlid, cd.hostnqn, Buffer.from(cd.hostid), q.port, req.sqe.readUInt32LE(ConnectCmdOffset.kato));
    // nvmet_setup_auth: discovery controllers never authenticate; a host with a key always does.
    if (subsys.kind !== 'discovery') ctrl.hostAuth = target.hostAuth.get(cd.hostnqn);
    subsys.controllers.set(cntlid, ctrl);
    ctrl.startKeepAlive();
    log.info({ cntlid, kato: ctrl.katoMs, discovery: ctrl.discovery }, 'controller created');
    return ctrl;
  }
  const found = subsys.controllers.get(cd.cntlid);
  if (!(found instanceof TargetController) || found.hostnqn !== cd.hostnqn || found.state === 'dead') return { refused: invalidParam(req, true, ConnectDataOffset.cntlid), reason: `no controller ${cd.cntlid} for this host` };
  if (found.discovery) return { refused: invalidParam(req, false, ConnectCmdOffset.qid), reason: 'I/O queue on a discovery controller' };
  if (qid > Math.min(found.grantedIoQueues, subsys.maxIoQueues)) return { refused: invalidParam(req, false, ConnectCmdOffset.qid), reason: `qid ${qid} beyond ${found.grantedIoQueues} granted I/O queues` };
  if (found.queues.has(qid)) return { refused: Status.CMD_SEQ_ERROR | DNR, reason: `duplicate qid ${qid}` };
  return found;
}

/**
 * ATR on the admin Connect and on every I/O Connect (nvmet_execute_{admin,io}_connect): Linux authenticates each queue.
 * A TLS session on a generated PSK is authenticated already (nvmet_has_auth is false on TLS queues); its admin queue
 * may re-authenticate with REPLACETLSPSK. A cleartext admin queue on a concatenation port may use NEWTLSPSK.
 */
function setupQueueAuth(q: QueueModel, ctrl: TargetController, qid: number): { atr: boolean; concat: 'none' | 'new' | 'replace' } {
  const hostAuth = ctrl.hostAuth;
  const port = q.port.config;
  const concatPort = port.tlsConcat === true && (port.tls ?? 'none') !== 'none';
  const concat: 'none' | 'new' | 'replace' = qid !== 0 || !concatPort ? 'none' : q.ops.tls === true ? 'replace' : 'new';
  const atr = hostAuth !== undefined && q.ops.tlsPsk?.type !== 'G';
  if (hostAuth !== undefined && (atr || qid === 0)) {
    q.auth = new QueueAuth({
      hostnqn: ctrl.hostnqn,
      subsysnqn: ctrl.subsys.nqn,
      auth: hostAuth,
      katoMs: ctrl.katoMs,
      stats: q.target.hostAuth.stats,
      logger: q.target.logger,
      hostLog: ctrl.hostLog,
      qid,
      cntlid: ctrl.cntlid,
      concat,
      ...(q.ops.concatOnly === true ? { concatRequired: true } : {}),
      ...(atr ? {} : { preAuthenticated: true }),
    });
  }
  return { atr, concat };
}

function capValue(q: QueueModel): bigint {
  const ctrl = q.ctrl as TargetController;
  // CSS: NVM (bit 37) and "one or more I/O command sets" (bit 43, NVMe Base 2.0 Figure 36), as nvmet sets both: the
  // Linux host then selects CC.CSS 110b and takes a namespace's command set from its CSI descriptor (a zoned one is
  // skipped without it, nvme_scan_ns). MPSMIN/MPSMAX 0 (4 KiB).
  return encodeCap({ mqes: ctrl.subsys.maxQueueSize - 1, to: CAP_TO, css: CapCss.NVM | CapCss.IO_CMD_SETS });
}

function executePropertyGet(req: Request): void {
  const q = req.queueRef as QueueModel;
  const ctrl = q.ctrl as TargetController;
  const size8 = ((req.sqe[PropertyCmdOffset.attrib] as number) & PropertyAttrib.SIZE_MASK) === PropertyAttrib.SIZE_8;
  const off = req.sqe.readUInt32LE(PropertyCmdOffset.offset);
  let val: bigint;
  switch (off) {
    case PropertyOffset.CAP:
      val = capValue(q);
      break;
    case PropertyOffset.VS:
      val = BigInt(NVME_VS);
      break;
    case PropertyOffset.CC:
      val = BigInt(ctrl.cc);
      break;
    case PropertyOffset.CSTS:
      val = BigInt(ctrl.csts);
      break;
    default:
      req.errorLoc = PropertyCmdOffset.offset;
      return q.complete(req, Status.INVALID_FIELD | DNR);
  }
  req.dw0 = Number(val & 0xffff_ffffn);
  req.dw1 = size8 ? Number(val >> 32n) : 0;
  q.complete(req, 0);
}

function executePropertySet(req: Request): void {
  const q = req.queueRef as QueueModel;
  const ctrl = q.ctrl as TargetController;
  const off = req.sqe.readUInt32LE(PropertyCmdOffset.offset);
  if (off !== PropertyOffset.CC) {
    req.errorLoc = PropertyCmdOffset.offset;
    return q.complete(req, Status.INVALID_FIELD | DNR);
  }
  const before = ctrl.csts;
  ctrl.writeCc(req.sqe.readUInt32LE(PropertyCmdOffset.value));
  if ((ctrl.csts & Csts.CFS) !== 0 && (before & Csts.CFS) === 0 && ctrl.hostLog.allow('cc_rejected')) {
    q.target.logger.warn({ cntlid: ctrl.cntlid, cc: `0x${ctrl.cc.toString(16)}` }, 'CC rejected: controller fatal status');
  }
  q.complete(req, 0);
}
