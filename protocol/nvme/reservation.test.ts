import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import {
  AEN_RESV_LOG_AVAILABLE,
  Cptpl,
  NvmOpcode,
  ONCS_RESERVATIONS,
  RESV_NOTIF_MASK_ALL,
  Rescap,
  ResvType,
  decodeAenResult,
  decodeResvAcquireCdw10,
  decodeResvKey,
  decodeResvRegisterCdw10,
  decodeResvReleaseCdw10,
  decodeResvStatus,
  encodeResvAcquireCdw10,
  encodeResvCmd,
  encodeResvKeys,
  encodeResvRegisterCdw10,
  encodeResvReleaseCdw10,
  encodeResvReleaseData,
  encodeResvStatus,
  isAllRegistrants,
} from '../index.js';

// Expected bytes below are written out by hand from NVMe Base 2.0 §7.2-§7.5 (field offsets), not produced by
// the encoders under test.
function hex(s: string): Buffer {
  return Buffer.from(s.replace(/\s+/g, ''), 'hex');
}

describe('reservation constants (NVMe Base 2.0 §8.19, NVM Command Set 1.0)', () => {
  it('types 1..6, capability bits, ONCS bit 5, the AEN dword', () => {
    expect(Object.values(ResvType)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(Rescap.PTPL).toBe(0x01);
    expect(Rescap.EXCLUSIVE_ACCESS_ALL_REGS).toBe(0x40);
    expect(Rescap.IEKEY_X).toBe(0x80);
    expect(ONCS_RESERVATIONS).toBe(0x20);
    expect(RESV_NOTIF_MASK_ALL).toBe(0x0e);
    // Async event type 6 = I/O Command specific status, info 0 = Reservation Log Page Available, log 80h.
    expect(decodeAenResult(AEN_RESV_LOG_AVAILABLE)).toEqual({ type: 6, info: 0, lid: 0x80 });
    expect([1, 2, 3, 4, 5, 6].filter(isAllRegistrants)).toEqual([5, 6]);
  });
});

describe('CDW10 of Register / Acquire / Release', () => {
  it('Register: RREGA 2:0, IEKEY 3, CPTPL 31:30', () => {
    // replace (2), IEKEY, CPTPL=11b → 0xC000000A
    expect(encodeResvRegisterCdw10({ rrega: 2, iekey: true, cptpl: Cptpl.SET })).toBe(0xc000_000a);
    expect(decodeResvRegisterCdw10(0x8000_0001)).toEqual({ rrega: 1, iekey: false, cptpl: 2 });
  });
  it('Acquire: RACQA 2:0, IEKEY 3, RTYPE 15:8', () => {
    // preempt-and-abort (2), type 6 → 0x0602
    expect(encodeResvAcquireCdw10({ racqa: 2, iekey: false, rtype: 6 })).toBe(0x0602);
    expect(decodeResvAcquireCdw10(0x030d)).toEqual({ racqa: 5, iekey: true, rtype: 3 });
  });
  it('Release: RRELA 2:0, IEKEY 3, RTYPE 15:8', () => {
    expect(encodeResvReleaseCdw10({ rrela: 1, iekey: false, rtype: 0 })).toBe(0x01);
    expect(decodeResvReleaseCdw10(0x0400)).toEqual({ rrela: 0, iekey: false, rtype: 4 });
  });
});

describe('command data', () => {
  it('Register/Acquire data: two little-endian 64-bit keys', () => {
    const b = encodeResvKeys(0x1122334455667788n, 0xaabbn);
    expect(b).toEqual(hex('8877665544332211 bbaa000000000000'));
    expect(decodeResvKey(b, 0)).toBe(0x1122334455667788n);
    expect(decodeResvKey(b, 1)).toBe(0xaabbn);
    expect(decodeResvKey(Buffer.alloc(8), 1)).toBe(0n);
  });
  it('Release data: CRKEY only', () => {
    expect(encodeResvReleaseData(0xffff_ffff_ffff_ffffn)).toEqual(hex('ffffffffffffffff'));
  });
  it('SQE: opcode, PSDT SGL, CID, NSID, CDW10, CDW11', () => {
    const sqe = encodeResvCmd({ opcode: NvmOpcode.RESV_REPORT, cid: 0x1234, nsid: 7, cdw10: 0x3ff, cdw11: 1 });
    const want = Buffer.alloc(64);
    want[0] = 0x0e;
    want[1] = 0x40;
    want[2] = 0x34;
    want[3] = 0x12;
    want[4] = 7;
    want[40] = 0xff;
    want[41] = 0x03;
    want[44] = 1;
    expect(sqe).toEqual(want);
    expect(() => encodeResvCmd({ opcode: NvmOpcode.READ, cid: 0, nsid: 1, cdw10: 0 })).toThrow(/not a reservation command/);
  });
});

describe('Reservation Status data structure', () => {
  const hostA = hex('00112233445566778899aabbccddeeff');
  it('extended (EDS=1): 64-byte header, 64-byte entries with a 128-bit host identifier', () => {
    const b = encodeResvStatus({ gen: 3, rtype: 2, ptpls: true, regctls: [{ cntlid: 0xffff, holder: true, hostid: hostA, rkey: 0xabcdn }] }, true);
    const want = Buffer.alloc(128);
    // header: GEN 3:0, RTYPE 4, REGCTL 6:5, PTPLS 9
    want[0] = 3;
    want[4] = 2;
    want[5] = 1;
    want[9] = 1;
    // entry at 64: CNTLID 1:0, RCSTS 2, RKEY 15:8, HOSTID 31:16
    want[64] = 0xff;
    want[65] = 0xff;
    want[66] = 1;
    want[72] = 0xcd;
    want[73] = 0xab;
    hostA.copy(want, 80);
    expect(b).toEqual(want);
    const d = decodeResvStatus(b, true);
    expect(d).toMatchObject({ gen: 3, rtype: 2, ptpls: true, regctlCount: 1 });
    expect(d.regctls[0]).toEqual({ cntlid: 0xffff, holder: true, hostid: hostA, rkey: 0xabcdn });
  });
  it('plain (EDS=0): 24-byte header, 24-byte entries with a 64-bit host identifier', () => {
    const id = hex('0102030405060708');
    const b = encodeResvStatus({ gen: 0x01020304, rtype: 0, ptpls: false, regctls: [{ cntlid: 5, holder: false, hostid: id, rkey: 9n }] }, false);
    // entry at 24: CNTLID 1:0, RCSTS 2, HOSTID 15:8, RKEY 23:16
    expect(b).toEqual(hex('04030201 00 0100 00 00 00' + '00'.repeat(14) + '0500 00 0000000000' + '0102030405060708' + '0900000000000000'));
    expect(decodeResvStatus(b, false).regctls[0]).toEqual({ cntlid: 5, holder: false, hostid: id, rkey: 9n });
    expect(() => encodeResvStatus({ gen: 0, rtype: 0, ptpls: false, regctls: [{ cntlid: 1, holder: false, hostid: hostA, rkey: 0n }] }, false)).toThrow(/holds 8/);
  });
  it('a truncated structure keeps the count and drops the entries that do not fit', () => {
    const full = encodeResvStatus({ gen: 1, rtype: 1, ptpls: false, regctls: [{ cntlid: 1, holder: true, hostid: hostA, rkey: 1n }, { cntlid: 2, holder: false, hostid: hostA, rkey: 2n }] }, true);
    const d = decodeResvStatus(full.subarray(0, 128), true);
    expect(d.regctlCount).toBe(2);
    expect(d.regctls).toHaveLength(1);
  });
});
