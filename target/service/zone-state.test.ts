// The zone-state file: absent, damaged, and saves that overlap (each caller hears back; the newest snapshot wins).
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ZoneStateFile, zoneStatePath } from './zone-state.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await fs.rm(d, { recursive: true, force: true });
});

async function file(): Promise<ZoneStateFile> {
  const d = await fs.mkdtemp(path.join(os.tmpdir(), 'zone-state-'));
  dirs.push(d);
  return new ZoneStateFile(zoneStatePath(path.join(d, 'ns.img')));
}

describe('ZoneStateFile', () => {
  it('no file: undefined; a file that is not ours: one line naming it', async () => {
    const f = await file();
    expect(f.path.endsWith('ns.img.zones')).toBe(true);
    expect(await f.load()).toBeUndefined();
    await fs.writeFile(f.path, '{"zoneSize":8,"zoneCap":8,"zones":[[1,"x"]]}');
    await expect(f.load()).rejects.toThrow(/namespaces\.zoned: .*ns\.img\.zones is not a zone-state file; move it away or remove it/);
    await fs.writeFile(f.path, 'not json');
    await expect(f.load()).rejects.toThrow(/is not a zone-state file/);
  });

  it('overlapping saves: every callback runs, the file holds the newest snapshot, no temporary file is left', async () => {
    const f = await file();
    const done: number[] = [];
    await new Promise<void>((resolve) => {
      for (let i = 0; i < 5; i++) {
        f.save({ zoneSize: 8, zoneCap: 8, zones: [[1, i]] }, (err) => {
          expect(err).toBeNull();
          done.push(i);
          if (done.length === 5) resolve();
        });
      }
    });
    expect(done.sort()).toEqual([0, 1, 2, 3, 4]);
    expect(await f.load()).toEqual({ zoneSize: 8, zoneCap: 8, zones: [[1, 4]] });
    expect(await fs.readdir(path.dirname(f.path))).toEqual(['ns.img.zones']);
  });
});
