/**
 * NVMe status codes in the Linux 15-bit form (SCT << 8 | SC, plus CRD/MORE/DNR), i.e. the CQE
 * status word shifted right by one. NVMe Base 2.0 §4.6.1 Figures 94-100, NVM Command Set 1.0
 * §4.1.1, NVMe-oF 1.1 §3.3 Figure 21 (Connect status).
 */

/** Do Not Retry (CQE status bit 15, here bit 14). */
export const DNR = 0x4000;
/** More information in the Error Information log (CQE status bit 14, here bit 13). */
export const MORE = 0x2000;
/** Command Retry Delay selector (CQE status bits 13:12, here 12:11): index into CRDT1..3. */
export const CRD_MASK = 0x1800;
export const CRD_SHIFT = 11;

/** Status Code Type (NVMe Base 2.0 Figure 95). */
export const StatusCodeType = { GENERIC: 0, CMD_SPECIFIC: 1, MEDIA: 2, PATH: 3, VENDOR: 7 } as const;
export type StatusCodeType = (typeof StatusCodeType)[keyof typeof StatusCodeType];

/** Generic command status, SCT 0 (NVMe Base 2.0 Figure 96; NVM Command Set 1.0 Figure 25 for 0x80+). */
const GenericStatus = {
  SUCCESS: 0x00,
  INVALID_OPCODE: 0x01,
  INVALID_FIELD: 0x02,
  CMDID_CONFLICT: 0x03,
  DATA_XFER_ERROR: 0x04,
  POWER_LOSS: 0x05,
  INTERNAL: 0x06,
  ABORT_REQ: 0x07,
  ABORT_QUEUE: 0x08,
  FUSED_FAIL: 0x09,
  FUSED_MISSING: 0x0a,
  INVALID_NS: 0x0b,
  CMD_SEQ_ERROR: 0x0c,
  SGL_INVALID_LAST: 0x0d,
  SGL_INVALID_COUNT: 0x0e,
  SGL_INVALID_DATA: 0x0f,
  SGL_INVALID_METADATA: 0x10,
  SGL_INVALID_TYPE: 0x11,
  CMB_INVALID_USE: 0x12,
  PRP_INVALID_OFFSET: 0x13,
  ATOMIC_WU_EXCEEDED: 0x14,
  OP_DENIED: 0x15,
  SGL_INVALID_OFFSET: 0x16,
  HOST_ID_INCONSIST: 0x18,
  KA_TIMEOUT_EXPIRED: 0x19,
  KA_TIMEOUT_INVALID: 0x1a,
  ABORTED_PREEMPT_ABORT: 0x1b,
  SANITIZE_FAILED: 0x1c,
  SANITIZE_IN_PROGRESS: 0x1d,
  SGL_INVALID_GRANULARITY: 0x1e,
  CMD_NOT_SUP_CMB_QUEUE: 0x1f,
  NS_WRITE_PROTECTED: 0x20,
  CMD_INTERRUPTED: 0x21,
  TRANSIENT_TRANSPORT: 0x22,
  PROHIBITED_BY_LOCKDOWN: 0x23,
  ADMIN_CMD_MEDIA_NOT_READY: 0x24,
  LBA_RANGE: 0x80,
  CAP_EXCEEDED: 0x81,
  NS_NOT_READY: 0x82,
  RESERVATION_CONFLICT: 0x83,
  FORMAT_IN_PROGRESS: 0x84,
} as const;

/** Command specific status, SCT 1, valid for any command set (NVMe Base 2.0 Figure 97). */
const CmdSpecificStatus = {
  INVALID_CQ: 0x100,
  INVALID_QID: 0x101,
  INVALID_QUEUE_SIZE: 0x102,
  ABORT_LIMIT: 0x103,
  ASYNC_LIMIT: 0x105,
  INVALID_FW_SLOT: 0x106,
  INVALID_FW_IMAGE: 0x107,
  INVALID_VECTOR: 0x108,
  INVALID_LOG_PAGE: 0x109,
  INVALID_FORMAT: 0x10a,
  FW_NEEDS_CONV_RESET: 0x10b,
  INVALID_QUEUE_DELETION: 0x10c,
  FEATURE_NOT_SAVEABLE: 0x10d,
  FEATURE_NOT_CHANGEABLE: 0x10e,
  FEATURE_NOT_PER_NS: 0x10f,
  FW_NEEDS_SUBSYS_RESET: 0x110,
  FW_NEEDS_RESET: 0x111,
  FW_NEEDS_MAX_TIME: 0x112,
  FW_ACTIVATION_PROHIBITED: 0x113,
  OVERLAPPING_RANGE: 0x114,
  NS_INSUFFICIENT_CAP: 0x115,
  NS_ID_UNAVAILABLE: 0x116,
  NS_ALREADY_ATTACHED: 0x118,
  NS_IS_PRIVATE: 0x119,
  NS_NOT_ATTACHED: 0x11a,
  THIN_PROV_NOT_SUPP: 0x11b,
  CTRL_LIST_INVALID: 0x11c,
  SELF_TEST_IN_PROGRESS: 0x11d,
  BP_WRITE_PROHIBITED: 0x11e,
  INVALID_CTRL_ID: 0x11f,
  INVALID_SEC_CTRL_STATE: 0x120,
  INVALID_CTRL_RESOURCES: 0x121,
  INVALID_RESOURCE_ID: 0x122,
  SANITIZE_PROHIBITED_PMR: 0x123,
  ANA_GROUP_ID_INVALID: 0x124,
  ANA_ATTACH_FAILED: 0x125,
  INSUFFICIENT_CAPACITY: 0x126,
  NS_ATTACH_LIMIT_EXCEEDED: 0x127,
  PROHIBIT_CMD_EXEC_NOT_SUPPORTED: 0x128,
  IO_CMD_SET_NOT_SUPPORTED: 0x129,
  IO_CMD_SET_NOT_ENABLED: 0x12a,
  IO_CMD_SET_COMBINATION_REJECTED: 0x12b,
  INVALID_IO_CMD_SET: 0x12c,
  IDENTIFIER_UNAVAILABLE: 0x12d,
  /** NVMe-oF 1.1 Figure 21: these two do not collide with NVM values. */
  DISCOVERY_RESTART: 0x190,
  AUTH_REQUIRED: 0x191,
} as const;

/** SCT 1 values 0x180-0x184 as Fabrics Connect defines them (NVMe-oF 1.1 Figure 21). */
const FabricsStatus = {
  CONNECT_INCOMPATIBLE_FORMAT: 0x180,
  CONNECT_CTRL_BUSY: 0x181,
  CONNECT_INVALID_PARAM: 0x182,
  CONNECT_RESTART_DISC: 0x183,
  CONNECT_INVALID_HOST: 0x184,
} as const;

/** SCT 1 values 0x180+ as the NVM and Zoned command sets define them for I/O commands. */
const IoCmdSetStatus = {
  CONFLICTING_ATTRIBUTES: 0x180,
  INVALID_PI: 0x181,
  WRITE_TO_READ_ONLY: 0x182,
  CMD_SIZE_LIMIT_EXCEEDED: 0x183,
  ZONE_BOUNDARY_ERROR: 0x1b8,
  ZONE_FULL: 0x1b9,
  ZONE_READ_ONLY: 0x1ba,
  ZONE_OFFLINE: 0x1bb,
  ZONE_INVALID_WRITE: 0x1bc,
  ZONE_TOO_MANY_ACTIVE: 0x1bd,
  ZONE_TOO_MANY_OPEN: 0x1be,
  ZONE_INVALID_TRANSITION: 0x1bf,
} as const;

/** Media and data integrity errors, SCT 2 (NVMe Base 2.0 Figure 98). */
const MediaStatus = {
  WRITE_FAULT: 0x280,
  READ_ERROR: 0x281,
  GUARD_CHECK: 0x282,
  APPTAG_CHECK: 0x283,
  REFTAG_CHECK: 0x284,
  COMPARE_FAILED: 0x285,
  ACCESS_DENIED: 0x286,
  UNWRITTEN_BLOCK: 0x287,
  STORAGE_TAG_CHECK: 0x288,
} as const;

/** Path related status, SCT 3 (NVMe Base 2.0 Figure 99); drives multipath failover. */
const PathStatus = {
  INTERNAL_PATH_ERROR: 0x300,
  ANA_PERSISTENT_LOSS: 0x301,
  ANA_INACCESSIBLE: 0x302,
  ANA_TRANSITION: 0x303,
  CTRL_PATH_ERROR: 0x360,
  HOST_PATH_ERROR: 0x370,
  HOST_ABORTED_CMD: 0x371,
} as const;

/**
 * Every status value by name. 0x180-0x184 appear twice (Fabrics CONNECT_* and NVM names) because
 * the spec reuses them; statusName picks by context.
 */
export const Status = {
  ...GenericStatus,
  ...CmdSpecificStatus,
  ...FabricsStatus,
  ...IoCmdSetStatus,
  ...MediaStatus,
  ...PathStatus,
} as const;
export type StatusName = keyof typeof Status;
export type Status = (typeof Status)[StatusName];

function invert(...tables: Readonly<Record<string, number>>[]): ReadonlyMap<number, string> {
  const m = new Map<number, string>();
  for (const t of tables) for (const [k, v] of Object.entries(t)) if (!m.has(v)) m.set(v, k);
  return m;
}

const baseNames = invert(GenericStatus, CmdSpecificStatus, MediaStatus, PathStatus);
const fabricsNames = invert(FabricsStatus);
const ioNames = invert(IoCmdSetStatus);

/** Status Code Type, bits 10:8. */
export function statusSct(s: number): number {
  return (s >> 8) & 0x7;
}

/** Status Code, bits 7:0. */
export function statusSc(s: number): number {
  return s & 0xff;
}

/** Do Not Retry set. */
export function statusDnr(s: number): boolean {
  return (s & DNR) !== 0;
}

/** More set. */
export function statusMore(s: number): boolean {
  return (s & MORE) !== 0;
}

/** Command Retry Delay selector (0 = none, 1..3 = CRDT1..3). */
export function statusCrd(s: number): number {
  return (s & CRD_MASK) >> CRD_SHIFT;
}

/** SCT and SC without CRD/MORE/DNR (the part that names the error). */
export function statusCode(s: number): number {
  return s & 0x7ff;
}

/** Builds a status value from its parts. */
export function makeStatus(sct: number, sc: number, opts: { dnr?: boolean; more?: boolean; crd?: number } = {}): number {
  let s = ((sct & 0x7) << 8) | (sc & 0xff);
  if (opts.crd !== undefined) s |= (opts.crd & 0x3) << CRD_SHIFT;
  if (opts.more === true) s |= MORE;
  if (opts.dnr === true) s |= DNR;
  return s;
}

/** Which command family a status belongs to; only SCT 1 SC 0x80-0xBF depends on it. */
export type StatusContext = 'fabrics' | 'io' | 'admin';

/**
 * Human-readable name, e.g. "LBA_RANGE|DNR", "CONNECT_INVALID_HOST|DNR", "INTERNAL|CRD1|MORE".
 * For SCT 1 SC 0x80-0xBF the name comes from the I/O command set when `context` is 'io', and from
 * Fabrics (Connect) otherwise. Unknown codes render as "SCT<n>:SC0x<nn>".
 */
export function statusName(s: number, context?: StatusContext): string {
  const code = statusCode(s);
  const special = context === 'io' ? ioNames.get(code) : fabricsNames.get(code);
  const base =
    special ??
    baseNames.get(code) ??
    `SCT${statusSct(s)}:SC0x${statusSc(s).toString(16).padStart(2, '0')}`;
  const parts = [base];
  const crd = statusCrd(s);
  if (crd !== 0) parts.push(`CRD${crd}`);
  if (statusMore(s)) parts.push('MORE');
  if (statusDnr(s)) parts.push('DNR');
  return parts.join('|');
}
