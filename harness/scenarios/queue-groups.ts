// Scenario queue-groups: one submitter (one hctx) spread over 1, 2 or 4 transport queues (queues_per_hctx),
// for QD16 128 KiB sequential reads and QD64 4 KiB random reads. Issue 4 quotes 7 -> 24 GB/s and 184k -> 252k IOPS.
// The target runs in its own process on its own CPU: with both ends on one event loop extra queues cannot help.
import { kernelQueueGroups } from './kernel-initiator.js';
import { armFromRun, compare, makeReport } from '../report/build.js';
import type { Arm } from '../report/types.js';
import { round1, timing, type Scenario } from './types.js';
import { contentionText, repetitions, runArmOnController, runInterleaved, splitSetupText, warmupJob, withSplitTarget } from './workload.js';

const GROUPS = [1, 2, 4] as const;
type Timing = { runtime: string; ramp: string };
const WORKLOADS = [
  { id: 'seq128k-qd16', job: (t: Timing) => `[seq128k]\nrw=read\nbs=128k\niodepth=16\nsize=64m\nruntime=${t.runtime}\nramp_time=${t.ramp}\nhctx=0\n`, metric: 'mbps' },
  { id: 'rand4k-qd64', job: (t: Timing) => `[rand4k]\nrw=randread\nbs=4k\niodepth=64\nsize=64m\nruntime=${t.runtime}\nramp_time=${t.ramp}\nhctx=0\n`, metric: 'iops' },
] as const;

export const queueGroups: Scenario = {
  name: 'queue-groups',
  title: 'Queue groups: one submitter over 1, 2 and 4 queues (queues_per_hctx)',
  ioWorkers: true,
  hypothesis:
    'One hctx fanned out over several TCP queues by rotor raises throughput for a single submitter, because one queue serialises ' +
    'PDU processing on one connection: expect MB/s (QD16 128 KiB) and IOPS (QD64 4 KiB) to rise from 1 to 4 queues per hctx. ' +
    'Here the target is a separate process on its own CPU, but each end is still one Node event loop: extra queues can only help ' +
    'if a single connection, not the loop, is what limits a side.',
  async run(ctx) {
    if (ctx.kernelHost !== undefined) return kernelQueueGroups(ctx, queueGroups.title, queueGroups.hypothesis);
    const createdAt = new Date();
    const t = timing(ctx.quick);
    const reps = repetitions(ctx.quick);
    const notes: string[] = [];
    const arms = await withSplitTarget({ ram: '128M' }, async (s) => {
      const base = { traddr: s.target.addr, trsvcid: s.target.port, nqn: s.target.nqn, nr_io_queues: 1, queue_size: 128, ...s.connect };
      ctx.log('warm-up (unmeasured)');
      await runArmOnController(ctx, 'warmup', { ...base, queues_per_hctx: 4 }, warmupJob(ctx.quick), s.engine);
      const where = await s.where();
      const specs = WORKLOADS.flatMap((w) =>
        GROUPS.map((g) => {
          const name = `${w.id}/qph${g}`;
          const params = { workload: w.id, queues_per_hctx: g, nr_io_queues: 1, io_workers: ctx.ioWorkers ?? 0, ...where };
          return {
            name,
            metric: w.metric,
            run: async (): Promise<Arm> => {
              try {
                const r = await runArmOnController(ctx, name, { ...base, queues_per_hctx: g }, w.job(t), s.engine);
                return armFromRun(name, params, r.run, { ioQueues: r.ioQueues, hctxs: r.hctxs, ...r.workers });
              } catch (e) {
                return { name, params, metrics: {}, error: (e as Error).message };
              }
            },
          };
        }),
      );
      const out = await runInterleaved(specs, reps);
      notes.push(await s.describe());
      return s.finish(out);
    }, ctx);
    const comparisons = WORKLOADS.flatMap((w) =>
      [2, 4].map((g) => compare(arms, `${w.id}: qph${g} vs qph1 ${w.metric}`, w.metric, `${w.id}/qph${g}`, `${w.id}/qph1`, 'higher')),
    );
    const parts = comparisons.filter((c) => c !== undefined).map((c) => `${c.label.split(':')[0]} qph${c.numerator.split('qph')[1]}: ${round1(c.ratio)}×`);
    const best = comparisons.reduce((m, c) => (c !== undefined && c.ratio > m ? c.ratio : m), 0);
    notes.push(
      reps > 1
        ? `Each arm ran ${reps} times, interleaved (all arms once, then again); the table shows the repetition with the median ${WORKLOADS.map((w) => w.metric).join('/')}, and *Min/*Max the spread.`
        : 'One repetition per arm (--quick): ratios from single short runs are noisy; compare full runs.',
      'An unmeasured warm-up run precedes the arms (JIT warm-up of both processes).',
      'other CPU % is machine-wide busy time (/proc/stat) minus both ends: other processes on this shared host, and kernel softirq work.',
      'Issue 4 figures (7 -> 24 GB/s, 184k -> 252k IOPS) come from kernel hosts with NICs; compare ratios, not absolutes.',
    );
    return makeReport({
      kind: 'scenario',
      name: 'queue-groups',
      title: queueGroups.title,
      hypothesis: queueGroups.hypothesis,
      quick: ctx.quick,
      createdAt,
      arms,
      comparisons,
      verdict: `${best > 1.1 ? 'Queue groups helped' : 'Queue groups did not help measurably'} here (${parts.join(', ')}), with the target (${ctx.target === 'spdk' ? 'SPDK nvmf_tgt' : 'ours'}) in its own process on its own CPU${(ctx.ioWorkers ?? 0) > 0 ? ` and the I/O queues on ${ctx.ioWorkers} io workers` : ''}.${contentionText(arms)}`,
      notes,
      setup: splitSetupText(ctx),
    });
  },
};
