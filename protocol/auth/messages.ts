/**
 * In-band authentication message payloads (NVMe Base 2.0 §8.13.6, Figures 176-186) and the
 * Authentication Send/Receive SQE fields (NVMe-oF 1.1 §6.3 as amended by TP 8006). Layouts follow
 * Linux include/linux/nvme.h (struct nvmf_auth_dhchap_*_data); all integers little-endian.
 */
import { DNR, PSDT_SGL, Status } from '../nvme/index.js';
import type { AuthFctype } from './constants.js';
import {
  AUTH_SECP,
  AUTH_SPSP0,
  AUTH_SPSP1,
  AuthCmdOffset,
  AuthMessageId,
  AuthType,
  FAILURE_REASON_AUTH_FAILED,
  FailureExplanation,
  MAX_DH_IDS,
  MAX_HASH_IDS,
  PROTOCOL_DESCRIPTOR_SIZE,
} from './constants.js';

/** Fixed header sizes (bytes before the variable part). */
export const AuthMessageSize = {
  NEGOTIATE_HEADER: 8,
  CHALLENGE_HEADER: 16,
  REPLY_HEADER: 16,
  SUCCESS1_HEADER: 16,
  SUCCESS2: 16,
  FAILURE: 8,
} as const;

/** One AUTH_Negotiate protocol descriptor (64 bytes: authid, rsvd, halen, dhlen, idlist[60]). */
export interface AuthProtocolDescriptor {
  /** Authentication protocol identifier (01h = DH-HMAC-CHAP). */
  authId: number;
  /** HashIDList (idlist[0..halen)). */
  hashIds: number[];
  /** DHGIDList (idlist[30..30+dhlen)). */
  dhGroupIds: number[];
}

/** AUTH_Negotiate (host → controller, auth_type 00h, auth_id 00h). */
export interface AuthNegotiate {
  type: 'negotiate';
  /** Transaction identifier. */
  tId: number;
  /** Secure channel concatenation (sc_c). */
  scC: number;
  protocols: AuthProtocolDescriptor[];
}

/** DH-HMAC-CHAP_Challenge (controller → host). HL is `challenge.length`, DHVLEN `dhValue.length`. */
export interface DhchapChallenge {
  type: 'challenge';
  tId: number;
  hashId: number;
  dhGroupId: number;
  /** Sequence number S1. */
  seqnum: number;
  /** Challenge value C1 (HL bytes). */
  challenge: Buffer;
  /** Controller DH public value g^x mod p (empty for the NULL group). */
  dhValue: Buffer;
}

/**
 * DH-HMAC-CHAP_Reply (host → controller). HL is `response.length`; the C2 slot is always HL bytes
 * (zeros when `cvalid` is false), as Linux sizes it (sizeof + 2*hl + dhvlen).
 */
export interface DhchapReply {
  type: 'reply';
  tId: number;
  /** CVALID: C2 carries a challenge for bidirectional authentication. */
  cvalid: boolean;
  /** Sequence number S2 (0 = no bidirectional authentication). */
  seqnum: number;
  /** Response R1. */
  response: Buffer;
  /** Challenge C2 (HL bytes). */
  challenge: Buffer;
  /** Host DH public value g^y mod p. */
  dhValue: Buffer;
}

/** DH-HMAC-CHAP_Success1 (controller → host); `response` is R2 when RVALID. */
export interface DhchapSuccess1 {
  type: 'success1';
  tId: number;
  /** Hash length (HL), sent even without R2 (nvmet does). */
  hl: number;
  response: Buffer | null;
}

/** DH-HMAC-CHAP_Success2 (host → controller, only after a verified R2). */
export interface DhchapSuccess2 {
  type: 'success2';
  tId: number;
}

/** AUTH_Failure1 (controller → host, F1h) or AUTH_Failure2 (host → controller, F0h). */
export interface AuthFailure {
  type: 'failure1' | 'failure2';
  tId: number;
  /** Reason code (rescode), 01h. */
  reasonCode: number;
  /** Reason code explanation (rescode_exp), FailureExplanation. */
  explanation: number;
}

export type AuthMessage = AuthNegotiate | DhchapChallenge | DhchapReply | DhchapSuccess1 | DhchapSuccess2 | AuthFailure;

export type AuthDecodeResult =
  | { ok: true; message: AuthMessage }
  | { ok: false; explanation: FailureExplanation; reason: string };

function bad(explanation: FailureExplanation, reason: string): AuthDecodeResult {
  return { ok: false, explanation, reason };
}

function header(buf: Buffer, type: number, id: number, tId: number): void {
  buf[0] = type;
  buf[1] = id;
  buf.writeUInt16LE(tId & 0xffff, 4);
}

/** Encode any authentication message to its wire payload (exact length, reserved bytes zero). */
export function encodeAuthMessage(m: AuthMessage): Buffer {
  switch (m.type) {
    case 'negotiate': {
      const buf = Buffer.alloc(AuthMessageSize.NEGOTIATE_HEADER + PROTOCOL_DESCRIPTOR_SIZE * m.protocols.length);
      header(buf, AuthType.COMMON, AuthMessageId.NEGOTIATE, m.tId);
      buf[6] = m.scC;
      buf[7] = m.protocols.length;
      m.protocols.forEach((p, i) => {
        if (p.hashIds.length > MAX_HASH_IDS || p.dhGroupIds.length > MAX_DH_IDS) {
          throw new RangeError('AUTH_Negotiate descriptor lists at most 30 hash and 30 DH group ids');
        }
        const o = AuthMessageSize.NEGOTIATE_HEADER + i * PROTOCOL_DESCRIPTOR_SIZE;
        buf[o] = p.authId;
        buf[o + 2] = p.hashIds.length;
        buf[o + 3] = p.dhGroupIds.length;
        p.hashIds.forEach((h, j) => (buf[o + 4 + j] = h));
        p.dhGroupIds.forEach((g, j) => (buf[o + 4 + MAX_HASH_IDS + j] = g));
      });
      return buf;
    }
    case 'challenge': {
      const hl = m.challenge.length;
      const buf = Buffer.alloc(AuthMessageSize.CHALLENGE_HEADER + hl + m.dhValue.length);
      header(buf, AuthType.DHCHAP, AuthMessageId.CHALLENGE, m.tId);
      buf[6] = hl;
      buf[8] = m.hashId;
      buf[9] = m.dhGroupId;
      buf.writeUInt16LE(m.dhValue.length, 10);
      buf.writeUInt32LE(m.seqnum >>> 0, 12);
      m.challenge.copy(buf, 16);
      m.dhValue.copy(buf, 16 + hl);
      return buf;
    }
    case 'reply': {
      const hl = m.response.length;
      if (m.challenge.length !== hl) throw new RangeError('DH-HMAC-CHAP_Reply C2 must be HL bytes');
      const buf = Buffer.alloc(AuthMessageSize.REPLY_HEADER + 2 * hl + m.dhValue.length);
      header(buf, AuthType.DHCHAP, AuthMessageId.REPLY, m.tId);
      buf[6] = hl;
      buf[8] = m.cvalid ? 1 : 0;
      buf.writeUInt16LE(m.dhValue.length, 10);
      buf.writeUInt32LE(m.seqnum >>> 0, 12);
      m.response.copy(buf, 16);
      m.challenge.copy(buf, 16 + hl);
      m.dhValue.copy(buf, 16 + 2 * hl);
      return buf;
    }
    case 'success1': {
      const buf = Buffer.alloc(AuthMessageSize.SUCCESS1_HEADER + (m.response ? m.response.length : 0));
      header(buf, AuthType.DHCHAP, AuthMessageId.SUCCESS1, m.tId);
      buf[6] = m.hl;
      if (m.response) {
        buf[8] = 1;
        m.response.copy(buf, 16);
      }
      return buf;
    }
    case 'success2': {
      const buf = Buffer.alloc(AuthMessageSize.SUCCESS2);
      header(buf, AuthType.DHCHAP, AuthMessageId.SUCCESS2, m.tId);
      return buf;
    }
    case 'failure1':
    case 'failure2': {
      const buf = Buffer.alloc(AuthMessageSize.FAILURE);
      header(buf, AuthType.COMMON, m.type === 'failure1' ? AuthMessageId.FAILURE1 : AuthMessageId.FAILURE2, m.tId);
      buf[6] = m.reasonCode;
      buf[7] = m.explanation;
      return buf;
    }
  }
}

/** A failure message with the only defined reason code. */
export function failureMessage(type: 'failure1' | 'failure2', tId: number, explanation: number): AuthFailure {
  return { type, tId, reasonCode: FAILURE_REASON_AUTH_FAILED, explanation };
}

/**
 * Decode a payload (an Authentication Send's data, or the first bytes of an Authentication
 * Receive buffer; trailing bytes beyond the message are ignored, as Linux reads a 4 KiB buffer).
 * Never throws: malformed input yields the Failure explanation the receiver should report.
 */
export function decodeAuthMessage(buf: Buffer): AuthDecodeResult {
  if (buf.length < AuthMessageSize.FAILURE) return bad(FailureExplanation.INCORRECT_PAYLOAD, `message too short (${buf.length} bytes)`);
  const authType = buf[0] as number;
  if (authType === AuthType.COMMON) return decodeCommonMessage(buf);
  if (authType !== AuthType.DHCHAP) return bad(FailureExplanation.INCORRECT_MESSAGE, `unknown auth_type 0x${authType.toString(16)}`);
  return decodeDhchapMessage(buf);
}

/** auth_type 00h (NVMe Base 2.0 §8.13.6): AUTH_Negotiate and the two failure messages. */
function decodeCommonMessage(buf: Buffer): AuthDecodeResult {
  const authId = buf[1] as number;
  const tId = buf.readUInt16LE(4);
  if (authId === AuthMessageId.FAILURE1 || authId === AuthMessageId.FAILURE2) {
    return { ok: true, message: { type: authId === AuthMessageId.FAILURE1 ? 'failure1' : 'failure2', tId, reasonCode: buf[6] as number, explanation: buf[7] as number } };
  }
  if (authId !== AuthMessageId.NEGOTIATE) return bad(FailureExplanation.INCORRECT_MESSAGE, `unknown common message 0x${authId.toString(16)}`);
  const napd = buf[7] as number;
  const need = AuthMessageSize.NEGOTIATE_HEADER + PROTOCOL_DESCRIPTOR_SIZE * napd;
  if (napd === 0 || buf.length < need) return bad(FailureExplanation.INCORRECT_PAYLOAD, `AUTH_Negotiate with napd ${napd} in ${buf.length} bytes`);
  const protocols: AuthProtocolDescriptor[] = [];
  for (let i = 0; i < napd; i++) {
    const o = AuthMessageSize.NEGOTIATE_HEADER + i * PROTOCOL_DESCRIPTOR_SIZE;
    const halen = buf[o + 2] as number;
    const dhlen = buf[o + 3] as number;
    if (halen > MAX_HASH_IDS || dhlen > MAX_DH_IDS) {
      return bad(FailureExplanation.INCORRECT_PAYLOAD, `descriptor lists ${halen} hashes / ${dhlen} DH groups (max 30)`);
    }
    protocols.push({
      authId: buf[o] as number,
      hashIds: [...buf.subarray(o + 4, o + 4 + halen)],
      dhGroupIds: [...buf.subarray(o + 4 + MAX_HASH_IDS, o + 4 + MAX_HASH_IDS + dhlen)],
    });
  }
  return { ok: true, message: { type: 'negotiate', tId, scC: buf[6] as number, protocols } };
}

/** auth_type 01h (NVMe Base 2.0 §8.13.6): DH-HMAC-CHAP Challenge, Reply, Success1, Success2; HL at byte 6. */
function decodeDhchapMessage(buf: Buffer): AuthDecodeResult {
  const authId = buf[1] as number;
  const tId = buf.readUInt16LE(4);
  if (buf.length < 16) return bad(FailureExplanation.INCORRECT_PAYLOAD, `message too short (${buf.length} bytes)`);
  const hl = buf[6] as number;
  const copy = (from: number, len: number): Buffer => Buffer.from(buf.subarray(from, from + len));
  switch (authId) {
    case AuthMessageId.CHALLENGE: {
      const dhvlen = buf.readUInt16LE(10);
      if (buf.length < 16 + hl + dhvlen) return bad(FailureExplanation.INCORRECT_PAYLOAD, 'challenge shorter than HL + DHVLEN');
      return { ok: true, message: { type: 'challenge', tId, hashId: buf[8] as number, dhGroupId: buf[9] as number, seqnum: buf.readUInt32LE(12), challenge: copy(16, hl), dhValue: copy(16 + hl, dhvlen) } };
    }
    case AuthMessageId.REPLY: {
      const dhvlen = buf.readUInt16LE(10);
      if (buf.length < 16 + 2 * hl + dhvlen) return bad(FailureExplanation.INCORRECT_PAYLOAD, 'reply shorter than 2*HL + DHVLEN');
      const cvalid = ((buf[8] as number) & 1) !== 0;
      return { ok: true, message: { type: 'reply', tId, cvalid, seqnum: buf.readUInt32LE(12), response: copy(16, hl), challenge: copy(16 + hl, hl), dhValue: copy(16 + 2 * hl, dhvlen) } };
    }
    case AuthMessageId.SUCCESS1: {
      const rvalid = ((buf[8] as number) & 1) !== 0;
      if (rvalid && buf.length < 16 + hl) return bad(FailureExplanation.INCORRECT_PAYLOAD, 'success1 shorter than HL');
      return { ok: true, message: { type: 'success1', tId, hl, response: rvalid ? copy(16, hl) : null } };
    }
    case AuthMessageId.SUCCESS2:
      return { ok: true, message: { type: 'success2', tId } };
    default:
      return bad(FailureExplanation.INCORRECT_MESSAGE, `unknown DH-HMAC-CHAP message 0x${authId.toString(16)}`);
  }
}

// ---- Authentication Send / Receive SQE fields ----

/** The auth-specific SQE fields (CDW10 NSSF/SPSP0/SPSP1/SECP, CDW11 TL or AL). */
export interface AuthCmdFields {
  fctype: number;
  /** NVMe Security Specific Field (unused by DH-HMAC-CHAP, 0). */
  nssf: number;
  spsp0: number;
  spsp1: number;
  secp: number;
  /** TL (Send: transfer length) or AL (Receive: allocation length), bytes. */
  length: number;
}

export function decodeAuthCmd(sqe: Buffer): AuthCmdFields {
  return {
    fctype: sqe[AuthCmdOffset.FCTYPE] as number,
    nssf: sqe[AuthCmdOffset.NSSF] as number,
    spsp0: sqe[AuthCmdOffset.SPSP0] as number,
    spsp1: sqe[AuthCmdOffset.SPSP1] as number,
    secp: sqe[AuthCmdOffset.SECP] as number,
    length: sqe.readUInt32LE(AuthCmdOffset.LENGTH),
  };
}

export interface EncodeAuthCmdOptions {
  fctype: AuthFctype;
  cid: number;
  /** TL for Send (the payload length), AL for Receive. */
  length: number;
  secp?: number;
  spsp0?: number;
  spsp1?: number;
}

/**
 * Fill a 64-byte SQE for Authentication Send/Receive (opcode 7Fh). FLAGS gets PSDT 01b (SGL): NVMe/TCP
 * carries every command's data by SGL (NVMe/TCP 1.0 §3.3.3; Linux sets NVME_CMD_SGL_METABUF), and nvmet
 * fails PSDT 00b with Invalid Field. The SGL itself (bytes 24-39) is left to the transport, as for any
 * data command; Linux uses an in-capsule SGL for Send and a transport SGL for Receive (nvme_auth_submit).
 */
export function encodeAuthCmdInto(sqe: Buffer, o: EncodeAuthCmdOptions): Buffer {
  sqe.fill(0, 0, 24);
  sqe.fill(0, 40, 64);
  sqe[0] = 0x7f;
  sqe[1] = PSDT_SGL;
  sqe.writeUInt16LE(o.cid & 0xffff, 2);
  sqe[AuthCmdOffset.FCTYPE] = o.fctype;
  sqe[AuthCmdOffset.SPSP0] = o.spsp0 ?? AUTH_SPSP0;
  sqe[AuthCmdOffset.SPSP1] = o.spsp1 ?? AUTH_SPSP1;
  sqe[AuthCmdOffset.SECP] = o.secp ?? AUTH_SECP;
  sqe.writeUInt32LE(o.length >>> 0, AuthCmdOffset.LENGTH);
  return sqe;
}

/**
 * nvmet's checks for both commands (nvmet_execute_auth_send/receive): SECP E9h, SPSP0/1 01h and a
 * non-zero TL/AL, each failing with Invalid Field | DNR and the field's byte offset as error location.
 * The transport must also check TL/AL against the SGL length (nvmet_check_transfer_len).
 */
export function checkAuthCmd(f: AuthCmdFields): { status: number; errorLoc: number } | null {
  const invalid = Status.INVALID_FIELD | DNR;
  if (f.secp !== AUTH_SECP) return { status: invalid, errorLoc: AuthCmdOffset.SECP };
  if (f.spsp0 !== AUTH_SPSP0) return { status: invalid, errorLoc: AuthCmdOffset.SPSP0 };
  if (f.spsp1 !== AUTH_SPSP1) return { status: invalid, errorLoc: AuthCmdOffset.SPSP1 };
  if (f.length === 0) return { status: invalid, errorLoc: AuthCmdOffset.LENGTH };
  return null;
}
