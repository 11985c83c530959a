// The command-level fuzzer for minutes (harness/fuzz/commands.ts):
//   npx tsx bench/fuzz-commands.ts [--seconds 120] [--seed N] [--workers 2] [--controllers 2] [--json FILE]
// Prints commands sent and answered, the statuses seen, warn lines, teardowns and the verified pass; exit 1 when the
// verdict fails (a command unanswered, a teardown the host did not cause, a keep-alive lost, the target dead, an error
// line, or the verified pass not clean).
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { commandFuzzVerdict, runCommandFuzz } from '../harness/fuzz/commands.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '120' },
    seed: { type: 'string' },
    workers: { type: 'string', default: '1' },
    controllers: { type: 'string', default: '2' },
    json: { type: 'string' },
  },
});

function positive(name: string, v: string | undefined): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) {
    process.stderr.write(`--${name} ${v}: need a positive integer\n`);
    process.exit(2);
  }
  return n;
}

const seconds = positive('seconds', values.seconds);
const workers = positive('workers', values.workers);
const controllers = positive('controllers', values.controllers);
const seed = values.seed !== undefined ? positive('seed', values.seed) : undefined;

let lastPrint = 0;
const r = await runCommandFuzz({
  seconds,
  controllers,
  ...(seed !== undefined ? { seed } : {}),
  ...(workers > 1 ? { target: { workers } } : {}),
  onProgress: (p) => {
    if (p.elapsedS - lastPrint < 10) return;
    lastPrint = p.elapsedS;
    process.stdout.write(`${p.elapsedS.toFixed(0)} s: ${p.sent} commands sent, ${p.answered} answered\n`);
  },
});

const fmt = (n: number): string => n.toLocaleString('en-US', { maximumFractionDigits: 1 });
const top = (h: Record<string, number>, n: number): string =>
  Object.entries(h)
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `${k} ${fmt(v)}`)
    .join(', ');
const bad = commandFuzzVerdict(r);
process.stdout.write(
  [
    '',
    `seed                 ${r.seed} (workers ${workers}, ${controllers} controllers)`,
    `commands             ${fmt(r.sent)} sent, ${fmt(r.answered)} answered in ${fmt(r.elapsedS)} s; ${r.aersOutstanding} AERs posted, ${r.unanswered.count} unanswered, ${r.unexpected} unexpected CIDs`,
    `statuses             ${Object.keys(r.statuses).length} distinct: ${top(r.statuses, 16)}`,
    `keep-alives          ${fmt(r.keepAlives.sent)} sent, ${fmt(r.keepAlives.answered)} answered, ${r.keepAlives.failed} failed (statuses ${JSON.stringify(r.keepAlives.statuses)})`,
    `controllers          ${r.controllersMade} made, ${r.connectsRefused} edge Connects refused, ${r.termReqs} C2HTermReqs (host-caused)`,
    `teardowns not asked  ${r.unexplainedCloses.count} closes, ${r.katoExpiries} KATO expiries, ${r.missingControllers} missing from the list${r.unexplainedCloses.first.length > 0 ? ` (${r.unexplainedCloses.first[0]})` : ''}`,
    `target log           ${r.warnLines} warn lines, ${r.errorLines.count} error lines; host refusals ${JSON.stringify(r.hostRefusals)}`,
    `target alive         ${r.targetAlive}`,
    `verified pass        ${r.verify.blocks} blocks, ${r.verify.mismatches} mismatches${r.verify.error !== undefined ? `, ${r.verify.error}` : ''}`,
    `verdict              ${bad.length === 0 ? 'clean' : bad.join('; ')}`,
    '',
  ].join('\n'),
);
if (values.json !== undefined) writeFileSync(values.json, JSON.stringify(r, null, 1));
process.exitCode = bad.length === 0 ? 0 : 1;
