import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  CapCss,
  CcCss,
  CcShn,
  CstsShst,
  NSSR_RESET_VALUE,
  PropertyCmdOffset,
  PropertyOffset,
  decodeCap,
  decodeCc,
  decodeCrto,
  decodeCsts,
  decodePropertyCmd,
  decodeVs,
  encodeCap,
  encodeCc,
  encodeCrto,
  encodeCsts,
  encodePropertyGetCmd,
  encodePropertySetCmd,
  encodeVs,
  propertySize,
} from './property.js';
import type { CapFields, CcFields, CstsFields } from './property.js';
import { decodeSqe } from '../nvme/sqe.js';
import { bytes } from '../testing/fixture-builder.js';

describe('property layout (NVMe-oF 1.1 §3.4/3.5, NVMe Base 2.0 Figure 33)', () => {
  it('offsets and sizes', () => {
    expect(PropertyOffset).toEqual({ CAP: 0, VS: 8, INTMS: 0x0c, INTMC: 0x10, CC: 0x14, CSTS: 0x1c, NSSR: 0x20, CRTO: 0x68 });
    expect(PropertyCmdOffset).toEqual({ fctype: 4, attrib: 40, offset: 44, value: 48 });
    expect(propertySize(PropertyOffset.CAP)).toBe(8);
    for (const o of [0x08, 0x14, 0x1c, 0x20, 0x68]) expect(propertySize(o)).toBe(4);
    expect(NSSR_RESET_VALUE).toBe(0x4e564d65);
  });
});

describe('Property Get / Set commands', () => {
  it('Property Get CAP (8 bytes)', () => {
    const w = bytes(64).u8(0, 0x7f).u8(1, 0x40).u16(2, 1).u8(4, 0x04).u8(39, 0x5a).u8(40, 1).u32(44, 0).build();
    expect(encodePropertyGetCmd({ cid: 1, offset: 0, size8: true })).toEqual(w);
    expect(encodePropertyGetCmd({ cid: 1, offset: 0 })).toEqual(w);
    expect(decodePropertyCmd(w)).toEqual({ fctype: 4, cid: 1, attrib: 1, size8: true, offset: 0, value: 0n });
  });
  it('Property Get CSTS (4 bytes)', () => {
    const w = bytes(64).u8(0, 0x7f).u8(1, 0x40).u16(2, 12288).u8(4, 0x04).u8(39, 0x5a).u32(44, 0x1c).build();
    expect(encodePropertyGetCmd({ cid: 12288, offset: PropertyOffset.CSTS, size8: false })).toEqual(w);
    expect(decodePropertyCmd(decodeSqe(w))).toEqual({ fctype: 4, cid: 12288, attrib: 0, size8: false, offset: 0x1c, value: 0n });
  });
  it('Property Set CC enable', () => {
    const w = bytes(64).u8(0, 0x7f).u8(1, 0x40).u16(2, 8193).u8(4, 0x00).u8(39, 0x5a).u32(44, 0x14).u64(48, 0x460061n).build();
    expect(encodePropertySetCmd({ cid: 8193, offset: PropertyOffset.CC, value: 0x460061n, size8: false })).toEqual(w);
    expect(decodePropertyCmd(w)).toEqual({ fctype: 0, cid: 8193, attrib: 0, size8: false, offset: 0x14, value: 0x460061n });
  });
  it('a 4-byte Set writes only the low 32 bits', () => {
    const b = encodePropertySetCmd({ cid: 1, offset: PropertyOffset.CC, value: 0x1_0000_0001n });
    expect(b.readBigUInt64LE(48)).toBe(1n);
  });
  it('an 8-byte Set writes all 64 bits', () => {
    const b = encodePropertySetCmd({ cid: 1, offset: 0x30, value: 0xffff_0000_ffff_0000n, size8: true });
    expect(b[40]).toBe(1);
    expect(b.readBigUInt64LE(48)).toBe(0xffff_0000_ffff_0000n);
  });
});

describe('CAP (NVMe Base 2.0 Figure 36)', () => {
  const nvmet: CapFields = {
    mqes: 1023, cqr: false, ams: 0, to: 15, dstrd: 0, nssrs: false, css: CapCss.NVM | CapCss.IO_CMD_SETS, bps: false, cps: 0,
    mpsmin: 0, mpsmax: 0, pmrs: false, cmbs: false, nsss: false, crms: 0,
  };
  it('nvmet CAP = 0x000008200f0003ff (fixture dw1:dw0)', () => {
    expect(encodeCap(nvmet)).toBe(0x00000820_0f0003ffn);
    expect(decodeCap(0x00000820_0f0003ffn)).toEqual(nvmet);
  });
  it('puts each field at its bit position', () => {
    const cases: [Partial<CapFields>, bigint][] = [
      [{ mqes: 0xffff }, 0xffffn],
      [{ cqr: true }, 1n << 16n],
      [{ ams: 3 }, 3n << 17n],
      [{ to: 0xff }, 0xffn << 24n],
      [{ dstrd: 0xf }, 0xfn << 32n],
      [{ nssrs: true }, 1n << 36n],
      [{ css: 0xff }, 0xffn << 37n],
      [{ bps: true }, 1n << 45n],
      [{ cps: 3 }, 3n << 46n],
      [{ mpsmin: 0xf }, 0xfn << 48n],
      [{ mpsmax: 0xf }, 0xfn << 52n],
      [{ pmrs: true }, 1n << 56n],
      [{ cmbs: true }, 1n << 57n],
      [{ nsss: true }, 1n << 58n],
      [{ crms: 3 }, 3n << 59n],
    ];
    for (const [f, v] of cases) {
      expect(encodeCap(f)).toBe(v);
      expect(decodeCap(v)).toMatchObject(f);
    }
  });
});

describe('CC (NVMe Base 2.0 Figure 41)', () => {
  it.each([
    [0x460060, { en: false, css: CcCss.CSI, mps: 0, ams: 0, shn: CcShn.NONE, iosqes: 6, iocqes: 4, crime: false }],
    [0x460061, { en: true, css: 6, mps: 0, ams: 0, shn: 0, iosqes: 6, iocqes: 4, crime: false }],
    [0x464061, { en: true, css: 6, mps: 0, ams: 0, shn: CcShn.NORMAL, iosqes: 6, iocqes: 4, crime: false }],
    [0x1fffff1, { en: true, css: 7, mps: 15, ams: 7, shn: 3, iosqes: 15, iocqes: 15, crime: true }],
  ] as [number, CcFields][])('%#x', (v, f) => {
    expect(decodeCc(v)).toEqual(f);
    expect(encodeCc(f)).toBe(v);
  });
  it('ignores reserved bits', () => {
    expect(decodeCc(0xfe00000e).en).toBe(false);
    expect(encodeCc(decodeCc(0xffffffff))).toBe(0x1fffff1);
  });
});

describe('CSTS (NVMe Base 2.0 Figure 42)', () => {
  it.each([
    [0x1, { rdy: true, cfs: false, shst: 0, nssro: false, pp: false, st: false }],
    [0x8, { rdy: false, cfs: false, shst: CstsShst.COMPLETE, nssro: false, pp: false, st: false }],
    [0x3, { rdy: true, cfs: true, shst: 0, nssro: false, pp: false, st: false }],
    [0x75, { rdy: true, cfs: false, shst: CstsShst.OCCURRING, nssro: true, pp: true, st: true }],
  ] as [number, CstsFields][])('%#x', (v, f) => {
    expect(decodeCsts(v)).toEqual(f);
    expect(encodeCsts(f)).toBe(v);
  });
});

describe('VS and CRTO', () => {
  it('VS 1.3.0 = 0x10300, 2.1.0 = 0x20100', () => {
    expect(encodeVs(1, 3)).toBe(0x10300);
    expect(encodeVs(2, 1, 0)).toBe(0x20100);
    expect(decodeVs(0x10300)).toEqual({ mjr: 1, mnr: 3, ter: 0 });
    expect(decodeVs(0xffff0102)).toEqual({ mjr: 0xffff, mnr: 1, ter: 2 });
  });
  it('CRTO', () => {
    expect(encodeCrto({ crwmt: 0x1e, crimt: 0x3c })).toBe(0x003c001e);
    expect(decodeCrto(0x003c001e)).toEqual({ crwmt: 0x1e, crimt: 0x3c });
  });
});

describe('property properties', () => {
  it('register codecs round-trip and decoders never throw', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), fc.integer({ min: 0, max: 0xffffffff }), (cap, dw) => {
        const capMask = 0x1fff_ffff_ff07_ffffn;
        expect(encodeCap(decodeCap(cap))).toBe(cap & capMask);
        expect(encodeCc(decodeCc(dw))).toBe(dw & 0x1fffff1);
        expect(encodeCsts(decodeCsts(dw))).toBe(dw & 0x7f);
        expect(encodeVs(decodeVs(dw).mjr, decodeVs(dw).mnr, decodeVs(dw).ter)).toBe(dw);
        expect(encodeCrto(decodeCrto(dw))).toBe(dw);
      }),
      { numRuns: 300 },
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 80 }).map((a) => Buffer.from(a)), (b) => {
        decodePropertyCmd(b);
      }),
    );
  });
});
