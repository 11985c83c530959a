import { Buffer } from 'node:buffer';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FileBackend, NullBackend, RAM_CHUNK_SIZE, RamBackend, type NamespaceBackend } from './index.js';

const read = (b: NamespaceBackend, off: number, len: number): Promise<Buffer> =>
  new Promise((res, rej) => b.read(off, len, (e, d) => (e ? rej(e) : res(Buffer.concat(d)))));
const write = (b: NamespaceBackend, off: number, data: Buffer[], fua = false): Promise<void> =>
  new Promise((res, rej) => b.write(off, data, fua, (e) => (e ? rej(e) : res())));
const zero = (b: NamespaceBackend, off: number, len: number): Promise<void> => new Promise((res, rej) => b.writeZeroes(off, len, true, (e) => (e ? rej(e) : res())));

let dir: string | undefined;
afterEach(async () => {
  if (dir !== undefined) await fs.rm(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('RamBackend', () => {
  it('is sparse, reads zeros where unwritten, spans chunks, frees on deallocate', async () => {
    const b = new RamBackend(16 * RAM_CHUNK_SIZE);
    expect((await read(b, 0, 4096)).every((x) => x === 0)).toBe(true);
    expect(b.allocatedBytes).toBe(0);
    const d = Buffer.from(Buffer.alloc(RAM_CHUNK_SIZE + 1000).map((_, i) => i & 0xff));
    const off = RAM_CHUNK_SIZE - 500;
    await write(b, off, [d.subarray(0, 700), d.subarray(700)]);
    expect(b.allocatedBytes).toBe(3 * RAM_CHUNK_SIZE);
    expect((await read(b, off, d.length)).equals(d)).toBe(true);
    await zero(b, RAM_CHUNK_SIZE, RAM_CHUNK_SIZE);
    expect(b.allocatedBytes).toBe(2 * RAM_CHUNK_SIZE);
    expect((await read(b, RAM_CHUNK_SIZE, 10)).every((x) => x === 0)).toBe(true);
    expect((await read(b, off, 10)).equals(d.subarray(0, 10))).toBe(true);
  });
});

describe('NullBackend', () => {
  it('discards writes and reads zeros', async () => {
    const b = new NullBackend(1 << 20);
    await write(b, 0, [Buffer.alloc(512, 9)]);
    expect((await read(b, 0, 300000)).every((x) => x === 0)).toBe(true);
  });
});

describe('FileBackend', () => {
  it('creates, extends, persists across reopen, zeroes', async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nvme-be-'));
    const p = path.join(dir, 'a.img');
    await expect(FileBackend.open({ path: p })).rejects.toThrow(/does not exist/);
    const b = await FileBackend.open({ path: p, size: 1 << 20 });
    expect(b.size).toBe(1 << 20);
    const d = Buffer.from(Buffer.alloc(5000).map((_, i) => (i * 11) & 0xff));
    await write(b, 4096, [d.subarray(0, 100), d.subarray(100)], true);
    await zero(b, 4096 + 1000, 1000);
    await b.close();
    const b2 = await FileBackend.open({ path: p });
    expect(b2.size).toBe(1 << 20);
    const got = await read(b2, 4096, 5000);
    expect(got.subarray(0, 1000).equals(d.subarray(0, 1000))).toBe(true);
    expect(got.subarray(1000, 2000).every((x) => x === 0)).toBe(true);
    expect(got.subarray(2000).equals(d.subarray(2000))).toBe(true);
    await b2.close();
    const b3 = await FileBackend.open({ path: p, size: 2 << 20 });
    expect((await fs.stat(p)).size).toBe(2 << 20);
    await b3.close();
  });
});
