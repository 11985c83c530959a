// Child-process target for the fuzzer and fault suites: a TargetService whose crash shows up as a process exit in
// the parent. Started with fork() (IPC): argv[2] is a JSON TargetConfig; it answers { cmd: 'sample' } with memory
// and leak counts. Errors go to stderr as pino JSON lines (level error), which the parent counts.
import { availableParallelism } from 'node:os';
import process from 'node:process';
import { pino } from 'pino';
import type { TargetConfig } from '../../target/model/config.js';
import { TargetService } from '../../target/service/index.js';
import type { ChildSample, ChildToParent, ParentToChild } from './protocol.js';

async function main(): Promise<void> {
  const cfgText = process.argv[2];
  if (cfgText === undefined) throw new Error('target-child: missing config argument');
  const cfg = JSON.parse(cfgText) as TargetConfig & { icReqTimeoutS?: number };
  const logger = pino({ level: process.env.FUZZ_TARGET_LOG ?? 'error' }, pino.destination(2));
  // The config's workers/placement, as the CLI passes them (docs/target.md "Target workers").
  const workers = cfg.workers === 'auto' ? availableParallelism() : cfg.workers;
  const svc = new TargetService({ logger, icReqTimeoutS: cfg.icReqTimeoutS ?? 2, ...(workers !== undefined ? { workers } : {}), ...(cfg.placement !== undefined ? { placement: cfg.placement } : {}) });
  await svc.apply(cfg);
  const send = (m: ChildToParent): void => {
    process.send?.(m);
  };
  process.on('message', (raw: unknown) => {
    const m = raw as ParentToChild;
    if (m.cmd === 'sample') {
      const g = (globalThis as { gc?: () => void }).gc;
      if (m.gc === true && g !== undefined) g();
      const mem = process.memoryUsage();
      const sample: ChildSample = { rss: mem.rss, heapUsed: mem.heapUsed, external: mem.external, arrayBuffers: mem.arrayBuffers, debug: svc.debugCounts(), stats: svc.stats(), controllers: svc.listControllers(), workers: svc.workers() };
      send({ type: 'sample', id: m.id, sample });
    } else if (m.cmd === 'stop') {
      void svc.stop().then(() => process.exit(0));
    }
  });
  process.on('disconnect', () => {
    void svc.stop().then(() => process.exit(0));
  });
  send({ type: 'ready', ports: svc.boundPorts().map((p) => p.port), pid: process.pid });
}

main().catch((err: unknown) => {
  process.stderr.write(`target-child: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(3);
});
