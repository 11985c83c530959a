// Reading a discovery controller's log (NVMe-oF 1.1 §5.3; nvme-cli nvme_discovery_log): header first, entries in
// windows, then the header again; if GENCTR moved the log changed under us and the read starts over (bounded).
import { Buffer } from 'node:buffer';
import { DISC_LOG_ENTRY_SIZE, DISC_LOG_HEADER_SIZE, DiscLogHeaderOffset, LogPageId, encodeGetLogPageCmd } from '../protocol/index.js';
import type { AdminChannel } from './admin.js';
import { ControllerInitError } from './errors.js';
import { decodeDiscEntry, type DiscoveryEntry } from './fabrics-cmds.js';

/** Bytes of entries fetched per Get Log Page, as nvme-cli does. */
const WINDOW = 4096;
/** The second header read needs only GENCTR and NUMREC. */
const HEADER_RECHECK = 16;

async function getLog(admin: AdminChannel, lpo: bigint, length: number): Promise<Buffer> {
  const buf = Buffer.alloc(length);
  await admin.adminCmd({ sqe: encodeGetLogPageCmd({ cid: 0, lid: LogPageId.DISCOVERY, length, lpo }), c2h: buf });
  return buf;
}

/** The whole discovery log as one consistent GENCTR snapshot. */
export async function readDiscoveryLog(admin: AdminChannel, maxRetries = 10): Promise<{ genctr: bigint; entries: DiscoveryEntry[] }> {
  for (let attempt = 0; attempt < maxRetries; attempt++) {
    const head = await getLog(admin, 0n, DISC_LOG_HEADER_SIZE);
    const genctr = head.readBigUInt64LE(DiscLogHeaderOffset.genctr);
    const numrec = Number(head.readBigUInt64LE(DiscLogHeaderOffset.numrec));
    const total = numrec * DISC_LOG_ENTRY_SIZE;
    const body = Buffer.alloc(total);
    for (let off = 0; off < total; off += WINDOW) {
      (await getLog(admin, BigInt(DISC_LOG_HEADER_SIZE + off), Math.min(WINDOW, total - off))).copy(body, off);
    }
    const again = await getLog(admin, 0n, HEADER_RECHECK);
    if (again.readBigUInt64LE(DiscLogHeaderOffset.genctr) !== genctr) continue;
    const entries: DiscoveryEntry[] = [];
    for (let i = 0; i < numrec; i++) entries.push(decodeDiscEntry(body.subarray(i * DISC_LOG_ENTRY_SIZE, (i + 1) * DISC_LOG_ENTRY_SIZE)));
    return { genctr, entries };
  }
  throw new ControllerInitError('genctr', `discovery log kept changing over ${maxRetries} reads`);
}
