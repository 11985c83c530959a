// Log pages and features a host reads or sets on demand (not during bring-up): Supported Log Pages (LID 00h), Feature
// Identifiers Supported and Effects (LID 12h), Host Behavior Support (FID 16h), Namespace Write Protection Config
// (FID 84h), Abort. As nvme-cli's `supported-log-pages`, `fid-support-effects-log`, `get-feature` / `set-feature` send them.
import { Buffer } from 'node:buffer';
import {
  ABORT_NOT_ABORTED,
  AdminOpcode,
  encodeSqe,
  FEATURE_EFFECTS_LOG_SIZE,
  FeatureId,
  HOST_BEHAVIOR_SIZE,
  LogPageId,
  NwpState,
  SUPPORTED_LOG_SIZE,
  decodeFeatureEffectsLog,
  decodeSupportedLogPages,
  encodeGetFeaturesCmd,
  encodeGetLogPageCmd,
  encodeSetFeaturesCmd,
} from '../protocol/index.js';
import type { AdminChannel } from './admin.js';
import { InvalidArgumentError } from './errors.js';

async function wholeLog(admin: AdminChannel, lid: number, length: number): Promise<Buffer> {
  const buf = Buffer.alloc(length);
  await admin.adminCmd({ sqe: encodeGetLogPageCmd({ cid: 0, lid, length, nsid: 0 }), c2h: buf });
  return buf;
}

/** The LIDs the controller reports in its Supported Log Pages log (NVMe Base 2.0 §5.16.1.1). */
export async function readSupportedLogPages(admin: AdminChannel): Promise<number[]> {
  return decodeSupportedLogPages(await wholeLog(admin, LogPageId.SUPPORTED, SUPPORTED_LOG_SIZE));
}

/** The 256 entries of the Feature Identifiers Supported and Effects log (NVMe Base 2.0 §5.16.1.17), by FID. */
export async function readFeatureEffects(admin: AdminChannel): Promise<number[]> {
  return decodeFeatureEffectsLog(await wholeLog(admin, LogPageId.FEATURE_EFFECTS, FEATURE_EFFECTS_LOG_SIZE));
}

/** The Host Behavior Support structure (FID 16h, NVMe Base 2.0 §5.27.1.18) as the controller holds it. */
export async function getHostBehavior(admin: AdminChannel): Promise<Buffer> {
  const buf = Buffer.alloc(HOST_BEHAVIOR_SIZE);
  await admin.adminCmd({ sqe: encodeGetFeaturesCmd({ cid: 0, fid: FeatureId.HOST_BEHAVIOR }), c2h: buf });
  return buf;
}

/** Sets the Host Behavior Support structure; `data` is the whole 512 bytes. */
export async function setHostBehavior(admin: AdminChannel, data: Buffer): Promise<void> {
  if (data.length !== HOST_BEHAVIOR_SIZE) throw new InvalidArgumentError('data', `must be ${HOST_BEHAVIOR_SIZE} bytes, got ${data.length}`);
  await admin.adminCmd({ sqe: encodeSetFeaturesCmd({ cid: 0, fid: FeatureId.HOST_BEHAVIOR, cdw11: 0 }), h2c: data });
}

/** A namespace's Write Protection State (FID 84h; NwpState). */
export async function getWriteProtect(admin: AdminChannel, nsid: number): Promise<number> {
  const c = await admin.adminCmd({ sqe: encodeGetFeaturesCmd({ cid: 0, fid: FeatureId.WRITE_PROTECT, nsid }) });
  return c.dw0 & 0x7;
}

/** Sets a namespace's Write Protection State (FID 84h); the controller's Namespace Attribute Changed notice follows. */
export async function setWriteProtect(admin: AdminChannel, nsid: number, state: NwpState): Promise<void> {
  await admin.adminCmd({ sqe: encodeSetFeaturesCmd({ cid: 0, fid: FeatureId.WRITE_PROTECT, nsid, cdw11: state }) });
}

/**
 * Abort (NVMe Base 2.0 §5.1) of command `cid` on submission queue `sqid`: true when the controller says it aborted
 * it (dw0 bit 0 clear); the aborted command then completes with ABORT_REQ.
 */
export async function abortCommand(admin: AdminChannel, sqid: number, cid: number): Promise<boolean> {
  if (!Number.isInteger(sqid) || sqid < 0 || sqid > 0xffff) throw new InvalidArgumentError('sqid', `must be 0..65535, got ${sqid}`);
  if (!Number.isInteger(cid) || cid < 0 || cid > 0xffff) throw new InvalidArgumentError('cid', `must be 0..65535, got ${cid}`);
  const c = await admin.adminCmd({ sqe: encodeSqe({ opcode: AdminOpcode.ABORT, cid: 0, cdw10: ((cid << 16) | sqid) >>> 0 }) });
  return (c.dw0 & ABORT_NOT_ABORTED) === 0;
}

/**
 * Format NVM (NVMe Base 2.0 §5.23) of namespace `nsid` to LBA format `lbaf` (the index into Identify Namespace's
 * LBAF list); `ses` 1 erases user data. The controller's Namespace Attribute Changed notice makes the host rescan.
 */
export async function formatNvm(admin: AdminChannel, nsid: number, lbaf: number, ses: 0 | 1 = 0): Promise<void> {
  if (!Number.isInteger(lbaf) || lbaf < 0 || lbaf > 63) throw new InvalidArgumentError('lbaf', `must be 0..63, got ${lbaf}`);
  const cdw10 = (lbaf & 0xf) | (ses << 9) | ((lbaf >> 4) << 12);
  await admin.adminCmd({ sqe: encodeSqe({ opcode: AdminOpcode.FORMAT_NVM, cid: 0, nsid, cdw10 }) });
}
