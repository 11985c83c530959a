// The target fuzzer: many connections, each a fresh ICReq + Connect prefix (admin, I/O or discovery queue) followed
// by mutated PDUs from harness/fuzz/mutate.ts, plus raw-garbage connections, against a target in a child process.
// A healthy controller does write/read-compare I/O through our initiator the whole time; the child's RSS is sampled.
import { Buffer } from 'node:buffer';
import { writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { connect, type Controller } from '../../initiator/index.js';
import {
  DISCOVERY_NQN,
  FabricsType,
  PduFlag,
  PduReader,
  PduType,
  decodeCqe,
  encodeConnectCmd,
  encodeConnectData,
  encodePdu,
  encodeSqe,
  sglInCapsule,
  type PduFraming,
} from '../../protocol/index.js';
import type { TargetConfig } from '../../target/model/config.js';
import type { ControllerInfo, DebugCounts } from '../../target/service/index.js';
import type { WorkerView } from '../../target/workers/index.js';
import { startChildTarget, type ChildExit, type ChildTarget } from './child.js';
import type { ChildSample } from './protocol.js';
import { Rng, frame, garbage, loadCorpus, makeCase, mutateStructured, type Corpus, type SeedPdu } from './mutate.js';

const FUZZ_NQN = 'nqn.2024-01.io.nvme-ts:fuzz';
const HEALTHY_NQN = 'nqn.2024-01.io.nvme-ts:healthy';
const FUZZ_HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-00000000f022';
const HEALTHY_BLOCK = 4096;
const HEALTHY_BLOCKS = 4096;

export interface FuzzOptions {
  /** Stop after this many cases (each mutated PDU, garbage chunk or R2T answer is one case). */
  cases: number;
  /** Concurrent fuzz connections. */
  concurrency?: number;
  seed?: number;
  /** Healthy controller's write/read-compare loops. */
  healthyLoops?: number;
  /** RSS sample period (ms). */
  sampleMs?: number;
  /** Progress callback (about once per second). */
  onProgress?: (p: FuzzProgress) => void;
  /** Where to write the last cases when the target dies (default: os.tmpdir()). */
  crashDir?: string;
  /** The target's data plane (docs/target.md "Target workers"); default one process. */
  target?: Pick<TargetConfig, 'workers' | 'placement'>;
  /** Host NQNs of the healthy controllers, one controller each (default: one, the initiator's host NQN). */
  healthyHosts?: readonly string[];
}

/** The host NQN of every fuzz connection (placement `host` puts its I/O queues on one worker). */
export const FUZZ_HOST_NQN = FUZZ_HOSTNQN;

export interface FuzzProgress {
  cases: number;
  connections: number;
  elapsedS: number;
  rssMB: number;
  healthyOps: number;
}

export interface FuzzResult {
  seed: number;
  cases: number;
  connections: number;
  elapsedS: number;
  casesPerSec: number;
  crashes: number;
  crash?: { exit: ChildExit; stderr: string; reproFile: string };
  /** Error-level lines the target logged (a handler threw, a completion could not be sent, ...). */
  targetErrors: { count: number; first: string[] };
  /** PDUs from the target that our host-role reader refused (the target must never send malformed PDUs). */
  malformedReplies: number;
  malformedFirst: string[];
  termReqs: number;
  /** C2HTermReqs by the fuzz connection's mode ('io': sent by whoever serves the I/O queue, a worker with workers > 1). */
  termReqsByMode: Partial<Record<Mode, number>>;
  /** CQE statuses seen (SCT/SC, DNR masked), as a coverage hint. */
  statuses: Record<string, number>;
  /** C2HTermReqs by "fes/fei/type of the offending PDU". */
  termReasons: Record<string, number>;
  rssMB: { min: number; max: number; samples: number };
  /** heapUsed after a forced GC, after warm-up and at the end. */
  heapAfterGcMB: { start: number; end: number };
  healthy: { ops: number; errors: number; mismatches: number; maxLatencyMs: number; firstError?: string; reconnects: number; cntlids: number[] };
  /** Target counts once every fuzz connection is closed (only the healthy controllers should remain). */
  finalCounts: DebugCounts | undefined;
  /** The target's controllers (GET /controllers) and workers (GET /workers) at that point. */
  finalControllers: ControllerInfo[] | undefined;
  finalWorkers: WorkerView[] | undefined;
  pduErrorsByFes: Record<string, number>;
}

export type Mode = 'garbage' | 'admin' | 'io' | 'discovery' | 'icreq';

export interface ReplyStats {
  malformed: number;
  malformedFirst: string[];
  termReqs: number;
  termReqsByMode: Partial<Record<Mode, number>>;
  /** C2HTermReq by FES / FEI / type byte of the offending PDU. */
  termReasons: Record<string, number>;
  /** CQE status codes (SCT/SC, DNR masked) the target answered with: how deep the cases got. */
  statuses: Record<string, number>;
}

/** A fuzz connection: socket, host-role reader for the target's replies, and a wakeup for "something happened". */
export class FuzzConn {
  readonly socket: net.Socket;
  readonly reader: PduReader;
  closed = false;
  framing: PduFraming = { hdgst: false, ddgst: false, pda: 0 };
  maxh2c = 131072;
  icResp = false;
  readerDead = false;
  /** What the fuzz worker does on this connection (set once it picked). */
  mode: Mode | undefined;
  readonly r2ts: Array<{ cccid: number; ttag: number; r2to: number; r2tl: number }> = [];
  readonly resps = new Map<number, { status: number; dw0: number }>();
  /** Every completion as it arrives: a CapsuleResp, or a C2HData with DATA_SUCCESS (NVMe-TCP 1.0 §3.6.2.8). */
  onCompletion: ((cid: number, status: number, dw0: number) => void) | undefined;
  #wake: (() => void) | undefined;

  constructor(
    socket: net.Socket,
    readonly stats: ReplyStats,
  ) {
    this.socket = socket;
    this.reader = new PduReader({
      role: 'host',
      maxDataLength: 8 << 20,
      onPdu: (p) => {
        if (p.type === PduType.IC_RESP) {
          this.icResp = true;
          this.maxh2c = p.maxh2cdata;
          this.framing = { hdgst: (p.dgst & 1) !== 0, ddgst: (p.dgst & 2) !== 0, pda: 0 };
          this.reader.setFraming(this.framing.hdgst, this.framing.ddgst, 0);
        } else if (p.type === PduType.R2T) {
          this.r2ts.push({ cccid: p.cccid, ttag: p.ttag, r2to: p.r2to, r2tl: p.r2tl });
        } else if (p.type === PduType.CAPSULE_RESP) {
          const c = decodeCqe(p.cqe);
          this.resps.set(c.cid, { status: c.status, dw0: c.dw0 });
          this.onCompletion?.(c.cid, c.status, c.dw0);
          const k = `0x${(c.status & 0x7ff).toString(16)}`;
          this.stats.statuses[k] = (this.stats.statuses[k] ?? 0) + 1;
          if (this.resps.size > 4096) this.resps.clear();
        } else if (p.type === PduType.C2H_DATA && p.success) {
          this.onCompletion?.(p.cccid, 0, 0);
        } else if (p.type === PduType.C2H_TERM_REQ) {
          this.stats.termReqs++;
          this.termReq = true;
          if (this.mode !== undefined) this.stats.termReqsByMode[this.mode] = (this.stats.termReqsByMode[this.mode] ?? 0) + 1;
          const k = `fes${p.fes}/fei${p.fei}/t${p.errorData[0] ?? -1}`;
          this.stats.termReasons[k] = (this.stats.termReasons[k] ?? 0) + 1;
        }
        this.poke();
      },
      onFatal: (f) => {
        this.readerDead = true;
        this.stats.malformed++;
        if (this.stats.malformedFirst.length < 5) this.stats.malformedFirst.push(`${f.reason} (fes ${f.fes})`);
      },
      onDataDigestError: () => {
        this.stats.malformed++;
        if (this.stats.malformedFirst.length < 5) this.stats.malformedFirst.push('data digest error in a target PDU');
      },
    });
    socket.setNoDelay(true);
    socket.on('data', (b: Buffer) => {
      if (!this.readerDead) this.reader.push(b);
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.closed = true;
      this.poke();
    });
  }

  termReq = false;

  static open(port: number, stats: FuzzConn['stats']): Promise<FuzzConn> {
    return new Promise((resolve, reject) => {
      const s = net.connect({ host: '127.0.0.1', port });
      s.once('connect', () => {
        s.off('error', reject);
        resolve(new FuzzConn(s, stats));
      });
      s.once('error', reject);
    });
  }

  poke(): void {
    const w = this.#wake;
    this.#wake = undefined;
    w?.();
  }

  /** Wait until any reply/close arrives or `ms` pass. */
  settle(ms: number): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.#wake = undefined;
        resolve();
      }, ms);
      this.#wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }

  async write(b: Buffer | Buffer[]): Promise<void> {
    if (this.closed) return;
    const ok = Array.isArray(b) ? b.map((x) => this.socket.write(x)).every((x) => x) : this.socket.write(b);
    if (ok) return;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        this.socket.off('drain', done);
        this.socket.off('close', done);
        resolve();
      };
      this.socket.on('drain', done);
      this.socket.on('close', done);
    });
  }

  /** Wait for the CapsuleResp of `cid` (or close / timeout). */
  async response(cid: number, ms: number): Promise<{ status: number; dw0: number } | undefined> {
    const end = performance.now() + ms;
    for (;;) {
      const r = this.resps.get(cid);
      if (r !== undefined) return r;
      const left = end - performance.now();
      if (this.closed || left <= 0) return undefined;
      await this.settle(left);
    }
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** The fuzz target config: a RAM namespace for fuzzing and a separate one for the healthy controller. */
function fuzzTargetConfig(fileNs?: string, target: FuzzOptions['target'] = {}): TargetConfig & { icReqTimeoutS: number } {
  return {
    ...target,
    icReqTimeoutS: 2,
    ports: [{ id: 1, addr: '127.0.0.1', port: 0 }],
    subsystems: [
      {
        nqn: FUZZ_NQN,
        namespaces: [
          { nsid: 1, backend: { type: 'ram', size: '64M' } },
          { nsid: 2, backend: { type: 'null', size: '1G' } },
          // A file namespace completes asynchronously, so connections die with backend I/O still pending.
          ...(fileNs !== undefined ? [{ nsid: 3, backend: { type: 'file' as const, path: fileNs, size: '16M' } }] : []),
        ],
      },
      { nqn: HEALTHY_NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '16M' }, blockSize: 4096 }] },
    ],
  };
}

function stamp(lba: number, gen: number, rng: Rng): Buffer {
  const b = rng.bytes(HEALTHY_BLOCK);
  b.writeUInt32LE(lba, 0);
  b.writeUInt32LE(gen, 4);
  return b;
}

export async function runFuzz(opts: FuzzOptions): Promise<FuzzResult> {
  const seed = opts.seed ?? (Date.now() & 0x7fffffff);
  const corpus = await loadCorpus();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'nvme-fuzz-'));
  try {
    return await fuzz(opts, seed, corpus, path.join(dir, 'ns3.img'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function fuzz(opts: FuzzOptions, seed: number, corpus: Corpus, fileNs: string): Promise<FuzzResult> {
  const child = await startChildTarget(fuzzTargetConfig(fileNs, opts.target));
  const t0 = performance.now();
  const ctrls: Controller[] = [];
  try {
    for (const hostnqn of opts.healthyHosts ?? [undefined]) {
      const c = await connect({ traddr: '127.0.0.1', trsvcid: child.ports[0] as number, nqn: HEALTHY_NQN, ...(hostnqn !== undefined ? { hostnqn } : {}), nr_io_queues: 2, duplicate_connect: true, reconnect_delay: 0.2, io_timeout: 10 });
      ctrls.push(c);
    }
  } catch (err) {
    for (const c of ctrls) await c.disconnect().catch(() => undefined);
    await child.stop();
    throw err;
  }
  return new FuzzSession(opts, seed, corpus, child, ctrls, t0).run();
}

interface HealthyStats {
  ops: number;
  errors: number;
  mismatches: number;
  maxLatencyMs: number;
  firstError: string | undefined;
  reconnects: number;
}

/** One fuzz run against one child target: the fuzz workers, the healthy controller's loops and the counters. */
class FuzzSession {
  private readonly port: number;
  private readonly replyStats: ReplyStats = { malformed: 0, malformedFirst: [], termReqs: 0, termReqsByMode: {}, termReasons: {}, statuses: {} };
  private cases = 0;
  private connections = 0;
  private crashed: ChildExit | undefined;
  private stopping = false;
  /** The last cases sent, for the crash repro file. */
  private readonly recent: Array<{ conn: number; mode: Mode; hex: string }> = [];
  private readonly healthy: HealthyStats = { ops: 0, errors: 0, mismatches: 0, maxLatencyMs: 0, firstError: undefined, reconnects: 0 };
  private readonly rss = { min: Number.POSITIVE_INFINITY, max: 0, samples: 0 };
  private lastRss = 0;

  constructor(
    private readonly opts: FuzzOptions,
    private readonly seed: number,
    private readonly corpus: Corpus,
    private readonly child: ChildTarget,
    /** The healthy controllers: must keep working (and stay connected) while the fuzz connections attack the target. */
    private readonly hctrls: readonly Controller[],
    private readonly t0: number,
  ) {
    this.port = child.ports[0] as number;
    for (const c of hctrls) c.on('reconnecting', () => this.healthy.reconnects++);
    void child.exited.then((e) => {
      if (!this.stopping) this.crashed = e;
    });
  }

  private alive(): boolean {
    return this.crashed === undefined && this.cases < this.opts.cases;
  }

  private remember(conn: number, mode: Mode, b: Buffer): void {
    this.recent.push({ conn, mode, hex: b.subarray(0, 4096).toString('hex') });
    if (this.recent.length > 256) this.recent.shift();
  }

  async run(): Promise<FuzzResult> {
    const { opts, child } = this;
    const sampler = setInterval(() => this.sampleRss(), opts.sampleMs ?? 500);
    const progress = setInterval(() => {
      opts.onProgress?.({ cases: this.cases, connections: this.connections, elapsedS: (performance.now() - this.t0) / 1000, rssMB: this.lastRss / 1048576, healthyOps: this.healthy.ops });
    }, 1000);
    const heapStart = (await child.sample(true)).heapUsed;
    const workers = Array.from({ length: opts.concurrency ?? 16 }, (_, w) =>
      this.worker(w).catch((err: unknown) => {
        this.healthy.firstError ??= `fuzz worker ${w}: ${String(err)}`;
      }),
    );
    const loops = Array.from({ length: opts.healthyLoops ?? 2 }, (_, i) => this.healthyLoop(i));
    await Promise.all(workers);
    const elapsedS = (performance.now() - this.t0) / 1000;
    await Promise.all(loops);
    clearInterval(progress);
    clearInterval(sampler);

    const settled = this.crashed === undefined ? await this.settle() : undefined;
    let crash: FuzzResult['crash'];
    if (this.crashed !== undefined) {
      const reproFile = path.join(opts.crashDir ?? os.tmpdir(), `nvme-fuzz-crash-${this.seed}-${child.pid}.json`);
      writeFileSync(reproFile, JSON.stringify({ seed: this.seed, exit: this.crashed, stderr: child.stderrTail(), recent: this.recent }, null, 1));
      crash = { exit: this.crashed, stderr: child.stderrTail(), reproFile };
    }
    const cntlids = this.hctrls.map((c) => c.cntlid);
    for (const c of this.hctrls) await c.disconnect().catch(() => undefined);
    this.stopping = true;
    await child.stop();
    const { replyStats, rss, healthy } = this;
    return {
      seed: this.seed,
      cases: this.cases,
      connections: this.connections,
      elapsedS,
      casesPerSec: this.cases / elapsedS,
      crashes: this.crashed === undefined ? 0 : 1,
      ...(crash !== undefined ? { crash } : {}),
      targetErrors: child.errors,
      malformedReplies: replyStats.malformed,
      malformedFirst: replyStats.malformedFirst,
      termReqs: replyStats.termReqs,
      termReqsByMode: replyStats.termReqsByMode,
      statuses: replyStats.statuses,
      termReasons: replyStats.termReasons,
      rssMB: { min: rss.min / 1048576, max: rss.max / 1048576, samples: rss.samples },
      heapAfterGcMB: { start: heapStart / 1048576, end: (settled?.heapUsed ?? 0) / 1048576 },
      healthy: { ops: healthy.ops, errors: healthy.errors, mismatches: healthy.mismatches, maxLatencyMs: healthy.maxLatencyMs, ...(healthy.firstError !== undefined ? { firstError: healthy.firstError } : {}), reconnects: healthy.reconnects, cntlids },
      finalCounts: settled?.debug,
      finalControllers: settled?.controllers,
      finalWorkers: settled?.workers,
      pduErrorsByFes: settled?.stats.pduErrorsByFes ?? {},
    };
  }

  private sampleRss(): void {
    this.child.sample().then(
      (s) => {
        this.lastRss = s.rss;
        this.rss.min = Math.min(this.rss.min, s.rss);
        this.rss.max = Math.max(this.rss.max, s.rss);
        this.rss.samples++;
      },
      () => undefined,
    );
  }

  /** Every fuzz connection is closed by now; the target must get back to exactly the healthy controllers. */
  private async settle(): Promise<ChildSample> {
    const expectQueues = this.hctrls.reduce((n, c) => n + 1 + c.queueInfo().length, 0);
    // With workers the I/O queues' connections live in the workers; this process keeps the admin queues.
    const expectConnections = (this.opts.target?.workers ?? 1) === 1 ? expectQueues : this.hctrls.length;
    const until = performance.now() + 8000;
    for (;;) {
      const s = await this.child.sample(true);
      const d = s.debug;
      // Workers learn of a fuzzed queue's close on their own: settled once they hold only the healthy I/O queues.
      const workerQueues = s.workers?.reduce((n, w) => n + w.queues, 0);
      const workersSettled = workerQueues === undefined || expectConnections === expectQueues || workerQueues === expectQueues - this.hctrls.length;
      if ((d.controllers === this.hctrls.length && d.queues === expectQueues && d.connections === expectConnections && d.pendingRequests === 0 && workersSettled) || performance.now() > until) return s;
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** Healthy controller: write a stamped block, read it back, compare; each loop on its own hctx. */
  private async healthyLoop(i: number): Promise<void> {
    const healthy = this.healthy;
    const rng = new Rng(this.seed ^ (0x9e3779b9 * (i + 1)));
    const n = this.hctrls.length;
    const ns = (this.hctrls[i % n] as Controller).namespace(1);
    const hctx = Math.floor(i / n) % 2;
    let gen = 0;
    while (this.alive()) {
      // Each loop owns the LBAs ≡ i (mod loops): the controllers share the namespace.
      const loops = this.opts.healthyLoops ?? 2;
      const lba = rng.int(Math.floor(HEALTHY_BLOCKS / loops)) * loops + i;
      const data = stamp(lba, ++gen, rng);
      const s = performance.now();
      try {
        await ns.write(lba, data, { hctx });
        const back = await ns.read(lba, 1, undefined, { hctx });
        if (!back.equals(data)) healthy.mismatches++;
        healthy.ops++;
      } catch (err) {
        healthy.errors++;
        healthy.firstError ??= err instanceof Error ? `${err.name}: ${err.message}` : String(err);
        await new Promise((r) => setTimeout(r, 50));
      }
      healthy.maxLatencyMs = Math.max(healthy.maxLatencyMs, performance.now() - s);
    }
  }

  /** One fuzz worker: a connection per round in a random mode; I/O-queue connects hang off an anchor admin controller. */
  private async worker(w: number): Promise<void> {
    const rng = new Rng(this.seed + w * 7919);
    const anchor = new Anchor(this.port, this.replyStats, rng);
    while (this.alive()) {
      const roll = rng.next();
      const mode: Mode = roll < 0.08 ? 'garbage' : roll < 0.12 ? 'icreq' : roll < 0.45 ? 'admin' : roll < 0.9 ? 'io' : 'discovery';
      const c = await FuzzConn.open(this.port, this.replyStats).catch(() => undefined);
      if (c === undefined) {
        await new Promise((r) => setTimeout(r, 10));
        continue;
      }
      this.connections++;
      c.mode = mode;
      const id = this.connections;
      try {
        if (mode === 'garbage') await this.garbageCases(c, id, rng);
        else if (mode === 'icreq') await this.icReqCase(c, id, rng);
        else await this.queueCases(c, id, mode, rng, anchor);
      } finally {
        if (rng.chance(0.5)) c.destroy();
        else c.socket.end();
      }
    }
    anchor.destroy();
  }

  private async garbageCases(c: FuzzConn, id: number, rng: Rng): Promise<void> {
    const n = 1 + rng.int(3);
    for (let i = 0; i < n && this.alive(); i++) {
      const g = garbage(rng);
      this.remember(id, 'garbage', g);
      this.cases++;
      await c.write(g);
    }
    await c.settle(20);
  }

  private async icReqCase(c: FuzzConn, id: number, rng: Rng): Promise<void> {
    const ic = encodePdu({ type: PduType.IC_REQ, pfv: 0, hpda: 0, dgst: rng.int(4), maxr2t: 0 })[0] as Buffer;
    const m = mutateStructured(rng, { role: 'admin', type: PduType.IC_REQ, header: ic, data: Buffer.alloc(0) });
    const b = rng.chance(0.5) ? frame(m.header, m.data, false, false) : m.header;
    this.remember(id, 'icreq', b);
    this.cases++;
    await c.write(b);
    await c.settle(20);
  }

  /** A connected admin, I/O or discovery queue, then structured cases seeded from the captures. */
  private async queueCases(c: FuzzConn, id: number, mode: 'admin' | 'io' | 'discovery', rng: Rng, anchor: Anchor): Promise<void> {
    const corpus = this.corpus;
    const hd = rng.chance(0.2);
    const dd = rng.chance(0.2);
    let seeds: SeedPdu[];
    let ok: number | undefined;
    if (mode === 'io') {
      const a = await anchor.get();
      if (a === undefined) return;
      ok = await prefix(c, rng, 'io', hd, dd, a.cntlid);
      seeds = rng.chance(0.9) ? corpus.io : corpus.all;
    } else {
      ok = await prefix(c, rng, mode, hd, dd);
      seeds = mode === 'discovery' ? [...corpus.discovery, ...corpus.connect] : rng.chance(0.9) ? corpus.admin : corpus.all;
    }
    if (ok === undefined) return;
    // Unsolicited H2CData is always fatal (unknown TTAG); keep it rare so connections live long enough to go deep.
    if (rng.chance(0.95)) seeds = seeds.filter((x) => x.type !== PduType.H2C_DATA);
    await this.fuzzCases(c, id, mode, rng, seeds);
  }

  private async fuzzCases(c: FuzzConn, id: number, mode: Mode, rng: Rng, seeds: SeedPdu[]): Promise<void> {
    const budget = 1 + rng.int(rng.chance(0.2) ? 2000 : 200);
    // Some connections mostly attack framing (short-lived), others stay on structured cases (long-lived, deep).
    const rawRate = rng.pick([0, 0.01, 0.05, 0.25, 0.5]);
    let sent = 0;
    while (sent < budget && !c.closed && this.alive()) {
      const batch = 1 + rng.int(16);
      const out: Buffer[] = [];
      for (let i = 0; i < batch; i++) {
        // Answer an outstanding R2T (sometimes mutated) so write paths get past the data transfer.
        const r2t = c.r2ts.shift();
        if (r2t !== undefined && rng.chance(0.8)) {
          for (const b of answerR2t(rng, c, r2t)) out.push(b);
        } else {
          out.push(makeCase(rng, seeds, this.corpus.all, c.framing.hdgst, c.framing.ddgst, rawRate));
        }
      }
      for (const b of out) this.remember(id, mode, b);
      this.cases += out.length;
      sent += out.length;
      await c.write(out);
      await c.settle(rng.chance(0.7) ? 1 : 5);
    }
  }
}

/** A worker's admin controller that I/O-queue connects name in their Connect data (re-created when it dies). */
class Anchor {
  private current: { conn: FuzzConn; cntlid: number } | undefined;

  constructor(
    private readonly port: number,
    private readonly replyStats: ReplyStats,
    private readonly rng: Rng,
  ) {}

  async get(): Promise<{ conn: FuzzConn; cntlid: number } | undefined> {
    if (this.current !== undefined && !this.current.conn.closed) return this.current;
    this.current = undefined;
    const c = await FuzzConn.open(this.port, this.replyStats).catch(() => undefined);
    if (c === undefined) return undefined;
    const cntlid = await prefix(c, this.rng, 'admin', false, false);
    if (cntlid === undefined) {
      c.destroy();
      return undefined;
    }
    this.current = { conn: c, cntlid };
    return this.current;
  }

  destroy(): void {
    this.current?.conn.destroy();
  }
}

let prefixCid = 0x100;

/** ICReq + Connect (+ CC.EN=1 on admin/discovery queues); resolves to the cntlid, or undefined if refused. */
async function prefix(c: FuzzConn, rng: Rng, mode: 'admin' | 'io' | 'discovery', hd: boolean, dd: boolean, cntlid = 0xffff): Promise<number | undefined> {
  await c.write(encodePdu({ type: PduType.IC_REQ, pfv: 0, hpda: 0, dgst: (hd ? 1 : 0) | (dd ? 2 : 0), maxr2t: 0 }));
  const end = performance.now() + 2000;
  while (!c.icResp && !c.closed && performance.now() < end) await c.settle(end - performance.now());
  if (!c.icResp) return undefined;
  const cid = (prefixCid = (prefixCid + 1) & 0x0fff);
  const qid = mode === 'io' ? 1 + rng.int(8) : 0;
  const subnqn = mode === 'discovery' ? DISCOVERY_NQN : FUZZ_NQN;
  const sqe = encodeConnectCmd({ cid, qid, sqsize: rng.chance(0.5) ? 31 : 127, cattr: rng.chance(0.5) ? 4 : 0, kato: 0, sgl: sglInCapsule(1024) });
  const data = encodeConnectData({ hostid: Buffer.alloc(16, 0x22), cntlid, subnqn, hostnqn: FUZZ_HOSTNQN });
  await c.write(encodePdu({ type: PduType.CAPSULE_CMD, sqe, data: [data] }, c.framing));
  const r = await c.response(cid, 2000);
  if (r === undefined || r.status !== 0) return undefined;
  const got = r.dw0 & 0xffff;
  if (mode === 'io') return got;
  const cc = 1 | (6 << 16) | (4 << 20);
  const ccCid = (cid + 0x1000) & 0xffff;
  const set = encodeSqe({ opcode: 0x7f, cid: ccCid, nsid: FabricsType.PROPERTY_SET, cdw11: 0x14, cdw12: cc });
  await c.write(encodePdu({ type: PduType.CAPSULE_CMD, sqe: set, data: [] }, c.framing));
  const s = await c.response(ccCid, 2000);
  return s?.status === 0 ? got : undefined;
}

/** H2CData for an R2T, chunked at MAXH2CDATA; one in five is mutated. */
function answerR2t(rng: Rng, c: FuzzConn, r: { cccid: number; ttag: number; r2to: number; r2tl: number }): Buffer[] {
  const out: Buffer[] = [];
  const total = Math.min(r.r2tl, 4 << 20);
  for (let off = 0; off < total; off += c.maxh2c) {
    const n = Math.min(c.maxh2c, total - off);
    const last = off + n === total;
    const header = Buffer.alloc(24);
    header[0] = PduType.H2C_DATA;
    header[1] = last ? PduFlag.DATA_LAST : 0;
    header.writeUInt16LE(r.cccid, 8);
    header.writeUInt16LE(r.ttag, 10);
    header.writeUInt32LE(r.r2to + off, 12);
    header.writeUInt32LE(n, 16);
    const data = Buffer.alloc(n, off & 0xff);
    if (rng.chance(0.2)) {
      const m = mutateStructured(rng, { role: 'io', type: PduType.H2C_DATA, header, data });
      out.push(frame(m.header, m.data, c.framing.hdgst, c.framing.ddgst));
      break;
    }
    const b = frame(header, data, c.framing.hdgst, c.framing.ddgst);
    out.push(b);
  }
  return out;
}

export type { ChildTarget };
