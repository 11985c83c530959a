/**
 * NVMe in-band authentication constants (NVMe Base 2.0 §8.13 "DH-HMAC-CHAP", NVMe-oF 1.1 §3.3/§6.3
 * Authentication Send/Receive; TP 8006). Values as Linux include/linux/nvme.h defines them.
 */

/** Fabrics command types carrying authentication messages (NVMe-oF 1.1 Figure 18). */
export const AuthFctype = { SEND: 0x05, RECEIVE: 0x06 } as const;
export type AuthFctype = (typeof AuthFctype)[keyof typeof AuthFctype];

/** Security Protocol (SECP) value for NVMe in-band authentication (NVMe Base 2.0 §8.13.4). */
export const AUTH_SECP = 0xe9;
/** SPSP0/SPSP1 both 01h select DH-HMAC-CHAP within SECP E9h. */
export const AUTH_SPSP0 = 0x01;
export const AUTH_SPSP1 = 0x01;

/**
 * SQE byte offsets of the Authentication Send/Receive fields (Linux struct nvmf_auth_send_command):
 * CDW10 holds NSSF(7:0) SPSP0(15:8) SPSP1(23:16) SECP(31:24), so SECP is byte 43, not 41.
 */
export const AuthCmdOffset = { FCTYPE: 4, NSSF: 40, SPSP0: 41, SPSP1: 42, SECP: 43, LENGTH: 44 } as const;

/** `auth_type` byte: common messages (Negotiate, Failure1/2) vs DH-HMAC-CHAP specific ones. */
export const AuthType = { COMMON: 0x00, DHCHAP: 0x01 } as const;
export type AuthType = (typeof AuthType)[keyof typeof AuthType];

/**
 * `auth_id` byte. Failure1 (F1h) is sent by the controller in place of Challenge/Success1;
 * Failure2 (F0h) by the host (Linux NVME_AUTH_DHCHAP_MESSAGE_FAILURE1/2, nvmet sends F1h).
 */
export const AuthMessageId = {
  NEGOTIATE: 0x00,
  CHALLENGE: 0x01,
  REPLY: 0x02,
  SUCCESS1: 0x03,
  SUCCESS2: 0x04,
  FAILURE2: 0xf0,
  FAILURE1: 0xf1,
} as const;
export type AuthMessageId = (typeof AuthMessageId)[keyof typeof AuthMessageId];

/** Authentication protocol identifier in an AUTH_Negotiate descriptor: DH-HMAC-CHAP. */
export const DHCHAP_AUTH_ID = 0x01;
/** Each protocol descriptor is 64 bytes: authid, rsvd, halen, dhlen, idlist[60] (30 hash + 30 DH slots). */
export const PROTOCOL_DESCRIPTOR_SIZE = 64;
export const MAX_HASH_IDS = 30;
export const MAX_DH_IDS = 30;

/**
 * AUTH_Negotiate SC_C as Linux sends and checks it (include/linux/nvme.h NVME_AUTH_SECP_*, host/auth.c
 * nvme_auth_set_dhchap_negotiate_data, target/fabrics-cmd-auth.c nvmet_auth_negotiate), used for secure channel
 * concatenation (TP 8018): NEWTLSPSK on the cleartext admin queue, REPLACETLSPSK when re-authenticating on the TLS
 * one; SC (01h) is answered with CONCAT_MISMATCH, as nvmet does.
 */
export const ScC = { NOSC: 0x00, SC: 0x01, NEWTLSPSK: 0x02, REPLACETLSPSK: 0x03 } as const;
export type ScC = (typeof ScC)[keyof typeof ScC];

/** Hash function identifiers (NVMe Base 2.0 Figure 171). */
export const HashId = { SHA256: 0x01, SHA384: 0x02, SHA512: 0x03 } as const;
export type HashId = (typeof HashId)[keyof typeof HashId];

export const HASH_INFO = {
  [HashId.SHA256]: { name: 'sha256', length: 32 },
  [HashId.SHA384]: { name: 'sha384', length: 48 },
  [HashId.SHA512]: { name: 'sha512', length: 64 },
} as const satisfies Record<HashId, { name: string; length: number }>;

export function isHashId(x: number): x is HashId {
  return x === HashId.SHA256 || x === HashId.SHA384 || x === HashId.SHA512;
}

/** Diffie-Hellman group identifiers (NVMe Base 2.0 Figure 172). */
export const DhGroupId = {
  NULL: 0x00,
  FFDHE2048: 0x01,
  FFDHE3072: 0x02,
  FFDHE4096: 0x03,
  FFDHE6144: 0x04,
  FFDHE8192: 0x05,
} as const;
export type DhGroupId = (typeof DhGroupId)[keyof typeof DhGroupId];

export const DH_GROUP_NAMES = {
  [DhGroupId.NULL]: 'null',
  [DhGroupId.FFDHE2048]: 'ffdhe2048',
  [DhGroupId.FFDHE3072]: 'ffdhe3072',
  [DhGroupId.FFDHE4096]: 'ffdhe4096',
  [DhGroupId.FFDHE6144]: 'ffdhe6144',
  [DhGroupId.FFDHE8192]: 'ffdhe8192',
} as const satisfies Record<DhGroupId, string>;

export function isDhGroupId(x: number): x is DhGroupId {
  return Number.isInteger(x) && x >= 0 && x <= 5;
}

/** AUTH_Failure reason code (`rescode`): the only defined value. */
export const FAILURE_REASON_AUTH_FAILED = 0x01;

/** AUTH_Failure reason code explanation (`rescode_exp`), NVMe Base 2.0 Figure 186. */
export const FailureExplanation = {
  FAILED: 0x01,
  NOT_USABLE: 0x02,
  CONCAT_MISMATCH: 0x03,
  HASH_UNUSABLE: 0x04,
  DHGROUP_UNUSABLE: 0x05,
  INCORRECT_PAYLOAD: 0x06,
  INCORRECT_MESSAGE: 0x07,
} as const;
export type FailureExplanation = (typeof FailureExplanation)[keyof typeof FailureExplanation];

const FAILURE_NAMES: Record<number, string> = {
  0x01: 'authentication failed',
  0x02: 'authentication protocol not usable',
  0x03: 'secure channel concatenation mismatch',
  0x04: 'hash function not usable',
  0x05: 'DH group not usable',
  0x06: 'incorrect payload',
  0x07: 'incorrect protocol message',
};

export function failureExplanationName(x: number): string {
  return FAILURE_NAMES[x] ?? `unknown (0x${x.toString(16)})`;
}

/**
 * Connect response dw0 AUTHREQ bits (NVMe-oF 1.1 Figure 21 as amended by TP 8006): ATR asks the
 * host to authenticate; ASCR asks for secure channel concatenation (not supported here).
 */
export const CONNECT_AUTHREQ_ATR = 1 << 17;
export const CONNECT_AUTHREQ_ASCR = 1 << 18;

/** Buffer size Linux uses for every Authentication Receive (drivers/nvme/host/auth.c CHAP_BUF_SIZE). */
export const LINUX_AUTH_RECEIVE_LENGTH = 4096;
