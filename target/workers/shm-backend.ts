// RAM namespace that several worker processes share: a file on tmpfs (/dev/shm), read and written with synchronous
// pread/pwrite. Node 20 has no mmap and no memory shared between processes (SharedArrayBuffer stays inside one
// process), so the page cache of a tmpfs file is the memory every worker reaches; docs/target.md ("Target workers")
// gives the measurement behind synchronous calls (no thread-pool hop, nothing ever waits on a disk).
import { Buffer } from 'node:buffer';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { IoCallback, NamespaceBackend, ReadCallback } from '../backend/index.js';

const ZERO_SLAB = Buffer.alloc(256 * 1024);
/** Initial size of the one read buffer (grown to the largest read seen). */
const READ_BUF = 128 * 1024;

let seq = 0;
const NAME = /^nvme-tcp-ts-(\d+)-\d+\.ram$/;

/** Whether process `pid` exists (EPERM: it does, someone else's). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Remove shared namespaces left by primaries that no longer run (killed before they could unlink, or from a system
 * without /proc). A file whose pid is alive is kept, even if that pid now belongs to an unrelated process.
 */
export function sweepStale(dir = shmDir()): string[] {
  const removed: string[] = [];
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return removed;
  }
  for (const n of names) {
    const m = NAME.exec(n);
    if (m === null || Number(m[1]) === process.pid || alive(Number(m[1]))) continue;
    try {
      fs.rmSync(path.join(dir, n), { force: true });
      removed.push(n);
    } catch {
      // Not ours to remove (another user's file): leave it.
    }
  }
  return removed;
}

/** Where shared namespaces live: /dev/shm when present (tmpfs on Linux), else the temp directory. */
export function shmDir(): string {
  try {
    if (fs.statSync('/dev/shm').isDirectory()) return '/dev/shm';
  } catch {
    // No /dev/shm: fall back below.
  }
  return os.tmpdir();
}

export class ShmBackend implements NamespaceBackend {
  readonly kind = 'ram';
  /**
   * Every read lands in the same buffer, valid until the callback returns. Fresh memory per read (the first design:
   * views carved from new 1 MiB slabs) page-faulted on every 4 KiB read, ~3–8 µs each here, more than the read itself;
   * the transport copies a lent payload into its pooled send buffers instead (docs/target.md, "Target workers").
   */
  readonly transientReads = true;
  #closed = false;
  #buf: Buffer = Buffer.allocUnsafeSlow(READ_BUF);

  private constructor(
    /** What an opener opens: /proc/<creator>/fd/<fd> once the name is unlinked, else the file's name. */
    readonly path: string,
    readonly fd: number,
    readonly size: number,
    /** The file's name while it still has one (the creator unlinks it on close). */
    readonly linked: string | undefined,
  ) {}

  /**
   * A new zero-filled (sparse) shared namespace of `size` bytes, owned by the caller. Where /proc can reopen the
   * open file, its name is unlinked at once and openers use /proc/<pid>/fd/<fd>: the memory then goes with the last
   * process that holds it, so a SIGKILLed primary and its workers leave nothing in /dev/shm. Stale files of dead
   * primaries (older versions, systems without /proc) are swept first.
   */
  static create(size: number, dir = shmDir()): ShmBackend {
    sweepStale(dir);
    const p = path.join(dir, `nvme-tcp-ts-${process.pid}-${++seq}.ram`);
    const fd = fs.openSync(p, 'w+', 0o600);
    try {
      fs.ftruncateSync(fd, size);
    } catch (err) {
      fs.closeSync(fd);
      fs.rmSync(p, { force: true });
      throw err;
    }
    const proc = `/proc/${process.pid}/fd/${fd}`;
    let reopenable = false;
    try {
      fs.closeSync(fs.openSync(proc, 'r+'));
      reopenable = true;
    } catch {
      // No /proc (or not reopenable here): keep the name until close.
    }
    if (!reopenable) return new ShmBackend(p, fd, size, p);
    fs.rmSync(p, { force: true });
    return new ShmBackend(proc, fd, size, undefined);
  }

  /** Open an existing shared namespace (a worker). */
  static open(p: string, size: number): ShmBackend {
    const fd = fs.openSync(p, 'r+');
    return new ShmBackend(p, fd, size, undefined);
  }

  read(offset: number, length: number, cb: ReadCallback): void {
    if (length > this.#buf.length) this.#buf = Buffer.allocUnsafeSlow(length);
    const buf = this.#buf.subarray(0, length);
    let done = 0;
    try {
      while (done < length) {
        const n = fs.readSync(this.fd, buf, done, length - done, offset + done);
        if (n === 0) {
          buf.fill(0, done);
          break;
        }
        done += n;
      }
    } catch (err) {
      return cb(err as Error, []);
    }
    cb(null, [buf]);
  }

  write(offset: number, data: readonly Buffer[], _fua: boolean, cb: IoCallback): void {
    // FUA needs nothing more: RAM is as durable as it gets once the copy is in the page cache.
    try {
      // One pwritev for a command's pieces (in-capsule data or H2CData PDUs): one system call instead of one per piece
      // (docs/target.md, "Target workers"). A short write (not seen on tmpfs) continues piece by piece.
      let total = 0;
      for (const b of data) total += b.length;
      const n = data.length === 1 ? 0 : fs.writevSync(this.fd, data as Buffer[], offset);
      if (n < total) {
        let pos = offset;
        let skip = n;
        for (const b of data) {
          if (skip >= b.length) {
            skip -= b.length;
            pos += b.length;
            continue;
          }
          let off = skip;
          skip = 0;
          while (off < b.length) off += fs.writeSync(this.fd, b, off, b.length - off, pos + off);
          pos += b.length;
        }
      }
    } catch (err) {
      return cb(err as Error);
    }
    cb(null);
  }

  flush(cb: IoCallback): void {
    cb(null);
  }

  writeZeroes(offset: number, length: number, _deallocate: boolean, cb: IoCallback): void {
    try {
      let off = offset;
      let left = length;
      while (left > 0) {
        const n = fs.writeSync(this.fd, ZERO_SLAB, 0, Math.min(left, ZERO_SLAB.length), off);
        off += n;
        left -= n;
      }
    } catch (err) {
      return cb(err as Error);
    }
    cb(null);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    fs.closeSync(this.fd);
    if (this.linked !== undefined) fs.rmSync(this.linked, { force: true });
  }
}
