// Same-run comparison of the TypeScript target with a minimal C epoll target (bench/perf-c-baseline/target.c), both
// driven by the same C load generator (bench/perf-c-baseline/client.c), everything pinned to CPU 0 (docs/performance.md, Benchmarks:
// waking the other vCPU costs ~40 µs and unpinned runs are bimodal). Cases alternate C / TS so that load from
// neighbours hits both alike; each cell is the best of --reps runs.
//   npx tsx bench/perf-target.ts [--seconds 2] [--reps 1] [--cases 4k-qd32,...] [--prof] [--verify] [--cpu N] [--compare DIR[,DIR...]]
//                                [--node-min] [--ts-env K=V[+K=V],...] [--warmup 1] [--target-cpu LIST] [--spdk] [--spdk-interrupt]
// --prof writes a V8 CPU profile of the TS target to ./bench-prof/. Prints IOPS, MB/s, p50/p99 µs, the TS/C ratio,
// each target's CPU time per I/O (/proc/<pid>/stat; robust against neighbours' load), the client's CPU time per I/O
// (getrusage; client and target share the one pinned CPU, so IOPS follow the sum of the two), completions per client
// read (the reply batch size), IOPS per target core and the data-digest cost. --ts-env adds one more TS target per
// comma-separated item, started with those environment variables (an ablation in the same run, e.g.
// NODE_OPTIONS=--max-semi-space-size=64). --warmup runs the client untimed for that many seconds against each target before its
// first measured run of a case (JIT). --compare runs other checkouts, comma-separated, as further targets paired with
// TS; a second checkout of this same tree among them is the A/A arm, what a checkout elsewhere reads as by itself
// (docs/performance.md, "A/A arms"). --target-cpu pins every target to LIST instead of the client's CPU. --spdk adds
// SPDK's nvmf_tgt (harness/peers/spdk.ts; busy-polling reactors on the target CPUs, as SPDK is benchmarked) and prints
// ours ÷ SPDK per case; --spdk-interrupt adds it in interrupt mode (reactors sleep until work arrives).
import { Buffer } from 'node:buffer';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { arg } from './args.js';

const SUBNQN = 'nqn.2024-01.io.nvme-ts:bench';
/** Namespace size (and C target RAM): NVME_BENCH_NS_MIB, default 256. */
export const NS_BYTES = Number(process.env.NVME_BENCH_NS_MIB ?? 256) * 1024 * 1024;
const HERE = path.dirname(fileURLToPath(import.meta.url));
const SRC = path.join(HERE, 'perf-c-baseline');

export interface Case {
  name: string;
  bs: number;
  qd: number;
  ddgst: boolean;
}

const ALL_CASES: Case[] = [
  { name: '4k-qd1', bs: 4096, qd: 1, ddgst: false },
  { name: '4k-qd32', bs: 4096, qd: 32, ddgst: false },
  { name: '4k-qd128', bs: 4096, qd: 128, ddgst: false },
  { name: '128k-qd16', bs: 131072, qd: 16, ddgst: false },
  { name: '4k-qd32-ddgst', bs: 4096, qd: 32, ddgst: true },
  { name: '128k-qd16-ddgst', bs: 131072, qd: 16, ddgst: true },
];

export interface ClientResult {
  ios: number;
  iops: number;
  mbps: number;
  p50us: number;
  p99us: number;
  maxus: number;
  /** The client's read() and write() calls, and its own CPU time (µs, getrusage). */
  reads: number;
  writes: number;
  cpuus: number;
}

/** Build the C target and client with `cc -O2` (SSE4.2 CRC32C when the compiler accepts it). */
export function buildBaseline(outDir: string): { target: string; client: string } {
  mkdirSync(outDir, { recursive: true });
  const out = { target: path.join(outDir, 'perf-c-target'), client: path.join(outDir, 'perf-c-client') };
  for (const [src, bin] of [
    ['target.c', out.target],
    ['client.c', out.client],
  ] as const) {
    let r = spawnSync('cc', ['-O2', '-msse4.2', '-o', bin, path.join(SRC, src)], { stdio: 'inherit' });
    if (r.status !== 0) r = spawnSync('cc', ['-O2', '-o', bin, path.join(SRC, src)], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error(`cc failed for ${src}`);
  }
  return out;
}

/**
 * A C client's result once its output is complete: on 'close', not 'exit', which can come before the last stdout data
 * (a loaded machine then lost the result line and the bench died on JSON.parse, leaving its servers behind).
 */
export function settleClient<T>(code: number | null, out: string, resolve: (v: T) => void, reject: (e: Error) => void): void {
  if (code !== 0) return reject(new Error(`client exited ${code}`));
  try {
    resolve(JSON.parse(out) as T);
  } catch {
    reject(new Error(`client printed no result: ${JSON.stringify(out)}`));
  }
}

/**
 * Writes the whole namespace through our initiator, so reads return real data that has been touched, as the C target's
 * filled RAM does: not our shared zero chunk (which would also keep the digest cache artificially warm), and not
 * SPDK malloc pages that fault in on their first read.
 */
export async function fillNamespace(port: number, nqn = SUBNQN, bytes = NS_BYTES): Promise<void> {
  const { connect } = await import('../initiator/index.js');
  const host = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn, nr_io_queues: 1, queue_size: 32 });
  try {
    const ns = host.namespace(1);
    const piece = 1024 * 1024;
    const buf = Buffer.alloc(piece);
    for (let off = 0; off < bytes; off += piece) {
      for (let i = 0; i < piece; i += 4) buf.writeUInt32LE(((off + i) * 2654435761) >>> 0, i);
      await ns.write(off / ns.blockSize, buf);
    }
  } finally {
    await host.disconnect();
  }
}

/** The TS target in this process (RAM namespace, one port on 127.0.0.1:0); prints "PORT n", stops on "quit". */
async function tsServer(): Promise<void> {
  const { TargetService } = await import('../target/service/index.js');
  const svc = new TargetService();
  await svc.apply({ ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: NS_BYTES } }] }] });
  const port = svc.boundPorts()[0]?.port ?? 0;
  await fillNamespace(port);
  process.stdout.write(`PORT ${port}\n`);
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (line: string) => {
    for (const cmd of line.split('\n')) {
      if (cmd === 'stats') process.stdout.write(`STATS ${JSON.stringify({ ...svc.stats(), controllers: svc.listControllers().length })}\n`);
      if (cmd === 'quit') void svc.stop().then(() => process.exit(0));
    }
  });
}

/** A child that prints "PORT n" first and answers line commands. */
export class Child {
  readonly proc: ChildProcess;
  #buf = '';
  #lines: string[] = [];
  #waiter: ((l: string) => void) | undefined;
  constructor(cmd: string, args: string[], env?: Record<string, string>) {
    this.proc = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'], ...(env !== undefined ? { env: { ...process.env, ...env } } : {}) });
    this.proc.stdout?.setEncoding('utf8');
    this.proc.stdout?.on('data', (d: string) => {
      this.#buf += d;
      let i: number;
      while ((i = this.#buf.indexOf('\n')) >= 0) {
        const l = this.#buf.slice(0, i);
        this.#buf = this.#buf.slice(i + 1);
        const w = this.#waiter;
        this.#waiter = undefined;
        if (w !== undefined) w(l);
        else this.#lines.push(l);
      }
    });
  }
  line(): Promise<string> {
    const l = this.#lines.shift();
    return l !== undefined ? Promise.resolve(l) : new Promise((r) => (this.#waiter = r));
  }
  async ask(cmd: string): Promise<string> {
    this.proc.stdin?.write(`${cmd}\n`);
    return this.line();
  }
  async port(): Promise<number> {
    const l = await this.line();
    if (!l.startsWith('PORT ')) throw new Error(`unexpected child output: ${l}`);
    return Number(l.slice(5));
  }
}

/** utime+stime of a process in µs (/proc/<pid>/stat, clock ticks of 10 ms): the same meter for the C and the TS target. */
function cpuUs(pid: number | undefined): number {
  if (pid === undefined) return 0;
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(rest[11]) + Number(rest[12])) * 10_000;
}

export function runClient(cpu: string, client: string, port: number, c: Case, seconds: number, verify: boolean): Promise<ClientResult> {
  return new Promise((resolve, reject) => {
    const p = spawn('taskset', ['-c', cpu, client, String(port), String(c.qd), String(c.bs), String(seconds), c.ddgst ? '1' : '0', '0', String(NS_BYTES), verify ? '1' : '0'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    p.stdout.setEncoding('utf8');
    p.stdout.on('data', (d: string) => (out += d));
    p.on('close', (code) => settleClient(code, out, resolve, reject));
  });
}

/**
 * One target of the comparison: our target, the C baseline, the trivial Node server, another checkout, or SPDK's
 * nvmf_tgt. Every arm is measured the same way (same client, same CPU meter on its pid); only start and stop differ.
 */
interface TargetArm {
  name: string;
  port: number;
  pid: number | undefined;
  /** CPUs given to the target (its taskset list or SPDK's reactor mask): the denominator of IOPS per target core. */
  cores: number;
  /** Busy-polls its cores (SPDK's default): its CPU is 100 % of them by design, not a measure of work. */
  polls: boolean;
  stop(): Promise<void>;
}

type Side = ClientResult & { cpuPerIo: number };
type Row = { c: Case; best: Side[]; all: Side[][] };

interface Options {
  seconds: number;
  reps: number;
  /** The client's CPU. */
  cpu: string;
  /** The targets' CPUs (default: the client's); SPDK's reactor mask. */
  targetCpus: number[];
  cases: Case[];
  verify: boolean;
  warmup: number;
}

/** A target that prints "PORT n" and stops on "quit" (or SIGTERM for the C one), pinned to the target CPUs. */
async function childArm(name: string, cpus: readonly number[], args: string[], env?: Record<string, string>): Promise<TargetArm> {
  const child = new Child('taskset', ['-c', cpus.join(','), ...args], env);
  const stop = async (): Promise<void> => {
    if (child.proc.exitCode !== null || child.proc.signalCode !== null) return;
    const exited = new Promise((r) => child.proc.once('exit', r));
    if (name === 'C') child.proc.kill();
    else child.proc.stdin?.write('quit\n');
    await exited;
  };
  try {
    return { name, port: await child.port(), pid: child.proc.pid, cores: cpus.length, polls: false, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

/**
 * SPDK's nvmf_tgt with the client's subsystem NQN and a malloc namespace of the same size, written in full like ours,
 * reactors on the target CPUs. max_queue_depth 256: the client's I/O queue asks for 256 entries (SPDK's default 128).
 */
async function spdkArm(name: string, cpus: readonly number[], interrupt: boolean): Promise<TargetArm> {
  const { startSpdkTarget } = await import('../harness/peers/spdk.js');
  const t = await startSpdkTarget({ cpus, interrupt, nqn: SUBNQN, namespaces: [{ sizeMiB: NS_BYTES >> 20 }], discovery: false, transport: { max_queue_depth: 256 } });
  try {
    await fillNamespace(t.port);
  } catch (e) {
    await t.stop();
    throw e;
  }
  return { name, port: t.port, pid: t.pid, cores: cpus.length, polls: !interrupt, stop: () => t.stop() };
}

/** --compare's checkouts, comma-separated. */
const compareDirs = (): string[] => (arg('compare')?.split(',') ?? []).map((d) => path.resolve(d));
/** The arm name of the n-th --compare checkout: TS@compare for the first, as before; TS@compare2... after it. */
const compareName = (n: number): string => `TS@compare${n === 0 ? '' : n + 1}`;

/** Starts every arm the flags ask for, C first (the ×C column) and ours second (the arm the others pair with). */
async function startArms(o: Options, bins: { target: string }, arms: TargetArm[]): Promise<void> {
  const self = fileURLToPath(import.meta.url);
  const nodeArgs = [...process.execArgv, ...(process.argv.includes('--prof') ? ['--cpu-prof', '--cpu-prof-dir', 'bench-prof'] : [])];
  const t = o.targetCpus;
  arms.push(await childArm('C', t, [bins.target, '0', String(NS_BYTES >> 20)]));
  arms.push(await childArm('TS', t, [process.execPath, ...nodeArgs, self, '--server']));
  // The trivial Node server (bench/perf-node-min.ts, docs/performance.md Fifth pass): what Node alone reaches on this machine now.
  if (process.argv.includes('--node-min')) arms.push(await childArm('Node-min', t, [process.execPath, ...process.execArgv, path.join(HERE, 'perf-node-min.ts'), String(NS_BYTES >> 20)]));
  for (const [n, spec] of (arg('ts-env')?.split(',') ?? []).entries()) {
    const env: Record<string, string> = {};
    for (const kv of spec.split('+')) {
      const eq = kv.indexOf('=');
      if (eq <= 0) throw new Error(`--ts-env ${spec}: want NAME=VALUE[+NAME=VALUE]`);
      env[kv.slice(0, eq)] = kv.slice(eq + 1);
    }
    console.log(`# TS:${n} = ${spec}`);
    arms.push(await childArm(`TS:${n}`, t, [process.execPath, ...nodeArgs, self, '--server'], env));
  }
  // Other checkouts of this repository (e.g. the commit before an optimization, and a second checkout of this tree as
  // the A/A arm that shows what a checkout elsewhere alone reads as), each run as a further target.
  for (const [n, dir] of compareDirs().entries()) {
    arms.push(await childArm(compareName(n), t, [process.execPath, ...process.execArgv, path.join(dir, 'bench', 'perf-target.ts'), '--server']));
  }
  if (process.argv.includes('--spdk')) arms.push(await spdkArm('SPDK', t, false));
  if (process.argv.includes('--spdk-interrupt')) arms.push(await spdkArm('SPDK-irq', t, true));
}

/** Every case: an untimed warm-up per arm, then `reps` interleaved repetitions; the best of each arm is kept too. */
async function runCases(o: Options, client: string, arms: readonly TargetArm[]): Promise<Row[]> {
  const measure = async (t: TargetArm, c: Case): Promise<Side> => {
    const before = cpuUs(t.pid);
    const r = await runClient(o.cpu, client, t.port, c, o.seconds, o.verify);
    return { ...r, cpuPerIo: (cpuUs(t.pid) - before) / r.ios };
  };
  const rows: Row[] = [];
  for (const c of o.cases) {
    const all: Side[][] = arms.map(() => []);
    if (o.warmup > 0) for (const t of arms) await runClient(o.cpu, client, t.port, c, o.warmup, o.verify);
    for (let i = 0; i < o.reps; i++) {
      // Interleaved, so that a burst of neighbour load hits every target alike; the order rotates each repetition,
      // because running right after a given arm is worth a few per cent (an A/A pair of the same tree read 0.978).
      for (let j = 0; j < arms.length; j++) {
        const k = (j + i) % arms.length;
        all[k]?.push(await measure(arms[k] as TargetArm, c));
      }
    }
    rows.push({ c, best: all.map((runs) => runs.reduce((b, r) => (r.iops > b.iops ? r : b))), all });
  }
  return rows;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};
const fmt = (n: number, w: number, d = 0): string => n.toFixed(d).padStart(w);

function printTable(o: Options, arms: readonly TargetArm[], rows: readonly Row[]): void {
  const where = o.targetCpus.join(',') === o.cpu ? `all on CPU ${o.cpu}` : `client on CPU ${o.cpu}, targets on CPU ${o.targetCpus.join(',')}`;
  console.log(`# NVMe/TCP targets driven by the same C client (digest verify ${o.verify ? 'on' : 'off'}), ${where}, ${o.seconds} s per run, best of ${o.reps}`);
  const compares = compareDirs().map((dir, n) => `# ${compareName(n)} = ${dir}\n`).join('');
  console.log(`${compares}case             target       IOPS   MB/s  ×C    p50µs  p99µs  cpu µs/IO  client µs/IO  IO/read  IOPS/core`);
  for (const r of rows) {
    const c0 = r.best[0] as Side;
    for (const [k, t] of arms.entries()) {
      const b = r.best[k] as Side;
      console.log(
        `${(k === 0 ? r.c.name : '').padEnd(17)}${t.name.padEnd(11)}${fmt(b.iops, 8)}${fmt(b.mbps, 7)}${fmt(b.iops / c0.iops, 5, 2)}${fmt(b.p50us, 8, 1)}${fmt(b.p99us, 7, 0)}` +
          `${fmt(b.cpuPerIo, 10, 2)}${fmt(b.cpuus / b.ios, 14, 2)}${fmt(b.ios / Math.max(1, b.reads), 9, 1)}${fmt(b.iops / t.cores, 11)}${t.polls ? '  polls' : ''}`,
      );
    }
  }
  if (arms.some((t) => t.polls)) {
    const shared = o.targetCpus.includes(Number(o.cpu)) ? ' Here it polls the CPU the client runs on, so the two share that CPU by time slices.' : '';
    console.log(`# "polls": SPDK's reactors busy-poll their cores, so its CPU is 100 % of them by design and its cpu µs/IO is wall time × cores ÷ I/Os, not work; compare IOPS per target core.${shared}`);
  }
}

/** Per-repetition ratios: each arm against the C run, extra arms paired with ours, and ours ÷ each SPDK arm. */
function printRatios(arms: readonly TargetArm[], rows: readonly Row[]): void {
  for (const r of rows) {
    const reps = r.all[0]?.length ?? 0;
    for (const [k, t] of arms.entries()) {
      if (k === 0) continue;
      const mine = r.all[k] ?? [];
      const vs = (j: number, f: (x: Side) => number) => mine.map((x, i) => f(x) / f(((r.all[j] as Side[])[i] as Side)));
      if (t.name.startsWith('SPDK')) {
        // The comparison the SPDK arm exists for: ours over SPDK, best of N and repetition by repetition.
        const paired = vs(1, (x) => x.iops).map((x) => 1 / x);
        const best = (r.best[1] as Side).iops / (r.best[k] as Side).iops;
        console.log(`${r.c.name} TS ÷ ${t.name}: IOPS ${best.toFixed(3)} best of ${reps}, median ${median(paired).toFixed(3)} over repetitions (${paired.map((x) => x.toFixed(2)).join(' ')}); IOPS per target core TS ${fmt((r.best[1] as Side).iops / (arms[1] as TargetArm).cores, 0)}, ${t.name} ${fmt((r.best[k] as Side).iops / t.cores, 0)}`);
        continue;
      }
      if (reps < 2) continue;
      console.log(`${r.c.name} ${t.name} ÷ C per repetition: ${vs(0, (x) => x.iops).map((x) => x.toFixed(2)).join(' ')}`);
      if (k < 2) continue;
      // Paired with TS in the same repetition: small effects show here before they show in best-of-N.
      const paired = vs(1, (x) => x.iops);
      const cpu = vs(1, (x) => x.cpuPerIo);
      console.log(`${r.c.name} ${t.name} ÷ TS, same repetition: IOPS median ${median(paired).toFixed(3)} (${paired.map((x) => x.toFixed(2)).join(' ')}), CPU/IO median ${median(cpu).toFixed(3)}`);
    }
  }
}

function printDigestCost(arms: readonly TargetArm[], rows: readonly Row[], reps: number): void {
  for (const [plain, dg] of [
    ['4k-qd32', '4k-qd32-ddgst'],
    ['128k-qd16', '128k-qd16-ddgst'],
  ] as const) {
    const a = rows.find((r) => r.c.name === plain);
    const b = rows.find((r) => r.c.name === dg);
    if (a === undefined || b === undefined) continue;
    const cost = arms.map((t, k) => `${t.name} ${((1 - (b.best[k] as Side).iops / (a.best[k] as Side).iops) * 100).toFixed(1)}%`);
    console.log(`data digest cost (IOPS lost) ${plain}: ${cost.join(', ')}`);
    // 128 KiB runs on loopback are bimodal for every target here (the C one too: ~28k or ~50k IOPS from run to run),
    // so best-of-N IOPS can compare a slow-mode run with a fast-mode one; the target's CPU time per I/O is steadier.
    const cpuCost = arms.filter((t) => !t.polls).map((t) => {
      const k = arms.indexOf(t);
      const plainCpu = median((a.all[k] ?? []).map((x) => x.cpuPerIo));
      const dgCpu = median((b.all[k] ?? []).map((x) => x.cpuPerIo));
      return `${t.name} ${((dgCpu / plainCpu - 1) * 100).toFixed(1)}%`;
    });
    console.log(`data digest cost (target CPU per I/O, median of ${reps}) ${plain}: ${cpuCost.join(', ')}`);
  }
}

async function main(): Promise<void> {
  if (process.argv.includes('--server')) return tsServer();
  const cpu = arg('cpu') ?? '0';
  const want = arg('cases')?.split(',');
  // Imported here, not at the top: the TS target child (--server) runs this file and should load no harness code.
  const { parseCpuList } = await import('../harness/scenarios/placement.js');
  const o: Options = {
    seconds: Number(arg('seconds') ?? 2),
    reps: Number(arg('reps') ?? 1),
    cpu,
    targetCpus: parseCpuList(arg('target-cpu') ?? cpu),
    cases: want === undefined ? ALL_CASES : ALL_CASES.filter((c) => want.includes(c.name)),
    // Off by default: the client then skips recomputing data digests, so the digest cost shown is the target's alone.
    verify: process.argv.includes('--verify'),
    warmup: Number(arg('warmup') ?? 1),
  };
  const bins = buildBaseline(path.join(tmpdir(), 'nvme-tcp-ts-perf'));
  const arms: TargetArm[] = [];
  try {
    await startArms(o, bins, arms);
    const rows = await runCases(o, bins.client, arms);
    printTable(o, arms, rows);
    printRatios(arms, rows);
    printDigestCost(arms, rows, o.reps);
  } finally {
    for (const t of arms) await t.stop();
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) await main();
