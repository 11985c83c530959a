import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { CQE_SIZE, CqeOffset, cqeResult64, decodeCqe, encodeCqe, encodeCqeInto, splitResult64 } from './cqe.js';
import type { Cqe } from './cqe.js';
import { bytes } from '../testing/fixture-builder.js';

describe('CQE layout (NVMe Base 2.0 Figure 92)', () => {
  it('has the spec size and offsets', () => {
    expect(CQE_SIZE).toBe(16);
    expect(CqeOffset).toEqual({ dw0: 0, dw1: 4, sqhd: 8, sqid: 10, cid: 12, status: 14 });
  });
});

const cases: { name: string; cqe: Cqe; wire: Buffer }[] = [
  {
    name: 'Connect success, cntlid 1',
    cqe: { dw0: 1, dw1: 0, sqhd: 1, sqid: 0, cid: 0, status: 0 },
    wire: bytes(16).u32(0, 1).u16(8, 1).build(),
  },
  {
    name: 'Property Get CAP (dw1 high half)',
    cqe: { dw0: 0x0f0003ff, dw1: 0x820, sqhd: 2, sqid: 0, cid: 1, status: 0 },
    wire: bytes(16).u32(0, 0x0f0003ff).u32(4, 0x820).u16(8, 2).u16(12, 1).build(),
  },
  {
    name: 'AER aborted at shutdown: INTERNAL|DNR, wire 0x800c',
    cqe: { dw0: 0, dw1: 0, sqhd: 3, sqid: 0, cid: 31, status: 0x4006 },
    wire: bytes(16).u16(8, 3).u16(12, 31).u16(14, 0x800c).build(),
  },
  {
    name: 'Connect invalid host with DNR on an I/O queue, sqflow disabled',
    cqe: { dw0: 0x10200, dw1: 0, sqhd: 0xffff, sqid: 7, cid: 0xf00d, status: 0x4184 },
    wire: bytes(16).u32(0, 0x10200).u16(8, 0xffff).u16(10, 7).u16(12, 0xf00d).u16(14, 0x8308).build(),
  },
  {
    name: 'all status bits (SCT 7, SC 0xff, CRD 3, MORE, DNR)',
    cqe: { dw0: 0xffffffff, dw1: 0xffffffff, sqhd: 0xffff, sqid: 0xffff, cid: 0xffff, status: 0x7fff },
    wire: bytes(16).fill(0, 16, 0xff).u8(14, 0xfe).build(),
  },
];

describe.each(cases)('CQE $name', ({ cqe, wire }) => {
  it('decodes', () => expect(decodeCqe(wire)).toEqual(cqe));
  it('encodes (status << 1, phase 0)', () => expect(encodeCqe(cqe)).toEqual(wire));
  it('round-trips', () => expect(decodeCqe(encodeCqe(cqe))).toEqual(cqe));
});

describe('CQE edge cases', () => {
  it('ignores the phase tag on decode', () => {
    expect(decodeCqe(bytes(16).u16(14, 0x0001).build()).status).toBe(0);
    expect(decodeCqe(bytes(16).u16(14, 0x0005).build()).status).toBe(2);
  });
  it('defaults everything but cid to 0', () => {
    expect(encodeCqe({ cid: 0x1234 })).toEqual(bytes(16).u16(12, 0x1234).build());
  });
  it('writes into a PDU at an offset', () => {
    const pdu = Buffer.alloc(24, 0xaa);
    encodeCqeInto(pdu, 8, { cid: 5, status: 0x0002 });
    expect(pdu.subarray(0, 8)).toEqual(Buffer.alloc(8, 0xaa));
    expect(pdu.readUInt16LE(20)).toBe(5);
    expect(pdu.readUInt16LE(22)).toBe(0x0004);
    expect(decodeCqe(pdu, 8).status).toBe(2);
  });
  it('zero-fills short input', () => {
    expect(decodeCqe(bytes(5).u32(0, 7).u8(4, 1).build())).toEqual({ dw0: 7, dw1: 1, sqhd: 0, sqid: 0, cid: 0, status: 0 });
  });
  it('joins and splits 64-bit results', () => {
    expect(cqeResult64({ dw0: 0x0f0003ff, dw1: 0x820 })).toBe(0x00000820_0f0003ffn);
    expect(splitResult64(0xffffffff_00000001n)).toEqual({ dw0: 1, dw1: 0xffffffff });
  });
});

describe('CQE properties', () => {
  it('never throws and encode ∘ decode is the identity with phase cleared', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 16, maxLength: 16 }), (a) => {
        const b = Buffer.from(a);
        b[14] = (b[14] ?? 0) & 0xfe;
        expect(encodeCqe(decodeCqe(b))).toEqual(b);
      }),
      { numRuns: 300 },
    );
    fc.assert(fc.property(fc.uint8Array({ maxLength: 32 }), fc.integer({ min: -2, max: 40 }), (a, o) => void decodeCqe(Buffer.from(a), o)));
  });
});
