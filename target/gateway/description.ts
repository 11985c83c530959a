// What every gateway of a group must serve identically for hosts to see one NVM subsystem through all of them: per
// subsystem its NQN, serial and model (Identify Controller SN/MN are per subsystem, NVMe Base 2.0 §5.17.2.1; a host
// that sees two serials for one NQN treats them as two subsystems), its host access list (allowAnyHost, hosts), and
// per namespace its NSID, size, block size, ANA group id (§8.1.2: ANAGRPID must be the same on every controller),
// UUID and NGUID (§4.7.1: namespace identifiers must be the same whichever controller reports them, or the host's
// multipath will not merge the paths), read-only and its host mask (namespace masking). Plus a SHA-256 digest of the
// DH-HMAC-CHAP / TLS key configuration: a host must authenticate the same way on every path; the keys themselves never
// leave the gateway. EUI64 is not configurable on this target (reported as zero everywhere), so it needs no check.
// The first gateway writes the description into the group record; a later joiner whose description differs is
// refused with describeDifference's line.
import { createHash } from 'node:crypto';
import type { HostConfig } from '../model/config.js';

export interface NamespaceDescription {
  nsid: number;
  /** Bytes, as a decimal string (sizes may exceed 2^53). */
  size: string;
  blockSize: number;
  anagrpid: number;
  // Optional (null once canonical) only so a bare description (ownership tests) stays valid; GatewayPart fills them.
  /** Effective UUID (configured or derived), hex. */
  uuid?: string | null;
  /** Effective NGUID, hex. */
  nguid?: string | null;
  readOnly?: boolean | null;
  /** Namespace masking: the host NQNs it is attached to, sorted; null = every allowed host. */
  hosts?: string[] | null;
}

export interface SubsystemDescription {
  nqn: string;
  serial?: string | null;
  model?: string | null;
  allowAnyHost?: boolean | null;
  /** Allowed host NQNs, sorted. */
  hosts?: string[] | null;
  namespaces: NamespaceDescription[];
}

export interface GroupDescription {
  subsystems: SubsystemDescription[];
  /** SHA-256 (hex) of the host key configuration, keysDigest(); '' when no host has keys. Never the keys. */
  keys?: string;
}

const byString = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Sorted copy, every optional field present (null when unset): the same set in any order describes the same thing. */
export function canonical(d: GroupDescription): GroupDescription & { keys: string } {
  return {
    subsystems: [...d.subsystems]
      .sort((a, b) => byString(a.nqn, b.nqn))
      .map((s) => ({
        nqn: s.nqn,
        serial: s.serial ?? null,
        model: s.model ?? null,
        allowAnyHost: s.allowAnyHost ?? null,
        hosts: s.hosts === undefined || s.hosts === null ? null : [...s.hosts].sort(byString),
        namespaces: [...s.namespaces].sort((a, b) => a.nsid - b.nsid).map(canonicalNamespace),
      })),
    keys: d.keys ?? '',
  };
}

function canonicalNamespace(n: NamespaceDescription): NamespaceDescription {
  return {
    nsid: n.nsid,
    size: n.size,
    blockSize: n.blockSize,
    anagrpid: n.anagrpid,
    uuid: n.uuid ?? null,
    nguid: n.nguid ?? null,
    readOnly: n.readOnly ?? null,
    hosts: n.hosts === undefined || n.hosts === null ? null : [...n.hosts].sort(byString),
  };
}

export function descriptionDigest(d: GroupDescription): string {
  return createHash('sha256').update(JSON.stringify(canonical(d))).digest('hex');
}

/**
 * SHA-256 of the host key configuration (DH-HMAC-CHAP keys, hashes, DH groups, TLS PSKs and their HKDF encoding),
 * canonical (hosts by NQN, fields by name); '' when there is none. Two gateways with the same keys get the same digest;
 * the keys cannot be read back from it (they are random secrets of at least 256 bits).
 */
export function keysDigest(hosts: readonly HostConfig[] | undefined): string {
  if (hosts === undefined || hosts.length === 0) return '';
  const rows = [...hosts]
    .sort((a, b) => byString(a.nqn, b.nqn))
    .map((h) => Object.fromEntries(Object.entries(h).sort(([a], [b]) => byString(a, b))));
  return createHash('sha256').update(JSON.stringify(rows)).digest('hex');
}

/** The ANA group ids a description uses, ascending. */
export function anaGroupIds(d: GroupDescription): number[] {
  return [...new Set(d.subsystems.flatMap((s) => s.namespaces.map((n) => n.anagrpid)))].sort((a, b) => a - b);
}

const show = (v: unknown): string => (v === null ? 'unset' : Array.isArray(v) ? `[${v.join(',')}]` : String(v));

/** The first differing field of two canonical records, as "LABEL X here, Y in the group's record". */
function fieldDifference<T extends object>(a: T, b: T, fields: readonly (readonly [keyof T, string])[]): string | undefined {
  for (const [field, label] of fields) {
    if (JSON.stringify(a[field]) !== JSON.stringify(b[field])) {
      return `${label} ${show(a[field])} here, ${show(b[field])} in the group's record`;
    }
  }
  return undefined;
}

const SUBSYSTEM_FIELDS = [
  ['serial', 'serial'],
  ['model', 'model'],
  ['allowAnyHost', 'allowAnyHost'],
  ['hosts', 'allowed hosts'],
] as const;
const NAMESPACE_FIELDS = [
  ['size', 'size'],
  ['blockSize', 'block size'],
  ['anagrpid', 'ANA group id'],
  ['uuid', 'UUID'],
  ['nguid', 'NGUID'],
  ['readOnly', 'read-only'],
  ['hosts', 'host mask'],
] as const;

function namespacesDifference(sa: SubsystemDescription, sb: SubsystemDescription): string | undefined {
  for (const na of sa.namespaces) {
    const nb = sb.namespaces.find((n) => n.nsid === na.nsid);
    if (nb === undefined) return `subsystem ${sa.nqn} namespace ${na.nsid} is served here but not in the group's record`;
    const d = fieldDifference(na, nb, NAMESPACE_FIELDS);
    if (d !== undefined) return `subsystem ${sa.nqn} namespace ${na.nsid}: ${d}`;
  }
  for (const nb of sb.namespaces) {
    if (!sa.namespaces.some((n) => n.nsid === nb.nsid)) {
      return `subsystem ${sa.nqn} namespace ${nb.nsid} is in the group's record but not served here`;
    }
  }
  return undefined;
}

/** One line naming the first difference between this gateway's description (`mine`) and the group's, or undefined. */
export function describeDifference(mine: GroupDescription, group: GroupDescription): string | undefined {
  const a = canonical(mine);
  const b = canonical(group);
  const nqnsA = a.subsystems.map((s) => s.nqn);
  const nqnsB = b.subsystems.map((s) => s.nqn);
  for (const n of nqnsA) if (!nqnsB.includes(n)) return `subsystem ${n} is served here but not in the group's record`;
  for (const n of nqnsB) if (!nqnsA.includes(n)) return `subsystem ${n} is in the group's record but not served here`;
  for (const sa of a.subsystems) {
    const sb = b.subsystems.find((s) => s.nqn === sa.nqn) as SubsystemDescription;
    const d = fieldDifference(sa, sb, SUBSYSTEM_FIELDS);
    if (d !== undefined) return `subsystem ${sa.nqn}: ${d}`;
    const nd = namespacesDifference(sa, sb);
    if (nd !== undefined) return nd;
  }
  // The digest only: which host's key differs is not said, so the line gives nothing away about the keys.
  if (a.keys !== b.keys) return "host key configuration (DH-HMAC-CHAP/TLS) differs from the group's record (digest mismatch)";
  return undefined;
}
