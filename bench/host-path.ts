// Host-path benchmark (docs/performance.md, "Host path, first pass"): against the C target (bench/perf-c-baseline/
// target.c, pinned to CPU 1), with the host pinned to CPU 0, 4 KiB random reads at QD32 on one I/O queue, arms
// interleaved: (a) the C client, (b) `nvme-tcp bench`'s engine (harness/load) over our initiator, (c) a bare loop over
// the initiator's callback API (Namespace.submit), (d) a bare loop over the promise API (Namespace.read). Prints IOPS,
// ratio to C, host CPU %, the host's read/write system calls per I/O (engine arms: the kernel's share of the work), GC %
// of wall time and which side was CPU-bound. Not part of npm test.
//   npx tsx bench/host-path.ts [--seconds 3] [--reps 3] [--before DIR[,DIR...]] [--arms c,engine,loop-cb,loop-promise] [--prof DIR]
// --before DIR adds the engine and promise-loop arms from another checkout, or from each of a comma-separated list
// (same run, interleaved, the order rotating each rep); --prof DIR writes a V8 CPU profile of each Node host arm there.
// Arm names take options after a colon, comma-free, joined by '+': `engine:w2+q2+qd64+bs128k` runs the engine with
// io_workers 2, queues_per_hctx 2 (2 submitters' worth of queues on 1 hctx), iodepth 64, 128 KiB blocks (the io-worker
// goals of docs/performance.md); `c@ts` / `engine@ts` run against our own target (`nvme-tcp target`, RAM, pinned to
// CPU 1) instead of the C target, for the "TS initiator + TS target vs C + C" figure.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PerformanceObserver, performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { busiestThread, sampleThreads } from '../harness/load/threads.js';
import { arg } from './args.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..');
const NQN = 'nqn.2024-01.io.nvme-ts:bench';
const QD = 32;
const BS = 4096;
const NS_MIB = 256;

interface ArmResult {
  iops: number;
  cpuPct: number;
  /** User-mode share of cpuPct (system calls and the loopback TCP stack excluded). */
  userPct?: number;
  /** read/write-family system calls of the host process per I/O (/proc/self/io syscr + syscw; engine arms). */
  syscallsPerIo?: number;
  gcPct: number;
  /** Median and p99 completion latency (engine arms), µs. */
  p50Us?: number;
  p99Us?: number;
  /** Busiest thread of the host process, % of one CPU (engine arms; with io workers the busiest of all threads). */
  busiestPct?: number;
}

/** `engine:w2+q2+qd64+bs128k` → io workers, queues per hctx, depth, block size (defaults: 0, 1, QD, BS). */
interface ArmSpec {
  workers: number;
  qph: number;
  qd: number;
  bs: number;
}

function parseSpec(s: string | undefined): ArmSpec {
  const spec: ArmSpec = { workers: 0, qph: 1, qd: QD, bs: BS };
  for (const part of (s ?? '').split('+')) {
    if (part === '') continue;
    const m = /^(w|q|qd|bs)(\d+)(k?)$/.exec(part);
    if (m === null) throw new Error(`arm option "${part}": expected w<N>, q<N>, qd<N> or bs<N>k`);
    const n = Number(m[2]) * (m[3] === 'k' ? 1024 : 1);
    if (m[1] === 'w') spec.workers = n;
    else if (m[1] === 'q') spec.qph = n;
    else if (m[1] === 'qd') spec.qd = n;
    else spec.bs = n;
  }
  return spec;
}


// ---------------------------------------------------------------------------------------------
// Child side: one Node host arm, prints one JSON line.

async function child(armSpec: string, root: string, port: number, seconds: number): Promise<void> {
  const [arm, opts] = armSpec.split(':') as [string, string | undefined];
  const spec = parseSpec(opts);
  const { connect } = (await import(path.join(root, 'initiator/index.js'))) as typeof import('../initiator/index.js');
  const ctrl = await connect({
    traddr: '127.0.0.1',
    trsvcid: port,
    nqn: NQN,
    nr_io_queues: 1,
    queue_size: Math.max(128, spec.qd * 2),
    keep_alive_tmo: 30,
    ...(spec.qph > 1 ? { queues_per_hctx: spec.qph } : {}),
    ...(spec.workers > 0 ? { io_workers: spec.workers } : {}),
  });
  const ns = ctrl.namespace(1);
  const blocks = Number(ns.blocks);
  const per = BS / ns.blockSize;
  const slots = Math.floor(blocks / per) - 1;
  let out: ArmResult;
  if (arm === 'engine') {
    const load = (await import(path.join(root, 'harness/load/index.js'))) as typeof import('../harness/load/index.js');
    const nvme = (await import(path.join(root, 'harness/nvme.js'))) as typeof import('../harness/nvme.js');
    const bt = nvme.controllerBlockTarget(ctrl, 1);
    const job = `[r]\nrw=randread\nbs=${spec.bs}\niodepth=${spec.qd}\nramp_time=500ms\nruntime=${seconds}s\n`;
    collectStartupGarbage();
    // This tree's per-thread sampler (the checkout under test may predate it).
    const t0 = await sampleThreads();
    const s0 = syscalls();
    const w0 = performance.now();
    const r = await load.runJobs(bt, load.resolveJobs(load.parseFioJobFile(job), bt));
    const wall = performance.now() - w0;
    const s1 = syscalls();
    const t1 = await sampleThreads();
    out = {
      iops: r.totals.iops,
      cpuPct: r.cpu.percentOfCore,
      userPct: (r.cpu.userMs / r.wallMs) * 100,
      gcPct: ((r.gc?.totalMs ?? 0) / r.wallMs) * 100,
      p50Us: r.totals.latencyUs.p50,
      p99Us: r.totals.latencyUs.p99,
      // Over the whole job (the ramp included), so per I/O of the whole job: its I/Os are the rate times the wall.
      syscallsPerIo: (s1 - s0) / ((r.totals.iops * wall) / 1000),
      ...(t0 === undefined || t1 === undefined ? {} : { busiestPct: busiestThread(t0, t1, wall)?.percentOfCore ?? 0 }),
    };
  } else {
    let x = 0x9e3779b9;
    const nextLba = (): number => {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      return ((x >>> 0) % slots) * per;
    };
    let measuring = false;
    let ios = 0;
    let stop = false;
    const measure = async (): Promise<ArmResult> => {
      await new Promise((r) => setTimeout(r, 500));
      collectStartupGarbage();
      let gcMs = 0;
      const obs = new PerformanceObserver((l) => {
        for (const e of l.getEntries()) gcMs += e.duration;
      });
      obs.observe({ entryTypes: ['gc'] });
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      measuring = true;
      await new Promise((r) => setTimeout(r, seconds * 1000));
      measuring = false;
      const wall = performance.now() - t0;
      const cpu = process.cpuUsage(cpu0);
      for (const e of obs.takeRecords()) gcMs += e.duration;
      obs.disconnect();
      stop = true;
      return { iops: Math.round((ios / wall) * 1000), cpuPct: ((cpu.user + cpu.system) / 1000 / wall) * 100, userPct: (cpu.user / 1000 / wall) * 100, gcPct: (gcMs / wall) * 100 };
    };
    if (arm === 'loop-cb') {
      if (typeof (ns as { submit?: unknown }).submit !== 'function') throw new Error('this checkout has no Namespace.submit');
      let live = QD;
      let finished: () => void = () => undefined;
      const allDone = new Promise<void>((r) => (finished = r));
      const reqs = Array.from({ length: QD }, () => {
        const req = {
          write: false,
          lba: 0,
          blocks: per,
          buf: Buffer.allocUnsafeSlow(BS),
          ioDone(err: Error | undefined): void {
            if (err !== undefined) throw err;
            if (measuring) ios++;
            if (stop) {
              if (--live === 0) finished();
              return;
            }
            req.lba = nextLba();
            ns.submit(req);
          },
        };
        return req;
      });
      for (const r of reqs) {
        r.lba = nextLba();
        ns.submit(r);
      }
      out = await measure();
      await allDone;
    } else {
      // A checkout from before LBAs became numbers (issue #31) takes a bigint; its Namespace rejects a number.
      const lbaOf = (await ns.read(0, per).then(
        () => false,
        () => true,
      ))
        ? (l: number): number => BigInt(l) as unknown as number
        : (l: number): number => l;
      const worker = async (): Promise<void> => {
        const buf = Buffer.allocUnsafeSlow(BS);
        while (!stop) {
          await ns.read(lbaOf(nextLba()), per, buf);
          if (measuring) ios++;
        }
      };
      const ws = Promise.all(Array.from({ length: QD }, worker));
      out = await measure();
      await ws;
    }
  }
  await ctrl.disconnect();
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

/**
 * A full collection before an arm's window, so its "GC %" is the data path's. Without it the window catches the one
 * scavenge that promotes what module loading and compiling left in new space (10–45 ms on this machine, the whole GC
 * share at QD1 and most of it at QD32): it then measures the size of the code loaded, and when that scavenge happens
 * to fall, not what the I/O path allocates. (Measured for issue #31, docs/performance-journal.md.)
 */
function collectStartupGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

// ---------------------------------------------------------------------------------------------
// Parent side

/** read- and write-family system calls of this process so far (/proc/self/io). */
function syscalls(): number {
  const io = readFileSync('/proc/self/io', 'utf8');
  return Number(/syscr: (\d+)/.exec(io)?.[1] ?? NaN) + Number(/syscw: (\d+)/.exec(io)?.[1] ?? NaN);
}

function procCpuMs(pid: number): number {
  const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args.join(' ')} exited ${code}`))));
  });
}

async function main(): Promise<void> {
  const seconds = Number(arg('seconds') ?? 3);
  const reps = Number(arg('reps') ?? 3);
  // --before's checkouts, comma-separated: "(before)" for the first, "(before2)"... after it; a second checkout of this
  // tree among them is the A/A arm (what a checkout alone reads as: docs/performance.md, "A/A arms").
  const befores = (arg('before')?.split(',') ?? []).map((d) => path.resolve(d));
  const beforeTag = (n: number): string => `(before${n === 0 ? '' : n + 1})`;
  const prof = arg('prof');
  const armNames = (arg('arms') ?? 'c,engine,loop-cb,loop-promise').split(',');
  const bin = path.join(tmpdir(), 'nvme-tcp-ts-host-path');
  mkdirSync(bin, { recursive: true });
  for (const src of ['target', 'client']) {
    const r = spawnSync('cc', ['-O2', '-msse4.2', '-o', path.join(bin, src), path.join(HERE, 'perf-c-baseline', `${src}.c`)], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error(`cc ${src}.c failed`);
  }
  const target = spawn('taskset', ['-c', '1', path.join(bin, 'target'), '0', String(NS_MIB)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve) => {
    let b = '';
    target.stdout.on('data', (d: Buffer) => {
      b += d.toString();
      const m = /PORT (\d+)/.exec(b);
      if (m !== null) resolve(Number(m[1]));
    });
  });
  const cTarget = { pid: target.pid as number, port };
  // Our target, started only when an arm asks for it (`@ts`), on the same CPU as the C target.
  let tsTarget: { pid: number; port: number; stop(): Promise<void> } | undefined;
  if (armNames.some((a) => a.endsWith('@ts'))) {
    const nvme = (await import('../harness/nvme.js')) as typeof import('../harness/nvme.js');
    const t = await nvme.startChildTarget({ listen: '127.0.0.1:0', nqn: NQN, ram: `${NS_MIB}M`, prefix: ['taskset', '-c', '1'] });
    tsTarget = { pid: t.pid, port: t.port, stop: t.stop };
  }
  interface Arm {
    name: string;
    tpid: number;
    go(): Promise<ArmResult>;
  }
  const nodeArm = (name: string, arm: string, root: string, t: { pid: number; port: number }): Arm => ({
    name,
    tpid: t.pid,
    go: async () => {
      const profArgs = prof === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', path.resolve(prof), '--cpu-prof-name', `${name.replace(/\W+/g, '_')}-${Date.now()}.cpuprofile`];
      const out = await run('taskset', ['-c', '0', process.execPath, '--expose-gc', ...profArgs, '--import', 'tsx', fileURLToPath(import.meta.url), '--child', arm, '--root', root, '--port', String(t.port), '--seconds', String(seconds)]);
      return JSON.parse(out.trim().split('\n').pop() as string) as ArmResult;
    },
  });
  const arms: Arm[] = [];
  for (const full of armNames) {
    const onTs = full.endsWith('@ts');
    const a = onTs ? full.slice(0, -3) : full;
    const t = onTs ? (tsTarget as { pid: number; port: number }) : cTarget;
    if (a === 'c') {
      arms.push({
        name: onTs ? 'C client @ TS target' : 'C client',
        tpid: t.pid,
        go: async () => {
          // `times` prints the shell's children's CPU (user, sys) after the client exits.
          const out = await run('bash', ['-c', `taskset -c 0 ${path.join(bin, 'client')} ${t.port} ${QD} ${BS} ${seconds} 0 0 ${NS_MIB << 20}; times`]);
          const lines = out.trim().split('\n');
          const j = JSON.parse(lines.find((l) => l.startsWith('{')) as string) as { iops: number };
          const tm = /(\d+)m([\d.]+)s (\d+)m([\d.]+)s/.exec(lines[lines.length - 1] as string);
          const cpuS = tm === null ? NaN : Number(tm[1]) * 60 + Number(tm[2]) + Number(tm[3]) * 60 + Number(tm[4]);
          const userS = tm === null ? NaN : Number(tm[1]) * 60 + Number(tm[2]);
          return { iops: j.iops, cpuPct: (cpuS / seconds) * 100, userPct: (userS / seconds) * 100, gcPct: 0 };
        },
      });
    } else {
      arms.push(nodeArm(full, a, ROOT, t));
      if (!a.startsWith('loop-cb')) for (const [n, dir] of befores.entries()) arms.push(nodeArm(`${full} ${beforeTag(n)}`, a, dir, t));
    }
  }
  const rows = new Map<string, { r: ArmResult; tcpu: number }[]>();
  try {
    for (let rep = 0; rep < reps; rep++) {
      // The order rotates each rep: an arm right after a given one reads a few per cent apart (perf-target.ts).
      for (let j = 0; j < arms.length; j++) {
        const a = arms[(j + rep) % arms.length] as (typeof arms)[number];
        const c0 = procCpuMs(a.tpid);
        const t0 = performance.now();
        const r = await a.go();
        const tcpu = ((procCpuMs(a.tpid) - c0) / (performance.now() - t0)) * 100;
        rows.set(a.name, [...(rows.get(a.name) ?? []), { r, tcpu }]);
        process.stderr.write(`rep ${rep + 1} ${a.name}: ${r.iops} IOPS, host ${r.cpuPct.toFixed(0)} %, GC ${r.gcPct.toFixed(1)} %, target ${tcpu.toFixed(0)} %\n`);
      }
    }
  } finally {
    target.kill();
    await tsTarget?.stop();
  }
  const med = (xs: number[]): number => [...xs].sort((p, q) => p - q)[Math.floor(xs.length / 2)] as number;
  const cIops = med((rows.get('C client') ?? []).map((x) => x.r.iops));
  const lines = [
    `# host path: target (C, or ours for @ts arms) on CPU 1, host on CPU 0, randread (4 KiB QD${QD} unless the arm says), 1 hctx, ${seconds} s × ${reps} reps interleaved (median, [min–max])`,
    '',
    // Host CPU µs per I/O and GC as a share of host CPU hold up better than IOPS on a machine shared with other load.
    '| arm | IOPS | ÷ C client | host CPU % | host CPU µs/IO | host user µs/IO | host syscalls/IO | busiest host thread % | p50 µs | p99 µs | GC % of wall | GC % of host CPU | target CPU % | bound |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const [name, xs] of rows) {
    const iops = xs.map((x) => x.r.iops);
    const m = med(iops);
    const cpu = med(xs.map((x) => x.r.cpuPct));
    const tcpu = med(xs.map((x) => x.tcpu));
    const busy = xs.every((x) => x.r.busiestPct !== undefined) ? med(xs.map((x) => x.r.busiestPct as number)) : undefined;
    const opt = (f: (r: ArmResult) => number | undefined, digits = 0): string => (xs.every((x) => f(x.r) !== undefined) ? med(xs.map((x) => f(x.r) as number)).toFixed(digits) : '–');
    // Bound as in harness reports: the busiest host thread above 90 % of a CPU, or the host process above 90 % of
    // the one CPU every host arm is pinned to (io workers share it).
    const hostBound = (busy ?? 0) > 90 || cpu > 90;
    const bound = hostBound && tcpu > 90 ? 'both' : hostBound ? 'host' : tcpu > 90 ? 'target' : 'neither';
    lines.push(
      `| ${name} | ${Math.round(m / 1000)}k [${Math.round(Math.min(...iops) / 1000)}–${Math.round(Math.max(...iops) / 1000)}k] | ${Number.isFinite(cIops) ? (m / cIops).toFixed(2) : '–'} | ${cpu.toFixed(0)} | ${med(xs.map((x) => (x.r.cpuPct * 1e4) / x.r.iops)).toFixed(2)} | ${opt((r) => (r.userPct === undefined ? undefined : (r.userPct * 1e4) / r.iops), 2)} | ${opt((r) => r.syscallsPerIo, 3)} | ${busy === undefined ? '–' : busy.toFixed(0)} | ${opt((r) => r.p50Us)} | ${opt((r) => r.p99Us)} | ${med(xs.map((x) => x.r.gcPct)).toFixed(1)} | ${med(xs.map((x) => (x.r.cpuPct > 0 ? (x.r.gcPct / x.r.cpuPct) * 100 : 0))).toFixed(1)} | ${tcpu.toFixed(0)} | ${bound} |`,
    );
  }
  // Paired by rep (each after-arm ran next to its before-arm): the median of the per-rep ratios cancels the drift of a
  // shared machine better than a ratio of medians.
  for (const [name, xs] of rows) {
    for (const n of befores.keys()) {
      const bs = rows.get(`${name} ${beforeTag(n)}`);
      if (bs === undefined) continue;
      const per = (r: ArmResult, pct: number | undefined): number => ((pct ?? NaN) * 1e4) / r.iops;
      const ratio = (f: (r: ArmResult) => number): string => {
        const rs = xs.map((x, i) => f(x.r) / f((bs[i] as { r: ArmResult }).r)).filter(Number.isFinite);
        return rs.length === 0 ? '–' : `${med(rs).toFixed(3)} [${Math.min(...rs).toFixed(3)}–${Math.max(...rs).toFixed(3)}]`;
      };
      lines.push('', `${name} ÷ ${beforeTag(n).slice(1, -1)} (${befores[n]}), paired by rep: IOPS ${ratio((r) => r.iops)}, host CPU µs/IO ${ratio((r) => per(r, r.cpuPct))}, host user µs/IO ${ratio((r) => per(r, r.userPct))}`);
    }
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

if (process.argv.includes('--child')) await child(arg('child') as string, arg('root') as string, Number(arg('port')), Number(arg('seconds')));
else await main();
