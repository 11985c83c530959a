// RamBackend's digest support: CRC32C from the per-4 KiB block cache equals a direct CRC of the returned bytes, and
// views returned with a CRC never change afterwards (copy-on-write), whatever is written next.
import { Buffer } from 'node:buffer';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { crc32c } from '../../protocol/index.js';
import { RAM_CHUNK_SIZE, RamBackend } from './ram.js';

const SIZE = 4 * RAM_CHUNK_SIZE;

function read(b: RamBackend, off: number, len: number, wantCrc: boolean): { data: Buffer[]; crc: number | undefined } {
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
