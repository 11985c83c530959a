import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { rd16, rd32, wr16, wr32 } from './le.js';

// Checked against Buffer's own accessors, which are the reference for the wire byte order.
describe('little-endian helpers', () => {
  const values = [0, 1, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x1_0000, 0x7fff_ffff, 0x8000_0000, 0xdead_beef, 0xffff_ffff];
  it('rd32/wr32 agree with readUInt32LE/writeUInt32LE at every offset', () => {
    for (const v of values) {
      for (let o = 0; o < 5; o++) {
        const a = Buffer.alloc(9, 0xaa);
        const b = Buffer.alloc(9, 0xaa);
        wr32(a, o, v);
        b.writeUInt32LE(v, o);
        expect(a).toEqual(b);
        expect(rd32(a, o)).toBe(v);
      }
    }
  });
  it('rd16/wr16 agree with readUInt16LE/writeUInt16LE and keep the low 16 bits', () => {
    for (const v of values) {
      const a = Buffer.alloc(4, 0x55);
      const b = Buffer.alloc(4, 0x55);
      wr16(a, 1, v);
      b.writeUInt16LE(v & 0xffff, 1);
      expect(a).toEqual(b);
      expect(rd16(a, 1)).toBe(v & 0xffff);
    }
  });
  it('wr32 keeps the low 32 bits of a larger or negative value', () => {
    const a = Buffer.alloc(4);
    wr32(a, 0, -1);
    expect(a.readUInt32LE(0)).toBe(0xffff_ffff);
    wr32(a, 0, 0x1_2345_6789);
    expect(a.readUInt32LE(0)).toBe(0x2345_6789);
  });
});
