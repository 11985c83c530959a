// NVMe/TCP PDU constants — NVM Express TCP Transport Specification 1.0 (§3.3, §3.6), Linux include/linux/nvme-tcp.h.

/** PDU types (CH.type, §3.6.1). */
export const PduType = {
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
export type PduType = (typeof PduType)[keyof typeof PduType];

/** CH.flags bits (§3.6.1). */
export const PduFlag = {
  HDGSTF: 0x01,
  DDGSTF: 0x02,
  DATA_LAST: 0x04,
  DATA_SUCCESS: 0x08,
} as const;

/** Fatal Error Status in a TermReq (§3.6.2.4/5, Figure 23/25). */
export const Fes = {
  INVALID_HEADER_FIELD: 0x01,
  PDU_SEQUENCE_ERROR: 0x02,
  HEADER_DIGEST_ERROR: 0x03,
  DATA_OUT_OF_RANGE: 0x04,
  /** "R2T Limit Exceeded" in TCP 1.0; "Data Transfer Limit Exceeded" in NVMe-oF 1.1. */
  DATA_LIMIT_EXCEEDED: 0x05,
  UNSUPPORTED_PARAMETER: 0x06,
} as const;
export type Fes = (typeof Fes)[keyof typeof Fes];

export const CH_SIZE = 8;
export const DIGEST_SIZE = 4;
export const IC_PDU_SIZE = 128;
export const TERM_REQ_HLEN = 24;
/** A TermReq carries at most 128 bytes of the offending header (plen <= 152). */
export const TERM_REQ_MAX_DATA = 128;
export const CAPSULE_CMD_HLEN = 72;
export const DATA_PDU_HLEN = 24;

/** Common header field offsets (§3.6.1 Figure 17). */
export const ChOffset = { type: 0, flags: 1, hlen: 2, pdo: 3, plen: 4 } as const;

export type Direction = 'h2c' | 'c2h';

interface PduTypeInfo {
  readonly name: string;
  readonly hlen: number;
  readonly dir: Direction;
  /** The PDU may carry HDGST when header digests are enabled. */
  readonly hdgst: boolean;
  /** The PDU may carry data (and so DDGST when data digests are enabled). */
  readonly data: boolean;
}

/** Per-type facts in one table: fixed hlen, direction, digest applicability. */
export const PDU_INFO = {
  [PduType.IC_REQ]: { name: 'ICReq', hlen: 128, dir: 'h2c', hdgst: false, data: false },
  [PduType.IC_RESP]: { name: 'ICResp', hlen: 128, dir: 'c2h', hdgst: false, data: false },
  [PduType.H2C_TERM_REQ]: { name: 'H2CTermReq', hlen: 24, dir: 'h2c', hdgst: false, data: false },
  [PduType.C2H_TERM_REQ]: { name: 'C2HTermReq', hlen: 24, dir: 'c2h', hdgst: false, data: false },
  [PduType.CAPSULE_CMD]: { name: 'CapsuleCmd', hlen: 72, dir: 'h2c', hdgst: true, data: true },
  [PduType.CAPSULE_RESP]: { name: 'CapsuleResp', hlen: 24, dir: 'c2h', hdgst: true, data: false },
  [PduType.H2C_DATA]: { name: 'H2CData', hlen: 24, dir: 'h2c', hdgst: true, data: true },
  [PduType.C2H_DATA]: { name: 'C2HData', hlen: 24, dir: 'c2h', hdgst: true, data: true },
  [PduType.R2T]: { name: 'R2T', hlen: 24, dir: 'c2h', hdgst: true, data: false },
} as const satisfies Record<PduType, PduTypeInfo>;

export function isPduType(t: number): t is PduType {
  return Object.hasOwn(PDU_INFO, t);
}

export function pduTypeName(t: number): string {
  return isPduType(t) ? PDU_INFO[t].name : `unknown(0x${t.toString(16)})`;
}

/** Data offset for a PDU with data: header (+HDGST) rounded up to the receiver's alignment (§3.6.1, PDO). */
export function dataOffset(hlen: number, hdgst: boolean, pda: number): number {
  const unaligned = hlen + (hdgst ? DIGEST_SIZE : 0);
  const align = (pda + 1) * 4;
  return pda === 0 ? unaligned : Math.ceil(unaligned / align) * align;
}
