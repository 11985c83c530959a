import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  AenConfig,
  AenDw0,
  AenNotice,
  AenType,
  FeatureId,
  decodeAbortCmd,
  decodeAenResult,
  decodeFeatureCmd,
  decodeNumQueues,
  decodeTimestamp,
  encodeAbortCmd,
  encodeAenResult,
  encodeGetFeaturesCmd,
  encodeNumQueues,
  encodeSetFeaturesCmd,
  encodeTimestamp,
} from './features.js';
import { decodeSqe, sglInCapsule } from './sqe.js';
import { bytes } from '../testing/fixture-builder.js';

describe('feature identifiers (NVMe Base 2.0 Figure 317)', () => {
  it.each([
    ['ARBITRATION', 1], ['POWER_MGMT', 2], ['LBA_RANGE', 3], ['TEMP_THRESH', 4], ['ERR_RECOVERY', 5], ['VOLATILE_WC', 6],
    ['NUM_QUEUES', 7], ['IRQ_COALESCE', 8], ['IRQ_CONFIG', 9], ['WRITE_ATOMIC', 0x0a], ['ASYNC_EVENT', 0x0b],
    ['AUTO_PST', 0x0c], ['HOST_MEM_BUF', 0x0d], ['TIMESTAMP', 0x0e], ['KATO', 0x0f], ['HOST_BEHAVIOR', 0x16],
    ['HOST_ID', 0x81], ['RESV_MASK', 0x82], ['RESV_PERSIST', 0x83], ['WRITE_PROTECT', 0x84],
  ] as const)('%s = %#x', (name, v) => expect(FeatureId[name]).toBe(v));
});

describe('Get/Set Features commands', () => {
  it('Set Features Number of Queues as Linux sends it', () => {
    const b = encodeSetFeaturesCmd({ cid: 4114, fid: FeatureId.NUM_QUEUES, cdw11: 0 });
    expect(b).toEqual(bytes(64).u8(0, 0x09).u8(1, 0x40).u16(2, 4114).u8(39, 0x5a).u32(40, 7).build());
    expect(decodeFeatureCmd(decodeSqe(b))).toEqual({ fid: 7, sel: 0, sv: false, cdw11: 0, nsid: 0, uuidIndex: 0 });
  });
  it('Set Features with SV, NSID and data', () => {
    const b = encodeSetFeaturesCmd({ cid: 1, fid: 0x0e, cdw11: 0x80000000, nsid: 5, sv: true, sgl: sglInCapsule(8) });
    expect(b).toEqual(bytes(64).u8(0, 0x09).u8(1, 0x40).u16(2, 1).u32(4, 5).u32(32, 8).u8(39, 0x01).u32(40, 0x8000000e).u32(44, 0x80000000).build());
    expect(decodeFeatureCmd(decodeSqe(b))).toMatchObject({ fid: 0x0e, sv: true, cdw11: 0x80000000, nsid: 5 });
  });
  it('Get Features with SEL', () => {
    const b = encodeGetFeaturesCmd({ cid: 2, fid: FeatureId.HOST_ID, sel: 3, cdw11: 1 });
    expect(b).toEqual(bytes(64).u8(0, 0x0a).u8(1, 0x40).u16(2, 2).u8(39, 0x5a).u32(40, 0x381).u32(44, 1).build());
    expect(decodeFeatureCmd(decodeSqe(b))).toMatchObject({ fid: 0x81, sel: 3, sv: false, cdw11: 1 });
  });
});

describe('Number of Queues (counts in, 0\'s based on the wire)', () => {
  it.each([
    [1, 1, 0x00000000],
    [128, 128, 0x007f007f],
    [4, 2, 0x00010003],
    [65536, 65536, 0xffffffff],
  ])('%d SQs, %d CQs ↔ %#x', (sq, cq, dw) => {
    expect(encodeNumQueues(sq, cq)).toBe(dw);
    expect(decodeNumQueues(dw)).toEqual({ nsqr: sq, ncqr: cq });
  });
});

describe('AEN configuration and AER results (NVMe Base 2.0 §5.2)', () => {
  it('config bits', () => {
    expect(AenConfig.NS_ATTR).toBe(0x100);
    expect(AenConfig.FW_ACT).toBe(0x200);
    expect(AenConfig.ANA).toBe(0x800);
    expect(AenConfig.DISC).toBe(0x80000000);
    expect(AenConfig.NS_ATTR | AenConfig.ANA).toBe(0x900);
  });
  it.each([
    [{ type: AenType.NOTICE, info: AenNotice.NS_CHANGED, lid: 0x04 }, 0x00040002, AenDw0.NS_CHANGED],
    [{ type: AenType.NOTICE, info: AenNotice.ANA, lid: 0x0c }, 0x000c0302, AenDw0.ANA_CHANGE],
    [{ type: AenType.NOTICE, info: AenNotice.DISC_CHANGE, lid: 0x70 }, 0x0070f002, AenDw0.DISC_CHANGE],
    [{ type: AenType.SMART, info: 1, lid: 0x02 }, 0x00020101, 0x00020101],
  ])('%o ↔ %#x', (r, dw, named) => {
    expect(encodeAenResult(r)).toBe(dw);
    expect(named).toBe(dw);
    expect(decodeAenResult(dw)).toEqual(r);
  });
});

describe('Timestamp and Abort', () => {
  it('timestamp: 48-bit ms + attributes', () => {
    const t = { ms: 0x0123_4567_89abn, attributes: 0x3 };
    const w = bytes(8).uint(0, 6, 0x0123_4567_89abn).u8(6, 3).build();
    expect(encodeTimestamp(t)).toEqual(w);
    expect(decodeTimestamp(w)).toEqual(t);
    expect(decodeTimestamp(Buffer.alloc(2))).toEqual({ ms: 0n, attributes: 0 });
  });
  it('abort: SQID 15:0, CID 31:16', () => {
    const b = encodeAbortCmd({ cid: 1, sqid: 2, abortCid: 0x1234 });
    expect(b.readUInt32LE(40)).toBe(0x12340002);
    expect(decodeAbortCmd(decodeSqe(b))).toEqual({ sqid: 2, cid: 0x1234 });
  });
});

describe('feature properties', () => {
  it('Number of Queues and AER round-trip', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 65536 }), fc.integer({ min: 1, max: 65536 }), fc.integer({ min: 0, max: 0xffffff }), (sq, cq, aen) => {
        expect(decodeNumQueues(encodeNumQueues(sq, cq))).toEqual({ nsqr: sq, ncqr: cq });
        const dw = aen & 0xffff07;
        expect(encodeAenResult(decodeAenResult(dw))).toBe(dw);
      }),
    );
  });
});
