import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { GenerationMap, checkBlocks, stampBlocks } from './verify.js';

describe('block verification headers', () => {
  it('a stamped buffer checks clean, with the generation it was written with', () => {
    const buf = Buffer.alloc(8 * 512);
    stampBlocks(buf, 1000, 512, 7);
    expect(checkBlocks(buf, 1000, 512, 'j', () => 7)).toEqual([]);
    expect(checkBlocks(buf, 1000, 512, 'j', () => undefined)).toEqual([]);
  });

  it('any single flipped byte in a block is reported with that block\'s LBA', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 4 * 4096 - 1 }), fc.integer({ min: 1, max: 255 }), (pos, mask) => {
        const buf = Buffer.alloc(4 * 4096);
        stampBlocks(buf, 50, 4096, 3);
        buf[pos] = (buf[pos] as number) ^ mask;
        const found = checkBlocks(buf, 50, 4096, 'j', () => 3);
        expect(found).toHaveLength(1);
        expect(found[0]?.lba).toBe(50 + Math.floor(pos / 4096));
      }),
      { numRuns: 200 },
    );
  });

  it('detects a block from another LBA, a stale generation and an unwritten block', () => {
    const buf = Buffer.alloc(3 * 512);
    stampBlocks(buf.subarray(0, 512), 10, 512, 1);
    stampBlocks(buf.subarray(512, 1024), 99, 512, 1); // misplaced
    // third block left zero: never written
    const found = checkBlocks(buf, 10, 512, 'j', (l) => (l === 10 ? 2 : undefined));
    expect(found.map((m) => [m.lba, m.reason])).toEqual([
      [10, 'generation'],
      [11, 'lba'],
      [12, 'magic'],
    ]);
    expect(found[0]).toMatchObject({ expectedGeneration: 2, gotGeneration: 1 });
    expect(found[1]).toMatchObject({ gotLba: 99 });
  });

  it('GenerationMap returns merged extents of written blocks, split at maxBlocks', () => {
    const m = new GenerationMap(100, 50);
    m.set(100, 3, 1);
    m.set(103, 2, 2);
    m.set(120, 1, 3);
    expect(m.get(104)).toBe(2);
    expect(m.get(110)).toBeUndefined();
    expect([...m.extents(4)]).toEqual([
      [100, 4],
      [104, 1],
      [120, 1],
    ]);
  });
});
