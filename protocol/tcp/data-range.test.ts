// Data-PDU range findings (TCP 1.0 §3.6.2.8–10): PDUs built by the independent test builder, decoded by the reader,
// then checked; each finding's FEI must point at the header field (in the built bytes) that holds the bad value.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { readChunks } from '../../test/fixtures/pdu-stream.js';
import * as B from '../testing/pdu-builder.js';
import { Layout } from '../testing/pdu-builder.js';
import { checkC2HData, checkH2CData, checkR2T, DataPduOffset, Fes, PduType, type Pdu } from './index.js';

function decode(role: 'controller' | 'host', wire: Buffer): Pdu {
  const r = readChunks([wire], { role, primed: true });
  expect(r.fatals).toEqual([]);
  const pdu = r.pdus[0];
  if (pdu === undefined) throw new Error('nothing decoded');
  return pdu;
}

function dataLen(pdu: { data: Buffer[] }): number {
  return pdu.data.reduce((n, b) => n + b.length, 0);
}

describe('field offsets', () => {
  it('match the builder layout of the data PDU header and the CH flags byte', () => {
    expect(DataPduOffset).toMatchObject({ flags: 1, cccid: Layout.DATA.cccid, ttag: Layout.DATA.ttag, datao: Layout.DATA.datao, datal: Layout.DATA.datal });
    expect(DataPduOffset.r2to).toBe(12);
    expect(DataPduOffset.r2tl).toBe(16);
  });
});

describe('checkH2CData', () => {
  const cases: Array<{ name: string; datao: number; len: number; expected: number; end: number; bad: boolean }> = [
    { name: 'first PDU of the range', datao: 0, len: 4096, expected: 0, end: 8192, bad: false },
    { name: 'last PDU ending exactly at R2TO+R2TL', datao: 4096, len: 4096, expected: 4096, end: 8192, bad: false },
    { name: 'a gap (datao ahead)', datao: 8, len: 8, expected: 0, end: 64, bad: true },
    { name: 'a repeat (datao behind)', datao: 0, len: 8, expected: 8, end: 64, bad: true },
    { name: 'past the end of the range', datao: 56, len: 16, expected: 56, end: 64, bad: true },
  ];
  it.each(cases)('$name', (c) => {
    const wire = B.h2cData({ cccid: 3, ttag: 1, datao: c.datao, data: B.pattern(c.len) });
    const pdu = decode('controller', wire);
    if (pdu.type !== PduType.H2C_DATA) throw new Error('not H2CData');
    const f = checkH2CData(pdu.datao, dataLen(pdu), c.expected, c.end);
    if (!c.bad) return expect(f).toBeUndefined();
    expect(f).toMatchObject({ fes: Fes.DATA_OUT_OF_RANGE, fei: 12 });
    expect(wire.readUInt32LE(f?.fei ?? -1)).toBe(c.datao);
  });
});

describe('checkC2HData', () => {
  const cases: Array<{ name: string; datao: number; len: number; success?: boolean; received: number; length: number; fes?: number; fei?: number; field?: number }> = [
    { name: 'in order, within the buffer', datao: 0, len: 512, received: 0, length: 4096 },
    { name: 'last piece with SUCCESS', datao: 3584, len: 512, success: true, received: 3584, length: 4096 },
    { name: 'out of order', datao: 512, len: 512, received: 0, length: 4096, fes: 1, fei: 12, field: 512 },
    { name: 'beyond the buffer', datao: 4000, len: 512, received: 4000, length: 4096, fes: 4, fei: 16, field: 512 },
    // SPDK's nvmf_tgt: one LAST|SUCCESS PDU with the 1104-byte AUTH_Challenge for an allocation length of 4096.
    { name: 'SUCCESS short of the buffer (accepted)', datao: 0, len: 1104, success: true, received: 0, length: 4096 },
  ];
  it.each(cases)('$name', (c) => {
    const wire = B.c2hData({ cccid: 7, datao: c.datao, last: c.success === true, success: c.success === true, data: B.pattern(c.len) });
    const pdu = decode('host', wire);
    if (pdu.type !== PduType.C2H_DATA) throw new Error('not C2HData');
    const f = checkC2HData(pdu.datao, dataLen(pdu), c.received, c.length);
    if (c.fes === undefined) return expect(f).toBeUndefined();
    expect(f).toMatchObject({ fes: c.fes, fei: c.fei });
    expect(wire.readUInt32LE(c.fei ?? -1)).toBe(c.field);
  });
});

describe('checkR2T', () => {
  const cases: Array<{ name: string; r2to: number; r2tl: number; sent: number; length: number; fes?: number; fei?: number; value?: number }> = [
    { name: 'whole command', r2to: 0, r2tl: 8192, sent: 0, length: 8192 },
    { name: 'second R2T continuing', r2to: 4096, r2tl: 4096, sent: 4096, length: 8192 },
    { name: 'out of order', r2to: 4096, r2tl: 4096, sent: 0, length: 8192, fes: 1, fei: 12, value: 4096 },
    { name: 'beyond the command data', r2to: 0, r2tl: 8193, sent: 0, length: 8192, fes: 4, fei: 16, value: 8193 },
  ];
  it.each(cases)('$name', (c) => {
    const wire = B.r2t({ cccid: 2, ttag: 9, r2to: c.r2to, r2tl: c.r2tl });
    const pdu = decode('host', wire);
    if (pdu.type !== PduType.R2T) throw new Error('not R2T');
    const f = checkR2T(pdu.r2to, pdu.r2tl, c.sent, c.length);
    if (c.fes === undefined) return expect(f).toBeUndefined();
    expect(f).toMatchObject({ fes: c.fes, fei: c.fei });
    expect(wire.readUInt32LE(c.fei ?? -1)).toBe(c.value);
  });
});
