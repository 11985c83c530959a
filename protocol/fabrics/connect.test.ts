import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  CONNECT_DATA_SIZE,
  ConnectCattr,
  ConnectCmdOffset,
  ConnectDataOffset,
  FabricsType,
  bytesToUuid,
  connectInvalidParamDw0,
  connectResultDw0,
  decodeConnectCmd,
  decodeConnectData,
  decodeConnectInvalidParam,
  decodeConnectResult,
  decodeFctype,
  encodeConnectCmd,
  encodeConnectData,
  fabricsDataDirection,
  fabricsTypeName,
  isUuid,
  uuidToBytes,
} from './connect.js';
import type { ConnectCmd, ConnectData } from './connect.js';
import { decodeSqe } from '../nvme/sqe.js';
import { bytes } from '../testing/fixture-builder.js';

const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000001';
const SUBNQN = 'nqn.2024-01.io.nvme-lab:kernel-target';

describe('Fabrics layouts (NVMe-oF 1.1 Figures 9, 19, 20)', () => {
  it('command types', () => {
    expect(FabricsType).toEqual({ PROPERTY_SET: 0, CONNECT: 1, PROPERTY_GET: 4, AUTH_SEND: 5, AUTH_RECV: 6, DISCONNECT: 8 });
    expect(fabricsTypeName(1)).toBe('CONNECT');
    expect(fabricsTypeName(0x42)).toBe('0x42');
  });
  it('data direction from FCTYPE bits 1:0', () => {
    expect(fabricsDataDirection(FabricsType.CONNECT)).toBe('h2c');
    expect(fabricsDataDirection(FabricsType.PROPERTY_GET)).toBe('none');
    expect(fabricsDataDirection(FabricsType.PROPERTY_SET)).toBe('none');
    expect(fabricsDataDirection(FabricsType.AUTH_SEND)).toBe('h2c');
    expect(fabricsDataDirection(FabricsType.AUTH_RECV)).toBe('c2h');
    expect(fabricsDataDirection(FabricsType.DISCONNECT)).toBe('none');
  });
  it('Connect offsets', () => {
    expect(ConnectCmdOffset).toEqual({ fctype: 4, sgl: 24, recfmt: 40, qid: 42, sqsize: 44, cattr: 46, kato: 48 });
    expect(CONNECT_DATA_SIZE).toBe(1024);
    expect(ConnectDataOffset).toEqual({ hostid: 0, cntlid: 16, subnqn: 256, hostnqn: 512 });
    expect(ConnectCattr.DISABLE_SQFLOW).toBe(0x04);
  });
});

describe('Connect command', () => {
  const cases: { name: string; cmd: ConnectCmd; wire: Buffer }[] = [
    {
      name: 'admin queue as Linux sends it',
      cmd: { cid: 0, recfmt: 0, qid: 0, sqsize: 31, cattr: 0, kato: 5000, sgl: { address: 0n, length: 1024, type: 0x01 } },
      wire: bytes(64).u8(0, 0x7f).u8(1, 0x40).u8(4, 0x01).u32(32, 1024).u8(39, 0x01).u16(44, 31).u32(48, 5000).build(),
    },
    {
      name: 'I/O queue 3 with SQ flow control disabled, data by R2T',
      cmd: { cid: 0x1003, recfmt: 0, qid: 3, sqsize: 127, cattr: 0x04, kato: 0, sgl: { address: 0n, length: 1024, type: 0x5a } },
      wire: bytes(64).u8(0, 0x7f).u8(1, 0x40).u16(2, 0x1003).u8(4, 0x01).u32(32, 1024).u8(39, 0x5a).u16(42, 3).u16(44, 127).u8(46, 4).build(),
    },
    {
      name: 'bad record format',
      cmd: { cid: 1, recfmt: 0xffff, qid: 0xffff, sqsize: 0xffff, cattr: 0xff, kato: 0xffffffff, sgl: { address: 0n, length: 1024, type: 0x01 } },
      wire: bytes(64).u8(0, 0x7f).u8(1, 0x40).u16(2, 1).u8(4, 1).u32(32, 1024).u8(39, 1).u16(40, 0xffff).u16(42, 0xffff).u16(44, 0xffff).u8(46, 0xff).u32(48, 0xffffffff).build(),
    },
  ];
  it.each(cases)('$name: encodes', ({ cmd, wire }) => expect(encodeConnectCmd(cmd)).toEqual(wire));
  it.each(cases)('$name: decodes from bytes and from a decoded SQE', ({ cmd, wire }) => {
    expect(decodeConnectCmd(wire)).toEqual(cmd);
    expect(decodeConnectCmd(decodeSqe(wire))).toEqual(cmd);
    expect(decodeFctype(wire)).toBe(1);
    expect(decodeFctype(decodeSqe(wire))).toBe(1);
  });
  it('defaults to 1024 bytes in-capsule, recfmt/cattr/kato 0', () => {
    expect(encodeConnectCmd({ cid: 0, qid: 1, sqsize: 127 })).toEqual(
      bytes(64).u8(0, 0x7f).u8(1, 0x40).u8(4, 1).u32(32, 1024).u8(39, 1).u16(42, 1).u16(44, 127).build(),
    );
  });
  it('decodes at an offset inside a PDU and zero-fills short input', () => {
    const pdu = Buffer.concat([Buffer.alloc(8), cases[0]!.wire]);
    expect(decodeConnectCmd(pdu, 8)).toEqual(cases[0]!.cmd);
    expect(decodeFctype(pdu, 8)).toBe(1);
    expect(decodeConnectCmd(Buffer.alloc(3)).sqsize).toBe(0);
  });
});

describe('Connect data', () => {
  const d: ConnectData = {
    hostid: Buffer.from('6c61622d6e766d657463700000000001', 'hex'),
    cntlid: 0xffff,
    subnqn: SUBNQN,
    hostnqn: HOSTNQN,
  };
  const wire = bytes(1024).hex(0, '6c61622d6e766d657463700000000001').u16(16, 0xffff).ascii(256, SUBNQN).ascii(512, HOSTNQN).build();
  it('encodes, NUL padded', () => expect(encodeConnectData(d)).toEqual(wire));
  it('decodes', () => expect(decodeConnectData(wire)).toEqual(d));
  it('stops NQNs at the first NUL even if garbage follows', () => {
    const b = bytes(1024).ascii(256, 'nqn.a').u8(262, 0x41).build();
    expect(decodeConnectData(b).subnqn).toBe('nqn.a');
  });
  it('keeps a NUL terminator for a 256-byte NQN', () => {
    const b = encodeConnectData({ ...d, subnqn: 'x'.repeat(300) });
    expect(b[511]).toBe(0);
    expect(decodeConnectData(b).subnqn).toBe('x'.repeat(255));
  });
  it('zero-fills short data', () => {
    expect(decodeConnectData(wire.subarray(0, 300))).toMatchObject({ cntlid: 0xffff, subnqn: SUBNQN.slice(0, 44), hostnqn: '' });
  });
});

describe('Connect response dw0 (NVMe-oF 1.1 Figures 21/22)', () => {
  it.each([
    [{ cntlid: 1 }, 0x1, { cntlid: 1, atr: false, ascr: false }],
    [{ cntlid: 0xffef, atr: true }, 0x2ffef, { cntlid: 0xffef, atr: true, ascr: false }],
    [{ cntlid: 2, atr: true, ascr: true }, 0x60002, { cntlid: 2, atr: true, ascr: true }],
  ])('%o ↔ %#x', (r, dw, back) => {
    expect(connectResultDw0(r)).toBe(dw);
    expect(decodeConnectResult(dw)).toEqual(back);
  });
  it.each([
    [{ inData: true, offset: 256 }, 0x10100],
    [{ inData: true, offset: 512 }, 0x10200],
    [{ inData: true, offset: 16 }, 0x10010],
    [{ inData: false, offset: 42 }, 0x0002a],
    [{ inData: false, offset: 44 }, 0x0002c],
  ])('invalid parameter %o ↔ %#x', (p, dw) => {
    expect(connectInvalidParamDw0(p)).toBe(dw);
    expect(decodeConnectInvalidParam(dw)).toEqual(p);
  });
});

describe('UUIDs', () => {
  it('converts in string byte order', () => {
    const b = uuidToBytes('6c61622d-6e76-6d65-7463-700000000001');
    expect(b).toEqual(bytes(16).hex(0, '6c61622d6e766d657463700000000001').build());
    expect(bytesToUuid(b)).toBe('6c61622d-6e76-6d65-7463-700000000001');
    expect(bytesToUuid(uuidToBytes('A96E2341-848A-47E8-9A60-8BBC57A89236'))).toBe('a96e2341-848a-47e8-9a60-8bbc57a89236');
  });
  it('rejects malformed strings', () => {
    expect(isUuid('6c61622d6e766d657463700000000001')).toBe(false);
    expect(() => uuidToBytes('not-a-uuid')).toThrow(TypeError);
  });
  it('zero-fills short buffers', () => {
    expect(bytesToUuid(Buffer.from([0xff]))).toBe('ff000000-0000-0000-0000-000000000000');
  });
});

describe('Connect properties', () => {
  const nqn = fc.stringMatching(/^[a-z0-9.:-]{0,223}$/);
  it('decoders never throw; encode ∘ decode is the identity', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 1100 }).map((a) => Buffer.from(a)), fc.integer({ min: -1, max: 1100 }), (b, o) => {
        decodeConnectCmd(b, o);
        decodeConnectData(b, o);
        decodeFctype(b, o);
        bytesToUuid(b, o);
      }),
      { numRuns: 100 },
    );
    fc.assert(
      fc.property(
        fc.record({
          cid: fc.integer({ min: 0, max: 0xffff }),
          recfmt: fc.integer({ min: 0, max: 0xffff }),
          qid: fc.integer({ min: 0, max: 0xffff }),
          sqsize: fc.integer({ min: 0, max: 0xffff }),
          cattr: fc.integer({ min: 0, max: 0xff }),
          kato: fc.integer({ min: 0, max: 0xffffffff }),
          sgl: fc.record({ address: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), length: fc.integer({ min: 0, max: 0xffffffff }), type: fc.integer({ min: 0, max: 255 }) }),
        }),
        fc.uint8Array({ minLength: 16, maxLength: 16 }).map((a) => Buffer.from(a)),
        fc.integer({ min: 0, max: 0xffff }),
        nqn,
        nqn,
        (cmd, hostid, cntlid, subnqn, hostnqn) => {
          expect(decodeConnectCmd(encodeConnectCmd(cmd))).toEqual(cmd);
          const data = { hostid, cntlid, subnqn, hostnqn };
          expect(decodeConnectData(encodeConnectData(data))).toEqual(data);
          expect(decodeConnectResult(connectResultDw0({ cntlid }))).toEqual({ cntlid, atr: false, ascr: false });
        },
      ),
      { numRuns: 100 },
    );
  });
});
