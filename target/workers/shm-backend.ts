// RAM namespace that several worker processes share: a file on tmpfs (/dev/shm), read and written with synchronous
// pread/pwrite. Node 20 has no mmap and no memory shared between processes (SharedArrayBuffer stays inside one
// process), so the page cache of a tmpfs file is the memory every worker reaches; docs/target.md ("Target workers")
// gives the measurement behind synchronous calls (no thread-pool hop, nothing ever waits on a disk).
import { Buffer } from 'node:buffer';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ReadLent, type BackendSharing, type CoherenceHook, type IoCallback, type NamespaceBackend, type ReadCallback } from '../backend/index.js';

const ZERO_SLAB = Buffer.alloc(256 * 1024);
/** Initial size of the one read buffer (grown to the largest read seen). */
const READ_BUF = 128 * 1024;
/** Granule of a worker's read cache: one 4 KiB block (the Linux host's page size). */
const BLOCK_SHIFT = 12;
/** The cache's memory comes in 1 MiB pieces, allocated when a read first touches one (untouched pieces cost nothing). */
const PIECE_SHIFT = 20;
const PIECE = 1 << PIECE_SHIFT;

export type { CoherenceHook };

/**
 * Which 1 MiB pieces other openers cache (PeerMesh holds): a cached opener asks before it caches a piece, and a write
 * to pieces no other opener holds completes without the CoherenceHook.
 */
export interface PieceHolds {
  /** Whether another opener may cache bytes of pieces `first`..`last`. */
  peersHold(first: number, last: number): boolean;
  /** May this opener cache piece `i`? true: now; false: not now (read the file); undefined: `then` answers later. */
  hold(i: number, then: (ok: boolean) => void): boolean | undefined;
}

/**
 * A worker's private copy of the blocks it has read, so a read costs a copy instead of a pread (docs/target.md,
 * "Target workers": 4.6 µs per pread here, more than the rest of a 4 KiB read). The file stays the one truth: a block
 * is filled from it when a read finds it invalid, a write goes to the file first and then into the cache, and a
 * write in another worker invalidates the range here before that write may complete, so a read that starts after any
 * write completed sees it (NVMe Base 2.0 §3.4.4: no ordering between commands still executing).
 */
class ReadCache {
  readonly #pieces: (Buffer | undefined)[];
  /** One byte per block: 1 = the cached copy equals the file. */
  readonly valid: Uint8Array;
  /** Per piece: 1 = may be cached (held, or no PieceHolds), 0 = not (yet). */
  readonly held: Uint8Array;
  /** Reads waiting for a piece's hold to be answered (a piece here has been asked for). */
  readonly waiters = new Map<number, Array<(ok: boolean) => void>>();
  constructor(
    readonly size: number,
    readonly holds: PieceHolds | undefined,
  ) {
    this.#pieces = new Array<Buffer | undefined>(Math.ceil(size / PIECE)).fill(undefined);
    this.valid = new Uint8Array(Math.ceil(size / (1 << BLOCK_SHIFT)));
    this.held = new Uint8Array(this.#pieces.length).fill(holds === undefined ? 1 : 0);
  }

  piece(i: number): Buffer {
    let p = this.#pieces[i];
    if (p === undefined) {
      p = Buffer.allocUnsafeSlow(Math.min(PIECE, this.size - i * PIECE));
      this.#pieces[i] = p;
    }
    return p;
  }

  /** The piece if it exists (a write never allocates one). */
  has(i: number): Buffer | undefined {
    return this.#pieces[i];
  }

  /** Blocks overlapping [offset, offset + length) are no longer known to match the file. */
  invalidate(offset: number, length: number): void {
    if (length <= 0) return;
    this.valid.fill(0, offset >>> BLOCK_SHIFT, ((offset + length - 1) >>> BLOCK_SHIFT) + 1);
  }
}

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

function dataLength(data: readonly Buffer[]): number {
  let n = 0;
  for (const b of data) n += b.length;
  return n;
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
  #cache: ReadCache | undefined;
  #coherence: CoherenceHook | undefined;

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

  /**
   * Open an existing shared namespace (a worker). With `coherence`, reads are served from a private cache of the
   * blocks this process has read, and every write is reported to the hook, which completes it once the other openers
   * dropped their copies (ReadCache).
   */
  static open(p: string, size: number, coherence?: CoherenceHook, holds?: PieceHolds): ShmBackend {
    const fd = fs.openSync(p, 'r+');
    const b = new ShmBackend(p, fd, size, undefined);
    if (coherence !== undefined) {
      b.#cache = new ReadCache(size, holds);
      b.#coherence = coherence;
    }
    return b;
  }

  /**
   * The creator's writes (queues that stay in the primary: TLS, DH-HMAC-CHAP) go through `hook` too, so the workers'
   * caches drop what they change; the creator itself reads the file and caches nothing.
   */
  setCoherence(hook: CoherenceHook | undefined): void {
    this.#coherence = hook;
  }

  sharing(): BackendSharing {
    return { kind: 'shm', path: this.path, size: this.size };
  }

  /** Another opener changed [offset, offset + length): drop this process's cached copy of it. */
  invalidate(offset: number, length: number): void {
    this.#cache?.invalidate(offset, length);
  }

  read(offset: number, length: number, cb: ReadCallback): void {
    const c = this.#cache;
    if (c !== undefined) return this.#readCached(c, offset, length, cb);
    this.#readFile(offset, length, cb);
  }

  #readFile(offset: number, length: number, cb: ReadCallback): void {
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

  /**
   * Views of the cache, after filling the invalid blocks of the range from the file (one pread per run of them). Lent
   * for the task (ReadLent.TASK): within it only this worker's own writes change a cached block (commands overlapping
   * the read, where NVMe allows either version); another worker's write drops it through a message, in a later task.
   */
  #readCached(c: ReadCache, offset: number, length: number, cb: ReadCallback): void {
    const end = offset + length;
    const first = offset >>> PIECE_SHIFT;
    const last = (end - 1) >>> PIECE_SHIFT;
    for (let i = first; i <= last; i++) {
      if (c.held[i] === 1) continue;
      // Not ours to cache yet: ask (PieceHolds), then read again; refused, this read goes to the file.
      return this.#whenHeld(c, i, (ok) => (ok ? this.#readCached(c, offset, length, cb) : this.#readFile(offset, length, cb)));
    }
    try {
      if (first === last) {
        const p = c.piece(first);
        const base = first * PIECE;
        this.#fill(c, p, base, offset, end);
        return cb(null, [p.subarray(offset - base, end - base)], undefined, ReadLent.TASK);
      }
      const out: Buffer[] = [];
      for (let i = first; i <= last; i++) {
        const p = c.piece(i);
        const base = i * PIECE;
        const from = Math.max(offset, base);
        const to = Math.min(end, base + p.length);
        this.#fill(c, p, base, from, to);
        out.push(p.subarray(from - base, to - base));
      }
      cb(null, out, undefined, ReadLent.TASK);
    } catch (err) {
      cb(err as Error, []);
    }
  }

  #whenHeld(c: ReadCache, i: number, then: (ok: boolean) => void): void {
    const w = c.waiters.get(i);
    if (w !== undefined) {
      w.push(then);
      return;
    }
    const r = (c.holds as PieceHolds).hold(i, (ok) => {
      c.held[i] = ok ? 1 : 0;
      const ws = c.waiters.get(i) ?? [];
      c.waiters.delete(i);
      for (const f of ws) f(ok);
    });
    if (r === undefined) {
      c.waiters.set(i, [then]);
      return;
    }
    if (r) c.held[i] = 1;
    then(r);
  }

  /** Make the blocks of [from, to) (inside piece `p` at namespace offset `base`) valid. */
  #fill(c: ReadCache, p: Buffer, base: number, from: number, to: number): void {
    const v = c.valid;
    const b1 = (to - 1) >>> BLOCK_SHIFT;
    for (let b = from >>> BLOCK_SHIFT; b <= b1; b++) {
      if (v[b] === 1) continue;
      let e = b + 1;
      while (e <= b1 && v[e] === 0) e++;
      const start = b << BLOCK_SHIFT;
      const stop = Math.min(e << BLOCK_SHIFT, base + p.length);
      let done = 0;
      while (start + done < stop) {
        const n = fs.readSync(this.fd, p, start - base + done, stop - start - done, start + done);
        if (n === 0) {
          p.fill(0, start - base + done, stop - base);
          break;
        }
        done += n;
      }
      v.fill(1, b, e);
      b = e - 1;
    }
  }

  /**
   * After the file has [offset, offset + length): copy `data` (or zeros) into the pieces this process holds, so its
   * own reads see the write, and mark fully written blocks valid; a partly written block keeps its state (its other
   * bytes are as current as they were). Then the other openers drop theirs before `cb` (CoherenceHook).
   */
  #written(offset: number, length: number, data: readonly Buffer[] | undefined, cb: IoCallback): void {
    const c = this.#cache;
    const hook = this.#coherence;
    if (hook === undefined) return cb(null);
    if (c === undefined) return hook(offset, length, () => cb(null));
    let pos = offset;
    for (const chunk of data ?? [undefined]) {
      const len = chunk === undefined ? length : chunk.length;
      let off = 0;
      while (off < len) {
        const i = (pos + off) >>> PIECE_SHIFT;
        const base = i * PIECE;
        const n = Math.min(len - off, base + PIECE - (pos + off));
        const p = c.has(i);
        if (p !== undefined) {
          if (chunk === undefined) p.fill(0, pos + off - base, pos + off - base + n);
          else chunk.copy(p, pos + off - base, off, off + n);
        }
        off += n;
      }
      pos += len;
    }
    // Whole blocks inside the range now equal the file where this process holds their piece.
    const firstFull = (offset + (1 << BLOCK_SHIFT) - 1) >>> BLOCK_SHIFT;
    const endFull = (offset + length) >>> BLOCK_SHIFT;
    for (let b = firstFull; b < endFull; b++) if (c.has(b >>> (PIECE_SHIFT - BLOCK_SHIFT)) !== undefined) c.valid[b] = 1;
    // No other opener holds these pieces: none has a copy to drop (PieceHolds; checked after the file has the bytes).
    if (c.holds !== undefined && length > 0 && !c.holds.peersHold(offset >>> PIECE_SHIFT, (offset + length - 1) >>> PIECE_SHIFT)) return cb(null);
    hook(offset, length, () => cb(null));
  }

  write(offset: number, data: readonly Buffer[], _fua: boolean, cb: IoCallback): void {
    // FUA needs nothing more: RAM is as durable as it gets once the copy is in the page cache.
    const total = dataLength(data);
    try {
      // One pwritev for a command's pieces (in-capsule data or H2CData PDUs): one system call instead of one per piece
      // (docs/target.md, "Target workers"). A short write (not seen on tmpfs) continues piece by piece.
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
      return this.#failed(offset, total, err as Error, cb);
    }
    this.#written(offset, total, data, cb);
  }

  /** A write that failed part-way: what reached the file is unknown, so no copy of the range may be trusted anywhere. */
  #failed(offset: number, length: number, err: Error, cb: IoCallback): void {
    this.#cache?.invalidate(offset, length);
    const hook = this.#coherence;
    if (hook === undefined) return cb(err);
    hook(offset, length, () => cb(err));
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
      return this.#failed(offset, length, err as Error, cb);
    }
    this.#written(offset, length, undefined, cb);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    fs.closeSync(this.fd);
    if (this.linked !== undefined) fs.rmSync(this.linked, { force: true });
  }
}
