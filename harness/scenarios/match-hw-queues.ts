// Scenario match-hw-queues: the target listens inside a network namespace behind a veth with N rx/tx queues; the
// initiator connects once with a fixed large queue count (baseline, what a many-CPU host picks) and once with
// match_hw_queues (min(CPUs, NIC queues)). Reports the queue count each chose and the throughput.
import { execFile } from 'node:child_process';
import os from 'node:os';
import { connect, type ConnectOptions } from '../../initiator/index.js';
import { runJobs } from '../load/engine.js';
import { parseJobFile, resolveJobs } from '../load/job-file.js';
import { controllerBlockTarget, readProcCpu, startChildTarget, type ChildTarget } from '../nvme.js';
import { armFromRun, compare, makeReport } from '../report/build.js';
import type { Arm, Comparison } from '../report/types.js';
import { pinApart } from './placement.js';
import { round1, timing, type Scenario, type ScenarioContext } from './types.js';
import { ioWorkerConnect, ioWorkerMetrics } from './workload.js';

/** rx/tx queues of the veth (both ends). */
const NIC_QUEUES = 4;
/** Baseline queue count: what Linux picks on a host with this many CPUs (one queue per CPU), more than the NIC has. */
const BASELINE_QUEUES = 8;

function ip(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('ip', args, { timeout: 10_000 }, (err, stdout, stderr) => (err !== null ? reject(new Error(`ip ${args.join(' ')}: ${stderr.trim() || err.message}`)) : resolve(stdout)));
  });
}

interface Netns {
  name: string;
  hostIf: string;
  hostAddr: string;
  nsAddr: string;
  cleanup(): Promise<void>;
}

/** Creates the namespace and veth pair; throws with the reason when this host does not allow it. */
async function createVethNamespace(queues: number): Promise<Netns> {
  const id = `${process.pid % 100_000}`;
  const name = `nvt-${id}`;
  const hostIf = `nvth${id}`;
  const nsIf = `nvtp${id}`;
  const octet = (process.pid % 250) + 1;
  const hostAddr = `10.213.${octet}.1`;
  const nsAddr = `10.213.${octet}.2`;
  const cleanup = async (): Promise<void> => {
    await ip(['link', 'del', hostIf]).catch(() => undefined);
    await ip(['netns', 'del', name]).catch(() => undefined);
  };
  await cleanup();
  await ip(['netns', 'add', name]);
  try {
    const q = String(queues);
    await ip(['link', 'add', hostIf, 'numtxqueues', q, 'numrxqueues', q, 'type', 'veth', 'peer', 'name', nsIf, 'numtxqueues', q, 'numrxqueues', q]);
    await ip(['link', 'set', nsIf, 'netns', name]);
    await ip(['addr', 'add', `${hostAddr}/30`, 'dev', hostIf]);
    await ip(['link', 'set', hostIf, 'up']);
    await ip(['-n', name, 'addr', 'add', `${nsAddr}/30`, 'dev', nsIf]);
    await ip(['-n', name, 'link', 'set', nsIf, 'up']);
    await ip(['-n', name, 'link', 'set', 'lo', 'up']);
  } catch (e) {
    await cleanup();
    throw e;
  }
  return { name, hostIf, hostAddr, nsAddr, cleanup };
}

async function runArm(ctx: ScenarioContext, target: ChildTarget, name: string, params: Arm['params'], opts: Partial<ConnectOptions>, job: string): Promise<Arm> {
  try {
    ctx.log(`${name}: connecting`);
    const ctrl = await connect({ traddr: target.addr, trsvcid: target.port, nqn: target.nqn, queue_size: 128, ...opts });
    try {
      const bt = controllerBlockTarget(ctrl, 1);
      const run = await runJobs(bt, resolveJobs(parseJobFile(job), bt), {
        cpuLabel: 'initiator',
        targetCpu: () => readProcCpu(target.pid),
        targetCpuSource: `/proc/${target.pid}/stat`,
        targetPid: target.pid,
        ...(ctx.onProgress === undefined ? {} : { onProgress: (p) => ctx.onProgress?.(name, p) }),
      });
      return armFromRun(name, params, run, { ioQueues: ctrl.ioQueueCount, ...ioWorkerMetrics(ctrl, run.wallMs) });
    } finally {
      await ctrl.disconnect();
    }
  } catch (e) {
    return { name, params, metrics: {}, error: (e as Error).message };
  }
}

export const matchHwQueues: Scenario = {
  name: 'match-hw-queues',
  oursOnly: 'it starts the target inside a network namespace behind a veth with N queues, which only our child target does',
  title: 'match_hw_queues: queue count from the NIC (veth in a network namespace) vs a per-CPU baseline',
  ioWorkers: true,
  hypothesis:
    `A host that opens one queue per CPU (baseline: ${BASELINE_QUEUES}) on a NIC with fewer queues (${NIC_QUEUES} rx/tx) gains nothing ` +
    'from the extra queues and pays for them (more connections, more memory, more context); match_hw_queues picks ' +
    `min(CPUs, NIC queues) = ${Math.min(os.availableParallelism(), NIC_QUEUES)} here and should keep the throughput.`,
  async run(ctx) {
    const createdAt = new Date();
    const t = timing(ctx.quick);
    const workloads = ctx.quick ? (['randread'] as const) : (['randread', 'randwrite', 'randrw'] as const);
    const skip = (reason: string): ReturnType<Scenario['run']> =>
      Promise.resolve(
        makeReport({ kind: 'scenario', name: 'match-hw-queues', title: matchHwQueues.title, hypothesis: matchHwQueues.hypothesis, quick: ctx.quick, createdAt, arms: [], comparisons: [], verdict: '', skipped: reason }),
      );
    if (process.platform !== 'linux') return skip('network namespaces need Linux');
    let ns: Netns;
    try {
      ns = await createVethNamespace(NIC_QUEUES);
    } catch (e) {
      return skip(`cannot create a network namespace and veth here (needs root/CAP_NET_ADMIN and iproute2): ${(e as Error).message}`);
    }
    const arms: Arm[] = [];
    const notes: string[] = [];
    // Both ends pinned apart as in the split scenarios, so a bound arm is visible (issue 11 step 6).
    const placement = await pinApart({ spread: (ctx.ioWorkers ?? 0) > 0 });
    try {
      let target: ChildTarget;
      try {
        const pin = placement.targetCpu === undefined ? [] : ['taskset', '-c', String(placement.targetCpu)];
        target = await startChildTarget({ listen: `${ns.nsAddr}:0`, prefix: [...pin, 'ip', 'netns', 'exec', ns.name], ram: '128M' });
      } catch (e) {
        return await skip(`target did not start inside namespace ${ns.name}: ${(e as Error).message}`);
      }
      try {
        const workers = ioWorkerConnect(ctx.ioWorkers, placement.initiatorCpus);
        for (const w of workloads) {
          const job = `[${w}]\nrw=${w}\nbs=4k\niodepth=32\nnumjobs=2\nsize=64m\nruntime=${t.runtime}\nramp_time=${t.ramp}\n`;
          for (const arm of ['baseline', 'matched'] as const) {
            const name = `${arm}-${w}`;
            const queues = arm === 'baseline' ? { nr_io_queues: BASELINE_QUEUES } : { match_hw_queues: true };
            arms.push(await runArm(ctx, target, name, { workload: w, queues: arm === 'baseline' ? `nr_io_queues=${BASELINE_QUEUES}` : 'match_hw_queues', io_workers: ctx.ioWorkers ?? 0 }, { ...queues, ...workers }, job));
          }
        }
        const pinText = placement.unpinnedReason === undefined ? `initiator pinned to CPUs ${placement.initiatorCpus.join(',')}, target to CPU ${placement.targetCpu}` : `not pinned: ${placement.unpinnedReason}`;
        notes.push(`${pinText}${(ctx.ioWorkers ?? 0) > 0 ? `; I/O queues on up to ${ctx.ioWorkers} io workers (match_hw_queues caps the workers at the NIC's ${NIC_QUEUES} queues too)` : ''}.`);
      } finally {
        await target.stop();
        await placement.restore();
      }
      notes.push(`veth ${ns.hostIf} <-> namespace ${ns.name} (${ns.hostAddr} -> ${ns.nsAddr}), ${NIC_QUEUES} rx/tx queues each end; target is a child process (nvme-tcp target) inside the namespace.`);
      notes.push('veth queues are software queues: the experiment shows the queue count chosen and its cost, not NIC RSS effects.');
    } finally {
      await ns.cleanup();
    }
    const comparisons: (Comparison | undefined)[] = workloads.flatMap((w) => [
      compare(arms, `${w}: matched vs baseline IOPS`, 'iops', `matched-${w}`, `baseline-${w}`, 'higher'),
      compare(arms, `${w}: matched vs baseline I/O queues`, 'ioQueues', `matched-${w}`, `baseline-${w}`, 'lower'),
    ]);
    const first = comparisons[0];
    const q = arms.find((a) => a.name.startsWith('matched'))?.metrics['ioQueues'];
    const matchedWorkers = arms.find((a) => a.name.startsWith('matched'))?.metrics['ioWorkers'];
    const baselineWorkers = arms.find((a) => a.name.startsWith('baseline'))?.metrics['ioWorkers'];
    return makeReport({
      kind: 'scenario',
      name: 'match-hw-queues',
      title: matchHwQueues.title,
      hypothesis: matchHwQueues.hypothesis,
      quick: ctx.quick,
      createdAt,
      arms,
      comparisons,
      verdict: first === undefined ? 'An arm failed; no ratio.' : `match_hw_queues chose ${q ?? '?'} I/O queues (baseline ${BASELINE_QUEUES}) and ran at ${round1(first.ratio)}× the baseline's randread IOPS.`,
      notes,
      setup: 'veth into a network namespace on one host (target in a child process)',
    });
  },
};
