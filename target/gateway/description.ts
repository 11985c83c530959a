// What every gateway of a group must serve identically: per subsystem its NQN and per namespace its NSID, size, block
// size and ANA group id (NVMe Base 2.0 §8.1.2: the ANA group a namespace belongs to is reported in Identify Namespace
// ANAGRPID and must be the same on every controller). The first gateway writes it into the group record; a later
// joiner whose description differs is refused with describeDifference's line.
import { createHash } from 'node:crypto';

export interface NamespaceDescription {
  nsid: number;
  /** Bytes, as a decimal string (sizes may exceed 2^53). */
  size: string;
  blockSize: number;
  anagrpid: number;
}

export interface SubsystemDescription {
  nqn: string;
  namespaces: NamespaceDescription[];
}

export interface GroupDescription {
  subsystems: SubsystemDescription[];
}

/** Sorted copy: the same set in any order describes the same thing. */
export function canonical(d: GroupDescription): GroupDescription {
  return {
    subsystems: [...d.subsystems]
      .sort((a, b) => (a.nqn < b.nqn ? -1 : a.nqn > b.nqn ? 1 : 0))
      .map((s) => ({
        nqn: s.nqn,
        namespaces: [...s.namespaces]
          .sort((a, b) => a.nsid - b.nsid)
          .map((n) => ({ nsid: n.nsid, size: n.size, blockSize: n.blockSize, anagrpid: n.anagrpid })),
      })),
  };
}

export function descriptionDigest(d: GroupDescription): string {
  return createHash('sha256').update(JSON.stringify(canonical(d))).digest('hex');
}

/** The ANA group ids a description uses, ascending. */
export function anaGroupIds(d: GroupDescription): number[] {
  return [...new Set(d.subsystems.flatMap((s) => s.namespaces.map((n) => n.anagrpid)))].sort((a, b) => a - b);
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
    for (const na of sa.namespaces) {
      const nb = sb.namespaces.find((n) => n.nsid === na.nsid);
      if (nb === undefined) return `subsystem ${sa.nqn} namespace ${na.nsid} is served here but not in the group's record`;
      for (const [field, label] of [
        ['size', 'size'],
        ['blockSize', 'block size'],
        ['anagrpid', 'ANA group id'],
      ] as const) {
        if (na[field] !== nb[field]) {
          return `subsystem ${sa.nqn} namespace ${na.nsid}: ${label} ${na[field]} here, ${nb[field]} in the group's record`;
        }
      }
    }
    for (const nb of sb.namespaces) {
      if (!sa.namespaces.some((n) => n.nsid === nb.nsid)) {
        return `subsystem ${sa.nqn} namespace ${nb.nsid} is in the group's record but not served here`;
      }
    }
  }
  return undefined;
}
