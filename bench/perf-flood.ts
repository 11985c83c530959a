// Connection flood vs an existing controller: QD1 4 KiB read latency (p50/p99) of a live I/O queue without and with
// a flood of short-lived connections (default 500/s; half send an ICReq first, half drop right after connecting).
// Target and the QD1 client (bench/perf-c-baseline/client.c) share CPU 0 as in perf-target.ts; the flooder runs on
// CPU 1, standing in for other machines, so only the target's extra work shows in the ratio.
//   npx tsx bench/perf-flood.ts [--rate 500] [--seconds 3] [--max-connections N]
import { Buffer } from 'node:buffer';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ChOffset, IC_PDU_SIZE, PduType } from '../protocol/index.js';
import { Child, buildBaseline, runClient, type ClientResult } from './perf-target.js';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
}

/** Flooder child: open `rate` connections per second for `seconds`, each dropped at once or right after an ICReq. */
async function flood(port: number, rate: number, seconds: number): Promise<void> {
  const icReq = Buffer.alloc(IC_PDU_SIZE);
  icReq[ChOffset.type] = PduType.IC_REQ;
  icReq[ChOffset.hlen] = IC_PDU_SIZE;
  icReq.writeUInt32LE(IC_PDU_SIZE, ChOffset.plen);
  let opened = 0;
  let failed = 0;
  let i = 0;
  const perTick = rate / 100;
  let due = 0;
  const end = Date.now() + seconds * 1000;
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      if (Date.now() >= end) {
        clearInterval(timer);
        setTimeout(resolve, 100);
        return;
      }
      due += perTick;
      for (; due >= 1; due--) {
        const withIc = i++ % 2 === 0;
        const s = net.connect({ host: '127.0.0.1', port }, () => {
          opened++;
          if (withIc) s.write(icReq, () => s.destroy());
          else s.destroy();
        });
        s.on('error', () => failed++);
      }
    }, 10);
  });
  process.stdout.write(`${JSON.stringify({ opened, failed, perSecond: opened / seconds })}\n`);
}

async function main(): Promise<void> {
  if (process.argv.includes('--flood')) return flood(arg('port', 0), arg('rate', 500), arg('seconds', 3));
  const rate = arg('rate', 500);
  const seconds = arg('seconds', 3);
  const bins = buildBaseline(path.join(tmpdir(), 'nvme-tcp-ts-perf'));
  const self = fileURLToPath(import.meta.url);
  const targetScript = path.join(path.dirname(self), 'perf-target.ts');
  const ts = new Child('taskset', ['-c', '0', process.execPath, ...process.execArgv, targetScript, '--server']);
  try {
    const port = await ts.port();
    const qd1 = { name: '4k-qd1', bs: 4096, qd: 1, ddgst: false };
    const base1 = await runClient('0', bins.client, port, qd1, seconds, false);
    const flooder = spawn('taskset', ['-c', '1', process.execPath, ...process.execArgv, self, '--flood', '--port', String(port), '--rate', String(rate), '--seconds', String(seconds + 1)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    flooder.stdout.setEncoding('utf8');
    flooder.stdout.on('data', (d: string) => (out += d));
    const flooderDone = new Promise<void>((r) => flooder.once('exit', () => r()));
    await new Promise((r) => setTimeout(r, 500));
    const during = await runClient('0', bins.client, port, qd1, seconds, false);
    await flooderDone;
    const base2 = await runClient('0', bins.client, port, qd1, seconds, false);
    const stats = (await ts.ask('stats')).slice(6);
    const f = JSON.parse(out) as { opened: number; failed: number; perSecond: number };
    const base: ClientResult = base1.p50us <= base2.p50us ? base1 : base2;
    const row = (n: string, r: ClientResult): string => `| ${n} | ${Math.round(r.iops)} | ${r.p50us.toFixed(1)} | ${r.p99us.toFixed(1)} | ${r.maxus.toFixed(0)} |`;
    console.log(`# QD1 4 KiB reads on a live queue vs a connection flood (${f.perSecond.toFixed(0)} connections/s achieved, ${f.failed} failed)`);
    console.log('| run | IOPS | p50 µs | p99 µs | max µs |\n|---|---|---|---|---|');
    console.log(row('no flood (before)', base1));
    console.log(row('flood', during));
    console.log(row('no flood (after)', base2));
    console.log(`ratio flood/no-flood: p50 ${(during.p50us / base.p50us).toFixed(2)}×, p99 ${(during.p99us / base.p99us).toFixed(2)}×`);
    const st = JSON.parse(stats) as { connections?: unknown; katoExpiries?: number };
    console.log(`target connections: ${JSON.stringify(st.connections)}`);
  } finally {
    ts.proc.stdin?.write('quit\n');
    await new Promise((r) => ts.proc.once('exit', r));
  }
}

await main();
