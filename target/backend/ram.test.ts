// RamBackend's digest support: CRC32C from the per-4 KiB block cache equals a direct CRC of the returned bytes, and
// views returned with a CRC never change afterwards (copy-on-write), whatever is written next. Its arenas: slots are
// never handed out twice (a view returned earlier never shows another chunk's bytes), arenas that lose most of their
// chunks are evacuated (data kept, memory bounded), and reads match a plain-buffer model whatever mix of writes,
// deallocations and digest/non-digest reads came before.
import { Buffer } from 'node:buffer';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { crc32c } from '../../protocol/index.js';
import { RAM_CHUNK_SIZE, RamBackend } from './ram.js';

const SIZE = 4 * RAM_CHUNK_SIZE;

function read(b: RamBackend, off: number, len: number, wantCrc = false): { data: Buffer[]; crc: number | undefined } {
  let res: { data: Buffer[]; crc: number | undefined } | undefined;
  b.read(off, len, (err, data, crc) => {
    if (err) throw err;
    res = { data, crc };
  }, wantCrc);
  if (res === undefined) throw new Error('RAM read did not complete synchronously');
  return res;
}

const noop = (err: Error | null): void => {
  if (err) throw err;
};

const op = fc.oneof(
  fc.record({ kind: fc.constant('write' as const), off: fc.nat({ max: SIZE - 1 }), len: fc.integer({ min: 1, max: 70_000 }), seed: fc.nat({ max: 255 }) }),
  fc.record({ kind: fc.constant('zero' as const), off: fc.nat({ max: SIZE - 1 }), len: fc.integer({ min: 1, max: 300_000 }) }),
  fc.record({ kind: fc.constant('read' as const), off: fc.nat({ max: SIZE - 1 }), len: fc.integer({ min: 1, max: 300_000 }), aligned: fc.boolean() }),
);

describe('RamBackend CRC cache and copy-on-write', () => {
  it('the CRC returned matches the bytes, and earlier digest reads never change', () => {
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 40 }), (ops) => {
        const b = new RamBackend(SIZE);
        const model = Buffer.alloc(SIZE);
        const kept: Array<{ bytes: Buffer; data: Buffer[] }> = [];
        for (const o of ops) {
          if (o.kind === 'write') {
            const len = Math.min(o.len, SIZE - o.off);
            const src = Buffer.alloc(len, o.seed);
            b.write(o.off, [src.subarray(0, len >> 1), src.subarray(len >> 1)], false, noop);
            src.copy(model, o.off);
          } else if (o.kind === 'zero') {
            const len = Math.min(o.len, SIZE - o.off);
            b.writeZeroes(o.off, len, true, noop);
            model.fill(0, o.off, o.off + len);
          } else {
            let off = o.off;
            let len = Math.min(o.len, SIZE - off);
            if (o.aligned) {
              off -= off % 4096;
              len = Math.max(4096, len - (len % 4096));
              if (off + len > SIZE) len = SIZE - off;
            }
            const r = read(b, off, len, true);
            const bytes = Buffer.concat(r.data);
            expect(bytes.equals(model.subarray(off, off + len))).toBe(true);
            expect(r.crc).toBe(crc32c(bytes));
            kept.push({ bytes: Buffer.from(bytes), data: r.data });
          }
        }
        for (const k of kept) expect(Buffer.concat(k.data).equals(k.bytes)).toBe(true);
      }),
      { numRuns: 150 },
    );
  });

  it('aligned digests come from cached block CRCs, and a write invalidates only what it touched', () => {
    const b = new RamBackend(SIZE);
    b.write(8192, [Buffer.alloc(4096, 7)], false, noop);
    const a = read(b, 0, RAM_CHUNK_SIZE, true);
    expect(a.crc).toBe(crc32c(Buffer.concat(a.data)));
    b.write(4096 * 5 + 100, [Buffer.from('changed')], false, noop);
    const c = read(b, 0, RAM_CHUNK_SIZE, true);
    expect(c.crc).toBe(crc32c(Buffer.concat(c.data)));
    expect(c.crc).not.toBe(a.crc);
    // The first read's views were not touched by the write (copy-on-write).
    expect(Buffer.concat(a.data).includes(Buffer.from('changed'))).toBe(false);
  });
});

const CS = RAM_CHUNK_SIZE;

const fillChunk = (b: RamBackend, idx: number, byte: number): void => b.write(idx * CS, [Buffer.alloc(CS, byte)], false, noop);

describe('RamBackend arenas', () => {
  it('never hands a freed slot to another chunk: an earlier view keeps its bytes', () => {
    const b = new RamBackend(64 * CS);
    fillChunk(b, 5, 0xaa);
    const view = read(b, 5 * CS + 4096, 4096).data;
    b.writeZeroes(5 * CS, CS, true, noop);
    // Enough new chunks to fill several arenas and trigger evacuations.
    for (let i = 10; i < 60; i++) fillChunk(b, i, 0xbb);
    for (let i = 10; i < 60; i += 2) b.writeZeroes(i * CS, CS, true, noop);
    for (let i = 0; i < 10; i++) fillChunk(b, i, 0xcc);
    expect(Buffer.concat(view).every((x) => x === 0xaa)).toBe(true);
    expect(read(b, 5 * CS, 16).data[0]?.every((x) => x === 0xcc)).toBe(true);
  });

  it('evacuates arenas that lose most of their chunks, keeping data and bounding memory', () => {
    const b = new RamBackend(64 * CS);
    for (let i = 0; i < 64; i++) fillChunk(b, i, i);
    expect(b.arenaBytes).toBe(64 * CS);
    const views = Array.from({ length: 64 }, (_, i) => read(b, i * CS, 512).data);
    // Free three of every four chunks in the first three arenas (chunks were placed in write order, 16 per arena).
    for (let i = 0; i < 48; i++) if (i % 4 !== 0) b.writeZeroes(i * CS, CS, true, noop);
    expect(b.allocatedBytes).toBe((12 + 16) * CS);
    // Three arenas of 16 would hold 4 live chunks each; evacuated, the 12 survivors fit in one new arena.
    expect(b.arenaBytes).toBeLessThanOrEqual(2 * b.allocatedBytes + 16 * CS);
    expect(b.arenaBytes).toBeLessThan(64 * CS);
    for (let i = 0; i < 64; i++) {
      const want = i < 48 && i % 4 !== 0 ? 0 : i;
      expect(read(b, i * CS, CS).data[0]?.every((x) => x === want)).toBe(true);
      // Views taken before show what they showed then, evacuated or freed alike.
      expect(views[i]?.[0]?.every((x) => x === i)).toBe(true);
    }
  });

  it('a digest read lends the chunk; the next write moves it and the lent views stay as they were', () => {
    const b = new RamBackend(4 * CS);
    fillChunk(b, 1, 0x11);
    const lent = read(b, CS, CS, true);
    expect(lent.crc).toBe(crc32c(Buffer.alloc(CS, 0x11)));
    b.write(CS + 100, [Buffer.from('new')], false, noop);
    expect(Buffer.concat(lent.data).every((x) => x === 0x11)).toBe(true);
    const after = read(b, CS + 100, 3, true);
    expect(Buffer.concat(after.data).toString()).toBe('new');
    expect(after.crc).toBe(crc32c(Buffer.from('new')));
  });

  const ARENA_SIZE = 40 * CS;
  const arenaOp = fc.oneof(
    fc.record({ kind: fc.constant('write' as const), off: fc.nat({ max: ARENA_SIZE - 1 }), len: fc.integer({ min: 1, max: 3 * CS }), seed: fc.integer({ min: 1, max: 255 }) }),
    fc.record({ kind: fc.constant('zero' as const), off: fc.nat({ max: ARENA_SIZE - 1 }), len: fc.integer({ min: 1, max: 6 * CS }) }),
    fc.record({ kind: fc.constant('read' as const), off: fc.nat({ max: ARENA_SIZE - 1 }), len: fc.integer({ min: 1, max: 2 * CS }), crc: fc.boolean() }),
  );

  it('reads match a plain-buffer model, and digest views never change, through writes, frees and evacuations', () => {
    fc.assert(
      fc.property(fc.array(arenaOp, { minLength: 1, maxLength: 80 }), (ops) => {
        const b = new RamBackend(ARENA_SIZE);
        const model = Buffer.alloc(ARENA_SIZE);
        const kept: Array<{ bytes: Buffer; data: Buffer[] }> = [];
        for (const o of ops) {
          const len = Math.min(o.len, ARENA_SIZE - o.off);
          if (o.kind === 'write') {
            const src = Buffer.alloc(len, o.seed);
            b.write(o.off, [src], false, noop);
            src.copy(model, o.off);
          } else if (o.kind === 'zero') {
            b.writeZeroes(o.off, len, true, noop);
            model.fill(0, o.off, o.off + len);
          } else {
            const r = read(b, o.off, len, o.crc);
            const bytes = Buffer.concat(r.data);
            expect(bytes.equals(model.subarray(o.off, o.off + len))).toBe(true);
            if (o.crc) {
              expect(r.crc).toBe(crc32c(bytes));
              kept.push({ bytes: Buffer.from(bytes), data: r.data });
            }
          }
          expect(b.arenaBytes).toBeLessThanOrEqual(2 * b.allocatedBytes + 16 * CS);
        }
        for (const k of kept) expect(Buffer.concat(k.data).equals(k.bytes)).toBe(true);
      }),
      { numRuns: 100 },
    );
  });
});
