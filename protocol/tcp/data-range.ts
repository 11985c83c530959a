// Data-transfer range checks both sides run on data PDUs (TCP 1.0 §3.6.2.8 H2CData, §3.6.2.9 C2HData, §3.6.2.10 R2T):
// pure functions returning the fatal finding (FES + FEI) the receiver reports in its TermReq, or undefined.
import { Fes } from './constants.js';
import type { FatalFinding } from './validate.js';

/** Byte offsets of the data PDU header fields a finding points at (TCP 1.0 §3.6.2.8–10, Figures 29–31). */
export const DataPduOffset = { flags: 1, cccid: 8, ttag: 10, datao: 12, datal: 16, r2to: 12, r2tl: 16 } as const;
/**
 * The same fields in the PDU-specific header view a reader's sink gets (PduSink.header): DataPduOffset less the 8-byte
 * CH (§3.6.1, Figure 17).
 */
export const DataPshOffset = { cccid: 0, ttag: 2, datao: 4, datal: 8, r2to: 4, r2tl: 8 } as const;

/**
 * H2CData received by a controller (TCP 1.0 §3.6.2.8): its data must continue the R2T's range in order, at
 * `expected` (R2TO plus what already arrived), and end within R2TO + R2TL (`end`). Out of order or past the end is
 * "Data Transfer Out of Range", pointing at DATAO (as Linux nvmet_tcp_handle_h2c_data_pdu does).
 */
export function checkH2CData(datao: number, datal: number, expected: number, end: number): FatalFinding | undefined {
  if (datao === expected && datao + datal <= end) return undefined;
  return { fes: Fes.DATA_OUT_OF_RANGE, fei: DataPduOffset.datao, reason: `H2CData datao ${datao} len ${datal}: expected offset ${expected} of ${end}` };
}

/**
 * C2HData received by a host (TCP 1.0 §3.6.2.9) for a command whose buffer is `length` bytes, `received` of them in
 * so far: DATAO must continue in order (Linux nvme_tcp_handle_c2h_data) and the data must fit the buffer. SUCCESS may
 * end the transfer short of the buffer (SPDK's nvmf_tgt answers an Authentication Receive with the message only);
 * Linux and SPDK's host require only SUCCESS ⇒ LAST, which the reader checks.
 */
export function checkC2HData(datao: number, datal: number, received: number, length: number): FatalFinding | undefined {
  if (datao !== received) return { fes: Fes.INVALID_HEADER_FIELD, fei: DataPduOffset.datao, reason: `C2HData datao ${datao}, expected ${received}` };
  if (datao + datal > length) return { fes: Fes.DATA_OUT_OF_RANGE, fei: DataPduOffset.datal, reason: `C2HData ${datao}+${datal} beyond ${length}` };
  return undefined;
}

/**
 * R2T received by a host (TCP 1.0 §3.6.2.10) for a command with `length` bytes to send, `sent` of them sent so far:
 * R2TO must continue in order (one R2T outstanding per command, MAXR2T 0 in ICReq) and R2TO + R2TL stay within the
 * command's data (Linux nvme_tcp_handle_r2t).
 */
export function checkR2T(r2to: number, r2tl: number, sent: number, length: number): FatalFinding | undefined {
  if (r2to !== sent) return { fes: Fes.INVALID_HEADER_FIELD, fei: DataPduOffset.r2to, reason: `R2T r2to ${r2to}, expected ${sent}` };
  if (r2to + r2tl > length) return { fes: Fes.DATA_OUT_OF_RANGE, fei: DataPduOffset.r2tl, reason: `R2T ${r2to}+${r2tl} beyond ${length}` };
  return undefined;
}
