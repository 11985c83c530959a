// Sparse RAM backend: fixed-size chunks allocated on first write; unwritten chunks read as zeros from one shared buffer.
// For data digests it keeps a CRC32C per 4 KiB block and combines them (zlib's crc32_combine, reflected CRC32C), so a
// digest of cached blocks costs a few table lookups instead of a pass over the data; chunks whose views went out with
// such a digest are copied before the next write (copy-on-write), so the digest always matches the bytes sent.
import { Buffer } from 'node:buffer';
import { crc32c } from '../../protocol/index.js';
import type { IoCallback, NamespaceBackend, ReadCallback } from './types.js';

/** 128 KiB: a 1 MiB (MDTS 8) transfer touches at most 9 chunks; a random 4 KiB write costs one chunk. */
export const RAM_CHUNK_SIZE = 128 * 1024;
const CHUNK_SHIFT = 17;
/** Granule of the CRC cache: one 4 KiB block (the Linux host's page size), 32 per chunk. */
const CRC_BLOCK = 4096;
const CRC_BLOCK_SHIFT = 12;
const BLOCKS_PER_CHUNK = RAM_CHUNK_SIZE / CRC_BLOCK;

/** GF(2) product of two polynomials modulo the reflected CRC32C polynomial (zlib multmodp). */
function multmodp(a: number, b: number): number {
  let m = 0x8000_0000;
  let p = 0;
  for (;;) {
    if ((a & m) !== 0) {
      p ^= b;
      if ((a & (m - 1)) === 0) break;
    }
    m >>>= 1;
    b = (b & 1) !== 0 ? (b >>> 1) ^ 0x82f6_3b78 : b >>> 1;
  }
  return p >>> 0;
}

/** x^(8·4096) mod P as byte-sliced tables: shift4k(crc) = multmodp(x^(8·4096), crc) in four lookups. */
const SHIFT_4K: Uint32Array[] = (() => {
  let op = 0x8000_0000; // x^0
  let sq = 0x4000_0000; // x^1, squared below to x^(2^k)
  // 8·4096 = 2^15 bits: square x fifteen times.
  for (let k = 0; k < 15; k++) sq = multmodp(sq, sq);
  op = multmodp(sq, op);
  return [0, 8, 16, 24].map((sh) => Uint32Array.from({ length: 256 }, (_, v) => multmodp(op, (v << sh) >>> 0)));
})();
const [S0, S1, S2, S3] = SHIFT_4K as [Uint32Array, Uint32Array, Uint32Array, Uint32Array];

/** CRC32C of A‖B from crc(A) and crc(B) when B is one 4 KiB block. */
function combine4k(crcA: number, crcB: number): number {
  return ((S0[crcA & 0xff] as number) ^ (S1[(crcA >>> 8) & 0xff] as number) ^ (S2[(crcA >>> 16) & 0xff] as number) ^ (S3[crcA >>> 24] as number) ^ crcB) >>> 0;
}

class Chunk {
  /** Per-4 KiB-block CRC32C, valid where the bit in `valid` is set. */
  readonly crc = new Uint32Array(BLOCKS_PER_CHUNK);
  valid = 0;
  /** Views of `buf` were returned with a digest: copy before writing (copy-on-write). */
  lent = false;
  constructor(public buf: Buffer) {}

  blockCrc(i: number): number {
    if ((this.valid & (1 << i)) === 0) {
      this.crc[i] = crc32c(this.buf.subarray(i << CRC_BLOCK_SHIFT, (i + 1) << CRC_BLOCK_SHIFT));
      this.valid |= 1 << i;
    }
    return this.crc[i] as number;
  }

  /** Make `buf` private before changing bytes [from, to) and drop their cached CRCs. */
  beforeWrite(from: number, to: number): void {
    if (this.lent) {
      const copy = Buffer.allocUnsafeSlow(RAM_CHUNK_SIZE);
      this.buf.copy(copy);
      this.buf = copy;
      this.lent = false;
    }
    for (let i = from >>> CRC_BLOCK_SHIFT; i <= (to - 1) >>> CRC_BLOCK_SHIFT; i++) this.valid &= ~(1 << i);
  }
}

/** The chunk lookup: a dense array for namespaces up to 64 GiB (one load per I/O), a Map beyond (sparse, huge sizes). */
interface ChunkTable {
  get(idx: number): Chunk | undefined;
  set(idx: number, c: Chunk): void;
  delete(idx: number): void;
  clear(): void;
  readonly size: number;
}

/** 512 Ki slots (4 MiB of pointers) cover 64 GiB of 128 KiB chunks. */
const DENSE_MAX_CHUNKS = 512 * 1024;

class DenseTable implements ChunkTable {
  readonly #slots: Array<Chunk | undefined>;
  size = 0;
  constructor(n: number) {
    this.#slots = new Array<Chunk | undefined>(n).fill(undefined);
  }
  get(idx: number): Chunk | undefined {
    return this.#slots[idx];
  }
  set(idx: number, c: Chunk): void {
    if (this.#slots[idx] === undefined) this.size++;
    this.#slots[idx] = c;
  }
  delete(idx: number): void {
    if (this.#slots[idx] !== undefined) this.size--;
    this.#slots[idx] = undefined;
  }
  clear(): void {
    this.#slots.fill(undefined);
    this.size = 0;
  }
}

/** Shared by every unwritten chunk; never written, so never copied. */
const ZERO_CHUNK = new Chunk(Buffer.alloc(RAM_CHUNK_SIZE));

export class RamBackend implements NamespaceBackend {
  readonly kind = 'ram';
  readonly #chunks: ChunkTable;

  constructor(readonly size: number) {
    this.#chunks = Math.ceil(size / RAM_CHUNK_SIZE) <= DENSE_MAX_CHUNKS ? new DenseTable(Math.ceil(size / RAM_CHUNK_SIZE)) : new Map<number, Chunk>();
  }

  /** Bytes of chunk memory allocated so far (tests and stats). */
  get allocatedBytes(): number {
    return this.#chunks.size * RAM_CHUNK_SIZE;
  }

  read(offset: number, length: number, cb: ReadCallback, wantCrc = false): void {
    // Common case first: the range lies in one chunk (a 4 KiB read always does), one view, no array growth.
    const first = offset >>> 0 === offset ? offset >>> CHUNK_SHIFT : Math.floor(offset / RAM_CHUNK_SIZE);
    const start = offset - first * RAM_CHUNK_SIZE;
    if (start + length <= RAM_CHUNK_SIZE) {
      const view = [((this.#chunks.get(first) ?? ZERO_CHUNK) as Chunk).buf.subarray(start, start + length)];
      if (!wantCrc) return cb(null, view);
      return cb(null, view, this.#crcOf(offset, length, view));
    }
    const out: Buffer[] = [];
    let off = offset;
    let left = length;
    while (left > 0) {
      const idx = off >>> 0 === off ? off >>> CHUNK_SHIFT : Math.floor(off / RAM_CHUNK_SIZE);
      const within = off - idx * RAM_CHUNK_SIZE;
      const n = Math.min(left, RAM_CHUNK_SIZE - within);
      const chunk = this.#chunks.get(idx) ?? ZERO_CHUNK;
      out.push(chunk.buf.subarray(within, within + n));
      off += n;
      left -= n;
    }
    if (!wantCrc) return cb(null, out);
    cb(null, out, this.#crcOf(offset, length, out));
  }

  /** CRC32C of [offset, offset+length): from the block cache when 4 KiB aligned, else over the views. Marks chunks lent. */
  #crcOf(offset: number, length: number, views: readonly Buffer[]): number {
    let crc = 0;
    const aligned = offset % CRC_BLOCK === 0 && length % CRC_BLOCK === 0;
    let off = offset;
    const end = offset + length;
    while (off < end) {
      const idx = Math.floor(off / RAM_CHUNK_SIZE);
      const chunk = this.#chunks.get(idx);
      if (chunk !== undefined) chunk.lent = true;
      const c = chunk ?? ZERO_CHUNK;
      const within = off - idx * RAM_CHUNK_SIZE;
      const stop = Math.min(end - idx * RAM_CHUNK_SIZE, RAM_CHUNK_SIZE);
      if (aligned) for (let i = within >>> CRC_BLOCK_SHIFT; i < stop >>> CRC_BLOCK_SHIFT; i++) crc = combine4k(crc, c.blockCrc(i));
      off = idx * RAM_CHUNK_SIZE + stop;
    }
    if (aligned) return crc;
    for (const v of views) crc = crc32c(v, crc);
    return crc;
  }

  write(offset: number, data: readonly Buffer[], _fua: boolean, cb: IoCallback): void {
    let off = offset;
    for (const src of data) {
      let s = 0;
      while (s < src.length) {
        const idx = Math.floor(off / RAM_CHUNK_SIZE);
        const within = off - idx * RAM_CHUNK_SIZE;
        const n = Math.min(src.length - s, RAM_CHUNK_SIZE - within);
        let chunk = this.#chunks.get(idx);
        if (chunk === undefined) {
          chunk = new Chunk(Buffer.alloc(RAM_CHUNK_SIZE));
          this.#chunks.set(idx, chunk);
        } else chunk.beforeWrite(within, within + n);
        src.copy(chunk.buf, within, s, s + n);
        s += n;
        off += n;
      }
    }
    cb(null);
  }

  flush(cb: IoCallback): void {
    cb(null);
  }

  writeZeroes(offset: number, length: number, _deallocate: boolean, cb: IoCallback): void {
    let off = offset;
    let left = length;
    while (left > 0) {
      const idx = Math.floor(off / RAM_CHUNK_SIZE);
      const within = off - idx * RAM_CHUNK_SIZE;
      const n = Math.min(left, RAM_CHUNK_SIZE - within);
      const chunk = this.#chunks.get(idx);
      // A whole chunk is freed (deallocated or not, the result reads as zeros); partial chunks are zero-filled.
      if (chunk !== undefined) {
        if (n === RAM_CHUNK_SIZE) this.#chunks.delete(idx);
        else {
          chunk.beforeWrite(within, within + n);
          chunk.buf.fill(0, within, within + n);
        }
      }
      off += n;
      left -= n;
    }
    cb(null);
  }

  async close(): Promise<void> {
    this.#chunks.clear();
  }
}
