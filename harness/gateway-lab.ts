// A gateway group lab (issue 30, docs/gateway-groups.md) for the end-to-end test and the failover benchmark: N
// `nvme-tcp target` processes with one shared config (namespaces on shared files), each reaching etcd through its own
// fault proxy (so a partition holds every byte of one gateway's etcd traffic), our multipath initiator connected to
// all of them, a verify workload (every write names its LBA and sequence number; a read must return the last
// acknowledged write; FUA on every write), the events (SIGKILL + restart, SIGSTOP past the lease + SIGCONT, partition
// from etcd + heal), and a GET /group sampler with the check that no two gateways report one ANA group optimized at
// the same instant (NVMe Base 2.0 §8.1.3: one optimized path per group is what the group promises). The caller starts
// etcd (test/fixtures/etcd.ts) and gives its client port.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { until, sleep } from './until.js';
import { connect, createMultipath, type ConnectOptions, type Controller, type MultipathNamespace } from '../initiator/index.js';
import { freePort } from './lab.js';
import { startProxy, type FaultProxy } from './peers/proxy.js';

/** What GET /group answers (the fields the lab reads). */
export interface GroupView {
  self: string;
  at: number;
  fenced: boolean;
  members: { id: string }[];
  anaGroups: { grpid: number; owner: string | null; preferred: string | null; since: number; state: string }[];
  transitions: { grpid: number; from: string | null; to: string | null; cause: string; at: number; durationMs: number }[];
}

export interface LabGateway {
  id: string;
  port: number;
  api: number;
  proxy: FaultProxy;
  child: ChildProcess | undefined;
  exited: Promise<void> | undefined;
  stopped: boolean;
  out: string;
}

export interface GatewayLabOptions {
  /** etcd's client port on 127.0.0.1 (each gateway gets a fault proxy in front of it). */
  etcdPort: number;
  gateways?: number;
  /** Namespaces, each on its own shared file and ANA group k (gateway k, by join order, prefers group k). Default 1. */
  namespaces?: number;
  leaseMs?: number;
  failbackDelayMs?: number;
  nqn?: string;
  group?: string;
  /** MiB per namespace file (default 8). */
  sizeMiB?: number;
  /** The CLI entry (default bin/nvme-tcp.mjs of this checkout). */
  bin?: string;
  /** More `nvme-tcp target` arguments for every gateway (e.g. `--workers 2`). */
  extraArgs?: readonly string[];
}

export async function groupView(gw: LabGateway): Promise<GroupView | undefined> {
  try {
    // 3 s: above the gateway's 2 s at most for the lease TTLs (target/service/gateway.ts LEASE_VIEW_MS), which a loaded
    // machine's etcd (CI) can need; a fixed 500 ms left a gateway unseen for a minute there.
    const res = await fetch(`http://127.0.0.1:${gw.api}/group`, { signal: AbortSignal.timeout(3000) });
    return res.ok ? ((await res.json()) as GroupView) : undefined;
  } catch {
    return undefined;
  }
}

export type LabEventKind = 'kill' | 'stop' | 'partition';

export class GatewayLab {
  readonly gateways: LabGateway[] = [];
  readonly controllers: Controller[] = [];
  readonly nqn: string;
  readonly leaseMs: number;
  readonly namespaces: number;
  readonly dir: string;
  readonly #bin: string;
  readonly #extraArgs: readonly string[];

  private constructor(opts: GatewayLabOptions) {
    this.nqn = opts.nqn ?? 'nqn.2024-01.io.nvme-tcp-ts:gwgroup';
    this.leaseMs = opts.leaseMs ?? 1000;
    this.namespaces = opts.namespaces ?? 1;
    this.#bin = opts.bin ?? path.resolve(import.meta.dirname, '../bin/nvme-tcp.mjs');
    this.#extraArgs = opts.extraArgs ?? [];
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'nvme-gwlab-'));
    const namespaces = Array.from({ length: this.namespaces }, (_, k) => ({
      nsid: k + 1,
      anaGroup: k + 1,
      backend: { type: 'file', path: path.join(this.dir, `ns${k + 1}.img`), size: `${opts.sizeMiB ?? 8}M` },
    }));
    // Identities (serial, UUID, NGUID) come from the NQN and NSID: the same on every gateway of the shared config.
    const gateway = { group: opts.group ?? 'lab', etcd: ['http://127.0.0.1:1'], leaseTtlMs: this.leaseMs, failbackDelayMs: opts.failbackDelayMs ?? 500 };
    writeFileSync(this.#config, JSON.stringify({ ports: [], subsystems: [{ nqn: this.nqn, allowAnyHost: true, namespaces }], gateway }));
  }

  get #config(): string {
    return path.join(this.dir, 'gateway.json');
  }

  /** Starts the gateways in order (gateway k joins k-th, so it claims ANA group k as its preferred one) and waits
   *  until every group is on its preferred gateway. */
  static async start(opts: GatewayLabOptions): Promise<GatewayLab> {
    const lab = new GatewayLab(opts);
    try {
      for (let k = 1; k <= (opts.gateways ?? 3); k++) {
        const proxy = await startProxy({ upstreamHost: '127.0.0.1', upstreamPort: opts.etcdPort });
        lab.gateways.push({ id: `gw${k}`, port: await freePort(), api: await freePort(), proxy, out: '', child: undefined, exited: undefined, stopped: false });
      }
      for (const gw of lab.gateways) await lab.startGateway(gw);
      // The last to join gets its preferred group only after the failback delay: start from the settled group.
      await until(() => lab.settled(), 30_000, 'the gateway group to settle');
    } catch (err) {
      await lab.close();
      throw err;
    }
    return lab;
  }

  /** Spawns one gateway and resolves once it serves GET /group; rejects with its output if it exits first. */
  startGateway(gw: LabGateway): Promise<void> {
    const args = [
      this.#bin, 'target', '--config', this.#config,
      '--listen', `127.0.0.1:${gw.port}`, '--api', `127.0.0.1:${gw.api}`,
      '--etcd', `http://127.0.0.1:${gw.proxy.port}`, '--gateway-id', gw.id,
      '--log-level', 'warn',
      ...this.#extraArgs,
    ];
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    gw.child = child;
    gw.out = '';
    gw.stopped = false;
    const keep = (d: Buffer) => (gw.out = (gw.out + d.toString()).slice(-8000));
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    let exitCode: number | null | undefined;
    gw.exited = new Promise((r) => child.once('exit', (code) => r(void (exitCode = code))));
    return until(async () => {
      if (exitCode !== undefined) throw new Error(`${gw.id} exited with ${exitCode}`);
      return (await groupView(gw)) !== undefined;
    }, 60_000, `${gw.id} to serve GET /group`).catch((err: Error) => {
      throw new Error(`${err.message}; output: ${gw.out}`);
    });
  }

  async kill(gw: LabGateway): Promise<void> {
    const exited = gw.exited;
    gw.child?.kill('SIGKILL');
    await exited;
    gw.child = undefined;
  }

  stall(gw: LabGateway, on: boolean): void {
    if (gw.child?.pid === undefined) return;
    process.kill(gw.child.pid, on ? 'SIGSTOP' : 'SIGCONT');
    gw.stopped = on;
  }

  /** Every live gateway's view (undefined for a dead, stopped or unanswering one). */
  views(): Promise<(GroupView | undefined)[]> {
    return Promise.all(this.gateways.map((g) => (g.child !== undefined && !g.stopped ? groupView(g) : Promise.resolve(undefined))));
  }

  /**
   * grpid → owner, as the first live, unfenced gateway other than `except` sees it. A partitioned gateway answers GET
   * /group from its last record until it notices the lost lease, so the one an event hits is not asked.
   */
  async owners(except?: LabGateway): Promise<Map<number, string | null> | undefined> {
    const views = await this.views();
    for (const [k, v] of views.entries()) {
      if (v !== undefined && !v.fenced && this.gateways[k] !== except) return new Map(v.anaGroups.map((a) => [a.grpid, a.owner]));
    }
    return undefined;
  }

  /** Whether every other gateway sees `gw` gone from the members (its lease expired or was revoked). */
  async gone(gw: LabGateway): Promise<boolean> {
    for (const g of this.gateways) {
      if (g === gw) continue;
      const v = g.child !== undefined && !g.stopped ? await groupView(g) : undefined;
      if (v === undefined || v.members.some((m) => m.id === gw.id)) return false;
    }
    return true;
  }

  /** All gateways members, none fenced, every ANA group owned by its preferred gateway, optimized there only. */
  async settled(): Promise<boolean> {
    const views = await Promise.all(this.gateways.map(groupView));
    return views.every(
      (v) =>
        v !== undefined &&
        !v.fenced &&
        v.members.length === this.gateways.length &&
        v.anaGroups.every((a) => a.owner !== null && a.owner === a.preferred && a.state === (v.self === a.owner ? 'optimized' : 'inaccessible')),
    );
  }

  /** One controller per gateway for `hostnqn` (reconnecting forever, short KATO and I/O timeout so paths move fast). */
  async connect(hostnqn: string, extra: Partial<ConnectOptions> = {}): Promise<Controller[]> {
    const opts = { traddr: '127.0.0.1', nqn: this.nqn, hostnqn, nr_io_queues: 1, reconnect_delay: 0.5, ctrl_loss_tmo: -1, keep_alive_tmo: 1, io_timeout: 3, ...extra };
    for (const gw of this.gateways) this.controllers.push(await connect({ ...opts, trsvcid: gw.port }));
    return this.controllers;
  }

  multipath(nsid: number): MultipathNamespace {
    return createMultipath(this.controllers, nsid, { iopolicy: 'numa', noPathTimeoutMs: 60_000 });
  }

  async close(): Promise<void> {
    for (const c of this.controllers.splice(0)) await c.disconnect().catch(() => undefined);
    for (const gw of this.gateways) {
      if (gw.child !== undefined) {
        this.stall(gw, false);
        await this.kill(gw);
      }
      await gw.proxy.close();
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------- events

export interface LabEvent {
  kind: LabEventKind;
  gw: string;
  /** The ANA groups `gw` owned when the event began. */
  owned: number[];
  /** performance.now() at injection. */
  t0: number;
  /** ms from injection until every group `gw` owned had another live owner (undefined: it owned none). */
  toNewOwnerMs: number | undefined;
  /** performance.now() when the gateway was back (restarted and serving, SIGCONT, partition healed). */
  tBack: number;
  /** ms from the gateway's return until the group settled (every group back on its preferred gateway). */
  failbackMs: number;
  /** performance.now() when settled. */
  tSettled: number;
}

/** Takes `gw` out (kill, stall or partition), waits for its lease to expire and its groups to move, brings it back,
 *  and waits for the group to settle again (failback). */
export async function injectEvent(lab: GatewayLab, kind: LabEventKind, gw: LabGateway, what: string): Promise<LabEvent> {
  const before = (await lab.owners()) ?? new Map<number, string | null>();
  const owned = [...before].filter(([, o]) => o === gw.id).map(([g]) => g);
  const t0 = performance.now();
  if (kind === 'kill') await lab.kill(gw);
  else if (kind === 'stop') lab.stall(gw, true);
  else gw.proxy.pause();
  let toNewOwnerMs: number | undefined;
  const moved = async (): Promise<boolean> => {
    const o = await lab.owners(gw);
    return o !== undefined && owned.every((g) => { const x = o.get(g); return x !== gw.id && x !== null && x !== undefined; });
  };
  await until(async () => {
    if (toNewOwnerMs === undefined && owned.length > 0 && (await moved())) toNewOwnerMs = performance.now() - t0;
    return (owned.length === 0 || toNewOwnerMs !== undefined) && (await lab.gone(gw));
  }, 30_000, `${what}: ${gw.id}'s lease to expire and its groups to move`);
  if (kind === 'kill') await lab.startGateway(gw);
  else {
    // Past the lease: the stalled or partitioned gateway must find itself fenced when it runs again.
    await sleep(lab.leaseMs);
    if (kind === 'stop') lab.stall(gw, false);
    else gw.proxy.resume();
  }
  const tBack = performance.now();
  await until(() => lab.settled(), 30_000, `${what}: rejoin and failback`);
  const tSettled = performance.now();
  return { kind, gw: gw.id, owned, t0, toNewOwnerMs, tBack, failbackMs: tSettled - tBack, tSettled };
}

// ---------------------------------------------------------------------------------------------- the verify workload

function fillBlock(buf: Buffer, lba: number, seq: number): void {
  buf.writeBigUInt64LE(BigInt(lba), 0);
  buf.writeUInt32LE(seq, 8);
  buf.fill((seq * 31 + (lba & 0xff)) & 0xff, 12);
}

function blockSeq(buf: Buffer, lba: number): number | 'corrupt' {
  if (buf.readBigUInt64LE(0) !== BigInt(lba)) return 'corrupt';
  const seq = buf.readUInt32LE(8);
  const b = (seq * 31 + (lba & 0xff)) & 0xff;
  for (let i = 12; i < buf.length; i++) if (buf[i] !== b) return 'corrupt';
  return seq;
}

export interface VerifyOptions {
  /** Workers per namespace (each its own LBA slots). Default 4. */
  workers?: number;
  /** 4 KiB slots per worker. Default 128. */
  slots?: number;
  /** An I/O outstanding this long counts as stuck (default 60 s). */
  stuckMs?: number;
  /** First LBA of the slots (default 0): two workloads on one namespace need disjoint ranges. */
  baseLba?: number;
}

/** Write-then-read verify over one or more multipath namespaces; completion times kept per namespace for pauses. */
export class VerifyWorkload {
  /** mismatchAt: performance.now() of each mismatching read's completion (to tell which event it fell in). */
  readonly stats = { writes: 0, reads: 0, mismatches: [] as string[], mismatchAt: [] as number[], stuck: 0, maxLatencyMs: 0 };
  /** Per namespace: performance.now() of every completion, ascending. */
  readonly completions: number[][];
  readonly #expected: Map<number, number>[];
  readonly #inflight = new Set<number>();
  #stop = false;
  #running: Promise<unknown> | undefined;
  readonly #io = 4096;

  constructor(
    readonly paths: MultipathNamespace[],
    readonly opts: VerifyOptions = {},
  ) {
    this.completions = paths.map(() => []);
    this.#expected = paths.map(() => new Map());
  }

  get writes(): number {
    return this.stats.writes;
  }

  start(): void {
    const workers = this.opts.workers ?? 4;
    this.#running = Promise.all(this.paths.flatMap((mp, n) => Array.from({ length: workers }, (_, w) => this.#worker(mp, n, w))));
  }

  async #timed<T>(n: number, op: () => Promise<T>): Promise<T> {
    const t = performance.now();
    this.#inflight.add(t);
    try {
      return await op();
    } finally {
      this.#inflight.delete(t);
      const now = performance.now();
      const lat = now - t;
      this.stats.maxLatencyMs = Math.max(this.stats.maxLatencyMs, lat);
      if (lat > (this.opts.stuckMs ?? 60_000)) this.stats.stuck++;
      this.completions[n]?.push(now);
    }
  }

  async #worker(mp: MultipathNamespace, n: number, w: number): Promise<void> {
    const slots = this.opts.slots ?? 128;
    const base = this.opts.baseLba ?? 0;
    const blocks = this.#io / mp.blockSize;
    const expected = this.#expected[n] as Map<number, number>;
    const wbuf = Buffer.alloc(this.#io);
    const rbuf = Buffer.alloc(this.#io);
    let seq = 0;
    while (!this.#stop) {
      const lba = base + (w * slots + Math.floor(Math.random() * slots)) * blocks;
      fillBlock(wbuf, lba, ++seq);
      await this.#timed(n, () => mp.write(lba, wbuf, { fua: true }));
      expected.set(lba, seq);
      this.stats.writes++;
      const rlba = base + (w * slots + Math.floor(Math.random() * slots)) * blocks;
      const want = expected.get(rlba);
      if (want === undefined) continue;
      const got = blockSeq(await this.#timed(n, () => mp.read(rlba, blocks, rbuf)), rlba);
      this.stats.reads++;
      if (got !== want) this.stats.mismatchAt.push(performance.now());
      if (got !== want) this.stats.mismatches.push(`nsid ${mp.nsid} lba ${rlba}: read ${got}, last acknowledged write ${want}`);
    }
  }

  /** Stops the workers; commands still outstanding after `graceMs` count as stuck. */
  async stop(graceMs = 30_000): Promise<void> {
    this.#stop = true;
    const finished = await Promise.race([this.#running?.then(() => true), sleep(graceMs).then(() => false)]);
    if (!finished) this.stats.stuck += this.#inflight.size;
  }

  /** Reads back every acknowledged write; the count whose content is not the last acknowledged one (the first 10 named). */
  async readBack(): Promise<{ blocks: number; lost: number; lostBlocks: string[] }> {
    let lost = 0;
    let blocks = 0;
    const lostBlocks: string[] = [];
    const rbuf = Buffer.alloc(this.#io);
    for (const [n, mp] of this.paths.entries()) {
      for (const [lba, seq] of this.#expected[n] as Map<number, number>) {
        blocks++;
        const got = blockSeq(await mp.read(lba, this.#io / mp.blockSize, rbuf), lba);
        if (got === seq) continue;
        lost++;
        if (lostBlocks.length < 10) lostBlocks.push(`nsid ${mp.nsid} lba ${lba}: read ${got}, last acknowledged write ${seq}`);
      }
    }
    return { blocks, lost, lostBlocks };
  }

  /** The longest gap between completions of one namespace within [t0, t1] (a gap spanning t1 counts whole). */
  longestGap(t0: number, t1: number): number {
    let max = 0;
    for (const list of this.completions) {
      let i = lowerBound(list, t0);
      let prev = i > 0 ? (list[i - 1] as number) : t0;
      for (; i < list.length; i++) {
        const t = list[i] as number;
        max = Math.max(max, t - Math.max(prev, t0));
        prev = t;
        if (t > t1) break;
      }
      if (i === list.length) max = Math.max(max, t1 - Math.max(prev, t0));
    }
    return max;
  }
}

function lowerBound(a: number[], x: number): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((a[mid] as number) < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// ---------------------------------------------------------------------------------------------- the sampler

/** GET /group on every live gateway every `everyMs`, each view with the instant it describes (`at`). */
export class GroupSampler {
  readonly samples: GroupView[] = [];
  #on = true;
  readonly #loop: Promise<void>;

  /** `lab`: anything that answers every gateway's view (GatewayLab, or the container lab's API clients). */
  constructor(lab: Pick<GatewayLab, 'views'>, everyMs = 100) {
    this.#loop = (async () => {
      while (this.#on) {
        for (const v of await lab.views()) if (v !== undefined) this.samples.push(v);
        await sleep(everyMs);
      }
    })();
  }

  async stop(): Promise<void> {
    this.#on = false;
    await this.#loop;
  }

  /**
   * Instants two gateways reported one ANA group optimized. If A reports group G optimized at t1 and again at t2 with
   * the same `since` (it owned G throughout), no other gateway may report G optimized in [t1, t2].
   */
  overlaps(): string[] {
    const out: string[] = [];
    const grpids = new Set(this.samples.flatMap((s) => s.anaGroups.map((a) => a.grpid)));
    for (const g of grpids) {
      const opt = this.samples.flatMap((s) => s.anaGroups.filter((a) => a.grpid === g && a.state === 'optimized').map((a) => ({ self: s.self, at: s.at, since: a.since })));
      const byGw = new Map<string, typeof opt>();
      for (const s of opt) byGw.set(s.self, [...(byGw.get(s.self) ?? []), s]);
      for (const [id, list] of byGw) {
        list.sort((a, b) => a.at - b.at);
        for (let k = 1; k < list.length; k++) {
          const [a, b] = [list[k - 1], list[k]] as [(typeof opt)[number], (typeof opt)[number]];
          if (a.since !== b.since) continue;
          for (const o of opt) if (o.self !== id && o.at >= a.at && o.at <= b.at) out.push(`group ${g}: ${o.self} optimized at ${o.at} while ${id} owned it (${a.at}..${b.at})`);
        }
      }
    }
    return out;
  }
}
