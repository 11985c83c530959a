// CRC32C (TCP 1.0 §3.6.1.4): native and slice-by-8 paths against a bitwise reference.
import { Buffer } from 'node:buffer';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { crc32c, crc32cSoftware } from './index.js';
import { crc32cBitwise, pattern } from '../testing/pdu-builder.js';

describe('crc32c', () => {
  it.each([
    { name: 'check value "123456789"', buf: Buffer.from('123456789'), crc: 0xe3069283 },
    { name: 'empty', buf: Buffer.alloc(0), crc: 0 },
    // RFC 3720 B.4 (iSCSI uses the same CRC32C): 32 bytes of zeros / ones / incrementing.
    { name: '32 × 0x00', buf: Buffer.alloc(32, 0), crc: 0x8a9136aa },
    { name: '32 × 0xff', buf: Buffer.alloc(32, 0xff), crc: 0x62a8ab43 },
    { name: '0x00..0x1f', buf: pattern(32, 0, 1), crc: 0x46dd794e },
  ])('$name', ({ buf, crc }) => {
    expect(crc32c(buf)).toBe(crc);
    expect(crc32cSoftware(buf)).toBe(crc);
    expect(crc32cBitwise(buf)).toBe(crc);
  });

  it('native, slice-by-8 and bitwise agree on random buffers, split anywhere', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat(), (arr, at) => {
        const buf = Buffer.from(arr);
        const want = crc32cBitwise(buf);
        const cut = buf.length === 0 ? 0 : at % (buf.length + 1);
        expect(crc32c(buf)).toBe(want);
        expect(crc32cSoftware(buf)).toBe(want);
        expect(crc32c(buf.subarray(cut), crc32c(buf.subarray(0, cut)))).toBe(want);
        expect(crc32cSoftware(buf.subarray(cut), crc32cSoftware(buf.subarray(0, cut)))).toBe(want);
      }),
      { numRuns: 300 },
    );
  });

  it('returns unsigned 32-bit values', () => {
    const v = crc32c(Buffer.alloc(32, 0xff));
    expect(v).toBeGreaterThan(0);
    expect(v >>> 0).toBe(v);
  });

  it('handles views at odd byte offsets of a larger buffer (slice-by-8 alignment)', () => {
    const big = pattern(4096 + 13, 5, 131);
    for (const off of [0, 1, 3, 7, 9]) {
      const view = big.subarray(off, off + 4096);
      expect(crc32cSoftware(view)).toBe(crc32cBitwise(view));
      expect(crc32c(view)).toBe(crc32cBitwise(view));
    }
  });
});
