// A set of LBA ranges, sorted and disjoint: the blocks Write Uncorrectable marked (NVM Command Set 1.0 §3.2.7),
// kept beside the backend that holds the data. A fault rule that answers a media error for a range can use the same
// set (docs/target.md, "NVM commands").
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { InvalidArgumentError } from '../../protocol/index.js';

/** One range of `count` blocks from `lba`. */
export interface LbaRange {
  lba: number;
  count: number;
}

export class LbaRangeSet {
  /** Start LBAs, ascending; ends[i] is one past the last LBA of range i. Adjacent ranges are merged. */
  readonly #starts: number[] = [];
  readonly #ends: number[] = [];

  /** Number of disjoint ranges (0: the data path's one compare). */
  get size(): number {
    return this.#starts.length;
  }

  /** Index of the first range that ends after `lba`. */
  #firstEndingAfter(lba: number): number {
    let lo = 0;
    let hi = this.#ends.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.#ends[mid] as number) <= lba) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** First LBA of [lba, lba+count) in the set, or -1 when none is. */
  firstIn(lba: number, count: number): number {
    if (this.#starts.length === 0 || count <= 0) return -1;
    const i = this.#firstEndingAfter(lba);
    const s = this.#starts[i];
    if (s === undefined || s >= lba + count) return -1;
    return Math.max(s, lba);
  }

  /** Adds [lba, lba+count), merging with ranges it overlaps or touches. */
  add(lba: number, count: number): void {
    if (count <= 0) return;
    let start = lba;
    let end = lba + count;
    // Ranges ending at or after `start` (touching included) and starting at or before `end` merge with it.
    let i = this.#firstEndingAfter(start - 1);
    const from = i;
    while (i < this.#starts.length && (this.#starts[i] as number) <= end) {
      start = Math.min(start, this.#starts[i] as number);
      end = Math.max(end, this.#ends[i] as number);
      i++;
    }
    this.#starts.splice(from, i - from, start);
    this.#ends.splice(from, i - from, end);
  }

  /** Removes [lba, lba+count); true when anything was in the set. */
  remove(lba: number, count: number): boolean {
    if (count <= 0 || this.#starts.length === 0) return false;
    const end = lba + count;
    let i = this.#firstEndingAfter(lba);
    const from = i;
    const keepS: number[] = [];
    const keepE: number[] = [];
    while (i < this.#starts.length && (this.#starts[i] as number) < end) {
      const s = this.#starts[i] as number;
      const e = this.#ends[i] as number;
      if (s < lba) {
        keepS.push(s);
        keepE.push(lba);
      }
      if (e > end) {
        keepS.push(end);
        keepE.push(e);
      }
      i++;
    }
    if (i === from) return false;
    this.#starts.splice(from, i - from, ...keepS);
    this.#ends.splice(from, i - from, ...keepE);
    return true;
  }

  /** Every range, ascending. */
  ranges(): LbaRange[] {
    return this.#starts.map((s, i) => ({ lba: s, count: (this.#ends[i] as number) - s }));
  }

  clear(): void {
    this.#starts.length = 0;
    this.#ends.length = 0;
  }
}

/**
 * A set that outlives the process where it has a `path`: a file namespace keeps it beside its data
 * (`<data file>.uncor`, JSON), so a marked range still reads back as an Unrecovered Read Error after a restart, as on
 * a drive. Saves are serialized: each writes the whole set to a temporary file and renames it over the last. Without
 * a path (RAM and null namespaces, whose data does not outlive the process either) a save completes at once.
 */
export class PersistedLbaRanges {
  readonly set = new LbaRangeSet();
  #chain: Promise<void> = Promise.resolve();

  constructor(readonly path?: string) {
    if (path === undefined) return;
    let text: string;
    try {
      text = fs.readFileSync(path, 'utf8');
    } catch {
      return;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      throw new InvalidArgumentError('namespaces.backend.path', `${path}: ${(err as Error).message}; fix or delete it`);
    }
    if (!Array.isArray(parsed)) throw new InvalidArgumentError('namespaces.backend.path', `${path}: not a list of {lba, count} ranges; fix or delete it`);
    for (const r of parsed as unknown[]) {
      const { lba, count } = (r ?? {}) as Partial<LbaRange>;
      if (!Number.isSafeInteger(lba) || !Number.isSafeInteger(count) || (lba as number) < 0 || (count as number) <= 0) throw new InvalidArgumentError('namespaces.backend.path', `${path}: bad range ${JSON.stringify(r)}; fix or delete it`);
      this.set.add(lba as number, count as number);
    }
  }

  /** Writes the set as it is now; `cb` once it is on disk (or failed). */
  save(cb: (err: Error | null) => void): void {
    const path = this.path;
    if (path === undefined) return cb(null);
    const text = JSON.stringify(this.set.ranges());
    const tmp = `${path}.tmp`;
    this.#chain = this.#chain.then(async () => {
      try {
        if (text === '[]') await fsp.rm(path, { force: true });
        else {
          await fsp.writeFile(tmp, text);
          await fsp.rename(tmp, path);
        }
        cb(null);
      } catch (err) {
        cb(err as Error);
      }
    });
  }
}
