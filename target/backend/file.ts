// File backend: an existing file or block device, or a file created/extended to a size. Callback fs API only: docs/performance.md (Baseline facts) measured it
// ~10x faster than FileHandle for 4 KiB reads; nothing here blocks the event loop. With a write fence (a gateway,
// docs/gateway-groups.md "Fencing at the storage call") every write-type operation goes through a writer thread
// that checks the lease deadline before each syscall instead (FencedWriter); reads stay on the pool either way.
import { Buffer } from 'node:buffer';
import fs from 'node:fs';
import path from 'node:path';
import { FencedWriter } from './fenced-writer.js';
import type { BackendSharing, IoCallback, NamespaceBackend, ReadCallback } from './types.js';
import type { WriteFence } from './write-fence.js';

const ZERO_SLAB = Buffer.alloc(1024 * 1024);

export interface FileBackendOptions {
  path: string;
  /** Create or extend the file to this many bytes; omitted: use the file's current size. */
  size?: number;
  readOnly?: boolean;
  /**
   * A gateway's lease deadline: writes run on a writer thread that refuses each one whose syscall would start after
   * it (FencedWriteError, code FENCED). Omitted: writes go to the libuv pool as they always did.
   */
  fence?: WriteFence;
}

export class FileBackend implements NamespaceBackend {
  readonly kind = 'file';
  #closed = false;
  /** Present with a fence: every write, Write Zeroes and FUA fdatasync runs there. */
  readonly #writer: FencedWriter | undefined;

  private constructor(
    readonly path: string,
    readonly fd: number,
    readonly size: number,
    fence: WriteFence | undefined,
  ) {
    this.#writer = fence === undefined ? undefined : new FencedWriter(fd, fence);
  }

  /** Whether writes go through the fence (workers open the file the same way: BackendSharing). */
  get fenced(): boolean {
    return this.#writer !== undefined;
  }

  static async open(opts: FileBackendOptions): Promise<FileBackend> {
    const exists = await fs.promises
      .stat(opts.path)
      .then((s) => s)
      .catch((e: NodeJS.ErrnoException) => {
        if (e.code === 'ENOENT') return undefined;
        throw e;
      });
    if (exists === undefined && opts.size === undefined) throw new Error(`${opts.path}: file does not exist and no size was given`);
    const block = exists?.isBlockDevice() === true;
    if (exists !== undefined && !exists.isFile() && !block) throw new Error(`${opts.path}: not a regular file or block device`);
    const flags = opts.readOnly === true ? 'r' : exists === undefined ? 'w+' : 'r+';
    const fd = await new Promise<number>((resolve, reject) => fs.open(opts.path, flags, 0o644, (err, f) => (err ? reject(err) : resolve(f))));
    let size = exists?.size ?? 0;
    if (block) {
      // A block device (nvmet's bdev namespace) has the size the kernel reports, and cannot be extended. Its I/O goes
      // through the page cache like a file's: O_DIRECT needs buffers aligned to the logical block size, which Node's
      // Buffer allocation does not promise.
      size = await blockDeviceBytes(opts.path).catch(async (err: unknown) => {
        await closeFd(fd);
        throw err;
      });
      if (opts.size !== undefined && opts.size > size) {
        await closeFd(fd);
        throw new Error(`${opts.path}: block device of ${size} bytes is smaller than the configured size ${opts.size}`);
      }
      return new FileBackend(opts.path, fd, opts.size ?? size, opts.readOnly === true ? undefined : opts.fence);
    }
    if (opts.size !== undefined && opts.size > size) {
      if (opts.readOnly === true) {
        await closeFd(fd);
        throw new Error(`${opts.path}: read-only file is smaller than the configured size`);
      }
      await new Promise<void>((resolve, reject) => fs.ftruncate(fd, opts.size, (err) => (err ? reject(err) : resolve())));
      size = opts.size;
    } else if (opts.size !== undefined) {
      size = opts.size;
    }
    return new FileBackend(opts.path, fd, size, opts.readOnly === true ? undefined : opts.fence);
  }

  read(offset: number, length: number, cb: ReadCallback): void {
    const buf = Buffer.allocUnsafe(length);
    const step = (done: number): void => {
      fs.read(this.fd, buf, done, length - done, offset + done, (err, n) => {
        if (err) return cb(err, []);
        // EOF inside the namespace (file shrunk underneath us): the rest reads as zeros.
        if (n === 0) {
          buf.fill(0, done);
          return cb(null, [buf]);
        }
        if (done + n < length) return step(done + n);
        cb(null, [buf]);
      });
    };
    step(0);
  }

  write(offset: number, data: readonly Buffer[], fua: boolean, cb: IoCallback): void {
    if (this.#writer !== undefined) return this.#writer.write(offset, data, fua, cb);
    const finish = (err: Error | null): void => {
      if (err || !fua) return cb(err);
      fs.fdatasync(this.fd, cb);
    };
    const bufs = data.filter((b) => b.length > 0);
    const writeFrom = (list: Buffer[], pos: number): void => {
      if (list.length === 0) return finish(null);
      fs.writev(this.fd, list, pos, (err, n) => {
        if (err) return finish(err);
        let total = 0;
        for (const b of list) total += b.length;
        if (n >= total) return finish(null);
        // Short write: drop what was written and continue (rare on regular files, but allowed by writev(2)).
        const rest: Buffer[] = [];
        let skip = n;
        for (const b of list) {
          if (skip >= b.length) {
            skip -= b.length;
            continue;
          }
          rest.push(skip > 0 ? b.subarray(skip) : b);
          skip = 0;
        }
        writeFrom(rest, pos + n);
      });
    };
    writeFrom(bufs, offset);
  }

  flush(cb: IoCallback): void {
    // On the libuv pool even when writes go through the fenced writer thread: a Flush writes nothing a fence must stop,
    // and it covers the writes completed before it (NVMe Base 2.0 §7.1), which the thread has already made.
    fs.fsync(this.fd, cb);
  }

  writeZeroes(offset: number, length: number, _deallocate: boolean, cb: IoCallback): void {
    // Node has no fallocate(PUNCH_HOLE); writing zeros gives the same read-back result.
    if (this.#writer !== undefined) return this.#writer.zeroes(offset, length, cb);
    const step = (off: number, left: number): void => {
      if (left === 0) return cb(null);
      const n = Math.min(left, ZERO_SLAB.length);
      fs.write(this.fd, ZERO_SLAB, 0, n, off, (err, w) => {
        if (err) return cb(err);
        step(off + w, left - w);
      });
    };
    step(offset, length);
  }

  sharing(): BackendSharing {
    return { kind: 'file', path: this.path, fenced: this.fenced };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // Writes already handed to the thread finish (or are refused) before the final fsync.
    await this.#writer?.close();
    await new Promise<void>((resolve) => fs.fsync(this.fd, () => resolve()));
    await closeFd(this.fd);
  }
}

/** A block device's size: its sysfs `size` counts 512-byte sectors whatever the logical block size (Linux). */
async function blockDeviceBytes(devPath: string): Promise<number> {
  const name = path.basename(await fs.promises.realpath(devPath));
  const sectors = Number((await fs.promises.readFile(`/sys/class/block/${name}/size`, 'utf8')).trim());
  if (!Number.isSafeInteger(sectors)) throw new Error(`${devPath}: cannot read its size from /sys/class/block/${name}/size`);
  return sectors * 512;
}

function closeFd(fd: number): Promise<void> {
  return new Promise((resolve) => fs.close(fd, () => resolve()));
}
