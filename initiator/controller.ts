// The host controller: Fabrics connect of the admin queue, properties, Identify, I/O queues with bounded parallelism,
// keep-alive, AERs, error recovery / reconnect / ctrl_loss_tmo, orderly shutdown. Modelled on Linux
// drivers/nvme/host/{tcp.c nvme_tcp_setup_ctrl, fabrics.c nvmf_connect_*, core.c nvme_init_ctrl_finish}.
import { EventEmitter } from 'node:events';
import { Buffer } from 'node:buffer';
import pLimit from 'p-limit';
import { pino, type Logger } from 'pino';
import {
  AdminOpcode,
  AenConfig,
  AenNotice,
  AenType,
  AnaState,
  Cns,
  CntrlType,
  FeatureId,
  LogPageId,
  NidType,
  anaLogMaxSize,
  decodeActiveNsList,
  decodeAenResult,
  decodeAnaLog,
  decodeIdentifyController,
  decodeIdentifyNamespace,
  decodeNsDescList,
  decodeNumQueues,
  encodeGetLogPageCmd,
  encodeIdentifyCmd,
  encodeNumQueues,
  encodeSetFeaturesCmd,
  encodeSqe,
  flbasIndex,
} from '../protocol/index.js';
import type { IdentifyController } from '../protocol/index.js';
import {
  ConnectionClosedError,
  ControllerInitError,
  ControllerStateError,
  NvmeStatusError,
  TimeoutError,
  TransportFatalError,
} from './errors.js';
import { authRequested, authenticateQueue, describeAuth, isAuthFailure } from './auth.js';
import { Hctx, type HctxType, mapQueues } from './dispatch/hctx.js';
import * as fab from './fabrics-cmds.js';
import type { DiscoveryEntry } from './fabrics-cmds.js';
export type { DiscoveryEntry } from './fabrics-cmds.js';
import { Namespace, type AnaStateName, type IoExecutor, type IoOptions, type NamespaceInfo } from './namespace.js';
import { connectionRegistry, hostRegistry, type ResolvedOptions } from './options.js';
import { type Completion, QueuePair, type SubmitSpec, TagSet } from './queue-pair.js';
import { retryDelayMs, type RetryPolicy } from './retry.js';
import { TcpQueue } from './transport/index.js';

/**
 * Controller states (Linux nvme_ctrl_state): new → connecting → live; live → resetting (error recovery) →
 * connecting (reconnect attempts) → live; any → deleting → deleted; connecting → dead when ctrl_loss_tmo expires.
 */
export type ControllerState = 'new' | 'connecting' | 'live' | 'resetting' | 'deleting' | 'deleted' | 'dead';

const TRANSITIONS: Record<ControllerState, readonly ControllerState[]> = {
  new: ['connecting', 'deleting'],
  connecting: ['live', 'resetting', 'deleting', 'dead'],
  live: ['resetting', 'deleting'],
  resetting: ['connecting', 'deleting', 'dead'],
  deleting: ['deleted'],
  dead: ['deleting', 'deleted'],
  deleted: [],
};

/** Per I/O queue information (io_queue_info). */
export interface QueueInfo {
  qid: number;
  /** Hctx index within its type. */
  hctx: number;
  type: HctxType;
  /** Which event loop owns the queue (the io_cpu analogue); always the main loop in this implementation. */
  owner: 'main';
  source: string;
  destination: string;
  state: string;
  inFlight: number;
  submitted: number;
  completed: number;
  bytes: number;
  errors: number;
}

/** An asynchronous event as delivered to listeners of 'aen'. */
export interface AsyncEvent {
  type: number;
  info: number;
  lid: number;
  dw0: number;
}


const ADMIN_DEPTH = 32;
/** Linux NVME_AQ_BLK_MQ_DEPTH: the AER uses CID 31 outside the admin tag set. */
const AER_CID = 31;
/** Linux NVME_TCP_ADMIN_CCSZ: 8 KiB in-capsule space assumed on the admin queue. */
const ADMIN_INLINE = 8192;
/** MDTS 0 = unlimited; we still split at 1 MiB (Linux caps max_hw_sectors similarly for fabrics). */
const DEFAULT_MAX_TRANSFER = 1 << 20;
/** Linux shutdown_timeout default (s). */
const SHUTDOWN_TIMEOUT_MS = 5000;

function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    });
  });
}

export interface ControllerEvents {
  state: [from: ControllerState, to: ControllerState];
  reconnecting: [attempt: number, err: Error];
  reconnected: [cntlid: number];
  lost: [err: Error];
  aen: [ev: AsyncEvent];
  namespacesChanged: [nsids: number[]];
  anaChange: [states: Map<number, AnaStateName>];
}

export class Controller extends EventEmitter<ControllerEvents> implements IoExecutor {
  readonly opts: ResolvedOptions;
  readonly log: Logger;
  #state: ControllerState = 'new';
  #admin: QueuePair | undefined;
  #ioQueues: QueuePair[] = [];
  #hctxs: Record<HctxType, Hctx[]> = { default: [], write: [], poll: [] };
  #identify: IdentifyController | undefined;
  #cap = 0n;
  #vs = 0;
  #cntlid = 0;
  #namespaces = new Map<number, Namespace>();
  #anaStates = new Map<number, AnaStateName>();
  #kaTimer: NodeJS.Timeout | undefined;
  #activity = false;
  #stateWaiters: Array<() => void> = [];
  #releaseRegistry: Array<() => void> = [];
  #ioFailFast = false;
  #lossError: Error | undefined;
  #recovery: AbortController | undefined;
  #grantedQueues = 0;
  #queueLimit: number | undefined;
  /** DH-HMAC-CHAP T_ID counter shared by all queues (Linux ctrl->transaction). */
  #authTid = 0;
  /** Queues that completed DH-HMAC-CHAP in this controller's lifetime (reconnects included). */
  authenticatedQueues = 0;
  /** What the admin queue's last DH-HMAC-CHAP transaction agreed on (undefined: not authenticated). */
  authInfo: { hash: string; dhgroup: string; bidirectional: boolean } | undefined;
  maxTransferBytes = DEFAULT_MAX_TRANSFER;
  /** I/O commands sent again after an NVMe error status (DNR clear), since connect. */
  ioRetries = 0;

  constructor(opts: ResolvedOptions) {
    super();
    this.opts = opts;
    this.log = (opts.logger ?? pino({ level: 'silent' })).child({ subnqn: opts.nqn, traddr: `${opts.traddr}:${opts.trsvcid}` });
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
    return this.#ioQueues.length;
  }

  /** I/O queues granted by Set Features Number of Queues (before whole-group fallback). */
  get grantedQueues(): number {
    return this.#grantedQueues;
  }

  get namespaces(): Namespace[] {
    return [...this.#namespaces.values()].sort((a, b) => a.nsid - b.nsid);
  }

  namespace(nsid: number): Namespace {
    const ns = this.#namespaces.get(nsid);
    if (ns === undefined) throw new ControllerStateError(this.#state, `no active namespace ${nsid}`);
    return ns;
  }

  /** Submission contexts of a type (default: one per I/O queue or queue group). */
  hctxs(type: HctxType = 'default'): readonly Hctx[] {
    return this.#hctxs[type];
  }

  hctx(i: number, type: HctxType = 'default'): Hctx {
    const list = this.#hctxs[type];
    const h = list[i % Math.max(1, list.length)];
    if (h === undefined) throw new ControllerStateError(this.#state, `no ${type} hctx`);
    return h;
  }

  /** Limit the I/O queues requested (match_hw_queues computes it before connecting). */
  setQueueLimit(n: number | undefined): void {
    this.#queueLimit = n;
  }

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
    const w = this.#stateWaiters;
    this.#stateWaiters = [];
    for (const f of w) f();
    return true;
  }

  #waitStateChange(): Promise<void> {
    return new Promise((resolve) => this.#stateWaiters.push(resolve));
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
      this.#teardownQueues(e instanceof Error ? e : new Error(String(e)));
      this.#setState('deleting');
      this.#setState('deleted');
      this.#release();
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
    const tcp = new TcpQueue({
      host: o.traddr,
      port: o.trsvcid,
      hdgst: o.hdrDigest,
      ddgst: o.dataDigest,
      label: `${o.nqn} q${qid}`,
      ...(o.localAddress !== undefined ? { localAddress: o.localAddress } : {}),
    });
    const qp = new QueuePair({
      qid,
      tcp,
      tags,
      inlineLimit,
      onError: (q, err) => this.#queueError(q, err),
      onActivity: () => {
        this.#activity = true;
      },
    });
    await tcp.connect();
    return qp;
  }

  /** Fabrics Connect (NVMe-oF 1.1 §3.3): in-capsule 1024 B data on every queue, like Linux. */
  async #fabricsConnect(qp: QueuePair, sqsize: number, kato: number, cntlid: number): Promise<number> {
    const o = this.opts;
    const c = await qp.submit({
      sqe: fab.connectCmd({ qid: qp.qid, sqsize, kato, disableSqflow: o.disableSqflow }),
      h2c: fab.connectData({ hostid: o.hostid, cntlid, subnqn: o.nqn, hostnqn: o.hostnqn }),
      forceInCapsule: true,
      timeoutMs: o.adminTimeoutMs,
    });
    // Linux nvmf_connect_{admin,io}_queue: ATR → authenticate this queue before anything else; ASCR → unsupported.
    if (authRequested(qp.qid, c.dw0, o.hostKey !== undefined)) {
      const r = await authenticateQueue(qp, {
        hostnqn: o.hostnqn,
        subsysnqn: o.nqn,
        hostKey: o.hostKey,
        ctrlKey: o.ctrlKey,
        transactionId: this.#authTid++ & 0xffff,
        timeoutMs: o.adminTimeoutMs,
      });
      this.authenticatedQueues++;
      if (qp.qid === 0) this.authInfo = describeAuth(r);
      this.log.info({ qid: qp.qid, ...describeAuth(r) }, r.bidirectional ? 'authenticated; controller authenticated' : 'authenticated');
    }
    qp.setLive();
    return c.dw0 & 0xffff;
  }

  async #adminCmd(spec: Omit<SubmitSpec, 'timeoutMs'>): Promise<Completion> {
    const a = this.#admin;
    if (a === undefined) throw new ControllerStateError(this.#state, 'no admin queue');
    return a.submit({ ...spec, timeoutMs: this.opts.adminTimeoutMs });
  }

  async propertyGet(offset: number, size: 4 | 8): Promise<bigint> {
    const c = await this.#adminCmd({ sqe: fab.propertyGetCmd(offset, size) });
    return size === 8 ? (BigInt(c.dw1 >>> 0) << 32n) | BigInt(c.dw0 >>> 0) : BigInt(c.dw0 >>> 0);
  }

  async propertySet(offset: number, size: 4 | 8, value: bigint): Promise<void> {
    await this.#adminCmd({ sqe: fab.propertySetCmd(offset, size, value) });
  }

  async #connectOnce(): Promise<void> {
    const o = this.opts;
    const adminTags = new TagSet(ADMIN_DEPTH - 1);
    this.#admin = await this.#openQueue(0, adminTags, ADMIN_INLINE);
    // Admin Connect: sqsize 31 (NVME_AQ_DEPTH − 1), KATO in ms, cntlid 0xFFFF (dynamic model).
    const cntlid = await this.#fabricsConnect(this.#admin, ADMIN_DEPTH - 1, o.keepAliveTmo * 1000, 0xffff);
    this.#cntlid = cntlid;

    // Enable (Linux nvme_enable_ctrl on fabrics): CAP, CC without EN, CC with EN, poll CSTS.RDY within CAP.TO.
    this.#cap = await this.propertyGet(fab.PROP.CAP, 8);
    const cc = fab.ccValue({ en: false });
    await this.propertySet(fab.PROP.CC, 4, BigInt(cc));
    await this.propertySet(fab.PROP.CC, 4, BigInt(fab.ccValue({ en: true })));
    const toMs = (Number((this.#cap >> 24n) & 0xffn) + 1) * 500;
    const deadline = Date.now() + toMs;
    for (let wait = 1; ; wait = Math.min(wait * 2, 100)) {
      const csts = Number(await this.propertyGet(fab.PROP.CSTS, 4));
      if ((csts & 0x2) !== 0) throw new ControllerInitError('CSTS.CFS', 'controller fatal status while enabling');
      if ((csts & 0x1) !== 0) break;
      if (Date.now() > deadline) throw new TimeoutError(`CSTS.RDY not set within CAP.TO (${toMs} ms)`);
      await delay(wait);
    }
    this.#vs = Number(await this.propertyGet(fab.PROP.VS, 4));

    const idBuf = Buffer.alloc(4096);
    await this.#adminCmd({ sqe: encodeIdentifyCmd({ cid: 0, cns: Cns.CTRL }), c2h: idBuf });
    const id = decodeIdentifyController(idBuf);
    this.#checkIdentify(id, cntlid);
    this.#identify = id;
    this.maxTransferBytes = id.mdts === 0 ? DEFAULT_MAX_TRANSFER : Math.min(2 ** id.mdts * 4096, 64 << 20);

    if (!o.discovery) {
      await this.#setupIoQueues(id, cntlid);
      await this.#configureAen(id);
      await this.#scanNamespaces();
    }
    this.#startKeepAlive(id);
  }

  /** Linux nvme_check_ctrl_fabric_info + nvme_init_identify gates. */
  #checkIdentify(id: IdentifyController, cntlid: number): void {
    const disc = this.opts.discovery;
    if (id.cntlid !== cntlid) throw new ControllerInitError('cntlid', `Identify reports ${id.cntlid}, Connect returned ${cntlid} (mismatched cntlid)`);
    if (!disc && id.kas === 0) throw new ControllerInitError('kas', 'keep-alive support (KAS) is 0 on an I/O controller');
    if (!disc && id.ioccsz < 4) throw new ControllerInitError('ioccsz', `IOCCSZ ${id.ioccsz} < 4`);
    if (!disc && id.iorcsz < 1) throw new ControllerInitError('iorcsz', `IORCSZ ${id.iorcsz} < 1`);
    if (id.icdoff !== 0) throw new ControllerInitError('icdoff', `ICDOFF ${id.icdoff} is not 0`);
    if ((id.sgls & 0x3) === 0) throw new ControllerInitError('sgls', 'mandatory SGLs are not supported');
    if (id.maxcmd === 0 && !disc) throw new ControllerInitError('maxcmd', 'MAXCMD is 0');
    if (!disc && id.cntrltype === CntrlType.DISCOVERY) throw new ControllerInitError('cntrltype', 'discovery controller behind an I/O subsystem NQN');
  }

  async #setupIoQueues(id: IdentifyController, cntlid: number): Promise<void> {
    const o = this.opts;
    let nrIo = o.nrIoQueues;
    if (this.#queueLimit !== undefined && !o.nrIoQueuesExplicit) nrIo = Math.min(nrIo, this.#queueLimit);
    const requested = nrIo * o.queuesPerHctx + o.nrWriteQueues + o.nrPollQueues;
    const c = await this.#adminCmd({ sqe: encodeSetFeaturesCmd({ cid: 0, fid: FeatureId.NUM_QUEUES, cdw11: encodeNumQueues(requested, requested) }) });
    const got = decodeNumQueues(c.dw0);
    const granted = Math.min(requested, got.nsqr, got.ncqr);
    this.#grantedQueues = granted;
    if (granted < requested) this.log.info({ requested, granted }, 'controller granted fewer I/O queues');
    const map = mapQueues(granted, nrIo, o.queuesPerHctx, o.nrWriteQueues, o.nrPollQueues);
    // Queue size: clamp to MAXCMD and CAP.MQES + 1 (Linux nvme_init_ctrl_finish / nvmf sqsize clamp).
    const mqes = Number(this.#cap & 0xffffn) + 1;
    const qsize = Math.max(2, Math.min(o.queueSize, id.maxcmd > 0 ? id.maxcmd : o.queueSize, mqes));
    const inline = (id.sgls & (1 << 20)) !== 0 ? Math.max(0, id.ioccsz * 16 - 64) : 0;

    interface Slot { qid: number; type: HctxType; hctx: number; tags: TagSet }
    const slots: Slot[] = [];
    const groups: Array<{ type: HctxType; qids: number[]; tags: TagSet }> = [];
    for (const type of ['default', 'write', 'poll'] as const) {
      map[type].forEach((qids, h) => {
        // One tag space per hctx shared by its queues: queue_size tags, so CIDs are unique across the group.
        const tags = new TagSet(Math.min(4096, qsize));
        groups.push({ type, qids, tags });
        for (const qid of qids) slots.push({ qid, type, hctx: h, tags });
      });
    }
    const limit = pLimit(o.connectConcurrency);
    const queues = new Map<number, QueuePair>();
    const results = await Promise.allSettled(
      slots.map((s) =>
        limit(async () => {
          const qp = await this.#openQueue(s.qid, s.tags, inline);
          queues.set(s.qid, qp);
          await this.#fabricsConnect(qp, qsize - 1, 0, cntlid);
        }),
      ),
    );
    this.#ioQueues = [...queues.values()].sort((a, b) => a.qid - b.qid);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    const hctxs: Record<HctxType, Hctx[]> = { default: [], write: [], poll: [] };
    for (const g of groups) {
      hctxs[g.type].push(new Hctx(hctxs[g.type].length, g.type, g.qids.map((q) => queues.get(q) as QueuePair), g.tags));
    }
    this.#hctxs = hctxs;
    this.log.info({ queues: this.#ioQueues.length, hctxs: hctxs.default.length, perHctx: map.queuesPerHctx, qsize, inline }, 'I/O queues live');
  }

  // ---------------------------------------------------------------------------------------------
  // AEN, namespaces, ANA

  async #configureAen(id: IdentifyController): Promise<void> {
    const mask = (id.oaes & (AenConfig.NS_ATTR | AenConfig.FW_ACT | AenConfig.ANA | AenConfig.DISC)) >>> 0;
    if (mask !== 0) await this.#adminCmd({ sqe: encodeSetFeaturesCmd({ cid: 0, fid: FeatureId.ASYNC_EVENT, cdw11: mask }) });
    this.#postAer();
  }

  #postAer(): void {
    const a = this.#admin;
    if (a === undefined || a.state !== 'live') return;
    // The AER has no timeout of its own (Linux: it stays outstanding); a day stands in for "never".
    a.submit({ sqe: encodeSqe({ opcode: AdminOpcode.ASYNC_EVENT, cid: 0 }), timeoutMs: 86_400_000, reservedCid: AER_CID }).then(
      (c) => {
        this.#postAer();
        void this.#handleAen(c.dw0);
      },
      (e: unknown) => {
        if (e instanceof NvmeStatusError) this.log.warn({ err: e }, 'AER failed');
      },
    );
  }

  async #handleAen(dw0: number): Promise<void> {
    const r = decodeAenResult(dw0);
    this.emit('aen', { ...r, dw0 });
    try {
      if (r.type === AenType.NOTICE && r.info === AenNotice.NS_CHANGED) {
        const log = Buffer.alloc(4096);
        await this.#adminCmd({ sqe: encodeGetLogPageCmd({ cid: 0, lid: LogPageId.CHANGED_NS, length: 4096, nsid: 0xffffffff }), c2h: log });
        const changed = await this.#scanNamespaces();
        this.emit('namespacesChanged', changed);
      } else if (r.type === AenType.NOTICE && r.info === AenNotice.ANA) {
        await this.#readAnaLog();
        this.emit('anaChange', new Map(this.#anaStates));
      }
    } catch (e) {
      this.log.warn({ err: e }, 'AEN handling failed');
    }
  }

  /** Rescan: active NS list (CNS 2, pages of 1024), Identify NS + descriptor list per NSID. Returns NSIDs that changed. */
  async rescan(): Promise<number[]> {
    return this.#scanNamespaces();
  }

  async #scanNamespaces(): Promise<number[]> {
    const nsids: number[] = [];
    for (let start = 0; ; ) {
      const buf = Buffer.alloc(4096);
      await this.#adminCmd({ sqe: encodeIdentifyCmd({ cid: 0, cns: Cns.NS_ACTIVE_LIST, nsid: start }), c2h: buf });
      const page = decodeActiveNsList(buf);
      nsids.push(...page);
      if (page.length < 1024) break;
      start = page[page.length - 1] as number;
    }
    const changed: number[] = [];
    const seen = new Set<number>();
    for (const nsid of nsids) {
      const info = await this.#identifyNs(nsid);
      if (info === undefined) continue;
      seen.add(nsid);
      const old = this.#namespaces.get(nsid);
      if (old === undefined) {
        this.#namespaces.set(nsid, new Namespace(this, info));
        changed.push(nsid);
      } else if (old.info.blocks !== info.blocks || old.info.blockSize !== info.blockSize) {
        old.info = info;
        changed.push(nsid);
      }
    }
    for (const nsid of [...this.#namespaces.keys()]) {
      if (!seen.has(nsid)) {
        this.#namespaces.delete(nsid);
        changed.push(nsid);
      }
    }
    if ((this.#identify?.cmic ?? 0) & 0x8) await this.#readAnaLog();
    return changed.sort((a, b) => a - b);
  }

  async #identifyNs(nsid: number): Promise<NamespaceInfo | undefined> {
    const buf = Buffer.alloc(4096);
    await this.#adminCmd({ sqe: encodeIdentifyCmd({ cid: 0, cns: Cns.NS, nsid }), c2h: buf });
    const ns = decodeIdentifyNamespace(buf);
    if (ns.ncap === 0n) return undefined;
    const lbaf = ns.lbaf[flbasIndex(ns.flbas)];
    let nguid = ns.nguid.every((b) => b === 0) ? '' : ns.nguid.toString('hex');
    let uuid = '';
    const eui64 = ns.eui64.every((b) => b === 0) ? '' : ns.eui64.toString('hex');
    try {
      const d = Buffer.alloc(4096);
      await this.#adminCmd({ sqe: encodeIdentifyCmd({ cid: 0, cns: Cns.NS_DESC_LIST, nsid }), c2h: d });
      for (const desc of decodeNsDescList(d)) {
        if (desc.nidt === NidType.UUID) uuid = formatUuid(desc.nid);
        if (desc.nidt === NidType.NGUID && nguid === '') nguid = desc.nid.toString('hex');
      }
    } catch (e) {
      if (!(e instanceof NvmeStatusError)) throw e;
    }
    return {
      nsid,
      blocks: ns.nsze,
      blockSize: 2 ** (lbaf?.lbads ?? 9),
      nguid,
      uuid,
      eui64,
      anagrpid: ns.anagrpid,
      shared: (ns.nmic & 1) !== 0,
      readOnly: (ns.nsattr & 1) !== 0,
    };
  }

  async #readAnaLog(): Promise<void> {
    const id = this.#identify;
    if (id === undefined || (id.cmic & 0x8) === 0) return;
    const size = Math.min(anaLogMaxSize(id.nanagrpid, id.mnan), this.maxTransferBytes);
    const buf = Buffer.alloc(size);
    await this.#adminCmd({ sqe: encodeGetLogPageCmd({ cid: 0, lid: LogPageId.ANA, length: size }), c2h: buf });
    const log = decodeAnaLog(buf);
    const byGroup = new Map<number, AnaStateName>();
    for (const g of log.groups) byGroup.set(g.grpid, anaName(g.state));
    this.#anaStates = byGroup;
    for (const ns of this.#namespaces.values()) ns.anaState = byGroup.get(ns.info.anagrpid) ?? 'optimized';
  }

  /** ANA state by group id as last read (empty when the controller does not report ANA). */
  get anaStates(): ReadonlyMap<number, AnaStateName> {
    return this.#anaStates;
  }

  /** Re-read the ANA log (also done on ANA AENs and by multipath on path errors). */
  async refreshAna(): Promise<void> {
    await this.#readAnaLog();
  }

  // ---------------------------------------------------------------------------------------------
  // Keep-alive (NVMe Base 2.0 §3.9; Linux nvme_keep_alive_work)

  #startKeepAlive(id: IdentifyController): void {
    const kato = this.opts.keepAliveTmo;
    if (kato === 0) return;
    const tbkas = (id.ctratt & (1 << 6)) !== 0;
    const period = (kato * 1000) / (tbkas ? 4 : 2);
    const tick = (): void => {
      this.#kaTimer = undefined;
      if (this.#state !== 'live') return;
      // With TBKAS any completion in the period counts as keep-alive traffic: skip the command (Linux does).
      if (tbkas && this.#activity) {
        this.#activity = false;
        this.#kaTimer = setTimeout(tick, period);
        this.#kaTimer.unref();
        return;
      }
      const a = this.#admin;
      if (a === undefined) return;
      a.submit({ sqe: encodeSqe({ opcode: AdminOpcode.KEEP_ALIVE, cid: 0 }), timeoutMs: kato * 1000 }).then(
        () => {
          if (this.#state !== 'live') return;
          this.#kaTimer = setTimeout(tick, period);
          this.#kaTimer.unref();
        },
        (e: unknown) => {
          this.log.warn({ err: e }, 'keep-alive failed');
          this.#errorRecovery(e instanceof Error ? e : new Error(String(e)));
        },
      );
    };
    this.#activity = false;
    this.#kaTimer = setTimeout(tick, period);
    this.#kaTimer.unref();
  }

  #stopKeepAlive(): void {
    if (this.#kaTimer !== undefined) clearTimeout(this.#kaTimer);
    this.#kaTimer = undefined;
  }

  // ---------------------------------------------------------------------------------------------
  // I/O execution with requeue across reconnects

  #pickHctx(opts: IoOptions & { write: boolean }): Hctx {
    const i = opts.hctx ?? 0;
    if (opts.poll === true && this.#hctxs.poll.length > 0) return this.hctx(i, 'poll');
    if (opts.write && this.#hctxs.write.length > 0) return this.hctx(i, 'write');
    return this.hctx(i, 'default');
  }

  /**
   * Execute an I/O. Commands caught in a queue teardown (transport errors, not their own timeout) are requeued and
   * resubmitted after reconnect unless failfast is set (multipath), fast_io_fail_tmo has fired, or the controller is
   * lost/deleted (Linux nvme_failover_req / nvme_retry_req + nvmf_fail_nonready_command).
   */
  async execIo(build: () => SubmitSpec, opts: IoOptions & { write: boolean }): Promise<Completion> {
    let retries = 0;
    for (;;) {
      const st = this.#state;
      if (st === 'live') {
        try {
          return await this.#pickHctx(opts).submit(build());
        } catch (e) {
          if (e instanceof NvmeStatusError) {
            // Linux nvme_decide_disposition: DNR clear → requeue (after the CRD delay) until max_retries; a data digest
            // error arrives here as DATA_XFER_ERROR without DNR, so it is retried the same way.
            const delay = retryDelayMs(e.status, retries, this.#retryPolicy(), opts.failfast === true);
            if (delay === undefined) throw e;
            retries++;
            this.ioRetries++;
            this.log.debug({ status: e.status, retries, delayMs: delay }, 'retrying I/O command');
            if (delay > 0) await new Promise((r) => setTimeout(r, delay));
            continue;
          }
          const requeue = (e instanceof ConnectionClosedError || e instanceof TransportFatalError) && opts.failfast !== true;
          if (!requeue) throw e;
          if (this.#state === 'live') await this.#waitStateChange();
          continue;
        }
      }
      if (st === 'deleting' || st === 'deleted' || st === 'new') throw new ControllerStateError(st, 'controller is not usable');
      if (st === 'dead') throw this.#lossError ?? new ConnectionClosedError('controller lost');
      if (opts.failfast === true) throw new ConnectionClosedError(`controller is ${st}`);
      if (this.#ioFailFast) throw new ConnectionClosedError('fast_io_fail_tmo expired while reconnecting');
      await this.#waitStateChange();
    }
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

  #queueError(qp: QueuePair, err: Error): void {
    if (this.#state === 'live') {
      this.log.warn({ qid: qp.qid, err: err.message }, 'queue error, starting error recovery');
      this.#errorRecovery(err);
    }
  }

  #errorRecovery(err: Error): void {
    if (this.#state !== 'live') return;
    if (!this.#setState('resetting')) return;
    this.#stopKeepAlive();
    this.#teardownQueues(new ConnectionClosedError('controller reset: queues torn down', { cause: err }));
    void this.#reconnectLoop(err);
  }

  async #reconnectLoop(firstErr: Error): Promise<void> {
    const o = this.opts;
    const ac = new AbortController();
    this.#recovery = ac;
    const started = Date.now();
    let fastFail: NodeJS.Timeout | undefined;
    if (o.fastIoFailTmo >= 0) {
      fastFail = setTimeout(() => {
        this.#ioFailFast = true;
        this.log.warn('fast_io_fail_tmo expired: failing queued I/O');
        const w = this.#stateWaiters;
        this.#stateWaiters = [];
        for (const f of w) f();
      }, o.fastIoFailTmo * 1000);
      fastFail.unref();
    }
    this.#setState('connecting');
    let attempt = 0;
    let lastErr = firstErr;
    try {
      for (;;) {
        attempt++;
        this.emit('reconnecting', attempt, lastErr);
        await delay(o.reconnectDelay * 1000, ac.signal);
        if (ac.signal.aborted) return;
        try {
          await this.#connectOnce();
          if (ac.signal.aborted) {
            this.#teardownQueues(new ConnectionClosedError('controller deleted'));
            return;
          }
          this.#ioFailFast = false;
          this.#setState('live');
          this.emit('reconnected', this.#cntlid);
          return;
        } catch (e) {
          lastErr = e instanceof Error ? e : new Error(String(e));
          this.#teardownQueues(new ConnectionClosedError('reconnect attempt failed', { cause: lastErr }));
          this.log.warn({ attempt, err: lastErr.message }, 'reconnect failed');
          // A Connect error with DNR is permanent (Linux nvmf_should_reconnect); ctrl_loss_tmo < 0 means forever.
          // Authentication failures are final too (Linux: auth errors are non-retryable).
          const dnr = (lastErr instanceof NvmeStatusError && lastErr.dnr) || isAuthFailure(lastErr);
          const expired = o.ctrlLossTmo >= 0 && Date.now() - started + o.reconnectDelay * 1000 > o.ctrlLossTmo * 1000;
          if (dnr || expired || ac.signal.aborted) {
            if (ac.signal.aborted) return;
            this.#lossError = new ConnectionClosedError(`controller lost after ${attempt} reconnect attempts: ${lastErr.message}`, { cause: lastErr });
            this.#setState('dead');
            this.emit('lost', this.#lossError);
            this.#release();
            return;
          }
        }
      }
    } finally {
      if (fastFail !== undefined) clearTimeout(fastFail);
      this.#recovery = undefined;
    }
  }

  /** Close every queue (I/O first, admin last); in-flight commands fail with `err`. */
  #teardownQueues(err: Error): void {
    this.#stopKeepAlive();
    for (const q of this.#ioQueues) q.close(err);
    this.#admin?.close(err);
    this.#ioQueues = [];
    this.#hctxs = { default: [], write: [], poll: [] };
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
    const wasLive = st === 'live';
    this.#recovery?.abort();
    this.#setState('deleting');
    this.#stopKeepAlive();
    if (wasLive && this.#admin?.state === 'live') {
      try {
        const cc = fab.ccValue({ en: true, shn: 1 });
        await this.propertySet(fab.PROP.CC, 4, BigInt(cc));
        const deadline = Date.now() + SHUTDOWN_TIMEOUT_MS;
        for (let wait = 1; Date.now() < deadline; wait = Math.min(wait * 2, 100)) {
          const csts = Number(await this.propertyGet(fab.PROP.CSTS, 4));
          if (((csts >> 2) & 0x3) === 2) break;
          await delay(wait);
        }
      } catch (e) {
        this.log.warn({ err: e }, 'shutdown did not complete cleanly');
      }
    }
    this.#teardownQueues(new ConnectionClosedError('controller disconnected'));
    this.#namespaces.clear();
    this.#setState('deleted');
    this.#release();
    const w = this.#stateWaiters;
    this.#stateWaiters = [];
    for (const f of w) f();
  }

  // ---------------------------------------------------------------------------------------------
  // Discovery and information

  /**
   * Read the discovery log (NVMe-oF 1.1 §5.3; nvme-cli nvme_discovery_log): header first, entries in 4 KiB windows,
   * then the header again; if GENCTR moved, start over (bounded).
   */
  async discoveryLog(maxRetries = 10): Promise<{ genctr: bigint; entries: DiscoveryEntry[] }> {
    for (let attempt = 0; attempt < maxRetries; attempt++) {
      const head = await this.#getLog(LogPageId.DISCOVERY, 0n, 1024);
      const genctr = head.readBigUInt64LE(0);
      const numrec = Number(head.readBigUInt64LE(8));
      const total = numrec * 1024;
      const body = Buffer.alloc(total);
      for (let off = 0; off < total; off += 4096) {
        const n = Math.min(4096, total - off);
        (await this.#getLog(LogPageId.DISCOVERY, BigInt(1024 + off), n)).copy(body, off);
      }
      const again = await this.#getLog(LogPageId.DISCOVERY, 0n, 16);
      if (again.readBigUInt64LE(0) !== genctr) continue;
      const entries: DiscoveryEntry[] = [];
      for (let i = 0; i < numrec; i++) entries.push(fab.decodeDiscEntry(body.subarray(i * 1024, (i + 1) * 1024)));
      return { genctr, entries };
    }
    throw new ControllerInitError('genctr', `discovery log kept changing over ${maxRetries} reads`);
  }

  async #getLog(lid: number, lpo: bigint, length: number): Promise<Buffer> {
    const buf = Buffer.alloc(length);
    await this.#adminCmd({ sqe: encodeGetLogPageCmd({ cid: 0, lid, length, lpo }), c2h: buf });
    return buf;
  }

  queueInfo(): QueueInfo[] {
    const out: QueueInfo[] = [];
    for (const type of ['default', 'write', 'poll'] as const) {
      for (const h of this.#hctxs[type]) {
        for (const q of h.queues) {
          out.push({
            qid: q.qid,
            hctx: h.index,
            type,
            owner: 'main',
            source: `${q.tcp.localAddress ?? '?'}:${q.tcp.localPort ?? 0}`,
            destination: `${q.tcp.remoteAddress ?? this.opts.traddr}:${q.tcp.remotePort ?? this.opts.trsvcid}`,
            state: q.state,
            inFlight: q.inFlight,
            ...q.counters,
          });
        }
      }
    }
    return out.sort((a, b) => a.qid - b.qid);
  }

  /** Admin queue endpoint, for reports. */
  adminInfo(): { source: string; destination: string } | undefined {
    const a = this.#admin;
    if (a === undefined) return undefined;
    return { source: `${a.tcp.localAddress ?? '?'}:${a.tcp.localPort ?? 0}`, destination: `${a.tcp.remoteAddress ?? '?'}:${a.tcp.remotePort ?? 0}` };
  }
}

function formatUuid(b: Buffer): string {
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

function anaName(state: number): AnaStateName {
  switch (state) {
    case AnaState.OPTIMIZED:
      return 'optimized';
    case AnaState.NON_OPTIMIZED:
      return 'non-optimized';
    case AnaState.INACCESSIBLE:
      return 'inaccessible';
    case AnaState.PERSISTENT_LOSS:
      return 'persistent-loss';
    default:
      return 'change';
  }
}
