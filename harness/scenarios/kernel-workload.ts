// A job file with the Linux host as the initiator (`nvme-tcp bench JOBFILE --initiator kernel`): the host connects to
// our target as the scenarios do, runs the file through fio on the connected namespace, and the report is the
// workload report, one arm per job section; every controller is disconnected, fio failed or not.
import { fioJobFileArgv } from '../kernel-host/commands.js';
import { parseTimeMs, type ParsedJobFile } from '../load/job-file.js';
import { startInProcessTarget } from '../nvme.js';
import type { Arm, Report } from '../report/types.js';
import { fioMetrics, report, withKernelHost, type KernelRun } from './kernel-initiator.js';
import type { ScenarioContext } from './types.js';

export interface KernelJobFile {
  /** The report's name (the file's base name without extension) and the file name for the title. */
  name: string;
  file: string;
  jobs: ParsedJobFile;
  nrIoQueues?: number;
  queueSize?: number;
  /** Our in-process target's RAM namespace (--ram) and NQN (-n). */
  ram: string;
  nqn?: string;
}

/**
 * How long fio may run: every job's ramp_time + runtime one after the other (an upper bound: jobs without stonewall
 * run at once), plus two minutes for connect-side stalls; ten minutes when a job has no runtime (size-bound).
 */
function fioTimeoutMs(jobs: ParsedJobFile): number {
  let ms = 120_000;
  for (const j of jobs.jobs) {
    const eff = { ...jobs.global, ...j.options };
    if (eff['runtime'] === undefined) return 600_000;
    ms += parseTimeMs(eff['runtime']) + (eff['ramp_time'] === undefined ? 0 : parseTimeMs(eff['ramp_time']));
  }
  return ms;
}

/** Connects, runs fio on the namespace's block device, and makes one arm per job section (fio's group N). */
async function jobArms(k: KernelRun, nqn: string, j: KernelJobFile): Promise<Arm[]> {
  const c = await k.host.connect({
    traddr: k.traddr, trsvcid: k.trsvcid, nqn, ctrlLossTmo: 2,
    ...(j.nrIoQueues === undefined ? {} : { nrIoQueues: j.nrIoQueues }),
    ...(j.queueSize === undefined ? {} : { queueSize: j.queueSize }),
  });
  const sub = await k.host.subsystem(c.device);
  const dev = sub?.blockDevice ?? `/dev/${c.device}n1`;
  if (!(await k.host.waitBlock(dev))) throw new Error(`${dev} did not appear after nvme connect`);
  const queues = await k.host.ioQueues(c.device);
  const results = await k.host.fioRun(fioJobFileArgv(j.jobs, dev), fioTimeoutMs(j.jobs));
  return results.map((r) => {
    const section = j.jobs.jobs[r.groupid];
    const eff = { ...j.jobs.global, ...section?.options };
    const params: Arm['params'] = { device: dev, nr_io_queues: j.nrIoQueues ?? 'kernel default', ...pick(eff, ['rw', 'bs', 'iodepth', 'numjobs']) };
    return { name: section?.name ?? r.jobname, params, metrics: { ...fioMetrics(r), readIops: r.readIops, writeIops: r.writeIops, ...(queues === undefined ? {} : { ioQueues: queues }) } };
  });
}

const pick = (o: Record<string, string>, keys: string[]): Record<string, string> => Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k] as string]));

/** The job file through fio on the Linux host against an in-process target; a failed connect or fio is the report's one arm, failed. */
export async function kernelJobFile(ctx: ScenarioContext, j: KernelJobFile): Promise<Report> {
  const createdAt = new Date();
  const target = await startInProcessTarget({ size: j.ram, ...(j.nqn === undefined ? {} : { nqn: j.nqn }) });
  try {
    return await withKernelHost(ctx, target.port, 2, async (k) => {
      let arms: Arm[];
      try {
        arms = await jobArms(k, target.nqn, j);
      } catch (e) {
        arms = [{ name: 'workload', params: { nr_io_queues: j.nrIoQueues ?? 'kernel default' }, metrics: {}, error: (e as Error).message }];
      } finally {
        await k.host.disconnectAll().catch((e: Error) => ctx.log(`cleanup: ${e.message}`));
      }
      const notes = [
        `fio ran the job file on the Linux host with --ioengine=libaio --direct=1 --filename=<the connected namespace> --group_reporting --output-format=json; each section starts a reporting group (--new_group), its clones folded into one arm. A job with runtime and without time_based or verify gets --time_based, as runtime alone is time based in our engine.`,
        ...(j.jobs.ignored.length > 0 ? [`fio options the job-file reader drops (not passed to fio): ${j.jobs.ignored.join(', ')}`] : []),
      ];
      return report({ name: j.name, title: `Workload ${j.file} (Linux host)`, hypothesis: '', arms, comparisons: [], verdict: '', notes }, ctx, createdAt, k, 'workload');
    });
  } finally {
    await target.stop();
  }
}
