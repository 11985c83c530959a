// LbaRangeSet: merging, splitting and the first-marked-LBA query at range edges; PersistedLbaRanges on a real file.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LbaRangeSet, PersistedLbaRanges } from './lba-ranges.js';

describe('LbaRangeSet', () => {
  it('merges overlapping and touching ranges, keeps gaps', () => {
    const s = new LbaRangeSet();
    s.add(10, 5); // 10..14
    s.add(20, 5); // 20..24
    expect(s.ranges()).toEqual([
      { lba: 10, count: 5 },
      { lba: 20, count: 5 },
    ]);
    s.add(15, 1); // touches 14: merges into 10..15
    s.add(0, 1);
    expect(s.ranges()).toEqual([
      { lba: 0, count: 1 },
      { lba: 10, count: 6 },
      { lba: 20, count: 5 },
    ]);
    s.add(12, 10); // 12..21 bridges both
    expect(s.ranges()).toEqual([
      { lba: 0, count: 1 },
      { lba: 10, count: 15 },
    ]);
    s.add(5, 0);
    expect(s.size).toBe(2);
  });

  it('firstIn answers the first marked LBA of a range, or -1', () => {
    const s = new LbaRangeSet();
    expect(s.firstIn(0, 1)).toBe(-1);
    s.add(100, 4);
    expect(s.firstIn(99, 1)).toBe(-1);
    expect(s.firstIn(104, 1)).toBe(-1);
    expect(s.firstIn(96, 5)).toBe(100);
    expect(s.firstIn(102, 100)).toBe(102);
    expect(s.firstIn(103, 1)).toBe(103);
    expect(s.firstIn(0, 0)).toBe(-1);
    // Edges a host can reach: SLBA up to 2^53 here (the parse bounds it by NSZE first).
    s.add(2 ** 32 - 1, 1);
    expect(s.firstIn(2 ** 32 - 2, 2)).toBe(2 ** 32 - 1);
    expect(s.firstIn(2 ** 31, 65536)).toBe(-1);
  });

  it('remove splits a range and reports whether anything was marked', () => {
    const s = new LbaRangeSet();
    s.add(10, 10); // 10..19
    expect(s.remove(0, 10)).toBe(false);
    expect(s.remove(20, 5)).toBe(false);
    expect(s.remove(12, 2)).toBe(true);
    expect(s.ranges()).toEqual([
      { lba: 10, count: 2 },
      { lba: 14, count: 6 },
    ]);
    s.add(30, 5);
    expect(s.remove(11, 20)).toBe(true); // 11..30: trims the first, drops 14..19, trims 30
    expect(s.ranges()).toEqual([
      { lba: 10, count: 1 },
      { lba: 31, count: 4 },
    ]);
    expect(s.remove(0, 100)).toBe(true);
    expect(s.size).toBe(0);
    expect(s.remove(0, 100)).toBe(false);
  });
});

describe('PersistedLbaRanges', () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir !== undefined) await fs.rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  const save = (p: PersistedLbaRanges): Promise<void> => new Promise((resolve, reject) => p.save((e) => (e ? reject(e) : resolve())));

  it('saves, loads, and removes its file once empty', async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'lba-ranges-'));
    const file = path.join(dir, 'ns.uncor');
    const a = new PersistedLbaRanges(file);
    a.set.add(7, 3);
    a.set.add(2 ** 40, 1);
    await save(a);
    expect(JSON.parse(await fs.readFile(file, 'utf8'))).toEqual([
      { lba: 7, count: 3 },
      { lba: 2 ** 40, count: 1 },
    ]);
    const b = new PersistedLbaRanges(file);
    expect(b.set.ranges()).toEqual(a.set.ranges());
    b.set.clear();
    await save(b);
    await expect(fs.stat(file)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(new PersistedLbaRanges(file).set.size).toBe(0);
  });

  it('without a path a save completes at once', () => {
    const p = new PersistedLbaRanges();
    p.set.add(1, 1);
    let done = false;
    p.save((e) => {
      expect(e).toBeNull();
      done = true;
    });
    expect(done).toBe(true);
  });

  for (const [label, text] of [
    ['not JSON', '{'],
    ['not a list', '{"lba":1}'],
    ['a negative LBA', '[{"lba":-1,"count":1}]'],
    ['a zero count', '[{"lba":0,"count":0}]'],
    ['an unsafe integer', '[{"lba":9007199254740992,"count":1}]'],
  ] as const) {
    it(`a file with ${label} is refused naming the field and the fix`, async () => {
      dir = await fs.mkdtemp(path.join(os.tmpdir(), 'lba-ranges-'));
      const file = path.join(dir, 'ns.uncor');
      await fs.writeFile(file, text);
      expect(() => new PersistedLbaRanges(file)).toThrow(expect.objectContaining({ code: 'NVMEOF_ERR_INVALID_ARG', message: expect.stringMatching(/namespaces\.backend\.path.*fix or delete it/) }));
    });
  }
});
