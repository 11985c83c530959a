// Sparse RAM backend: fixed-size chunks allocated on first write, packed into arenas (see Arena); unwritten chunks read
// as zeros from one shared buffer.
// For data digests it keeps a CRC32C per 4 KiB block and combines them (zlib's crc32_combine, reflected CRC32C), so a
// digest of cached blocks costs a few table lookups instead of a pass over the data; chunks whose views went out with
// such a digest are moved to a fresh slot before the next write (copy-on-write), so the digest always matches the bytes
// sent.
import { Buffer } from 'node:buffer';
import { bufferView, crc32c } from '../../protocol/index.js';
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
  /** Views of `buf` were returned with a digest: move before writing (copy-on-write). */
  lent = false;
  constructor(
    /** Namespace chunk index (unused for the shared zero chunk). */
    readonly idx: number,
    /** The arena holding `buf` (undefined only for the shared zero chunk). */
    public arena: Arena | undefined,
    /** This chunk's 128 KiB: a view of its arena slot. */
    public buf: Buffer,
  ) {}

  blockCrc(i: number): number {
    if ((this.valid & (1 << i)) === 0) {
      this.crc[i] = crc32c(this.buf.subarray(i << CRC_BLOCK_SHIFT, (i + 1) << CRC_BLOCK_SHIFT));
      this.valid |= 1 << i;
    }
    return this.crc[i] as number;
  }

  /** Drop the cached CRCs of bytes [from, to) before they change. */
  invalidate(from: number, to: number): void {
    for (let i = from >>> CRC_BLOCK_SHIFT; i <= (to - 1) >>> CRC_BLOCK_SHIFT; i++) this.valid &= ~(1 << i);
  }
}

/**
 * Up to ARENA_MAX_CHUNKS chunk slots in one allocation, handed out in order and never reused: a slot's bytes change
 * only through writes to the chunk living there, so a view returned earlier never shows another chunk's data. Chunks
 * leave a slot when they are freed or moved (copy-on-write); an arena whose live chunks drop below half its slots is
 * evacuated (its chunks are moved too) and forgotten, and the GC frees it once no view of it is left in flight.
 */
class Arena {
  /** The arena's memory (what the read path makes views of: bufferView at a slot's offset) and a Buffer over all of it. */
  readonly mem: ArrayBuffer;
  readonly buf: Buffer;
  /** Slots handed out so far. */
  used = 0;
  /** Slots whose chunk still lives here. */
  live = 0;
  /** Every chunk placed here (some may have moved on: check `chunk.arena`). */
  readonly placed: Chunk[] = [];
  /** Forgotten (being or been evacuated): departures no longer count. */
  dead = false;
  constructor(
    readonly id: number,
    readonly slots: number,
  ) {
    // Zero-filled through calloc: pages of slots not yet written are not committed.
    this.mem = new ArrayBuffer(slots * RAM_CHUNK_SIZE);
    this.buf = Buffer.from(this.mem);
  }
}

/**
 * Why arenas: a random 4 KiB read used to touch a chunk object, its Buffer and its ArrayBuffer, all cold, before the
 * data; packed into a few large buffers, the lookup is two typed-array loads and one hot buffer (fifth pass in
 * docs/performance.md: 4 KiB QD1 −0.4 µs, QD32 +20 % IOPS). 16 slots = 2 MiB, so a sparse namespace commits at most
 * one arena more than it uses.
 */
const ARENA_MAX_CHUNKS = 16;

/** Shared by every unwritten chunk; never written. */
const ZERO_CHUNK = new Chunk(-1, undefined, Buffer.alloc(RAM_CHUNK_SIZE));

/** The chunk lookup: dense typed arrays for namespaces up to 64 GiB (two loads per I/O), a Map beyond (sparse, huge sizes). */
interface ChunkTable {
  get(idx: number): Chunk | undefined;
  set(idx: number, c: Chunk, offInArena: number): void;
  delete(idx: number): void;
  clear(): void;
  readonly size: number;
}

/** 512 Ki slots cover 64 GiB of 128 KiB chunks. */
const DENSE_MAX_CHUNKS = 512 * 1024;

class DenseTable implements ChunkTable {
  readonly #chunks: Array<Chunk | undefined>;
  /** Arena id of each chunk, -1 when unwritten; and the chunk's byte offset in that arena (the read path's lookup). */
  readonly arenaOf: Int32Array;
  readonly offOf: Int32Array;
  size = 0;
  constructor(n: number) {
    this.#chunks = new Array<Chunk | undefined>(n).fill(undefined);
    this.arenaOf = new Int32Array(n).fill(-1);
    this.offOf = new Int32Array(n);
  }
  get(idx: number): Chunk | undefined {
    return this.#chunks[idx];
  }
  set(idx: number, c: Chunk, offInArena: number): void {
    if (this.#chunks[idx] === undefined) this.size++;
    this.#chunks[idx] = c;
    this.arenaOf[idx] = (c.arena as Arena).id;
    this.offOf[idx] = offInArena;
  }
  delete(idx: number): void {
    if (this.#chunks[idx] !== undefined) this.size--;
    this.#chunks[idx] = undefined;
    this.arenaOf[idx] = -1;
  }
  clear(): void {
    this.#chunks.fill(undefined);
    this.arenaOf.fill(-1);
    this.size = 0;
  }
}

class MapTable implements ChunkTable {
  readonly #chunks = new Map<number, Chunk>();
  get size(): number {
    return this.#chunks.size;
  }
  get(idx: number): Chunk | undefined {
    return this.#chunks.get(idx);
  }
  set(idx: number, c: Chunk): void {
    this.#chunks.set(idx, c);
  }
  delete(idx: number): void {
    this.#chunks.delete(idx);
  }
  clear(): void {
    this.#chunks.clear();
  }
}

export class RamBackend implements NamespaceBackend {
  readonly kind = 'ram';
  readonly #chunks: ChunkTable;
  readonly #dense: DenseTable | undefined;
  /** Arenas by id; ids of forgotten arenas are reused. */
  readonly #arenas: Array<Arena | undefined> = [];
  /** What the read path touches of each arena: its memory (bufferView, not subarray). */
  readonly #arenaMem: Array<ArrayBuffer | undefined> = [];
  readonly #freeIds: number[] = [];
  #current: Arena | undefined;
  readonly #arenaSlots: number;

  constructor(readonly size: number) {
    const n = Math.ceil(size / RAM_CHUNK_SIZE);
    this.#dense = n <= DENSE_MAX_CHUNKS ? new DenseTable(n) : undefined;
    this.#chunks = this.#dense ?? new MapTable();
    this.#arenaSlots = Math.max(1, Math.min(ARENA_MAX_CHUNKS, n));
  }

  /** Bytes of namespace backed by chunk memory (tests and stats). */
  get allocatedBytes(): number {
    return this.#chunks.size * RAM_CHUNK_SIZE;
  }

  /** Arena memory held, including slots not used yet or left behind by moved chunks (tests). */
  get arenaBytes(): number {
    let n = 0;
    for (const a of this.#arenas) if (a !== undefined) n += a.slots * RAM_CHUNK_SIZE;
    return n;
  }

  read(offset: number, length: number, cb: ReadCallback, wantCrc = false): void {
    // Common case first: the range lies in one chunk (a 4 KiB read always does), one view, no array growth.
    const first = offset >>> 0 === offset ? offset >>> CHUNK_SHIFT : Math.floor(offset / RAM_CHUNK_SIZE);
    const start = offset - first * RAM_CHUNK_SIZE;
    if (start + length <= RAM_CHUNK_SIZE) {
      const dense = this.#dense;
      let view: Buffer[];
      if (dense !== undefined) {
        const a = dense.arenaOf[first] as number;
        if (a < 0) view = [ZERO_CHUNK.buf.subarray(start, start + length)];
        else view = [bufferView(this.#arenaMem[a] as ArrayBuffer, (dense.offOf[first] as number) + start, length)];
      } else view = [(this.#chunks.get(first) ?? ZERO_CHUNK).buf.subarray(start, start + length)];
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

  /** The next free slot, in the current arena or a new one. */
  #slot(): { arena: Arena; off: number } {
    let a = this.#current;
    let prev: Arena | undefined;
    if (a === undefined || a.used === a.slots) {
      prev = a;
      const id = this.#freeIds.pop() ?? this.#arenas.length;
      a = new Arena(id, this.#arenaSlots);
      this.#arenas[id] = a;
      this.#arenaMem[id] = a.mem;
      this.#current = a;
    }
    const off = a.used * RAM_CHUNK_SIZE;
    a.used++;
    a.live++;
    // The arena that stopped being current may have lost most of its chunks meanwhile (departures from the current
    // arena do not evacuate it).
    if (prev !== undefined) this.#evacuateIfSparse(prev);
    return { arena: a, off };
  }

  /** A new chunk for `idx` (its bytes are zero: fresh slots of a calloc'ed arena). */
  #create(idx: number): Chunk {
    const { arena, off } = this.#slot();
    const c = new Chunk(idx, arena, arena.buf.subarray(off, off + RAM_CHUNK_SIZE));
    arena.placed.push(c);
    this.#chunks.set(idx, c, off);
    return c;
  }

  /** Move `c` to a fresh slot with its bytes and cached CRCs: views of the old slot keep showing the old bytes. */
  #move(c: Chunk): void {
    const from = c.arena as Arena;
    const { arena, off } = this.#slot();
    const buf = arena.buf.subarray(off, off + RAM_CHUNK_SIZE);
    c.buf.copy(buf);
    c.buf = buf;
    c.arena = arena;
    c.lent = false;
    arena.placed.push(c);
    this.#chunks.set(c.idx, c, off);
    this.#leave(from);
  }

  /** A chunk left `a`. */
  #leave(a: Arena): void {
    a.live--;
    this.#evacuateIfSparse(a);
  }

  /** Evacuate and forget `a` once fewer than half of its slots are live (never the current arena). */
  #evacuateIfSparse(a: Arena): void {
    if (a.dead || a === this.#current || a.live * 2 >= a.slots) return;
    a.dead = true;
    this.#arenas[a.id] = undefined;
    this.#arenaMem[a.id] = undefined;
    this.#freeIds.push(a.id);
    for (const c of a.placed) if (c.arena === a) this.#move(c);
    a.placed.length = 0;
  }

  /** Make `c` safe to change in bytes [from, to): move it if views went out with a digest, drop those CRCs. */
  #beforeWrite(c: Chunk, from: number, to: number): void {
    if (c.lent) this.#move(c);
    c.invalidate(from, to);
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
        if (chunk === undefined) chunk = this.#create(idx);
        else this.#beforeWrite(chunk, within, within + n);
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
        if (n === RAM_CHUNK_SIZE) {
          this.#chunks.delete(idx);
          const a = chunk.arena as Arena;
          chunk.arena = undefined;
          this.#leave(a);
        } else {
          this.#beforeWrite(chunk, within, within + n);
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
    this.#arenas.length = 0;
    this.#arenaMem.length = 0;
    this.#freeIds.length = 0;
    this.#current = undefined;
  }
}
