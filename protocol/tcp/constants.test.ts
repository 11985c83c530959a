// Layout constants and the per-type table checked against the spec tables (TCP 1.0 §3.6.1–§3.6.2).
import { describe, expect, it } from 'vitest';
import {
  CAPSULE_CMD_HLEN,
  CH_SIZE,
  ChOffset,
  DATA_PDU_HLEN,
  DIGEST_SIZE,
  Fes,
  IC_PDU_SIZE,
  PDU_INFO,
  PduFlag,
  PduType,
  TERM_REQ_HLEN,
  TERM_REQ_MAX_DATA,
  dataOffset,
  isPduType,
  pduTypeName,
} from './index.js';

describe('layout constants (TCP 1.0 §3.6.1, §3.6.2)', () => {
  it('CH is 8 bytes: type@0 flags@1 hlen@2 pdo@3 plen@4 (u32)', () => {
    expect(CH_SIZE).toBe(8);
    expect(ChOffset).toEqual({ type: 0, flags: 1, hlen: 2, pdo: 3, plen: 4 });
  });
  it('CapsuleCmd header is 72 (8 CH + 64 SQE), data PDUs and TermReq 24, IC PDUs 128, digests 4', () => {
    expect(CAPSULE_CMD_HLEN).toBe(72);
    expect(DATA_PDU_HLEN).toBe(24);
    expect(TERM_REQ_HLEN).toBe(24);
    expect(IC_PDU_SIZE).toBe(128);
    expect(DIGEST_SIZE).toBe(4);
    expect(TERM_REQ_MAX_DATA).toBe(128);
  });
  it('flag bits: HDGSTF 0x01, DDGSTF 0x02, DATA_LAST 0x04, DATA_SUCCESS 0x08', () => {
    expect(PduFlag).toEqual({ HDGSTF: 0x01, DDGSTF: 0x02, DATA_LAST: 0x04, DATA_SUCCESS: 0x08 });
  });
  it('FES values 1..6 (TCP 1.0 §3.6.2.4/5 Figure 23)', () => {
    expect(Fes).toEqual({
      INVALID_HEADER_FIELD: 1,
      PDU_SEQUENCE_ERROR: 2,
      HEADER_DIGEST_ERROR: 3,
      DATA_OUT_OF_RANGE: 4,
      DATA_LIMIT_EXCEEDED: 5,
      UNSUPPORTED_PARAMETER: 6,
    });
  });
});

// Reference §2 "PDU types and fixed header lengths", transcribed row by row.
const SPEC_TYPES = [
  { type: 0x00, name: 'ICReq', dir: 'h2c', hlen: 128, hdgst: false, data: false },
  { type: 0x01, name: 'ICResp', dir: 'c2h', hlen: 128, hdgst: false, data: false },
  { type: 0x02, name: 'H2CTermReq', dir: 'h2c', hlen: 24, hdgst: false, data: false },
  { type: 0x03, name: 'C2HTermReq', dir: 'c2h', hlen: 24, hdgst: false, data: false },
  { type: 0x04, name: 'CapsuleCmd', dir: 'h2c', hlen: 72, hdgst: true, data: true },
  { type: 0x05, name: 'CapsuleResp', dir: 'c2h', hlen: 24, hdgst: true, data: false },
  { type: 0x06, name: 'H2CData', dir: 'h2c', hlen: 24, hdgst: true, data: true },
  { type: 0x07, name: 'C2HData', dir: 'c2h', hlen: 24, hdgst: true, data: true },
  { type: 0x09, name: 'R2T', dir: 'c2h', hlen: 24, hdgst: true, data: false },
] as const;

describe('PDU_INFO matches the spec type table', () => {
  it.each(SPEC_TYPES)('$name (0x$type)', (row) => {
    expect(isPduType(row.type)).toBe(true);
    if (!isPduType(row.type)) return;
    expect(PDU_INFO[row.type]).toEqual({ name: row.name, dir: row.dir, hlen: row.hlen, hdgst: row.hdgst, data: row.data });
    expect(pduTypeName(row.type)).toBe(row.name);
  });
  it('has exactly the nine types, and PduType names them', () => {
    expect(Object.keys(PDU_INFO).map(Number).sort((a, b) => a - b)).toEqual(SPEC_TYPES.map((r) => r.type));
    expect(Object.values(PduType).sort((a, b) => a - b)).toEqual(SPEC_TYPES.map((r) => r.type));
  });
  it.each([0x08, 0x0a, 0x0b, 0x0c, 0x7f, 0xff])('0x%s is not a PDU type we accept', (t) => {
    expect(isPduType(t)).toBe(false);
    expect(pduTypeName(t)).toBe(`unknown(0x${t.toString(16)})`);
  });
});

describe('dataOffset: header (+HDGST) rounded up to (PDA+1)*4 (TCP 1.0 §3.6.1)', () => {
  it.each([
    { hlen: 72, hdgst: false, pda: 0, pdo: 72 },
    { hlen: 72, hdgst: true, pda: 0, pdo: 76 },
    { hlen: 24, hdgst: false, pda: 0, pdo: 24 },
    { hlen: 24, hdgst: true, pda: 0, pdo: 28 },
    { hlen: 24, hdgst: true, pda: 1, pdo: 32 },
    { hlen: 24, hdgst: false, pda: 1, pdo: 24 },
    { hlen: 72, hdgst: true, pda: 3, pdo: 80 },
    { hlen: 72, hdgst: false, pda: 7, pdo: 96 },
    { hlen: 24, hdgst: true, pda: 31, pdo: 128 },
    { hlen: 72, hdgst: true, pda: 31, pdo: 128 },
    { hlen: 24, hdgst: false, pda: 2, pdo: 24 },
    { hlen: 24, hdgst: true, pda: 2, pdo: 36 },
  ])('hlen $hlen hdgst $hdgst pda $pda → pdo $pdo', ({ hlen, hdgst, pda, pdo }) => {
    expect(dataOffset(hlen, hdgst, pda)).toBe(pdo);
  });
});
