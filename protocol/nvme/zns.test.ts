// ZNS 1.1 codecs against bytes laid out by hand at the spec's offsets (Figures 33, 36, 37, 38, 48, 49).
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import {
  decodeIdentifyZnsController,
  decodeIdentifyZnsNamespace,
  decodeZoneReport,
  encodeIdentifyZnsController,
  encodeIdentifyZnsNamespace,
  encodeZoneMgmtRecvCmd,
  encodeZoneMgmtSendCmd,
  encodeZoneReportInto,
  zoneReportCapacity,
} from './zns.js';

describe('zone report', () => {
  const hand = (): Buffer => {
    const b = Buffer.alloc(64 + 2 * 64);
    b.writeUInt32LE(7, 0); // Number of Zones (u64)
    // descriptor 0: ZT 2, ZS explicitly open (3 << 4), ZCAP 0x80, ZSLBA 0x1_0000_0000, WP 0x1_0000_0005
    b[64] = 0x02;
    b[65] = 0x30;
    b.writeUInt32LE(0x80, 64 + 8);
    b.writeUInt32LE(1, 64 + 16 + 4);
    b.writeUInt32LE(5, 64 + 24);
    b.writeUInt32LE(1, 64 + 24 + 4);
    // descriptor 1: ZT 2, ZS full (0xe << 4), ZA 0, ZCAP 0xffff_ffff, ZSLBA 0, WP 0
    b[128] = 0x02;
    b[129] = 0xe0;
    b.writeUInt32LE(0xffff_ffff, 128 + 8);
    return b;
  };
  const descs = [
    { zs: 3, za: 0, zcap: 0x80, zslba: 2 ** 32, wp: 2 ** 32 + 5 },
    { zs: 0xe, za: 0, zcap: 2 ** 32 - 1, zslba: 0, wp: 0 },
  ];

  it('encodes the header and descriptors at their offsets', () => {
    const b = Buffer.alloc(192, 0x5a);
    encodeZoneReportInto(b, 7, descs);
    expect(b.equals(hand())).toBe(true);
  });

  it('decodes, stopping at Number of Zones or the buffer, whichever comes first', () => {
    expect(decodeZoneReport(hand())).toEqual({ nrZones: 7n, zones: descs });
    const one = hand();
    one.writeUInt32LE(1, 0);
    expect(decodeZoneReport(one).zones).toEqual([descs[0]]);
    expect(decodeZoneReport(hand().subarray(0, 64 + 63)).zones).toEqual([]);
  });

  it('a buffer too small for a descriptor holds none; one too small for the header holds no count', () => {
    expect([zoneReportCapacity(0), zoneReportCapacity(64), zoneReportCapacity(127), zoneReportCapacity(128), zoneReportCapacity(4096)]).toEqual([0, 0, 0, 1, 63]);
    const b = Buffer.alloc(100);
    encodeZoneReportInto(b, 9, descs);
    expect(b.readUInt32LE(0)).toBe(9);
    expect(b.subarray(64).equals(Buffer.alloc(36))).toBe(true);
  });
});

describe('zone management commands', () => {
  it('Send: SLBA in CDW10/11, ZSA and Select All in CDW13', () => {
    const s = encodeZoneMgmtSendCmd({ cid: 0x1234, nsid: 9, slba: 0xffff_ffff_0000_0080n, zsa: 4, selectAll: true });
    expect([s[0], s.readUInt16LE(2), s.readUInt32LE(4), s.readUInt32LE(40), s.readUInt32LE(44), s.readUInt32LE(52)]).toEqual([0x79, 0x1234, 9, 0x80, 0xffff_ffff, 0x104]);
  });

  it('Receive: NUMD 0\'s based in CDW12; ZRA, ZRASF and Partial in CDW13', () => {
    const r = encodeZoneMgmtRecvCmd({ cid: 1, nsid: 1, slba: 2n ** 31n, length: 4096, filter: 7, partial: true });
    expect([r[0], r.readUInt32LE(40), r.readUInt32LE(44), r.readUInt32LE(48), r.readUInt32LE(52), r.readUInt32LE(24 + 8)]).toEqual([0x7a, 0x8000_0000, 0, 1023, 0x10700, 4096]);
  });
});

describe('zoned Identify', () => {
  it('namespace: ZOC, OZCS, MAR, MOR and LBAFE0 ZSZE at byte 2816', () => {
    const b = Buffer.alloc(4096);
    b.writeUInt16LE(1, 2);
    b.writeUInt32LE(0xffff_ffff, 4);
    b.writeUInt32LE(13, 8);
    b.writeUInt32LE(0, 2816);
    b.writeUInt32LE(1, 2820); // ZSZE 2^32
    b[2824] = 2;
    const v = { zoc: 0, ozcs: 1, mar: 0xffff_ffff, mor: 13, rrl: 0, frl: 0, lbafe: [{ zsze: 2n ** 32n, zdes: 2 }] };
    expect(encodeIdentifyZnsNamespace(v).equals(b)).toBe(true);
    expect(decodeIdentifyZnsNamespace(b)).toEqual(v);
  });

  it('controller: ZASL in byte 0', () => {
    const b = Buffer.alloc(4096);
    b[0] = 5;
    expect(encodeIdentifyZnsController({ zasl: 5 }).equals(b)).toBe(true);
    expect(decodeIdentifyZnsController(b)).toEqual({ zasl: 5 });
  });
});
