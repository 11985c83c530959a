// Scenario duplicate-connect: one controller vs K duplicate controllers (same host identity, duplicate_connect)
// under multipath round-robin and queue-depth, and how the target spreads those queues (listControllers()).
import { kernelDuplicateConnect } from './kernel-initiator.js';
import { randomUUID } from 'node:crypto';
import { connect, createMultipath, type Controller, type IoPolicy } from '../../initiator/index.js';
import { runJobs } from '../load/engine.js';
import { parseJobFile, resolveJobs } from '../load/job-file.js';
import { namespaceBlockTarget } from '../nvme.js';
import { armFromRun, compare, makeReport } from '../report/build.js';
import type { Arm, Comparison } from '../report/types.js';
import type { TargetProcess } from './placement.js';
import { round1, timing, type Scenario, type ScenarioContext } from './types.js';
import { contentionText, ioWorkerMetrics, repetitions, runArmOnController, runInterleaved, splitSetupText, warmupJob, withSplitTarget, type SplitSetup } from './workload.js';

const IO_QUEUES = 2;

interface TargetSnapshot {
  /** This host's I/O queues, keyed cntlid/qid: commands processed (where the target counts per queue) and serving group. */
  queues: Map<string, { commands?: number; group?: string }>;
  /** Completed I/O per thread of execution (SPDK poll group, ours' event loop). */
  groups: Map<string, number>;
}

/** What the target shows of one arm's host (a fresh hostnqn per arm, so a previous arm's controllers never count). */
async function snapshot(t: TargetProcess, hostnqn: string): Promise<TargetSnapshot> {
  const queues = new Map<string, { commands?: number; group?: string }>();
  for (const c of await t.controllers()) {
    if (c.subnqn !== t.nqn || c.hostnqn !== hostnqn) continue;
    for (const q of c.queues) if (q.qid > 0) queues.set(`${c.cntlid}/${q.qid}`, q);
  }
  return { queues, groups: new Map((await t.groups()).map((g) => [g.name, g.commands])) };
}

const share = (deltas: number[]): number => {
  const total = deltas.reduce((sum, d) => sum + d, 0);
  return total === 0 ? 0 : Math.round((Math.max(...deltas) / total) * 1000) / 1000;
};

/**
 * How the target spread one arm: controllers and I/O queues of the host, the groups serving them and the groups'
 * share of completed I/O; per-queue use only where the target counts commands per queue (ours; SPDK counts per poll
 * group).
 */
function targetSpread(before: TargetSnapshot, after: TargetSnapshot): Record<string, number> {
  const groupDeltas = [...after.groups].map(([g, n]) => n - (before.groups.get(g) ?? 0));
  const out: Record<string, number> = {
    targetControllers: new Set([...after.queues.keys()].map((k) => k.split('/')[0])).size,
    targetIoQueues: after.queues.size,
    targetGroups: after.groups.size,
    targetQueueGroups: new Set([...after.queues.values()].map((q) => q.group)).size,
    targetGroupsUsed: groupDeltas.filter((d) => d > 0).length,
    targetMaxGroupShare: share(groupDeltas),
  };
  if ([...after.queues.values()].every((q) => q.commands !== undefined)) {
    const deltas = [...after.queues].map(([k, q]) => (q.commands ?? 0) - (before.queues.get(k)?.commands ?? 0)).filter((d) => d > 0);
    out['targetQueuesUsed'] = deltas.length;
    out['targetMaxQueueShare'] = share(deltas);
  }
  return out;
}

async function runArm(ctx: ScenarioContext, s: SplitSetup, name: string, controllers: number, policy: IoPolicy | undefined, job: string, where: Arm['params']): Promise<Arm> {
  const t = s.target;
  const hostid = randomUUID();
  const base = { traddr: t.addr, trsvcid: t.port, nqn: t.nqn, hostid, hostnqn: `nqn.2014-08.org.nvmexpress:uuid:${hostid}`, nr_io_queues: IO_QUEUES, queue_size: 128, ...s.connect };
  const ctrls: Controller[] = [];
  const params = { controllers, iopolicy: policy ?? 'single', nr_io_queues: IO_QUEUES, io_workers: ctx.ioWorkers ?? 0, ...where };
  try {
    ctx.log(`${name}: connecting ${controllers} controller(s)`);
    for (let i = 0; i < controllers; i++) ctrls.push(await connect({ ...base, duplicate_connect: controllers > 1 }));
    const first = ctrls[0] as Controller;
    const ns1 = first.namespace(1);
    const ns = policy === undefined ? ns1 : createMultipath(ctrls, 1, { iopolicy: policy });
    const bt = namespaceBlockTarget(ns, Number(ns1.blocks), ns1.blockSize, { controllers: ctrls });
    const before = await snapshot(t, base.hostnqn);
    await t.loopLag();
    const run = await runJobs(bt, resolveJobs(parseJobFile(job), bt), {
      ...s.engine,
      ...(ctx.onProgress === undefined ? {} : { onProgress: (p) => ctx.onProgress?.(name, p) }),
    });
    const lag = await t.loopLag();
    const after = await snapshot(t, base.hostnqn);
    // Controllers with the same io-worker settings share one pool (initiator/io-worker/pool.ts): count distinct threads.
    const workerMetrics = ctrls.map((c) => ioWorkerMetrics(c, run.wallMs)).filter((m) => m['ioWorkers'] !== undefined);
    const workerThreads = new Set(ctrls.flatMap((c) => c.ioWorkerInfo().map((w) => w.tid)).filter((t) => t !== 0)).size;
    return armFromRun(name, params, run, {
      ...targetSpread(before, after),
      ...(lag === undefined ? {} : { targetLoopLagP99Ms: lag.p99Ms }),
      ...(workerMetrics.length === 0
        ? {}
        : {
            ioWorkers: workerThreads,
            ioWorkerRelinquish: (workerMetrics[0] as Record<string, number>)['ioWorkerRelinquish'] ?? 0,
            ioWorkerMaxCpuPct: Math.max(...workerMetrics.map((m) => m['ioWorkerMaxCpuPct'] ?? 0)),
          }),
    });
  } catch (e) {
    return { name, params, metrics: {}, error: (e as Error).message };
  } finally {
    for (const c of ctrls) await c.disconnect().catch(() => undefined);
  }
}

/**
 * Target arms (target workers, issue 12): the same K duplicate controllers under round-robin, against a target whose
 * I/O queues run in `workers` worker processes, placement single (every queue on worker 0: the Linux target's
 * one-CPU finding) vs controller vs queue. The primary runs in this process (it only serves admin queues); the data
 * plane is in the workers. Each arm reports the busiest worker's share of commands and the workers' CPU.
 */
export async function targetWorkerArms(ctx: ScenarioContext, K: number, job: string, reps: number, workers = 2): Promise<Arm[]> {
  const { TargetService } = await import('../../target/index.js');
  const nqn = 'nqn.2024-01.io.nvme-tcp-ts:dup-workers';
  const svc = new TargetService({ workers, placement: 'single' });
  try {
    const port = (await svc.addPort({ id: 1, addr: '127.0.0.1', port: 0 })).port;
    await svc.addSubsystem({ nqn, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '128M' } }] });
    const cpu = (): { userMs: number; systemMs: number } => {
      const ws = svc.workers();
      return { userMs: ws.reduce((n, w) => n + w.cpuUserUs, 0) / 1000, systemMs: ws.reduce((n, w) => n + w.cpuSystemUs, 0) / 1000 };
    };
    const arm = async (placement: 'single' | 'controller' | 'queue'): Promise<Arm> => {
      const name = `${K}-ctrl-target-${placement}`;
      const params = { controllers: K, iopolicy: 'round-robin', nr_io_queues: IO_QUEUES, targetWorkers: workers, targetPlacement: placement };
      svc.setPlacement(placement);
      const hostid = randomUUID();
      const ctrls: Controller[] = [];
      try {
        for (let i = 0; i < K; i++) ctrls.push(await connect({ traddr: '127.0.0.1', trsvcid: port, nqn, hostid, hostnqn: `nqn.2014-08.org.nvmexpress:uuid:${hostid}`, nr_io_queues: IO_QUEUES, queue_size: 128, duplicate_connect: K > 1 }));
        const ns1 = (ctrls[0] as Controller).namespace(1);
        const bt = namespaceBlockTarget(createMultipath(ctrls, 1, { iopolicy: 'round-robin' }), Number(ns1.blocks), ns1.blockSize, { controllers: ctrls });
        const before = svc.workers().map((w) => w.ios);
        const run = await runJobs(bt, resolveJobs(parseJobFile(job), bt), { cpuLabel: 'initiator', targetCpu: cpu, targetCpuSource: 'target worker reports (process.cpuUsage)' });
        await new Promise((r) => setTimeout(r, 450)); // two worker report intervals
        const deltas = svc.workers().map((w, i) => w.ios - (before[i] ?? 0));
        const total = deltas.reduce((a, b) => a + b, 0);
        const mine = new Set(ctrls.map((c) => c.cntlid));
        const used = new Set(svc.listControllers().filter((c) => c.subnqn === nqn && mine.has(c.cntlid)).flatMap((c) => c.queues.filter((q) => q.qid > 0).map((q) => q.worker)));
        return armFromRun(name, params, run, {
          targetWorkersUsed: used.size,
          targetMaxWorkerShare: total === 0 ? 0 : Math.round((Math.max(...deltas) / total) * 1000) / 1000,
        });
      } catch (e) {
        return { name, params, metrics: {}, error: (e as Error).message };
      } finally {
        for (const c of ctrls) await c.disconnect().catch(() => undefined);
      }
    };
    ctx.log(`target arms: ${K} duplicate controllers, target with ${workers} workers, placement single / controller / queue`);
    return await runInterleaved(
      (['single', 'controller', 'queue'] as const).map((p) => ({ name: `${K}-ctrl-target-${p}`, metric: 'iops', run: () => arm(p) })),
      reps,
    );
  } finally {
    await svc.stop();
  }
}

/** The verdict: the IOPS ratio, and how the target spread the duplicate controllers' queues. */
function verdictText(arms: Arm[], rr: Comparison | undefined, K: number, spdk: boolean): string {
  if (rr === undefined) return 'An arm failed; no ratio.';
  const m = arms.find((a) => a.name === `${K}-ctrl-round-robin`)?.metrics ?? {};
  const pct = (x: number | undefined): number => Math.round((x ?? 0) * 100);
  const spread = spdk
    ? `SPDK nvmf_tgt saw ${m['targetControllers'] ?? '?'} controllers with ${m['targetIoQueues'] ?? '?'} I/O queues on ${m['targetQueueGroups'] ?? '?'} of its ${m['targetGroups'] ?? '?'} poll groups, the busiest poll group completing ${pct(m['targetMaxGroupShare'])}% of I/O`
    : `the target saw ${m['targetControllers'] ?? '?'} controllers, ${m['targetQueuesUsed'] ?? '?'} I/O queues in use, the busiest with ${pct(m['targetMaxQueueShare'])}% of commands`;
  return `${K} duplicate controllers under round-robin ran at ${round1(rr.ratio)}× the single controller's IOPS; ${spread}.${contentionText(arms)}`;
}

/** Notes on where the target's queues ran and where the spread figures come from. */
function targetNotes(spdk: boolean, quick: boolean): string[] {
  if (!spdk) {
    return [
      'All target queues run on the target process\'s one event loop (the Linux target likewise puts duplicate-connect queues on one CPU); spreading them over workers is future work.',
      'The target spread (targetControllers, targetQueuesUsed, targetMaxQueueShare) is read from the target\'s GET /controllers before and after the run; targetLoopLagP99Ms from its /metrics.',
    ];
  }
  return [
    'nvmf_tgt hands each new queue pair to one of its poll groups (one per reactor core), so duplicate controllers\' queues spread over its cores; with one core they share one poll group.',
    'The target spread is read over SPDK\'s RPC before and after each run: each queue\'s poll group from nvmf_subsystem_get_qpairs (targetQueueGroups), completed I/O per poll group from nvmf_get_stats (targetGroupsUsed, targetMaxGroupShare). SPDK keeps no per-queue command counts, so targetQueuesUsed and targetMaxQueueShare are absent, and it has no event loop to report a lag for.',
    ...(quick ? [] : ['The target-worker arms (our target\'s own workers) run only with --target ours.']),
  ];
}

const SPDK_HYPOTHESIS =
  'Against SPDK\'s nvmf_tgt (--target spdk), which puts each queue pair on one of its poll groups (one per core of its mask), ' +
  'the duplicate controllers\' queues spread over its cores: IOPS can rise only when it has more than one core and one was the limit.';

export const duplicateConnect: Scenario = {
  name: 'duplicate-connect',
  title: 'Duplicate connect: 1 controller vs K duplicate controllers under multipath',
  ioWorkers: true,
  hypothesis:
    'K duplicate controllers (nvme connect --duplicate-connect) give K× the queues; under multipath round-robin or queue-depth the ' +
    'I/O spreads over all of them. Throughput should rise only if the single controller was queue-bound. Our target serves every ' +
    'queue on one event loop (in its own process here), so expect about the same IOPS, with the target showing K controllers ' +
    'whose queues each carry ~1/(K×queues) of the commands.',
  async run(ctx) {
    if (ctx.kernelHost !== undefined) return kernelDuplicateConnect(ctx, duplicateConnect.title, duplicateConnect.hypothesis);
    const createdAt = new Date();
    const t = timing(ctx.quick);
    const K = ctx.quick ? 2 : 4;
    const spdk = ctx.target === 'spdk';
    const job = `[rand4k]\nrw=randread\nbs=4k\niodepth=32\nnumjobs=2\nsize=64m\nruntime=${t.runtime}\nramp_time=${t.ramp}\n`;
    const reps = repetitions(ctx.quick);
    const notes: string[] = [];
    const arms = await withSplitTarget({ ram: '128M' }, async (s) => {
      const t0 = s.target;
      ctx.log(`warm-up (unmeasured) against ${t0.label}`);
      await runArmOnController(ctx, 'warmup', { traddr: t0.addr, trsvcid: t0.port, nqn: t0.nqn, nr_io_queues: IO_QUEUES, queue_size: 128, ...s.connect }, warmupJob(ctx.quick), s.engine);
      const where = await s.where();
      const out = await runInterleaved(
        [
          { name: '1-ctrl', metric: 'iops', run: () => runArm(ctx, s, '1-ctrl', 1, undefined, job, where) },
          { name: `${K}-ctrl-round-robin`, metric: 'iops', run: () => runArm(ctx, s, `${K}-ctrl-round-robin`, K, 'round-robin', job, where) },
          { name: `${K}-ctrl-queue-depth`, metric: 'iops', run: () => runArm(ctx, s, `${K}-ctrl-queue-depth`, K, 'queue-depth', job, where) },
        ],
        reps,
      );
      notes.push(await s.describe());
      return s.finish(out);
    }, ctx);
    // Target arms (full runs of our target only; test/e2e/target-workers-harness.test.ts runs them alone in quick mode).
    const workerArms = !ctx.quick && !spdk;
    if (workerArms) arms.push(...(await targetWorkerArms(ctx, K, job, reps)));
    const comparisons = [
      compare(arms, `${K} controllers round-robin vs 1 controller IOPS`, 'iops', `${K}-ctrl-round-robin`, '1-ctrl', 'higher'),
      compare(arms, `${K} controllers queue-depth vs 1 controller IOPS`, 'iops', `${K}-ctrl-queue-depth`, '1-ctrl', 'higher'),
      compare(arms, `${K} controllers round-robin vs 1 controller p99 latency`, 'p99Us', `${K}-ctrl-round-robin`, '1-ctrl', 'lower'),
      spdk
        ? compare(arms, 'target I/O queues, round-robin vs single', 'targetIoQueues', `${K}-ctrl-round-robin`, '1-ctrl', 'higher')
        : compare(arms, 'target queues used, round-robin vs single', 'targetQueuesUsed', `${K}-ctrl-round-robin`, '1-ctrl', 'higher'),
    ];
    if (workerArms) {
      comparisons.push(
        compare(arms, 'target workers: placement queue vs single IOPS', 'iops', `${K}-ctrl-target-queue`, `${K}-ctrl-target-single`, 'higher'),
        compare(arms, 'target workers: placement controller vs single IOPS', 'iops', `${K}-ctrl-target-controller`, `${K}-ctrl-target-single`, 'higher'),
      );
    }
    return makeReport({
      kind: 'scenario',
      name: 'duplicate-connect',
      title: duplicateConnect.title,
      hypothesis: spdk ? `${duplicateConnect.hypothesis} ${SPDK_HYPOTHESIS}` : duplicateConnect.hypothesis,
      quick: ctx.quick,
      createdAt,
      arms,
      comparisons,
      verdict: verdictText(arms, comparisons[0], K, spdk),
      notes: [
        ...notes,
        ...targetNotes(spdk, ctx.quick),
        reps > 1 ? `Each arm ran ${reps} times, interleaved; the table shows the median-IOPS repetition, iopsMin/iopsMax the spread.` : 'One repetition per arm (--quick): compare full runs.',
        'An unmeasured warm-up run precedes the arms (JIT warm-up of both processes).',
      ],
      setup: splitSetupText(ctx),
    });
  },
};
