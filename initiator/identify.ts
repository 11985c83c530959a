// Identify Controller on connect and the gates a host applies to what it reports (Linux drivers/nvme/host/core.c
// nvme_init_identify + nvme_check_ctrl_fabric_info), plus the transfer and in-capsule limits derived from it.
import { Buffer } from 'node:buffer';
import { CntrlType, Cns, IDENTIFY_DATA_SIZE, SQE_SIZE, decodeIdentifyController, encodeIdentifyCmd, type IdentifyController, Sgls } from '../protocol/index.js';
import type { AdminChannel } from './admin.js';
import { ControllerInitError } from './errors.js';

/** MDTS 0 = unlimited; we still split at 1 MiB (Linux caps max_hw_sectors similarly for fabrics). */
export const DEFAULT_MAX_TRANSFER = 1 << 20;
/** Upper bound on one command's transfer whatever MDTS says. */
const MAX_TRANSFER_CAP = 64 << 20;
/** MDTS is in units of the minimum memory page size (CAP.MPSMIN 0: 4 KiB). */
const MPS_BYTES = 4096;

/** IOCCSZ is in 16-byte units and includes the 64-byte SQE (NVMe-oF 1.1 §4.1). */
const CCSZ_UNIT = 16;

export async function identifyController(admin: AdminChannel): Promise<IdentifyController> {
  const buf = Buffer.alloc(IDENTIFY_DATA_SIZE);
  await admin.adminCmd({ sqe: encodeIdentifyCmd({ cid: 0, cns: Cns.CTRL }), c2h: buf });
  return decodeIdentifyController(buf);
}

/** Reject a controller whose Identify data a Linux host would refuse; discovery controllers skip the I/O gates. */
export function checkIdentify(id: IdentifyController, cntlid: number, discovery: boolean): void {
  const io = !discovery;
  if (id.cntlid !== cntlid) throw new ControllerInitError('cntlid', `Identify reports ${id.cntlid}, Connect returned ${cntlid} (mismatched cntlid)`);
  if (io && id.kas === 0) throw new ControllerInitError('kas', 'keep-alive support (KAS) is 0 on an I/O controller');
  if (io && id.ioccsz < 4) throw new ControllerInitError('ioccsz', `IOCCSZ ${id.ioccsz} < 4`);
  if (io && id.iorcsz < 1) throw new ControllerInitError('iorcsz', `IORCSZ ${id.iorcsz} < 1`);
  if (id.icdoff !== 0) throw new ControllerInitError('icdoff', `ICDOFF ${id.icdoff} is not 0`);
  if ((id.sgls & Sgls.SUPPORT_MASK) === 0) throw new ControllerInitError('sgls', 'mandatory SGLs are not supported');
  if (io && id.maxcmd === 0) throw new ControllerInitError('maxcmd', 'MAXCMD is 0');
  if (io && id.cntrltype === CntrlType.DISCOVERY) throw new ControllerInitError('cntrltype', 'discovery controller behind an I/O subsystem NQN');
}

/** Largest transfer of one command in bytes (MDTS, 2^n minimum pages). */
export function maxTransferBytes(id: IdentifyController): number {
  return id.mdts === 0 ? DEFAULT_MAX_TRANSFER : Math.min(2 ** id.mdts * MPS_BYTES, MAX_TRANSFER_CAP);
}

/** In-capsule data an I/O queue may carry: IOCCSZ less the SQE, when the controller takes SGL offsets, else none. */
export function ioInlineLimit(id: IdentifyController): number {
  return (id.sgls & Sgls.OFFSET) !== 0 ? Math.max(0, id.ioccsz * CCSZ_UNIT - SQE_SIZE) : 0;
}
