// Writes to a connected TCP socket's descriptor without Node's stream machinery (docs/performance.md, "Sixth pass").
// The one file of connection/ that imports node:fs: its write/writev reach the socket's descriptor, never a file.
import type { Buffer } from 'node:buffer';
import { writeSync, writevSync } from 'node:fs';
import type net from 'node:net';

/**
 * One write (one chunk) or writev (several) system call on `socket`'s descriptor: the bytes the kernel took, 0 when
 * it took none (EAGAIN) or the call failed (the socket reports the error on its next stream write or read), -1 when
 * the socket has no descriptor (destroyed, or not connected yet). The descriptor is read from the live handle on
 * each call, so a number the kernel already reused for another file is never written. The descriptor is non-blocking
 * (libuv), so this never waits; the caller must know that the stream holds nothing, or bytes would pass queued ones.
 */
export function writeToDescriptor(socket: net.Socket, chunks: readonly Buffer[]): number {
  const h = (socket as unknown as { _handle: { fd?: number } | null })._handle;
  const fd = h === null ? -1 : (h.fd ?? -1);
  if (fd < 0) return -1;
  try {
    return chunks.length === 1 ? writeSync(fd, chunks[0] as Buffer) : writevSync(fd, chunks as Buffer[]);
  } catch {
    return 0;
  }
}
