// DGST byte of ICReq/ICResp (TCP 1.0 §3.6.2.2/3): packing against literal bytes and against builder-made PDUs.
import { describe, expect, it } from 'vitest';
import { readChunks } from '../../test/fixtures/pdu-stream.js';
import * as B from '../testing/pdu-builder.js';
import { Layout } from '../testing/pdu-builder.js';
import { IcDigest, PduType, packDigests, unpackDigests } from './index.js';

const TABLE: Array<[boolean, boolean, number]> = [
  [false, false, 0x00],
  [true, false, 0x01],
  [false, true, 0x02],
  [true, true, 0x03],
];

describe('packDigests / unpackDigests', () => {
  it('bit 0 is HDGST_ENABLE, bit 1 DDGST_ENABLE', () => {
    expect(IcDigest).toEqual({ HDGST_ENABLE: 1, DDGST_ENABLE: 2 });
  });

  it.each(TABLE)('hdgst %s ddgst %s <-> 0x%i', (hdgst, ddgst, byte) => {
    expect(packDigests(hdgst, ddgst)).toBe(byte);
    expect(unpackDigests(byte)).toEqual({ hdgst, ddgst });
  });

  it.each(TABLE)('an ICReq built with DGST for (%s, %s) carries byte %i at offset 11 and decodes to the same choice', (hdgst, ddgst, byte) => {
    const wire = B.icReq({ dgst: packDigests(hdgst, ddgst) });
    expect(wire[Layout.IC.dgst]).toBe(byte);
    const pdu = readChunks([wire], { role: 'controller' }).pdus[0];
    if (pdu?.type !== PduType.IC_REQ) throw new Error('not ICReq');
    expect(unpackDigests(pdu.dgst)).toEqual({ hdgst, ddgst });
  });
});
