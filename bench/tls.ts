// TLS 1.3 cost (TP 8011): our initiator against our target in a child process, a cleartext port and a TLS-required
// port in the same run, both pinned to CPU 0 when taskset exists (docs/performance.md). Prints IOPS for 4 KiB random
// reads at QD32 and 128 KiB sequential reads at QD16 on each port, alternating, and the connect time of one queue and
// of 64 I/O queues connected in parallel, cleartext vs TLS.
//   npx tsx bench/tls.ts [--seconds 3]
import { startServeChild } from './serve-child.js';
import { Buffer } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import { connect } from '../initiator/index.js';
import { formatTlsKey } from '../protocol/tls/index.js';

const NQN = 'nqn.2024-01.io.bench:tls';
const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:7e57c0de-0000-4000-8000-00000000b7e5';

async function serve(key: string): Promise<void> {
  const { TargetService } = await import('../target/index.js');
  const t = new TargetService();
  await t.apply({
    ports: [
      { id: 1, addr: '127.0.0.1', port: 0 },
      { id: 2, addr: '127.0.0.1', port: 0, tls: 'required' },
    ],
    subsystems: [{ nqn: NQN, maxIoQueues: 128, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '256M' } }] }],
    hosts: [{ nqn: HOSTNQN, tlsKey: key }],
  });
  const [a, b] = t.boundPorts();
  process.stdout.write(`${JSON.stringify({ clear: a?.port, tls: b?.port })}\n`);
  process.stdin.resume();
  process.stdin.on('end', () => void t.stop().then(() => process.exit(0)));
}

async function run(): Promise<void> {
  const secIdx = process.argv.indexOf('--seconds');
  const seconds = secIdx > 0 ? Number(process.argv[secIdx + 1]) : 3;
  const key = formatTlsKey(1, randomBytes(32));
  const { child, hello: ports, pinned } = await startServeChild<{ clear: number; tls: number }>(import.meta.url, [key]);
  const out: string[] = [`# TLS bench (${pinned}; ${seconds} s per point; RAM namespace; 1 I/O queue; cleartext and TLS alternate)`, '', '| workload | QD | cleartext IOPS | TLS IOPS | TLS / cleartext |', '|---|---|---|---|---|'];
  const opts = (tls: boolean, extra: Record<string, unknown> = {}) => ({
    traddr: '127.0.0.1',
    trsvcid: tls ? ports.tls : ports.clear,
    nqn: NQN,
    hostnqn: HOSTNQN,
    duplicate_connect: true,
    ...(tls ? { tls_key: key } : {}),
    ...extra,
  });
  try {
    const clear = await connect(opts(false, { nr_io_queues: 1, queue_size: 128 }));
    const tls = await connect(opts(true, { nr_io_queues: 1, queue_size: 128 }));
    for (const [name, bs, qd, seq] of [
      ['4 KiB random read', 4096, 32, false],
      ['128 KiB sequential read', 131072, 16, true],
    ] as const) {
      const iops: Record<'clear' | 'tls', number[]> = { clear: [], tls: [] };
      // Two rounds each, alternating, so drift on a shared machine hits both sides alike.
      for (const round of [0, 1]) {
        for (const side of round === 0 ? (['clear', 'tls'] as const) : (['tls', 'clear'] as const)) {
          const ns = (side === 'clear' ? clear : tls).namespace(1);
          const per = bs / ns.blockSize;
          const blocks = Number(ns.blocks);
          let ios = 0;
          let next = 0;
          const end = performance.now() + (seconds * 1000) / 2;
          const worker = async (): Promise<void> => {
            const buf = Buffer.allocUnsafe(bs);
            while (performance.now() < end) {
              const lba = seq ? (next++ * per) % (blocks - per) : Math.floor(Math.random() * (blocks / per - 1)) * per;
              await ns.read(lba, per, buf);
              ios++;
            }
          };
          await Promise.all(Array.from({ length: qd }, worker));
          iops[side].push(ios / (seconds / 2));
        }
      }
      const c = iops.clear.reduce((a, b) => a + b, 0) / 2;
      const t = iops.tls.reduce((a, b) => a + b, 0) / 2;
      out.push(`| ${name} | ${qd} | ${Math.round(c).toLocaleString('en-US')} | ${Math.round(t).toLocaleString('en-US')} | ${(t / c).toFixed(2)} |`);
    }
    await clear.disconnect();
    await tls.disconnect();

    // One untimed connect per side first, so neither pays for first-use work (module loading, JIT) in the table.
    for (const side of [false, true]) await (await connect(opts(side, { nr_io_queues: 1, queue_size: 16 }))).disconnect();
    out.push('', '| connect | cleartext ms | TLS ms |', '|---|---|---|');
    for (const [label, n] of [['1 I/O queue (admin + 1)', 1], ['64 I/O queues, parallel', 64]] as const) {
      const ms: number[] = [];
      for (const side of [false, true]) {
        const t0 = performance.now();
        const c = await connect(opts(side, { nr_io_queues: n, queue_size: 16 }));
        ms.push(performance.now() - t0);
        if (c.ioQueueCount !== n) throw new Error(`expected ${n} I/O queues, got ${c.ioQueueCount}`);
        await c.disconnect();
      }
      out.push(`| ${label} | ${(ms[0] as number).toFixed(1)} | ${(ms[1] as number).toFixed(1)} |`);
    }
  } finally {
    child.stdin?.end();
  }
  process.stdout.write(`${out.join('\n')}\n`);
}

if (process.argv.includes('--serve')) await serve(process.argv[process.argv.indexOf('--serve') + 1] as string);
else await run();
