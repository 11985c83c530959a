import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  Cns,
  IDENTIFY_DATA_SIZE,
  IdentifyControllerOffset,
  IdentifyIndepNamespaceOffset,
  IdentifyNamespaceOffset,
  IdentifyNvmControllerOffset,
  LbafOffset,
  NidType,
  PsdOffset,
  decodeActiveNsList,
  decodeIdentifyCmd,
  decodeIdentifyController,
  decodeIdentifyIndepNamespace,
  decodeIdentifyNamespace,
  decodeIdentifyNvmController,
  decodeIoCmdSetVectors,
  decodeNsDescList,
  encodeActiveNsList,
  encodeIdentifyCmd,
  encodeIdentifyController,
  encodeIdentifyIndepNamespace,
  encodeIdentifyNamespace,
  encodeIdentifyNvmController,
  encodeIoCmdSetVectors,
  encodeNsDescList,
  flbasIndex,
  selectActiveNsids,
} from './identify.js';
import type { IdentifyController, IdentifyNamespace } from './identify.js';
import { decodeSqe } from './sqe.js';
import { bytes } from '../testing/fixture-builder.js';

describe('Identify layouts', () => {
  it('Identify Controller offsets match NVMe Base 2.0 Figure 275', () => {
    const spec: Record<string, number> = {
      vid: 0, ssvid: 2, sn: 4, mn: 24, fr: 64, rab: 72, ieee: 73, cmic: 76, mdts: 77, cntlid: 78, ver: 80,
      rtd3r: 84, rtd3e: 88, oaes: 92, ctratt: 96, cntrltype: 111, fguid: 112, crdt1: 128, crdt2: 130, crdt3: 132,
      oacs: 256, acl: 258, aerl: 259, frmw: 260, lpa: 261, elpe: 262, npss: 263, avscc: 264, apsta: 265,
      wctemp: 266, cctemp: 268, kas: 320, endgidmax: 340, anatt: 342, anacap: 343, anagrpmax: 344, nanagrpid: 348,
      sqes: 512, cqes: 513, maxcmd: 514, nn: 516, oncs: 520, fuses: 522, fna: 524, vwc: 525, awun: 526, awupf: 528,
      nwpc: 531, sgls: 536, mnan: 540, subnqn: 768, ioccsz: 1792, iorcsz: 1796, icdoff: 1800, fcatt: 1802,
      msdbd: 1803, ofcs: 1804, dctype: 1806, psd: 2048, vs: 3072,
    };
    for (const [k, v] of Object.entries(spec)) expect([k, (IdentifyControllerOffset as Record<string, number>)[k]]).toEqual([k, v]);
    expect(PsdOffset).toMatchObject({ maxPower: 0, entryLatency: 4, exitLatency: 8 });
    expect(IDENTIFY_DATA_SIZE).toBe(4096);
  });

  it('Identify Namespace offsets match NVM Command Set 1.0 Figure 97', () => {
    expect(IdentifyNamespaceOffset).toMatchObject({
      nsze: 0, ncap: 8, nuse: 16, nsfeat: 24, nlbaf: 25, flbas: 26, mc: 27, dpc: 28, dps: 29, nmic: 30, rescap: 31,
      fpi: 32, dlfeat: 33, nawun: 34, nawupf: 36, nacwu: 38, nabsn: 40, nabo: 42, nabspf: 44, noiob: 46, nvmcap: 48,
      npwg: 64, npwa: 66, npdg: 68, npda: 70, nows: 72, anagrpid: 92, nsattr: 99, nvmsetid: 100, endgid: 102,
      nguid: 104, eui64: 120, lbaf: 128,
    });
    expect(LbafOffset).toEqual({ ms: 0, lbads: 2, rp: 3 });
  });

  it('CNS 0x06 and 0x08 offsets match NVM Command Set 1.0 Figure 101 and NVMe Base 2.0 Figure 280', () => {
    expect(IdentifyNvmControllerOffset).toEqual({ vsl: 0, wzsl: 1, wusl: 2, dmrl: 3, dmrsl: 4, dmsl: 8 });
    expect(IdentifyIndepNamespaceOffset).toEqual({
      nsfeat: 0, nmic: 1, rescap: 2, fpi: 3, anagrpid: 4, nsattr: 8, nvmsetid: 10, endgid: 12, nstat: 14,
    });
  });

  it('CNS values', () => {
    expect(Cns).toMatchObject({
      NS: 0, CTRL: 1, NS_ACTIVE_LIST: 2, NS_DESC_LIST: 3, CS_NS: 5, CS_CTRL: 6, CS_NS_ACTIVE_LIST: 7, CS_INDEP_NS: 8, CS_VECTOR: 0x1c,
    });
    expect(NidType).toEqual({ EUI64: 1, NGUID: 2, UUID: 3, CSI: 4 });
  });
});

describe('Identify command (CDW10 CNS/CNTID, CDW11 CNS id/CSI)', () => {
  it('encodes and decodes', () => {
    const b = encodeIdentifyCmd({ cid: 18, cns: Cns.CS_CTRL, nsid: 0, cntid: 0x1234, cnsSpecificId: 0xabcd, csi: 2 });
    expect(b).toEqual(
      bytes(64).u8(0, 0x06).u8(1, 0x40).u16(2, 18).u32(32, 4096).u8(39, 0x5a).u32(40, 0x12340006).u32(44, 0x0200abcd).build(),
    );
    expect(decodeIdentifyCmd(decodeSqe(b))).toEqual({ cns: 6, cntid: 0x1234, cnsSpecificId: 0xabcd, csi: 2, nsid: 0 });
  });
});

const ctrl: IdentifyController = {
  vid: 0x1b36, ssvid: 0x1af4, sn: 'SN-0123456789abcdef', mn: 'nvme-tcp-ts model', fr: '0.1.0', rab: 6, ieee: 0x123456,
  cmic: 0x0b, mdts: 5, cntlid: 0x0102, ver: 0x00010300, rtd3r: 0x11111111, rtd3e: 0x22222222, oaes: 0x80000900,
  ctratt: 0x41, rrls: 0x3, cntrltype: 1, fguid: Buffer.from('00112233445566778899aabbccddeeff', 'hex'),
  crdt1: 10, crdt2: 20, crdt3: 30, nvmsr: 1, vwci: 2, mec: 3, oacs: 0x0004, acl: 3, aerl: 3, frmw: 3, lpa: 7, elpe: 127,
  npss: 0, avscc: 1, apsta: 0, wctemp: 343, cctemp: 373, mtfa: 9, hmpre: 0x1000, hmmin: 0x800,
  tnvmcap: (1n << 100n) + 5n, unvmcap: 7n, rpmbs: 0x01020304, edstt: 11, dsto: 1, fwug: 2, kas: 10, hctma: 1,
  mntmt: 273, mxtmt: 363, sanicap: 0x80000003, hmminds: 4, hmmaxd: 5, nsetidmax: 6, endgidmax: 7, anatt: 10,
  anacap: 0x1f, anagrpmax: 128, nanagrpid: 128, pels: 8, domainid: 9, megcap: (1n << 127n) | 1n, sqes: 0x66,
  cqes: 0x44, maxcmd: 1024, nn: 1024, oncs: 0x2c, fuses: 1, fna: 4, vwc: 7, awun: 15, awupf: 7, icsvscc: 1, nwpc: 1,
  acwu: 3, ocfs: 1, sgls: 0x00100001, mnan: 1024, maxdna: 99n, maxcna: 12, subnqn: 'nqn.2024-01.io.nvme-lab:kernel-target',
  ioccsz: 1028, iorcsz: 1, icdoff: 0, fcatt: 1, msdbd: 1, ofcs: 1, dctype: 2,
  psd0: { maxPower: 0x9c4, flags: 0x1, entryLatency: 0x10, exitLatency: 0x4, rrt: 1, rrl: 2, rwt: 3, rwl: 4 },
};

const ctrlWire = bytes(4096)
  .u16(0, 0x1b36).u16(2, 0x1af4).spacePadded(4, 20, 'SN-0123456789abcdef').spacePadded(24, 40, 'nvme-tcp-ts model')
  .spacePadded(64, 8, '0.1.0').u8(72, 6).u24(73, 0x123456).u8(76, 0x0b).u8(77, 5).u16(78, 0x0102).u32(80, 0x00010300)
  .u32(84, 0x11111111).u32(88, 0x22222222).u32(92, 0x80000900).u32(96, 0x41).u16(100, 3).u8(111, 1)
  .hex(112, '00112233445566778899aabbccddeeff').u16(128, 10).u16(130, 20).u16(132, 30).u8(253, 1).u8(254, 2).u8(255, 3)
  .u16(256, 4).u8(258, 3).u8(259, 3).u8(260, 3).u8(261, 7).u8(262, 127).u8(263, 0).u8(264, 1).u8(265, 0)
  .u16(266, 343).u16(268, 373).u16(270, 9).u32(272, 0x1000).u32(276, 0x800).u128(280, (1n << 100n) + 5n).u128(296, 7n)
  .u32(312, 0x01020304).u16(316, 11).u8(318, 1).u8(319, 2).u16(320, 10).u16(322, 1).u16(324, 273).u16(326, 363)
  .u32(328, 0x80000003).u32(332, 4).u16(336, 5).u16(338, 6).u16(340, 7).u8(342, 10).u8(343, 0x1f).u32(344, 128)
  .u32(348, 128).u32(352, 8).u16(356, 9).u128(368, (1n << 127n) | 1n).u8(512, 0x66).u8(513, 0x44).u16(514, 1024)
  .u32(516, 1024).u16(520, 0x2c).u16(522, 1).u8(524, 4).u8(525, 7).u16(526, 15).u16(528, 7).u8(530, 1).u8(531, 1)
  .u16(532, 3).u16(534, 1).u32(536, 0x00100001).u32(540, 1024).u128(544, 99n).u32(560, 12)
  .ascii(768, 'nqn.2024-01.io.nvme-lab:kernel-target').u32(1792, 1028).u32(1796, 1).u16(1800, 0).u8(1802, 1)
  .u8(1803, 1).u16(1804, 1).u8(1806, 2)
  .u16(2048, 0x9c4).u8(2051, 1).u32(2052, 0x10).u32(2056, 0x4).u8(2060, 1).u8(2061, 2).u8(2062, 3).u8(2063, 4)
  .build();

describe('Identify Controller (CNS 0x01)', () => {
  it('encodes every field at its spec offset', () => {
    expect(encodeIdentifyController(ctrl)).toEqual(ctrlWire);
  });
  it('decodes every field', () => {
    expect(decodeIdentifyController(ctrlWire)).toEqual(ctrl);
  });
  it('space pads strings and never NUL pads them', () => {
    const b = encodeIdentifyController({ sn: 'A', mn: '', fr: '1' });
    expect(b.subarray(4, 24)).toEqual(Buffer.from('A'.padEnd(20, ' ')));
    expect(b.subarray(24, 64)).toEqual(Buffer.alloc(40, 0x20));
    expect(b.subarray(64, 72)).toEqual(Buffer.from('1       '));
  });
  it('truncates long strings and replaces non-printable characters', () => {
    const b = encodeIdentifyController({ sn: 'x'.repeat(30), mn: 'caf\u00e9\n' });
    expect(b.subarray(4, 24).toString('latin1')).toBe('x'.repeat(20));
    expect(b.subarray(24, 29).toString('latin1')).toBe('caf??');
    expect(b[29]).toBe(0x20);
  });
  it('trims trailing NULs from badly padded strings', () => {
    const b = bytes(4096).ascii(4, 'ABC').ascii(24, 'Model  ').build();
    const c = decodeIdentifyController(b);
    expect(c.sn).toBe('ABC');
    expect(c.mn).toBe('Model');
  });
  it('defaults to an all-zero structure except the padded strings', () => {
    const b = encodeIdentifyController({});
    expect(b).toEqual(bytes(4096).fill(4, 68, 0x20).build());
  });
  it('accepts a partial power state descriptor (nvmet PSD0)', () => {
    const b = encodeIdentifyController({ psd0: { maxPower: 0x9c4, entryLatency: 0x10, exitLatency: 0x4 } });
    expect(b.subarray(2048, 2064)).toEqual(bytes(16).u16(0, 0x9c4).u32(4, 0x10).u32(8, 0x4).build());
  });
  it('zero-fills short input', () => {
    const c = decodeIdentifyController(ctrlWire.subarray(0, 80));
    expect(c.cntlid).toBe(0x0102);
    expect(c.ver).toBe(0);
    expect(c.subnqn).toBe('');
  });
});

const ns: IdentifyNamespace = {
  nsze: 0x40000n, ncap: 0x3ffffn, nuse: 0x1234n, nsfeat: 0x1f, nlbaf: 1, flbas: 0x10, mc: 1, dpc: 2, dps: 3, nmic: 1,
  rescap: 0xff, fpi: 0x80, dlfeat: 1, nawun: 1, nawupf: 2, nacwu: 3, nabsn: 4, nabo: 5, nabspf: 6, noiob: 7,
  nvmcap: (1n << 64n) + 1n, npwg: 8, npwa: 9, npdg: 10, npda: 11, nows: 12, mssrl: 13, mcl: 14, msrc: 15, nulbaf: 0,
  anagrpid: 1, nsattr: 1, nvmsetid: 2, endgid: 3, nguid: Buffer.from('f0e1d2c3b4a5968778695a4b3c2d1e0f', 'hex'),
  eui64: Buffer.from('0102030405060708', 'hex'),
  lbaf: [{ ms: 0, lbads: 9, rp: 2 }, { ms: 8, lbads: 12, rp: 0 }],
};

const nsWire = bytes(4096)
  .u64(0, 0x40000n).u64(8, 0x3ffffn).u64(16, 0x1234n).u8(24, 0x1f).u8(25, 1).u8(26, 0x10).u8(27, 1).u8(28, 2).u8(29, 3)
  .u8(30, 1).u8(31, 0xff).u8(32, 0x80).u8(33, 1).u16(34, 1).u16(36, 2).u16(38, 3).u16(40, 4).u16(42, 5).u16(44, 6)
  .u16(46, 7).u128(48, (1n << 64n) + 1n).u16(64, 8).u16(66, 9).u16(68, 10).u16(70, 11).u16(72, 12).u16(74, 13)
  .u32(76, 14).u8(80, 15).u32(92, 1).u8(99, 1).u16(100, 2).u16(102, 3).hex(104, 'f0e1d2c3b4a5968778695a4b3c2d1e0f')
  .hex(120, '0102030405060708').u16(128, 0).u8(130, 9).u8(131, 2).u16(132, 8).u8(134, 12).u8(135, 0)
  .build();

describe('Identify Namespace (CNS 0x00)', () => {
  it('encodes every field at its spec offset', () => {
    expect(encodeIdentifyNamespace(ns)).toEqual(nsWire);
  });
  it('decodes every field, NLBAF + 1 formats', () => {
    expect(decodeIdentifyNamespace(nsWire)).toEqual(ns);
  });
  it('derives NLBAF from the format list when not given', () => {
    const b = encodeIdentifyNamespace({ nsze: 1n, lbaf: [{ ms: 0, lbads: 9, rp: 0 }, { ms: 0, lbads: 12, rp: 0 }, { ms: 0, lbads: 13, rp: 0 }] });
    expect(b[25]).toBe(2);
    expect(b[138]).toBe(13);
  });
  it('an all-zero (inactive) namespace decodes to one zero format', () => {
    const d = decodeIdentifyNamespace(Buffer.alloc(4096));
    expect(d.ncap).toBe(0n);
    expect(d.lbaf).toEqual([{ ms: 0, lbads: 0, rp: 0 }]);
  });
  it('caps the format list at 64 on garbage NLBAF', () => {
    expect(decodeIdentifyNamespace(bytes(4096).u8(25, 0xff).build()).lbaf).toHaveLength(64);
  });
  it('computes the format index', () => {
    expect(flbasIndex(0x10)).toBe(0);
    expect(flbasIndex(0x03)).toBe(3);
    expect(flbasIndex(0x61)).toBe(0x31);
  });
});

describe('Active NSID list (CNS 0x02)', () => {
  it('encodes zero terminated NSIDs', () => {
    expect(encodeActiveNsList([1, 2, 0x10000])).toEqual(bytes(4096).u32(0, 1).u32(4, 2).u32(8, 0x10000).build());
  });
  it('decodes up to the first zero', () => {
    expect(decodeActiveNsList(bytes(4096).u32(0, 1).u32(4, 7).u32(12, 9).build())).toEqual([1, 7]);
  });
  it('keeps at most 1024 entries', () => {
    const many = Array.from({ length: 1500 }, (_, i) => i + 1);
    const b = encodeActiveNsList(many);
    expect(b.length).toBe(4096);
    expect(decodeActiveNsList(b)).toEqual(many.slice(0, 1024));
  });
  it('selects the page after a start NSID', () => {
    expect(selectActiveNsids([5, 1, 3, 10], 3)).toEqual([5, 10]);
    expect(selectActiveNsids([5, 1, 3, 10], 0)).toEqual([1, 3, 5, 10]);
  });
  it('tolerates odd-sized buffers', () => {
    expect(decodeActiveNsList(bytes(6).u32(0, 4).build())).toEqual([4]);
  });
});

describe('NS identification descriptors (CNS 0x03)', () => {
  const uuid = Buffer.from('a96e2341848a47e89a608bbc57a89236', 'hex');
  const nguid = Buffer.from('00112233445566778899aabbccddeeff', 'hex');
  const descs = [
    { nidt: NidType.UUID, nid: uuid },
    { nidt: NidType.NGUID, nid: nguid },
    { nidt: NidType.CSI, nid: Buffer.from([0]) },
  ];
  const wire = bytes(4096)
    .u8(0, 3).u8(1, 16).bytes(4, uuid).u8(20, 2).u8(21, 16).bytes(24, nguid).u8(40, 4).u8(41, 1).u8(44, 0)
    .build();
  it('encodes', () => expect(encodeNsDescList(descs)).toEqual(wire));
  it('decodes', () => expect(decodeNsDescList(wire)).toEqual(descs));
  it('stops at a descriptor that runs off the end', () => {
    const b = bytes(24).u8(0, 1).u8(1, 8).hex(4, '0102030405060708').u8(12, 2).u8(13, 16).build();
    expect(decodeNsDescList(b)).toEqual([{ nidt: 1, nid: Buffer.from('0102030405060708', 'hex') }]);
  });
});

describe('NVM Identify Controller (CNS 0x06) and independent namespace (CNS 0x08)', () => {
  it('CNS 0x06 encodes and decodes', () => {
    const v = { vsl: 1, wzsl: 2, wusl: 3, dmrl: 4, dmrsl: 0x01020304, dmsl: 0x1122334455667788n };
    const w = bytes(4096).u8(0, 1).u8(1, 2).u8(2, 3).u8(3, 4).u32(4, 0x01020304).u64(8, 0x1122334455667788n).build();
    expect(encodeIdentifyNvmController(v)).toEqual(w);
    expect(decodeIdentifyNvmController(w)).toEqual(v);
  });
  it('CNS 0x08 encodes and decodes', () => {
    const v = { nsfeat: 1, nmic: 1, rescap: 0x7f, fpi: 0x80, anagrpid: 0x10002, nsattr: 1, nvmsetid: 3, endgid: 4, nstat: 1 };
    const w = bytes(4096).u8(0, 1).u8(1, 1).u8(2, 0x7f).u8(3, 0x80).u32(4, 0x10002).u8(8, 1).u16(10, 3).u16(12, 4).u8(14, 1).build();
    expect(encodeIdentifyIndepNamespace(v)).toEqual(w);
    expect(decodeIdentifyIndepNamespace(w)).toEqual(v);
  });
  it('CNS 0x1C command set vectors', () => {
    const w = bytes(4096).u64(0, 0x5n).build();
    expect(encodeIoCmdSetVectors([5n])).toEqual(w);
    expect(decodeIoCmdSetVectors(w)).toEqual([5n]);
  });
});

const page = fc.uint8Array({ minLength: 4096, maxLength: 4096 }).map((a) => Buffer.from(a));
const printable = (max: number): fc.Arbitrary<string> =>
  fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: max }).map((s) => s.trimEnd());

describe('Identify properties', () => {
  it('decoders never throw on random pages or short buffers', () => {
    fc.assert(
      fc.property(fc.oneof(page, fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a))), (b) => {
        decodeIdentifyController(b);
        decodeIdentifyNamespace(b);
        decodeActiveNsList(b);
        decodeNsDescList(b);
        decodeIdentifyNvmController(b);
        decodeIdentifyIndepNamespace(b);
        decodeIoCmdSetVectors(b);
      }),
      { numRuns: 30 },
    );
  });

  it('Identify Controller: decode ∘ encode is the identity on the fields', () => {
    fc.assert(
      fc.property(page, printable(20), printable(40), printable(8), fc.stringMatching(/^[a-z0-9.:-]{0,200}$/), (b, sn, mn, fr, subnqn) => {
        const c = { ...decodeIdentifyController(b), sn, mn, fr, subnqn };
        expect(decodeIdentifyController(encodeIdentifyController(c))).toEqual(c);
      }),
      { numRuns: 25 },
    );
  });

  it('Identify Namespace: decode ∘ encode is the identity on the fields', () => {
    fc.assert(
      fc.property(page, (b) => {
        const n = decodeIdentifyNamespace(b);
        expect(decodeIdentifyNamespace(encodeIdentifyNamespace(n))).toEqual(n);
      }),
      { numRuns: 40 },
    );
  });

  it('NSID list and descriptor list round-trip', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 0xffffffff }), { maxLength: 1024 }),
        fc.array(fc.record({ nidt: fc.integer({ min: 1, max: 255 }), nid: fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a)) }), { maxLength: 20 }),
        (ids, descs) => {
          expect(decodeActiveNsList(encodeActiveNsList(ids))).toEqual(ids);
          expect(decodeNsDescList(encodeNsDescList(descs))).toEqual(descs);
        },
      ),
      { numRuns: 50 },
    );
  });
});
