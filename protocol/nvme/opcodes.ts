/**
 * Admin, NVM I/O and Fabrics opcodes and their data direction. NVMe Base 2.0 Figure 138 (admin),
 * NVM Command Set 1.0 Figure 17 (I/O), NVMe-oF 1.1 §6 (Fabrics opcode 0x7F).
 */

/** Admin command opcodes (NVMe Base 2.0 Figure 138; Linux `nvme_admin_opcode`). */
export const AdminOpcode = {
  DELETE_SQ: 0x00,
  CREATE_SQ: 0x01,
  GET_LOG_PAGE: 0x02,
  DELETE_CQ: 0x04,
  CREATE_CQ: 0x05,
  IDENTIFY: 0x06,
  ABORT: 0x08,
  SET_FEATURES: 0x09,
  GET_FEATURES: 0x0a,
  ASYNC_EVENT: 0x0c,
  NS_MGMT: 0x0d,
  FW_COMMIT: 0x10,
  FW_DOWNLOAD: 0x11,
  DEV_SELF_TEST: 0x14,
  NS_ATTACH: 0x15,
  KEEP_ALIVE: 0x18,
  DIRECTIVE_SEND: 0x19,
  DIRECTIVE_RECV: 0x1a,
  VIRT_MGMT: 0x1c,
  NVME_MI_SEND: 0x1d,
  NVME_MI_RECV: 0x1e,
  CAPACITY_MGMT: 0x20,
  LOCKDOWN: 0x24,
  DBBUF: 0x7c,
  FORMAT_NVM: 0x80,
  SECURITY_SEND: 0x81,
  SECURITY_RECV: 0x82,
  SANITIZE: 0x84,
  GET_LBA_STATUS: 0x86,
} as const;
export type AdminOpcode = (typeof AdminOpcode)[keyof typeof AdminOpcode];

/** NVM command set I/O opcodes (NVM Command Set 1.0 Figure 17; ZNS 1.1 for 0x79..0x7D). */
export const NvmOpcode = {
  FLUSH: 0x00,
  WRITE: 0x01,
  READ: 0x02,
  WRITE_UNCOR: 0x04,
  COMPARE: 0x05,
  WRITE_ZEROES: 0x08,
  DSM: 0x09,
  VERIFY: 0x0c,
  RESV_REGISTER: 0x0d,
  RESV_REPORT: 0x0e,
  RESV_ACQUIRE: 0x11,
  RESV_RELEASE: 0x15,
  COPY: 0x19,
  ZONE_MGMT_SEND: 0x79,
  ZONE_MGMT_RECV: 0x7a,
  ZONE_APPEND: 0x7d,
} as const;
export type NvmOpcode = (typeof NvmOpcode)[keyof typeof NvmOpcode];

/** Fabrics command opcode; the command is selected by FCTYPE at SQE byte 4 (NVMe-oF 1.1 §6.1). */
export const FABRICS_OPCODE = 0x7f;

function invert(table: Readonly<Record<string, number>>): ReadonlyMap<number, string> {
  const m = new Map<number, string>();
  for (const [k, v] of Object.entries(table)) if (!m.has(v)) m.set(v, k);
  return m;
}

const adminNames = invert(AdminOpcode);
const nvmNames = invert(NvmOpcode);

function hexByte(op: number): string {
  return `0x${(op & 0xff).toString(16).padStart(2, '0')}`;
}

/** Name of an admin opcode ("IDENTIFY"), or "FABRICS" for 0x7F, or "0xNN" if unknown. */
export function adminOpcodeName(op: number): string {
  if (op === FABRICS_OPCODE) return 'FABRICS';
  return adminNames.get(op) ?? hexByte(op);
}

/** Name of an NVM I/O opcode ("READ"), or "FABRICS" for 0x7F, or "0xNN" if unknown. */
export function nvmOpcodeName(op: number): string {
  if (op === FABRICS_OPCODE) return 'FABRICS';
  return nvmNames.get(op) ?? hexByte(op);
}

/**
 * Labels for stats and /metrics, one scheme for both sets: the spec mnemonic in kebab case ("identify",
 * "get-log-page", "write-zeroes", "resv-register"), else "admin-0xNN" / "io-0xNN". 256 per set at most, so a host
 * sending odd opcodes cannot grow the label set without bound. Built once: admin commands look theirs up per command.
 */
function labels(names: ReadonlyMap<number, string>, set: string): readonly string[] {
  return Array.from({ length: 256 }, (_, op) => names.get(op)?.toLowerCase().replace(/_/g, '-') ?? `${set}-${hexByte(op)}`);
}
const ADMIN_LABELS = labels(adminNames, 'admin');
const IO_LABELS = labels(nvmNames, 'io');

/** The stats / metrics label of an admin or NVM I/O opcode (see `labels`). */
export function opcodeLabel(set: 'admin' | 'io', op: number): string {
  return (set === 'admin' ? ADMIN_LABELS : IO_LABELS)[op & 0xff] ?? `${set}-${hexByte(op)}`;
}

/** Data transfer direction of a command. */
export const DataDirection = { NONE: 'none', H2C: 'h2c', C2H: 'c2h', BIDI: 'bidi' } as const;
export type DataDirection = (typeof DataDirection)[keyof typeof DataDirection];

/**
 * Direction from opcode bits 1:0 (NVMe Base 2.0 §5 "Opcodes": 00 none, 01 host to controller,
 * 10 controller to host, 11 bidirectional). The same rule applies to FCTYPE (NVMe-oF 1.1 §6.1),
 * which is why 0x7F itself reads as 'bidi'.
 */
export function opcodeDataDirection(op: number): DataDirection {
  switch (op & 0x3) {
    case 0:
      return 'none';
    case 1:
      return 'h2c';
    case 2:
      return 'c2h';
    default:
      return 'bidi';
  }
}
