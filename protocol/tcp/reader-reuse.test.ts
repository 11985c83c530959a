// PduReader with `reusesChunks`: the caller overwrites each chunk's memory after push() (a socket reading into one
// static buffer). PDUs split across chunks must still arrive intact, with and without data digests; and the CapsuleCmd
// and CapsuleResp fast paths (the former through onPdu or onCapsuleCmd, with SQE views kept per offset) must agree
// with the general path.
import { Buffer } from 'node:buffer';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PduType } from './constants.js';
import { encodePdu, type Pdu } from './pdu.js';
import { PduReader } from './reader.js';

interface Seen {
  type: number;
  bytes: Buffer;
}

/** Header + data of a PDU as seen in onPdu, copied out during the call. */
function snapshot(p: Pdu): Seen {
  switch (p.type) {
    case PduType.C2H_DATA:
      return { type: p.type, bytes: Buffer.concat([Buffer.from([p.cccid & 0xff, p.datao & 0xff, p.last ? 1 : 0]), ...p.data]) };
    case PduType.CAPSULE_RESP:
      return { type: p.type, bytes: Buffer.from(p.cqe) };
    case PduType.CAPSULE_CMD:
      return { type: p.type, bytes: Buffer.concat([p.sqe, ...p.data]) };
    default:
      return { type: p.type, bytes: Buffer.alloc(0) };
  }
}

/**
 * `cmdCallback`: CapsuleCmds without data come through onCapsuleCmd (the SQE alone). `buffers`: how many static
 * buffers the chunks alternate between (2: the memory behind the reader's kept views changes between pushes).
 */
function run(role: 'host' | 'controller', stream: Buffer, cuts: number[], reuse: boolean, ddgst: boolean, cmdCallback = false, buffers = 1, whole = false): Seen[] {
  const seen: Seen[] = [];
  const reader = new PduReader({
    role,
    reusesChunks: reuse,
    onPdu: (p) => {
      if (p.type === PduType.IC_RESP || p.type === PduType.IC_REQ) reader.setFraming(false, ddgst, 0);
      seen.push(snapshot(p));
    },
    ...(cmdCallback ? { onCapsuleCmd: (sqe: Buffer) => seen.push({ type: PduType.CAPSULE_CMD, bytes: Buffer.from(sqe) }) } : {}),
    onFatal: (f) => {
      throw new Error(f.reason);
    },
  });
  const statics = Array.from({ length: buffers }, () => Buffer.allocUnsafeSlow(stream.length));
  let off = 0;
  let k = 0;
  for (const c of [...cuts, stream.length]) {
    const end = Math.min(stream.length, Math.max(off, c));
    if (end === off) continue;
    // Same memory every time (or one of a few), then scribbled over, as with a socket's onread buffer.
    const staticBuf = statics[k++ % buffers] as Buffer;
    stream.copy(staticBuf, 0, off, end);
    // `whole`: the buffer object itself with the count read, as TcpConnection pushes a socket's onread buffer (the
    // bytes after the count are stale: 0xa5 from the last scribble).
    if (whole) reader.push(staticBuf, end - off);
    else reader.push(staticBuf.subarray(0, end - off));
    staticBuf.fill(0xa5);
    off = end;
  }
  return seen;
}

const hostPdus = fc.array(
  fc.oneof(
    fc.record({ cccid: fc.integer({ min: 0, max: 0xffff }), len: fc.integer({ min: 1, max: 9000 }), seed: fc.integer({ min: 0, max: 255 }) }).map(
      (r): Pdu => ({ type: PduType.C2H_DATA, cccid: r.cccid, datao: 0, last: true, success: false, data: [Buffer.alloc(r.len, r.seed)] }),
    ),
    fc.uint8Array({ minLength: 16, maxLength: 16 }).map((c): Pdu => ({ type: PduType.CAPSULE_RESP, cqe: Buffer.from(c) })),
  ),
  { minLength: 1, maxLength: 20 },
);

describe('PduReader reusesChunks', () => {
  it('host role: C2HData and CapsuleResp split anywhere arrive intact', () => {
    fc.assert(
      fc.property(hostPdus, fc.array(fc.nat({ max: 200_000 }), { maxLength: 40 }), fc.boolean(), (pdus, rawCuts, ddgst) => {
        const framing = { hdgst: false, ddgst, pda: 0 };
        const ic = Buffer.concat(encodePdu({ type: PduType.IC_RESP, pfv: 0, cpda: 0, dgst: ddgst ? 2 : 0, maxh2cdata: 131072 }));
        const stream = Buffer.concat([ic, ...pdus.flatMap((p) => encodePdu(p, framing))]);
        const cuts = rawCuts.map((c) => c % (stream.length + 1)).sort((a, b) => a - b);
        const want = run('host', stream, [], false, ddgst);
        for (const whole of [false, true]) {
          const got = run('host', stream, cuts, true, ddgst, false, 1, whole);
          expect(got.length).toBe(pdus.length + 1);
          expect(got.map((s) => s.type)).toEqual(want.map((s) => s.type));
          for (let i = 0; i < got.length; i++) expect((got[i] as Seen).bytes.equals((want[i] as Seen).bytes)).toBe(true);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('controller role: CapsuleCmds with and without in-capsule data, split anywhere', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ sqe: fc.uint8Array({ minLength: 64, maxLength: 64 }), len: fc.constantFrom(0, 0, 0, 1, 100, 4096) }), { minLength: 1, maxLength: 30 }),
        fc.array(fc.nat({ max: 200_000 }), { maxLength: 30 }),
        (cmds, rawCuts) => {
          const ic = Buffer.concat(encodePdu({ type: PduType.IC_REQ, pfv: 0, hpda: 0, dgst: 0, maxr2t: 0 }));
          const pdus: Pdu[] = cmds.map((c) => ({ type: PduType.CAPSULE_CMD, sqe: Buffer.from(c.sqe), data: c.len > 0 ? [Buffer.alloc(c.len, c.sqe[0])] : [] }));
          const stream = Buffer.concat([ic, ...pdus.flatMap((p) => encodePdu(p))]);
          const cuts = rawCuts.map((c) => c % (stream.length + 1)).sort((a, b) => a - b);
          // Through onPdu and through onCapsuleCmd; from one reused buffer and from two alternating ones; pushed as
          // views of the bytes read or as the buffer objects themselves with a count.
          for (const [cmdCallback, buffers, whole] of [
            [false, 1, false],
            [true, 1, false],
            [true, 2, false],
            [true, 1, true],
            [true, 2, true],
          ] as const) {
            const got = run('controller', stream, cuts, true, false, cmdCallback, buffers, whole);
            expect(got.length).toBe(pdus.length + 1);
            for (let i = 0; i < pdus.length; i++) expect((got[i + 1] as Seen).bytes.equals(snapshot(pdus[i] as Pdu).bytes)).toBe(true);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
