// TermReq built from a reader's fatal finding (TCP 1.0 §3.6.2.4/5): direction by sender, FES/FEI and header copied.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { primer, readChunks } from '../../test/fixtures/pdu-stream.js';
import { encodePdu, Fes, fesName, PduType, termReqFor } from './index.js';
import * as B from '../testing/pdu-builder.js';

describe('termReqFor', () => {
  it('a controller answers a bad H2C PDU with a C2HTermReq that a host reader decodes', () => {
    const bad = B.capsuleCmd({ sqe: B.sqe({ opcode: 2, cid: 1 }) }, {}, { hlen: 80 });
    const r = readChunks([primer('controller'), bad], { role: 'controller' });
    const f = r.fatals[0];
    if (f === undefined) throw new Error('no fatal finding');
    const term = termReqFor('controller', f);
    expect(term).toMatchObject({ type: PduType.C2H_TERM_REQ, fes: Fes.INVALID_HEADER_FIELD, fei: 2 });
    const wire = Buffer.concat(encodePdu(term, { hdgst: true, ddgst: true, pda: 0 }));
    expect(wire.toString('hex')).toBe(B.termReq(PduType.C2H_TERM_REQ, { fes: 1, fei: 2, errorData: bad.subarray(0, 8) }).toString('hex'));
    const host = readChunks([wire], { role: 'host', primed: true, framing: { hdgst: true, ddgst: true, pda: 0 } });
    expect(host.fatals).toEqual([]);
    expect(host.pdus[0]).toEqual({ type: PduType.C2H_TERM_REQ, fes: 1, fei: 2, errorData: bad.subarray(0, 8) });
  });

  it('a host answers with an H2CTermReq; error data is capped at 128 bytes (plen 152)', () => {
    const term = termReqFor('host', { fes: Fes.HEADER_DIGEST_ERROR, fei: 0, header: B.pattern(200) });
    expect(term.type).toBe(PduType.H2C_TERM_REQ);
    const wire = Buffer.concat(encodePdu(term));
    expect(wire.readUInt32LE(4)).toBe(152);
    expect(wire.toString('hex')).toBe(B.termReq(PduType.H2C_TERM_REQ, { fes: 3, fei: 0, errorData: B.pattern(128) }).toString('hex'));
  });
});

describe('fesName', () => {
  it.each([
    [1, 'invalid PDU header field'],
    [2, 'PDU sequence error'],
    [3, 'header digest error'],
    [4, 'data transfer out of range'],
    [5, 'data transfer limit exceeded'],
    [6, 'unsupported parameter'],
    [0x42, 'FES 0x42'],
  ])('%i → %s', (fes, name) => {
    expect(fesName(fes)).toBe(name);
  });
});
