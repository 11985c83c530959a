// Scenario kernel-interop: the Linux 6.1 host in ../shared/lab (qemu) runs fio against our target (through guestfwd)
// and, in the same boot, against its own kernel target (nvmet on the guest loopback) for a same-run reference; the
// full run also runs the interop vitest suites. Figures are from an emulated (TCG) guest, not comparable to the host's.
import { execFile, spawn } from 'node:child_process';
import { access, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT, startInProcessTarget } from '../nvme.js';
import { compare, makeReport } from '../report/build.js';
import type { Arm } from '../report/types.js';
import { round1, type Scenario, type ScenarioContext } from './types.js';

export const LAB_DIR = process.env['NVME_LAB_DIR'] ?? path.resolve(REPO_ROOT, '..', 'shared', 'lab');
const LAB_OUT = process.env['LAB_OUT'] ?? '/var/tmp/nvme-lab';
const KERNEL_NQN = 'nqn.2024-01.io.nvme-lab:kernel-target';

/** Guest script (busybox sh): fio over our target, then over the guest's own nvmet, printing FIGURE lines. */
function guestScript(tsNqn: string, runtimeS: number): string {
  return `#!/bin/sh
set -u
RT=${runtimeS}
# A target that misbehaves during Connect would otherwise cost the 60 s admin timeout (lab README, limits).
echo 5 > /sys/module/nvme_core/parameters/admin_timeout
waitdev() { i=0; while [ ! -b "$1" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; [ -b "$1" ]; }
runfio() {
  # terse v3: field 5 error, 8 read IOPS, 7 read KiB/s, 40 read total latency mean (usec)
  out=$(fio --name="$1" --filename="$2" --rw=randread --bs=4k --iodepth=16 --ioengine=libaio --direct=1 \\
        --size=128m --runtime=$RT --time_based --output-format=terse --terse-version=3 2>&1 | tail -n 1)
  echo "FIGURE $1 err=$(echo "$out" | cut -d';' -f5) iops=$(echo "$out" | cut -d';' -f8) kibps=$(echo "$out" | cut -d';' -f7) lat_us=$(echo "$out" | cut -d';' -f40)"
}
echo "### linux host -> ts target ($LAB_GUESTFWD_IP:$LAB_GUESTFWD_PORT)"
if nvme connect -t tcp -a "$LAB_GUESTFWD_IP" -s "$LAB_GUESTFWD_PORT" -n "${tsNqn}" --nr-io-queues=2; then
  if waitdev /dev/nvme0n1; then runfio ts-target /dev/nvme0n1; else echo "FIGURE ts-target err=nodev"; fi
  nvme disconnect -n "${tsNqn}" >/dev/null
else
  echo "FIGURE ts-target err=connect"
fi
echo "### linux host -> linux target (guest loopback)"
lab-nvmet-setup --traddr 127.0.0.1 --backing file --size-gb 1 >/dev/null
if nvme connect -t tcp -a 127.0.0.1 -s 4420 -n ${KERNEL_NQN} --nr-io-queues=2; then
  dev=$(ls /dev/nvme*n1 | head -n 1)
  if waitdev "$dev"; then runfio kernel-target "$dev"; else echo "FIGURE kernel-target err=nodev"; fi
  nvme disconnect -n ${KERNEL_NQN} >/dev/null
else
  echo "FIGURE kernel-target err=connect"
fi
`;
}

interface Figure {
  err: string;
  iops: number;
  kibps: number;
  latUs: number;
}

export function parseFigures(out: string): Map<string, Figure> {
  const m = new Map<string, Figure>();
  for (const line of out.split('\n')) {
    const f = /^FIGURE (\S+) err=(\S*)(?: iops=(\S*) kibps=(\S*) lat_us=(\S*))?/.exec(line.trim());
    if (f === null) continue;
    m.set(f[1] as string, { err: f[2] ?? '', iops: Number(f[3] ?? NaN), kibps: Number(f[4] ?? NaN), latUs: Number(f[5] ?? NaN) });
  }
  return m;
}

function runLab(args: string[], timeoutMs: number, ctx: ScenarioContext): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', [path.join(LAB_DIR, 'run.sh'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      for (const l of b.toString().split('\n')) if (l.startsWith('FIGURE') || l.startsWith('###')) ctx.log(`guest: ${l}`);
    });
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, out });
    });
  });
}

async function labReady(): Promise<string | undefined> {
  for (const f of [path.join(LAB_DIR, 'run.sh'), path.join(LAB_OUT, 'vmlinux'), path.join(LAB_OUT, 'initramfs.cpio')]) {
    try {
      await access(f);
    } catch {
      return `the qemu lab is not available (${f} missing; build it with bash ${path.join(LAB_DIR, 'build.sh')})`;
    }
  }
  return undefined;
}

async function accel(): Promise<string> {
  try {
    return (await readFile(path.join(LAB_OUT, 'accel'), 'utf8')).trim();
  } catch {
    return 'unknown';
  }
}

/** Runs the interop vitest suites (full mode): pass/fail counts from vitest's JSON reporter. */
async function interopSuites(ctx: ScenarioContext): Promise<Arm> {
  const params = { config: 'vitest.interop.config.ts' };
  let files: string[] = [];
  try {
    files = (await readdir(path.join(REPO_ROOT, 'test', 'interop'))).filter((f) => f.endsWith('.test.ts'));
  } catch {
    /* none */
  }
  if (files.length === 0) return { name: 'interop-suites', params, metrics: {}, skipped: 'no test/interop/*.test.ts suites yet' };
  const dir = await mkdtemp(path.join(os.tmpdir(), 'nvme-tcp-interop-'));
  try {
    const outFile = path.join(dir, 'vitest.json');
    ctx.log(`interop-suites: running ${files.length} suite(s)`);
    const t0 = performance.now();
    await new Promise<void>((resolve) => {
      execFile(process.execPath, [path.join(REPO_ROOT, 'node_modules', 'vitest', 'vitest.mjs'), 'run', '--config', 'vitest.interop.config.ts', '--reporter=json', `--outputFile=${outFile}`], { cwd: REPO_ROOT, timeout: 45 * 60_000, maxBuffer: 64 * 1024 * 1024 }, () => resolve());
    });
    const wallS = round1((performance.now() - t0) / 1000);
    const j = JSON.parse(await readFile(outFile, 'utf8')) as { numPassedTests?: number; numFailedTests?: number; numTotalTests?: number; numPendingTests?: number };
    return { name: 'interop-suites', params, metrics: { passed: j.numPassedTests ?? 0, failed: j.numFailedTests ?? 0, skipped: j.numPendingTests ?? 0, total: j.numTotalTests ?? 0, wallS } };
  } catch (e) {
    return { name: 'interop-suites', params, metrics: {}, error: (e as Error).message };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export const kernelInterop: Scenario = {
  name: 'kernel-interop',
  title: 'Kernel interop: Linux 6.1 host (qemu, emulated) against our target and against nvmet',
  hypothesis:
    'The Linux nvme-tcp host connects to our target and runs fio without errors, and, in the same emulated guest, reaches an IOPS ' +
    'figure of the same order as against the kernel target (the emulated CPU is the bottleneck, so the ratio, not the absolute, is the result).',
  async run(ctx) {
    const createdAt = new Date();
    const acc = await accel();
    const label = `emulated (${acc.toUpperCase()}) guest: figures are not comparable to the host's`;
    const base = { kind: 'scenario' as const, name: 'kernel-interop', title: kernelInterop.title, hypothesis: kernelInterop.hypothesis, quick: ctx.quick, createdAt, setup: `qemu guest (${acc}) on this host; guest reaches the host target through guestfwd` };
    const notReady = await labReady();
    if (notReady !== undefined) return makeReport({ ...base, arms: [], comparisons: [], verdict: '', skipped: notReady, notes: [label] });

    const target = await startInProcessTarget({ size: '256M' });
    const arms: Arm[] = [];
    const notes = [label];
    const dir = await mkdtemp(path.join(os.tmpdir(), 'nvme-tcp-lab-'));
    try {
      const script = path.join(dir, 'kernel-interop-guest.sh');
      const runtimeS = ctx.quick ? 2 : 10;
      await writeFile(script, guestScript(target.nqn, runtimeS), { mode: 0o755 });
      ctx.log(`booting the lab guest (${acc}), fio ${runtimeS}s per arm`);
      const t0 = performance.now();
      const lab = await runLab(['--timeout', String(ctx.quick ? 180 : 600), '--host-port', String(target.port), '--hostfwd', 'none', script], (ctx.quick ? 200 : 620) * 1000, ctx);
      const bootToEndS = round1((performance.now() - t0) / 1000);
      const figs = parseFigures(lab.out);
      for (const [name, key, desc] of [
        ['linux-host->ts-target', 'ts-target', 'our TargetService (in this process) via guestfwd + socat'],
        ['linux-host->linux-target', 'kernel-target', 'nvmet on the guest loopback, file on tmpfs'],
      ] as const) {
        const f = figs.get(key);
        const params = { path: desc, fio: `randread 4k QD16 libaio direct ${runtimeS}s`, nr_io_queues: 2 };
        if (f === undefined) arms.push({ name, params, metrics: {}, error: `no figure from the guest (run.sh exit ${lab.code}): ${lab.out.trim().split('\n').slice(-4).join(' / ')}` });
        else if (f.err !== '0' || !Number.isFinite(f.iops)) arms.push({ name, params, metrics: {}, error: `fio/connect failed in the guest (err=${f.err})` });
        else arms.push({ name, params, metrics: { iops: Math.round(f.iops), mbps: round1((f.kibps * 1024) / 1e6), meanLatUs: round1(f.latUs) } });
      }
      notes.push('The two paths differ: the guest reaches our target through slirp guestfwd and one socat per connection, nvmet over the guest loopback; the ratio includes that forwarding cost.');
      notes.push(`Lab run: exit ${lab.code}, ${bootToEndS} s from boot to power-off (both arms in one boot).`);
      const stats = target.service.stats();
      notes.push(`Our target saw ${stats.connections.accepted} connections and ${stats.connects.ok} successful Fabrics Connects (${stats.connects.failed} failed).`);
      if (!ctx.quick) arms.push(await interopSuites(ctx));
    } finally {
      await target.stop();
      await rm(dir, { recursive: true, force: true });
    }
    const c = compare(arms, 'linux host IOPS: ts target / linux target (emulated)', 'iops', 'linux-host->ts-target', 'linux-host->linux-target', 'higher');
    const suites = arms.find((a) => a.name === 'interop-suites');
    const suiteText = suites === undefined ? '' : suites.skipped !== undefined ? ` Interop suites: skipped (${suites.skipped}).` : ` Interop suites: ${suites.metrics['passed'] ?? 0}/${suites.metrics['total'] ?? 0} passed.`;
    return makeReport({
      ...base,
      arms,
      comparisons: [c],
      verdict: (c === undefined ? 'The Linux host did not complete fio against both targets: see the arm errors.' : `The Linux host ran fio against our target at ${round1(c.ratio)}× the IOPS it got from nvmet in the same guest (${label}).`) + suiteText,
      notes,
    });
  },
};
