// SIGKILL durability benchmark (issue 6 item 3):
//   npx tsx bench/durability-sigkill.ts [--cycles 50] [--blocks 4096] [--qd 8] [--fua 0.5] [--seed N] [--json FILE]
// `nvme-tcp target` on a 64 MiB file namespace in a child process; a writer doing stamped 4 KiB writes (FUA, or
// plain + Flush); SIGKILL at a random moment (150-600 ms into each cycle); restart on the same port; every
// acknowledged-durable block read back and checked (LBA + generation + CRC32C). Exit 1 on any lost block.
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { runDurability } from '../harness/fuzz/durability.js';

const { values } = parseArgs({
  options: {
    cycles: { type: 'string', default: '50' },
    blocks: { type: 'string', default: '4096' },
    qd: { type: 'string', default: '8' },
    fua: { type: 'string', default: '0.5' },
    seed: { type: 'string' },
    json: { type: 'string' },
  },
});

const num = (name: string, v: string | undefined, min: number, max: number): number => {
  const n = Number(v);
  if (!Number.isFinite(n) || n < min || n > max) throw new Error(`--${name} ${v}: must be ${min}..${max}`);
  return n;
};

const r = await runDurability({
  cycles: num('cycles', values.cycles, 1, 100_000),
  blocks: num('blocks', values.blocks, 16, 16384),
  qd: num('qd', values.qd, 1, 256),
  fuaRatio: num('fua', values.fua, 0, 1),
  ...(values.seed !== undefined ? { seed: Number(values.seed) } : {}),
  onCycle: (c) => {
    process.stdout.write(
      `cycle ${c.cycle}: killed after ${c.killAfterMs} ms with ${c.inFlightAtKill} writes in flight; ${c.writesAcked} acked, ${c.durableWrites} durable; ` +
        `restart ${c.restartMs.toFixed(0)} ms; ${c.verified} blocks verified, ${c.failures} failures\n`,
    );
  },
});

const fmt = (n: number): string => n.toLocaleString('en-US', { maximumFractionDigits: 1 });
process.stdout.write(
  [
    '',
    `seed              ${r.seed}`,
    `cycles            ${r.cycles} SIGKILL + restart`,
    `writes            ${fmt(r.writesAcked)} acknowledged, ${fmt(r.durableWrites)} acknowledged durable (FUA or covered by a Flush)`,
    `blocks verified   ${fmt(r.blocksVerified)} (block reads after restarts that had a durable generation to check)`,
    `failures          ${r.failures.length}${r.failures.length > 0 ? `: ${JSON.stringify(r.failures.slice(0, 5))}` : ''}`,
    `restart + connect ${fmt(r.restartMsAvg)} ms on average`,
    '',
  ].join('\n'),
);
if (values.json !== undefined) writeFileSync(values.json, JSON.stringify(r, null, 1));
process.exitCode = r.failures.length > 0 ? 1 : 0;
