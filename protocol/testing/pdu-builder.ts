// Test-only NVMe/TCP PDU byte builder, independent of encodePdu/PduReader: lays PDUs out by the explicit offsets of
// the spec tables (NVMe/TCP Transport 1.0 §3.6.1–§3.6.2). It imports nothing
// from this folder so that a shared mistake cannot make a codec test pass.
import { Buffer } from 'node:buffer';

/** The PDU type codes of the CH `type` byte (§3.6.1 Figure 17), spelled out again on purpose. */
export const T = {
  IC_REQ: 0x00,
  IC_RESP: 0x01,
  H2C_TERM_REQ: 0x02,
  C2H_TERM_REQ: 0x03,
  CAPSULE_CMD: 0x04,
  CAPSULE_RESP: 0x05,
  H2C_DATA: 0x06,
  C2H_DATA: 0x07,
  R2T: 0x09,
} as const;

/** CH flag bits (§3.6.1): HDGSTF, DDGSTF, DATA_LAST, DATA_SUCCESS. */
export const F = { HDGSTF: 0x01, DDGSTF: 0x02, LAST: 0x04, SUCCESS: 0x08 } as const;

/** Byte offsets and sizes from the spec tables (TCP 1.0 §3.6.1, §3.6.2). */
export const Layout = {
  CH: { type: 0, flags: 1, hlen: 2, pdo: 3, plen: 4, size: 8 },
  IC: { pfv: 8, pda: 10, dgst: 11, maxr2tOrMaxdata: 12, size: 128 },
  TERM_REQ: { fes: 8, fei: 10, size: 24, maxErrorData: 128 },
  CAPSULE_CMD: { sqe: 8, sqeSize: 64, size: 72 },
  CAPSULE_RESP: { cqe: 8, cqeSize: 16, size: 24 },
  DATA: { cccid: 8, ttag: 10, datao: 12, datal: 16, size: 24 },
  R2T: { cccid: 8, ttag: 10, r2to: 12, r2tl: 16, size: 24 },
  DIGEST: 4,
} as const;

/** Bitwise CRC32C (reflected 0x82F63B78, init and final XOR 0xFFFFFFFF, §4): slow and plain, shares no tables. */
export function crc32cBitwise(buf: Uint8Array, prev = 0): number {
  let crc = ~prev >>> 0;
  for (const byte of buf) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0x82f63b78 : crc >>> 1;
  }
  return ~crc >>> 0;
}

/** Negotiated framing for the builder: digests and the receiver's PDA (0's based dwords). */
export interface BuildFraming {
  hdgst?: boolean;
  ddgst?: boolean;
  pda?: number;
}

/**
 * CH values to force after layout, for crafting invalid PDUs. The header digest (if any) is computed over the
 * overridden header, so only the overridden field is wrong.
 */
export interface ChOverride {
  type?: number;
  flags?: number;
  hlen?: number;
  pdo?: number;
  plen?: number;
}

interface PduLayout {
  type: number;
  hlen: number;
  /** Type-specific flag bits (LAST/SUCCESS); HDGSTF/DDGSTF are added here from the framing. */
  flags: number;
  /** Writes the PDU-specific header into `h` (offsets are from the PDU start). */
  psh: (h: Buffer) => void;
  data: Buffer;
  hdgst: boolean;
  ddgst: boolean;
  pda: number;
  override: ChOverride | undefined;
}

/** §3.6.1: data starts at hlen (+HDGST) rounded up to a multiple of (PDA+1)*4 bytes, padding zero-filled. */
function alignedPdo(hlen: number, hdgst: boolean, pda: number): number {
  const start = hlen + (hdgst ? Layout.DIGEST : 0);
  const unit = (pda + 1) * 4;
  return Math.ceil(start / unit) * unit;
}

function layout(l: PduLayout): Buffer {
  const hd = l.hdgst ? Layout.DIGEST : 0;
  const hasData = l.data.length > 0;
  const pdo = hasData ? alignedPdo(l.hlen, l.hdgst, l.pda) : 0;
  const dd = hasData && l.ddgst ? Layout.DIGEST : 0;
  const dataStart = hasData ? pdo : l.hlen + hd;
  const plen = dataStart + l.data.length + dd;
  const out = Buffer.alloc(plen);
  const flags = l.flags | (l.hdgst ? F.HDGSTF : 0) | (dd > 0 ? F.DDGSTF : 0);
  out[Layout.CH.type] = l.override?.type ?? l.type;
  out[Layout.CH.flags] = l.override?.flags ?? flags;
  out[Layout.CH.hlen] = l.override?.hlen ?? l.hlen;
  out[Layout.CH.pdo] = l.override?.pdo ?? pdo;
  out.writeUInt32LE(l.override?.plen ?? plen, Layout.CH.plen);
  l.psh(out);
  if (l.hdgst) out.writeUInt32LE(crc32cBitwise(out.subarray(0, l.hlen)), l.hlen);
  l.data.copy(out, dataStart);
  if (dd > 0) out.writeUInt32LE(crc32cBitwise(l.data), dataStart + l.data.length);
  return out;
}

function framingOf(fr: BuildFraming | undefined): { hdgst: boolean; ddgst: boolean; pda: number } {
  return { hdgst: fr?.hdgst ?? false, ddgst: fr?.ddgst ?? false, pda: fr?.pda ?? 0 };
}

export interface IcReqFields {
  pfv?: number;
  hpda?: number;
  dgst?: number;
  maxr2t?: number;
}

/** ICReq, §3.6.2.2: 128 bytes, never digests. */
export function icReq(f: IcReqFields = {}, override?: ChOverride): Buffer {
  return layout({
    type: T.IC_REQ,
    hlen: Layout.IC.size,
    flags: 0,
    psh: (h) => {
      h.writeUInt16LE(f.pfv ?? 0, Layout.IC.pfv);
      h[Layout.IC.pda] = f.hpda ?? 0;
      h[Layout.IC.dgst] = f.dgst ?? 0;
      h.writeUInt32LE(f.maxr2t ?? 0, Layout.IC.maxr2tOrMaxdata);
    },
    data: Buffer.alloc(0),
    hdgst: false,
    ddgst: false,
    pda: 0,
    override,
  });
}

export interface IcRespFields {
  pfv?: number;
  cpda?: number;
  dgst?: number;
  maxh2cdata?: number;
}

/** ICResp, §3.6.2.3. */
export function icResp(f: IcRespFields = {}, override?: ChOverride): Buffer {
  return layout({
    type: T.IC_RESP,
    hlen: Layout.IC.size,
    flags: 0,
    psh: (h) => {
      h.writeUInt16LE(f.pfv ?? 0, Layout.IC.pfv);
      h[Layout.IC.pda] = f.cpda ?? 0;
      h[Layout.IC.dgst] = f.dgst ?? 0;
      h.writeUInt32LE(f.maxh2cdata ?? 0x400000, Layout.IC.maxr2tOrMaxdata);
    },
    data: Buffer.alloc(0),
    hdgst: false,
    ddgst: false,
    pda: 0,
    override,
  });
}

export interface TermReqFields {
  fes: number;
  fei: number;
  errorData: Buffer;
}

/**
 * H2CTermReq / C2HTermReq, §3.6.2.4/5: 24-byte header, then at most 128 bytes of the offending
 * header; the error data sits right after the header with pdo 0 and no digests.
 */
export function termReq(type: typeof T.H2C_TERM_REQ | typeof T.C2H_TERM_REQ, f: TermReqFields, override?: ChOverride): Buffer {
  const ed = f.errorData.subarray(0, Layout.TERM_REQ.maxErrorData);
  const out = Buffer.alloc(Layout.TERM_REQ.size + ed.length);
  out[Layout.CH.type] = override?.type ?? type;
  out[Layout.CH.flags] = override?.flags ?? 0;
  out[Layout.CH.hlen] = override?.hlen ?? Layout.TERM_REQ.size;
  out[Layout.CH.pdo] = override?.pdo ?? 0;
  out.writeUInt32LE(override?.plen ?? out.length, Layout.CH.plen);
  out.writeUInt16LE(f.fes, Layout.TERM_REQ.fes);
  out.writeUInt32LE(f.fei >>> 0, Layout.TERM_REQ.fei);
  ed.copy(out, Layout.TERM_REQ.size);
  return out;
}

/** CapsuleCmd, §3.6.2.6: CH + 64-byte SQE, optional in-capsule data. */
export function capsuleCmd(f: { sqe: Buffer; data?: Buffer }, fr?: BuildFraming, override?: ChOverride): Buffer {
  if (f.sqe.length !== Layout.CAPSULE_CMD.sqeSize) throw new RangeError('SQE must be 64 bytes');
  return layout({
    type: T.CAPSULE_CMD,
    hlen: Layout.CAPSULE_CMD.size,
    flags: 0,
    psh: (h) => f.sqe.copy(h, Layout.CAPSULE_CMD.sqe),
    data: f.data ?? Buffer.alloc(0),
    ...framingOf(fr),
    override,
  });
}

/** CapsuleResp, §3.6.2.7: CH + 16-byte CQE, never data. */
export function capsuleResp(f: { cqe: Buffer }, fr?: BuildFraming, override?: ChOverride): Buffer {
  if (f.cqe.length !== Layout.CAPSULE_RESP.cqeSize) throw new RangeError('CQE must be 16 bytes');
  return layout({
    type: T.CAPSULE_RESP,
    hlen: Layout.CAPSULE_RESP.size,
    flags: 0,
    psh: (h) => f.cqe.copy(h, Layout.CAPSULE_RESP.cqe),
    data: Buffer.alloc(0),
    ...framingOf(fr),
    ddgst: false,
    override,
  });
}

export interface H2CDataFields {
  cccid: number;
  ttag: number;
  datao: number;
  /** Defaults to data.length; set to lie about it. */
  datal?: number;
  last?: boolean;
  data: Buffer;
}

/** H2CData, §3.6.2.8. */
export function h2cData(f: H2CDataFields, fr?: BuildFraming, override?: ChOverride): Buffer {
  return layout({
    type: T.H2C_DATA,
    hlen: Layout.DATA.size,
    flags: f.last === true ? F.LAST : 0,
    psh: (h) => {
      h.writeUInt16LE(f.cccid, Layout.DATA.cccid);
      h.writeUInt16LE(f.ttag, Layout.DATA.ttag);
      h.writeUInt32LE(f.datao, Layout.DATA.datao);
      h.writeUInt32LE(f.datal ?? f.data.length, Layout.DATA.datal);
    },
    data: f.data,
    ...framingOf(fr),
    override,
  });
}

export interface C2HDataFields {
  cccid: number;
  datao: number;
  datal?: number;
  last?: boolean;
  success?: boolean;
  data: Buffer;
}

/** C2HData, §3.6.2.9: ttag is reserved (0). */
export function c2hData(f: C2HDataFields, fr?: BuildFraming, override?: ChOverride): Buffer {
  return layout({
    type: T.C2H_DATA,
    hlen: Layout.DATA.size,
    flags: (f.last === true ? F.LAST : 0) | (f.success === true ? F.SUCCESS : 0),
    psh: (h) => {
      h.writeUInt16LE(f.cccid, Layout.DATA.cccid);
      h.writeUInt32LE(f.datao, Layout.DATA.datao);
      h.writeUInt32LE(f.datal ?? f.data.length, Layout.DATA.datal);
    },
    data: f.data,
    ...framingOf(fr),
    override,
  });
}

export interface R2TFields {
  cccid: number;
  ttag: number;
  r2to: number;
  r2tl: number;
}

/** R2T, §3.6.2.10: pdo 0, never data. */
export function r2t(f: R2TFields, fr?: BuildFraming, override?: ChOverride): Buffer {
  return layout({
    type: T.R2T,
    hlen: Layout.R2T.size,
    flags: 0,
    psh: (h) => {
      h.writeUInt16LE(f.cccid, Layout.R2T.cccid);
      h.writeUInt16LE(f.ttag, Layout.R2T.ttag);
      h.writeUInt32LE(f.r2to, Layout.R2T.r2to);
      h.writeUInt32LE(f.r2tl, Layout.R2T.r2tl);
    },
    data: Buffer.alloc(0),
    ...framingOf(fr),
    ddgst: false,
    override,
  });
}

/** A 64-byte SQE with the fields a PDU test needs (NVMe Base 2.0 Figure 88; SGL per TCP 1.0 §3.3.3): opcode, PSDT=SGL, CID, NSID, SGL1, CDW10. */
export function sqe(f: { opcode: number; cid: number; nsid?: number; sglType?: number; sglLen?: number; cdw10?: number }): Buffer {
  const b = Buffer.alloc(64);
  b[0] = f.opcode;
  b[1] = 0x40;
  b.writeUInt16LE(f.cid, 2);
  b.writeUInt32LE(f.nsid ?? 0, 4);
  b.writeUInt32LE(f.sglLen ?? 0, 24 + 8);
  b[24 + 15] = f.sglType ?? 0x5a;
  b.writeUInt32LE(f.cdw10 ?? 0, 40);
  return b;
}

/** A 16-byte CQE (NVMe Base 2.0 Figure 92): DW0, SQHD, SQID, CID, status (15-bit, wire = status << 1 | phase). */
export function cqe(f: { cid: number; dw0?: number; sqhd?: number; sqid?: number; status?: number }): Buffer {
  const b = Buffer.alloc(16);
  b.writeUInt32LE(f.dw0 ?? 0, 0);
  b.writeUInt16LE(f.sqhd ?? 0, 8);
  b.writeUInt16LE(f.sqid ?? 0, 10);
  b.writeUInt16LE(f.cid, 12);
  b.writeUInt16LE(((f.status ?? 0) << 1) & 0xffff, 14);
  return b;
}

/** Annotated hex → bytes: whitespace, `|`, `_`, `:` and `# comments` (to end of line) are ignored. */
export function hex(text: string): Buffer {
  const digits = text.replace(/#[^\n]*/g, '').replace(/[\s|_:]/g, '');
  if (!/^([0-9a-fA-F]{2})*$/.test(digits)) throw new SyntaxError(`bad hex: ${digits.slice(0, 40)}`);
  return Buffer.from(digits, 'hex');
}

/** A deterministic byte pattern (i*mult + add mod 256) so data views are easy to tell apart. */
export function pattern(length: number, add = 0, mult = 7): Buffer {
  const b = Buffer.alloc(length);
  for (let i = 0; i < length; i++) b[i] = (i * mult + add) & 0xff;
  return b;
}
