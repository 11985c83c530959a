// UUID text form for the 16-byte UUID fields (Namespace Identification Descriptor NIDT 3, Host Identifier):
// RFC 9562 §4 8-4-4-4-12 hex groups, as nvme-cli and nvmet print them. NVMe Base 2.0 §5.17.2.3 (Figure 276).
import { Buffer } from 'node:buffer';

/** 16 bytes → "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (lower case). */
export function formatUuid(b: Buffer): string {
  const h = b.toString('hex', 0, 16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** UUID text (hyphens optional) → 16 bytes; throws on anything else. */
export function parseUuid(s: string): Buffer {
  const hex = s.replace(/-/g, '');
  if (!/^[0-9a-fA-F]{32}$/.test(hex)) throw new Error(`invalid UUID "${s}"`);
  return Buffer.from(hex, 'hex');
}
