// Keep-alive under load (issue 6 item 5): 64 busy I/O queues of our initiator against our target (one process, through
// a relay proxy so the host can be frozen). The event loop stays far below KATO while every queue is busy, the
// controller survives longer than KATO of pure I/O (TBKAS: I/O counts as keep-alive), and once the host goes silent
// the expiry tears down the controller and all 65 connections with nothing left behind.
import { Buffer } from 'node:buffer';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { FaultProxy } from '../../../harness/peers/proxy.js';
import { connect, type Controller } from '../../../initiator/index.js';
import { TargetService } from '../../../target/index.js';
import { HOSTNQN, SUBNQN, defaultSubsystem } from './fixture.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function until(cond: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (cond()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return cond();
}

describe('keep-alive with 64 busy queues', () => {
  it('keeps the loop far below KATO under load, and expiry tears everything down', async () => {
    const svc = new TargetService();
    await svc.apply({ ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [defaultSubsystem({ maxIoQueues: 64 })] });
    cleanups.push(() => svc.stop());
    const proxy = await FaultProxy.start({ upstreamHost: '127.0.0.1', upstreamPort: (svc.boundPorts()[0] as { port: number }).port });
    cleanups.push(() => proxy.close());
    const katoS = 1;
    const ctrl: Controller = await connect({
      traddr: '127.0.0.1',
      trsvcid: proxy.port,
      nqn: SUBNQN,
      hostnqn: HOSTNQN,
      nr_io_queues: 64,
      queue_size: 16,
      keep_alive_tmo: katoS,
      // No reconnect inside the test window: what remains after the expiry is the target's doing.
      reconnect_delay: 30,
      ctrl_loss_tmo: 60,
    });
    cleanups.push(async () => {
      await ctrl.disconnect().catch(() => undefined);
    });
    expect(ctrl.ioQueueCount).toBe(64);
    const ns = ctrl.namespace(1);
    const lag = monitorEventLoopDelay({ resolution: 1 });
    lag.enable();
    let ios = 0;
    let stop = false;
    const end = Date.now() + 1600;
    const worker = async (hctx: number): Promise<void> => {
      const buf = Buffer.allocUnsafe(4096);
      let lba = hctx * 1024;
      while (!stop && Date.now() < end) {
        await ns.read(lba, 8, buf, { hctx });
        lba += 8;
        ios++;
      }
    };
    // 64 queues × 2 outstanding reads, for longer than KATO.
    await Promise.all(Array.from({ length: 128 }, (_, i) => worker(i % 64)));
    stop = true;
    lag.disable();
    const p99Ms = lag.percentile(99) / 1e6;
    const maxMs = lag.max / 1e6;
    expect(ios).toBeGreaterThan(1000);
    // Loop delay (target + initiator + proxy in this one process) is a small fraction of KATO.
    expect(p99Ms).toBeLessThan((katoS * 1000) / 20);
    expect(maxMs).toBeLessThan((katoS * 1000) / 4);
    const stats = svc.stats();
    expect(stats.katoExpiries).toBe(0);
    const live = svc.listControllers().filter((c) => !c.discovery);
    expect(live).toHaveLength(1);
    expect(live[0]?.queues).toHaveLength(65);
    expect(live[0]?.queues.every((q) => q.qid === 0 || q.commands > 0)).toBe(true);

    // The host goes silent (every byte held in the proxy): the controller expires after KATO and all of its queues close.
    proxy.pause();
    const t0 = Date.now();
    expect(await until(() => svc.listControllers().filter((c) => !c.discovery).length === 0, 4000)).toBe(true);
    const expiredAfterMs = Date.now() - t0;
    expect(expiredAfterMs).toBeGreaterThanOrEqual(katoS * 1000 - 50);
    expect(svc.stats().katoExpiries).toBe(1);
    expect(await until(() => svc.stats().connections.active === 0, 2000)).toBe(true);
  }, 15_000);
});
