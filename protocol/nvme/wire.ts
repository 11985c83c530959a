/**
 * Little-endian field helpers shared by the NVMe and NVMe-oF structure codecs (NVMe Base 2.0 §1.5:
 * all multi-byte fields are little-endian). Encoders truncate values to the field width, as a C
 * struct assignment would; decoders read from windows that are zero-filled when the input is short,
 * so no decoder throws on short or garbage input.
 */
import { Buffer } from 'node:buffer';

/**
 * `size` bytes of `buf` starting at `offset`. When the buffer holds all of them this is a view
 * (no copy); otherwise it is a zero-filled copy of the bytes that exist, which is how every
 * fixed-size decoder in protocol/ treats short input.
 */
export function zeroFilledWindow(buf: Buffer, offset: number, size: number): Buffer {
  const off = Number.isSafeInteger(offset) && offset > 0 ? offset : 0;
  if (off + size <= buf.length) return buf.subarray(off, off + size);
  const out = Buffer.alloc(size);
  if (off < buf.length) buf.copy(out, 0, off, buf.length);
  return out;
}

/** Truncates to an unsigned 8-bit value. */
export function u8(v: number): number {
  return (Number.isFinite(v) ? v : 0) & 0xff;
}

/** Truncates to an unsigned 16-bit value. */
export function u16(v: number): number {
  return (Number.isFinite(v) ? v : 0) & 0xffff;
}

/** Truncates to an unsigned 32-bit value. */
export function u32(v: number): number {
  return (Number.isFinite(v) ? v : 0) >>> 0;
}

/** Truncates to an unsigned 64-bit value. */
export function u64(v: bigint): bigint {
  return BigInt.asUintN(64, v);
}

/** Reads a 128-bit little-endian unsigned integer (SMART counters, NVMCAP, TNVMCAP). */
export function readU128LE(buf: Buffer, offset: number): bigint {
  const lo = buf.readBigUInt64LE(offset);
  const hi = buf.readBigUInt64LE(offset + 8);
  return (hi << 64n) | lo;
}

/** Writes a 128-bit little-endian unsigned integer, truncating to 128 bits. */
export function writeU128LE(buf: Buffer, value: bigint, offset: number): void {
  const v = BigInt.asUintN(128, value);
  buf.writeBigUInt64LE(v & 0xffff_ffff_ffff_ffffn, offset);
  buf.writeBigUInt64LE(v >> 64n, offset + 8);
}

/** Reads a 24-bit little-endian unsigned integer (IEEE OUI). */
export function readU24LE(buf: Buffer, offset: number): number {
  return buf.readUIntLE(offset, 3);
}

/** Writes a 24-bit little-endian unsigned integer, truncating to 24 bits. */
export function writeU24LE(buf: Buffer, value: number, offset: number): void {
  buf.writeUIntLE((Number.isFinite(value) ? value : 0) & 0xff_ffff, offset, 3);
}

/**
 * Writes an ASCII string field padded with spaces (NVMe Base 2.0 §1.5.x "ASCII string": SN, MN,
 * FR are space padded, never NUL padded). Code units outside 0x20..0x7E become '?', because the
 * field must stay printable; the string is truncated to `len` bytes.
 */
export function writeSpacePadded(buf: Buffer, str: string, offset: number, len: number): void {
  buf.fill(0x20, offset, offset + len);
  const n = Math.min(str.length, len);
  for (let i = 0; i < n; i++) {
    const c = str.charCodeAt(i);
    buf[offset + i] = c >= 0x20 && c <= 0x7e ? c : 0x3f;
  }
}

/**
 * Reads an ASCII string field and drops trailing spaces and NULs (some devices NUL pad despite the
 * spec). latin1 never throws, whatever the bytes are.
 */
export function readTrimmedAscii(buf: Buffer, offset: number, len: number): string {
  let end = offset + len;
  while (end > offset && (buf[end - 1] === 0x20 || buf[end - 1] === 0x00)) end--;
  return buf.toString('latin1', offset, end);
}

/**
 * Writes a UTF-8 string NUL padded into `len` bytes, leaving at least one NUL terminator
 * (NVMe-oF 1.1 §3.3: NQN fields are NUL terminated within their 256 bytes).
 */
export function writeNulPadded(buf: Buffer, str: string, offset: number, len: number): void {
  buf.fill(0, offset, offset + len);
  buf.write(str, offset, len - 1, 'utf8');
}

/** Reads a UTF-8 string up to the first NUL (or the end of the field). */
export function readNulTerminated(buf: Buffer, offset: number, len: number): string {
  const end = offset + len;
  let stop = offset;
  while (stop < end && buf[stop] !== 0) stop++;
  return buf.toString('utf8', offset, stop);
}

/**
 * Reads an ASCII field that may be NUL or space padded (discovery log TRSVCID/TRADDR: nvmet NUL
 * pads, the spec calls it an ASCII string): stops at the first NUL, then drops trailing spaces.
 */
export function readNulOrSpacePadded(buf: Buffer, offset: number, len: number): string {
  const end = offset + len;
  let stop = offset;
  while (stop < end && buf[stop] !== 0) stop++;
  while (stop > offset && buf[stop - 1] === 0x20) stop--;
  return buf.toString('latin1', offset, stop);
}

/** Copies `src` into a `len`-byte field, zero padding or truncating. */
export function writeBytes(buf: Buffer, src: Uint8Array | undefined, offset: number, len: number): void {
  buf.fill(0, offset, offset + len);
  if (src !== undefined) Buffer.from(src.buffer, src.byteOffset, Math.min(src.length, len)).copy(buf, offset);
}

/** A copy (not a view) of `len` bytes, so decoded values never alias the receive buffer. */
export function copyBytes(buf: Buffer, offset: number, len: number): Buffer {
  return Buffer.from(buf.subarray(offset, offset + len));
}
