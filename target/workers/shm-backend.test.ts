// ShmBackend: two instances over one tmpfs file (what the primary and each worker hold) see each other's writes at
// once; reads beyond written data are zeros; the owner removes the file on close, an opener does not.
import { existsSync } from 'node:fs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ShmBackend } from './shm-backend.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function read(b: ShmBackend, off: number, len: number): Buffer {
  let out: Buffer | undefined;
  b.read(off, len, (err, data) => {
    expect(err).toBeNull();
    out = Buffer.concat(data);
  });
  // Synchronous by design (no thread-pool hop): the callback has run already.
  expect(out).toBeDefined();
  return out as Buffer;
}

describe('ShmBackend', () => {
  it('shares bytes between the creator and an opener, zeros elsewhere; only the owner unlinks', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'nvt-shm-'));
    dirs.push(dir);
    const a = ShmBackend.create(1 << 20, dir);
    const b = ShmBackend.open(a.path, a.size);
    const data = Buffer.from(Array.from({ length: 8192 }, (_, i) => (i * 7 + 3) & 0xff));
    let done = false;
    b.write(4096, [data.subarray(0, 100), data.subarray(100)], true, (err) => {
      expect(err).toBeNull();
      done = true;
    });
    expect(done).toBe(true);
    expect(read(a, 4096, 8192).equals(data)).toBe(true);
    expect(read(a, 0, 4096).every((x) => x === 0)).toBe(true);
    b.writeZeroes(4096, 512, true, (err) => expect(err).toBeNull());
    expect(read(a, 4096, 512).every((x) => x === 0)).toBe(true);
    expect(read(a, 4608, 100).equals(data.subarray(512, 612))).toBe(true);
    // Each read gets its own bytes: a later write does not change an earlier read's buffer.
    const before = read(a, 8192, 16);
    b.write(8192, [Buffer.alloc(16, 0xee)], false, () => undefined);
    expect(before.equals(data.subarray(4096, 4112))).toBe(true);
    await b.close();
    expect(existsSync(a.path)).toBe(true);
    await a.close();
    expect(existsSync(a.path)).toBe(false);
  });
});
