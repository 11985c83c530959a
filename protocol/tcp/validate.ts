// PDU header validation per receiving role, in spec field order (TCP 1.0 §3.6.1, §3.6.2; FreeBSD nvmf_tcp_validate_pdu_header).
import { ChOffset, DIGEST_SIZE, Fes, PDU_INFO, PduFlag, PduType, TERM_REQ_HLEN, TERM_REQ_MAX_DATA, dataOffset, isPduType } from './constants.js';
import { rd32 } from '../le.js';

/** Which side is receiving: a controller receives H2C PDUs, a host receives C2H PDUs. */
export type ReceiverRole = 'controller' | 'host';

/** A fatal finding: the receiver must send a TermReq with these values and close (§3.6.2.4). */
export interface FatalFinding {
  fes: number;
  fei: number;
  reason: string;
}

export interface HeaderContext {
  role: ReceiverRole;
  /** The IC exchange has completed on this connection. */
  icDone: boolean;
  hdgst: boolean;
  ddgst: boolean;
  /** Alignment this receiver advertised (CPDA as controller, HPDA as host), 0's based dwords. */
  pda: number;
  /** Largest data length accepted in one data PDU (MAXH2CDATA for a controller). 0 = no limit. */
  maxDataLength: number;
}

export type HeaderVerdict =
  | { ok: true; /** bytes of data the PDU carries */ dataLen: number; /** bytes of header incl. HDGST and padding */ headLen: number }
  | ({ ok: false } & FatalFinding);

const fatal = (fes: number, fei: number, reason: string): HeaderVerdict => ({ ok: false, fes, fei, reason });

/**
 * Check the 8-byte common header against the receiving role and negotiated framing. Fields past the CH (datal, IC
 * parameters, r2tl) are checked by validatePduSpecific once the whole header has arrived.
 */
export function validatePduHeader(ch: Buffer, ctx: HeaderContext): HeaderVerdict {
  const type = ch[ChOffset.type] as number;
  const flags = ch[ChOffset.flags] as number;
  const hlen = ch[ChOffset.hlen] as number;
  const pdo = ch[ChOffset.pdo] as number;
  const plen = rd32(ch, ChOffset.plen);

  // type: known, and one the receiving role may receive (a host never sends C2H PDUs and vice versa).
  if (!isPduType(type)) return fatal(Fes.INVALID_HEADER_FIELD, ChOffset.type, `unknown PDU type 0x${type.toString(16)}`);
  const info = PDU_INFO[type];
  const wantDir = ctx.role === 'controller' ? 'h2c' : 'c2h';
  if (info.dir !== wantDir) return fatal(Fes.INVALID_HEADER_FIELD, ChOffset.type, `${info.name} is not valid ${wantDir}`);
  const isIc = type === PduType.IC_REQ || type === PduType.IC_RESP;
  const isTerm = type === PduType.H2C_TERM_REQ || type === PduType.C2H_TERM_REQ;
  // §3.3: the IC exchange comes first and once; a TermReq may come at any time.
  if (!ctx.icDone && !isIc && !isTerm) return fatal(Fes.PDU_SEQUENCE_ERROR, 0, `${info.name} before IC exchange`);
  if (ctx.icDone && isIc) return fatal(Fes.PDU_SEQUENCE_ERROR, 0, `second ${info.name}`);

  // flags: HDGSTF exactly when header digests are on for this type; DDGSTF exactly when data digests are on and data is present.
  const hdgst = info.hdgst && ctx.hdgst;
  // Per-type defined bits: HDGSTF only where a header digest may follow, DDGSTF only where data may (IC and TermReq
  // PDUs have no defined flags at all, §3.6.2.2–5), LAST on data PDUs, SUCCESS on C2HData.
  const known =
    (info.hdgst ? PduFlag.HDGSTF : 0) |
    (info.data ? PduFlag.DDGSTF : 0) |
    (type === PduType.H2C_DATA || type === PduType.C2H_DATA ? PduFlag.DATA_LAST : 0) |
    (type === PduType.C2H_DATA ? PduFlag.DATA_SUCCESS : 0);
  if ((flags & ~known) !== 0) return fatal(Fes.INVALID_HEADER_FIELD, ChOffset.flags, `reserved flag bits 0x${(flags & ~known).toString(16)} in ${info.name}`);
  if (((flags & PduFlag.HDGSTF) !== 0) !== hdgst) return fatal(Fes.INVALID_HEADER_FIELD, ChOffset.flags, `HDGSTF ${hdgst ? 'clear' : 'set'} in ${info.name}`);
  if ((flags & PduFlag.DATA_SUCCESS) !== 0 && (flags & PduFlag.DATA_LAST) === 0) return fatal(Fes.INVALID_HEADER_FIELD, ChOffset.flags, 'DATA_SUCCESS without DATA_LAST');

  // hlen: fixed per type.
  if (hlen !== info.hlen) return fatal(Fes.INVALID_HEADER_FIELD, ChOffset.hlen, `hlen ${hlen} for ${info.name} (expected ${info.hlen})`);

  const hd = hdgst ? DIGEST_SIZE : 0;
  if (isTerm) {
    if (pdo !== 0) return fatal(Fes.INVALID_HEADER_FIELD, ChOffset.pdo, 'pdo in TermReq');
    if (plen < TERM_REQ_HLEN || plen > TERM_REQ_HLEN + TERM_REQ_MAX_DATA) return fatal(Fes.INVALID_HEADER_FIELD, ChOffset.plen, `TermReq plen ${plen}`);
    return { ok: true, dataLen: plen - TERM_REQ_HLEN, headLen: TERM_REQ_HLEN };
  }
  if (!info.data) {
    if (pdo !== 0) return fatal(Fes.INVALID_HEADER_FIELD, ChOffset.pdo, `pdo ${pdo} in ${info.name}`);
    if (plen !== hlen + hd) return fatal(Fes.INVALID_HEADER_FIELD, ChOffset.plen, `plen ${plen} for ${info.name} (expected ${hlen + hd})`);
    return { ok: true, dataLen: 0, headLen: hlen + hd };
  }

  // Data-capable PDUs: pdo is 0 with no data, else the aligned data offset; plen covers data and DDGST.
  if (plen === hlen + hd) {
    if (pdo !== 0 && pdo !== hlen + hd) return fatal(Fes.INVALID_HEADER_FIELD, ChOffset.pdo, `pdo ${pdo} without data`);
    if ((flags & PduFlag.DDGSTF) !== 0) return fatal(Fes.INVALID_HEADER_FIELD, ChOffset.flags, 'DDGSTF without data');
    if (type !== PduType.CAPSULE_CMD) return fatal(Fes.INVALID_HEADER_FIELD, ChOffset.plen, `${info.name} without data`);
    return { ok: true, dataLen: 0, headLen: hlen + hd };
  }
  const wantPdo = dataOffset(hlen, hdgst, ctx.pda);
  if (pdo !== wantPdo) return fatal(Fes.INVALID_HEADER_FIELD, ChOffset.pdo, `pdo ${pdo} (expected ${wantPdo})`);
  if (((flags & PduFlag.DDGSTF) !== 0) !== ctx.ddgst) return fatal(Fes.INVALID_HEADER_FIELD, ChOffset.flags, `DDGSTF ${ctx.ddgst ? 'clear' : 'set'} in ${info.name}`);
  const dd = ctx.ddgst ? DIGEST_SIZE : 0;
  if (plen < pdo + dd + 1) return fatal(Fes.INVALID_HEADER_FIELD, ChOffset.plen, `plen ${plen} too small for pdo ${pdo}`);
  const dataLen = plen - pdo - dd;
  if (ctx.maxDataLength > 0 && dataLen > ctx.maxDataLength && type !== PduType.CAPSULE_CMD) {
    return fatal(Fes.DATA_LIMIT_EXCEEDED, ChOffset.plen, `${info.name} carries ${dataLen} bytes, limit ${ctx.maxDataLength}`);
  }
  return { ok: true, dataLen, headLen: pdo };
}

/**
 * H2CData / C2HData PSH (TCP 1.0 §3.6.2.7, §3.6.2.8): datal must equal the data the PDU carries (nvmet: no padding
 * accepted). The reader compares DATAL itself for a CH it knows and comes here only on a mismatch.
 */
function validateDatal(head: Buffer, dataLen: number, at = 0): FatalFinding | undefined {
  return rd32(head, at + 16) === dataLen ? undefined : datalFinding(head, dataLen, at);
}

function datalFinding(head: Buffer, dataLen: number, at: number): FatalFinding {
  return { fes: Fes.INVALID_HEADER_FIELD, fei: 16, reason: `datal ${head.readUInt32LE(at + 16)} but PDU carries ${dataLen}` };
}

/** Checks on the PDU-specific header once it is complete, at `at` in `head` (field order as in §3.6.2). */
export function validatePduSpecific(head: Buffer, type: number, dataLen: number, at = 0): FatalFinding | undefined {
  switch (type) {
    case PduType.IC_REQ:
      if (head.readUInt16LE(at + 8) !== 0) return { fes: Fes.UNSUPPORTED_PARAMETER, fei: 8, reason: `ICReq pfv ${head.readUInt16LE(at + 8)}` };
      if ((head[at + 10] as number) > 31) return { fes: Fes.INVALID_HEADER_FIELD, fei: 10, reason: `ICReq hpda ${head[at + 10]}` };
      if (((head[at + 11] as number) & ~0x03) !== 0) return { fes: Fes.INVALID_HEADER_FIELD, fei: 11, reason: `ICReq digest bits 0x${(head[at + 11] as number).toString(16)}` };
      return undefined;
    case PduType.IC_RESP:
      if (head.readUInt16LE(at + 8) !== 0) return { fes: Fes.UNSUPPORTED_PARAMETER, fei: 8, reason: `ICResp pfv ${head.readUInt16LE(at + 8)}` };
      if ((head[at + 10] as number) > 31) return { fes: Fes.INVALID_HEADER_FIELD, fei: 10, reason: `ICResp cpda ${head[at + 10]}` };
      {
        const maxdata = head.readUInt32LE(at + 12);
        if (maxdata < 4096 || maxdata % 4 !== 0) return { fes: Fes.INVALID_HEADER_FIELD, fei: 12, reason: `ICResp maxh2cdata ${maxdata}` };
      }
      return undefined;
    case PduType.H2C_DATA:
    case PduType.C2H_DATA:
      return validateDatal(head, dataLen, at);
    case PduType.R2T:
      if (head.readUInt32LE(at + 16) === 0) return { fes: Fes.INVALID_HEADER_FIELD, fei: 16, reason: 'R2T r2tl 0' };
      return undefined;
    default:
      return undefined;
  }
}

