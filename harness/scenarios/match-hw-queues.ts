// Scenario match-hw-queues: the target listens inside a network namespace behind a veth with N rx/tx queues; the
// initiator connects once with a fixed large queue count (baseline, what a many-CPU host picks) and once with
// match_hw_queues (min(CPUs, NIC queues)). Reports the queue count each chose and the throughput.
import { kernelMatchHwQueues } from './kernel-initiator.js';
import { execFile } from 'node:child_process';
import os from 'node:os';
import type { ConnectOptions } from '../../initiator/index.js';
import { armFromRun, compare, makeReport } from '../report/build.js';
import type { Arm, Comparison } from '../report/types.js';
import { round1, timing, type Scenario, type ScenarioContext } from './types.js';
import { runArmOnController, withSplitTarget, type SplitSetup } from './workload.js';

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

async function runArm(ctx: ScenarioContext, s: SplitSetup, name: string, params: Arm['params'], opts: Partial<ConnectOptions>, job: string): Promise<Arm> {
  try {
    const r = await runArmOnController(ctx, name, { traddr: s.target.addr, trsvcid: s.target.port, nqn: s.target.nqn, queue_size: 128, ...s.connect, ...opts }, job, s.engine);
    return armFromRun(name, params, r.run, { ioQueues: r.ioQueues, ...r.workers });
  } catch (e) {
    return { name, params, metrics: {}, error: (e as Error).message };
  }
}

export const matchHwQueues: Scenario = {
  name: 'match-hw-queues',
  title: 'match_hw_queues: queue count from the NIC (veth in a network namespace) vs a per-CPU baseline',
  ioWorkers: true,
  hypothesis:
    `A host that opens one queue per CPU (baseline: ${BASELINE_QUEUES}) on a NIC with fewer queues (${NIC_QUEUES} rx/tx) gains nothing ` +
    'from the extra queues and pays for them (more connections, more memory, more context); match_hw_queues picks ' +
    `min(CPUs, NIC queues) = ${Math.min(os.availableParallelism(), NIC_QUEUES)} here and should keep the throughput.`,
  async run(ctx) {
    if (ctx.kernelHost !== undefined) return kernelMatchHwQueues(ctx, matchHwQueues.title, matchHwQueues.hypothesis);
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
    const notes: string[] = [];
    let arms: Arm[];
    try {
      // Both ends pinned apart as in the split scenarios, so a bound arm is visible (issue 11 step 6).
      arms = await withSplitTarget(
        { ram: '128M', addr: ns.nsAddr, netns: ns.name },
        async (s) => {
          const out: Arm[] = [];
          for (const w of workloads) {
            const job = `[${w}]\nrw=${w}\nbs=4k\niodepth=32\nnumjobs=2\nsize=64m\nruntime=${t.runtime}\nramp_time=${t.ramp}\n`;
            for (const arm of ['baseline', 'matched'] as const) {
              const name = `${arm}-${w}`;
              const queues = arm === 'baseline' ? { nr_io_queues: BASELINE_QUEUES } : { match_hw_queues: true };
              out.push(await runArm(ctx, s, name, { workload: w, queues: arm === 'baseline' ? `nr_io_queues=${BASELINE_QUEUES}` : 'match_hw_queues', io_workers: ctx.ioWorkers ?? 0 }, queues, job));
            }
          }
          notes.push(await s.describe());
          if ((ctx.ioWorkers ?? 0) > 0) notes.push(`I/O queues on up to ${ctx.ioWorkers} io workers (match_hw_queues caps the workers at the NIC's ${NIC_QUEUES} queues too).`);
          return s.finish(out);
        },
        ctx,
      );
    } catch (e) {
      return await skip(`target did not start inside namespace ${ns.name}: ${(e as Error).message}`);
    } finally {
      await ns.cleanup();
    }
    notes.push(`veth ${ns.hostIf} <-> namespace ${ns.name} (${ns.hostAddr} -> ${ns.nsAddr}), ${NIC_QUEUES} rx/tx queues each end; the target (${ctx.target === 'spdk' ? "SPDK's nvmf_tgt" : 'nvme-tcp target'}) is a child process inside the namespace.`);
    notes.push('veth queues are software queues: the experiment shows the queue count chosen and its cost, not NIC RSS effects.');
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
      setup: `veth into a network namespace on one host (target${ctx.target === 'spdk' ? " (SPDK nvmf_tgt)" : ''} in a child process)`,
    });
  },
};
