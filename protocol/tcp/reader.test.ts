// PduReader behaviour beyond single-PDU decoding: framing switches mid-chunk, limits set later, empty chunks, and
// the receive-state table.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { readChunks } from '../../test/fixtures/pdu-stream.js';
import { itChecksEveryEdge } from '../../test/fixtures/state-table.js';
import { Fes, PDU_READER_TRANSITIONS, PduReader, PduType, RX_STATE_NAMES, RxState, type Pdu, type PduReaderOptions, type PduReaderState } from './index.js';
import * as B from '../testing/pdu-builder.js';

const SQE = B.sqe({ opcode: 0x01, cid: 9, nsid: 1, sglType: 0x01, sglLen: 16 });

describe('PduReader', () => {
  it('applies setFraming from onPdu(ICReq) to the rest of the same chunk', () => {
    const both = { hdgst: true, ddgst: true, pda: 0 };
    const chunk = Buffer.concat([B.icReq({ dgst: 3 }), B.capsuleCmd({ sqe: SQE, data: B.pattern(16) }, both), B.h2cData({ cccid: 9, ttag: 1, datao: 0, last: true, data: B.pattern(5) }, both)]);
    const r = readChunks([chunk], { role: 'controller' });
    expect(r.fatals).toEqual([]);
    expect(r.pdus.map((p) => p.type)).toEqual([PduType.IC_REQ, PduType.CAPSULE_CMD, PduType.H2C_DATA]);
  });

  it('without setFraming, digests the peer sends are a finding (HDGSTF set while off)', () => {
    const pdus: Pdu[] = [];
    const fatals: number[][] = [];
    const reader = new PduReader({ role: 'controller', onPdu: (p) => pdus.push(p), onFatal: (f) => fatals.push([f.fes, f.fei]) });
    reader.push(Buffer.concat([B.icReq({ dgst: 1 }), B.capsuleCmd({ sqe: SQE }, { hdgst: true })]));
    expect(pdus).toHaveLength(1);
    expect(fatals).toEqual([[Fes.INVALID_HEADER_FIELD, 1]]);
  });

  it('honours setMaxDataLength after construction, without writing into the caller’s options object', () => {
    const opts: PduReaderOptions = { role: 'controller', onPdu: () => undefined, onFatal: () => undefined, maxDataLength: 0 };
    const fatals: number[] = [];
    const reader = new PduReader({ ...opts, onFatal: (f) => fatals.push(f.fes) });
    const shared = new PduReader(opts);
    reader.push(B.icReq({}));
    reader.setMaxDataLength(4096);
    shared.setMaxDataLength(1024);
    expect(opts.maxDataLength).toBe(0);
    reader.push(B.h2cData({ cccid: 1, ttag: 1, datao: 0, data: B.pattern(4096) }));
    expect(fatals).toEqual([]);
    reader.push(B.h2cData({ cccid: 1, ttag: 1, datao: 0, data: B.pattern(4097) }));
    expect(fatals).toEqual([Fes.DATA_LIMIT_EXCEEDED]);
  });

  it('treats empty chunks as no-ops anywhere in the stream', () => {
    const bytes = Buffer.concat([B.icResp({}), B.c2hData({ cccid: 3, datao: 0, last: true, data: B.pattern(40) }), B.capsuleResp({ cqe: B.cqe({ cid: 3 }) })]);
    const chunks: Buffer[] = [Buffer.alloc(0)];
    for (let i = 0; i < bytes.length; i += 7) chunks.push(bytes.subarray(i, i + 7), Buffer.alloc(0));
    const r = readChunks(chunks, { role: 'host' });
    expect(r.fatals).toEqual([]);
    expect(r.pdus.map((p) => p.type)).toEqual([PduType.IC_RESP, PduType.C2H_DATA, PduType.CAPSULE_RESP]);
    expect(r.reader.bytesIn).toBe(bytes.length);
  });

  it('delivers data spread over many chunks as one buffer of the PDU object (the object sink gathers it)', () => {
    const data = B.pattern(300, 1, 3);
    const bytes = Buffer.concat([B.icResp({}), B.c2hData({ cccid: 3, datao: 0, last: true, data })]);
    const chunks = [bytes.subarray(0, 150), bytes.subarray(150, 200), bytes.subarray(200, 260), bytes.subarray(260)];
    const r = readChunks(chunks, { role: 'host' });
    const c2h = r.pdus[1];
    if (c2h?.type !== PduType.C2H_DATA) throw new Error('no C2HData');
    expect(c2h.data).toHaveLength(1);
    expect(c2h.data[0]?.equals(data)).toBe(true);
  });
});

describe('PduReader receive-state table', () => {
  // setState takes the state's small-integer id (RX_STATE_NAMES order); the walker speaks names.
  const fresh = (): { readonly state: PduReaderState; setState(next: PduReaderState): boolean } => {
    const r = new PduReader({ role: 'controller', onPdu: () => undefined, onFatal: () => undefined });
    return {
      get state(): PduReaderState {
        return r.state;
      },
      setState: (next) => r.setState(RX_STATE_NAMES.indexOf(next) as RxState),
    };
  };

  it('has exactly the documented edges', () => {
    expect(PDU_READER_TRANSITIONS).toEqual({
      ch: ['ch', 'head', 'data', 'failed'],
      head: ['ch', 'data', 'failed'],
      data: ['ch', 'ddgst', 'failed'],
      ddgst: ['ch', 'failed'],
      failed: [],
    });
  });

  itChecksEveryEdge<PduReaderState>(PDU_READER_TRANSITIONS, 'ch', fresh);

  it('RX_STATE_NAMES lists every state of the table once, in RxState order', () => {
    expect([...RX_STATE_NAMES].sort()).toEqual(Object.keys(PDU_READER_TRANSITIONS).sort());
    expect(RX_STATE_NAMES.map((n) => n.toUpperCase())).toEqual(Object.keys(RxState));
    expect(RX_STATE_NAMES.map((_, i) => i)).toEqual(Object.values(RxState));
  });

  it('received bytes walk the table: head across chunks, data, DDGST, back to ch; a finding ends in failed', () => {
    const states: PduReaderState[] = [];
    const reader = new PduReader({ role: 'controller', onPdu: () => undefined, onFatal: () => undefined });
    const dd = { hdgst: false, ddgst: true, pda: 0 };
    reader.push(B.icReq({ dgst: 2 }));
    reader.setFraming(false, true, 0);
    const pdu = B.h2cData({ cccid: 9, ttag: 1, datao: 0, last: true, data: B.pattern(16) }, dd);
    // CH, then half the header, then the rest of the header and the data, then the DDGST.
    for (const part of [pdu.subarray(0, 8), pdu.subarray(8, 16), pdu.subarray(16, pdu.length - 4), pdu.subarray(pdu.length - 4)]) {
      reader.push(part);
      states.push(reader.state);
    }
    expect(states).toEqual(['head', 'head', 'ddgst', 'ch']);
    reader.push(Buffer.from([0xff, 0, 0, 0, 0, 0, 0, 0]));
    expect(reader.state).toBe('failed');
  });
});
