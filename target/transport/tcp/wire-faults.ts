// The PDU-shaping fault actions (docs/faults.md, "NVMe/TCP-level actions"): the slow branch TargetTcpQueue takes for a
// command a rule marked (Request.fault), and only then. The reply's PDUs are laid out by the protocol's one encoder
// (encodePdu: lengths, padding and digests), then reshaped or corrupted as the rule says; stall and drip only hold the
// connection's writes (TcpConnection.shape). An unmarked command never comes here.
import { Buffer } from 'node:buffer';
import { PduType, encodeCqe, encodePdu, type C2HDataPdu, type Pdu, type R2TPdu } from '../../../protocol/index.js';
import type { TcpConnection } from '../../../connection/index.js';
import type { FaultWireAction } from '../../model/faults.js';
import type { Request } from '../../core/index.js';

const EMPTY = Buffer.alloc(0);

/** Defaults of the actions' optional fields (docs/faults.md). */
const DEFAULTS = {
  /** 4 bytes into the reply: inside its common header (NVMe-TCP 1.0 §3.6.1.1), so a stall is mid-PDU. */
  stallAfterBytes: 4,
  dripBytes: 1,
  dripIntervalMs: 10,
  /** Extra bytes of c2h-overrun and r2t-past-transfer: one 512-byte block. */
  pastEndBytes: 512,
  /** R2Ts of r2t-past-maxr2t: two at once, past the MAXR2T of 0 (one outstanding) the Linux host asks for. */
  r2tCount: 2,
  /** Where a header digest sits: after the 24-byte C2HData or CapsuleResp header (§3.6.2.7, §3.6.2.9). */
  hdgstAt: 24,
} as const;

/**
 * A marked command's reply (NVMe-TCP 1.0 §3.6.2.7, §3.6.2.9): C2HData reshaped (reordered, duplicated, overrunning,
 * split), SUCCESS forced, a digest corrupted, a C2HTermReq in the middle, or the writes held (stall, drip).
 */
export function sendFaultedCompletion(conn: TcpConnection, req: Request, a: FaultWireAction, sqid: number, sqflowDisabled: boolean, c2hMax: number): void {
  switch (a.kind) {
    case 'stall':
      conn.shape({ kind: 'stall', skip: a.afterBytes ?? DEFAULTS.stallAfterBytes, ms: a.ms });
      conn.sendCompletion(req, sqid, sqflowDisabled);
      return;
    case 'drip':
      conn.shape({ kind: 'drip', skip: 0, slice: a.bytes ?? DEFAULTS.dripBytes, intervalMs: a.intervalMs ?? DEFAULTS.dripIntervalMs });
      conn.sendCompletion(req, sqid, sqflowDisabled);
      return;
    case 'r2t-past-maxr2t':
    case 'r2t-past-transfer':
      // Acted at the R2T (sendFaultedR2T); the reply is the usual one.
      conn.sendCompletion(req, sqid, sqflowDisabled);
      return;
  }
  // Copied: the backend lends its buffers only as req.outLent says, and these PDUs are laid out now.
  const whole = req.status === 0 && req.out !== undefined ? Buffer.concat(req.out as Buffer[]) : EMPTY;
  const total = whole.length;
  const half = Math.max(1, Math.ceil(total / 2));
  const size = a.kind === 'c2h-split' ? (a.size ?? 1) : a.kind === 'c2h-reorder' || a.kind === 'c2h-duplicate' ? (a.size ?? half) : a.kind === 'c2h-term-req' ? half : c2hMax;
  const success = a.kind === 'success-flag' || (sqflowDisabled && req.dw0 === 0 && req.dw1 === 0);
  let data: C2HDataPdu[] = [];
  for (let off = 0; off < total; off += size) {
    const end = Math.min(off + size, total);
    data.push({ type: PduType.C2H_DATA, cccid: req.cid, datao: off, last: end === total, success: end === total && success, data: [whole.subarray(off, end)] });
  }
  const last = data[data.length - 1];
  if (a.kind === 'c2h-overrun' && last !== undefined) last.data = [last.data[0] as Buffer, Buffer.alloc(a.bytes ?? DEFAULTS.pastEndBytes)];
  if (a.kind === 'c2h-reorder') data.reverse();
  if (a.kind === 'c2h-duplicate' && data[0] !== undefined) data.splice(1, 0, data[0]);
  if (a.kind === 'c2h-term-req') data = data.slice(0, 1);
  const pdus: Pdu[] = data;
  const resp = a.kind === 'c2h-term-req' ? false : data.length === 0 || !success || (a.kind === 'success-flag' && a.resp === true);
  if (resp) pdus.push({ type: PduType.CAPSULE_RESP, cqe: encodeCqe({ cid: req.cid, status: req.status, dw0: req.dw0, dw1: req.dw1, sqhd: req.sqhd, sqid }) });
  const f = conn.framing;
  const encoded = pdus.map((p) => encodePdu(p, f));
  // The digests the encoder computed, made wrong by one flipped byte (§3.6.1.3 HDGST, §3.6.1.4 DDGST).
  if (a.kind === 'header-digest-error' && encoded[0] !== undefined) flip(encoded[0][0] as Buffer, DEFAULTS.hdgstAt);
  if (a.kind === 'data-digest-error' && data.length > 0) {
    const first = encoded[0] as Buffer[];
    flip(first[first.length - 1] as Buffer, 0);
  }
  conn.sendBytes(encoded.flat());
  if (a.kind === 'c2h-term-req') conn.fatal({ fes: a.fes, fei: a.fei ?? 0, reason: `fault rule c2h-term-req (FES ${a.fes})` });
}

/**
 * A marked command's data request (NVMe-TCP 1.0 §3.6.2.10): `count` R2Ts at once, each for its share of the transfer
 * (past the host's MAXR2T), or one R2T for more than the command transfers. Every one carries the command's TTAG.
 */
export function sendFaultedR2T(conn: TcpConnection, req: Request, a: FaultWireAction, ttag: number): void {
  const len = req.dataLen;
  if (a.kind === 'r2t-past-transfer') {
    conn.send({ type: PduType.R2T, cccid: req.cid, ttag, r2to: 0, r2tl: len + (a.bytes ?? DEFAULTS.pastEndBytes) });
    return;
  }
  const count = a.kind === 'r2t-past-maxr2t' ? Math.min(a.count ?? DEFAULTS.r2tCount, len) : 1;
  const share = Math.ceil(len / count);
  for (let off = 0; off < len; off += share) {
    const r2t: R2TPdu = { type: PduType.R2T, cccid: req.cid, ttag, r2to: off, r2tl: Math.min(share, len - off) };
    conn.send(r2t);
  }
}

function flip(b: Buffer, at: number): void {
  b[at] = (b[at] as number) ^ 0xff;
}
