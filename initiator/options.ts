// Connect options with nvme-cli / Linux fabrics names and defaults (drivers/nvme/host/fabrics.c nvmf_parse_options),
// validated before any socket opens; plus the process-wide host identity and duplicate-connect registries.
import fs from 'node:fs';
import os from 'node:os';
import net from 'node:net';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { DISCOVERY_NQN, KATO_MAX_MS, NQN_UUID_PREFIX, isUuid, uuidFromNqn, validateNvmetName } from '../protocol/index.js';
import type { DhchapKey } from '../protocol/auth/index.js';
import { parseSecretOption } from './auth.js';
import { InvalidArgumentError } from './errors.js';
import { resolveTls, type TlsOptions } from './tls.js';

/** Options accepted by connect()/discover(), named as nvme-cli names them (snake_case, as /dev/nvme-fabrics takes them). */
export interface ConnectOptions {
  /** Target address (-a). */
  traddr: string;
  /** Target port (-s); default 4420 (8009 for discover). */
  trsvcid?: number;
  /** Subsystem NQN (-n); discover() uses the well-known discovery NQN. */
  nqn?: string;
  /** Host NQN (-q); default nqn.2014-08.org.nvmexpress:uuid:<hostid>. */
  hostnqn?: string;
  /** Host identifier UUID (-I); default the UUID in hostnqn, else a process-wide random UUID. */
  hostid?: string;
  /** Source address to bind (-w). */
  host_traddr?: string;
  /** Source interface (-f): binds to that interface's first address (Node has no SO_BINDTODEVICE). */
  host_iface?: string;
  /** Read/default I/O queues (-i); default os.availableParallelism(). Not clamped to the CPU count. */
  nr_io_queues?: number;
  /** Extra queues dedicated to writes (-W); default 0. */
  nr_write_queues?: number;
  /** Extra "poll" queues (-P); Node cannot poll, they form a separate hctx type; default 0. */
  nr_poll_queues?: number;
  /** I/O queue depth (-Q), 16..1024; default 128. */
  queue_size?: number;
  /** Keep-alive timeout in seconds (-k), 0..4294967 (KATO is 32 bits of ms on the wire); default 5 (0 for discovery). */
  keep_alive_tmo?: number;
  /** Seconds between reconnect attempts (-c); default 10. */
  reconnect_delay?: number;
  /** Seconds of reconnecting before giving up (-l); default 600; negative = forever. */
  ctrl_loss_tmo?: number;
  /** Seconds of reconnecting after which queued I/O fails (-F); -1 = never (default). */
  fast_io_fail_tmo?: number;
  /** Header digest (-g). */
  hdr_digest?: boolean;
  /** Data digest (-G). */
  data_digest?: boolean;
  /** Allow a second controller with the same identity tuple (-D). */
  duplicate_connect?: boolean;
  /** Connect CATTR bit 2: disable SQ flow control. */
  disable_sqflow?: boolean;
  /** IP TOS byte (-T). Only -1 (the default: leave it alone) is accepted (tosRefusal says why on the running Node.js). */
  tos?: number;
  /** Transport queues per hctx (queue group size), 1..16; default 1. */
  queues_per_hctx?: number;
  /** Limit I/O queues to min(CPUs, NIC rx/tx queues) unless nr_io_queues was given. */
  match_hw_queues?: boolean;
  /** How many I/O queues connect at once; default all (Linux: 1). */
  connect_concurrency?: number;
  /** I/O command timeout in seconds; default 30. */
  io_timeout?: number;
  /** Admin command timeout in seconds; default 60. */
  admin_timeout?: number;
  /** Retries of an I/O command failed with an NVMe status whose DNR bit is clear, or timed out, 0..255; default 5 (Linux nvme_core.max_retries). */
  max_retries?: number;
  /** DH-HMAC-CHAP host secret "DHHC-1:xx:...:" (-S, nvme-cli --dhchap-secret): used when the controller sets ATR. */
  dhchap_secret?: string;
  /** DH-HMAC-CHAP controller secret (-C, --dhchap-ctrl-secret): also authenticate the controller (bidirectional). */
  dhchap_ctrl_secret?: string;
  /** I/O queues run in this many worker_threads (io workers, the io_cpu analogue); 0 (default): on the calling thread. */
  io_workers?: number;
  /** Pin io worker i to CPU io_worker_cpus[i % length] (per-thread affinity); each CPU must be in the process's allowed set. */
  io_worker_cpus?: number[];
  /** Microseconds an io worker processes submissions before yielding to its event loop; default 1000 (io_work's 1 ms). */
  io_budget_us?: number;
  /** TLS 1.3 with a PSK (TP 8011; nvme-cli --tls); needs tls_key here (no kernel keyring). */
  tls?: boolean;
  /** Configured PSK "NVMeTLSkey-1:01:...:" (nvme-cli --tls-key, as nvme gen-tls-key prints it); implies tls. SHA-256 only. */
  tls_key?: string;
  /** PSK identity version: 0 (default, NVMe0R01) or 1 (NVMe1R01 with the PSK digest). */
  tls_identity_version?: 0 | 1;
  /** HkdfLabel encoding of the derivation: "rfc8446" (default) or "pre-2025" (older libnvme); docs/tls.md. */
  tls_hkdf?: 'rfc8446' | 'pre-2025';
  /**
   * Secure channel concatenation (TP 8018; nvme-cli --concat, Linux 6.15+): DH-HMAC-CHAP on a cleartext admin queue
   * with SC_C NEWTLSPSK generates the TLS PSK, then the admin queue reconnects and every queue runs inside TLS with it.
   * Needs dhchap_secret; not with tls/tls_key (the PSK is generated, not configured) or io_workers. docs/tls.md.
   */
  concat?: boolean;
  /** pino logger; default silent. */
  logger?: Logger;
}

export interface ResolvedOptions {
  traddr: string;
  trsvcid: number;
  nqn: string;
  hostnqn: string;
  hostid: string;
  hostTraddr: string | undefined;
  hostIface: string | undefined;
  /** Source address derived from host_traddr or host_iface. */
  localAddress: string | undefined;
  nrIoQueues: number;
  nrIoQueuesExplicit: boolean;
  nrWriteQueues: number;
  nrPollQueues: number;
  queueSize: number;
  keepAliveTmo: number;
  reconnectDelay: number;
  ctrlLossTmo: number;
  fastIoFailTmo: number;
  hdrDigest: boolean;
  dataDigest: boolean;
  duplicateConnect: boolean;
  disableSqflow: boolean;
  tos: number;
  queuesPerHctx: number;
  matchHwQueues: boolean;
  connectConcurrency: number;
  ioTimeoutMs: number;
  adminTimeoutMs: number;
  maxRetries: number;
  discovery: boolean;
  /** Parsed dhchap_secret (prints redacted). */
  hostKey: DhchapKey | undefined;
  /** Parsed dhchap_ctrl_secret (prints redacted). */
  ctrlKey: DhchapKey | undefined;
  /** io workers (0: queues on the calling thread). */
  ioWorkers: number;
  /** CPU per worker (cycled), empty: not pinned. */
  ioWorkerCpus: number[];
  ioBudgetUs: number;
  /** TLS (tls/tls_key); the key prints redacted. */
  tls: TlsOptions | undefined;
  /** Secure channel concatenation (concat). */
  concat: boolean;
  logger: Logger | undefined;
}

const KNOWN = new Set<string>([
  'traddr', 'trsvcid', 'nqn', 'hostnqn', 'hostid', 'host_traddr', 'host_iface', 'nr_io_queues', 'nr_write_queues',
  'nr_poll_queues', 'queue_size', 'keep_alive_tmo', 'reconnect_delay', 'ctrl_loss_tmo', 'fast_io_fail_tmo', 'hdr_digest',
  'data_digest', 'duplicate_connect', 'disable_sqflow', 'tos', 'queues_per_hctx', 'match_hw_queues', 'connect_concurrency',
  'io_timeout', 'admin_timeout', 'max_retries', 'logger', 'dhchap_secret', 'dhchap_ctrl_secret',
  'io_workers', 'io_worker_cpus', 'io_budget_us', 'tls', 'tls_key', 'tls_identity_version', 'tls_hkdf',
  'concat',
]);

/** The CPUs this process may run on (Linux /proc/self/status Cpus_allowed_list); undefined where that is unknown. */
export function allowedCpus(): Set<number> | undefined {
  let text: string;
  try {
    text = fs.readFileSync('/proc/self/status', 'utf8');
  } catch {
    return undefined;
  }
  const m = /^Cpus_allowed_list:\s*(\S+)/m.exec(text);
  if (m === null) return undefined;
  const out = new Set<number>();
  for (const part of (m[1] as string).split(',')) {
    const [a, b] = part.split('-').map(Number);
    if (a === undefined || !Number.isInteger(a)) continue;
    for (let c = a; c <= (b ?? a); c++) out.add(c);
  }
  return out;
}

/** io_workers, io_worker_cpus, io_budget_us: counts and pinning checked here, before any socket or thread exists. */
function resolveIoWorkers(o: Raw): Pick<ResolvedOptions, 'ioWorkers' | 'ioWorkerCpus' | 'ioBudgetUs'> {
  const cpus = os.availableParallelism();
  const ioWorkers = int(o, 'io_workers', 0, 0, cpus * 4);
  const raw = o['io_worker_cpus'];
  let ioWorkerCpus: number[] = [];
  if (raw !== undefined) {
    if (!Array.isArray(raw) || raw.length === 0 || !raw.every((c) => typeof c === 'number' && Number.isInteger(c) && c >= 0)) {
      throw new InvalidArgumentError('io_worker_cpus', `must be a non-empty list of CPU numbers, got ${JSON.stringify(raw)}`);
    }
    if (ioWorkers === 0) throw new InvalidArgumentError('io_worker_cpus', 'needs io_workers > 0');
    const allowed = allowedCpus();
    if (allowed === undefined) throw new InvalidArgumentError('io_worker_cpus', `cannot pin threads here: no /proc/self/status (Linux only)`);
    const bad = (raw as number[]).filter((c) => !allowed.has(c));
    if (bad.length > 0) {
      throw new InvalidArgumentError('io_worker_cpus', `CPU ${bad.join(',')} not in this process's allowed set (${[...allowed].join(',')})`);
    }
    ioWorkerCpus = [...(raw as number[])];
  }
  const ioBudgetUs = int(o, 'io_budget_us', 1000, 1, 1_000_000);
  return { ioWorkers, ioWorkerCpus, ioBudgetUs };
}


let processHostId: string | undefined;
/** The process's default host identity (nvme-cli reads /etc/nvme/hostid; we generate one per process). */
export function defaultHostId(): string {
  processHostId ??= randomUUID();
  return processHostId;
}

function int(o: Record<string, unknown>, k: string, def: number, min: number, max: number): number {
  const v = o[k];
  if (v === undefined) return def;
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new InvalidArgumentError(k, `must be an integer, got ${JSON.stringify(v)}`);
  if (v < min || v > max) throw new InvalidArgumentError(k, `${v} outside ${min}..${max}`);
  return v;
}

function num(o: Record<string, unknown>, k: string, def: number, min: number, max: number): number {
  const v = o[k];
  if (v === undefined) return def;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new InvalidArgumentError(k, `must be a number, got ${JSON.stringify(v)}`);
  if (v < min || v > max) throw new InvalidArgumentError(k, `${v} outside ${min}..${max}`);
  return v;
}

function bool(o: Record<string, unknown>, k: string): boolean {
  const v = o[k];
  if (v === undefined) return false;
  if (typeof v !== 'boolean') throw new InvalidArgumentError(k, `must be a boolean, got ${JSON.stringify(v)}`);
  return v;
}

function str(o: Record<string, unknown>, k: string): string | undefined {
  const v = o[k];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.length === 0) throw new InvalidArgumentError(k, `must be a non-empty string`);
  return v;
}

/**
 * The target's own rule (protocol's validateNvmetName, as Linux nvmet): every name a target can serve is one this
 * host can ask for, e.g. `testnqn`; a name that is not a well-formed NQN (NVMe Base 2.0 §4.5) still goes out.
 */
function checkNqn(field: string, nqn: string): void {
  const v = validateNvmetName(nqn);
  if (!v.ok) throw new InvalidArgumentError(field, `${nqn}: ${v.reason}`);
}

function ifaceAddress(name: string): string {
  const addrs = os.networkInterfaces()[name];
  if (addrs === undefined) throw new InvalidArgumentError('host_iface', `no running interface named ${name} with an address`);
  const a = addrs.find((x) => x.family === 'IPv4') ?? addrs[0];
  if (a === undefined) throw new InvalidArgumentError('host_iface', `${name} has no address`);
  return a.address;
}

type Raw = Record<string, unknown>;

/** Where to connect: traddr, trsvcid (4420, or 8009 for discovery) and the subsystem NQN. */
function resolveTarget(o: Raw, discovery: boolean): Pick<ResolvedOptions, 'traddr' | 'trsvcid' | 'nqn'> {
  const traddr = str(o, 'traddr');
  if (traddr === undefined) throw new InvalidArgumentError('traddr', 'is required');
  const trsvcid = int(o, 'trsvcid', discovery ? 8009 : 4420, 1, 65535);
  let nqn = str(o, 'nqn');
  if (nqn === undefined) {
    if (!discovery) throw new InvalidArgumentError('nqn', 'is required');
    nqn = DISCOVERY_NQN;
  }
  checkNqn('nqn', nqn);
  return { traddr, trsvcid, nqn };
}

/** hostid and hostnqn, each derived from the other (or from the process identity) when missing. */
function resolveIdentity(o: Raw): Pick<ResolvedOptions, 'hostnqn' | 'hostid'> {
  let hostid = str(o, 'hostid');
  if (hostid !== undefined && !isUuid(hostid)) throw new InvalidArgumentError('hostid', `${hostid} is not a UUID`);
  let hostnqn = str(o, 'hostnqn');
  if (hostnqn !== undefined) checkNqn('hostnqn', hostnqn);
  if (hostid === undefined) {
    const fromNqn = hostnqn !== undefined ? uuidFromNqn(hostnqn) : undefined;
    hostid = fromNqn ?? (hostnqn !== undefined ? (hostRegistry.idFor(hostnqn) ?? randomUUID()) : defaultHostId());
  }
  hostid = hostid.toLowerCase();
  hostnqn ??= hostRegistry.nqnFor(hostid) ?? `${NQN_UUID_PREFIX}${hostid}`;
  return { hostnqn, hostid };
}

/** The local address the sockets bind to: host_traddr, else host_iface's address. */
function resolveSource(o: Raw): Pick<ResolvedOptions, 'hostTraddr' | 'hostIface' | 'localAddress'> {
  const hostTraddr = str(o, 'host_traddr');
  if (hostTraddr !== undefined && net.isIP(hostTraddr) === 0) throw new InvalidArgumentError('host_traddr', `${hostTraddr} is not an IP address`);
  const hostIface = str(o, 'host_iface');
  const localAddress = hostTraddr ?? (hostIface !== undefined ? ifaceAddress(hostIface) : undefined);
  return { hostTraddr, hostIface, localAddress };
}

type QueueCounts = Pick<ResolvedOptions, 'nrIoQueues' | 'nrIoQueuesExplicit' | 'nrWriteQueues' | 'nrPollQueues' | 'queueSize'>;

function resolveQueueCounts(o: Raw): QueueCounts {
  return {
    nrIoQueuesExplicit: o['nr_io_queues'] !== undefined,
    nrIoQueues: int(o, 'nr_io_queues', os.availableParallelism(), 1, 1024),
    nrWriteQueues: int(o, 'nr_write_queues', 0, 0, 1024),
    nrPollQueues: int(o, 'nr_poll_queues', 0, 0, 1024),
    queueSize: int(o, 'queue_size', 128, 16, 1024),
  };
}

/** Keep-alive and the reconnect timers (seconds, as nvme-cli takes them). */
function resolveRecovery(o: Raw, discovery: boolean): Pick<ResolvedOptions, 'keepAliveTmo' | 'reconnectDelay' | 'ctrlLossTmo' | 'fastIoFailTmo'> {
  // Connect sends keep_alive_tmo × 1000 in the 32-bit KATO (NVMe-oF 1.1 §3.3): any whole second that fits is legal.
  const keepAliveTmo = int(o, 'keep_alive_tmo', discovery ? 0 : 5, 0, Math.floor(KATO_MAX_MS / 1000));
  const reconnectDelay = num(o, 'reconnect_delay', 10, 0.001, 1e6);
  const ctrlLossTmo = num(o, 'ctrl_loss_tmo', 600, -1e9, 1e9);
  const fastIoFailTmo = num(o, 'fast_io_fail_tmo', -1, -1, 1e9);
  if (fastIoFailTmo < 0 && fastIoFailTmo !== -1) throw new InvalidArgumentError('fast_io_fail_tmo', `${fastIoFailTmo}: use -1 to disable`);
  return { keepAliveTmo, reconnectDelay, ctrlLossTmo, fastIoFailTmo };
}

/**
 * Why a TOS is refused on this Node.js: without socket.setTypeOfService (absent from Node.js 22.23, present in 24.22) a
 * net.Socket has no way to set IP_TOS; where it exists, this initiator's queues do not call it yet. Either way a TOS
 * could only be silently ignored.
 */
export function tosRefusal(tos: number, nodeVersion = process.versions.node, hasSetter = typeof (net.Socket.prototype as { setTypeOfService?: unknown }).setTypeOfService === 'function'): string {
  const why = hasSetter
    ? `this initiator does not set IP_TOS yet (Node.js ${nodeVersion} has socket.setTypeOfService, but its queues do not call it)`
    : `Node.js ${nodeVersion} cannot set IP_TOS on a TCP socket (its net.Socket has no setTypeOfService)`;
  return `${tos}: ${why}; leave it at -1 (the default) and mark the traffic outside the process (e.g. an nftables/iptables DSCP rule on the target port)`;
}

function resolveTos(o: Raw): number {
  const tos = int(o, 'tos', -1, -1, 255);
  if (tos !== -1) throw new InvalidArgumentError('tos', tosRefusal(tos));
  return tos;
}

/** queues_per_hctx, the total against the 16-bit QID space, and how many Connects may run at once. */
function resolveLayout(o: Raw, c: QueueCounts): Pick<ResolvedOptions, 'queuesPerHctx' | 'connectConcurrency'> {
  const queuesPerHctx = int(o, 'queues_per_hctx', 1, 1, 16);
  const totalQueues = c.nrIoQueues * queuesPerHctx + c.nrWriteQueues + c.nrPollQueues;
  if (totalQueues > 65534) throw new InvalidArgumentError('nr_io_queues', `${totalQueues} queues requested, at most 65534`);
  return { queuesPerHctx, connectConcurrency: int(o, 'connect_concurrency', totalQueues, 1, 65535) };
}

function resolveCommandLimits(o: Raw): Pick<ResolvedOptions, 'ioTimeoutMs' | 'adminTimeoutMs' | 'maxRetries'> {
  return {
    ioTimeoutMs: Math.round(num(o, 'io_timeout', 30, 0.001, 1e6) * 1000),
    adminTimeoutMs: Math.round(num(o, 'admin_timeout', 60, 0.001, 1e6) * 1000),
    // nvme_core.max_retries is an unsigned char module parameter.
    maxRetries: int(o, 'max_retries', 5, 0, 255),
  };
}

function resolveAuth(o: Raw): Pick<ResolvedOptions, 'hostKey' | 'ctrlKey'> {
  const hostKey = parseSecretOption('dhchap_secret', o['dhchap_secret']);
  const ctrlKey = parseSecretOption('dhchap_ctrl_secret', o['dhchap_ctrl_secret']);
  // Linux nvme_auth_init_ctrl: a controller key alone is meaningless (the host must first prove itself).
  if (ctrlKey !== undefined && hostKey === undefined) throw new InvalidArgumentError('dhchap_ctrl_secret', 'requires dhchap_secret');
  return { hostKey, ctrlKey };
}

function resolveLogger(o: Raw): Logger | undefined {
  const logger = o['logger'] as Logger | undefined;
  if (logger !== undefined && typeof (logger as { info?: unknown }).info !== 'function') throw new InvalidArgumentError('logger', 'must be a pino logger');
  return logger;
}

/** Validate raw options (unknown keys, types, ranges) and apply Linux defaults. Throws InvalidArgumentError naming the option. */
export function resolveOptions(raw: unknown, mode: 'connect' | 'discover' = 'connect'): ResolvedOptions {
  if (raw === null || typeof raw !== 'object') throw new InvalidArgumentError('options', 'must be an object');
  const o = raw as Raw;
  for (const k of Object.keys(o)) if (!KNOWN.has(k) && o[k] !== undefined) throw new InvalidArgumentError(k, 'unknown option');
  const discovery = mode === 'discover';
  // Checked in this order, so the first bad option named is the same whatever else is wrong.
  const target = resolveTarget(o, discovery);
  const identity = resolveIdentity(o);
  const source = resolveSource(o);
  const counts = resolveQueueCounts(o);
  const recovery = resolveRecovery(o, discovery);
  const tos = resolveTos(o);
  const layout = resolveLayout(o, counts);
  const limits = resolveCommandLimits(o);
  const auth = resolveAuth(o);
  const ioWorkers = resolveIoWorkers(o);
  const tls = resolveTls(o);
  if (tls !== undefined && ioWorkers.ioWorkers > 0) throw new InvalidArgumentError('io_workers', 'not supported together with tls (io workers open their own sockets, in cleartext)');
  const concat = bool(o, 'concat');
  // Linux nvmf_parse_options refuses the same combinations ("Secure concatenation over TLS is not supported", "Need
  // to enable DH-CHAP for secure concatenation").
  if (concat) {
    if (tls !== undefined) throw new InvalidArgumentError('concat', 'not together with tls/tls_key: concatenation generates its TLS PSK from DH-HMAC-CHAP; drop one');
    if (auth.hostKey === undefined) throw new InvalidArgumentError('concat', 'needs dhchap_secret: the TLS PSK is generated from the DH-HMAC-CHAP session key');
    if (ioWorkers.ioWorkers > 0) throw new InvalidArgumentError('io_workers', 'not supported together with concat (io workers open their own sockets, in cleartext)');
    if (discovery) throw new InvalidArgumentError('concat', 'not for discovery (nvme connect --concat only)');
  }
  const logger = resolveLogger(o);
  return {
    ...target,
    ...identity,
    ...source,
    ...counts,
    ...recovery,
    hdrDigest: bool(o, 'hdr_digest'),
    dataDigest: bool(o, 'data_digest'),
    duplicateConnect: discovery || bool(o, 'duplicate_connect'),
    disableSqflow: bool(o, 'disable_sqflow'),
    tos,
    ...layout,
    matchHwQueues: bool(o, 'match_hw_queues'),
    ...limits,
    discovery,
    ...auth,
    ...ioWorkers,
    tls,
    concat,
    logger,
  };
}

/**
 * hostnqn ↔ hostid must be 1:1 across the process (Linux nvmf_host_add: "Invalid argument" when a hostid is already
 * used with another hostnqn or vice versa). Entries live while a controller uses them (refcounted).
 */
class HostRegistry {
  readonly #byNqn = new Map<string, { id: string; refs: number }>();
  readonly #byId = new Map<string, string>();

  idFor(nqn: string): string | undefined {
    return this.#byNqn.get(nqn)?.id;
  }

  nqnFor(id: string): string | undefined {
    return this.#byId.get(id);
  }

  check(nqn: string, id: string): void {
    const byNqn = this.#byNqn.get(nqn);
    if (byNqn !== undefined && byNqn.id !== id) throw new InvalidArgumentError('hostid', `hostnqn ${nqn} is already used with hostid ${byNqn.id}`);
    const byId = this.#byId.get(id);
    if (byId !== undefined && byId !== nqn) throw new InvalidArgumentError('hostnqn', `hostid ${id} is already used with hostnqn ${byId}`);
  }

  acquire(nqn: string, id: string): () => void {
    this.check(nqn, id);
    const e = this.#byNqn.get(nqn) ?? { id, refs: 0 };
    e.refs++;
    this.#byNqn.set(nqn, e);
    this.#byId.set(id, nqn);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      e.refs--;
      if (e.refs === 0) {
        this.#byNqn.delete(nqn);
        this.#byId.delete(id);
      }
    };
  }
}

export const hostRegistry = new HostRegistry();

/** Live controllers by identity tuple (Linux nvmf_ctlr_matches_baseopts / nvmf_ip_options_match → -EALREADY). */
class ConnectionRegistry {
  readonly #live = new Map<string, number>();

  static key(o: ResolvedOptions): string {
    return [o.nqn, o.traddr, o.trsvcid, o.hostTraddr ?? '', o.hostIface ?? '', o.hostnqn, o.hostid].join('\u0000');
  }

  has(o: ResolvedOptions): boolean {
    return (this.#live.get(ConnectionRegistry.key(o)) ?? 0) > 0;
  }

  /** Reserve the tuple; throws InvalidArgumentError('duplicate_connect') when taken and the flag is off. */
  acquire(o: ResolvedOptions): () => void {
    const k = ConnectionRegistry.key(o);
    const n = this.#live.get(k) ?? 0;
    if (n > 0 && !o.duplicateConnect) {
      throw new InvalidArgumentError(
        'duplicate_connect',
        `already connected to ${o.nqn} at ${o.traddr}:${o.trsvcid} with this host identity and source (EALREADY); set duplicate_connect`,
      );
    }
    this.#live.set(k, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const m = (this.#live.get(k) ?? 1) - 1;
      if (m <= 0) this.#live.delete(k);
      else this.#live.set(k, m);
    };
  }
}

export const connectionRegistry = new ConnectionRegistry();
