// A namespace: NSID, LBA format, identifiers and the backend holding its blocks (nvmet_ns).
import { Buffer } from 'node:buffer';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { InvalidArgumentError, parseUuid } from '../../protocol/index.js';
import { PersistedLbaRanges, type NamespaceBackend } from '../backend/index.js';
import type { NamespaceConfig } from '../model/config.js';
import { ReservationState, type ResvEvents } from './reservation.js';
import { ZoneSet, zoneGeometry, zonedBytes, type ZoneStore } from './zoned.js';

/** Events of a namespace not (yet) in a subsystem: nobody to notify, nothing to persist. */
const DETACHED_EVENTS: ResvEvents = { notify: () => undefined, changed: () => undefined };

export interface NamespaceCounters {
  reads: number;
  writes: number;
  bytesRead: number;
  bytesWritten: number;
  flushes: number;
  errors: number;
  /**
   * Write-type commands refused because this gateway's lease had passed (answered ANA Inaccessible for the host to
   * retry elsewhere, not counted in errors): by the check before the backend, or by the write fence at the storage
   * call (docs/gateway-groups.md, fencing).
   */
  fenced: number;
}

/**
 * A fused Compare and Write holding the namespace (target/core/fused.ts): commands reaching execute wait in `waiters`
 * (each resumes its command's execute); `check` starts the pair once no more than its `own` commands execute here.
 */
export interface NsExclusive {
  readonly own: number;
  readonly waiters: Array<() => void>;
  started: boolean;
  check(): void;
}

export class TargetNamespace {
  readonly blockSize: number;
  readonly lbaShift: number;
  /** Size in LBAs (NSZE = NCAP = NUSE). */
  readonly nsze: number;
  readonly uuid: Buffer;
  readonly nguid: Buffer;
  readonly anaGroup: number;
  /**
   * Writes are refused with Namespace is Write Protected: the config's readOnly, or a Namespace Write Protection
   * Config the host set (FID 84h). A field: parseIoCmd reads it per command. Only setWriteProtect changes it.
   */
  readOnly: boolean;
  /** Write Protection State the host set with FID 84h (NVMe Base 2.0 §5.27.1.25; NwpState). */
  writeProtect = 0;
  /**
   * Blocks Write Uncorrectable marked (NVM Command Set 1.0 §3.2.7): they read back Unrecovered Read Error until
   * written. Beside a file namespace's data so they survive a restart.
   */
  readonly uncor: PersistedLbaRanges;
  readonly counters: NamespaceCounters = { reads: 0, writes: 0, bytesRead: 0, bytesWritten: 0, flushes: 0, errors: 0, fenced: 0 };
  /**
   * Attached to the subsystem's controllers (nvmet_ns.enabled). A field, not a getter over the config: parseIoCmd
   * reads it on every I/O command. Only Subsystem.setNamespaceEnabled / replaceNamespace change it.
   */
  enabled: boolean;
  /** Commands of this namespace between execute and completion (QueueModel counts them); a remap waits for 0 before closing the old backend. */
  executing = 0;
  /** Set while a fused Compare and Write holds the namespace (NsExclusive); checked on execute and completion. */
  exclusive: NsExclusive | undefined = undefined;
  /**
   * Reservation state (NVMe Base 2.0 §8.19). Owned by the subsystem, which hands the same object to each namespace
   * re-mapped under this NSID (Subsystem.addNamespace / replaceNamespace): a remap keeps registrations.
   */
  resv: ReservationState;
  /**
   * Host NQNs this namespace is attached to (namespace masking); undefined = visible to every allowed host. A field:
   * the data path reads it per command. Only Subsystem.setNamespaceHosts changes it after construction.
   */
  hostMask: Set<string> | undefined;
  /** The zones of a zoned namespace (ZNS 1.1, CSI 02h); undefined: a conventional NVM namespace. */
  readonly zones: ZoneSet | undefined;
  /** Where the zone state persists (file namespaces; set by the service once restored); undefined: in memory only. */
  zoneStore: ZoneStore | undefined;

  constructor(
    readonly subnqn: string,
    readonly config: NamespaceConfig,
    readonly backend: NamespaceBackend,
  ) {
    this.blockSize = config.blockSize ?? 512;
    this.lbaShift = this.blockSize === 4096 ? 12 : 9;
    this.nsze = Math.floor(backend.size / this.blockSize);
    if (config.zoned !== undefined) {
      const g = zoneGeometry(zonedBytes(config.zoned), this.blockSize, this.nsze * this.blockSize);
      if ('problem' in g) throw new InvalidArgumentError(`namespaces.${g.field}`, g.problem);
      this.zones = new ZoneSet(g);
    }
    // NGUID/UUID must be globally unique and must not change across restarts (NVMe Base 2.0 §4.7.1) → hash of (subnqn, nsid).
    const h = createHash('sha256').update(`${subnqn}\0${config.nsid}`).digest();
    this.uuid = config.uuid !== undefined ? parseUuid(config.uuid) : uuidFromHash(h.subarray(0, 16));
    this.nguid = config.nguid !== undefined ? Buffer.from(config.nguid.replace(/-/g, ''), 'hex') : Buffer.from(h.subarray(16, 32));
    this.anaGroup = config.anaGroup ?? 1;
    this.readOnly = config.readOnly ?? false;
    // Beside a regular file only: a block device's folder (/dev) is no place for it, and its marks last until restart.
    this.uncor = new PersistedLbaRanges(config.backend.type === 'file' && isRegularFile(config.backend.path) ? `${config.backend.path}.uncor` : undefined);
    this.enabled = config.enabled ?? true;
    this.resv = new ReservationState(config.nsid, DETACHED_EVENTS);
    this.hostMask = config.hosts === undefined ? undefined : new Set(config.hosts);
  }

  /** Sets the host's Write Protection State (FID 84h); the config's readOnly stays in force whatever it is. */
  setWriteProtect(wps: number): void {
    this.writeProtect = wps;
    this.readOnly = (this.config.readOnly ?? false) || wps !== 0;
  }

  /** Whether host `hostnqn` may see this namespace at all (masking), enabled or not. */
  visibleTo(hostnqn: string): boolean {
    return this.hostMask === undefined || this.hostMask.has(hostnqn);
  }

  get nsid(): number {
    return this.config.nsid;
  }

  /**
   * Resolves once no command executes on this namespace any more (a detached or replaced one, before its backend
   * closes: nvmet_ns_disable waits for the namespace's references the same way), or after `timeoutMs`: false then.
   */
  async idle(timeoutMs = 10_000): Promise<boolean> {
    const end = Date.now() + timeoutMs;
    while (this.executing > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 2));
    return this.executing === 0;
  }

  /** The config with the live enabled state (`enabled` only when false, so a saved config keeps its shape). */
  snapshot(): NamespaceConfig {
    const { enabled: _e, hosts: _h, ...rest } = this.config;
    const out: NamespaceConfig = this.enabled ? rest : { ...rest, enabled: false };
    if (this.hostMask !== undefined) out.hosts = [...this.hostMask];
    return out;
  }
}

function isRegularFile(p: string): boolean {
  try {
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

function uuidFromHash(b: Buffer): Buffer {
  const u = Buffer.from(b);
  // RFC 4122 name-based layout: version nibble and variant bits, so tools display it as a valid UUID.
  u[6] = ((u[6] as number) & 0x0f) | 0x50;
  u[8] = ((u[8] as number) & 0x3f) | 0x80;
  return u;
}

/** UUID text form (protocol's), re-exported for the core's users. */
export { formatUuid, parseUuid } from '../../protocol/index.js';
