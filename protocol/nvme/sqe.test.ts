import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  COPY_RANGE_SIZE,
  decodeCopyRanges,
  encodeCopyCmd,
  encodeCopyRanges,
  DSM_RANGE_SIZE,
  DsmRangeOffset,
  PSDT_SGL,
  SGL_DESC_SIZE,
  SQE_SIZE,
  SglOffset,
  SglType,
  SqeOffset,
  decodeDsmCmd,
  decodeDsmRanges,
  decodeRwFields,
  decodeSgl,
  decodeSqe,
  decodeWriteZeroesFields,
  encodeDsmCmd,
  encodeDsmRanges,
  encodeRwCmd,
  encodeSqe,
  encodeSqeInto,
  encodeWriteZeroesCmd,
  sglDescType,
  sglInCapsule,
  sglSubtype,
  sglTransport,
} from './sqe.js';
import type { Sqe, SqeInit } from './sqe.js';
import { bytes } from '../testing/fixture-builder.js';

describe('SQE layout (NVMe Base 2.0 Figure 88)', () => {
  it('has the spec sizes and offsets', () => {
    expect(SQE_SIZE).toBe(64);
    expect(SGL_DESC_SIZE).toBe(16);
    expect(SqeOffset).toEqual({
      opcode: 0, flags: 1, cid: 2, nsid: 4, cdw2: 8, cdw3: 12, mptr: 16, dptr: 24,
      cdw10: 40, cdw11: 44, cdw12: 48, cdw13: 52, cdw14: 56, cdw15: 60,
    });
    expect(SglOffset).toEqual({ address: 0, length: 8, type: 15 });
    expect(PSDT_SGL).toBe(0x40);
    expect(SglType.TRANSPORT_DATA_BLOCK).toBe(0x5a);
    expect(SglType.DATA_BLOCK_OFFSET).toBe(0x01);
    expect(DSM_RANGE_SIZE).toBe(16);
    expect(DsmRangeOffset).toEqual({ cattr: 0, nlb: 4, slba: 8 });
  });

  it('splits the SGL type byte', () => {
    expect(sglDescType(0x5a)).toBe(5);
    expect(sglSubtype(0x5a)).toBe(0xa);
    expect(sglDescType(0x01)).toBe(0);
    expect(sglSubtype(0x01)).toBe(1);
  });
});

interface SqeCase {
  name: string;
  fields: Sqe;
  wire: Buffer;
}

const full: SqeCase = {
  name: 'every field distinct',
  fields: {
    opcode: 0x81, flags: 0x41, fuse: 0x01, psdt: 0x40, cid: 0xbeef, nsid: 0xfffffffe,
    cdw2: 0x11223344, cdw3: 0x55667788, mptr: 0x0102030405060708n,
    sgl: { address: 0xa1a2a3a4a5a6a7a8n, length: 0x12345678, type: 0x5a },
    cdw10: 0x80000001, cdw11: 0xc0000002, cdw12: 0xe0000003, cdw13: 0xf0000004, cdw14: 0xf8000005, cdw15: 0xfc000006,
  },
  wire: bytes(64)
    .u8(0, 0x81).u8(1, 0x41).u16(2, 0xbeef).u32(4, 0xfffffffe)
    .u32(8, 0x11223344).u32(12, 0x55667788).u64(16, 0x0102030405060708n)
    .u64(24, 0xa1a2a3a4a5a6a7a8n).u32(32, 0x12345678).u8(39, 0x5a)
    .u32(40, 0x80000001).u32(44, 0xc0000002).u32(48, 0xe0000003).u32(52, 0xf0000004).u32(56, 0xf8000005).u32(60, 0xfc000006)
    .build(),
};

const keepAlive: SqeCase = {
  name: 'Keep Alive as Linux sends it (null SGL)',
  fields: {
    opcode: 0x18, flags: 0x40, fuse: 0, psdt: 0x40, cid: 16384, nsid: 0, cdw2: 0, cdw3: 0, mptr: 0n,
    sgl: { address: 0n, length: 0, type: 0x5a },
    cdw10: 0, cdw11: 0, cdw12: 0, cdw13: 0, cdw14: 0, cdw15: 0,
  },
  wire: bytes(64).u8(0, 0x18).u8(1, 0x40).u16(2, 16384).u8(39, 0x5a).build(),
};

const inCapsuleWrite: SqeCase = {
  name: 'Write 4 KiB in-capsule (SGL 0x01)',
  fields: {
    opcode: 0x01, flags: 0x40, fuse: 0, psdt: 0x40, cid: 97, nsid: 1, cdw2: 0, cdw3: 0, mptr: 0n,
    sgl: { address: 0n, length: 4096, type: 0x01 },
    cdw10: 16, cdw11: 0, cdw12: 0, cdw13: 0, cdw14: 0, cdw15: 0,
  },
  wire: bytes(64).u8(0, 0x01).u8(1, 0x40).u16(2, 97).u32(4, 1).u32(32, 4096).u8(39, 0x01).u32(40, 16).build(),
};

describe.each([full, keepAlive, inCapsuleWrite])('SQE $name', ({ fields, wire }) => {
  it('decodes', () => {
    expect(decodeSqe(wire)).toEqual(fields);
  });
  it('encodes', () => {
    expect(encodeSqe(fields)).toEqual(wire);
  });
  it('round-trips', () => {
    expect(decodeSqe(encodeSqe(fields))).toEqual(fields);
  });
  it('decodes at an offset inside a PDU', () => {
    const pdu = Buffer.concat([Buffer.alloc(8, 0xee), wire, Buffer.alloc(4, 0xdd)]);
    expect(decodeSqe(pdu, 8)).toEqual(fields);
  });
});

describe('SQE defaults and edge cases', () => {
  it('defaults flags to PSDT_SGL and the SGL to a null transport data block', () => {
    const b = encodeSqe({ opcode: 0x06, cid: 7 });
    expect(b).toEqual(bytes(64).u8(0, 0x06).u8(1, 0x40).u16(2, 7).u8(39, 0x5a).build());
  });

  it('lets psdt and fuse override their flag bits', () => {
    expect(encodeSqe({ opcode: 1, cid: 1, psdt: 0x00 })[1]).toBe(0x00);
    expect(encodeSqe({ opcode: 1, cid: 1, fuse: 2 })[1]).toBe(0x42);
    expect(encodeSqe({ opcode: 1, cid: 1, flags: 0x80, fuse: 1 })[1]).toBe(0x81);
  });

  it('truncates out-of-range numbers to the field width', () => {
    const b = encodeSqe({ opcode: 0x1ff, cid: 0x12345, nsid: -1 });
    expect(b[0]).toBe(0xff);
    expect(b.readUInt16LE(2)).toBe(0x2345);
    expect(b.readUInt32LE(4)).toBe(0xffffffff);
  });

  it('zero-fills short input instead of throwing', () => {
    const short = bytes(5).u8(0, 0x02).u8(1, 0x40).u16(2, 9).u8(4, 0x07).build();
    const s = decodeSqe(short);
    expect(s.opcode).toBe(2);
    expect(s.cid).toBe(9);
    expect(s.nsid).toBe(7);
    expect(s.sgl).toEqual({ address: 0n, length: 0, type: 0 });
    expect(decodeSqe(Buffer.alloc(0))).toEqual(decodeSqe(Buffer.alloc(64)));
    expect(decodeSqe(Buffer.alloc(64), 100).opcode).toBe(0);
  });

  it('encodes into an existing buffer at an offset, leaving the rest alone', () => {
    const b = Buffer.alloc(80, 0xaa);
    encodeSqeInto(b, 8, { opcode: 0x02, cid: 3 });
    expect(b[7]).toBe(0xaa);
    expect(b[8]).toBe(0x02);
    expect(b[72]).toBe(0xaa);
    expect(b.subarray(8, 72)).toEqual(encodeSqe({ opcode: 0x02, cid: 3 }));
  });

  it('builds the two TCP SGL forms', () => {
    expect(sglTransport(131072)).toEqual({ address: 0n, length: 131072, type: 0x5a });
    expect(sglInCapsule(1024)).toEqual({ address: 0n, length: 1024, type: 0x01 });
    expect(decodeSgl(bytes(16).u64(0, 5n).u32(8, 9).u8(15, 0x01).build())).toEqual({ address: 5n, length: 9, type: 0x01 });
  });
});

describe('NVM Read/Write fields (NVM Command Set 1.0 §3.2.4/§3.2.6)', () => {
  const cases = [
    { name: 'read 1 block at 0', slba: 0n, nlb: 1, fua: false, lr: false, cdw10: 0, cdw11: 0, cdw12: 0 },
    { name: 'write 32 blocks at 256 FUA', slba: 256n, nlb: 32, fua: true, lr: false, cdw10: 256, cdw11: 0, cdw12: 0x4000001f },
    { name: 'high SLBA, max NLB, LR', slba: 0x0000_1234_8765_4321n, nlb: 65536, fua: false, lr: true, cdw10: 0x87654321, cdw11: 0x1234, cdw12: 0x8000ffff },
  ];
  it.each(cases)('$name: encodes with a 0\'s based NLB', (c) => {
    const b = encodeRwCmd({ opcode: 0x02, cid: 5, nsid: 1, slba: c.slba, nlb: c.nlb, fua: c.fua, lr: c.lr, sgl: sglTransport(4096) });
    const want = bytes(64).u8(0, 0x02).u8(1, 0x40).u16(2, 5).u32(4, 1).u32(32, 4096).u8(39, 0x5a)
      .u32(40, c.cdw10).u32(44, c.cdw11).u32(48, c.cdw12).build();
    expect(b).toEqual(want);
  });
  it.each(cases)('$name: decodes NLB as a count', (c) => {
    const sqe = decodeSqe(bytes(64).u8(0, 0x01).u32(40, c.cdw10).u32(44, c.cdw11).u32(48, c.cdw12).build());
    expect(decodeRwFields(sqe)).toEqual({ slba: c.slba, nlb: c.nlb, fua: c.fua, lr: c.lr, dtype: 0, dsm: 0, dspec: 0 });
  });
  it('decodes DSM hints, DSPEC and DTYPE', () => {
    const sqe = decodeSqe(bytes(64).u32(48, 0x00200000).u32(52, 0xabcd0007).build());
    const f = decodeRwFields(sqe);
    expect(f.dtype).toBe(2);
    expect(f.dsm).toBe(7);
    expect(f.dspec).toBe(0xabcd);
  });
});

describe('Write Zeroes (NVM Command Set 1.0 §3.2.8)', () => {
  it('puts DEAC in bit 25 and FUA in bit 30', () => {
    const b = encodeWriteZeroesCmd({ cid: 9, nsid: 2, slba: 0x1_0000_0000n, nlb: 8, deac: true, fua: true });
    expect(b).toEqual(bytes(64).u8(0, 0x08).u8(1, 0x40).u16(2, 9).u32(4, 2).u8(39, 0x5a).u32(44, 1).u32(48, 0x42000007).build());
    expect(decodeWriteZeroesFields(decodeSqe(b))).toEqual({ slba: 0x1_0000_0000n, nlb: 8, deac: true, fua: true });
  });
  it('leaves both clear by default', () => {
    const f = decodeWriteZeroesFields(decodeSqe(encodeWriteZeroesCmd({ cid: 1, nsid: 1, slba: 3n, nlb: 1 })));
    expect(f).toEqual({ slba: 3n, nlb: 1, deac: false, fua: false });
  });
});

describe('Copy (NVM Command Set 1.0 §3.2.2)', () => {
  it('SDLBA in CDW10–11; NR (0\'s based) bits 7:0, Descriptor Format bits 11:8, FUA bit 30 of CDW12', () => {
    const b = encodeCopyCmd({ cid: 5, nsid: 1, sdlba: 0xffff_ffff_ffff_ffffn, count: 256, format: 1, fua: true });
    expect(b).toEqual(bytes(64).u8(0, 0x19).u8(1, 0x40).u16(2, 5).u32(4, 1).u8(39, 0x5a).u32(40, 0xffff_ffff).u32(44, 0xffff_ffff).u32(48, 0x4000_01ff).build());
    expect(encodeCopyCmd({ cid: 1, nsid: 1, sdlba: 0x8000_0000n, count: 1 })).toEqual(bytes(64).u8(0, 0x19).u8(1, 0x40).u16(2, 1).u32(4, 1).u8(39, 0x5a).u32(40, 0x8000_0000).build());
  });
  it('source range entries: 32 bytes (format 0) or 40 (format 1), SLBA at 8, NLB 0\'s based at 16', () => {
    expect(COPY_RANGE_SIZE).toEqual([32, 40]);
    const ranges = [
      { slba: 0xffff_ffffn, nlb: 65536 },
      { slba: 1n, nlb: 1 },
    ];
    const f0 = bytes(64).u64(8, 0xffff_ffffn).u16(16, 0xffff).u64(40, 1n).u16(48, 0).build();
    const f1 = bytes(80).u64(8, 0xffff_ffffn).u16(16, 0xffff).u64(48, 1n).u16(56, 0).build();
    expect(encodeCopyRanges(ranges, 0)).toEqual(f0);
    expect(encodeCopyRanges(ranges, 1)).toEqual(f1);
    expect(decodeCopyRanges(f0, 2, 0)).toEqual(ranges);
    expect(decodeCopyRanges(f1, 2, 1)).toEqual(ranges);
    // Past the buffer: zero-filled, NLB 0 meaning one block.
    expect(decodeCopyRanges(f0, 3, 0)[2]).toEqual({ slba: 0n, nlb: 1 });
  });
});

describe('Dataset Management (NVM Command Set 1.0 §3.2.3)', () => {
  const ranges = [
    { cattr: 0, nlb: 8, slba: 0n },
    { cattr: 0x01020304, nlb: 0xffffffff, slba: 0xfedcba9876543210n },
  ];
  const wire = bytes(32).u32(4, 8).u64(8, 0n).u32(16, 0x01020304).u32(20, 0xffffffff).u64(24, 0xfedcba9876543210n).build();
  it('encodes ranges (NLB not 0\'s based)', () => {
    expect(encodeDsmRanges(ranges)).toEqual(wire);
  });
  it('decodes ranges', () => {
    expect(decodeDsmRanges(wire, 2)).toEqual(ranges);
  });
  it('zero-fills ranges beyond the buffer and clamps the count', () => {
    expect(decodeDsmRanges(wire, 3)[2]).toEqual({ cattr: 0, nlb: 0, slba: 0n });
    expect(decodeDsmRanges(wire, 10_000)).toHaveLength(256);
    expect(decodeDsmRanges(wire, -5)).toEqual([]);
  });
  it('encodes and decodes the command (NR 0\'s based, AD bit 2)', () => {
    const b = encodeDsmCmd({ cid: 4, nsid: 1, count: 2, ad: true, sgl: sglInCapsule(32) });
    expect(b).toEqual(bytes(64).u8(0, 0x09).u8(1, 0x40).u16(2, 4).u32(4, 1).u32(32, 32).u8(39, 0x01).u32(40, 1).u32(44, 4).build());
    expect(decodeDsmCmd(decodeSqe(b))).toEqual({ count: 2, idr: false, idw: false, ad: true });
  });
});

const u32Arb = fc.integer({ min: 0, max: 0xffffffff });
const sqeArb: fc.Arbitrary<Sqe> = fc
  .record({
    opcode: fc.integer({ min: 0, max: 255 }),
    flags: fc.integer({ min: 0, max: 255 }),
    cid: fc.integer({ min: 0, max: 0xffff }),
    nsid: u32Arb,
    cdw2: u32Arb,
    cdw3: u32Arb,
    mptr: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
    sgl: fc.record({ address: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), length: u32Arb, type: fc.integer({ min: 0, max: 255 }) }),
    cdw10: u32Arb,
    cdw11: u32Arb,
    cdw12: u32Arb,
    cdw13: u32Arb,
    cdw14: u32Arb,
    cdw15: u32Arb,
  })
  .map((r) => ({ ...r, fuse: r.flags & 0x03, psdt: r.flags & 0xc0 }));

describe('SQE properties', () => {
  it('decodeSqe never throws on random buffers of any length', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 80 }), fc.integer({ min: -4, max: 90 }), (a, off) => {
        decodeSqe(Buffer.from(a), off);
      }),
      { numRuns: 300 },
    );
  });
  it('encode ∘ decode is the identity on random SQE bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 64, maxLength: 64 }), (a) => {
        const b = Buffer.from(a);
        b.fill(0, 36, 39); // SGL reserved bytes are not represented
        expect(encodeSqe(decodeSqe(b))).toEqual(b);
      }),
      { numRuns: 200 },
    );
  });
  it('decode ∘ encode is the identity on the fields', () => {
    fc.assert(
      fc.property(sqeArb, (s) => {
        const init: SqeInit = s;
        expect(decodeSqe(encodeSqe(init))).toEqual(s);
      }),
      { numRuns: 200 },
    );
  });
  it('Read/Write fields round-trip', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
        fc.integer({ min: 1, max: 65536 }),
        fc.boolean(),
        fc.boolean(),
        (slba, nlb, fua, lr) => {
          const f = decodeRwFields(decodeSqe(encodeRwCmd({ opcode: 1, cid: 1, nsid: 1, slba, nlb, fua, lr, sgl: sglTransport(0) })));
          expect([f.slba, f.nlb, f.fua, f.lr]).toEqual([slba, nlb, fua, lr]);
        },
      ),
      { numRuns: 200 },
    );
  });
});
