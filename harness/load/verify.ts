// Data verification: every written block carries a header (magic, CRC32C, LBA, generation) checked on read,
// so a corrupted, misplaced (wrong LBA) or stale (older generation) block is reported with its LBA.
import { crc32c } from '../../protocol/index.js';
import type { VerifyMismatch } from './types.js';

/** "NVTV" little-endian: marks a block written by the harness. */
export const VERIFY_MAGIC = 0x5654564e;
/** magic u32 | crc32c u32 (over bytes 8..end) | lba u64 | generation u32 | reserved u32. */
export const VERIFY_HEADER_SIZE = 24;

/** Stamps each block of `buf` (starting at `lba`) with its header and a fill derived from LBA and generation. */
export function stampBlocks(buf: Buffer, lba: number, blockSize: number, generation: number): void {
  const blocks = buf.length / blockSize;
  for (let i = 0; i < blocks; i++) {
    const off = i * blockSize;
    const block = buf.subarray(off, off + blockSize);
    const l = lba + i;
    block.writeUInt32LE(VERIFY_MAGIC, 0);
    block.writeUInt32LE(l % 0x1_0000_0000, 8);
    block.writeUInt32LE(Math.floor(l / 0x1_0000_0000), 12);
    block.writeUInt32LE(generation >>> 0, 16);
    block.writeUInt32LE(0, 20);
    // A fill that differs per LBA and generation, so a block copied from elsewhere fails the LBA or CRC check.
    block.fill((l * 2654435761 + generation * 40503) >>> 0 || 1, VERIFY_HEADER_SIZE);
    block.writeUInt32LE(crc32c(block.subarray(8)), 4);
  }
}

/**
 * Checks each block of `buf` read from `lba`. `expected(lba)` returns the generation last written there
 * (undefined when unknown: then only magic, CRC and LBA are checked).
 */
export function checkBlocks(
  buf: Uint8Array,
  lba: number,
  blockSize: number,
  job: string,
  expected: (lba: number) => number | undefined,
): VerifyMismatch[] {
  const b = Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const out: VerifyMismatch[] = [];
  const blocks = Math.floor(b.length / blockSize);
  for (let i = 0; i < blocks; i++) {
    const block = b.subarray(i * blockSize, (i + 1) * blockSize);
    const l = lba + i;
    const exp = expected(l);
    const withExp = exp === undefined ? {} : { expectedGeneration: exp };
    if (block.readUInt32LE(0) !== VERIFY_MAGIC) {
      out.push({ lba: l, job, reason: 'magic', ...withExp });
      continue;
    }
    const gotLba = block.readUInt32LE(8) + block.readUInt32LE(12) * 0x1_0000_0000;
    const gotGen = block.readUInt32LE(16);
    if (block.readUInt32LE(4) !== crc32c(block.subarray(8))) {
      out.push({ lba: l, job, reason: 'crc', gotLba, gotGeneration: gotGen, ...withExp });
    } else if (gotLba !== l) {
      out.push({ lba: l, job, reason: 'lba', gotLba, gotGeneration: gotGen, ...withExp });
    } else if (exp !== undefined && gotGen !== exp) {
      out.push({ lba: l, job, reason: 'generation', gotLba, gotGeneration: gotGen, ...withExp });
    }
  }
  return out;
}

/** Last generation written per block of a region; dense when it fits in 128 MiB, sparse otherwise. */
export class GenerationMap {
  readonly #base: number;
  readonly #dense: Uint32Array | undefined;
  readonly #sparse: Map<number, number> | undefined;

  constructor(baseLba: number, blocks: number) {
    this.#base = baseLba;
    if (blocks <= 32 * 1024 * 1024) this.#dense = new Uint32Array(blocks);
    else this.#sparse = new Map();
  }

  set(lba: number, blocks: number, gen: number): void {
    for (let i = 0; i < blocks; i++) {
      if (this.#dense !== undefined) this.#dense[lba + i - this.#base] = gen;
      else this.#sparse?.set(lba + i, gen);
    }
  }

  get(lba: number): number | undefined {
    const g = this.#dense !== undefined ? this.#dense[lba - this.#base] : this.#sparse?.get(lba);
    return g === undefined || g === 0 ? undefined : g;
  }

  /** Written extents in LBA order, merged, each at most `maxBlocks` long: what a verify pass reads back. */
  *extents(maxBlocks: number): Generator<[lba: number, blocks: number]> {
    const lbas: number[] = [];
    if (this.#dense !== undefined) {
      const d = this.#dense;
      let start = -1;
      for (let i = 0; i <= d.length; i++) {
        const on = i < d.length && d[i] !== 0;
        if (on && start < 0) start = i;
        if ((!on || i - start >= maxBlocks) && start >= 0) {
          yield [this.#base + start, i - start];
          start = on ? i : -1;
        }
      }
      return;
    }
    for (const k of this.#sparse?.keys() ?? []) lbas.push(k);
    lbas.sort((a, b) => a - b);
    let s = -1;
    let n = 0;
    for (const l of lbas) {
      if (s >= 0 && l === s + n && n < maxBlocks) n++;
      else {
        if (s >= 0) yield [s, n];
        s = l;
        n = 1;
      }
    }
    if (s >= 0) yield [s, n];
  }
}
