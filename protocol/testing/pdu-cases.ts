// The PDU codec table: every PDU type × digests × PDA with its expected wire bytes from the independent builder
// (pdu-builder.ts). Shared by protocol/tcp/pdu.test.ts (encoders, reader) and connection/pdu-batch.test.ts (the send
// batch), so both hold their bytes to the same rows.
import { Buffer } from 'node:buffer';
import { PduType } from '../tcp/constants.js';
import type { Pdu, PduFraming } from '../tcp/pdu.js';
import type { ReceiverRole } from '../tcp/validate.js';
import * as B from './pdu-builder.js';

type Framing = PduFraming;

export const FR = {
  plain: { hdgst: false, ddgst: false, pda: 0 },
  hd: { hdgst: true, ddgst: false, pda: 0 },
  dd: { hdgst: false, ddgst: true, pda: 0 },
  both: { hdgst: true, ddgst: true, pda: 0 },
  plainPda1: { hdgst: false, ddgst: false, pda: 1 },
  bothPda3: { hdgst: true, ddgst: true, pda: 3 },
  hdPda31: { hdgst: true, ddgst: false, pda: 31 },
} as const satisfies Record<string, Framing>;
export type FrName = keyof typeof FR;

export interface Case {
  name: string;
  role: ReceiverRole;
  framing: Framing;
  fields: Pdu;
  /** Expected wire bytes, laid out by protocol/testing/pdu-builder.ts. */
  bytes: Buffer;
  /** What decoding the bytes yields, when it differs from `fields` (TermReq error data over 128 bytes). */
  decoded?: Pdu;
}

const SQE_READ = B.sqe({ opcode: 0x02, cid: 0x3007, nsid: 1, sglType: 0x5a, sglLen: 4096, cdw10: 16 });
export const SQE_WRITE_ICD = (len: number): Buffer => B.sqe({ opcode: 0x01, cid: 0x1011, nsid: 1, sglType: 0x01, sglLen: len });
const CQE_OK = B.cqe({ cid: 0x3007, sqhd: 12, sqid: 1 });
const CQE_ERR = B.cqe({ cid: 31, sqhd: 0xffff, sqid: 0, status: 0x4006, dw0: 0xdeadbeef });
export const D = {
  tiny: B.pattern(1, 0x11),
  odd: B.pattern(37, 0x22),
  k4: B.pattern(4096, 0x33, 13),
  parts: [B.pattern(10, 0x44), Buffer.alloc(0), B.pattern(3, 0x55), B.pattern(250, 0x66)],
};
const cat = (bufs: readonly Buffer[]): Buffer => Buffer.concat(bufs);

function each<T>(frames: readonly FrName[], make: (fr: Framing, frName: FrName) => T): T[] {
  return frames.map((n) => make(FR[n], n));
}

export const CASES: Case[] = [
  // IC PDUs: 128 bytes, never digests; the framing they negotiate applies to what follows.
  { name: 'ICReq all zero', role: 'controller', framing: FR.plain, fields: { type: PduType.IC_REQ, pfv: 0, hpda: 0, dgst: 0, maxr2t: 0 }, bytes: B.icReq({}) },
  { name: 'ICReq dgst 3, hpda 5, maxr2t 3', role: 'controller', framing: FR.both, fields: { type: PduType.IC_REQ, pfv: 0, hpda: 5, dgst: 3, maxr2t: 3 }, bytes: B.icReq({ dgst: 3, hpda: 5, maxr2t: 3 }) },
  { name: 'ICResp maxh2cdata 128 KiB', role: 'host', framing: FR.plain, fields: { type: PduType.IC_RESP, pfv: 0, cpda: 0, dgst: 0, maxh2cdata: 131072 }, bytes: B.icResp({ maxh2cdata: 131072 }) },
  { name: 'ICResp dgst 3, cpda 31, maxh2cdata 0xfffffffc', role: 'host', framing: FR.both, fields: { type: PduType.IC_RESP, pfv: 0, cpda: 31, dgst: 3, maxh2cdata: 0xfffffffc }, bytes: B.icResp({ dgst: 3, cpda: 31, maxh2cdata: 0xfffffffc }) },

  // TermReq: no digests even when negotiated; error data ≤ 128 bytes, longer is cut to 128 (plen ≤ 152).
  ...[0, 8, 128].flatMap((n) =>
    (['controller', 'host'] as const).map((role): Case => {
      const type = role === 'controller' ? PduType.H2C_TERM_REQ : PduType.C2H_TERM_REQ;
      const errorData = B.pattern(n, n);
      return { name: `${type === 2 ? 'H2C' : 'C2H'}TermReq with ${n} bytes of error data`, role, framing: FR.both, fields: { type, fes: 1, fei: 0x1234567, errorData }, bytes: B.termReq(type, { fes: 1, fei: 0x1234567, errorData }) };
    }),
  ),
  ...(['controller', 'host'] as const).map((role): Case => {
    const type = role === 'controller' ? PduType.H2C_TERM_REQ : PduType.C2H_TERM_REQ;
    const errorData = B.pattern(200, 9);
    return {
      name: `${type === 2 ? 'H2C' : 'C2H'}TermReq with 200 bytes of error data (cut to 128)`,
      role,
      framing: FR.plain,
      fields: { type, fes: 6, fei: 8, errorData },
      bytes: B.termReq(type, { fes: 6, fei: 8, errorData }),
      decoded: { type, fes: 6, fei: 8, errorData: errorData.subarray(0, 128) },
    };
  }),

  // CapsuleCmd: without data (pdo 0), with in-capsule data in one or several buffers.
  ...each(['plain', 'hd', 'both', 'bothPda3'], (fr, n): Case => ({
    name: `CapsuleCmd no data [${n}]`,
    role: 'controller',
    framing: fr,
    fields: { type: PduType.CAPSULE_CMD, sqe: SQE_READ, data: [] },
    bytes: B.capsuleCmd({ sqe: SQE_READ }, fr),
  })),
  {
    name: 'CapsuleCmd with only empty data buffers (same as no data)',
    role: 'controller',
    framing: FR.both,
    fields: { type: PduType.CAPSULE_CMD, sqe: SQE_READ, data: [Buffer.alloc(0), Buffer.alloc(0)] },
    bytes: B.capsuleCmd({ sqe: SQE_READ }, FR.both),
    decoded: { type: PduType.CAPSULE_CMD, sqe: SQE_READ, data: [] },
  },
  ...each(['plain', 'hd', 'dd', 'both', 'plainPda1', 'bothPda3', 'hdPda31'], (fr, n): Case => ({
    name: `CapsuleCmd 4 KiB in-capsule [${n}]`,
    role: 'controller',
    framing: fr,
    fields: { type: PduType.CAPSULE_CMD, sqe: SQE_WRITE_ICD(4096), data: [D.k4] },
    bytes: B.capsuleCmd({ sqe: SQE_WRITE_ICD(4096), data: D.k4 }, fr),
  })),
  ...each(['plain', 'both', 'bothPda3'], (fr, n): Case => ({
    name: `CapsuleCmd data in 4 buffers (one empty) [${n}]`,
    role: 'controller',
    framing: fr,
    fields: { type: PduType.CAPSULE_CMD, sqe: SQE_WRITE_ICD(263), data: D.parts },
    bytes: B.capsuleCmd({ sqe: SQE_WRITE_ICD(263), data: cat(D.parts) }, fr),
  })),
  {
    name: 'CapsuleCmd 1 data byte [both]',
    role: 'controller',
    framing: FR.both,
    fields: { type: PduType.CAPSULE_CMD, sqe: SQE_WRITE_ICD(1), data: [D.tiny] },
    bytes: B.capsuleCmd({ sqe: SQE_WRITE_ICD(1), data: D.tiny }, FR.both),
  },

  // CapsuleResp: never data, so DDGST never applies.
  ...each(['plain', 'hd', 'both', 'hdPda31'], (fr, n): Case => ({
    name: `CapsuleResp [${n}]`,
    role: 'host',
    framing: fr,
    fields: { type: PduType.CAPSULE_RESP, cqe: n === 'both' ? CQE_ERR : CQE_OK },
    bytes: B.capsuleResp({ cqe: n === 'both' ? CQE_ERR : CQE_OK }, fr),
  })),

  // H2CData
  ...each(['plain', 'hd', 'dd', 'both', 'plainPda1', 'bothPda3', 'hdPda31'], (fr, n): Case => ({
    name: `H2CData 37 bytes LAST [${n}]`,
    role: 'controller',
    framing: fr,
    fields: { type: PduType.H2C_DATA, cccid: 0x1011, ttag: 0xabcd, datao: 8192, last: true, data: [D.odd] },
    bytes: B.h2cData({ cccid: 0x1011, ttag: 0xabcd, datao: 8192, last: true, data: D.odd }, fr),
  })),
  ...each(['plain', 'both', 'bothPda3'], (fr, n): Case => ({
    name: `H2CData not last, data in 4 buffers [${n}]`,
    role: 'controller',
    framing: fr,
    fields: { type: PduType.H2C_DATA, cccid: 65535, ttag: 0, datao: 0xfffff000, last: false, data: D.parts },
    bytes: B.h2cData({ cccid: 65535, ttag: 0, datao: 0xfffff000, last: false, data: cat(D.parts) }, fr),
  })),

  // C2HData with each LAST/SUCCESS combination the spec allows (SUCCESS requires LAST).
  ...each(['plain', 'hd', 'dd', 'both', 'plainPda1', 'bothPda3', 'hdPda31'], (fr, n): Case => ({
    name: `C2HData 4 KiB LAST [${n}]`,
    role: 'host',
    framing: fr,
    fields: { type: PduType.C2H_DATA, cccid: 0x3007, datao: 0, last: true, success: false, data: [D.k4] },
    bytes: B.c2hData({ cccid: 0x3007, datao: 0, last: true, data: D.k4 }, fr),
  })),
  ...each(['plain', 'both'], (fr, n): Case => ({
    name: `C2HData LAST|SUCCESS [${n}]`,
    role: 'host',
    framing: fr,
    fields: { type: PduType.C2H_DATA, cccid: 7, datao: 4096, last: true, success: true, data: [D.tiny] },
    bytes: B.c2hData({ cccid: 7, datao: 4096, last: true, success: true, data: D.tiny }, fr),
  })),
  ...each(['plain', 'both', 'bothPda3'], (fr, n): Case => ({
    name: `C2HData not last, data in 4 buffers [${n}]`,
    role: 'host',
    framing: fr,
    fields: { type: PduType.C2H_DATA, cccid: 1, datao: 512, last: false, success: false, data: D.parts },
    bytes: B.c2hData({ cccid: 1, datao: 512, data: cat(D.parts) }, fr),
  })),

  // R2T: never data.
  ...each(['plain', 'hd', 'both', 'hdPda31'], (fr, n): Case => ({
    name: `R2T [${n}]`,
    role: 'host',
    framing: fr,
    fields: { type: PduType.R2T, cccid: 0x1011, ttag: 0xbeef, r2to: 4096, r2tl: 0x400000 },
    bytes: B.r2t({ cccid: 0x1011, ttag: 0xbeef, r2to: 4096, r2tl: 0x400000 }, fr),
  })),
];
