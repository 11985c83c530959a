// Building the TermReq a receiver sends for a fatal finding (TCP 1.0 §3.6.2.4/5).
import { PduType } from './constants.js';
import type { TermReqPdu } from './pdu.js';
import type { ReaderFatal } from './reader.js';

/** The TermReq the receiving side sends back: C2HTermReq from a controller, H2CTermReq from a host. */
export function termReqFor(sender: 'controller' | 'host', f: Pick<ReaderFatal, 'fes' | 'fei' | 'header'>): TermReqPdu {
  return {
    type: sender === 'controller' ? PduType.C2H_TERM_REQ : PduType.H2C_TERM_REQ,
    fes: f.fes,
    fei: f.fei,
    errorData: f.header,
  };
}

export function fesName(fes: number): string {
  switch (fes) {
    case 0x01: return 'invalid PDU header field';
    case 0x02: return 'PDU sequence error';
    case 0x03: return 'header digest error';
    case 0x04: return 'data transfer out of range';
    case 0x05: return 'data transfer limit exceeded';
    case 0x06: return 'unsupported parameter';
    default: return `FES 0x${fes.toString(16)}`;
  }
}
