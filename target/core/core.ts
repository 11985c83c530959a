// The target's registry (nvmet's global lists): subsystems, ports, the discovery subsystem, host keys, counters,
// and the fan-out of namespace / ANA / discovery changes to the controllers they concern.
import type { Logger } from 'pino';
import { DISCOVERY_NQN } from '../../protocol/index.js';
import { AuthRegistry } from './auth.js';
import { FaultEngine } from './fault-engine.js';
import { HostLogLimiter, newHostRefusalCounts } from './host-log.js';
import type { TargetNamespace } from './namespace.js';
import type { CorePort } from './port.js';
import { Subsystem } from './subsystem.js';
import type { CoreStats } from './types.js';

/** A change to exported state that a mirror of the core (the worker processes) must apply. */
export type CoreChange =
  | { kind: 'subsystem'; sub: Subsystem }
  | { kind: 'subsystem-removed'; nqn: string }
  | { kind: 'port'; port: CorePort }
  | { kind: 'port-removed'; id: number }
  /** Every port's anaValidUntil moved (a gateway's lease renewed or fenced): no state the hosts see changed. */
  | { kind: 'ana-deadline'; until: number };

/**
 * Whoever keeps a copy of the core's state elsewhere and must have every change before hosts hear of it (the
 * worker processes' I/O queues check ANA, masks and namespaces themselves: docs/target.md, "Target workers").
 */
export interface CoreMirror {
  /** Resolves once every copy applied `change`; rejects when one did not. */
  apply(change: CoreChange): Promise<void>;
}

/** The well-known discovery NQN (NVMe Base 2.0 §4.5). */
export const WELL_KNOWN_DISCOVERY_NQN = DISCOVERY_NQN;

/** A generated PSK to install: host, subsystem, the DH-HMAC-CHAP hash (= TLS identity hash) and the candidate PSKs. */
export interface GeneratedPskEvent {
  hostnqn: string;
  subnqn: string;
  hashId: number;
  scC: number;
  /** Generated PSKs, preferred first (protocol/auth DhchapConcatResult). Secret: the receiver wipes them. */
  psks: Buffer[];
}

export class TargetCore {
  readonly subsystems = new Map<string, Subsystem>();
  readonly ports = new Map<number, CorePort>();
  /** The discovery subsystem; answers the well-known NQN and the unique one when configured. */
  readonly discovery: Subsystem;
  uniqueDiscoveryNqn: string | undefined;
  /** Discovery log generation counter: bumped whenever any host's log could have changed. */
  genctr = 1n;
  /** Per-host DH-HMAC-CHAP keys (nvmet hosts/<nqn>/dhchap_*). */
  readonly hostAuth = new AuthRegistry();
  /**
   * Installs the TLS PSK a concatenated DH-HMAC-CHAP transaction generated (TP 8018); set by the service, which owns
   * the TLS key store. Unset: concatenation completes but no TLS session can use its PSK.
   */
  onGeneratedPsk: ((e: GeneratedPskEvent) => void) | undefined = undefined;
  /** The mirror that hears of every change (set by the service when it runs worker processes). */
  mirror: CoreMirror | undefined = undefined;
  readonly stats: CoreStats = { pduErrorsByFes: {}, dataDigestErrors: 0, katoExpiries: 0, connectionsAccepted: 0, connectionsRejected: 0, connectionsActive: 0, connectsOk: 0, connectsFailed: 0, refusals: newHostRefusalCounts() };
  readonly startedAt = Date.now();
  /** The fault rules (docs/faults.md): the target's own, for every port, subsystem and queue they match. */
  readonly faults: FaultEngine;

  constructor(readonly logger: Logger) {
    this.faults = new FaultEngine(logger);
    this.discovery = new Subsystem({ nqn: WELL_KNOWN_DISCOVERY_NQN, allowAnyHost: true, mdts: 0 }, 'discovery');
  }

  /** The subsystem a Connect names, or undefined (unknown NQN or not exported on this port). */
  findSubsystem(nqn: string, portId: number): Subsystem | undefined {
    if (nqn === WELL_KNOWN_DISCOVERY_NQN || (this.uniqueDiscoveryNqn !== undefined && nqn === this.uniqueDiscoveryNqn)) return this.discovery;
    const s = this.subsystems.get(nqn);
    if (s === undefined || !s.exportedOn(portId)) return undefined;
    return s;
  }

  /** NQN the discovery controller reports as its own (SUBTYPE 3 entry, Identify SUBNQN). */
  get discoveryNqn(): string {
    return this.uniqueDiscoveryNqn ?? WELL_KNOWN_DISCOVERY_NQN;
  }

  /** Discovery content changed: bump GENCTR and notify discovery controllers (AEN 0x0070F002). */
  discoveryChanged(): void {
    this.genctr++;
    for (const c of this.discovery.controllers.values()) c.addEvent('disc');
  }

  /**
   * Namespace added/removed/changed: changed-NS list + AEN to the subsystem's controllers (nvmet_ns_changed). Only
   * to controllers of `hosts` when given, else only to hosts that may see the namespace (masking).
   */
  nsChanged(subsys: Subsystem, nsid: number, hosts?: ReadonlySet<string>): void {
    const ns = subsys.namespaces.get(nsid);
    for (const c of subsys.controllers.values()) {
      if (hosts !== undefined ? hosts.has(c.hostnqn) : ns === undefined || ns.visibleTo(c.hostnqn)) c.nsChanged(nsid);
    }
  }

  /**
   * Exported state changed (a port, a subsystem and what it holds): the mirror applies it first, so the hosts a caller
   * notifies afterwards meet the new state on every queue. Rejects when the mirror did not apply it.
   */
  changed(change: CoreChange): Promise<void> {
    return this.mirror === undefined ? Promise.resolve() : this.mirror.apply(change);
  }

  /**
   * changed(), then `notify` (at once without a mirror). A mirror that did not apply it is logged and `notify` runs all
   * the same: the change stands here, and a restarted worker gets the whole state.
   */
  changedThen(change: CoreChange, what: string, ctx: Record<string, unknown>, notify?: () => void): void {
    if (this.mirror === undefined) {
      notify?.();
      return;
    }
    this.mirror.apply(change).then(notify, (err: Error) => {
      this.logger.error({ err: err.message, ...ctx }, `${what} not applied by the core's mirror`);
      notify?.();
    });
  }

  anaChanged(portId: number): void {
    for (const s of this.subsystems.values()) {
      for (const c of s.controllers.values()) if (c.port.id === portId) c.addEvent('ana');
    }
  }

  *allNamespaces(): Iterable<TargetNamespace> {
    for (const s of this.subsystems.values()) yield* s.namespaces.values();
  }

  /** The log limiter of a port: what a host causes before a controller exists (host-log.ts). */
  portHostLog(port: CorePort): HostLogLimiter {
    let l = this.#portHostLogs.get(port);
    if (l === undefined) {
      l = new HostLogLimiter(this.logger, this.stats.refusals, { port: port.id });
      this.#portHostLogs.set(port, l);
    }
    return l;
  }

  readonly #portHostLogs = new WeakMap<CorePort, HostLogLimiter>();

  countPduError(fes: number): void {
    const k = `0x${fes.toString(16).padStart(2, '0')}`;
    this.stats.pduErrorsByFes[k] = (this.stats.pduErrorsByFes[k] ?? 0) + 1;
  }
}
