// Config objects into core objects: the rules a config must meet beyond its shape (the same whether it came from a
// file, the HTTP API or the CLI), name warnings, and the backend a namespace config opens.
import type { Logger } from 'pino';
import { InvalidArgumentError, validateNvmetName } from '../../protocol/index.js';
import { FileBackend, NullBackend, RamBackend, type FileBackendOptions, type NamespaceBackend, type WriteFence } from '../backend/index.js';
import { nqnWarning } from '../config/schema.js';
import { parseSize } from '../../protocol/values/index.js';
import type { NamespaceConfig, PortConfig, SubsystemConfig } from '../model/config.js';
import { CNTLID_MAX, CNTLID_MIN, WELL_KNOWN_DISCOVERY_NQN, type Subsystem, type TargetCore } from '../core/index.js';
import { PLACEMENT_LIST, ShmBackend, isPlacement, type Placement } from '../workers/index.js';

/** nvmet's name rules (1..223 bytes, no NUL); a name that is not a well-formed NQN passes with one warning line. */
export function checkName(log: Logger, field: string, kind: 'subsystem' | 'host', name: string): void {
  const v = validateNvmetName(name);
  if (!v.ok) throw new InvalidArgumentError(field, `${name}: ${v.reason}`);
  warnName(log, kind, name);
}

export function warnName(log: Logger, kind: 'subsystem' | 'host', name: string): void {
  const w = nqnWarning(kind, name);
  if (w !== undefined) log.warn(w);
}

/** A placement policy by name; `orNull`: null is allowed too (a port back to the target-wide one). */
export function checkPlacement(field: string, p: string, orNull = false): Placement {
  if (!isPlacement(p)) throw new InvalidArgumentError(field, `unknown placement ${JSON.stringify(p)}; use one of ${PLACEMENT_LIST}${orNull ? ', or null for the target-wide one' : ''}`);
  return p;
}

export function checkPort(p: PortConfig): void {
  const maxh2c = p.maxH2CData ?? 131072;
  if (maxh2c < 4096 || maxh2c % 4 !== 0) throw new InvalidArgumentError('ports.maxH2CData', 'must be a multiple of 4 and at least 4096 (NVMe/TCP 1.0 §3.6.2.3)');
  if ((p.inlineDataSize ?? 16384) % 16 !== 0) throw new InvalidArgumentError('ports.inlineDataSize', 'must be a multiple of 16 (IOCCSZ is in 16-byte units)');
  if ((p.c2hDataSize ?? 131072) < 512) throw new InvalidArgumentError('ports.c2hDataSize', 'must be at least 512');
  if (p.tlsConcat === true && (p.tls ?? 'none') === 'none') throw new InvalidArgumentError('ports.tlsConcat', 'needs a TLS port; set tls to "allowed" or "required"');
}

/** A new subsystem's NQN, hosts and controller-ID range; warns about names that are not well-formed NQNs. */
export function checkSubsystem(log: Logger, core: TargetCore, s: SubsystemConfig): void {
  // nvmet_subsys_make refuses only the discovery NQNs (and nvmet_subsys_alloc names over 223 bytes).
  if (s.nqn === WELL_KNOWN_DISCOVERY_NQN || s.nqn === core.uniqueDiscoveryNqn) throw new InvalidArgumentError('subsystems.nqn', 'is a discovery NQN');
  if (core.subsystems.has(s.nqn)) throw new InvalidArgumentError('subsystems.nqn', `${s.nqn} already exists`);
  const v = validateNvmetName(s.nqn);
  if (!v.ok) throw new InvalidArgumentError('subsystems.nqn', `${s.nqn}: ${v.reason}`);
  for (const h of s.hosts ?? []) {
    const hv = validateNvmetName(h);
    if (!hv.ok) throw new InvalidArgumentError('subsystems.hosts', `${h}: ${hv.reason}`);
  }
  checkCntlidRange(s.cntlidMin ?? CNTLID_MIN, s.cntlidMax ?? CNTLID_MAX);
  warnName(log, 'subsystem', s.nqn);
  for (const h of s.hosts ?? []) warnName(log, 'host', h);
}

/** The controller-ID range rules of nvmet attr_cntlid_min/max: 1 <= min <= max <= FFEFh. */
export function checkCntlidRange(min: number, max: number): void {
  if (!Number.isInteger(min) || min < CNTLID_MIN || min > CNTLID_MAX) throw new InvalidArgumentError('cntlidMin', `${min} is not a controller ID; use ${CNTLID_MIN}..${CNTLID_MAX}`);
  if (!Number.isInteger(max) || max < CNTLID_MIN || max > CNTLID_MAX) throw new InvalidArgumentError('cntlidMax', `${max} is not a controller ID; use ${CNTLID_MIN}..${CNTLID_MAX}`);
  if (min > max) throw new InvalidArgumentError('cntlidMin', `${min} is above cntlidMax ${max}; make cntlidMin <= cntlidMax`);
}

/** A namespace config's NSID, block size, ANA group and masked hosts, before anything is opened. */
export function checkNamespace(log: Logger, sub: Subsystem, cfg: NamespaceConfig): void {
  if (!Number.isInteger(cfg.nsid) || cfg.nsid < 1 || cfg.nsid >= 0xffff_fffe) throw new InvalidArgumentError('namespaces.nsid', `invalid NSID ${cfg.nsid}`);
  const bs = cfg.blockSize ?? 512;
  if (bs !== 512 && bs !== 4096) throw new InvalidArgumentError('namespaces.blockSize', 'must be 512 or 4096');
  if ((cfg.anaGroup ?? 1) < 1 || (cfg.anaGroup ?? 1) > 128) throw new InvalidArgumentError('namespaces.anaGroup', 'must be 1..128');
  for (const h of cfg.hosts ?? []) checkMaskHost(log, sub, h);
}

/** A namespace may be attached only to a host the subsystem lets in (namespaces[].hosts, attach). */
export function checkMaskHost(log: Logger, sub: Subsystem, hostnqn: string): void {
  checkName(log, 'namespaces.hosts', 'host', hostnqn);
  if (!sub.allowAnyHost && !sub.hosts.has(hostnqn)) {
    throw new InvalidArgumentError('namespaces.hosts', `${JSON.stringify(hostnqn)} is not a host of ${sub.nqn}; allow it on the subsystem first or leave it out`);
  }
}

/** Deep equality of two config values, key order ignored (a body may list keys in any order). */
export function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v).sort()) out[k] = canonical((v as Record<string, unknown>)[k]);
  return out;
}

/** Whether workers cache a shared RAM namespace's blocks (BackendConfig workerCache, default true). */
export function workerCache(cfg: NamespaceConfig): boolean {
  return cfg.backend.type !== 'ram' || cfg.backend.workerCache !== false;
}

/**
 * `shared`: workers > 1, so a RAM namespace lives in a tmpfs file every worker maps (target/workers/shm-backend.ts).
 * `fence`: a gateway's; a file namespace's writes go through it (docs/gateway-groups.md, "Fencing at the storage call").
 */
export async function openBackend(cfg: NamespaceConfig, shared: boolean, fence?: WriteFence): Promise<NamespaceBackend> {
  const b = cfg.backend;
  switch (b.type) {
    case 'ram':
      if (shared) return ShmBackend.create(parseSize(b.size, 'backend.size'));
      return new RamBackend(parseSize(b.size, 'backend.size'));
    case 'null':
      return new NullBackend(parseSize(b.size, 'backend.size'));
    case 'file': {
      const opts: FileBackendOptions = { path: b.path };
      if (b.size !== undefined) opts.size = parseSize(b.size, 'backend.size');
      if (cfg.readOnly === true) opts.readOnly = true;
      if (fence !== undefined) opts.fence = fence;
      return FileBackend.open(opts);
    }
  }
}
