// Keep-alive under load: our initiator (one process) drives 64 I/O queues against our target (another process) with
// 4 KiB random reads, QD per queue --qd, for --seconds (longer than KATO). Both report event-loop delay
// (perf_hooks.monitorEventLoopDelay, p99 and max) against KATO; the target must record no keep-alive expiry. Then the
// host process is frozen (SIGSTOP): the target must expire the controller after KATO and close all 65 connections.
// By default the target runs on CPU 0 and the host on CPU 1 (two machines' worth); --same-cpu puts both on CPU 0.
//   npx tsx bench/perf-kato.ts [--seconds 6] [--kato 5] [--qd 4] [--same-cpu]
import { Buffer } from 'node:buffer';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Child } from './perf-target.js';

const NQN = 'nqn.2024-01.io.nvme-ts:kato-bench';
const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-7000000000ca';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
}

async function target(): Promise<void> {
  const { TargetService } = await import('../target/service/index.js');
  const svc = new TargetService();
  await svc.apply({ ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [{ nqn: NQN, maxIoQueues: 64, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '256M' } }] }] });
  const lag = monitorEventLoopDelay({ resolution: 1 });
  lag.enable();
  process.stdout.write(`PORT ${svc.boundPorts()[0]?.port}\n`);
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (line: string) => {
    for (const cmd of line.split('\n')) {
      if (cmd === 'reset') {
        lag.reset();
        process.stdout.write('OK\n');
      }
      if (cmd === 'lag') process.stdout.write(`${JSON.stringify({ p99: lag.percentile(99) / 1e6, max: lag.max / 1e6 })}\n`);
      if (cmd === 'stats') {
        const st = svc.stats();
        const ctrls = svc.listControllers().filter((c) => !c.discovery);
        process.stdout.write(`${JSON.stringify({ controllers: ctrls.length, queues: ctrls.reduce((a, c) => a + c.queues.length, 0), active: st.connections.active, katoExpiries: st.katoExpiries })}\n`);
      }
      if (cmd === 'quit') void svc.stop().then(() => process.exit(0));
    }
  });
}

async function host(port: number, seconds: number, kato: number, qd: number): Promise<void> {
  const { connect } = await import('../initiator/index.js');
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, hostnqn: HOSTNQN, nr_io_queues: 64, queue_size: Math.max(16, qd * 2), keep_alive_tmo: kato, reconnect_delay: 3600 });
  const ns = c.namespace(1);
  const blocks = Number(ns.blocks);
  const lag = monitorEventLoopDelay({ resolution: 1 });
  lag.enable();
  let ios = 0;
  let errors = 0;
  const end = Date.now() + seconds * 1000;
  const worker = async (hctx: number): Promise<void> => {
    const buf = Buffer.allocUnsafe(4096);
    while (Date.now() < end) {
      const lba = Math.floor(Math.random() * (blocks / 8 - 1)) * 8;
      await ns.read(lba, 8, buf, { hctx }).then(
        () => ios++,
        () => errors++,
      );
    }
  };
  await Promise.all(Array.from({ length: 64 * qd }, (_, i) => worker(i % 64)));
  lag.disable();
  process.stdout.write(`${JSON.stringify({ ioQueues: c.ioQueueCount, iops: ios / seconds, errors, p99: lag.percentile(99) / 1e6, max: lag.max / 1e6 })}\n`);
  // Stay connected (idle) until frozen and killed by the parent.
  setInterval(() => undefined, 1000);
}

async function main(): Promise<void> {
  if (process.argv.includes('--target')) return target();
  if (process.argv.includes('--host')) return host(arg('port', 0), arg('seconds', 6), arg('kato', 5), arg('qd', 4));
  const seconds = arg('seconds', 6);
  const kato = arg('kato', 5);
  const qd = arg('qd', 4);
  const hostCpu = process.argv.includes('--same-cpu') ? '0' : '1';
  const self = fileURLToPath(import.meta.url);
  const t = new Child('taskset', ['-c', '0', process.execPath, ...process.execArgv, self, '--target']);
  let h: Child | undefined;
  try {
    const port = await t.port();
    await t.ask('reset');
    h = new Child('taskset', ['-c', hostCpu, process.execPath, ...process.execArgv, self, '--host', '--port', String(port), '--seconds', String(seconds), '--kato', String(kato), '--qd', String(qd)]);
    const hr = JSON.parse(await h.line()) as { ioQueues: number; iops: number; errors: number; p99: number; max: number };
    const tl = JSON.parse(await t.ask('lag')) as { p99: number; max: number };
    const during = JSON.parse(await t.ask('stats')) as { controllers: number; queues: number; active: number; katoExpiries: number };
    console.log(`# keep-alive under load: ${hr.ioQueues} I/O queues × QD ${qd}, ${seconds} s of 4 KiB random reads, KATO ${kato} s (target CPU 0, host CPU ${hostCpu})`);
    console.log(`IOPS ${Math.round(hr.iops)}, I/O errors ${hr.errors}`);
    console.log('| side | loop delay p99 ms | max ms | max / KATO |\n|---|---|---|---|');
    console.log(`| target | ${tl.p99.toFixed(2)} | ${tl.max.toFixed(2)} | ${((tl.max / (kato * 1000)) * 100).toFixed(2)} % |`);
    console.log(`| initiator | ${hr.p99.toFixed(2)} | ${hr.max.toFixed(2)} | ${((hr.max / (kato * 1000)) * 100).toFixed(2)} % |`);
    console.log(`after load: controllers ${during.controllers}, queues ${during.queues}, connections ${during.active}, KATO expiries ${during.katoExpiries}`);
    // Freeze the host: the target sees silence and must expire the controller after KATO (< 2 × KATO with TBKAS ticks).
    h.proc.kill('SIGSTOP');
    const t0 = Date.now();
    let after = during;
    while (Date.now() - t0 < kato * 3000) {
      await new Promise((r) => setTimeout(r, 100));
      after = JSON.parse(await t.ask('stats')) as typeof during;
      if (after.controllers === 0 && after.active === 0) break;
    }
    console.log(
      `host frozen: controller expired after ${((Date.now() - t0) / 1000).toFixed(1)} s; left: controllers ${after.controllers}, queues ${after.queues}, connections ${after.active}, KATO expiries ${after.katoExpiries}`,
    );
  } finally {
    h?.proc.kill('SIGKILL');
    t.proc.stdin?.write('quit\n');
    await new Promise((r) => t.proc.once('exit', r));
  }
}

await main();
