// The test builder is itself checked against hand-laid hex (computed outside TypeScript from the spec tables) and
// against captured kernel PDUs, so that codec tests built on it stand on independent ground.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { c2hData, capsuleCmd, capsuleResp, cqe, crc32cBitwise, h2cData, hex, icReq, icResp, r2t, sqe, T, termReq } from './pdu-builder.js';

describe('crc32cBitwise', () => {
  it('matches the CRC32C check value of "123456789" (TCP 1.0 §3.6.1.4)', () => {
    expect(crc32cBitwise(Buffer.from('123456789'))).toBe(0xe3069283);
  });
  it('is 0 for no bytes and chains through `prev`', () => {
    expect(crc32cBitwise(Buffer.alloc(0))).toBe(0);
    const b = Buffer.from('nvme-tcp fixture 4k off=0x00000000');
    expect(crc32cBitwise(b.subarray(9), crc32cBitwise(b.subarray(0, 9)))).toBe(crc32cBitwise(b));
  });
});

const ICREQ_ZEROS = '00'.repeat(112);

describe('builder layouts equal hand-laid bytes', () => {
  it.each([
    {
      name: 'ICReq dgst 3 (as captured from Linux 6.1)',
      bytes: () => icReq({ dgst: 3 }),
      hex: `00 00 80 00 | 80000000 | 0000 00 03 | 00000000 | ${ICREQ_ZEROS}`,
    },
    {
      name: 'ICResp dgst 3, maxh2cdata 4 MiB',
      bytes: () => icResp({ dgst: 3, maxh2cdata: 0x400000 }),
      hex: `01 00 80 00 | 80000000 | 0000 00 03 | 00004000 | ${ICREQ_ZEROS}`,
    },
    {
      name: 'H2CTermReq FES 1 FEI 2 with an 8-byte CH as error data',
      bytes: () => termReq(T.H2C_TERM_REQ, { fes: 1, fei: 2, errorData: hex('04 00 49 00 48000000') }),
      hex: '02 00 18 00 | 20000000 | 0100 | 02000000 | 00000000000000000000 | 04 00 49 00 48000000',
    },
    {
      name: 'CapsuleCmd + HDGST, no data',
      bytes: () => capsuleCmd({ sqe: sqe({ opcode: 0x02, cid: 0x1234, nsid: 1, sglType: 0x5a, sglLen: 4096, cdw10: 16 }) }, { hdgst: true }),
      hex: `04 01 48 00 | 4c000000
            02 40 3412 01000000 0000000000000000 0000000000000000 | 0000000000000000 00100000 000000 5a | 10000000 ${'00'.repeat(20)}
            ee7b1b91 # HDGST`,
    },
    {
      name: 'CapsuleCmd + HDGST + 8 data bytes + DDGST, PDA 3 (16-byte alignment: pdo 80)',
      bytes: () => capsuleCmd({ sqe: sqe({ opcode: 0x01, cid: 0x10, nsid: 1, sglType: 0x01, sglLen: 8 }), data: hex('0001020304050607') }, { hdgst: true, ddgst: true, pda: 3 }),
      hex: `04 03 48 50 | 5c000000
            01 40 1000 01000000 0000000000000000 0000000000000000 | 0000000000000000 08000000 000000 01 | ${'00'.repeat(24)}
            b56f98bf # HDGST
            00000000 # pad to 80
            0001020304050607 | 3bbc2c8a # DDGST`,
    },
    {
      name: 'CapsuleResp + HDGST, status 0x4006 (Internal Error, DNR)',
      bytes: () => capsuleResp({ cqe: cqe({ cid: 0x1234, sqhd: 5, sqid: 1, status: 0x4006 }) }, { hdgst: true }),
      hex: '05 01 18 00 | 1c000000 | 00000000 00000000 0500 0100 3412 0c80 | 16a4d425',
    },
    {
      name: 'H2CData LAST, 5 bytes + DDGST only',
      bytes: () => h2cData({ cccid: 7, ttag: 3, datao: 4096, last: true, data: hex('a0a1a2a3a4') }, { ddgst: true }),
      hex: '06 06 18 18 | 21000000 | 0700 0300 00100000 05000000 00000000 | a0a1a2a3a4 | b32cca98',
    },
    {
      name: 'C2HData LAST|SUCCESS + HDGST + DDGST, PDA 7 (32-byte alignment: pdo 32)',
      bytes: () => c2hData({ cccid: 9, datao: 0, last: true, success: true, data: Buffer.from('xyz') }, { hdgst: true, ddgst: true, pda: 7 }),
      hex: '07 0f 18 20 | 27000000 | 0900 0000 00000000 03000000 00000000 | be31fa0d | 00000000 | 78797a | 85682325',
    },
    {
      name: 'R2T + HDGST, r2tl 128 KiB',
      bytes: () => r2t({ cccid: 1, ttag: 2, r2to: 0, r2tl: 0x20000 }, { hdgst: true }),
      hex: '09 01 18 00 | 1c000000 | 0100 0200 00000000 00000200 00000000 | b54b492a',
    },
    {
      name: 'CapsuleResp + HDGST as captured (io-digest, Connect response)',
      bytes: () => capsuleResp({ cqe: cqe({ cid: 0, dw0: 1, sqhd: 1, sqid: 0 }) }, { hdgst: true }),
      hex: '050118001c0000000100000000000000010000000000000042623332',
    },
    {
      name: 'R2T + HDGST as captured (io-digest, 128 KiB write)',
      bytes: () => r2t({ cccid: 86, ttag: 5, r2to: 0, r2tl: 131072 }, { hdgst: true }),
      hex: '090118001c00000056000500000000000000020000000000cdd1f318',
    },
  ])('$name', ({ bytes, hex: h }) => {
    expect(bytes().toString('hex')).toBe(hex(h).toString('hex'));
  });

  it('applies CH overrides and computes HDGST over the overridden header', () => {
    const b = r2t({ cccid: 1, ttag: 2, r2to: 0, r2tl: 1 }, { hdgst: true }, { plen: 99 });
    expect(b.readUInt32LE(4)).toBe(99);
    expect(b.readUInt32LE(24)).toBe(crc32cBitwise(b.subarray(0, 24)));
  });

  it('hex() ignores separators and comments and rejects odd digits', () => {
    expect(hex('0a | 0b_0c # note\n 0d').toString('hex')).toBe('0a0b0c0d');
    expect(() => hex('abc')).toThrow(SyntaxError);
  });
});
