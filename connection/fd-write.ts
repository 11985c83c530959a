// Writes to a connected TCP socket's descriptor without Node's stream machinery (docs/performance.md, "Sixth pass").
// The one file of connection/ that imports node:fs: its write/writev reach the socket's descriptor, never a file.
import type { Buffer } from 'node:buffer';
import { writeSync, writevSync } from 'node:fs';
import type net from 'node:net';

/**
 * Write `chunks` (`bytes` in all) with one write (one chunk) or writev (several) system call on `socket`'s descriptor,
 * skipping the stream machinery (Writable state, a WriteWrap, the after-write tick). True: the kernel took everything.
 * False: it took a prefix (`chunks` is trimmed to the rest in place) or nothing (EAGAIN; a failed call, which the
 * socket reports on its next stream write or read; or no descriptor: destroyed, or not connected yet); the caller
 * writes what is left through the stream. The descriptor is read from the live handle on each call, so a number the
 * kernel already reused for another file is never written; it is non-blocking (libuv), so this never waits. The
 * caller must know that the stream holds nothing, or these bytes would pass queued ones.
 */
export function writeToDescriptor(socket: net.Socket, chunks: Buffer[], bytes: number): boolean {
  const h = (socket as unknown as { _handle: { fd?: number } | null })._handle;
  const fd = h === null ? -1 : (h.fd ?? -1);
  if (fd < 0) return false;
  let n: number;
  try {
    n = chunks.length === 1 ? writeSync(fd, chunks[0] as Buffer) : writevSync(fd, chunks);
  } catch {
    return false;
  }
  if (n === bytes) return true;
  let i = 0;
  while (n >= (chunks[i] as Buffer).length) n -= (chunks[i++] as Buffer).length;
  chunks.splice(0, i);
  if (n > 0) chunks[0] = (chunks[0] as Buffer).subarray(n);
  return false;
}
