// Sparse RAM backend: fixed-size chunks allocated on first write; unwritten chunks read as zeros from one shared buffer.
import { Buffer } from 'node:buffer';
import type { IoCallback, NamespaceBackend, ReadCallback } from './types.js';

/** 128 KiB: a 1 MiB (MDTS 8) transfer touches at most 9 chunks; a random 4 KiB write costs one chunk. */
export const RAM_CHUNK_SIZE = 128 * 1024;
const CHUNK_SHIFT = 17;
const ZEROS = Buffer.alloc(RAM_CHUNK_SIZE);

export class RamBackend implements NamespaceBackend {
  readonly kind = 'ram';
  readonly #chunks = new Map<number, Buffer>();

  constructor(readonly size: number) {}

  /** Bytes of chunk memory allocated so far (tests and stats). */
  get allocatedBytes(): number {
    return this.#chunks.size * RAM_CHUNK_SIZE;
  }

  read(offset: number, length: number, cb: ReadCallback): void {
    const out: Buffer[] = [];
    let off = offset;
    let left = length;
    while (left > 0) {
      const idx = off >>> 0 === off ? off >>> CHUNK_SHIFT : Math.floor(off / RAM_CHUNK_SIZE);
      const within = off - idx * RAM_CHUNK_SIZE;
      const n = Math.min(left, RAM_CHUNK_SIZE - within);
      const chunk = this.#chunks.get(idx) ?? ZEROS;
      out.push(chunk.subarray(within, within + n));
      off += n;
      left -= n;
    }
    cb(null, out);
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
          chunk = Buffer.alloc(RAM_CHUNK_SIZE);
          this.#chunks.set(idx, chunk);
        }
        src.copy(chunk, within, s, s + n);
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
        else chunk.fill(0, within, within + n);
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
