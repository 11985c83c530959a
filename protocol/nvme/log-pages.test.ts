import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  ANA_GROUP_DESC_SIZE,
  ANA_LOG_HEADER_SIZE,
  AnaGroupOffset,
  AnaLogOffset,
  AnaState,
  CHANGED_NS_LIST_SIZE,
  CMD_EFFECTS_LOG_SIZE,
  CmdEffects,
  ERROR_LOG_ENTRY_SIZE,
  ErrorLogOffset,
  FW_SLOT_LOG_SIZE,
  LogPageId,
  SMART_LOG_SIZE,
  SmartLogOffset,
  anaLogMaxSize,
  decodeAnaLog,
  decodeChangedNsList,
  decodeCmdEffectsLog,
  decodeErrorLogEntry,
  decodeFwSlotLog,
  decodeGetLogPageCmd,
  decodeResvNotifLog,
  decodeSmartLog,
  decodeSupportedLogPages,
  encodeAnaLog,
  encodeChangedNsList,
  encodeCmdEffectsLog,
  encodeErrorLog,
  encodeErrorLogEntry,
  encodeFwSlotLog,
  encodeGetLogPageCmd,
  encodeResvNotifLog,
  encodeSmartLog,
  encodeSupportedLogPages,
  encodeFeatureEffectsLog,
  decodeFeatureEffectsLog,
  FeatureEffects,
  sliceLogPage,
} from './log-pages.js';
import type { AnaLog, ErrorLogEntry, SmartLog } from './log-pages.js';
import { decodeSqe } from './sqe.js';
import { bytes } from '../testing/fixture-builder.js';

describe('log page layouts (NVMe Base 2.0 §5.16)', () => {
  it('LIDs', () => {
    expect(LogPageId).toMatchObject({
      SUPPORTED: 0, ERROR: 1, SMART: 2, FW_SLOT: 3, CHANGED_NS: 4, CMD_EFFECTS: 5, ANA: 0x0c, DISCOVERY: 0x70, RESV_NOTIF: 0x80,
    });
  });
  it('sizes and offsets', () => {
    expect(ERROR_LOG_ENTRY_SIZE).toBe(64);
    expect(ErrorLogOffset).toMatchObject({ errorCount: 0, sqid: 8, cmdid: 10, status: 12, paramErrorLocation: 14, lba: 16, nsid: 24, vsInfo: 28, trtype: 29, cmdSpecificInfo: 32, trtypeSpecificInfo: 40 });
    expect(SMART_LOG_SIZE).toBe(512);
    expect(SmartLogOffset).toMatchObject({
      criticalWarning: 0, compositeTemperature: 1, availableSpare: 3, availableSpareThreshold: 4, percentageUsed: 5,
      dataUnitsRead: 32, dataUnitsWritten: 48, hostReadCommands: 64, hostWriteCommands: 80, controllerBusyTime: 96,
      powerCycles: 112, powerOnHours: 128, unsafeShutdowns: 144, mediaErrors: 160, numErrLogEntries: 176,
    });
    expect(FW_SLOT_LOG_SIZE).toBe(512);
    expect(CHANGED_NS_LIST_SIZE).toBe(4096);
    expect(CMD_EFFECTS_LOG_SIZE).toBe(4096);
    expect(ANA_LOG_HEADER_SIZE).toBe(16);
    expect(ANA_GROUP_DESC_SIZE).toBe(32);
    expect(AnaLogOffset).toEqual({ chgcnt: 0, ngrps: 8 });
    expect(AnaGroupOffset).toEqual({ grpid: 0, nnsids: 4, chgcnt: 8, state: 16, nsids: 32 });
    expect(AnaState).toEqual({ OPTIMIZED: 1, NON_OPTIMIZED: 2, INACCESSIBLE: 3, PERSISTENT_LOSS: 4, CHANGE: 0x0f });
  });
});

describe('Get Log Page command (CDW10..CDW14)', () => {
  it('encodes every field', () => {
    const b = encodeGetLogPageCmd({
      cid: 20, nsid: 0xffffffff, lid: 0x0c, length: 0x40008, lpo: 0x1_0000_1000n, rae: true, lsp: 1, lsi: 0x55, csi: 2, ot: true, uuidIndex: 3,
    });
    // numd = 0x40008/4 - 1 = 0x10001: NUMDL 0x0001 in CDW10 31:16, NUMDU 0x0001 in CDW11 15:0
    expect(b).toEqual(
      bytes(64).u8(0, 0x02).u8(1, 0x40).u16(2, 20).u32(4, 0xffffffff).u32(32, 0x40008).u8(39, 0x5a)
        .u32(40, 0x0001_810c).u32(44, 0x0055_0001).u32(48, 0x1000).u32(52, 1).u32(56, 0x0280_0003).build(),
    );
  });
  it('decodes every field', () => {
    const sqe = decodeSqe(bytes(64).u8(0, 2).u32(40, 0x0001_810c).u32(44, 0x0055_0001).u32(48, 0x1000).u32(52, 1).u32(56, 0x0280_0003).build());
    expect(decodeGetLogPageCmd(sqe)).toEqual({
      lid: 0x0c, lsp: 1, rae: true, numd: 0x10001, length: 0x40008, lsi: 0x55, lpo: 0x1_0000_1000n, csi: 2, ot: true, uuidIndex: 3,
    });
  });
  it('ANA read as Linux sends it: 8208 bytes, NUMD 2051', () => {
    const d = decodeGetLogPageCmd(decodeSqe(encodeGetLogPageCmd({ cid: 1, lid: 0x0c, length: 8208 })));
    expect(d.numd).toBe(2051);
    expect(d.length).toBe(8208);
  });
  it('rounds odd lengths up to whole dwords', () => {
    expect(decodeGetLogPageCmd(decodeSqe(encodeGetLogPageCmd({ cid: 1, lid: 2, length: 5 }))).length).toBe(8);
    expect(decodeGetLogPageCmd(decodeSqe(encodeGetLogPageCmd({ cid: 1, lid: 2, length: 0 }))).length).toBe(4);
  });
  it('decodes the largest NUMD without overflow', () => {
    const d = decodeGetLogPageCmd(decodeSqe(bytes(64).u32(40, 0xffff0000).u32(44, 0x0000ffff).build()));
    expect(d.numd).toBe(0xffffffff);
    expect(d.length).toBe(0x4_0000_0000);
  });
});

describe('sliceLogPage', () => {
  const full = Buffer.from([1, 2, 3, 4, 5, 6, 7, 8]);
  it.each([
    [0n, 4, [1, 2, 3, 4]],
    [4n, 8, [5, 6, 7, 8, 0, 0, 0, 0]],
    [8n, 4, [0, 0, 0, 0]],
    [1000n, 2, [0, 0]],
    [-4n, 2, [0, 0]],
    [0n, 0, []],
  ] as const)('lpo %s length %s', (lpo, len, want) => {
    expect([...sliceLogPage(full, lpo, len)]).toEqual(want);
  });
  it('copies rather than aliases', () => {
    const s = sliceLogPage(full, 0n, 2);
    s[0] = 99;
    expect(full[0]).toBe(1);
  });
});

describe('Supported log pages (LID 0x00)', () => {
  it('sets LSUPP per LID', () => {
    const w = bytes(1024).u32(0, 1).u32(8, 1).u32(0x0c * 4, 1).u32(0x70 * 4, 1).build();
    expect(encodeSupportedLogPages([0, 2, 0x0c, 0x70])).toEqual(w);
    expect(decodeSupportedLogPages(w)).toEqual([0, 2, 0x0c, 0x70]);
  });
});

describe('Feature identifiers supported and effects (LID 0x12)', () => {
  it('one dword per FID: FSUPP bit 0, NCC bit 2, scope bits 20 (namespace) and 21 (controller)', () => {
    const w = bytes(1024).u32(0x07 * 4, 0x0020_0001).u32(0x84 * 4, 0x0010_0005).u32(0xff * 4, 0xffff_ffff).build();
    expect(encodeFeatureEffectsLog([])).toEqual(bytes(1024).build());
    const byFid: number[] = [];
    byFid[0x07] = FeatureEffects.FSUPP | FeatureEffects.CTRLSCP;
    byFid[0x84] = FeatureEffects.FSUPP | FeatureEffects.NCC | FeatureEffects.NSCPE;
    byFid[0xff] = 0xffff_ffff;
    expect(encodeFeatureEffectsLog(byFid)).toEqual(w);
    const back = decodeFeatureEffectsLog(w);
    expect(back.length).toBe(256);
    expect([back[0x07], back[0x84], back[0xff], back[0]]).toEqual([0x0020_0001, 0x0010_0005, 0xffff_ffff, 0]);
    // A short buffer reads as zero-filled.
    expect(decodeFeatureEffectsLog(w.subarray(0, 0x08 * 4))[0x07]).toBe(0x0020_0001);
    expect(decodeFeatureEffectsLog(w.subarray(0, 0x08 * 4))[0x84]).toBe(0);
  });
});

describe('Error information (LID 0x01)', () => {
  const e: ErrorLogEntry = {
    errorCount: 0x1122334455667788n, sqid: 1, cmdid: 0xabcd, status: 0x4080, paramErrorLocation: 0x0128, lba: 0x40000n,
    nsid: 1, vsInfo: 0, trtype: 3, cmdSpecificInfo: 9n, trtypeSpecificInfo: 0x0304,
  };
  const w = bytes(64).u64(0, 0x1122334455667788n).u16(8, 1).u16(10, 0xabcd).u16(12, 0x8100).u16(14, 0x0128).u64(16, 0x40000n)
    .u32(24, 1).u8(29, 3).u64(32, 9n).u16(40, 0x0304).build();
  it('encodes (status << 1 like a CQE)', () => expect(encodeErrorLogEntry(e)).toEqual(w));
  it('decodes', () => expect(decodeErrorLogEntry(w)).toEqual(e));
  it('builds a log of fixed slots', () => {
    const log = encodeErrorLog([e], 128);
    expect(log.length).toBe(128 * 64);
    expect(log.subarray(0, 64)).toEqual(w);
    expect(decodeErrorLogEntry(log, 64).errorCount).toBe(0n);
  });
});

describe('SMART / health (LID 0x02)', () => {
  const s: SmartLog = {
    criticalWarning: 0x04, compositeTemperature: 0x0141, availableSpare: 100, availableSpareThreshold: 10, percentageUsed: 3,
    enduranceGroupCriticalWarning: 1, dataUnitsRead: (1n << 127n) + 1n, dataUnitsWritten: 2n, hostReadCommands: 3n,
    hostWriteCommands: 4n, controllerBusyTime: 5n, powerCycles: 6n, powerOnHours: 7n, unsafeShutdowns: 8n, mediaErrors: 9n,
    numErrLogEntries: (1n << 64n) + 10n, warningTempTime: 11, criticalCompTime: 12, tempSensor: [300, 301, 0, 0, 0, 0, 0, 305],
    thmTemp1TransCount: 13, thmTemp2TransCount: 14, thmTemp1TotalTime: 15, thmTemp2TotalTime: 16,
  };
  const w = bytes(512).u8(0, 4).u16(1, 0x0141).u8(3, 100).u8(4, 10).u8(5, 3).u8(6, 1)
    .u128(32, (1n << 127n) + 1n).u128(48, 2n).u128(64, 3n).u128(80, 4n).u128(96, 5n).u128(112, 6n).u128(128, 7n)
    .u128(144, 8n).u128(160, 9n).u128(176, (1n << 64n) + 10n).u32(192, 11).u32(196, 12)
    .u16(200, 300).u16(202, 301).u16(214, 305).u32(216, 13).u32(220, 14).u32(224, 15).u32(228, 16).build();
  it('encodes all fields, 128-bit counters little-endian', () => expect(encodeSmartLog(s)).toEqual(w));
  it('decodes all fields', () => expect(decodeSmartLog(w)).toEqual(s));
});

describe('Firmware slot (LID 0x03)', () => {
  it('encodes AFI and space padded revisions, empty slots zero', () => {
    const w = bytes(512).u8(0, 1).spacePadded(8, 8, '6.1.0').spacePadded(24, 8, 'abc').build();
    expect(encodeFwSlotLog({ afi: 1, frs: ['6.1.0', '', 'abc'] })).toEqual(w);
    expect(decodeFwSlotLog(w)).toEqual({ afi: 1, frs: ['6.1.0', '', 'abc', '', '', '', ''] });
  });
});

describe('Changed namespace list (LID 0x04)', () => {
  it('lists NSIDs', () => {
    const w = bytes(4096).u32(0, 1).u32(4, 3).build();
    expect(encodeChangedNsList([1, 3])).toEqual(w);
    expect(decodeChangedNsList(w)).toEqual({ overflow: false, nsids: [1, 3] });
  });
  it('reports more than 1024 changes as a single 0xFFFFFFFF', () => {
    const w = bytes(4096).u32(0, 0xffffffff).build();
    expect(encodeChangedNsList(Array.from({ length: 1025 }, (_, i) => i + 1))).toEqual(w);
    expect(decodeChangedNsList(w)).toEqual({ overflow: true, nsids: [] });
  });
  it('exactly 1024 still fits', () => {
    const ids = Array.from({ length: 1024 }, (_, i) => i + 1);
    expect(decodeChangedNsList(encodeChangedNsList(ids)).nsids).toEqual(ids);
  });
});

describe('Commands supported and effects (LID 0x05)', () => {
  it('places ACS at 0 and IOCS at 1024', () => {
    const acs: number[] = [];
    acs[0x06] = CmdEffects.CSUPP;
    acs[0x09] = CmdEffects.CSUPP | CmdEffects.CCC | CmdEffects.CSE_SINGLE_CMD;
    const iocs: number[] = [];
    iocs[0x01] = CmdEffects.CSUPP | CmdEffects.LBCC;
    const w = bytes(4096).u32(0x06 * 4, 1).u32(0x09 * 4, 0x20011).u32(1024 + 4, 3).build();
    expect(encodeCmdEffectsLog({ acs, iocs })).toEqual(w);
    const d = decodeCmdEffectsLog(w);
    expect(d.acs).toHaveLength(256);
    expect(d.acs[9]).toBe(0x20011);
    expect(d.iocs[1]).toBe(3);
    expect(d.iocs[2]).toBe(0);
  });
});

describe('ANA log (LID 0x0C)', () => {
  const log: AnaLog = {
    chgcnt: 5n,
    groups: [
      { grpid: 1, chgcnt: 2n, state: AnaState.OPTIMIZED, nsids: [1, 2] },
      { grpid: 7, chgcnt: 3n, state: AnaState.INACCESSIBLE, nsids: [] },
      { grpid: 9, chgcnt: 0n, state: AnaState.CHANGE, nsids: [5] },
    ],
  };
  const w = bytes(16 + 32 + 8 + 32 + 32 + 4)
    .u64(0, 5n).u16(8, 3)
    .u32(16, 1).u32(20, 2).u64(24, 2n).u8(32, 1).u32(48, 1).u32(52, 2)
    .u32(56, 7).u32(60, 0).u64(64, 3n).u8(72, 3)
    .u32(88, 9).u32(92, 1).u64(96, 0n).u8(104, 0x0f).u32(120, 5)
    .build();
  it('encodes', () => expect(encodeAnaLog(log)).toEqual(w));
  it('decodes', () => expect(decodeAnaLog(w)).toEqual({ ...log, truncated: false }));
  it('RGO drops the NSID lists', () => {
    const rgo = encodeAnaLog(log, { rgo: true });
    expect(rgo).toEqual(
      bytes(16 + 96).u64(0, 5n).u16(8, 3).u32(16, 1).u64(24, 2n).u8(32, 1).u32(48, 7).u64(56, 3n).u8(64, 3).u32(80, 9).u8(96, 0x0f).build(),
    );
    expect(decodeAnaLog(rgo).groups.map((g) => g.nsids)).toEqual([[], [], []]);
  });
  it('flags truncation instead of reading past the buffer', () => {
    const d = decodeAnaLog(w.subarray(0, 52));
    expect(d.truncated).toBe(true);
    expect(d.groups).toEqual([{ grpid: 1, chgcnt: 2n, state: 1, nsids: [1] }]);
    expect(decodeAnaLog(Buffer.alloc(3))).toEqual({ chgcnt: 0n, groups: [], truncated: true });
    const huge = bytes(48).u16(8, 1).u32(16, 1).u32(20, 0xffffffff).build();
    expect(decodeAnaLog(huge)).toMatchObject({ truncated: true, groups: [{ nsids: [] }] });
  });
  it('computes the Linux host buffer size', () => {
    expect(anaLogMaxSize(128, 1024)).toBe(8208);
  });
});

describe('Reservation notification (LID 0x80)', () => {
  it('encodes and decodes', () => {
    const r = { count: 3n, type: 2, nalp: 1, nsid: 7 };
    const w = bytes(64).u64(0, 3n).u8(8, 2).u8(9, 1).u32(12, 7).build();
    expect(encodeResvNotifLog(r)).toEqual(w);
    expect(decodeResvNotifLog(w)).toEqual(r);
  });
});

describe('log page properties', () => {
  const buf = (n: number): fc.Arbitrary<Buffer> => fc.uint8Array({ minLength: n, maxLength: n }).map((a) => Buffer.from(a));
  it('decoders never throw on random or short buffers', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }).map((a) => Buffer.from(a)), (b) => {
        decodeErrorLogEntry(b);
        decodeSmartLog(b);
        decodeFwSlotLog(b);
        decodeChangedNsList(b);
        decodeCmdEffectsLog(b);
        decodeAnaLog(b);
        decodeResvNotifLog(b);
        decodeSupportedLogPages(b);
      }),
      { numRuns: 150 },
    );
  });
  it('SMART, error entry and effects: encode ∘ decode is the identity on the bytes', () => {
    fc.assert(
      fc.property(buf(512), buf(64), buf(4096), (s, e, fx) => {
        const smart = Buffer.from(s);
        smart.fill(0, 7, 32);
        smart.fill(0, 232);
        expect(encodeSmartLog(decodeSmartLog(smart))).toEqual(smart);
        const err = Buffer.from(e);
        err[12] = (err[12] ?? 0) & 0xfe;
        err.fill(0, 30, 32);
        err.fill(0, 42);
        expect(encodeErrorLogEntry(decodeErrorLogEntry(err))).toEqual(err);
        const effects = Buffer.from(fx);
        effects.fill(0, 2048);
        expect(encodeCmdEffectsLog(decodeCmdEffectsLog(effects)).equals(effects)).toBe(true);
      }),
      { numRuns: 25 },
    );
  });
  it('ANA log: decode ∘ encode is the identity on the fields', () => {
    const group = fc.record({
      grpid: fc.integer({ min: 1, max: 0xffffffff }),
      chgcnt: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
      state: fc.constantFrom(1, 2, 3, 4, 15),
      nsids: fc.array(fc.integer({ min: 1, max: 0xffffffff }), { maxLength: 10 }),
    });
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), fc.array(group, { maxLength: 8 }), (chgcnt, groups) => {
        expect(decodeAnaLog(encodeAnaLog({ chgcnt, groups }))).toEqual({ chgcnt, groups, truncated: false });
      }),
      { numRuns: 100 },
    );
  });
});
