import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { AuthFctype, FailureExplanation } from './constants.js';
import { checkAuthCmd, decodeAuthCmd, decodeAuthMessage, encodeAuthCmdInto, encodeAuthMessage } from './messages.js';
import type { AuthMessage } from './messages.js';

/** Hex built by hand from the Linux struct layouts (include/linux/nvme.h), not from the encoder. */
function hex(...parts: string[]): Buffer {
  return Buffer.from(parts.join('').replace(/\s+/g, ''), 'hex');
}
const z = (n: number): string => '00'.repeat(n);

// Linux host's AUTH_Negotiate (nvme_auth_set_dhchap_negotiate_data): t_id 0x0102, napd 1,
// authid 1, halen 3, dhlen 6, hashes 1,2,3 at idlist[0..2], groups 0..5 at idlist[30..35].
const LINUX_NEGOTIATE = hex('00 00 0000 0201 00 01', '01 00 03 06', '010203', z(27), '000102030405', z(24));

const c1 = Buffer.alloc(32, 0xc1);
const r = Buffer.alloc(32, 0xaa);
const c2 = Buffer.alloc(32, 0xc2);
const dh = Buffer.alloc(8, 0xd0);

const FIXTURES: { name: string; msg: AuthMessage; bytes: Buffer }[] = [
  {
    name: 'negotiate (Linux host offer)',
    msg: { type: 'negotiate', tId: 0x0102, scC: 0, protocols: [{ authId: 1, hashIds: [1, 2, 3], dhGroupIds: [0, 1, 2, 3, 4, 5] }] },
    bytes: LINUX_NEGOTIATE,
  },
  {
    name: 'challenge with DH value',
    msg: { type: 'challenge', tId: 7, hashId: 1, dhGroupId: 1, seqnum: 0x11223344, challenge: c1, dhValue: dh },
    // type 1, id 1, rsvd, tid 7, hl 32, rsvd, hashid 1, dhgid 1, dhvlen 8, seqnum LE
    bytes: hex('01 01 0000 0700 20 00 01 01 0800 44332211', c1.toString('hex'), dh.toString('hex')),
  },
  {
    name: 'reply, bidirectional, with DH value',
    msg: { type: 'reply', tId: 7, cvalid: true, seqnum: 5, response: r, challenge: c2, dhValue: dh },
    bytes: hex('01 02 0000 0700 20 00 01 00 0800 05000000', r.toString('hex'), c2.toString('hex'), dh.toString('hex')),
  },
  {
    name: 'reply, unidirectional, NULL group (C2 slot still present, zeroed)',
    msg: { type: 'reply', tId: 9, cvalid: false, seqnum: 0, response: r, challenge: Buffer.alloc(32), dhValue: Buffer.alloc(0) },
    bytes: hex('01 02 0000 0900 20 00 00 00 0000 00000000', r.toString('hex'), z(32)),
  },
  {
    name: 'success1 with R2',
    msg: { type: 'success1', tId: 7, hl: 32, response: r },
    bytes: hex('01 03 0000 0700 20 00 01', z(7), r.toString('hex')),
  },
  {
    name: 'success1 without R2 (HL still set, as nvmet)',
    msg: { type: 'success1', tId: 7, hl: 48, response: null },
    bytes: hex('01 03 0000 0700 30 00 00', z(7)),
  },
  { name: 'success2', msg: { type: 'success2', tId: 0xbeef }, bytes: hex('01 04 0000 efbe', z(10)) },
  {
    name: 'failure1 (controller, F1h)',
    msg: { type: 'failure1', tId: 3, reasonCode: 1, explanation: FailureExplanation.HASH_UNUSABLE },
    bytes: hex('00 f1 0000 0300 01 04'),
  },
  {
    name: 'failure2 (host, F0h)',
    msg: { type: 'failure2', tId: 3, reasonCode: 1, explanation: FailureExplanation.FAILED },
    bytes: hex('00 f0 0000 0300 01 01'),
  },
];

describe('auth message codec', () => {
  it.each(FIXTURES)('encodes $name', ({ msg, bytes }) => {
    expect(encodeAuthMessage(msg).toString('hex')).toBe(bytes.toString('hex'));
  });

  it.each(FIXTURES)('decodes $name', ({ msg, bytes }) => {
    expect(decodeAuthMessage(bytes)).toEqual({ ok: true, message: msg });
  });

  it.each(FIXTURES)('decodes $name followed by zero padding (a 4 KiB receive buffer)', ({ msg, bytes }) => {
    const padded = Buffer.alloc(4096);
    bytes.copy(padded);
    expect(decodeAuthMessage(padded)).toEqual({ ok: true, message: msg });
  });

  it.each([
    ['too short', hex('01 01 0000'), FailureExplanation.INCORRECT_PAYLOAD],
    ['unknown auth_type', hex('02 01 0000 0000 0000', z(8)), FailureExplanation.INCORRECT_MESSAGE],
    ['unknown common id', hex('00 05 0000 0000 0000'), FailureExplanation.INCORRECT_MESSAGE],
    ['unknown DH-HMAC-CHAP id', hex('01 09 0000 0000 0000', z(8)), FailureExplanation.INCORRECT_MESSAGE],
    ['negotiate with napd 0', hex('00 00 0000 0000 00 00'), FailureExplanation.INCORRECT_PAYLOAD],
    ['negotiate truncated descriptor', LINUX_NEGOTIATE.subarray(0, 40), FailureExplanation.INCORRECT_PAYLOAD],
    ['negotiate halen 31', Buffer.concat([hex('00 00 0000 0000 00 01 01 00 1f 00'), Buffer.alloc(60)]), FailureExplanation.INCORRECT_PAYLOAD],
    ['challenge shorter than HL', hex('01 01 0000 0000 20 00 01 00 0000 00000000', z(16)), FailureExplanation.INCORRECT_PAYLOAD],
    ['reply shorter than 2*HL+DHVLEN', hex('01 02 0000 0000 20 00 00 00 0100 00000000', z(64)), FailureExplanation.INCORRECT_PAYLOAD],
  ])('rejects %s', (_n, bytes, explanation) => {
    const d = decodeAuthMessage(bytes);
    expect(d.ok).toBe(false);
    if (!d.ok) expect(d.explanation).toBe(explanation);
  });

  it('never throws on random input (first byte biased to valid auth types)', () => {
    for (let i = 0; i < 3000; i++) {
      const b = randomBytes(i % 200);
      if (b.length > 1) {
        b[0] = i % 3 === 0 ? 0 : 1;
        b[1] = [0, 1, 2, 3, 4, 0xf0, 0xf1][i % 7] as number;
      }
      expect(() => decodeAuthMessage(b)).not.toThrow();
    }
  });
});

describe('Authentication Send/Receive SQE', () => {
  it('places SPSP0/SPSP1/SECP at bytes 41/42/43 and TL/AL at 44 (Linux nvmf_auth_send_command)', () => {
    const sqe = encodeAuthCmdInto(Buffer.alloc(64, 0xff), { fctype: AuthFctype.SEND, cid: 0x1234, length: 0x01020304 });
    expect(sqe[0]).toBe(0x7f);
    expect(sqe[1]).toBe(0x40); // FLAGS: PSDT 01b (SGL), no fused bits: NVMe/TCP requires SGLs, nvmet rejects PSDT 00b
    expect(sqe.readUInt16LE(2)).toBe(0x1234);
    expect(sqe[4]).toBe(0x05);
    expect(sqe.subarray(40, 48).toString('hex')).toBe('000101e904030201');
    expect(sqe.subarray(24, 40).equals(Buffer.alloc(16, 0xff))).toBe(true); // SGL left to the transport
    expect(decodeAuthCmd(sqe)).toEqual({ fctype: 5, nssf: 0, spsp0: 1, spsp1: 1, secp: 0xe9, length: 0x01020304 });
    expect(checkAuthCmd(decodeAuthCmd(sqe))).toBeNull();
    const recv = encodeAuthCmdInto(Buffer.alloc(64), { fctype: AuthFctype.RECEIVE, cid: 1, length: 4096 });
    expect(decodeAuthCmd(recv)).toMatchObject({ fctype: 6, length: 4096 });
    expect(recv[1]).toBe(0x40);
  });

  it.each([
    ['secp', { secp: 0xea }, 43],
    ['spsp0', { spsp0: 2 }, 41],
    ['spsp1', { spsp1: 0 }, 42],
    ['zero length', { length: 0 }, 44],
  ])('rejects bad %s with Invalid Field | DNR at its offset (nvmet)', (_n, patch, errorLoc) => {
    const f = { fctype: 5, nssf: 0, spsp0: 1, spsp1: 1, secp: 0xe9, length: 16, ...patch };
    expect(checkAuthCmd(f)).toEqual({ status: 0x4002, errorLoc });
  });
});
