// Fabrics commands as the host builds them (NVMe-oF 1.1 §3.3-3.5), thin over protocol/fabrics; CID and SGL are set by
// the queue pair.
import type { Buffer } from 'node:buffer';
import {
  ConnectCattr,
  CcShn,
  PropertyOffset,
  decodeDiscLogEntry,
  encodeCc,
  encodeConnectCmd,
  encodeConnectData,
  encodePropertyGetCmd,
  encodePropertySetCmd,
  uuidToBytes,
  type DiscLogEntry,
} from '../protocol/index.js';

/** Discovery log entry: the fields of NVMe-oF 1.1 Figure 35 the host needs to follow it (not EFLAGS, TSAS). */
export type DiscoveryEntry = Omit<DiscLogEntry, 'eflags' | 'tsas'>;

export const PROP = PropertyOffset;

export function connectCmd(c: { qid: number; sqsize: number; kato: number; disableSqflow: boolean }): Buffer {
  return encodeConnectCmd({ cid: 0, qid: c.qid, sqsize: c.sqsize, kato: c.kato, cattr: c.disableSqflow ? ConnectCattr.DISABLE_SQFLOW : 0 });
}

export function connectData(d: { hostid: string; cntlid: number; subnqn: string; hostnqn: string }): Buffer {
  return encodeConnectData({ hostid: uuidToBytes(d.hostid), cntlid: d.cntlid, subnqn: d.subnqn, hostnqn: d.hostnqn });
}

export function propertyGetCmd(offset: number, size: 4 | 8): Buffer {
  return encodePropertyGetCmd({ cid: 0, offset, size8: size === 8 });
}

export function propertySetCmd(offset: number, size: 4 | 8, value: bigint): Buffer {
  return encodePropertySetCmd({ cid: 0, offset, value, size8: size === 8 });
}

/** CC as Linux nvme_enable_ctrl writes it: CSS 0 (NVM), MPS 0 (4 KiB), AMS 0, IOSQES 6, IOCQES 4. */
export function ccValue(f: { en: boolean; shn?: number }): number {
  return encodeCc({ en: f.en, css: 0, mps: 0, ams: 0, shn: f.shn ?? CcShn.NONE, iosqes: 6, iocqes: 4 });
}

export function decodeDiscEntry(buf: Buffer): DiscoveryEntry {
  const { eflags: _eflags, tsas: _tsas, ...entry } = decodeDiscLogEntry(buf);
  return entry;
}
