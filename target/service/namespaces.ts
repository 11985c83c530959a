// Namespace lifecycle of a live target: add, re-map, enable/disable, remove and host masking, each replicated to the
// worker processes before hosts get the Namespace Attribute Changed notice (nvmet_ns_changed), and changes applied
// one at a time in call order.
import type { Logger } from 'pino';
import { InvalidArgumentError, formatUuid } from '../../protocol/index.js';
import type { NamespaceBackend, WriteFence } from '../backend/index.js';
import type { NamespaceConfig } from '../model/config.js';
import { TargetNamespace, type Subsystem, type TargetCore } from '../core/index.js';
import { checkMaskHost, checkNamespace, openBackend, sameJson, workerCache } from './config-translation.js';
import type { Replication } from './replication.js';
import { ZoneStateFile, zoneStatePath } from './zone-state.js';
import type { ReservationStore } from './reservations-store.js';

export class Namespaces {
  readonly #core: TargetCore;
  readonly #log: Logger;
  readonly #workers: Replication;
  readonly #resv: ReservationStore;
  /** The subsystem named `nqn`, or InvalidArgumentError. */
  readonly #subsys: (nqn: string) => Subsystem;
  #nsChain: Promise<void> = Promise.resolve();
  /** A gateway's write fence (GatewayPart.writeFence): file namespaces opened from now on write through it. */
  writeFence: WriteFence | undefined;

  constructor(core: TargetCore, log: Logger, workers: Replication, resv: ReservationStore, subsys: (nqn: string) => Subsystem) {
    this.#core = core;
    this.#log = log;
    this.#workers = workers;
    this.#resv = resv;
    this.#subsys = subsys;
  }

  /** A namespace of a subsystem being added: no notice (no controller yet); the subsystem is replicated whole. */
  addToNew(sub: Subsystem, cfg: NamespaceConfig): Promise<void> {
    return this.#addNs(sub, cfg, false);
  }

  async addNamespace(subnqn: string, ns: NamespaceConfig): Promise<void> {
    await this.#nsOp(() => this.#addNs(this.#subsys(subnqn), ns, true));
  }

  async removeNamespace(subnqn: string, nsid: number): Promise<void> {
    await this.#nsOp(async () => {
      const sub = this.#subsys(subnqn);
      const ns = sub.removeNamespace(nsid);
      if (ns === undefined) throw new InvalidArgumentError('nsid', `no namespace ${nsid} in ${subnqn}`);
      await this.#core.changed({ kind: 'subsystem', sub });
      this.#core.nsChanged(sub, nsid);
      await this.#retire(ns);
      this.#log.info({ subnqn, nsid }, 'namespace removed');
    });
  }

  /**
   * Change a namespace in place (nvmet namespaces/<nsid>/{enable,device_path,device_uuid,...}); `next` is its whole
   * new config, nsid unchanged. Only `enabled` different: the namespace is attached or detached, keeping its backend
   * and identifiers. Anything else different: it is re-mapped, a new namespace under the same NSID (the backend
   * reopened when its config changed). Either way every controller gets a Namespace Attribute Changed notice for the
   * NSID (nvmet_ns_changed), so hosts rescan. Commands already executing on a replaced backend finish on it; it is
   * closed once they have (nvmet_ns_disable waits for the namespace's references the same way).
   */
  async updateNamespace(subnqn: string, next: NamespaceConfig): Promise<void> {
    await this.#nsOp(async () => {
      const sub = this.#subsys(subnqn);
      const cur = sub.namespaces.get(next.nsid);
      if (cur === undefined) throw new InvalidArgumentError('nsid', `no namespace ${next.nsid} in ${subnqn}`);
      const enabled = next.enabled ?? true;
      const { enabled: _a, ...want } = next;
      const { enabled: _b, ...have } = cur.config;
      if (sameJson(want, have)) {
        if (!sub.setNamespaceEnabled(cur, enabled)) return;
        await this.#core.changed({ kind: 'subsystem', sub });
        this.#core.nsChanged(sub, next.nsid);
        this.#log.info({ subnqn, nsid: next.nsid }, enabled ? 'namespace enabled' : 'namespace disabled');
        return;
      }
      const reuse = sameJson(want.backend, have.backend) ? cur.backend : undefined;
      const ns = await this.#buildNs(sub, next, reuse, cur);
      Object.assign(ns.counters, cur.counters);
      sub.replaceNamespace(ns);
      await this.#core.changed({ kind: 'subsystem', sub });
      this.#core.nsChanged(sub, next.nsid);
      this.#log.info({ subnqn, nsid: next.nsid, backend: ns.backend.kind, bytes: ns.backend.size, uuid: formatUuid(ns.uuid), enabled: ns.enabled }, 'namespace re-mapped');
      if (reuse === undefined) await this.#retire(cur);
    });
  }

  /**
   * In a gateway group (set by GatewayPart at join): changes the namespace's host mask on the group's copy in etcd;
   * `edit` gets the group's mask (undefined: the configured one applies) and the change reaches this gateway, as every
   * other, through applyMask. Undefined outside a group.
   */
  groupMask: ((nqn: string, nsid: number, edit: (cur: string[] | null | undefined) => string[] | null) => Promise<void>) | undefined = undefined;

  /**
   * Namespace masking at runtime: attach `nsid` to one more host, or detach it from one (the first attach turns an
   * all-hosts namespace into a masked one; detaching the last host leaves it visible to nobody). Only the controllers
   * of the host whose view changed get the Namespace Attribute Changed notice.
   */
  attachNamespaceHost(subnqn: string, nsid: number, hostnqn: string): Promise<void> | undefined {
    const sub = this.#subsys(subnqn);
    this.#ns(sub, nsid);
    checkMaskHost(this.#log, sub, hostnqn);
    return this.#changeMask(sub, nsid, (mask) => new Set([...(mask ?? []), hostnqn]));
  }

  detachNamespaceHost(subnqn: string, nsid: number, hostnqn: string): Promise<void> | undefined {
    const sub = this.#subsys(subnqn);
    this.#ns(sub, nsid);
    return this.#changeMask(sub, nsid, (mask) => {
      if (mask !== undefined && !mask.has(hostnqn)) throw new InvalidArgumentError('hostnqn', `namespace ${nsid} is not attached to ${hostnqn}`);
      // Detaching from an all-hosts namespace: every allowed host but this one keeps it.
      const next = new Set(mask ?? [...sub.hosts]);
      next.delete(hostnqn);
      return next;
    });
  }

  #ns(sub: Subsystem, nsid: number): TargetNamespace {
    const ns = sub.namespaces.get(nsid);
    if (ns === undefined) throw new InvalidArgumentError('nsid', `no namespace ${nsid} in ${sub.nqn}`);
    return ns;
  }

  /**
   * `edit` on the current mask (undefined: every allowed host): here at once (a refusal throws), or on the group's copy
   * in a gateway group (a promise: a refusal rejects).
   */
  #changeMask(sub: Subsystem, nsid: number, edit: (mask: ReadonlySet<string> | undefined) => Set<string>): Promise<void> | undefined {
    const group = this.groupMask;
    if (group === undefined) {
      this.#setMask(sub, nsid, edit(this.#ns(sub, nsid).hostMask));
      return undefined;
    }
    return group(sub.nqn, nsid, (cur) => [...edit(cur === undefined ? this.#ns(sub, nsid).hostMask : cur === null ? undefined : new Set(cur))]);
  }

  /** A mask the gateway group decided (any gateway's change, this one's included): applied here like a local one. */
  applyMask(subnqn: string, nsid: number, hosts: string[] | null): void {
    const sub = this.#core.subsystems.get(subnqn);
    const ns = sub?.namespaces.get(nsid);
    if (sub === undefined || ns === undefined) return;
    const next = hosts === null ? undefined : new Set(hosts);
    const same = next === undefined ? ns.hostMask === undefined : ns.hostMask !== undefined && ns.hostMask.size === next.size && [...next].every((h) => ns.hostMask?.has(h));
    if (!same) this.#setMask(sub, nsid, next);
  }

  /** Hosts a namespace is attached to; undefined = every allowed host. */
  namespaceHosts(subnqn: string, nsid: number): string[] | undefined {
    const ns = this.#subsys(subnqn).namespaces.get(nsid);
    if (ns === undefined) throw new InvalidArgumentError('nsid', `no namespace ${nsid} in ${subnqn}`);
    return ns.hostMask === undefined ? undefined : [...ns.hostMask];
  }

  #setMask(sub: Subsystem, nsid: number, hosts: Set<string> | undefined): void {
    const ns = sub.namespaces.get(nsid) as TargetNamespace;
    const affected = sub.setNamespaceHosts(ns, hosts);
    if (hosts === undefined) delete ns.config.hosts;
    else ns.config.hosts = [...hosts];
    // Workers apply the new mask to their I/O queues before the affected hosts hear of it (as for namespace changes).
    this.#core.changedThen({ kind: 'subsystem', sub }, 'host mask', { subnqn: sub.nqn, nsid }, () => {
      if (ns.enabled && affected.size > 0) this.#core.nsChanged(sub, nsid, affected);
    });
    this.#log.info({ subnqn: sub.nqn, nsid, hosts: hosts === undefined ? null : [...hosts], notified: [...affected] }, 'namespace host mask changed');
  }

  /** Runs namespace changes one at a time, in call order: a rapid disable/re-map/enable sequence applies as sent. */
  #nsOp<T>(op: () => Promise<T>): Promise<T> {
    const run = this.#nsChain.then(op);
    this.#nsChain = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  /** Closes a detached namespace's backend once the commands executing on it are done (bounded: 10 s). */
  async #retire(ns: TargetNamespace): Promise<void> {
    if (!(await ns.idle())) this.#log.warn({ subnqn: ns.subnqn, nsid: ns.nsid, executing: ns.executing }, 'closing a namespace backend with commands still executing');
    await ns.backend.close();
  }

  async #addNs(sub: Subsystem, cfg: NamespaceConfig, notify: boolean): Promise<void> {
    if (sub.namespaces.has(cfg.nsid)) throw new InvalidArgumentError('namespaces.nsid', `NSID ${cfg.nsid} already exists in ${sub.nqn}`);
    const ns = await this.#buildNs(sub, cfg, undefined, undefined);
    // Zone state lives in this process only, and queues already on workers would not see it (tcp/queue.ts keeps the
    // queues of a subsystem with a zoned namespace here from their Connect on).
    if (ns.zones !== undefined && this.#workers.pool?.servesSubsystem(sub.nqn) === true) {
      await ns.backend.close();
      throw new InvalidArgumentError('namespaces.zoned', `${sub.nqn} has I/O queues on target workers, which cannot serve a zoned namespace; add it to another subsystem or before its hosts connect`);
    }
    sub.addNamespace(ns);
    this.#resv.restore(sub, cfg.nsid);
    if (notify) {
      try {
        await this.#core.changed({ kind: 'subsystem', sub });
      } catch (err) {
        // A worker could not open it: the namespace does not exist anywhere (no AEN went out).
        sub.removeNamespace(cfg.nsid);
        await this.#core.changed({ kind: 'subsystem', sub }).catch(() => undefined);
        await ns.backend.close();
        throw new InvalidArgumentError('namespaces.backend', (err as Error).message);
      }
    }
    this.#log.info({ subnqn: sub.nqn, nsid: cfg.nsid, backend: ns.backend.kind, bytes: ns.backend.size, blockSize: ns.blockSize, enabled: ns.enabled }, 'namespace added');
    if (notify && ns.enabled) this.#core.nsChanged(sub, cfg.nsid);
  }

  /**
   * Checks a namespace config and builds the Namespace, opening its backend unless `reuse` is given. `replacing` is
   * the namespace it will take the place of (its identifiers may be kept); a backend opened here is closed on failure.
   */
  async #buildNs(sub: Subsystem, cfg: NamespaceConfig, reuse: NamespaceBackend | undefined, replacing: TargetNamespace | undefined): Promise<TargetNamespace> {
    checkNamespace(this.#log, sub, cfg);
    // Zone state lives in one target process; the gateways of a group would each keep their own write pointers.
    if (cfg.zoned !== undefined && this.writeFence !== undefined) throw new InvalidArgumentError('namespaces.zoned', 'a gateway group cannot serve a zoned namespace (each gateway would keep its own write pointers); serve it from a target outside the group');
    const backend = reuse ?? (await openBackend(cfg, this.#workers.enabled, this.writeFence));
    try {
      const ns = new TargetNamespace(sub.nqn, cfg, backend);
      // Writes from queues served here (TLS, DH-HMAC-CHAP) must reach the workers' read caches too.
      if (backend.setCoherence !== undefined && workerCache(cfg)) {
        const nqn = sub.nqn;
        const nsid = cfg.nsid;
        backend.setCoherence((off, len, done) => {
          const pool = this.#workers.pool;
          if (pool === undefined) done();
          else pool.invalidate(nqn, nsid, off, len, done);
        });
      }
      if (ns.nsze === 0) throw new InvalidArgumentError('namespaces.backend.size', `smaller than one ${cfg.blockSize ?? 512}-byte block`);
      await restoreZones(ns, cfg, reuse !== undefined ? replacing : undefined);
      for (const other of this.#core.allNamespaces()) {
        if (other === replacing) continue;
        if (other.nguid.equals(ns.nguid) || other.uuid.equals(ns.uuid)) throw new InvalidArgumentError('namespaces.uuid', `NGUID/UUID of ${sub.nqn} nsid ${cfg.nsid} collides with ${other.subnqn} nsid ${other.nsid}`);
      }
      return ns;
    } catch (err) {
      if (reuse === undefined) await backend.close();
      throw err;
    }
  }
}

/**
 * The zones a zoned namespace starts with: those of the namespace it replaces on the same backend, else a file
 * namespace's zone-state file (which it keeps saving to), else all empty.
 */
async function restoreZones(ns: TargetNamespace, cfg: NamespaceConfig, replacing: TargetNamespace | undefined): Promise<void> {
  const zones = ns.zones;
  if (zones === undefined) return;
  const store = cfg.backend.type === 'file' ? new ZoneStateFile(zoneStatePath(cfg.backend.path)) : undefined;
  const snap = replacing?.zones?.snapshot() ?? (await store?.load());
  if (snap !== undefined && !zones.restore(snap)) {
    throw new InvalidArgumentError('namespaces.zoned', `the saved zones (${snap.zones.length} of ${snap.zoneSize} blocks) do not fit this geometry (another zoneSize or zoneCapacity, or a damaged file); use the same zoneSize and zoneCapacity, or remove ${store?.path ?? 'the old namespace'} to start with empty zones`);
  }
  ns.zoneStore = store;
}
