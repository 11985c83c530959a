// The host's NQN and ID as nvme-cli finds them: the flags, else /etc/nvme/hostnqn and /etc/nvme/hostid, else one
// identity made up once and kept in a per-user state file, so every run is the same host to the target (its
// allow list, its reservations: a registrant is its Host Identifier, NVMe Base 2.0 §8.19).
import { createHash, randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isUuid, makeHostNqn, uuidFromNqn } from '../protocol/index.js';
import { UsageError } from './args.js';

/** Where nvme-cli's hostnqn / hostid files live; NVME_TCP_ETC_NVME points elsewhere (tests, containers). */
export function etcNvmeDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.NVME_TCP_ETC_NVME ?? '/etc/nvme';
}

/** The per-user file that keeps the generated identity: $XDG_STATE_HOME/nvme-tcp/host.json (~/.local/state). */
export function identityFile(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_STATE_HOME !== undefined && env.XDG_STATE_HOME !== '' ? env.XDG_STATE_HOME : path.join(os.homedir(), '.local', 'state');
  return path.join(base, 'nvme-tcp', 'host.json');
}

export interface HostIdentity {
  hostnqn: string;
  hostid: string;
  /** Where each came from: "flag", the file read, or "generated". */
  source: { hostnqn: string; hostid: string };
}

function firstLine(file: string): string | undefined {
  try {
    const l = (readFileSync(file, 'utf8').split('\n')[0] ?? '').trim();
    return l === '' ? undefined : l;
  } catch {
    return undefined;
  }
}

/** The identity kept in the state file, made (atomically) on first use. */
function storedIdentity(env: NodeJS.ProcessEnv): { hostnqn: string; hostid: string } {
  const file = identityFile(env);
  try {
    const st = JSON.parse(readFileSync(file, 'utf8')) as { hostnqn?: unknown; hostid?: unknown };
    if (typeof st.hostnqn === 'string' && typeof st.hostid === 'string' && isUuid(st.hostid)) return { hostnqn: st.hostnqn, hostid: st.hostid };
  } catch {
    // missing or unreadable: make one below
  }
  const hostid = randomUUID();
  const made = { hostnqn: makeHostNqn(hostid), hostid };
  try {
    mkdirSync(path.dirname(file), { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, `${JSON.stringify(made, null, 2)}\n`);
    renameSync(tmp, file);
  } catch {
    // A read-only home: this run still works, with an identity of its own.
  }
  return made;
}

/** A host ID that follows from a host NQN (the same NQN gives the same ID on every run): a name-based UUID. */
function hostidForNqn(hostnqn: string): string {
  const h = createHash('sha1').update(`nvme-tcp-ts hostid\0${hostnqn}`).digest();
  h[6] = ((h[6] ?? 0) & 0x0f) | 0x50; // version 5 (RFC 9562 §5.5)
  h[8] = ((h[8] ?? 0) & 0x3f) | 0x80; // variant
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/** --hostnqn / --hostid, else the /etc/nvme files, else the kept identity; never a new one per run. */
export function resolveHostIdentity(flags: { hostnqn?: string | undefined; hostid?: string | undefined }, env: NodeJS.ProcessEnv = process.env): HostIdentity {
  if (flags.hostid !== undefined && !isUuid(flags.hostid)) throw new UsageError(`--hostid ${flags.hostid}: not a UUID; use e.g. ${randomUUID()}`);
  const dir = etcNvmeDir(env);
  const fileNqn = flags.hostnqn === undefined ? firstLine(path.join(dir, 'hostnqn')) : undefined;
  const fileId = flags.hostid === undefined ? firstLine(path.join(dir, 'hostid')) : undefined;
  if (fileId !== undefined && !isUuid(fileId)) throw new UsageError(`${path.join(dir, 'hostid')}: "${fileId}" is not a UUID; fix the file or give --hostid`);
  let hostnqn = flags.hostnqn ?? fileNqn;
  let hostid = flags.hostid ?? fileId;
  const source = { hostnqn: flags.hostnqn !== undefined ? 'flag' : fileNqn !== undefined ? path.join(dir, 'hostnqn') : 'generated', hostid: flags.hostid !== undefined ? 'flag' : fileId !== undefined ? path.join(dir, 'hostid') : 'generated' };
  if (hostnqn === undefined && hostid === undefined) {
    ({ hostnqn, hostid } = storedIdentity(env));
    source.hostnqn = source.hostid = identityFile(env);
  }
  else if (hostid === undefined) hostid = uuidFromNqn(hostnqn ?? '') ?? hostidForNqn(hostnqn ?? '');
  else hostnqn ??= makeHostNqn(hostid);
  return { hostnqn: hostnqn ?? '', hostid: (hostid ?? '').toLowerCase(), source };
}

/**
 * The one-line warning for `-q` without `-I` while the hostid file supplies the host ID: every such NQN is the same
 * host to a target's reservations (a registrant is its Host Identifier, NVMe Base 2.0 §8.19.1), which a user giving a
 * second NQN rarely means. undefined when the ID came from -I or follows from the NQN.
 */
export function sharedHostIdWarning(flags: { hostnqn?: string | undefined; hostid?: string | undefined }, id: HostIdentity): string | undefined {
  if (flags.hostnqn === undefined || flags.hostid !== undefined || id.source.hostid === 'generated') return undefined;
  return `warning: -q ${flags.hostnqn} keeps the host ID in ${id.source.hostid} (${id.hostid}), so every -q NQN is one host to the target's reservations; give -I UUID for a host of its own`;
}
