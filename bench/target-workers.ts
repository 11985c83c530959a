// Target workers (target/workers) same-run: two C clients (bench/perf-c-baseline/client.c: two controllers, one I/O
// queue each, 4 KiB random reads at QD32) against the TS target with workers 1 (one process), workers 2 placement
// single (every I/O queue on worker 0: the Linux target's one-CPU finding) and workers 2 placement queue (spread).
// Arms are interleaved per repetition so neighbour load hits all alike; each target's processes are pinned (worker i
// to CPU i mod CPUs, the primary and the one-process target to CPU 0); CPU per I/O sums every target process
// (/proc/<pid>/stat) and the clients' own CPU shows which side was bound.
// With RAM namespaces a fourth arm runs workers 2 `queue` with the workers' read caches off (workerCache false: a pread
// per read), and --writes adds 4 KiB random writes through our initiator (QD1 latency, 2 x QD16 rate), where a write on
// workers waits for the other workers to drop their cached copies.
//   [NVME_BENCH_BACKEND=null|file] npx tsx bench/target-workers.ts [--seconds 3] [--reps 2] [--qd 32] [--connect-only]
//     [--writes]
import { Buffer } from 'node:buffer';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { availableParallelism, cpus as osCpus, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Child, buildBaseline, fillNamespace, settleClient } from './perf-target.js';
import { arg } from './args.js';

const SUBNQN = 'nqn.2024-01.io.nvme-ts:bench';
const NS_BYTES = Number(process.env.NVME_BENCH_NS_MIB ?? 64) * 1024 * 1024;
/**
 * NVME_BENCH_BACKEND=null: no data (separates the data plane from the RAM namespace's cost); =file: a file namespace
 * in the temp directory (the same backend in one process and in workers, so the arms differ only in the data plane).
 */
const BACKEND = process.env.NVME_BENCH_BACKEND === 'null' ? ('null' as const) : process.env.NVME_BENCH_BACKEND === 'file' ? ('file' as const) : ('ram' as const);

/** utime+stime in µs (clock ticks of 10 ms). */
function cpuUs(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
    return (Number(rest[11]) + Number(rest[12])) * 10_000;
  } catch {
    return 0;
  }
}

async function server(workers: number, placement: string, cache: boolean): Promise<void> {
  const { TargetService } = await import('../target/service/index.js');
  const svc = new TargetService({ workers, placement: placement as 'queue' });
  const file = path.join(tmpdir(), `nvme-tcp-ts-bench-${process.pid}.img`);
  const backend = BACKEND === 'file' ? { type: 'file' as const, path: file, size: NS_BYTES } : BACKEND === 'ram' ? { type: 'ram' as const, size: NS_BYTES, workerCache: cache } : { type: BACKEND, size: NS_BYTES };
  process.once('exit', () => rmSync(file, { force: true }));
  await svc.apply({ ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend }] }] });
  const port = svc.boundPorts()[0]?.port ?? 0;
  if (BACKEND === 'null') return ready(svc, port);
  // Real data everywhere (as perf-target.ts does), written through our initiator.
  await fillNamespace(port, SUBNQN, NS_BYTES);
  ready(svc, port);
}

function ready(svc: import('../target/service/index.js').TargetService, port: number): void {
  // Every CPU of the machine: this process runs under `taskset -c 0`, so availableParallelism() would say 1 here and
  // put every worker on CPU 0 (what the first two passes measured by mistake).
  const cpus = osCpus().length;
  for (const w of svc.workers()) if (w.pid !== undefined) spawnSync('taskset', ['-a', '-p', '-c', String(w.index % cpus), String(w.pid)], { stdio: 'ignore' });
  process.stdout.write(`PORT ${port}\n`);
  process.stdout.write(`PIDS ${[process.pid, ...svc.workers().map((w) => w.pid)].join(',')}\n`);
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (line: string) => {
    for (const cmd of line.split('\n')) {
      if (cmd === 'workers') process.stdout.write(`WORKERS ${JSON.stringify(svc.workers().map((w) => ({ i: w.index, q: w.queues, ios: w.ios })))}\n`);
      if (cmd === 'quit') void svc.stop().then(() => process.exit(0));
    }
  });
}

interface ClientOut {
  ios: number;
  iops: number;
  p50us: number;
  p99us: number;
}

function client(bin: string, port: number, qd: number, seconds: number): { done: Promise<ClientOut>; pid: number } {
  const p = spawn(bin, [String(port), String(qd), '4096', String(seconds), '0', '0', String(NS_BYTES), '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  p.stdout.setEncoding('utf8');
  p.stdout.on('data', (d: string) => (out += d));
  const done = new Promise<ClientOut>((resolve, reject) => p.on('close', (code) => settleClient(code, out, resolve, reject)));
  return { done, pid: p.pid ?? 0 };
}

async function main(): Promise<void> {
  const si = process.argv.indexOf('--server');
  if (si >= 0) return server(Number(process.argv[si + 1]), process.argv[si + 2] ?? 'queue', process.argv[si + 3] !== 'nocache');
  const seconds = Number(arg('seconds') ?? 3);
  const connectOnly = process.argv.includes('--connect-only');
  const reps = Number(arg('reps') ?? 2);
  const qd = Number(arg('qd') ?? 32);
  const bins = buildBaseline(path.join(tmpdir(), 'nvme-tcp-ts-perf'));
  const self = fileURLToPath(import.meta.url);
  const arms = [
    { name: 'workers 1', args: ['1', 'queue'] },
    { name: 'workers 2 single', args: ['2', 'single'] },
    { name: 'workers 2 queue', args: ['2', 'queue'] },
    ...(BACKEND === 'ram' ? [{ name: 'w2 queue nocache', args: ['2', 'queue', 'nocache'] }] : []),
  ];
  const targets: Array<{ name: string; child: Child; port: number; pids: number[] }> = [];
  try {
    for (const a of arms) {
      const child = new Child('taskset', ['-c', '0', process.execPath, ...process.execArgv, self, '--server', ...a.args]);
      const port = await child.port();
      const pids = (await child.line()).slice(5).split(',').map(Number);
      targets.push({ name: a.name, child, port, pids });
    }
    const runs = new Map<string, Array<{ iops: number; cpuPerIo: number; clientCpuPerIo: number; targetCpuPct: number; clientCpuPct: number; p99: number }>>();
    for (let r = 0; r < (connectOnly ? 0 : reps); r++) {
      for (const t of targets) {
        const cs = [client(bins.client, t.port, qd, seconds), client(bins.client, t.port, qd, seconds)];
        // CPU of target and clients over the middle of the run (the clients are gone before they could be read at the end).
        const sum = (pids: number[]): number => pids.reduce((n, p) => n + cpuUs(p), 0);
        await new Promise((res) => setTimeout(res, 300));
        const t0 = performance.now();
        const tb = sum(t.pids);
        const cb = sum(cs.map((c) => c.pid));
        await new Promise((res) => setTimeout(res, seconds * 1000 - 600));
        const wall = (performance.now() - t0) * 1000;
        const tUsed = sum(t.pids) - tb;
        const cUsed = sum(cs.map((c) => c.pid)) - cb;
        const outs = await Promise.all(cs.map((c) => c.done));
        const iops = outs.reduce((n, o) => n + o.iops, 0);
        const windowIos = (iops * wall) / 1e6;
        const row = { iops, cpuPerIo: tUsed / windowIos, clientCpuPerIo: cUsed / windowIos, targetCpuPct: (tUsed / wall) * 100, clientCpuPct: (cUsed / wall) * 100, p99: Math.max(...outs.map((o) => o.p99us)) };
        const list = runs.get(t.name) ?? [];
        list.push(row);
        runs.set(t.name, list);
      }
    }
    const best = (name: string) => (runs.get(name) ?? []).reduce((b, x) => (x.iops > b.iops ? x : b));
    if (connectOnly) {
      await connectLatency(targets);
      return;
    }
    if (process.argv.includes('--writes')) await writeCost(targets);
    const base = best('workers 1');
    process.stdout.write(`\n2 controllers x 4 KiB randread QD${qd}, C clients, ${seconds} s x ${reps} interleaved, best of reps (${availableParallelism()} CPUs)\n`);
    process.stdout.write('arm                 IOPS     ratio   target CPU/IO µs  (ratio)  target CPU %  client CPU %  p99 µs\n');
    for (const a of arms) {
      const b = best(a.name);
      process.stdout.write(
        `${a.name.padEnd(18)} ${Math.round(b.iops).toString().padStart(8)}  ${(b.iops / base.iops).toFixed(2).padStart(5)}x  ${b.cpuPerIo.toFixed(1).padStart(12)}   ${(b.cpuPerIo / base.cpuPerIo).toFixed(2).padStart(5)}x  ${b.targetCpuPct.toFixed(0).padStart(10)}  ${b.clientCpuPct.toFixed(0).padStart(12)}    ${Math.round(b.p99)}\n`,
      );
    }
    for (const t of targets) process.stdout.write(`${t.name}: ${(await t.child.ask('workers')).slice(8)}\n`);
    await connectLatency(targets);
  } finally {
    for (const t of targets) {
      t.child.proc.stdin?.write('quit\n');
    }
    // A graceful stop unlinks the shared-RAM files in /dev/shm; SIGKILL only for a target that hangs.
    await Promise.all(
      targets.map(
        (t) =>
          new Promise<void>((resolve) => {
            if (t.child.proc.exitCode !== null || t.child.proc.signalCode !== null) return resolve();
            const timer = setTimeout(() => {
              t.child.proc.kill('SIGKILL');
              resolve();
            }, 10_000);
            t.child.proc.once('exit', () => {
              clearTimeout(timer);
              resolve();
            });
          }),
      ),
    );
  }
}

/**
 * 4 KiB random writes through our initiator (in this process, so the rate is host-bound; latency is the figure), arms
 * interleaved per round, 5 rounds: QD1 p50/p99 over 400 writes alternating the two I/O queues (two workers under
 * `queue`), and the rate of 2 queues x QD16 over 1 s. 512 of the blocks written are read back (on the other queue).
 */
async function writeCost(targets: Array<{ name: string; port: number }>): Promise<void> {
  const { connect } = await import('../initiator/index.js');
  const rows = new Map<string, { p50: number[]; p99: number[]; rate: number[] }>();
  for (const t of targets) rows.set(t.name, { p50: [], p99: [], rate: [] });
  const blocks = NS_BYTES / 4096;
  for (let round = 0; round < 5; round++) {
    for (const t of targets) {
      const row = rows.get(t.name) as { p50: number[]; p99: number[]; rate: number[] };
      const h = await connect({ traddr: '127.0.0.1', trsvcid: t.port, nqn: SUBNQN, nr_io_queues: 2, queue_size: 32 });
      const ns = h.namespace(1);
      const spb = 4096 / ns.blockSize;
      const lat: number[] = [];
      const written = new Map<number, number>();
      const data = (b: number, v: number): Buffer => Buffer.alloc(4096, (b * 7 + v) & 0xff);
      for (let i = 0; i < 400; i++) {
        const b = (i * 2654435761) % blocks;
        const t0 = performance.now();
        await ns.write(b * spb, data(b, round + i), { hctx: i % 2 });
        lat.push((performance.now() - t0) * 1000);
        written.set(b, round + i);
      }
      lat.sort((x, y) => x - y);
      row.p50.push(lat[200] as number);
      row.p99.push(lat[396] as number);
      let n = 0;
      const end = performance.now() + 1000;
      const loop = async (hctx: number, k: number): Promise<void> => {
        let j = k;
        while (performance.now() < end) {
          const b = (j * 40503 + hctx * 7919) % blocks;
          j += 17;
          await ns.write(b * spb, data(b, 99), { hctx });
          written.set(b, 99);
          n++;
        }
      };
      await Promise.all(Array.from({ length: 32 }, (_, k) => loop(k % 2, k)));
      row.rate.push(n);
      let k = 0;
      for (const [b, v] of written) {
        if (k++ >= 512) break;
        const got = await ns.read(b * spb, spb, undefined, { hctx: (b & 1) ^ 1 });
        if (!got.equals(data(b, v))) throw new Error(`${t.name}: block ${b} reads back wrong`);
      }
      await h.disconnect();
    }
  }
  const med = (a: number[]): number => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)] as number;
  process.stdout.write('\n4 KiB random writes (our initiator, host-bound rate), median of 5 interleaved rounds: QD1 p50 | p99 µs | 2 x QD16 writes/s\n');
  for (const [name, r] of rows) process.stdout.write(`${name.padEnd(18)} ${med(r.p50).toFixed(0).padStart(8)} ${med(r.p99).toFixed(0).padStart(8)} ${med(r.rate).toFixed(0).padStart(10)}\n`);
}

/**
 * Connect latency with the hand-off, arms interleaved per round, median of 9 (our initiator, in this process):
 * connect() of admin + 1 and admin + 8 I/O queues (parallel), and the first 4 KiB read on the last I/O queue right
 * after connect() returned — with workers that read waits until the worker adopted the queue's socket, so it is the
 * part of the hand-off a host can see (its Connect response comes from the primary before the hand-off).
 */
async function connectLatency(targets: Array<{ name: string; port: number }>): Promise<void> {
  const { connect } = await import('../initiator/index.js');
  const rows = new Map<string, { c1: number[]; c8: number[]; first: number[] }>();
  for (const t of targets) rows.set(t.name, { c1: [], c8: [], first: [] });
  for (let i = 0; i < 9; i++) {
    for (const t of targets) {
      const row = rows.get(t.name) as { c1: number[]; c8: number[]; first: number[] };
      for (const n of [1, 8]) {
        const t0 = performance.now();
        const h = await connect({ traddr: '127.0.0.1', trsvcid: t.port, nqn: SUBNQN, nr_io_queues: n });
        const t1 = performance.now();
        await h.namespace(1).read(0, 8, undefined, { hctx: n - 1 });
        const t2 = performance.now();
        (n === 1 ? row.c1 : row.c8).push(t1 - t0);
        if (n === 8) row.first.push(t2 - t1);
        await h.disconnect();
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  }
  const med = (a: number[]): string => ([...a].sort((x, y) => x - y)[Math.floor(a.length / 2)] as number).toFixed(2);
  process.stdout.write('\nconnect latency, median of 9 interleaved, ms: admin+1 I/O queue | admin+8 I/O queues (parallel) | first read after connect (8 queues)\n');
  for (const [name, r] of rows) process.stdout.write(`${name.padEnd(18)} ${med(r.c1).padStart(8)} ${med(r.c8).padStart(8)} ${med(r.first).padStart(8)}\n`);
}

void main();
