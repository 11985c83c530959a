// I/O command sets (NVMe Base 2.0 §5.17.2, §8.8): the command-set Identify structures (CNS 05h, 06h, 07h, 08h, 1Ch),
// the CSI of each namespace, the per-CSI Commands Supported and Effects log, and the I/O Command Set Profile feature.
import { Buffer } from 'node:buffer';
import {
  AdminOpcode,
  CmdEffects,
  Cns,
  Csi,
  DNR,
  IDENTIFY_DATA_SIZE,
  NSTAT_READY,
  NSID_BROADCAST,
  Nmic,
  NvmOpcode,
  OZCS_RAZB,
  Rescap,
  SqeOffset,
  Status,
  ZNS_NO_LIMIT,
  encodeActiveNsList,
  encodeCmdEffectsLog,
  encodeIdentifyIndepNamespace,
  encodeIdentifyNvmController,
  encodeIdentifyZnsController,
  encodeIdentifyZnsNamespace,
  encodeIoCmdSetVectors,
  selectActiveNsids,
} from '../../../protocol/index.js';
import type { TargetController } from '../controller.js';
import type { TargetNamespace } from '../namespace.js';
import type { QueueModel } from '../queue-model.js';
import type { Request } from '../request.js';

/**
 * The one I/O Command Set Combination this controller offers (CNS 1Ch, index 0): NVM and Zoned (bits 0 and 2). The
 * I/O Command Set Profile feature (FID 19h) selects it and no other (NVMe Base 2.0 §5.27.1.21).
 */
export const IOCS_VECTOR = (1n << BigInt(Csi.NVM)) | (1n << BigInt(Csi.ZNS));

/** The command set a namespace belongs to (its CSI descriptor, NVMe Base 2.0 Figure 283). */
export function nsCsi(ns: TargetNamespace): number {
  return ns.zones !== undefined ? Csi.ZNS : Csi.NVM;
}

/** CSI of an Identify (CDW11 bits 31:24). */
function identifyCsi(req: Request): number {
  return req.sqe.readUInt32LE(SqeOffset.cdw11) >>> 24;
}

function invalidCsi(req: Request): number {
  req.errorLoc = SqeOffset.cdw11;
  return Status.INVALID_FIELD | DNR;
}

function invalidNsid(req: Request): number {
  req.errorLoc = SqeOffset.nsid;
  return Status.INVALID_NS | DNR;
}

/**
 * Identify CNS 05h, 06h, 07h, 08h and 1Ch: sets `req.execute` to build the structure, returns the status, or
 * undefined for any other CNS. `reply` sends a built structure (admin.ts's replyData).
 */
export function parseCsIdentify(ctrl: TargetController, req: Request, cns: number, reply: (r: Request, b: Buffer) => void): number | undefined {
  const csi = identifyCsi(req);
  switch (cns) {
    case Cns.CS_NS: {
      // Per command set namespace data; an inactive NSID gets zeros (NVMe Base 2.0 §5.17.2.6), a namespace of another
      // command set Invalid Field. A zoned namespace is also an NVM one (ZNS 1.1 §1.2: the Zoned set extends NVM).
      if (req.nsid === NSID_BROADCAST) return invalidNsid(req);
      if (csi !== Csi.NVM && csi !== Csi.ZNS) return invalidCsi(req);
      const ns = ctrl.subsys.visibleNs(req.nsid, ctrl.hostnqn);
      if (ns !== undefined && csi === Csi.ZNS && ns.zones === undefined) return invalidCsi(req);
      req.execute = (r) => reply(r, ns === undefined ? Buffer.alloc(IDENTIFY_DATA_SIZE) : csi === Csi.ZNS ? identifyZnsNs(ns) : identifyNvmNs());
      return 0;
    }
    case Cns.CS_CTRL:
      if (csi === Csi.NVM) req.execute = (r) => reply(r, encodeIdentifyNvmController({}));
      // ZASL 0: the Zone Append limit is MDTS (ZNS 1.1 Figure 49), which checkRw enforces for Zone Append as for Write.
      else if (csi === Csi.ZNS) req.execute = (r) => reply(r, encodeIdentifyZnsController({ zasl: 0 }));
      else return invalidCsi(req);
      return 0;
    case Cns.CS_NS_ACTIVE_LIST:
      if (req.nsid >= 0xffff_fffe) return invalidNsid(req);
      if (csi !== Csi.NVM && csi !== Csi.ZNS) return invalidCsi(req);
      req.execute = (r) => {
        const ids = ctrl.subsys.visibleNsids(ctrl.hostnqn).filter((id) => nsCsi(ctrl.subsys.namespaces.get(id) as TargetNamespace) === csi);
        reply(r, encodeActiveNsList(selectActiveNsids(ids, r.nsid)));
      };
      return 0;
    case Cns.CS_INDEP_NS: {
      if (req.nsid === NSID_BROADCAST) return invalidNsid(req);
      const ns = ctrl.subsys.visibleNs(req.nsid, ctrl.hostnqn);
      req.execute = (r) => reply(r, ns === undefined ? Buffer.alloc(IDENTIFY_DATA_SIZE) : identifyIndepNs(ctrl, ns));
      return 0;
    }
    case Cns.CS_VECTOR:
      req.execute = (r) => reply(r, encodeIoCmdSetVectors([IOCS_VECTOR]));
      return 0;
    default:
      return undefined;
  }
}

/** CNS 05h / CSI 00h: no extended LBA formats or protection (nvmet_execute_identify_ns_nvm returns it zeroed too). */
function identifyNvmNs(): Buffer {
  return Buffer.alloc(IDENTIFY_DATA_SIZE);
}

/** CNS 05h / CSI 02h (ZNS 1.1 §4.1.5.1): ZOC 0 (the Linux host refuses any), reads across zones, MAR/MOR, the zone size. */
function identifyZnsNs(ns: TargetNamespace): Buffer {
  const z = ns.zones as NonNullable<TargetNamespace['zones']>;
  return encodeIdentifyZnsNamespace({
    zoc: 0,
    ozcs: OZCS_RAZB,
    mar: z.maxActive === 0 ? ZNS_NO_LIMIT : z.maxActive - 1,
    mor: z.maxOpen === 0 ? ZNS_NO_LIMIT : z.maxOpen - 1,
    lbafe: [{ zsze: BigInt(z.zoneSize), zdes: 0 }],
  });
}

/** CNS 08h (NVMe Base 2.0 §5.17.2.9): what CNS 00h says of the namespace that no command set owns, and NSTAT ready. */
function identifyIndepNs(ctrl: TargetController, ns: TargetNamespace): Buffer {
  return encodeIdentifyIndepNamespace({
    nmic: Nmic.SHARED,
    rescap: ctrl.subsys.reservationsSupported ? RESCAP_ALL : 0,
    anagrpid: ctrl.subsys.ana ? ns.anaGroup : 0,
    nsattr: ns.readOnly ? 1 : 0,
    nstat: NSTAT_READY,
  });
}

/** All six reservation types, persistence through power loss, IEKEY as from revision 1.3 (CNS 00h and 08h RESCAP). */
export const RESCAP_ALL = Rescap.PTPL | Rescap.WRITE_EXCLUSIVE | Rescap.EXCLUSIVE_ACCESS | Rescap.WRITE_EXCLUSIVE_REG_ONLY | Rescap.EXCLUSIVE_ACCESS_REG_ONLY | Rescap.WRITE_EXCLUSIVE_ALL_REGS | Rescap.EXCLUSIVE_ACCESS_ALL_REGS | Rescap.IEKEY_X;

/** NVM command set I/O commands and their effects (NVMe Base 2.0 Figure 211); a zoned namespace has them too. */
function nvmEffects(iocs: number[], reservations: boolean): void {
  iocs[NvmOpcode.FLUSH] = CmdEffects.CSUPP;
  iocs[NvmOpcode.READ] = CmdEffects.CSUPP;
  iocs[NvmOpcode.COMPARE] = CmdEffects.CSUPP;
  iocs[NvmOpcode.WRITE] = CmdEffects.CSUPP | CmdEffects.LBCC;
  iocs[NvmOpcode.WRITE_ZEROES] = CmdEffects.CSUPP | CmdEffects.LBCC;
  iocs[NvmOpcode.DSM] = CmdEffects.CSUPP | CmdEffects.LBCC;
  iocs[NvmOpcode.VERIFY] = CmdEffects.CSUPP;
  iocs[NvmOpcode.WRITE_UNCOR] = CmdEffects.CSUPP | CmdEffects.LBCC;
  iocs[NvmOpcode.COPY] = CmdEffects.CSUPP | CmdEffects.LBCC;
  if (reservations) for (const op of [NvmOpcode.RESV_REGISTER, NvmOpcode.RESV_REPORT, NvmOpcode.RESV_ACQUIRE, NvmOpcode.RESV_RELEASE]) iocs[op] = CmdEffects.CSUPP;
}

/**
 * Commands Supported and Effects for command set `csi` (LID 05h, CSI in CDW14; NVMe Base 2.0 §5.16.1.6), or
 * undefined for a command set this controller does not offer. The Linux host reads CSI 02h and treats a zoned
 * namespace as read-only unless Zone Append is supported there (nvme_query_zone_info).
 */
export function effectsLogFor(csi: number, adminOps: readonly number[], reservations: boolean, formatNvm: boolean): Buffer | undefined {
  if (csi !== Csi.NVM && csi !== Csi.ZNS) return undefined;
  const acs: number[] = [];
  const iocs: number[] = [];
  for (const op of adminOps) acs[op] = CmdEffects.CSUPP;
  // Format NVM changes the LBA size (NCC) and, with User Data Erase, the data (LBCC); one namespace at a time.
  if (formatNvm) acs[AdminOpcode.FORMAT_NVM] = CmdEffects.CSUPP | CmdEffects.LBCC | CmdEffects.NCC | CmdEffects.CSE_SINGLE_NS;
  nvmEffects(iocs, reservations);
  if (csi === Csi.ZNS) {
    iocs[NvmOpcode.ZONE_MGMT_SEND] = CmdEffects.CSUPP | CmdEffects.LBCC;
    iocs[NvmOpcode.ZONE_MGMT_RECV] = CmdEffects.CSUPP;
    iocs[NvmOpcode.ZONE_APPEND] = CmdEffects.CSUPP | CmdEffects.LBCC;
  }
  return encodeCmdEffectsLog({ acs, iocs });
}

/**
 * Set Features I/O Command Set Profile (FID 19h, NVMe Base 2.0 §5.27.1.21): index 0 (CDW11 bits 8:0), the one
 * combination of CNS 1Ch, is accepted and changes nothing; any other is Invalid Field.
 */
export function setIocsProfile(ctrl: TargetController, req: Request, cdw11: number): number {
  if (ctrl.discovery || (cdw11 & 0x1ff) !== 0) {
    req.errorLoc = SqeOffset.cdw11;
    return Status.INVALID_FIELD | DNR;
  }
  req.execute = (r) => (r.queueRef as QueueModel).complete(r, 0);
  return 0;
}
