// Scenario kernel-interop, both directions in one boot of the Linux 6.1 guest built by harness/lab/build.sh (qemu):
//   1. the Linux host runs fio against our target (guest -> guestfwd -> this process);
//   2. the Linux host runs the same fio against its own nvmet (guest-local), the reference for 1;
//   3. our initiator (this process) runs the engine against that nvmet (host -> hostfwd -> guest): the same randread,
//      then a 4 KiB randrw with verify=crc32c.
// The full run also runs the interop vitest suites. Figures are from an emulated (TCG) guest, not comparable to the host's.
import { execFile } from 'node:child_process';
import { access, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { connect } from '../../initiator/index.js';
import { runJobs } from '../load/engine.js';
import { parseJobFile, resolveJobs } from '../load/job-file.js';
import { NVMET_NQN, nvmetSetupScript } from '../kernel-host/nvmet.js';
import { freePort, killLabGroup, labDir, runLabScript } from '../lab.js';
import { controllerBlockTarget, REPO_ROOT, startInProcessTarget } from '../nvme.js';
import { armFromRun, compare, makeReport, verifyText } from '../report/build.js';
import type { Arm } from '../report/types.js';
import { allowedCpus, parseCpuList, startSpdkTargetProcess } from './placement.js';
import { round1, type Scenario, type ScenarioContext } from './types.js';

const LAB_DIR = labDir();
const LAB_OUT = process.env['LAB_OUT'] ?? '/var/tmp/nvme-lab';

/**
 * Guest script (busybox sh): fio over our target, then nvmet on eth0 (where hostfwd delivers) with fio from the guest
 * itself, then lab-wait-host while our initiator runs against nvmet from the host. Prints FIGURE lines.
 */
function guestScript(t: GuestTarget, runtimeS: number, waitS: number): string {
  return `#!/bin/sh
set -u
RT=${runtimeS}
# A target that misbehaves during Connect would otherwise cost the 60 s admin timeout (lab README, limits).
echo 5 > /sys/module/nvme_core/parameters/admin_timeout
# Namespace scanning after Connect is asynchronous, and slow under TCG on a loaded machine: wait up to 30 s.
waitdev() { i=0; while [ ! -b "$1" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; [ -b "$1" ]; }
# The kernel names the new controller, so its namespace's node is found by waiting, not read once.
firstdev() { i=0; while [ $i -lt 300 ]; do for d in /dev/nvme*n1; do [ -b "$d" ] && { echo "$d"; return 0; }; done; sleep 0.1; i=$((i+1)); done; return 1; }
runfio() {
  # terse v3: field 5 error, 8 read IOPS, 7 read KiB/s, 40 read total latency mean (usec)
  out=$(fio --name="$1" --filename="$2" --rw=randread --bs=4k --iodepth=16 --ioengine=libaio --direct=1 \\
        --size=128m --runtime=$RT --time_based --output-format=terse --terse-version=3 2>&1 | tail -n 1)
  echo "FIGURE $1 err=$(echo "$out" | cut -d';' -f5) iops=$(echo "$out" | cut -d';' -f8) kibps=$(echo "$out" | cut -d';' -f7) lat_us=$(echo "$out" | cut -d';' -f40)"
}
echo "### linux host -> ${t.figure} ($LAB_GUESTFWD_IP:$LAB_GUESTFWD_PORT)"
if nvme connect -t tcp -a "$LAB_GUESTFWD_IP" -s "$LAB_GUESTFWD_PORT" -n "${t.nqn}" --nr-io-queues=2; then
  if waitdev /dev/nvme0n1; then runfio ${t.figure} /dev/nvme0n1; else echo "FIGURE ${t.figure} err=nodev"; fi
  nvme disconnect -n "${t.nqn}" >/dev/null
else
  echo "FIGURE ${t.figure} err=connect"
fi
echo "### linux host -> linux target ($LAB_GUEST_IP, guest-local)"
# nvmet listens on eth0's address: hostfwd delivers there for step 3 (a 127.0.0.1 port is unreachable from the host).
( ${nvmetSetupScript({ nqn: NVMET_NQN, traddr: '$LAB_GUEST_IP', trsvcid: 4420, portId: 1, file: '/tmp/nvmet-ns1.img', sizeMb: 1024 })} ) >/dev/null
if nvme connect -t tcp -a "$LAB_GUEST_IP" -s 4420 -n ${NVMET_NQN} --nr-io-queues=2; then
  if dev=$(firstdev); then runfio kernel-target "$dev"; else echo "FIGURE kernel-target err=nodev"; fi
  nvme disconnect -n ${NVMET_NQN} >/dev/null
else
  echo "FIGURE kernel-target err=connect"
fi
echo "### ts initiator (host) -> linux target"
lab-wait-host 5999 ${waitS}
echo "### nvmet after the host initiator:"
dmesg | grep -E 'nvmet' | tail -n 6
`;
}

/** The host-side target the guest reaches through guestfwd: ours in this process, or SPDK's nvmf_tgt in a child. */
interface GuestTarget {
  /** FIGURE key in the guest's output, and the arm `linux-host->${figure}`. */
  figure: 'ts-target' | 'spdk-target';
  /** The arm's `path` parameter. */
  path: string;
  /** The comparison's name for it. */
  name: string;
  nqn: string;
  port: number;
  /** One note on what the target saw, read after the guest is done. */
  seen(): Promise<string>;
  stop(): Promise<void>;
}

/** Starts the target under test on 127.0.0.1:0 (ctx.target: ours in this process, or SPDK's nvmf_tgt). */
async function startGuestTarget(ctx: ScenarioContext): Promise<GuestTarget> {
  if (ctx.target !== 'spdk') {
    const t = await startInProcessTarget({ size: '256M' });
    return {
      figure: 'ts-target',
      path: 'our TargetService (in this process) via guestfwd + socat',
      name: 'ts target',
      nqn: t.nqn,
      port: t.port,
      seen: async () => {
        const stats = t.service.stats();
        return `Our target saw ${stats.connections.accepted} connections and ${stats.connects.ok} successful Fabrics Connects (${stats.connects.failed} failed).`;
      },
      stop: () => t.stop(),
    };
  }
  // Unpinned: the guest's emulated CPUs need the machine's cores more than a pinned layout would leave them.
  const cores = ctx.targetCores ?? 1;
  const cpus = parseCpuList(await allowedCpus(process.pid)).slice(-cores);
  const t = await startSpdkTargetProcess({ ram: '256M', cpus, interrupt: ctx.spdkInterrupt === true });
  return {
    figure: 'spdk-target',
    path: `${t.label} (pid ${t.pid}, reactors on CPUs ${cpus.join(',')}) via guestfwd + socat`,
    name: 'SPDK nvmf_tgt',
    nqn: t.nqn,
    port: t.port,
    seen: async () => {
      const groups = await t.groups();
      const polls = t.polls ? ' Its reactors busy-poll their cores, which the emulated guest competes for; --spdk-interrupt leaves them to the guest.' : '';
      return `SPDK nvmf_tgt completed ${groups.reduce((n, g) => n + g.commands, 0)} I/O commands over ${groups.length} poll group(s) (nvmf_get_stats).${polls}`;
    },
    stop: () => t.stop(),
  };
}

interface Figure {
  err: string;
  iops: number;
  kibps: number;
  latUs: number;
}

function parseFigures(out: string): Map<string, Figure> {
  const m = new Map<string, Figure>();
  for (const line of out.split('\n')) {
    const f = /^FIGURE (\S+) err=(\S*)(?: iops=(\S*) kibps=(\S*) lat_us=(\S*))?/.exec(line.trim());
    if (f === null) continue;
    m.set(f[1] as string, { err: f[2] ?? '', iops: Number(f[3] ?? NaN), kibps: Number(f[4] ?? NaN), latUs: Number(f[5] ?? NaN) });
  }
  return m;
}

/**
 * Boots the lab with `args`, streams its output, and calls `onReady` once the guest prints ===LAB-READY===
 * (lab-wait-host); `onReady` must release the guest (a connection to the control port) when it is done.
 */
function runLab(args: string[], timeoutMs: number, ctx: ScenarioContext, onReady: () => Promise<void>): Promise<{ code: number; out: string }> {
  let readySeen = false;
  let hostDone: Promise<void> = Promise.resolve();
  const { child, done } = runLabScript([path.join(LAB_DIR, 'run.sh'), ...args], (chunk, seen) => {
    for (const l of chunk.split('\n')) if (l.startsWith('FIGURE') || l.startsWith('###')) ctx.log(`guest: ${l}`);
    if (!readySeen && seen.includes('===LAB-READY===')) {
      readySeen = true;
      hostDone = onReady();
    }
  });
  const timer = setTimeout(() => killLabGroup(child, 'SIGKILL'), timeoutMs);
  return done.then(async ({ code, out }) => {
    clearTimeout(timer);
    await hostDone;
    return { code: code ?? -1, out };
  });
}


/** Releases lab-wait-host: one TCP connection to the forwarded control port. */
function release(port: number): Promise<void> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => s.end());
    s.on('close', () => resolve());
    s.on('error', () => resolve());
  });
}

/**
 * Our initiator against nvmet in the guest: the kernel arms' randread (same options as their fio), then a 4 KiB randrw
 * with verify=crc32c (each block stamped with its LBA and a generation, every block read back and checked).
 */
async function initiatorArms(ctx: ScenarioContext, port: number, runtimeS: number): Promise<Arm[]> {
  const randread = `[randread]\nrw=randread\nbs=4k\niodepth=16\nsize=128m\nruntime=${runtimeS}s\n`;
  const verify = `[randrw-verify]\nrw=randrw\nbs=4k\niodepth=16\nsize=16m\nruntime=${runtimeS}s\nverify=crc32c\n`;
  const arms: Arm[] = [];
  const base = { path: '127.0.0.1 -> qemu hostfwd -> nvmet on the guest eth0, file on tmpfs', nr_io_queues: 2 };
  try {
    ctx.log('ts-initiator->linux-target: connecting');
    const ctrl = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NVMET_NQN, nr_io_queues: 2 });
    try {
      const bt = controllerBlockTarget(ctrl, ctrl.namespaces[0]?.nsid ?? 1);
      for (const [name, job, desc] of [
        ['ts-initiator->linux-target', randread, `randread 4k QD16 ${runtimeS}s`],
        ['ts-initiator->linux-target/verify', verify, `randrw 4k QD16 ${runtimeS}s verify=crc32c, then read-back`],
      ] as const) {
        const params = { ...base, workload: desc };
        try {
          ctx.log(`${name}: running`);
          const run = await runJobs(bt, resolveJobs(parseJobFile(job), bt), { cpuLabel: 'initiator (this process)' });
          arms.push(armFromRun(name, params, run, run.verify.enabled ? { checkedBlocks: run.verify.checkedBlocks } : {}));
        } catch (e) {
          arms.push({ name, params, metrics: {}, error: (e as Error).message });
        }
      }
    } finally {
      await ctrl.disconnect();
    }
  } catch (e) {
    for (const name of ['ts-initiator->linux-target', 'ts-initiator->linux-target/verify']) {
      if (!arms.some((a) => a.name === name)) arms.push({ name, params: base, metrics: {}, error: (e as Error).message });
    }
  }
  return arms;
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
  title: 'Kernel interop: Linux 6.1 (qemu, emulated) host against our target, and our initiator against nvmet',
  hypothesis:
    'The Linux nvme-tcp host connects to our target and runs fio without errors, and, in the same emulated guest, reaches an IOPS ' +
    'figure of the same order as against the kernel target (the emulated CPU is the bottleneck, so the ratio, not the absolute, is the result). ' +
    'In the other direction our initiator connects to the Linux nvmet target, reads at a rate of the same order as the Linux host, ' +
    'and a 4 KiB randrw with verify=crc32c finds every block it wrote intact. With --target spdk the guest runs the same fio against ' +
    "SPDK's nvmf_tgt instead of ours: the reference that a userspace target reached through the same forwarding gets.",
  async run(ctx) {
    const createdAt = new Date();
    const acc = await accel();
    const label = `emulated (${acc.toUpperCase()}) guest: figures are not comparable to the host's`;
    const base = { kind: 'scenario' as const, name: 'kernel-interop', title: kernelInterop.title, hypothesis: kernelInterop.hypothesis, quick: ctx.quick, createdAt, setup: `qemu guest (${acc}) on this host; the guest reaches ${ctx.target === 'spdk' ? "SPDK's nvmf_tgt" : 'our target'} through guestfwd, our initiator reaches nvmet through hostfwd` };
    const notReady = await labReady();
    if (notReady !== undefined) return makeReport({ ...base, arms: [], comparisons: [], verdict: '', skipped: notReady, notes: [label] });

    const target = await startGuestTarget(ctx);
    const arms: Arm[] = [];
    const notes = [label];
    const dir = await mkdtemp(path.join(os.tmpdir(), 'nvme-tcp-lab-'));
    let hostArms: Arm[] = [];
    try {
      const script = path.join(dir, 'kernel-interop-guest.sh');
      const runtimeS = ctx.quick ? 2 : 10;
      const budgetS = ctx.quick ? 240 : 900;
      const dataPort = await freePort();
      const ctlPort = await freePort();
      await writeFile(script, guestScript(target, runtimeS, budgetS - 30), { mode: 0o755 });
      ctx.log(`booting the lab guest (${acc}), ${runtimeS}s per arm`);
      const t0 = performance.now();
      const lab = await runLab(
        ['--timeout', String(budgetS), '--host-port', String(target.port), '--hostfwd', `${dataPort}:4420`, '--hostfwd', `${ctlPort}:5999`, script],
        (budgetS + 20) * 1000,
        ctx,
        async () => {
          try {
            hostArms = await initiatorArms(ctx, dataPort, runtimeS);
          } finally {
            await release(ctlPort);
          }
        },
      );
      const bootToEndS = round1((performance.now() - t0) / 1000);
      const figs = parseFigures(lab.out);
      for (const [name, key, desc] of [
        [`linux-host->${target.figure}`, target.figure, target.path],
        ['linux-host->linux-target', 'kernel-target', 'nvmet on the guest eth0 address, guest-local, file on tmpfs'],
      ] as const) {
        const f = figs.get(key);
        const params = { path: desc, fio: `randread 4k QD16 libaio direct ${runtimeS}s`, nr_io_queues: 2 };
        if (f === undefined) arms.push({ name, params, metrics: {}, error: `no figure from the guest (run.sh exit ${lab.code}): ${lab.out.trim().split('\n').slice(-4).join(' / ')}` });
        else if (f.err !== '0' || !Number.isFinite(f.iops)) arms.push({ name, params, metrics: {}, error: `fio/connect failed in the guest (err=${f.err})` });
        else arms.push({ name, params, metrics: { iops: Math.round(f.iops), mbps: round1((f.kibps * 1024) / 1e6), meanLatUs: round1(f.latUs) } });
      }
      if (hostArms.length === 0) {
        hostArms = ['ts-initiator->linux-target', 'ts-initiator->linux-target/verify'].map((name) => ({ name, params: {}, metrics: {}, error: `the guest never reached lab-wait-host (run.sh exit ${lab.code})` }));
      }
      arms.push(...hostArms);
      notes.push('Paths differ: the guest reaches our target through slirp guestfwd and one socat per connection; its fio against nvmet stays inside the guest; our initiator reaches nvmet through slirp hostfwd. Each ratio includes that forwarding cost.');
      notes.push(`Lab run: exit ${lab.code}, ${bootToEndS} s from boot to power-off (all arms in one boot).`);
      notes.push(await target.seen());
      if (!ctx.quick) arms.push(await interopSuites(ctx));
    } finally {
      await target.stop();
      await rm(dir, { recursive: true, force: true });
    }
    const c = compare(arms, `linux host IOPS: ${target.name} / linux target (emulated)`, 'iops', `linux-host->${target.figure}`, 'linux-host->linux-target', 'higher');
    const ci = compare(arms, 'IOPS against nvmet: ts initiator (host, hostfwd) / linux host (guest-local)', 'iops', 'ts-initiator->linux-target', 'linux-host->linux-target', 'higher');
    const v = arms.find((a) => a.name === 'ts-initiator->linux-target/verify');
    const verifyLine =
      v === undefined || v.error !== undefined || v.run === undefined
        ? ` Our initiator's verify run against nvmet did not complete${v?.error === undefined ? '' : ` (${v.error})`}.`
        : ` Our initiator's randrw verify against nvmet: ${v.run.totals.ios} I/Os, ${verifyText(v.run.verify)}, ${v.run.totals.errors} errors (${v.run.verify.mismatchCount === 0 && v.run.totals.errors === 0 ? 'pass' : 'FAIL'}).`;
    const suites = arms.find((a) => a.name === 'interop-suites');
    const suiteText = suites === undefined ? '' : suites.skipped !== undefined ? ` Interop suites: skipped (${suites.skipped}).` : ` Interop suites: ${suites.metrics['passed'] ?? 0}/${suites.metrics['total'] ?? 0} passed.`;
    return makeReport({
      ...base,
      arms,
      comparisons: [c, ci],
      verdict:
        (c === undefined ? 'The Linux host did not complete fio against both targets: see the arm errors.' : `The Linux host ran fio against ${target.figure === 'ts-target' ? 'our target' : "SPDK's nvmf_tgt"} at ${round1(c.ratio)}× the IOPS it got from nvmet in the same guest.`) +
        (ci === undefined ? '' : ` Our initiator reached ${round1(ci.ratio)}× the Linux host's randread IOPS against the same nvmet.`) +
        verifyLine +
        suiteText +
        ` (${label})`,
      notes,
    });
  },
};
