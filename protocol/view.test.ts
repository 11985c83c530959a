import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { bufferView } from './view.js';

describe('bufferView', () => {
  const backing = Buffer.from(Array.from({ length: 64 }, (_, i) => i));

  it('is a Buffer over the same memory, not a copy', () => {
    const v = bufferView(backing.buffer, backing.byteOffset + 8, 16);
    expect(Buffer.isBuffer(v)).toBe(true);
    expect(v).toBeInstanceOf(Buffer);
    expect(v.length).toBe(16);
    expect([...v]).toEqual(Array.from({ length: 16 }, (_, i) => i + 8));
    const w = Buffer.from(backing);
    const vw = bufferView(w.buffer, w.byteOffset + 4, 4);
    vw[0] = 0xee;
    expect(w[4]).toBe(0xee);
  });

  it('has the Buffer methods, and its own subarrays are Buffers too', () => {
    const v = bufferView(backing.buffer, backing.byteOffset, 32);
    expect(v.readUInt32LE(4)).toBe(0x07060504);
    expect(v.toString('hex', 0, 3)).toBe('000102');
    expect(v.equals(backing.subarray(0, 32))).toBe(true);
    const s = v.subarray(2, 5);
    expect(Buffer.isBuffer(s)).toBe(true);
    expect([...s]).toEqual([2, 3, 4]);
    expect(Buffer.concat([v.subarray(0, 2), s])).toEqual(Buffer.from([0, 1, 2, 3, 4]));
  });

  it('refuses a range outside the memory with RangeError', () => {
    const ab = new ArrayBuffer(16);
    expect(() => bufferView(ab, 8, 16)).toThrow(RangeError);
    expect(() => bufferView(ab, 17, 0)).toThrow(RangeError);
  });
});
