// Long fuzz run against a target in a child process (issue 6 item 1):
//   npx tsx bench/fuzz-target.ts [--cases 1000000] [--concurrency 16] [--seed N] [--json FILE]
// Prints cases/s, crashes, target RSS min/max, healthy-controller I/O count and errors. Exit 1 on any crash,
// target error, malformed target PDU, healthy-I/O failure, leaked object or unbounded memory (RSS > 512 MB, GC'd heap
// growth > 64 MB).
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { runFuzz } from '../harness/fuzz/run.js';

const { values } = parseArgs({
  options: {
    cases: { type: 'string', default: '1000000' },
    concurrency: { type: 'string', default: '16' },
    seed: { type: 'string' },
    json: { type: 'string' },
  },
});

const cases = Number(values.cases);
const concurrency = Number(values.concurrency);
if (!Number.isInteger(cases) || cases < 1) throw new Error(`--cases ${values.cases}: need a positive integer`);
if (!Number.isInteger(concurrency) || concurrency < 1) throw new Error(`--concurrency ${values.concurrency}: need a positive integer`);

let lastPrint = 0;
const r = await runFuzz({
  cases,
  concurrency,
  ...(values.seed !== undefined ? { seed: Number(values.seed) } : {}),
  onProgress: (p) => {
    if (p.elapsedS - lastPrint < 5) return;
    lastPrint = p.elapsedS;
    process.stdout.write(`${p.elapsedS.toFixed(0)} s: ${p.cases} cases, ${p.connections} connections, target RSS ${p.rssMB.toFixed(0)} MB, healthy I/O ${p.healthyOps}\n`);
  },
});

const fmt = (n: number): string => n.toLocaleString('en-US', { maximumFractionDigits: 1 });
const responses = Object.values(r.statuses).reduce((a, b) => a + b, 0);
const leaked = r.finalCounts === undefined || r.finalCounts.controllers !== 1 || r.finalCounts.pendingRequests !== 0 || r.finalCounts.unboundConnections !== 0;
process.stdout.write(
  [
    '',
    `seed                 ${r.seed}`,
    `cases                ${fmt(r.cases)} over ${fmt(r.connections)} connections in ${fmt(r.elapsedS)} s (${fmt(r.casesPerSec)} cases/s)`,
    `crashes              ${r.crashes}${r.crash !== undefined ? ` (exit ${JSON.stringify(r.crash.exit)}; last cases in ${r.crash.reproFile})` : ''}`,
    `target errors logged ${r.targetErrors.count}${r.targetErrors.first.length > 0 ? `: ${r.targetErrors.first[0]}` : ''}`,
    `malformed replies    ${r.malformedReplies}${r.malformedFirst.length > 0 ? `: ${r.malformedFirst[0]}` : ''}`,
    `target replies       ${fmt(responses)} completions (${Object.keys(r.statuses).length} distinct statuses), ${fmt(r.termReqs)} C2HTermReqs`,
    `target RSS           min ${fmt(r.rssMB.min)} MB, max ${fmt(r.rssMB.max)} MB (${r.rssMB.samples} samples); heap after GC ${fmt(r.heapAfterGcMB.start)} → ${fmt(r.heapAfterGcMB.end)} MB`,
    `healthy I/O          ${fmt(r.healthy.ops)} verified write+read pairs, ${r.healthy.errors} errors, ${r.healthy.mismatches} mismatches, max latency ${fmt(r.healthy.maxLatencyMs)} ms${r.healthy.firstError !== undefined ? ` (${r.healthy.firstError})` : ''}`,
    `after the run        ${JSON.stringify(r.finalCounts)}`,
    '',
  ].join('\n'),
);
if (values.json !== undefined) writeFileSync(values.json, JSON.stringify(r, null, 1));
// Memory bound: the target's RSS stays under 512 MB and its GC'd heap grows by less than 64 MB over the run.
const memoryBad = r.rssMB.max > 512 || r.heapAfterGcMB.end - r.heapAfterGcMB.start > 64;
const bad = memoryBad || r.crashes > 0 || r.targetErrors.count > 0 || r.malformedReplies > 0 || r.healthy.errors > 0 || r.healthy.mismatches > 0 || leaked;
process.exitCode = bad ? 1 : 0;
