// Engine overhead: how many I/Os per second the workload engine itself sustains against the in-memory target
// (no sockets), with and without verify. Not part of npm test; run with `npx tsx bench/harness-engine.ts`.
import { MemoryBlockTarget, parseFioJobFile, resolveJobs, runJobs } from '../harness/load/index.js';

const cases = [
  ['randread 4k QD32', '[r]\nrw=randread\nbs=4k\niodepth=32\nruntime=2s\n'],
  ['randwrite 4k QD32', '[w]\nrw=randwrite\nbs=4k\niodepth=32\nruntime=2s\n'],
  ['randwrite 4k QD32 verify', '[w]\nrw=randwrite\nbs=4k\niodepth=32\nruntime=2s\nsize=64m\nverify=crc32c\n'],
  ['read 128k QD16', '[s]\nrw=read\nbs=128k\niodepth=16\nruntime=2s\n'],
] as const;

const rows: { name: string; iops: number; p50: number; cpu: number }[] = [];
for (const [name, job] of cases) {
  const t = new MemoryBlockTarget({ capacityBlocks: 262144 });
  const r = await runJobs(t, resolveJobs(parseFioJobFile(job), t));
  rows.push({ name, iops: r.totals.iops, p50: r.totals.latencyUs.p50, cpu: r.cpu.percentOfCore });
}
const base = rows[0]?.iops ?? 1;
for (const r of rows) console.log(`${r.name.padEnd(28)} ${String(r.iops).padStart(9)} IOPS  p50 ${r.p50} µs  cpu ${r.cpu}%  (${(r.iops / base).toFixed(2)}× randread)`);
