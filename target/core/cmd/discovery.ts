// Discovery controller commands (NVMe-oF 1.1 §5; nvmet discovery.c) and the per-host, per-port discovery log (LID 0x70).
import { Buffer } from 'node:buffer';
import { AdminOpcode, Adrfam, CNTLID_DYNAMIC, Cns, DISCOVERY_NQN, DNR, DiscSubtype, LogPageId, SqeOffset, Status, opcodeLabel, TcpSectype, Treq, Trtype, encodeDiscoveryLog, sliceLogPage, type DiscLogEntry } from '../../../protocol/index.js';
import type { TargetController } from '../controller.js';
import type { QueueModel } from '../queue-model.js';
import type { Request } from '../request.js';
import { checkLogArgs, decodeLogArgs, done, parseAsyncEvent, parseGetFeatures, parseIdentify, parseKeepAlive, parseSetFeatures } from './admin.js';

/** ASQSZ in discovery entries: the admin queue depth the Linux host uses (NVME_AQ_DEPTH). */
const ASQSZ = 32;

export function parseDiscoveryCmd(ctrl: TargetController, req: Request): number {
  const lat = ctrl.subsys.countOpcode(opcodeLabel('admin', req.opcode));
  if (req.opcode !== AdminOpcode.ASYNC_EVENT) req.lat = lat;
  switch (req.opcode) {
    case AdminOpcode.IDENTIFY: {
      const cns = req.sqe.readUInt32LE(SqeOffset.cdw10) & 0xff;
      if (cns !== Cns.CTRL) {
        req.errorLoc = SqeOffset.cdw10;
        return Status.INVALID_FIELD | DNR;
      }
      return parseIdentify(ctrl, req);
    }
    case AdminOpcode.GET_LOG_PAGE:
      return parseDiscLogPage(ctrl, req);
    case AdminOpcode.SET_FEATURES:
      return parseSetFeatures(ctrl, req);
    case AdminOpcode.GET_FEATURES:
      return parseGetFeatures(ctrl, req);
    case AdminOpcode.ASYNC_EVENT:
      return parseAsyncEvent(ctrl, req);
    case AdminOpcode.KEEP_ALIVE:
      return parseKeepAlive(ctrl, req);
    default:
      req.errorLoc = SqeOffset.opcode;
      return Status.INVALID_OPCODE | DNR;
  }
}

function parseDiscLogPage(ctrl: TargetController, req: Request): number {
  const a = decodeLogArgs(req);
  if (a.lid !== LogPageId.DISCOVERY) {
    req.errorLoc = SqeOffset.cdw10;
    return Status.INVALID_LOG_PAGE | DNR;
  }
  const bad = checkLogArgs(ctrl, req, a);
  if (bad !== 0) return bad;
  req.dir = 'c2h';
  req.dataLen = a.length;
  req.execute = (r) => {
    const q = r.queueRef as QueueModel;
    const full = buildDiscoveryLog(ctrl, q.ops.localAddress, q.ops.localPort);
    ctrl.logRead(a.lid, a.rae);
    r.out = [sliceLogPage(full, a.lpo, a.length)];
    done(r, 0);
  };
  return 0;
}

function isWildcard(addr: string): boolean {
  return addr === '0.0.0.0' || addr === '::' || addr === '';
}

function adrfamOf(addr: string): number {
  return addr.includes(':') ? Adrfam.IPV6 : Adrfam.IPV4;
}

/** Strip the IPv4-mapped prefix Node reports on dual-stack sockets. */
function plainAddr(addr: string): string {
  return addr.startsWith('::ffff:') && addr.includes('.') ? addr.slice(7) : addr;
}

/**
 * The log a given host sees on the port it is connected through (nvmet_execute_disc_get_log_page): the current
 * discovery subsystem first (SUBTYPE 3), then allowed subsystems exported on the port (SUBTYPE 2), then referrals (SUBTYPE 1).
 */
export function buildDiscoveryLog(ctrl: TargetController, localAddress: string, localPort: number): Buffer {
  const target = ctrl.target;
  const port = ctrl.port;
  const pc = port.config;
  const traddr = pc.advertiseAddr ?? (isWildcard(pc.addr) ? plainAddr(localAddress) : pc.addr);
  const trsvcid = String(pc.advertisePort ?? localPort);
  // TP 8011: a TLS port reports TSAS SECTYPE TLS 1.3 and TREQ secure channel required / not required (nvmet's
  // addr_treq); a cleartext port leaves both unspecified.
  const tlsMode = port.config.tls ?? 'none';
  const secure = tlsMode === 'required' ? Treq.REQUIRED : tlsMode === 'allowed' ? Treq.NOT_REQUIRED : Treq.NOT_SPECIFIED;
  const treq = (port.sqFlowDisable ? Treq.DISABLE_SQFLOW : 0) | secure;
  const base = { trtype: Trtype.TCP, adrfam: adrfamOf(traddr), treq, portid: port.id, cntlid: CNTLID_DYNAMIC, asqsz: ASQSZ, eflags: 0, trsvcid, traddr, tsas: { sectype: tlsMode === 'none' ? TcpSectype.NONE : TcpSectype.TLS13 } };
  const entries: DiscLogEntry[] = [{ ...base, subtype: DiscSubtype.CURRENT, subnqn: target.discoveryNqn }];
  for (const s of target.subsystems.values()) {
    if (!s.exportedOn(port.id) || !s.hostAllowed(ctrl.hostnqn)) continue;
    entries.push({ ...base, subtype: DiscSubtype.NVME, subnqn: s.nqn });
  }
  for (const r of port.referrals) {
    entries.push({
      ...base,
      adrfam: r.family === 'ipv6' ? Adrfam.IPV6 : r.family === 'ipv4' ? Adrfam.IPV4 : adrfamOf(r.addr),
      subtype: DiscSubtype.REFERRAL,
      portid: r.portId ?? port.id,
      subnqn: DISCOVERY_NQN,
      traddr: r.addr,
      trsvcid: String(r.port),
    });
  }
  return encodeDiscoveryLog({ genctr: target.genctr, entries });
}
