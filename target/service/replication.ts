// The worker processes (workers > 1) as the service sees them: starting and stopping the pool, and the one seam every
// change to controller-wide state goes through to reach them (docs/target.md, "Target workers"). The primary owns the
// state; a worker mirrors what its I/O queues read, so a change reaches every worker before hosts hear of it (AEN).
import { Buffer } from 'node:buffer';
import type { Logger } from 'pino';
import { DNR, InvalidArgumentError, Status } from '../../protocol/index.js';
import { runResvCommand, type CoreChange, type CoreMirror, type CorePort, type HostRefusalCounts, type TargetNamespace, type Subsystem, type TargetCore } from '../core/index.js';
import { resvStateKey } from '../resv-state.js';
import { WorkerPool, type NsOpen, type NsReport, type Placement, type PortSpec, type SubsysSpec, type WorkerView } from '../workers/index.js';
import { workerCache } from './config-translation.js';

export interface ReplicationOptions {
  count: number;
  placement: Placement;
  /** Worker entry module (tests). */
  entry: string | undefined;
  /** Node flags for the workers only (WorkerPoolOptions.nodeArgs). */
  nodeArgs: readonly string[] | undefined;
}

export class Replication implements CoreMirror {
  readonly #core: TargetCore;
  readonly #log: Logger;
  readonly #opts: ReplicationOptions;
  #pool: WorkerPool | undefined;
  #poolStart: Promise<void> | undefined;
  /** The latest replication of each namespace's reservation state (resolves when every worker applied it). */
  readonly #resvSynced = new Map<string, Promise<void>>();

  constructor(core: TargetCore, log: Logger, opts: ReplicationOptions) {
    this.#core = core;
    this.#log = log;
    this.#opts = opts;
  }

  /** The pool once started; undefined with workers 1 (everything runs in this process). */
  get pool(): WorkerPool | undefined {
    return this.#pool;
  }

  get enabled(): boolean {
    return this.#opts.count > 1;
  }

  /** Rejects with the reason when a worker cannot start, with none left running. */
  async start(): Promise<void> {
    if (!this.enabled) return;
    if (this.#poolStart === undefined) {
      const pool = new WorkerPool({
        count: this.#opts.count,
        placement: this.#opts.placement,
        logger: this.#log,
        logLevel: this.#log.level,
        state: () => this.#state(),
        resvCommand: (m) => this.#forwardedResv(m.nqn, m.nsid, m.hostid, m.opcode, m.cdw10, m.data),
        ...(this.#opts.entry !== undefined ? { entry: this.#opts.entry } : {}),
        ...(this.#opts.nodeArgs !== undefined ? { nodeArgs: this.#opts.nodeArgs } : {}),
      });
      this.#poolStart = pool.start().then(() => {
        this.#pool = pool;
        this.#log.info({ workers: pool.count, placement: pool.placement }, 'worker processes ready');
      });
    }
    await this.#poolStart;
  }

  /** Workers finish their in-flight commands, close their queues and fsync/close their namespaces, then exit. */
  async stop(): Promise<void> {
    await this.#poolStart?.catch(() => undefined);
    await this.#pool?.stop();
  }

  workers(): WorkerView[] {
    return this.#pool?.workers() ?? [];
  }

  namespaceReports(): NsReport[][] {
    return this.#pool?.namespaceReports() ?? [];
  }

  refusalReports(): HostRefusalCounts[] {
    return this.#pool?.refusalReports() ?? [];
  }

  /** Apply `change` on every worker; rejects (WorkerSyncError) when one did not. The core calls it (TargetCore.changed). */
  apply(change: CoreChange): Promise<void> {
    const pool = this.#pool;
    if (pool === undefined) return Promise.resolve();
    switch (change.kind) {
      case 'subsystem':
        // A subsystem removed meanwhile stays removed.
        if (this.#core.subsystems.get(change.sub.nqn) !== change.sub) return Promise.resolve();
        return pool.syncSubsystem(this.#subsysSpec(change.sub));
      case 'subsystem-removed':
        return pool.removeSubsystem(change.nqn);
      case 'port':
        return pool.syncPort(portSpec(change.port));
      case 'port-removed':
        return pool.removePort(change.id);
      case 'ana-deadline':
        pool.sendAnaDeadline(change.until === Infinity ? null : change.until);
        return Promise.resolve();
    }
  }

  /** A namespace's reservation state changed: send it to every worker; never rejects (a dead worker gets it on restart). */
  resvChanged(sub: Subsystem, nsid: number): void {
    const pool = this.#pool;
    const rs = sub.reservations.get(nsid);
    if (pool === undefined || rs === undefined || this.#core.subsystems.get(sub.nqn) !== sub) return;
    const key = resvStateKey(sub.nqn, nsid);
    const p = pool.syncResv(sub.nqn, nsid, rs.replica()).catch((err: Error) => {
      this.#log.error({ err: err.message, subnqn: sub.nqn, nsid }, 'reservation state not applied on a worker');
    });
    this.#resvSynced.set(key, p);
    void p.then(() => {
      if (this.#resvSynced.get(key) === p) this.#resvSynced.delete(key);
    });
  }

  /** Subsystem.resvCommit with workers: a reservation change completes once every worker has it. */
  resvCommit(sub: Subsystem): ((nsid: number) => Promise<void>) | undefined {
    if (!this.enabled) return undefined;
    return (nsid) => this.#resvSynced.get(resvStateKey(sub.nqn, nsid)) ?? Promise.resolve();
  }

  /** A Register / Acquire / Release from a worker queue, run on the one state; the status once every worker has it. */
  async #forwardedResv(nqn: string, nsid: number, hostidHex: string, opcode: number, cdw10: number, data: string): Promise<number> {
    const sub = this.#core.subsystems.get(nqn);
    const ns = sub?.namespaces.get(nsid);
    if (sub === undefined || ns === undefined || !ns.enabled) return Status.INVALID_NS | DNR;
    const hostid = Buffer.from(hostidHex, 'hex');
    const keys = Buffer.from(data, 'base64');
    // In a gateway group the group's state decides (and resvShared waits for the workers itself).
    if (sub.resvShared !== undefined) return sub.resvShared(nsid, (rs) => runResvCommand(rs, hostidHex, hostid, opcode, cdw10, keys));
    const status = runResvCommand(sub.reservation(nsid), hostidHex, hostid, opcode, cdw10, keys);
    if (status === 0) await sub.resvCommit?.(nsid);
    return status;
  }

  #subsysSpec(sub: Subsystem): SubsysSpec {
    const { namespaces: _n, ...config } = sub.snapshot();
    return {
      config,
      faults: { ...sub.faults },
      namespaces: [...sub.namespaces.values()].map((ns) => ({ config: ns.config, enabled: ns.enabled, open: nsOpen(ns) })),
      resv: [...sub.reservations].map(([nsid, rs]) => [nsid, rs.replica()]),
    };
  }

  /** What a worker gets when it (re)starts. */
  #state(): { ports: PortSpec[]; subsystems: SubsysSpec[] } {
    return { ports: [...this.#core.ports.values()].map(portSpec), subsystems: [...this.#core.subsystems.values()].map((s) => this.#subsysSpec(s)) };
  }
}

function portSpec(p: CorePort): PortSpec {
  return { config: p.snapshot(), anaChangeCount: p.anaChangeCount.toString(), anaValidUntil: p.anaValidUntil === Infinity ? null : p.anaValidUntil };
}

/** How a worker opens the namespace's backend (the primary created it: shared RAM file, file, null). */
function nsOpen(ns: TargetNamespace): NsOpen {
  const s = ns.backend.sharing?.();
  if (s?.kind === 'shm') return { kind: 'shm', path: s.path, size: s.size, cache: workerCache(ns.config) };
  if (s?.kind === 'file') return { kind: 'file', path: s.path, readOnly: ns.readOnly, fenced: s.fenced === true };
  if (s?.kind === 'null') return { kind: 'null', size: s.size };
  throw new InvalidArgumentError('namespaces.backend', `namespace ${ns.nsid}: a process-local RAM backend cannot be shared with workers`);
}
