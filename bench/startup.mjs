// Start-up time of the `nvme-tcp` bin: `--version` and `discover` against a local target (a RAM namespace on
// 127.0.0.1, started once), in two arms in the same run: the sources through tsx (what the bin did before dist/:
// `node --import tsx cli/main.ts`) and bin/nvme-tcp.mjs as installed (dist/, after `npm run build`).
// Plain JavaScript, so it measures the bin and not a loader of its own.
// Usage: node bench/startup.mjs [RUNS]   (default 10; prints best and median in ms)
import { spawn, spawnSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../bin/nvme-tcp.mjs', import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const RUNS = Number(process.argv[2] ?? '10');
const ARMS = [
  ['tsx (sources)', ['--import', 'tsx', 'cli/main.ts']],
  ['bin (dist/)', [BIN]],
];

function time(prefix, args) {
  const ms = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    const r = spawnSync(process.execPath, [...prefix, ...args], { encoding: 'utf8', cwd: ROOT });
    ms.push(performance.now() - t0);
    if (i === 0 && r.status !== 0) process.stderr.write(`note: ${args.join(' ')} exited ${r.status}: ${(r.stderr || r.stdout).split('\n')[0]}\n`);
  }
  ms.sort((a, b) => a - b);
  return { best: ms[0], median: (ms[(RUNS - 1) >> 1] + ms[RUNS >> 1]) / 2 };
}

const target = spawn(process.execPath, [BIN, 'target', '--ram', '16M', '--listen', '127.0.0.1:0', '--log-level', 'info'], { stdio: ['ignore', 'pipe', 'pipe'] });
const port = await new Promise((resolve, reject) => {
  let out = '';
  const onData = (d) => {
    out += d;
    const m = /127\.0\.0\.1:(\d+)/.exec(out);
    if (m) resolve(Number(m[1]));
  };
  target.stdout.on('data', onData);
  target.stderr.on('data', onData);
  target.on('exit', (c) => reject(new Error(`target exited ${c}: ${out}`)));
});
try {
  for (const [label, args] of [['--version', ['--version']], ['discover', ['discover', '-a', '127.0.0.1', '-s', String(port)]]]) {
    for (const [arm, prefix] of ARMS) {
      const r = time(prefix, args);
      process.stdout.write(`nvme-tcp ${label.padEnd(10)} ${arm.padEnd(14)} best ${r.best.toFixed(0)} ms, median ${r.median.toFixed(0)} ms (${RUNS} runs, node ${process.version})\n`);
    }
  }
} finally {
  target.kill('SIGTERM');
}
