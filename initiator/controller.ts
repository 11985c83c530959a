// The host controller: its state machine, the connect sequence (admin queue, enable, Identify, I/O queues, AEN,
// scan, keep-alive), I/O requeue across resets, error recovery / reconnect / ctrl_loss_tmo and orderly shutdown.
// The pieces it owns each hold their own state: FabricsConnector (Connect + authentication), IoQueueSet (I/O
// queues and hctxs), NamespaceScanner (namespaces + ANA), AenHandler, KeepAlive. Modelled on Linux
// drivers/nvme/host/{core.c nvme_change_ctrl_state / nvme_init_ctrl_finish, tcp.c nvme_tcp_setup_ctrl /
// nvme_tcp_error_recovery_work / nvme_tcp_reconnect_or_remove}.
import { EventEmitter } from 'node:events';
import { Buffer } from 'node:buffer';
import { pino, type Logger } from 'pino';
import type { ControllerState } from './controller-state.js';
import { CNTLID_DYNAMIC, setLongTimeout, type NwpState, type AnaStateName, type LongTimeout, type IdentifyController } from '../protocol/index.js';
import type { AdminChannel, AdminSpec } from './admin.js';
import { AenHandler, type AsyncEvent } from './aen.js';
import { ConcatNotOfferedError, isAuthFailure } from './auth.js';
import { delay } from './delay.js';
import type { Hctx, HctxType } from './dispatch/hctx.js';
import { readDiscoveryLog } from './discovery.js';
import { abortCommand, formatNvm, getHostBehavior, getWriteProtect, readFeatureEffects, readSupportedLogPages, setHostBehavior, setWriteProtect } from './features.js';
import { ConnectionClosedError, ControllerStateError, InvalidArgumentError, NvmeStatusError, TimeoutError, TransportFatalError } from './errors.js';
import { propertyGetCmd, propertySetCmd, type DiscoveryEntry } from './fabrics-cmds.js';
import { FabricsConnector, type AuthInfo } from './fabrics.js';
import { DEFAULT_MAX_TRANSFER, checkIdentify, identifyController, maxTransferBytes } from './identify.js';
import { IoQueueSet, type IoQueueHost, type QueueInfo } from './io-queues.js';
import { KeepAlive, type KeepAliveHost } from './keep-alive.js';
import type { IoExecutor, IoOptions, Namespace } from './namespace.js';
import { connectionRegistry, hostRegistry, type ResolvedOptions } from './options.js';
import { type Completion, type IoQueue, type IoRequest, type IoSink, type IoSqeBuilder, PromiseRequest, QueuePair, type SubmitSpec, TagSet } from './queue-pair.js';
import { Placement, effectiveWorkers } from './io-worker/placement.js';
import { type IoWorkerInfo, type IoWorkerPool, acquireIoWorkerPool } from './io-worker/pool.js';
import { HostRemoteQueue } from './io-worker/remote-queue.js';
import { enableController, shutdownController } from './registers.js';
import { retryDelayMs, type RetryPolicy } from './retry.js';
import { NamespaceScanner } from './scan.js';
import { HostTcpQueue } from './transport/index.js';
import { concatCredentials, tlsCredentials, type TlsQueueCredentials } from './tls.js';

export type { AsyncEvent } from './aen.js';
export type { ControllerState } from './controller-state.js';
export type { DiscoveryEntry } from './fabrics-cmds.js';
export type { QueueInfo } from './io-queues.js';
export type { IoWorkerInfo } from './io-worker/pool.js';

/** Allowed controller state transitions (the edges described in controller-state.ts). */
const TRANSITIONS: Record<ControllerState, readonly ControllerState[]> = {
  new: ['connecting', 'deleting'],
  connecting: ['live', 'resetting', 'deleting', 'dead'],
  live: ['resetting', 'deleting'],
  resetting: ['connecting', 'deleting', 'dead'],
  deleting: ['deleted'],
  dead: ['deleting', 'deleted'],
  deleted: [],
};

/** Linux NVME_AQ_DEPTH: 32 admin entries; tags 0..30 for commands, CID 31 for the AER (aen.ts). */
const ADMIN_DEPTH = 32;
/** Linux NVME_TCP_ADMIN_CCSZ: 8 KiB in-capsule space assumed on the admin queue. */
const ADMIN_INLINE = 8192;

export interface ControllerEvents {
  state: [from: ControllerState, to: ControllerState];
  reconnecting: [attempt: number, err: Error];
  reconnected: [cntlid: number];
  lost: [err: Error];
  aen: [ev: AsyncEvent];
  namespacesChanged: [nsids: number[]];
  anaChange: [states: Map<number, AnaStateName>];
}

function toError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}

export class Controller extends EventEmitter<ControllerEvents> implements IoExecutor {
  readonly opts: ResolvedOptions;
  readonly log: Logger;
  #state: ControllerState = 'new';
  #admin: QueuePair | undefined;
  #identify: IdentifyController | undefined;
  #cap = 0n;
  #vs = 0;
  #cntlid = 0;
  #stateWaiters: Array<() => void> = [];
  #releaseRegistry: Array<() => void> = [];
  #ioFailFast = false;
  #lossError: Error | undefined;
  #recovery: AbortController | undefined;
  #queueLimit: number | undefined;
  /** io workers (io_workers > 0): started on the first I/O queue setup, with the placement that outlives reconnects. */
  #workers: IoWorkerPool | undefined;
  /** Gives this controller's reference to the (shared) pool back; the last one stops the threads. */
  #releaseWorkers: (() => Promise<void>) | undefined;
  #placement: Placement | undefined;
  /** TLS identity and PSK of this host/subsystem pair (derived once; every queue handshakes with them). */
  #tlsCred: TlsQueueCredentials | undefined;
  /** The one object the owned pieces reach the controller through. */
  readonly #host: AdminChannel & IoQueueHost & KeepAliveHost;
  readonly #fabrics: FabricsConnector;
  readonly #io: IoQueueSet;
  readonly #scanner: NamespaceScanner;
  readonly #aen: AenHandler;
  readonly #keepAlive: KeepAlive;
  maxTransferBytes = DEFAULT_MAX_TRANSFER;
  /** I/O commands sent again after an NVMe error status (DNR clear), since connect. */
  ioRetries = 0;

  constructor(opts: ResolvedOptions) {
    super();
    this.opts = opts;
    this.log = (opts.logger ?? pino({ level: 'silent' })).child({ subnqn: opts.nqn, traddr: `${opts.traddr}:${opts.trsvcid}` });
    this.#host = this.#makeHost();
    this.#fabrics = new FabricsConnector(opts, this.log);
    this.#io = new IoQueueSet(this.#host, this.log);
    this.#scanner = new NamespaceScanner(this.#host, this);
    this.#aen = new AenHandler(
      this.#host,
      this.#scanner,
      {
        aen: (ev) => this.emit('aen', ev),
        namespacesChanged: (nsids) => this.emit('namespacesChanged', nsids),
        anaChange: (states) => this.emit('anaChange', states),
      },
      this.log,
    );
    this.#keepAlive = new KeepAlive(this.#host);
  }

  #makeHost(): AdminChannel & IoQueueHost & KeepAliveHost {
    // Getters read the live fields; `self` because a getter's own `this` is the host object.
    const self = this;
    return {
      adminCmd: (spec) => this.#adminCmd(spec),
      get adminQueue() {
        return self.#admin;
      },
      get keepAliveWanted() {
        // nvme_keep_alive_finish re-arms while LIVE or CONNECTING: keep-alive spans the I/O queue setup.
        return self.#state === 'live' || self.#state === 'connecting';
      },
      openQueue: (qid, tags, inline) => (this.opts.ioWorkers > 0 ? this.#openRemoteQueue(qid, tags, inline) : this.#openQueue(qid, tags, inline)),
      connectQueue: async (qp, sqsize) => {
        if (qp instanceof HostRemoteQueue) await this.#connectRemoteQueue(qp, sqsize);
        else await this.#fabrics.connect(qp as QueuePair, sqsize, 0, this.#cntlid);
      },
      workerCpu: (w) => this.#workers?.handle(w)?.cpu,
      keepAliveFailed: (err) => {
        this.log.warn({ err }, 'keep-alive failed');
        // While connecting the admin queue is what failed: closing it fails the setup in progress, which the
        // reconnect loop (or start()) then handles, as nvme_tcp_timeout stops the queue outside LIVE.
        if (this.#state === 'connecting') this.#admin?.close(new ConnectionClosedError('keep-alive failed during setup', { cause: err }));
        else this.#errorRecovery(err);
      },
    };
  }

  get state(): ControllerState {
    return this.#state;
  }

  get cntlid(): number {
    return this.#cntlid;
  }

  get identify(): IdentifyController {
    if (this.#identify === undefined) throw new ControllerStateError(this.#state, 'not identified yet');
    return this.#identify;
  }

  get cap(): bigint {
    return this.#cap;
  }

  get vs(): number {
    return this.#vs;
  }

  get ioTimeoutMs(): number {
    return this.opts.ioTimeoutMs;
  }

  get ioQueueCount(): number {
    return this.#io.count;
  }

  /** I/O queues granted by Set Features Number of Queues (before whole-group fallback). */
  get grantedQueues(): number {
    return this.#io.granted;
  }

  /** Commands in flight on all I/O queues (the queue-depth multipath policy compares this). */
  get inFlight(): number {
    return this.#io.inFlight;
  }

  /** Queues that completed DH-HMAC-CHAP in this controller's lifetime (reconnects included). */
  get authenticatedQueues(): number {
    return this.#fabrics.authenticatedQueues;
  }

  /** What the admin queue's last DH-HMAC-CHAP transaction agreed on (undefined: not authenticated). */
  get authInfo(): AuthInfo | undefined {
    return this.#fabrics.authInfo;
  }

  get namespaces(): Namespace[] {
    return this.#scanner.list;
  }

  namespace(nsid: number): Namespace {
    const ns = this.#scanner.get(nsid);
    if (ns === undefined) throw new ControllerStateError(this.#state, `no active namespace ${nsid}`);
    return ns;
  }

  /** Submission contexts of a type (default: one per I/O queue or queue group). */
  hctxs(type: HctxType = 'default'): readonly Hctx[] {
    return this.#io.hctxs(type);
  }

  hctx(i: number, type: HctxType = 'default'): Hctx {
    const list = this.#io.hctxs(type);
    const h = list[i % Math.max(1, list.length)];
    if (h === undefined) throw new ControllerStateError(this.#state, `no ${type} hctx`);
    return h;
  }

  /** Limit the I/O queues requested (match_hw_queues computes it before connecting). */
  setQueueLimit(n: number | undefined): void {
    this.#queueLimit = n;
  }

  // ---------------------------------------------------------------------------------------------
  // State machine

  #setState(next: ControllerState): boolean {
    const from = this.#state;
    if (from === next) return true;
    if (!TRANSITIONS[from].includes(next)) {
      this.log.warn({ from, to: next }, 'illegal controller state transition');
      return false;
    }
    this.#state = next;
    this.log.info({ from, to: next }, 'controller state');
    this.emit('state', from, next);
    this.#wakeWaiters();
    return true;
  }

  /** Let every I/O waiting on the state look again (state change, fast_io_fail_tmo, deletion). */
  #wakeWaiters(): void {
    const w = this.#stateWaiters;
    this.#stateWaiters = [];
    for (const f of w) f();
  }

  /** Initial connect: reserve the identity tuple, run the whole sequence once; a failure deletes the controller. */
  async start(): Promise<void> {
    this.#releaseRegistry.push(hostRegistry.acquire(this.opts.hostnqn, this.opts.hostid));
    try {
      this.#releaseRegistry.push(connectionRegistry.acquire(this.opts));
    } catch (e) {
      this.#release();
      throw e;
    }
    this.#setState('connecting');
    try {
      await this.#connectOnce();
      this.#setState('live');
    } catch (e) {
      this.#teardownQueues(toError(e));
      this.#setState('deleting');
      this.#setState('deleted');
      this.#release();
      await this.#releaseWorkers?.();
      throw e;
    }
  }

  #release(): void {
    for (const r of this.#releaseRegistry.splice(0)) r();
  }

  // ---------------------------------------------------------------------------------------------
  // Connect sequence

  async #openQueue(qid: number, tags: TagSet, inlineLimit: number): Promise<QueuePair> {
    const o = this.opts;
    const tcp = new HostTcpQueue({
      host: o.traddr,
      port: o.trsvcid,
      hdgst: o.hdrDigest,
      ddgst: o.dataDigest,
      label: `${o.nqn} q${qid}`,
      ...(o.localAddress !== undefined ? { localAddress: o.localAddress } : {}),
      ...(o.tls !== undefined ? { tls: (this.#tlsCred ??= tlsCredentials(o.tls, o.hostnqn, o.nqn)) } : {}),
      // Concatenation: cleartext until the admin queue's DH-HMAC-CHAP generated the PSK, TLS with it after.
      ...(o.concat && this.#tlsCred !== undefined ? { tls: this.#tlsCred } : {}),
    });
    const qp = new QueuePair({ qid, tcp, tags, inlineLimit, onError: (q, err) => this.#queueError(q, err), onActivity: this.#keepAlive.noteActivity });
    await tcp.connect();
    return qp;
  }

  /** The io workers and their placement, made once (match_hw_queues caps the workers like the queues). */
  #ioWorkers(): { pool: IoWorkerPool; placement: Placement } {
    if (this.#workers === undefined || this.#placement === undefined) {
      const o = this.opts;
      const n = effectiveWorkers(o.ioWorkers, o.matchHwQueues, this.#queueLimit);
      const lease = acquireIoWorkerPool(n, o.ioWorkerCpus, o.ioBudgetUs, this.log);
      this.#workers = lease.pool;
      this.#releaseWorkers = lease.release;
      this.#placement = new Placement(n);
    }
    return { pool: this.#workers, placement: this.#placement };
  }

  /** An I/O queue on its io worker (nvme_tcp_set_queue_io_cpu picks the CPU; the placement picks the worker here). */
  async #openRemoteQueue(qid: number, tags: TagSet, inlineLimit: number): Promise<IoQueue> {
    const { pool, placement } = this.#ioWorkers();
    const worker = await pool.worker(placement.workerOf(qid));
    return new HostRemoteQueue({
      key: pool.nextKey(),
      qid,
      tags,
      inlineLimit,
      slotBytes: this.maxTransferBytes,
      worker,
      onError: (q, err) => this.#queueError(q, err),
      onActivity: this.#keepAlive.noteActivity,
    });
  }

  /** ICReq and Fabrics Connect of a worker's queue, run on that worker with this controller's identity. */
  async #connectRemoteQueue(q: HostRemoteQueue, sqsize: number): Promise<void> {
    const o = this.opts;
    const auth = this.#fabrics.remoteAuth();
    const agreed = await q.connect({
      ...(auth === undefined ? {} : { auth }),
      host: o.traddr,
      port: o.trsvcid,
      localAddress: o.localAddress,
      hdgst: o.hdrDigest,
      ddgst: o.dataDigest,
      label: `${o.nqn} q${q.qid}`,
      sqsize,
      cntlid: this.#cntlid,
      hostnqn: o.hostnqn,
      hostid: o.hostid,
      subnqn: o.nqn,
      disableSqflow: o.disableSqflow,
      connectTimeoutMs: o.adminTimeoutMs,
    });
    if (agreed !== undefined) this.#fabrics.remoteAuthenticated(q.qid, agreed);
  }

  /**
   * Place I/O queue `qid` on io worker `worker` (−1: back to the default (qid − 1) mod N), kept across reconnects like
   * the proposed writable io_cpu attribute. A live queue is reconnected on its new worker. A non-existent queue or
   * worker is refused (InvalidArgumentError) and nothing changes.
   */
  async setQueueWorker(qid: number, worker: number): Promise<void> {
    if (this.opts.ioWorkers === 0) throw new InvalidArgumentError('worker', 'this controller has no io workers (io_workers=0)');
    const { placement } = this.#ioWorkers();
    const now = this.#io.queueInfo(this.opts.traddr, this.opts.trsvcid).find((q) => q.qid === qid);
    const count = this.#io.count;
    // Validate before changing anything: a queue that exists now, a worker that exists.
    const target = placement.set(qid, worker, count);
    if (now === undefined || now.worker === target || this.#state !== 'live') return;
    try {
      await this.#io.moveQueue(qid, this.opts.ioTimeoutMs);
    } catch (e) {
      this.log.warn({ qid, worker: target, err: toError(e).message }, 'moving queue failed; starting error recovery');
      this.#errorRecovery(toError(e));
      throw e;
    }
  }

  /** Worker each I/O queue is placed on by default or override (what the next connect uses). */
  queueWorker(qid: number): number {
    return this.#placement?.workerOf(qid) ?? -1;
  }

  /** Per io worker: thread, CPU, counters (empty with io_workers=0). */
  ioWorkerInfo(): IoWorkerInfo[] {
    return this.#workers?.info() ?? [];
  }

  /** Fault injection: end io worker `i` as a crash would (worker.terminate()); its queues go through error recovery. */
  async terminateIoWorker(i: number): Promise<void> {
    await this.#workers?.kill(i);
  }

  /**
   * An I/O buffer the io workers use in place (shared memory); with io_workers=0, or once the shared pool is used up,
   * a plain Buffer (copied once per command on a worker queue). Give it back with freeIoBuffer.
   */
  allocIoBuffer(bytes: number): Buffer {
    if (this.opts.ioWorkers === 0) return Buffer.allocUnsafeSlow(bytes);
    return this.#ioWorkers().pool.allocBuffer(bytes);
  }

  freeIoBuffer(buf: Buffer): void {
    this.#workers?.freeBuffer(buf);
  }

  async #adminCmd(spec: AdminSpec): Promise<Completion> {
    const a = this.#admin;
    if (a === undefined) throw new ControllerStateError(this.#state, 'no admin queue');
    return a.submit({ ...spec, timeoutMs: this.opts.adminTimeoutMs });
  }

  async propertyGet(offset: number, size: 4 | 8): Promise<bigint> {
    const c = await this.#adminCmd({ sqe: propertyGetCmd(offset, size) });
    return size === 8 ? (BigInt(c.dw1 >>> 0) << 32n) | BigInt(c.dw0 >>> 0) : BigInt(c.dw0 >>> 0);
  }

  async propertySet(offset: number, size: 4 | 8, value: bigint): Promise<void> {
    await this.#adminCmd({ sqe: propertySetCmd(offset, size, value) });
  }

  /** Linux nvme_tcp_setup_ctrl: admin queue, enable, Identify, then (I/O controllers) queues, AEN and scan. */
  async #connectOnce(): Promise<void> {
    const o = this.opts;
    if (o.concat) await this.#concatAdminPhase();
    this.#admin = await this.#openQueue(0, new TagSet(ADMIN_DEPTH - 1), ADMIN_INLINE);
    // Admin Connect: SQSIZE NVME_AQ_DEPTH − 1, KATO in ms, dynamic controller model.
    this.#cntlid = await this.#fabrics.connect(this.#admin, ADMIN_DEPTH - 1, o.keepAliveTmo * 1000, CNTLID_DYNAMIC);
    const regs = await enableController(this);
    this.#cap = regs.cap;
    this.#vs = regs.vs;
    const id = await identifyController(this.#host);
    checkIdentify(id, this.#cntlid, o.discovery);
    this.#identify = id;
    this.maxTransferBytes = maxTransferBytes(id);
    this.#scanner.ana.configure(id, this.maxTransferBytes);
    // Keep-alive from here, before the I/O queues (Linux 6.7+ nvme_init_ctrl_finish, "start keep-alive after admin
    // queue setup"): the controller's KATO runs from the admin Connect (NVMe Base 2.0 §3.9), and I/O queue setup can
    // outlast it (many queues behind slow Connects, io workers starting on a busy CPU). The tick re-arms while
    // connecting, so a slow setup keeps the controller alive and the keep-alive carries on once it is live.
    this.#keepAlive.start(o.keepAliveTmo, id.ctratt);
    if (!o.discovery) {
      await this.#io.setup(o, this.#queueLimit, id, this.#cap);
      await this.#aen.configure(id);
      await this.#scanner.scan();
    }
  }

  /**
   * Secure channel concatenation (TP 8018), as Linux nvme_tcp_setup_ctrl does it: a cleartext admin queue connects,
   * authenticates with SC_C NEWTLSPSK, is enabled and identified, then is torn down; the generated PSK (a new one on
   * every (re)connect: Linux revokes it on reset) is what the admin and I/O queues then handshake with.
   */
  async #concatAdminPhase(): Promise<void> {
    const o = this.opts;
    this.#tlsCred?.psk.fill(0);
    this.#tlsCred = undefined;
    const admin = await this.#openQueue(0, new TagSet(ADMIN_DEPTH - 1), ADMIN_INLINE);
    this.#admin = admin;
    await this.#fabrics.connect(admin, ADMIN_DEPTH - 1, o.keepAliveTmo * 1000, CNTLID_DYNAMIC, 'new');
    const g = this.#fabrics.takeGeneratedPsk();
    if (g === undefined) {
      admin.close(new ConnectionClosedError('secure channel concatenation not offered'));
      throw new ConcatNotOfferedError();
    }
    try {
      await enableController(this);
      await identifyController(this.#host);
      this.#tlsCred = concatCredentials(g.hashId, g.psk, o.hostnqn, o.nqn);
    } finally {
      g.psk.fill(0);
      admin.close(new ConnectionClosedError('secure channel concatenation: admin queue reconnects inside TLS'));
    }
    this.log.info({ identity: this.#tlsCred.identity }, 'secure channel concatenation: TLS PSK generated, reconnecting the admin queue inside TLS');
  }

  // ---------------------------------------------------------------------------------------------
  // Namespaces and ANA (owned by the scanner)

  /** Rescan: active NS list (CNS 2), Identify NS + descriptor list per NSID. Returns NSIDs that changed. */
  async rescan(): Promise<number[]> {
    return this.#scanner.scan();
  }

  /** ANA state by group id as last read (empty when the controller does not report ANA). */
  get anaStates(): ReadonlyMap<number, AnaStateName> {
    return this.#scanner.anaStates;
  }

  /** Re-read the ANA log (also done on ANA AENs and by multipath on path errors). */
  async refreshAna(): Promise<void> {
    await this.#scanner.refreshAna();
  }

  // ---------------------------------------------------------------------------------------------
  // I/O execution with requeue across reconnects

  /**
   * Execute a command through the promise API: a thin adapter over submitIo, the one request path (as blk-mq has one),
   * with the spec in a pooled PromiseRequest; so the promise API retries, requeues and times out exactly as the
   * callback API does. Resolves with the completion, rejects with the error ioDone reports.
   */
  execIo(build: () => SubmitSpec, opts: IoOptions & { write: boolean }): Promise<Completion> {
    let spec: SubmitSpec;
    try {
      spec = build();
    } catch (e) {
      return Promise.reject(toError(e));
    }
    const req = PromiseRequest.take(spec, opts.write);
    req.failfast = opts.failfast === true;
    req.poll = opts.poll === true;
    req.hctx = opts.hctx ?? 0;
    const done = req.settled();
    this.submitIo(req);
    return done;
  }

  /**
   * Submit an I/O command (Namespace.submit, and execIo's adapter): `io.ioDone` is called once, with no promise or
   * closure per command on the success path. Closures appear only on the rare paths (retry delay, waiting for a
   * reconnect). Outside LIVE a command waits for the reconnect unless failfast is set (multipath), fast_io_fail_tmo
   * has fired, or the controller is lost/deleted (Linux nvmf_fail_nonready_command). `io` comes with its builder,
   * hctx and retries set (Namespace.submit, execIo); the sink and rqTimeoutMs are set here.
   */
  submitIo(io: IoRequest): void {
    const st = this.#state;
    if (st === 'live') {
      let h: Hctx;
      try {
        h = this.#pickHctx(io.hctx ?? 0, io.write, io.poll === true);
      } catch (e) {
        io.ioDone(e as Error);
        return;
      }
      io.sink = this.#ioSink;
      // blk-mq's rq->timeout: the request's own, else the queue's (io_timeout).
      io.rqTimeoutMs = io.timeoutMs ?? this.opts.ioTimeoutMs;
      h.submitIo(io);
      return;
    }
    if (st === 'deleting' || st === 'deleted' || st === 'new') io.ioDone(new ControllerStateError(st, 'controller is not usable'));
    else if (st === 'dead') io.ioDone(this.#lossError ?? new ConnectionClosedError('controller lost'));
    else if (io.failfast === true) io.ioDone(new ConnectionClosedError(`controller is ${st}`));
    else if (this.#ioFailFast) io.ioDone(new ConnectionClosedError('fast_io_fail_tmo expired while reconnecting'));
    else this.#waitForLive(io);
  }

  /** Its own method so that submitIo's parameters are not context-allocated on every call (docs/performance.md). */
  #waitForLive(io: IoRequest): void {
    this.#stateWaiters.push(() => this.submitIo(io));
  }

  /** The hctx an I/O goes to (blk-mq's hctx type map): poll, then write, hctxs when there are any, else default. */
  #pickHctx(i: number, write: boolean, poll: boolean): Hctx {
    if (poll && this.#io.hctxs('poll').length > 0) return this.hctx(i, 'poll');
    if (write && this.#io.hctxs('write').length > 0) return this.hctx(i, 'write');
    return this.hctx(i, 'default');
  }

  /** Where the queues report I/O completions; one object per controller. */
  readonly #ioSink: IoSink = {
    ioCompleted: (io, err) => {
      if (err === undefined) io.ioDone(undefined);
      else this.#ioFailed(io, err);
    },
  };

  /**
   * An I/O command failed: retry, requeue or report it, the one place this policy lives (Linux nvme_decide_disposition
   * + nvme_failover_req / nvme_retry_req). Commands caught in a queue teardown (transport errors, not their own
   * timeout) are requeued and resubmitted after the reconnect unless failfast is set. Apart from ioCompleted because
   * its closures would make V8 allocate a context for every completion, failed or not (docs/performance.md, "Host
   * path, third pass").
   */
  #ioFailed(io: IoRequest, err: Error): void {
    const retries = io.retries ?? 0;
    if (err instanceof NvmeStatusError) {
      // DNR clear → requeue after the CRD delay (NVMe Base 2.0 §4.6.1), until max_retries; a data digest error arrives
      // here as DATA_XFER_ERROR without DNR, so it is retried the same way.
      const wait = retryDelayMs(err.status, retries, this.#retryPolicy(), io.failfast === true);
      if (wait === undefined) {
        io.ioDone(err);
        return;
      }
      this.ioRetries++;
      this.log.debug({ status: err.status, retries: retries + 1, delayMs: wait }, 'retrying I/O command');
      io.retries = retries + 1;
      if (wait > 0) void delay(wait).then(() => this.submitIo(io));
      else queueMicrotask(() => this.submitIo(io));
      return;
    }
    if (io.failfast === true) {
      io.ioDone(err);
      return;
    }
    if (err instanceof TimeoutError) {
      // Linux nvme_tcp_timeout on a live controller does not fail the command: it starts error recovery, whose
      // teardown cancels it (NVME_SC_HOST_ABORTED_CMD) and nvme_decide_disposition retries it after the reconnect,
      // counted against nvme_core.max_retries. Past them, the timeout is what the caller sees.
      if (retries >= this.opts.maxRetries) {
        io.ioDone(err);
        return;
      }
      this.ioRetries++;
      io.retries = retries + 1;
    } else if (!(err instanceof ConnectionClosedError || err instanceof TransportFatalError)) {
      io.ioDone(err);
      return;
    }
    if (this.#state === 'live') this.#stateWaiters.push(() => this.submitIo(io));
    else this.submitIo(io);
  }


  #retryPolicy(): RetryPolicy {
    const id = this.#identify;
    return { maxRetries: this.opts.maxRetries, crdt: id === undefined ? [] : [id.crdt1, id.crdt2, id.crdt3] };
  }

  /** Submit a raw admin command (SQE built by the caller; CID and SGL are filled in). */
  async adminCommand(sqe: Buffer, data?: { h2c?: Buffer; c2h?: Buffer }): Promise<Completion> {
    if (this.#state !== 'live') throw new ControllerStateError(this.#state, 'admin command needs a live controller');
    return this.#adminCmd({ sqe, ...(data?.h2c !== undefined ? { h2c: data.h2c } : {}), ...(data?.c2h !== undefined ? { c2h: data.c2h } : {}) });
  }

  // ---------------------------------------------------------------------------------------------
  // Error recovery (Linux nvme_tcp_error_recovery_work + nvme_tcp_reconnect_or_remove)

  #queueError(qp: IoQueue, err: Error): void {
    if (this.#state === 'live') {
      this.log.warn({ qid: qp.qid, err: err.message }, 'queue error, starting error recovery');
      this.#errorRecovery(err);
    }
  }

  #errorRecovery(err: Error): void {
    if (this.#state !== 'live') return;
    if (!this.#setState('resetting')) return;
    this.#teardownQueues(new ConnectionClosedError('controller reset: queues torn down', { cause: err }));
    void this.#reconnectLoop(err);
  }

  /** Reconnect every reconnect_delay until it works, a Connect error is permanent, or ctrl_loss_tmo runs out. */
  async #reconnectLoop(firstErr: Error): Promise<void> {
    const ac = new AbortController();
    this.#recovery = ac;
    const started = Date.now();
    const fastFail = this.#armFastFail();
    this.#setState('connecting');
    try {
      let lastErr = firstErr;
      for (let attempt = 1; ; attempt++) {
        this.emit('reconnecting', attempt, lastErr);
        await delay(this.opts.reconnectDelay * 1000, ac.signal);
        if (ac.signal.aborted) return;
        const err = await this.#reconnectOnce(attempt, ac.signal);
        if (err === undefined || ac.signal.aborted) return;
        lastErr = err;
        if (this.#permanentLoss(err, started)) {
          this.#lose(attempt, err);
          return;
        }
      }
    } finally {
      fastFail?.clear();
      this.#recovery = undefined;
    }
  }

  /** One reconnect attempt: undefined when the controller is live again (or was deleted meanwhile), else the error. */
  async #reconnectOnce(attempt: number, signal: AbortSignal): Promise<Error | undefined> {
    try {
      await this.#connectOnce();
    } catch (e) {
      const err = toError(e);
      this.#teardownQueues(new ConnectionClosedError('reconnect attempt failed', { cause: err }));
      this.log.warn({ attempt, err: err.message }, 'reconnect failed');
      return err;
    }
    if (signal.aborted) {
      this.#teardownQueues(new ConnectionClosedError('controller deleted'));
      return undefined;
    }
    this.#ioFailFast = false;
    this.#setState('live');
    this.emit('reconnected', this.#cntlid);
    return undefined;
  }

  /**
   * A Connect error with DNR is permanent (Linux nvmf_should_reconnect), as are authentication failures; otherwise
   * the controller is lost once the next attempt would start past ctrl_loss_tmo (< 0: never).
   */
  #permanentLoss(err: Error, started: number): boolean {
    if ((err instanceof NvmeStatusError && err.dnr) || isAuthFailure(err)) return true;
    const o = this.opts;
    return o.ctrlLossTmo >= 0 && Date.now() - started + o.reconnectDelay * 1000 > o.ctrlLossTmo * 1000;
  }

  #lose(attempts: number, err: Error): void {
    this.#lossError = new ConnectionClosedError(`controller lost after ${attempts} reconnect attempts: ${err.message}`, { cause: err });
    this.#setState('dead');
    this.emit('lost', this.#lossError);
    this.#release();
    void this.#releaseWorkers?.();
  }

  /** fast_io_fail_tmo: after it, I/O waiting for the reconnect fails instead of waiting on (< 0: never). */
  #armFastFail(): LongTimeout | undefined {
    const tmo = this.opts.fastIoFailTmo;
    if (tmo < 0) return undefined;
    // Up to 10^9 s: a LongTimeout, since setTimeout turns anything past 2^31−1 ms into 1 ms.
    return setLongTimeout(
      () => {
        this.#ioFailFast = true;
        this.log.warn('fast_io_fail_tmo expired: failing queued I/O');
        this.#wakeWaiters();
      },
      tmo * 1000,
      'fast_io_fail_tmo',
    ).unref();
  }

  /** Close every queue (I/O first, admin last); in-flight commands fail with `err`. */
  #teardownQueues(err: Error): void {
    this.#keepAlive.stop();
    this.#io.teardown(err);
    this.#admin?.close(err);
  }

  /** Force error recovery (nvme reset): tear down all queues and reconnect with a new controller. */
  reset(): void {
    this.#errorRecovery(new ConnectionClosedError('reset requested'));
  }

  // ---------------------------------------------------------------------------------------------
  // Shutdown and disconnect

  /** Orderly shutdown (CC.SHN = normal, poll CSTS.SHST = complete, ≤ 5 s) then close all queues. */
  async disconnect(): Promise<void> {
    const st = this.#state;
    if (st === 'deleted' || st === 'deleting') return;
    this.#recovery?.abort();
    this.#setState('deleting');
    this.#keepAlive.stop();
    if (st === 'live' && this.#admin?.state === 'live') {
      try {
        await shutdownController(this);
      } catch (e) {
        this.log.warn({ err: e }, 'shutdown did not complete cleanly');
      }
    }
    this.#teardownQueues(new ConnectionClosedError('controller disconnected'));
    this.#scanner.clear();
    this.#setState('deleted');
    this.#release();
    this.#wakeWaiters();
    await this.#releaseWorkers?.();
  }

  // ---------------------------------------------------------------------------------------------
  // Discovery and information

  /** Abort command `cid` of submission queue `sqid` (0 = admin); true when the controller aborted it. */
  async abort(sqid: number, cid: number): Promise<boolean> {
    return abortCommand(this.#host, sqid, cid);
  }

  /** Format NVM namespace `nsid` to LBA format `lbaf` (`ses` 1: erase user data), then rescan to pick up its new size. */
  async format(nsid: number, lbaf: number, o: { ses?: 0 | 1 } = {}): Promise<void> {
    await formatNvm(this.#host, nsid, lbaf, o.ses ?? 0);
    await this.rescan();
  }

  /** LIDs of the Supported Log Pages log (LID 00h). */
  async supportedLogPages(): Promise<number[]> {
    return readSupportedLogPages(this.#host);
  }

  /** The Feature Identifiers Supported and Effects log (LID 12h), one entry per FID (FeatureEffects bits). */
  async featureEffects(): Promise<number[]> {
    return readFeatureEffects(this.#host);
  }

  /** Host Behavior Support (FID 16h): the 512-byte structure the controller holds. */
  async hostBehavior(): Promise<Buffer> {
    return getHostBehavior(this.#host);
  }

  async setHostBehavior(data: Buffer): Promise<void> {
    return setHostBehavior(this.#host, data);
  }

  /** Namespace Write Protection Config (FID 84h) of namespace `nsid` (NwpState). */
  async writeProtect(nsid: number): Promise<number> {
    return getWriteProtect(this.#host, nsid);
  }

  async setWriteProtect(nsid: number, state: NwpState): Promise<void> {
    return setWriteProtect(this.#host, nsid, state);
  }

  /** The discovery log (NVMe-oF 1.1 §5.3) as one consistent GENCTR snapshot. */
  async discoveryLog(maxRetries = 10): Promise<{ genctr: bigint; entries: DiscoveryEntry[] }> {
    return readDiscoveryLog(this.#host, maxRetries);
  }

  queueInfo(): QueueInfo[] {
    return this.#io.queueInfo(this.opts.traddr, this.opts.trsvcid);
  }

  /** Admin queue endpoint, for reports. */
  adminInfo(): { source: string; destination: string } | undefined {
    const a = this.#admin;
    if (a === undefined) return undefined;
    return { source: `${a.tcp.localAddress ?? '?'}:${a.tcp.localPort ?? 0}`, destination: `${a.tcp.remoteAddress ?? '?'}:${a.tcp.remotePort ?? 0}` };
  }
}
