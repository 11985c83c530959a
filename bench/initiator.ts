// Initiator benchmark: our initiator against our target in a child process, both pinned to CPU 0 (taskset -c 0, see
// docs/performance.md, Benchmarks: unpinned runs on this 2-vCPU machine are bimodal). Prints IOPS and p50/p99 for 4 KiB
// random reads at QD 1/32/128 and 128 KiB sequential reads at QD16, and the serial/parallel connect-time ratio for 64
// I/O queues with 1 ms of connect latency injected at the target.
//   npx tsx bench/initiator.ts [--seconds 3]
import { startServeChild } from './serve-child.js';
import { Buffer } from 'node:buffer';
import { connect } from '../initiator/index.js';

const NQN = 'nqn.2024-01.io.bench:initiator';
const SLOW_NQN = 'nqn.2024-01.io.bench:slow-connect';

async function serve(): Promise<void> {
  const { TargetService } = await import('../target/index.js');
  const t = new TargetService();
  const p = await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 });
  await t.addSubsystem({ nqn: NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '256M' } }] });
  await t.addSubsystem({ nqn: SLOW_NQN, maxIoQueues: 128, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }], faults: { connectLatencyMs: 1 } });
  process.stdout.write(`${JSON.stringify({ port: p.port })}\n`);
  process.stdin.resume();
  process.stdin.on('end', () => void t.stop().then(() => process.exit(0)));
}

function pct(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0;
}

async function run(): Promise<void> {
  const secIdx = process.argv.indexOf('--seconds');
  const seconds = secIdx > 0 ? Number(process.argv[secIdx + 1]) : 3;
  const { child, hello, pinned } = await startServeChild<{ port: number }>(import.meta.url);
  const port = hello.port;
  const results: string[] = [`# initiator bench (${pinned}; ${seconds} s per point; RAM namespace; 1 I/O queue)`, '', '| workload | QD | IOPS | MB/s | p50 µs | p99 µs |', '|---|---|---|---|---|---|'];
  try {
    const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, nr_io_queues: 1, queue_size: 128, keep_alive_tmo: 30 });
    const ns = c.namespace(1);
    const blocks = Number(ns.blocks);
    for (const [name, bs, qd, seq] of [
      ['4 KiB random read', 4096, 1, false],
      ['4 KiB random read', 4096, 32, false],
      ['4 KiB random read', 4096, 128, false],
      ['128 KiB sequential read', 131072, 16, true],
    ] as const) {
      const per = bs / ns.blockSize;
      const lat: number[] = [];
      let ios = 0;
      let nextSeq = 0;
      const end = performance.now() + seconds * 1000;
      const worker = async (): Promise<void> => {
        const buf = Buffer.allocUnsafe(bs);
        while (performance.now() < end) {
          const lba = seq ? (nextSeq++ * per) % (blocks - per) : Math.floor(Math.random() * (blocks / per - 1)) * per;
          const t0 = performance.now();
          await ns.read(lba, per, buf);
          lat.push(performance.now() - t0);
          ios++;
        }
      };
      await Promise.all(Array.from({ length: qd }, worker));
      const sorted = Float64Array.from(lat).sort();
      const iops = ios / seconds;
      results.push(`| ${name} | ${qd} | ${Math.round(iops).toLocaleString('en-US')} | ${((iops * bs) / 1e6).toFixed(0)} | ${(pct(sorted, 50) * 1000).toFixed(0)} | ${(pct(sorted, 99) * 1000).toFixed(0)} |`);
    }
    await c.disconnect();

    const times: Record<string, number> = {};
    for (const [label, conc] of [
      ['serial (connect_concurrency 1, as Linux)', 1],
      ['parallel (default: all at once)', undefined],
    ] as const) {
      const t0 = performance.now();
      const s = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: SLOW_NQN, nr_io_queues: 64, queue_size: 16, duplicate_connect: true, ...(conc !== undefined ? { connect_concurrency: conc } : {}) });
      times[label] = performance.now() - t0;
      if (s.ioQueueCount !== 64) throw new Error(`expected 64 I/O queues, got ${s.ioQueueCount}`);
      await s.disconnect();
    }
    const [serLabel, parLabel] = Object.keys(times) as [string, string];
    const ser = times[serLabel] as number;
    const par = times[parLabel] as number;
    results.push('', '| connect, 64 I/O queues, 1 ms connect latency | ms |', '|---|---|', `| ${serLabel} | ${ser.toFixed(0)} |`, `| ${parLabel} | ${par.toFixed(0)} |`, `| ratio serial / parallel | ${(ser / par).toFixed(1)}× |`);
  } finally {
    child.stdin?.end();
  }
  process.stdout.write(`${results.join('\n')}\n`);
}

if (process.argv.includes('--serve')) await serve();
else await run();
