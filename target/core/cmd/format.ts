// Format NVM (NVMe Base 2.0 §5.23) between the two LBA formats every namespace reports: 0 (512-byte LBAs) and 1
// (4096-byte). The namespace is re-mapped under its NSID with the new block size, as a config change re-maps it
// (Subsystem.formatNs), so every controller gets the Namespace Attribute Changed notice and hosts revalidate.
import { DNR, SqeOffset, Status } from '../../../protocol/index.js';
import type { TargetController } from '../controller.js';
import type { QueueModel } from '../queue-model.js';
import type { Request } from '../request.js';
import { namedNs } from './named-ns.js';

/** The LBA formats of Identify Namespace (LBAF0, LBAF1) as LBA data sizes; the index is FLBAS. */
export const LBA_FORMATS: readonly (512 | 4096)[] = [512, 4096];

/** CDW10 fields: LBAFL bits 3:0, MSET bit 4, PI bits 7:5, PIL bit 8, SES bits 11:9, LBAFU bits 13:12. */
const Cdw10 = { LBAFL: 0xf, MSET_PI_PIL: 0x1f0, SES_SHIFT: 9, SES_MASK: 0x7, LBAFU_SHIFT: 12, LBAFU_MASK: 0x3 } as const;
/** Secure Erase Settings: none, User Data Erase (2: Cryptographic Erase, not offered; FNA bit 2 clear). */
const Ses = { NONE: 0, USER_DATA: 1 } as const;

/** Whether this subsystem offers Format NVM (OACS bit 1): its namespaces are managed here, outside a gateway group. */
export function formatOffered(ctrl: TargetController): boolean {
  return !ctrl.discovery && ctrl.subsys.formatNs !== undefined && ctrl.subsys.resvShared === undefined;
}

export function parseFormatNvm(ctrl: TargetController, req: Request): number {
  const format = ctrl.subsys.formatNs;
  if (!formatOffered(ctrl) || format === undefined) {
    req.errorLoc = SqeOffset.opcode;
    return Status.INVALID_OPCODE | DNR;
  }
  // One namespace at a time (FNA bit 0 clear): the broadcast NSID names none.
  const ns = namedNs(ctrl, req);
  if (typeof ns === 'number') return ns;
  const cdw10 = req.sqe.readUInt32LE(SqeOffset.cdw10);
  const lbaf = (cdw10 & Cdw10.LBAFL) | (((cdw10 >>> Cdw10.LBAFU_SHIFT) & Cdw10.LBAFU_MASK) << 4);
  const blockSize = LBA_FORMATS[lbaf];
  // No metadata and no protection information: only MSET, PI and PIL 0 exist.
  if (blockSize === undefined || (cdw10 & Cdw10.MSET_PI_PIL) !== 0) {
    req.errorLoc = SqeOffset.cdw10;
    return Status.INVALID_FORMAT | DNR;
  }
  const ses = (cdw10 >>> Cdw10.SES_SHIFT) & Cdw10.SES_MASK;
  if (ses !== Ses.NONE && ses !== Ses.USER_DATA) {
    req.errorLoc = SqeOffset.cdw10;
    return Status.INVALID_FIELD | DNR;
  }
  if (ns.readOnly) {
    req.errorLoc = SqeOffset.nsid;
    return Status.NS_WRITE_PROTECTED;
  }
  req.execute = (r) => {
    const q = r.queueRef as QueueModel;
    const remap = (): void => {
      format(ns.nsid, blockSize).then(
        () => q.complete(r, 0),
        (err: unknown) => {
          ctrl.target.logger.error({ err, subnqn: ctrl.subsys.nqn, nsid: ns.nsid }, 'Format NVM: re-mapping the namespace failed');
          q.complete(r, Status.INTERNAL);
        },
      );
    };
    if (ses !== Ses.USER_DATA) return remap();
    // User Data Erase: every block reads as zeroes afterwards, and Write Uncorrectable's marks go with the data.
    ns.backend.writeZeroes(0, ns.nsze * ns.blockSize, true, (err) => {
      if (err) return q.complete(r, Status.WRITE_FAULT);
      ns.uncor.set.clear();
      ns.uncor.save((e) => (e ? q.complete(r, Status.WRITE_FAULT) : remap()));
    });
  };
  return 0;
}
