// Primary side of the multi-process data plane: forks the worker processes, places each handed-off I/O queue on one
// of them (placement policy), relays controller-wide decisions to them (teardown, namespace and ANA changes) and
// folds their reports back into the primary's controllers (TBKAS keep-alive, counters). A worker that dies takes only
// its own queues down: they are removed from their controllers (hosts see the connection drop and reconnect) and the
// worker is started again.
import { fork, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Buffer } from 'node:buffer';
import type { Logger } from 'pino';
import { releaseFromServer } from '../../connection/index.js';
import { DNR, InvalidArgumentError, Status } from '../../protocol/index.js';
import type { TargetController, QueueHandle, QueueInfoView, ResvReplica } from '../core/index.js';
import type { HandedOffQueue, QueueHandOff } from '../transport/tcp/index.js';
import { InvalidationBatcher, type InvRange } from './coherence.js';
import { PLACEMENTS, isPlacement, type FromWorker, type Placement, type PortSpec, type SubsysSpec, type ToWorker, type WorkerReport } from './messages.js';

/** Worker process states: starting (forked, no 'ready' yet), ready, stopping (told to stop), dead (exited). */
export type WorkerState = 'starting' | 'ready' | 'stopping' | 'dead';

export const WORKER_TRANSITIONS: Readonly<Record<WorkerState, readonly WorkerState[]>> = {
  starting: ['ready', 'stopping', 'dead'],
  ready: ['stopping', 'dead'],
  stopping: ['dead'],
  // A dead worker is started again (a new process in the same slot).
  dead: ['starting'],
};

export class WorkerStartError extends Error {
  readonly code = 'WORKER_START_FAILED';
}

/** A change a worker did not apply (it answered with an error, or exited before answering). */
export class WorkerSyncError extends Error {
  readonly code = 'WORKER_SYNC_FAILED';
}

export interface WorkerPoolOptions {
  count: number;
  placement: Placement;
  logger: Logger;
  logLevel: string;
  /** The current ports and subsystems, sent to a worker when it (re)starts. */
  state: () => { ports: PortSpec[]; subsystems: SubsysSpec[] };
  /** Worker entry module (default: worker-main.ts next to this file, run through tsx). */
  entry?: string;
  /**
   * Node flags for the workers only (e.g. --cpu-prof --cpu-prof-dir=/tmp/p), so a worker can be profiled: NODE_OPTIONS
   * refuses --cpu-prof. The bin takes them from NVME_TCP_WORKER_NODE_ARGS.
   */
  nodeArgs?: readonly string[];
  /** Give up on a worker that is not ready after this long (default 30 s: tsx compiles on first start). */
  startTimeoutMs?: number;
  /**
   * Runs a reservation command a worker forwarded on the one state and resolves with its status once every worker
   * applied the result (TargetService; without it such a command completes with Internal Error).
   */
  resvCommand?: (m: Extract<FromWorker, { t: 'resv-cmd' }>) => Promise<number>;
}

/** One worker as GET /workers and /metrics show it. */
export interface WorkerView {
  index: number;
  pid: number | undefined;
  state: WorkerState;
  restarts: number;
  queues: number;
  cpuUserUs: number;
  cpuSystemUs: number;
  lagMeanMs: number;
  lagMaxMs: number;
  ios: number;
  bytesIn: number;
  bytesOut: number;
  /** Read-cache invalidation batches this worker sent over its links and through the primary, and its shared RAM
   * writes that needed none (no peer held the pieces). */
  invalidations: { direct: number; relayed: number; unasked: number };
}

// The compiled package (dist/) runs worker-main.js; the sources run worker-main.ts through tsx.
const ENTRY = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? './worker-main.ts' : './worker-main.js', import.meta.url));

/** `--import` of tsx by absolute URL, so a worker starts whatever the current directory is. */
function tsxImport(): string {
  return pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
}

class WorkerProc {
  state: WorkerState = 'starting';
  restarts = 0;
  child: ChildProcess | undefined;
  report: WorkerReport | undefined;
  ready: Promise<void> = Promise.resolve();
  readonly queues = new Set<TargetRemoteQueue>();
  constructor(readonly index: number) {}

  /** The one place a worker's state changes (WORKER_TRANSITIONS); false for an edge not in the table. */
  setState(next: WorkerState): boolean {
    if (!WORKER_TRANSITIONS[this.state].includes(next)) return false;
    this.state = next;
    return true;
  }
}

/**
 * Messages posted to several workers, each answering by sequence number: `done` runs once every worker a message
 * reached answered or exited. One tracker per sequence space ('ack' for changes and links, 'inv-ack' for relayed
 * invalidations).
 */
class AckTracker {
  #seq = 1;
  readonly #pending = new Map<number, { waiting: Set<WorkerProc>; errors: string[]; done: (errors: string[]) => void }>();

  next(): number {
    return this.#seq++;
  }

  /** Wait for the answers of `waiting` to `seq`; none to wait for: `done` runs now. */
  expect(seq: number, waiting: Set<WorkerProc>, done: (errors: string[]) => void): void {
    if (waiting.size === 0) return done([]);
    this.#pending.set(seq, { waiting, errors: [], done });
  }

  answer(seq: number, w: WorkerProc, error?: string): void {
    const a = this.#pending.get(seq);
    if (a === undefined || !a.waiting.delete(w)) return;
    if (error !== undefined) a.errors.push(error);
    if (a.waiting.size > 0) return;
    this.#pending.delete(seq);
    a.done(a.errors);
  }

  /** Worker `w` exited: it counts as answered everywhere, with `error` where its answer mattered. */
  gone(w: WorkerProc, error?: string): void {
    for (const seq of [...this.#pending.keys()]) this.answer(seq, w, error);
  }
}

/** An I/O queue served by a worker, as its controller in the primary holds it. */
export class TargetRemoteQueue implements QueueHandle {
  commands = 0;
  bytesIn = 0;
  bytesOut = 0;
  errors = 0;
  inFlight = 0;
  constructor(
    readonly id: number,
    readonly worker: WorkerProc,
    readonly h: HandedOffQueue,
    readonly ctrl: TargetController,
    readonly peer: string,
    readonly pool: WorkerPool,
  ) {}

  get qid(): number {
    return this.h.qid;
  }

  info(): QueueInfoView {
    return { qid: this.h.qid, peer: this.peer, state: 'live', inFlight: this.inFlight, commands: this.commands, bytesIn: this.bytesIn, bytesOut: this.bytesOut, errors: this.errors, sqsize: this.h.sqsize, worker: this.worker.index, ...this.h.setupTimes };
  }

  closeTransport(reason: string): void {
    this.pool.closeQueue(this, reason);
  }
}

export class WorkerPool implements QueueHandOff {
  readonly #opts: WorkerPoolOptions;
  readonly #log: Logger;
  readonly #workers: WorkerProc[] = [];
  readonly #remote = new Map<number, TargetRemoteQueue>();
  #placement: Placement;
  #nextId = 1;
  #rr = 0;
  /** Per-port placement (PortConfig.placement) overriding the target-wide one for queues arriving on that port. */
  readonly #portPlacement = new Map<number, Placement>();
  /** controller placement: the worker of each controller that has queues placed (gone with the controller). */
  readonly #ctrlWorker = new WeakMap<TargetController, number>();
  /** Changes and links sent to workers ('ack'). */
  readonly #acks = new AckTracker();
  #stopping = false;
  /** Cache invalidations relayed to workers ('inv-ack'). */
  readonly #invs = new AckTracker();
  /** Workers becoming ready, one at a time (#link). */
  #joining: Promise<void> = Promise.resolve();
  /** Writes in this process (queues that stay here: TLS, DH-HMAC-CHAP) to shared RAM namespaces. */
  readonly #ownInv = new InvalidationBatcher((r, done) => this.#relayInv(r, undefined, done));

  constructor(opts: WorkerPoolOptions) {
    this.#opts = opts;
    this.#log = opts.logger;
    this.#placement = opts.placement;
    for (let i = 0; i < opts.count; i++) this.#workers.push(new WorkerProc(i));
  }

  get count(): number {
    return this.#workers.length;
  }

  get placement(): Placement {
    return this.#placement;
  }

  /** Applies to queues placed from now on; queues already placed stay where they are. */
  set placement(p: Placement) {
    if (!isPlacement(p)) throw new InvalidArgumentError('placement', `unknown placement ${JSON.stringify(p)}; use one of ${PLACEMENTS.join(', ')}`);
    this.#placement = p;
    this.#log.info({ placement: p }, 'placement changed');
  }

  /** The placement of queues arriving on port `id` from now on; undefined: back to the target-wide one. */
  setPortPlacement(id: number, p: Placement | undefined): void {
    if (p === undefined) {
      if (this.#portPlacement.delete(id)) this.#log.info({ portId: id, placement: this.#placement }, 'port placement cleared');
      return;
    }
    if (!isPlacement(p)) throw new InvalidArgumentError('placement', `unknown placement ${JSON.stringify(p)}; use one of ${PLACEMENTS.join(', ')}`);
    this.#portPlacement.set(id, p);
    this.#log.info({ portId: id, placement: p }, 'port placement changed');
  }

  /** The policy a queue arriving on port `id` is placed by. */
  placementFor(id: number): Placement {
    return this.#portPlacement.get(id) ?? this.#placement;
  }

  /** Start every worker; rejects (and stops those that started) when any cannot start. */
  async start(): Promise<void> {
    const starts = this.#workers.map((w) => this.#spawn(w));
    const results = await Promise.allSettled(starts);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined) {
      await this.stop();
      throw failed.reason;
    }
  }

  #spawn(w: WorkerProc): Promise<void> {
    const entry = this.#opts.entry ?? ENTRY;
    const child = fork(entry, [], {
      execArgv: [...(entry.endsWith('.ts') ? ['--import', tsxImport()] : []), ...(this.#opts.nodeArgs ?? [])],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'json',
    });
    w.child = child;
    if (w.state === 'dead') w.setState('starting');
    w.report = undefined;
    const ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new WorkerStartError(`worker ${w.index}: not ready after ${this.#opts.startTimeoutMs ?? 30_000} ms`));
        child.kill('SIGKILL');
      }, this.#opts.startTimeoutMs ?? 30_000);
      timer.unref();
      const onMsg = (m: FromWorker): void => {
        if (m.t === 'ready') {
          clearTimeout(timer);
          child.off('message', onMsg);
          // Linked to every ready worker before it may get a queue (PeerMesh), one joiner at a time so that two
          // workers starting together are linked to each other too.
          this.#joining = this.#joining.then(async () => {
            if (w.child !== child || w.state !== 'starting') return;
            try {
              await this.#link(w);
            } catch (err) {
              // Unlinked, it must not serve: its exit rejects the start (or restarts it) like any other failure.
              this.#log.error({ err: (err as Error).message, worker: w.index }, 'linking a worker failed; ending it');
              child.kill('SIGKILL');
              return;
            }
            if (w.child === child && w.setState('ready')) resolve();
          });
        } else if (m.t === 'init-failed') {
          clearTimeout(timer);
          child.off('message', onMsg);
          reject(new WorkerStartError(`worker ${w.index} could not start: ${m.reason}`));
        }
      };
      child.on('message', onMsg);
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new WorkerStartError(`worker ${w.index} exited during start-up (${signal ?? `code ${code ?? '?'}`})`));
      });
    });
    w.ready = ready;
    child.on('message', (m: FromWorker) => this.#onMessage(w, m));
    child.on('exit', (code, signal) => this.#onExit(w, child, code, signal));
    child.on('error', (err) => {
      // A message that raced the channel closing of a worker told to stop (EPIPE): its exit is handled as expected.
      if (this.#stopping || w.state === 'stopping') this.#log.debug({ err, worker: w.index }, 'worker channel error while stopping');
      else this.#log.error({ err, worker: w.index }, 'worker process error');
    });
    const st = this.#opts.state();
    this.#post(w, { t: 'init', index: w.index, logLevel: this.#opts.logLevel, ports: st.ports, subsystems: st.subsystems });
    return ready;
  }

  /**
   * Link `w` with every ready worker: a connected Unix socket pair per two, one end handed to each with 'peer', made
   * through a listener in a fresh private directory that lives only meanwhile. Resolves once both ends of every link
   * answered (or the process at one end exited). A pair that cannot be made still makes each a member of the
   * other's mesh, without a socket: their invalidations then go through the relay.
   */
  async #link(w: WorkerProc): Promise<void> {
    const others = this.#workers.filter((o) => o !== w && o.state === 'ready');
    if (others.length === 0) return;
    let maker: SocketPairs | undefined;
    try {
      maker = await SocketPairs.open();
    } catch (err) {
      this.#log.warn({ err: (err as Error).message, worker: w.index }, 'worker links could not be made; invalidations go through the primary');
    }
    try {
      for (const o of others) {
        let pair: [net.Socket, net.Socket] | undefined;
        try {
          pair = await maker?.pair();
        } catch (err) {
          this.#log.warn({ err: (err as Error).message, worker: w.index, peer: o.index }, 'worker link could not be made; invalidations go through the primary');
        }
        await new Promise<void>((resolve) =>
          this.#fanOut(
            this.#acks,
            [o, w],
            (seq, to) => ({ t: 'peer', seq, index: to === o ? w.index : o.index }),
            () => resolve(),
            (to) => (to === o ? pair?.[0] : pair?.[1]),
          ),
        );
      }
    } finally {
      await maker?.close();
    }
  }

  /**
   * Post `message` to each of `to` (with `socket(w)` riding along), then `done` with the errors once each it reached
   * answered through `acks` or exited. A socket that could not be sent is closed here, else its other end would wait
   * for it forever.
   */
  #fanOut(acks: AckTracker, to: readonly WorkerProc[], message: (seq: number, w: WorkerProc) => ToWorker, done: (errors: string[]) => void, socket?: (w: WorkerProc) => net.Socket | undefined): void {
    const seq = acks.next();
    const waiting = new Set<WorkerProc>();
    for (const w of to) {
      const s = socket?.(w);
      if (this.#post(w, message(seq, w), s)) waiting.add(w);
      else s?.destroy();
    }
    acks.expect(seq, waiting, done);
  }

  #post(w: WorkerProc, m: ToWorker, socket?: net.Socket): boolean {
    const c = w.child;
    if (c === undefined || !c.connected) return false;
    try {
      if (socket !== undefined) c.send(m, socket);
      else c.send(m);
      return true;
    } catch (err) {
      this.#log.warn({ err, worker: w.index }, 'sending to worker failed');
      return false;
    }
  }

  #onMessage(w: WorkerProc, m: FromWorker): void {
    switch (m.t) {
      case 'report':
        return this.#onReport(w, m);
      case 'closed': {
        const r = this.#remote.get(m.id);
        if (r !== undefined) this.#dropQueue(r, 'disconnected');
        return;
      }
      case 'ack':
        return this.#acks.answer(m.seq, w, m.error !== undefined ? `worker ${w.index}: ${m.error}` : undefined);
      case 'resv-cmd':
        return this.#onResvCmd(w, m);
      case 'inv':
        return this.#relayInv(m.ranges, w, () => void this.#post(w, { t: 'inv-done', seq: m.seq }));
      case 'inv-ack':
        return this.#invs.answer(m.seq, w);
      default:
        return;
    }
  }

  /**
   * A write in shared RAM namespace `nqn`/`nsid` (in this process) reached the file: `done` once every worker dropped
   * its cached copy of the range (ShmBackend's CoherenceHook for the creator's backend).
   */
  invalidate(nqn: string, nsid: number, offset: number, length: number, done: () => void): void {
    this.#ownInv.add(nqn, nsid, offset, length, done);
  }

  /**
   * Tell every worker but `from` to drop `ranges` from its read cache, then `finish`. A worker that exits meanwhile
   * counts as answered: its cache went with it, and a restarted one starts empty.
   */
  #relayInv(ranges: InvRange[], from: WorkerProc | undefined, finish: () => void): void {
    const to = this.#workers.filter((w) => w !== from && w.state !== 'dead');
    this.#fanOut(this.#invs, to, (seq) => ({ t: 'inv', seq, ranges }), () => finish());
  }

  #onResvCmd(w: WorkerProc, m: Extract<FromWorker, { t: 'resv-cmd' }>): void {
    const run = this.#opts.resvCommand;
    const reply = (status: number): void => void this.#post(w, { t: 'resv-done', id: m.id, status });
    if (run === undefined) return reply(Status.INTERNAL | DNR);
    run(m).then(reply, (err: Error) => {
      this.#log.error({ err: err.message, worker: w.index, subnqn: m.nqn, nsid: m.nsid }, 'forwarded reservation command failed');
      reply(Status.INTERNAL | DNR);
    });
  }

  /** A namespace's reservation state changed here: every worker applies it before the change may complete. */
  syncResv(nqn: string, nsid: number, replica: ResvReplica): Promise<void> {
    return this.#broadcast((seq) => ({ t: 'resv', seq, nqn, nsid, replica }));
  }

  #onReport(w: WorkerProc, m: WorkerReport): void {
    w.report = m;
    for (const q of m.queues) {
      const r = this.#remote.get(q.id);
      if (r === undefined) continue;
      r.commands = q.commands;
      r.bytesIn = q.bytesIn;
      r.bytesOut = q.bytesOut;
      r.errors = q.errors;
      r.inFlight = q.inFlight;
    }
    // TBKAS (CTRATT bit 6): commands on a worker's queues keep their controller alive, as they would here.
    for (const id of m.active) {
      const r = this.#remote.get(id);
      if (r === undefined) continue;
      r.ctrl.kaSeen = true;
      if (m.at > r.ctrl.lastCommandAt) r.ctrl.lastCommandAt = m.at;
    }
  }

  #onExit(w: WorkerProc, child: ChildProcess, code: number | null, signal: string | null): void {
    if (w.child !== child) return;
    const expected = w.state === 'stopping' || this.#stopping;
    const wasReady = w.state === 'ready';
    w.setState('dead');
    const lost = [...w.queues];
    for (const r of lost) this.#dropQueue(r, 'worker exited');
    this.#acks.gone(w, `worker ${w.index} exited`);
    // Its read cache went with it (a restarted one starts empty): no invalidation waits for it.
    this.#invs.gone(w);
    if (expected) return;
    // Not while stopping: the others are exiting too, and a message to one that already closed its channel is EPIPE.
    for (const o of this.#workers) if (o !== w && (o.state === 'ready' || o.state === 'starting')) this.#post(o, { t: 'peer-gone', index: w.index });
    this.#log.error({ worker: w.index, pid: child.pid, code, signal, queues: lost.length }, `worker ${w.index} died; its queues are dropped, restarting it`);
    if (!wasReady) return;
    w.restarts++;
    this.#spawn(w).then(
      () => this.#log.info({ worker: w.index, pid: w.child?.pid, restarts: w.restarts }, 'worker restarted'),
      (err: Error) => this.#log.error({ worker: w.index, err: err.message }, 'worker restart failed'),
    );
  }

  /** The queue is gone on its worker: remove it from its controller, as CoreQueue.onTransportClosed does here. */
  #dropQueue(r: TargetRemoteQueue, why: string): void {
    if (!this.#remote.delete(r.id)) return;
    r.worker.queues.delete(r);
    const ctrl = r.ctrl;
    if (ctrl.queues.get(r.qid) === r) ctrl.queues.delete(r.qid);
    this.#log.info({ cntlid: ctrl.cntlid, subnqn: ctrl.subsys.nqn, hostnqn: ctrl.hostnqn, qid: r.qid, peer: r.peer, worker: r.worker.index, why }, 'queue disconnected');
  }

  closeQueue(r: TargetRemoteQueue, reason: string): void {
    if (!this.#post(r.worker, { t: 'close', id: r.id, reason })) this.#dropQueue(r, reason);
  }

  /** The worker index the policy picks for `h`, then the next ready one if that one is not ready; -1 if none is. */
  #choose(h: HandedOffQueue, ctrl: TargetController): number {
    const n = this.#workers.length;
    let i: number;
    switch (this.placementFor(h.portId)) {
      case 'single':
        i = 0;
        break;
      case 'queue':
        i = this.#rr++ % n;
        break;
      case 'host':
        i = fnv1a(h.hostnqn) % n;
        break;
      case 'controller': {
        const have = this.#ctrlWorker.get(ctrl);
        if (have !== undefined && this.#workers[have]?.state === 'ready') return have;
        i = this.#rr++ % n;
        break;
      }
    }
    for (let k = 0; k < n; k++) {
      const j = (i + k) % n;
      if (this.#workers[j]?.state === 'ready') return j;
    }
    return -1;
  }

  /** Whether a worker serves an I/O queue of subsystem `nqn` now. */
  servesSubsystem(nqn: string): boolean {
    for (const r of this.#remote.values()) if (r.h.subnqn === nqn) return true;
    return false;
  }

  accept(_h: HandedOffQueue): boolean {
    return !this.#stopping && this.#workers.some((w) => w.state === 'ready');
  }

  take(socket: net.Socket, h: HandedOffQueue, ctrl: TargetController, pending: Buffer | undefined): QueueHandle | undefined {
    const i = this.#choose(h, ctrl);
    const w = this.#workers[i];
    if (w === undefined) return undefined;
    const policy = this.placementFor(h.portId);
    if (policy === 'controller') this.#ctrlWorker.set(ctrl, i);
    const id = this.#nextId++;
    const peer = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? 0}`;
    const msg: ToWorker = { t: 'queue', id, q: h, hostid: ctrl.hostid.toString('hex') };
    if (pending !== undefined) msg.pending = pending.toString('base64');
    releaseFromServer(socket);
    if (!this.#post(w, msg, socket)) return undefined;
    const r = new TargetRemoteQueue(id, w, h, ctrl, peer, this);
    this.#remote.set(id, r);
    w.queues.add(r);
    this.#log.debug({ cntlid: h.cntlid, qid: h.qid, worker: i, placement: policy }, 'queue handed to worker');
    return r;
  }

  /** Send a change to every live worker and wait until each applied it. */
  #broadcast(make: (seq: number) => ToWorker): Promise<void> {
    const live = this.#workers.filter((w) => w.state === 'ready' || w.state === 'starting');
    return new Promise((resolve, reject) => this.#fanOut(this.#acks, live, make, (errors) => (errors.length > 0 ? reject(new WorkerSyncError(errors.join('; '))) : resolve())));
  }

  syncSubsystem(spec: SubsysSpec): Promise<void> {
    return this.#broadcast((seq) => ({ t: 'subsys', seq, spec }));
  }

  removeSubsystem(nqn: string): Promise<void> {
    return this.#broadcast((seq) => ({ t: 'subsys-remove', seq, nqn }));
  }

  syncPort(spec: PortSpec): Promise<void> {
    return this.#broadcast((seq) => ({ t: 'port', seq, spec }));
  }

  /**
   * A gateway's lease deadline to every live worker (no ack: the next renewal sends it again). A worker's writes check
   * it just before the backend as the primary's do, so a worker stops writing when the primary stops renewing (the
   * primary stalled or cut off from etcd) even though no state change reaches it.
   */
  sendAnaDeadline(until: number | null): void {
    for (const w of this.#workers) if (w.state === 'ready' || w.state === 'starting') this.#post(w, { t: 'ana-deadline', until });
  }

  removePort(id: number): Promise<void> {
    this.#portPlacement.delete(id);
    return this.#broadcast((seq) => ({ t: 'port-remove', seq, id }));
  }

  workers(): WorkerView[] {
    return this.#workers.map((w) => {
      const r = w.report;
      return {
        index: w.index,
        pid: w.child?.pid,
        state: w.state,
        restarts: w.restarts,
        queues: w.queues.size,
        cpuUserUs: r?.cpuUserUs ?? 0,
        cpuSystemUs: r?.cpuSystemUs ?? 0,
        lagMeanMs: r?.lagMeanMs ?? 0,
        lagMaxMs: r?.lagMaxMs ?? 0,
        ios: r?.ios ?? 0,
        bytesIn: r?.bytesIn ?? 0,
        bytesOut: r?.bytesOut ?? 0,
        invalidations: { direct: r?.inv.direct ?? 0, relayed: r?.inv.relayed ?? 0, unasked: r?.inv.unasked ?? 0 },
      };
    });
  }

  /** Latest per-namespace counters of every worker. */
  namespaceReports(): WorkerReport['ns'][] {
    return this.#workers.map((w) => w.report?.ns ?? []);
  }

  /** Latest host-caused log counts of every worker that reported. */
  refusalReports(): WorkerReport['refusals'][] {
    return this.#workers.flatMap((w) => (w.report === undefined ? [] : [w.report.refusals]));
  }

  /** Wait until a restarting worker is ready again (tests, graceful stop). */
  async settled(): Promise<void> {
    await Promise.allSettled(this.#workers.map((w) => w.ready));
  }

  /** Graceful stop: every worker finishes in-flight commands, closes its queues, fsyncs and closes its namespaces. */
  async stop(): Promise<void> {
    this.#stopping = true;
    const exits = this.#workers.map(async (w) => {
      const c = w.child;
      if (c === undefined || w.state === 'dead' || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
      w.setState('stopping');
      if (!this.#post(w, { t: 'stop', seq: this.#acks.next() })) c.kill('SIGKILL');
      const timer = setTimeout(() => c.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    });
    await Promise.all(exits);
  }
}

/** FNV-1a of a string: a stable host → worker map across restarts of the target. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Connected Unix socket pairs (Node has no socketpair()): a listener in a private 0700 directory, one pair at a time. */
class SocketPairs {
  private constructor(
    readonly dir: string,
    readonly server: net.Server,
  ) {}

  static async open(): Promise<SocketPairs> {
    const dir = await mkdtemp(path.join(tmpdir(), 'nvme-tcp-ts-links-'));
    const server = net.createServer({ pauseOnConnect: true });
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(path.join(dir, 's'), () => resolve());
      });
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
    return new SocketPairs(dir, server);
  }

  /** Both ends paused, so nothing is read here before they reach their workers. */
  async pair(): Promise<[net.Socket, net.Socket]> {
    const accepted = new Promise<net.Socket>((resolve) => this.server.once('connection', resolve));
    const c = net.connect(path.join(this.dir, 's'));
    c.pause();
    await new Promise<void>((resolve, reject) => {
      c.once('connect', resolve);
      c.once('error', reject);
    });
    return [c, await accepted];
  }

  /**
   * Stop listening and remove the directory. Not waiting for 'close': a server whose sockets went to child processes
   * emits it only once those children closed them (child_process tracks sent server sockets), i.e. never here.
   */
  async close(): Promise<void> {
    this.server.close();
    await rm(this.dir, { recursive: true, force: true });
  }
}
