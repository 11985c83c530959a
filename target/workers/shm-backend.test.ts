// ShmBackend: two instances over one tmpfs file (what the primary and each worker hold) see each other's writes at
// once; reads beyond written data are zeros; the file has no name once created (a SIGKILLed primary leaves nothing
// behind), the memory goes with the owner's close; stale files of dead primaries are swept.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ReadLent } from '../backend/index.js';
import { ShmBackend, sweepStale } from './shm-backend.js';

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
    // A copy taken in the callback keeps its bytes: a later write does not change it.
    const before = read(a, 8192, 16);
    b.write(8192, [Buffer.alloc(16, 0xee)], false, () => undefined);
    expect(before.equals(data.subarray(4096, 4112))).toBe(true);
    await b.close();
    expect(existsSync(a.path)).toBe(true);
    await a.close();
    expect(existsSync(a.path)).toBe(false);
  });

  it('lends every read the same buffer (transientReads): callers copy what they keep', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'nvt-shm-'));
    dirs.push(dir);
    const a = ShmBackend.create(1 << 20, dir);
    expect(a.transientReads).toBe(true);
    a.write(0, [Buffer.alloc(4096, 0x11), Buffer.alloc(4096, 0x22)], false, (err) => expect(err).toBeNull());
    let first: Buffer | undefined;
    a.read(0, 4096, (_e, d) => (first = d[0]));
    expect(first?.every((x) => x === 0x11)).toBe(true);
    let second: Buffer | undefined;
    a.read(4096, 4096, (_e, d) => (second = d[0]));
    expect(second?.every((x) => x === 0x22)).toBe(true);
    // The first read's view now shows the second read's bytes: nothing may hold a lent buffer past its callback.
    expect(first?.every((x) => x === 0x22)).toBe(true);
    await a.close();
  });

  it('a cached opener lends its reads for the task (ReadLent.TASK): a later read leaves an earlier view as it was', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'nvt-shm-'));
    dirs.push(dir);
    const a = ShmBackend.create(1 << 20, dir);
    const b = ShmBackend.open(a.path, a.size, (_off, _len, done) => done());
    a.write(0, [Buffer.alloc(4096, 0x11), Buffer.alloc(4096, 0x22)], false, (err) => expect(err).toBeNull());
    let first: Buffer | undefined;
    let lent: ReadLent | undefined;
    b.read(0, 4096, (_e, d, _crc, l) => {
      first = d[0];
      lent = l;
    });
    expect(lent).toBe(ReadLent.TASK);
    let second: Buffer | undefined;
    b.read(4096, 4096, (_e, d) => (second = d[0]));
    expect(second?.every((x) => x === 0x22)).toBe(true);
    // Unlike the reused read buffer of an uncached read (previous test), the cached view still shows its own block.
    expect(first?.every((x) => x === 0x11)).toBe(true);
    // The creator caches nothing: its reads do not say, so transientReads (ReadLent.CALL) applies.
    let creator: ReadLent | undefined | 'unset' = 'unset';
    a.read(0, 4096, (_e, _d, _crc, l) => (creator = l));
    expect(creator).toBeUndefined();
    await b.close();
    await a.close();
  });

  it('a write in many pieces (one pwritev) lands contiguously, between untouched bytes', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'nvt-shm-'));
    dirs.push(dir);
    const a = ShmBackend.create(1 << 20, dir);
    const sizes = [1, 511, 4096, 3, 8192, 1397];
    const total = sizes.reduce((n, x) => n + x, 0);
    const whole = Buffer.from(Array.from({ length: total }, (_, i) => (i * 13 + 5) & 0xff));
    const pieces: Buffer[] = [];
    let at = 0;
    for (const n of sizes) {
      pieces.push(whole.subarray(at, at + n));
      at += n;
    }
    a.write(0, [Buffer.alloc(1 << 16, 0x5a)], false, (err) => expect(err).toBeNull());
    a.write(1000, pieces, true, (err) => expect(err).toBeNull());
    expect(read(a, 1000, total).equals(whole)).toBe(true);
    expect(read(a, 0, 1000).every((x) => x === 0x5a)).toBe(true);
    expect(read(a, 1000 + total, 1 << 10).every((x) => x === 0x5a)).toBe(true);
    await a.close();
  });

  it('a cached opener reads its copy until told a range changed; its writes wait for the hook, then read back', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'nvt-shm-'));
    dirs.push(dir);
    const a = ShmBackend.create(4 << 20, dir);
    const told: Array<[number, number]> = [];
    const pending: Array<() => void> = [];
    const b = ShmBackend.open(a.path, a.size, (off, len, done) => {
      told.push([off, len]);
      pending.push(done);
    });
    expect(read(b, 0, 8192).every((x) => x === 0)).toBe(true);
    // The creator writes without telling b: b still reads its cached zeros, so reads are served from the copy.
    a.write(0, [Buffer.alloc(8192, 0x33)], false, (err) => expect(err).toBeNull());
    expect(read(b, 0, 8192).every((x) => x === 0)).toBe(true);
    // Invalidation is per 4 KiB block: the first block is re-read from the file, the second stays cached.
    b.invalidate(100, 1);
    const mixed = read(b, 0, 8192);
    expect(mixed.subarray(0, 4096).every((x) => x === 0x33)).toBe(true);
    expect(mixed.subarray(4096).every((x) => x === 0)).toBe(true);
    // b's own write: in the file and in b's copy at once, completed only when the hook says every other copy is gone.
    let completed = false;
    b.write(4096 + 512, [Buffer.alloc(512, 0x44)], false, (err) => {
      expect(err).toBeNull();
      completed = true;
    });
    expect(told).toEqual([[4608, 512]]);
    expect(completed).toBe(false);
    expect(read(a, 4608, 512).every((x) => x === 0x44)).toBe(true);
    const own = read(b, 4096, 4096);
    expect(own.subarray(0, 512).every((x) => x === 0)).toBe(true);
    expect(own.subarray(512, 1024).every((x) => x === 0x44)).toBe(true);
    (pending.shift() as () => void)();
    expect(completed).toBe(true);
    // A read across the 1 MiB edge of the cache's pieces, and Write Zeroes through the hook.
    const edge = Buffer.from(Array.from({ length: 12288 }, (_, i) => (i * 11 + 1) & 0xff));
    a.write((1 << 20) - 4096, [edge], false, () => undefined);
    expect(read(b, (1 << 20) - 4096, 12288).equals(edge)).toBe(true);
    b.writeZeroes((1 << 20) - 512, 1024, false, (err) => expect(err).toBeNull());
    expect(told.at(-1)).toEqual([(1 << 20) - 512, 1024]);
    (pending.shift() as () => void)();
    const z = read(b, (1 << 20) - 4096, 12288);
    expect(z.subarray(0, 3584).equals(edge.subarray(0, 3584))).toBe(true);
    expect(z.subarray(3584, 4608).every((x) => x === 0)).toBe(true);
    expect(z.subarray(4608).equals(edge.subarray(4608))).toBe(true);
    expect(read(a, (1 << 20) - 512, 1024).every((x) => x === 0)).toBe(true);
    await b.close();
    await a.close();
  });

  it('leaves no name behind: a killed primary frees its namespaces with its last open descriptor', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'nvt-shm-'));
    dirs.push(dir);
    const a = ShmBackend.create(1 << 20, dir);
    expect(readdirSync(dir)).toEqual([]);
    expect(a.path).toBe(`/proc/${process.pid}/fd/${a.fd}`);
    // An opener (a worker, also a restarted one) still reaches the same memory through the creator's descriptor.
    const b = ShmBackend.open(a.path, a.size);
    b.write(0, [Buffer.alloc(512, 0x42)], false, (err) => expect(err).toBeNull());
    expect(read(a, 0, 512).every((x) => x === 0x42)).toBe(true);
    await b.close();
    await a.close();
    expect(existsSync(a.path)).toBe(false);
  });

  it('sweeps files of primaries that are gone, keeps those of live ones and foreign names', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'nvt-shm-'));
    dirs.push(dir);
    // A pid that certainly ended: a child that has exited and been reaped.
    const dead = spawnSync(process.execPath, ['-e', '0']).pid as number;
    const live = process.ppid;
    for (const n of [`nvme-tcp-ts-${dead}-1.ram`, `nvme-tcp-ts-${dead}-7.ram`, `nvme-tcp-ts-${live}-1.ram`, 'other.ram', `nvme-tcp-ts-${dead}-1.img`]) writeFileSync(path.join(dir, n), 'x');
    expect(sweepStale(dir).sort()).toEqual([`nvme-tcp-ts-${dead}-1.ram`, `nvme-tcp-ts-${dead}-7.ram`]);
    expect(readdirSync(dir).sort()).toEqual([`nvme-tcp-ts-${dead}-1.img`, `nvme-tcp-ts-${live}-1.ram`, 'other.ram'].sort());
    // create() sweeps as well.
    writeFileSync(path.join(dir, `nvme-tcp-ts-${dead}-2.ram`), 'x');
    const a = ShmBackend.create(4096, dir);
    expect(existsSync(path.join(dir, `nvme-tcp-ts-${dead}-2.ram`))).toBe(false);
    void a.close();
  });
});
