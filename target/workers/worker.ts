// A worker process: serves the I/O queues the primary hands it (sockets received over IPC, already past ICReq and
// Connect), executing their commands on its own view of the subsystems' namespaces. It never accepts connections,
// never sees an admin queue and owns no controller-wide state: its Controller objects are stand-ins that carry what
// the I/O path reads (subsystem, port, CSTS.RDY, SMART counters); keep-alive, AENs, ANA and ACL stay with the primary.
import { Buffer } from 'node:buffer';
import type net from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { FileBackend, NullBackend, WriteFence, type FileBackendOptions, type NamespaceBackend } from '../backend/index.js';
import { TargetController, CorePort, TargetNamespace, Subsystem, TargetCore, type ResvForward, type ResvReplica } from '../core/index.js';
import { encodeCc } from '../../protocol/index.js';
import { TargetTcpQueue } from '../transport/tcp/index.js';
import type { FromWorker, NsReport, NsSpec, PortSpec, QueueReport, SubsysSpec, ToWorker } from './messages.js';
import { ShmBackend, type CoherenceHook, type PieceHolds } from './shm-backend.js';
import { InvalidationBatcher, type InvRange } from './coherence.js';
import { PeerMesh } from './mesh.js';

/** How often the primary hears about activity (keep-alive under TBKAS) and counters. */
export const REPORT_INTERVAL_MS = 200;
const RX_BUFFER = 256 * 1024;

interface NsEntry {
  ns: TargetNamespace;
  key: string;
}

export class WorkerRuntime {
  readonly core: TargetCore;
  readonly #send: (m: FromWorker) => void;
  readonly #queues = new Map<number, TargetTcpQueue>();
  readonly #ids = new Map<TargetTcpQueue, number>();
  readonly #ctrls = new Map<string, TargetController>();
  readonly #nsKeys = new Map<string, Map<number, NsEntry>>();
  readonly #faultKeys = new Map<string, string>();
  readonly #rx = Buffer.allocUnsafeSlow(RX_BUFFER);
  readonly #lastCommands = new Map<number, number>();
  readonly #lag = monitorEventLoopDelay({ resolution: 10 });
  #timer: NodeJS.Timeout | undefined;
  #stopping = false;
  /** Writes waiting for the primary's relay to the other workers ('inv' → 'inv-done'). */
  readonly #invWaiting = new Map<number, () => void>();
  #invSeq = 1;
  /** Links to the other workers, which carry cache invalidations without the primary (PeerMesh). */
  readonly mesh = new PeerMesh(
    (r) => this.invalidate(r),
    (r, done) => {
      const seq = this.#invSeq++;
      this.#invWaiting.set(seq, done);
      this.#send({ t: 'inv', seq, ranges: r });
    },
  );
  readonly #inv = new InvalidationBatcher((r, done) => this.mesh.send(r, done));
  /** Writes to shared RAM pieces no peer held: completed without an invalidation. */
  #unasked = 0;
  /**
   * This process's copy of the gateway's write fence (a SharedArrayBuffer does not cross processes): set with the
   * ports' deadline from every 'ana-deadline' and port message; every fenced file namespace's writer thread reads it
   * (docs/gateway-groups.md, "Fencing at the storage call").
   */
  readonly writeFence = new WriteFence();

  constructor(
    readonly index: number,
    readonly logger: Logger,
    send: (m: FromWorker) => void,
  ) {
    this.core = new TargetCore(logger);
    this.#send = send;
  }

  async init(ports: PortSpec[], subsystems: SubsysSpec[]): Promise<void> {
    for (const p of ports) this.setPort(p);
    for (const s of subsystems) await this.setSubsystem(s);
    this.#lag.enable();
    this.#timer = setInterval(() => this.#report(), REPORT_INTERVAL_MS);
  }

  async handle(m: ToWorker, socket: net.Socket | undefined): Promise<void> {
    switch (m.t) {
      case 'queue':
        return this.#adopt(m, socket);
      case 'close':
        this.#queues.get(m.id)?.close(m.reason);
        return;
      case 'subsys':
        return this.#ack(m.seq, () => this.setSubsystem(m.spec));
      case 'subsys-remove':
        return this.#ack(m.seq, () => this.#removeSubsystem(m.nqn));
      case 'port':
        return this.#ack(m.seq, async () => this.setPort(m.spec));
      case 'ana-deadline':
        for (const port of this.core.ports.values()) port.anaValidUntil = m.until ?? Infinity;
        this.writeFence.set(m.until ?? Infinity);
        return;
      case 'port-remove':
        return this.#ack(m.seq, async () => {
          for (const q of [...this.#queues.values()]) if (q.port.id === m.id) q.close('port removed');
          this.core.ports.delete(m.id);
        });
      case 'stop':
        return this.#ack(m.seq, () => this.stop());
      case 'resv':
        return this.#ack(m.seq, async () => this.#applyResv(m.nqn, m.nsid, m.replica));
      case 'resv-done':
        return this.#resvDone(m.id, m.status);
      case 'init':
        return;
    }
  }

  async #ack(seq: number, op: () => Promise<void>): Promise<void> {
    try {
      await op();
      this.#send({ t: 'ack', seq });
    } catch (err) {
      this.#send({ t: 'ack', seq, error: (err as Error).message });
    }
  }

  setPort(p: PortSpec): void {
    const cur = this.core.ports.get(p.config.id);
    if (cur === undefined) {
      const port = new CorePort(p.config);
      port.anaChangeCount = BigInt(p.anaChangeCount);
      port.anaValidUntil = p.anaValidUntil ?? Infinity;
      this.writeFence.set(port.anaValidUntil);
      this.core.ports.set(p.config.id, port);
      return;
    }
    // ANA states change in place: the queues hold this CorePort.
    cur.anaStates.clear();
    for (const [g, s] of Object.entries(p.config.anaStates ?? {})) cur.anaStates.set(Number(g), s);
    cur.anaChangeCount = BigInt(p.anaChangeCount);
    cur.anaValidUntil = p.anaValidUntil ?? Infinity;
    this.writeFence.set(cur.anaValidUntil);
  }

  /** Add a subsystem or bring its namespaces and faults in line with the primary's. */
  async setSubsystem(spec: SubsysSpec): Promise<void> {
    const nqn = spec.config.nqn;
    let sub = this.core.subsystems.get(nqn);
    if (sub === undefined) {
      sub = new Subsystem({ ...spec.config, namespaces: [] });
      sub.resvForward = this.#forwardResv(nqn);
      this.core.subsystems.set(nqn, sub);
      this.#nsKeys.set(nqn, new Map());
    }
    const faultKey = JSON.stringify(spec.faults);
    if (this.#faultKeys.get(nqn) !== faultKey) {
      sub.setFaults(spec.faults);
      this.#faultKeys.set(nqn, faultKey);
    }
    const keys = this.#nsKeys.get(nqn) as Map<number, NsEntry>;
    const want = new Set<number>();
    for (const n of spec.namespaces) {
      const nsid = n.config.nsid;
      want.add(nsid);
      const key = JSON.stringify([n.config, n.open]);
      const have = keys.get(nsid);
      if (have !== undefined && have.key === key) {
        sub.setNamespaceEnabled(have.ns, n.enabled);
        continue;
      }
      const ns = new TargetNamespace(nqn, { ...n.config, enabled: n.enabled }, await openNs(n, this.writeFence, (off, len, done) => this.#inv.add(nqn, nsid, off, len, done), this.#holds(nqn, nsid, n)));
      keys.set(nsid, { ns, key });
      if (have === undefined) sub.addNamespace(ns);
      else {
        sub.replaceNamespace(ns);
        void retire(have.ns);
      }
    }
    for (const [nsid, e] of [...keys]) {
      if (want.has(nsid)) continue;
      keys.delete(nsid);
      sub.removeNamespace(nsid);
      void retire(e.ns);
    }
    for (const [nsid, r] of spec.resv ?? []) if (sub.namespaces.has(nsid)) sub.reservation(nsid).applyReplica(r);
  }

  // --- shared RAM read caches: the file is the truth, each worker's cache is a copy (ShmBackend) -------------------

  /**
   * The pieces of a shared RAM namespace that peers cache, keyed by the namespace and its file (a namespace replaced
   * under the same NSID is another key; the old key's holds only cost extra invalidations).
   */
  #holds(nqn: string, nsid: number, n: NsSpec): PieceHolds | undefined {
    if (n.open.kind !== 'shm') return undefined;
    const key = `${nqn}\n${nsid}\n${n.open.path}`;
    const mesh = this.mesh;
    return {
      peersHold: (first, last) => {
        if (mesh.peersHold(key, first, last)) return true;
        this.#unasked++;
        return false;
      },
      hold: (i, then) => mesh.hold(key, i, then),
    };
  }

  /** Another process wrote these ranges: drop them here (answered at once, ahead of queued changes). */
  invalidate(ranges: InvRange[]): void {
    for (const [nqn, nsid, off, len] of ranges) {
      const b = this.#nsKeys.get(nqn)?.get(nsid)?.ns.backend;
      if (b instanceof ShmBackend) b.invalidate(off, len);
    }
  }

  /** The other workers dropped the ranges of 'inv' `seq`: the writes behind it complete. */
  invDone(seq: number): void {
    const done = this.#invWaiting.get(seq);
    if (done === undefined) return;
    this.#invWaiting.delete(seq);
    done();
  }

  // --- reservations: the primary owns the state; this process keeps a copy for the I/O path's access checks -------

  readonly #resvPending = new Map<number, (status: number) => void>();
  #resvNextId = 1;

  /** Subsystem.resvForward of subsystem `nqn`: Register / Acquire / Release go to the primary. */
  #forwardResv(nqn: string): ResvForward {
    return (ctrl, nsid, opcode, cdw10, data, done) => {
      const id = this.#resvNextId++;
      this.#resvPending.set(id, done);
      this.#send({ t: 'resv-cmd', id, nqn, nsid, hostid: ctrl.hostid.toString('hex'), opcode, cdw10, data: data.toString('base64') });
    };
  }

  #resvDone(id: number, status: number): void {
    const done = this.#resvPending.get(id);
    if (done === undefined) return;
    this.#resvPending.delete(id);
    done(status);
  }

  #applyResv(nqn: string, nsid: number, r: ResvReplica): void {
    const sub = this.core.subsystems.get(nqn);
    if (sub === undefined || !sub.namespaces.has(nsid)) return;
    sub.reservation(nsid).applyReplica(r);
  }

  async #removeSubsystem(nqn: string): Promise<void> {
    const sub = this.core.subsystems.get(nqn);
    if (sub === undefined) return;
    this.core.subsystems.delete(nqn);
    for (const c of [...sub.controllers.values()]) c.teardown('subsystem removed');
    for (const e of this.#nsKeys.get(nqn)?.values() ?? []) await retire(e.ns);
    this.#nsKeys.delete(nqn);
  }

  #adopt(m: Extract<ToWorker, { t: 'queue' }>, socket: net.Socket | undefined): void {
    const q = m.q;
    const refuse = (reason: string): void => {
      this.logger.warn({ id: m.id, subnqn: q.subnqn, cntlid: q.cntlid, qid: q.qid, reason }, 'handed-off queue refused');
      socket?.destroy();
      this.#send({ t: 'closed', id: m.id });
    };
    if (socket === undefined) return refuse('no socket');
    if (this.#stopping) return refuse('worker stopping');
    const sub = this.core.subsystems.get(q.subnqn);
    const port = this.core.ports.get(q.portId);
    if (sub === undefined || port === undefined) return refuse('unknown subsystem or port');
    const key = `${q.subnqn}\0${q.cntlid}`;
    let ctrl = this.#ctrls.get(key);
    if (ctrl === undefined || ctrl.state === 'dead') {
      // KATO 0: the primary's controller runs the keep-alive timer; this one only carries the I/O path's state.
      ctrl = new TargetController(this.core, sub, q.cntlid, q.hostnqn, Buffer.from(m.hostid, 'hex'), port, 0);
      // Enabled as the host left it on the primary (I/O queues connect only after CC.EN=1): CSTS.RDY for the I/O path.
      ctrl.writeCc(encodeCc({ en: true, iosqes: 6, iocqes: 4 }));
      sub.controllers.set(q.cntlid, ctrl);
      this.#ctrls.set(key, ctrl);
    }
    const c = ctrl;
    const pending = m.pending !== undefined ? Buffer.from(m.pending, 'base64') : undefined;
    const tq = new TargetTcpQueue(
      this.core,
      port,
      socket,
      { icReqTimeoutMs: 10_000, rxBuffer: this.#rx },
      (closed) => this.#closed(closed, key, c),
      { conn: { hdgst: q.hdgst, ddgst: q.ddgst, ...(pending !== undefined ? { pending } : {}) }, ctrl: c, qid: q.qid, sqsize: q.sqsize, sqflowDisabled: q.sqflowDisabled },
    );
    this.#queues.set(m.id, tq);
    this.#ids.set(tq, m.id);
    this.logger.debug({ id: m.id, subnqn: q.subnqn, cntlid: q.cntlid, qid: q.qid, peer: tq.peer }, 'queue adopted');
  }

  #closed(q: TargetTcpQueue, key: string, ctrl: TargetController): void {
    const id = this.#ids.get(q);
    if (id === undefined) return;
    this.#ids.delete(q);
    this.#queues.delete(id);
    this.#lastCommands.delete(id);
    const c = q.core.counters;
    this.#retired.commands += c.commands;
    this.#retired.bytesIn += c.bytesIn;
    this.#retired.bytesOut += c.bytesOut;
    // The stand-in controller goes with its last queue here (the primary's controller lives on).
    if (ctrl.queues.size === 0 && this.#ctrls.get(key) === ctrl) {
      this.#ctrls.delete(key);
      ctrl.setState('dead');
      ctrl.hostLog.close();
      if (ctrl.subsys.controllers.get(ctrl.cntlid) === ctrl) ctrl.subsys.controllers.delete(ctrl.cntlid);
    }
    this.#send({ t: 'closed', id });
  }

  #report(): void {
    const active: number[] = [];
    const queues: QueueReport[] = [];
    const r = this.#retired;
    let ios = r.commands;
    let bytesIn = r.bytesIn;
    let bytesOut = r.bytesOut;
    for (const [id, q] of this.#queues) {
      const c = q.core.counters;
      if ((this.#lastCommands.get(id) ?? 0) !== c.commands) active.push(id);
      this.#lastCommands.set(id, c.commands);
      queues.push({ id, commands: c.commands, bytesIn: c.bytesIn, bytesOut: c.bytesOut, errors: c.errors, inFlight: q.core.inFlight });
      ios += c.commands;
      bytesIn += c.bytesIn;
      bytesOut += c.bytesOut;
    }
    const ns: NsReport[] = [];
    for (const [nqn, m] of this.#nsKeys) {
      for (const [nsid, e] of m) {
        const k = e.ns.counters;
        ns.push({ nqn, nsid, reads: k.reads, writes: k.writes, bytesRead: k.bytesRead, bytesWritten: k.bytesWritten, flushes: k.flushes, errors: k.errors, fenced: k.fenced });
      }
    }
    const cpu = process.cpuUsage();
    const lag = this.#lag;
    const mean = Number.isNaN(lag.mean) ? 0 : lag.mean / 1e6;
    const max = lag.max / 1e6;
    lag.reset();
    const { direct, relayed } = this.mesh.counts;
    const inv = { direct, relayed, unasked: this.#unasked };
    this.#send({ t: 'report', active, at: Date.now(), queues, ns, cpuUserUs: cpu.user, cpuSystemUs: cpu.system, lagMeanMs: mean, lagMaxMs: max, ios, bytesIn, bytesOut, inv, refusals: this.core.stats.refusals });
  }

  /** Counters of queues already closed (so the worker's totals never go backwards). */
  readonly #retired = { commands: 0, bytesIn: 0, bytesOut: 0 };

  /** Graceful stop: in-flight commands finish (bounded), every queue closes, backends flush (fsync) and close. */
  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#lag.disable();
    const qs = [...this.#queues.values()];
    await Promise.all(qs.map((q) => q.drain(2000)));
    for (const q of qs) q.close('target stopping');
    this.mesh.close();
    for (const m of this.#nsKeys.values()) for (const e of m.values()) await e.ns.backend.close();
  }
}

async function openNs(n: NsSpec, fence: WriteFence, coherence: CoherenceHook, holds: PieceHolds | undefined): Promise<NamespaceBackend> {
  const o = n.open;
  switch (o.kind) {
    case 'file': {
      const opts: FileBackendOptions = o.readOnly ? { path: o.path, readOnly: true } : { path: o.path };
      if (o.fenced) opts.fence = fence;
      return FileBackend.open(opts);
    }
    case 'shm':
      return o.cache ? ShmBackend.open(o.path, o.size, coherence, holds) : ShmBackend.open(o.path, o.size);
    case 'null':
      return new NullBackend(o.size);
  }
}

/** Close a namespace's backend once its executing commands finished (bounded, as the primary's retire). */
async function retire(ns: TargetNamespace): Promise<void> {
  await ns.idle();
  await ns.backend.close();
}
