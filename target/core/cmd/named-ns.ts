// The namespace an admin command's NSID names, for commands that act on exactly one (Format NVM, FID 84h).
import { DNR, SqeOffset, Status } from '../../../protocol/index.js';
import type { TargetController } from '../controller.js';
import type { TargetNamespace } from '../namespace.js';
import type { Request } from '../request.js';

/** The namespace this host sees under the command's NSID, or Invalid Namespace (the broadcast NSID names none). */
export function namedNs(ctrl: TargetController, req: Request): TargetNamespace | number {
  const ns = ctrl.subsys.visibleNs(req.nsid, ctrl.hostnqn);
  if (ns === undefined) {
    req.errorLoc = SqeOffset.nsid;
    return Status.INVALID_NS | DNR;
  }
  return ns;
}
