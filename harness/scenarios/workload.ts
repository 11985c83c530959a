// Shared arm machinery: run a job text over one fresh controller; run arms against a target in a pinned child process;
// repeat arms interleaved and keep the median, so one disturbed repetition cannot decide a ratio.
import { connect, type ConnectOptions, type Controller } from '../../initiator/index.js';
import { runJobs, type EngineOptions } from '../load/engine.js';
import { parseJobFile, resolveJobs } from '../load/job-file.js';
import type { RunResult } from '../load/types.js';
import { controllerBlockTarget } from '../nvme.js';
import type { Arm } from '../report/types.js';
import { allowedCpus, parseCpuList, pinApart, PlacementError, startSpdkTargetProcess, startTargetProcess, type Placement, type TargetKind, type TargetListen, type TargetProcess } from './placement.js';
import type { ScenarioContext } from './types.js';

/** Connect options that put an arm's I/O queues on ctx.ioWorkers io workers, pinned over `cpus` (round robin). */
export function ioWorkerConnect(ioWorkers: number | undefined, cpus: readonly number[]): Pick<ConnectOptions, 'io_workers' | 'io_worker_cpus'> {
  const n = ioWorkers ?? 0;
  if (n === 0) return {};
  return { io_workers: n, ...(cpus.length === 0 ? {} : { io_worker_cpus: [...cpus] }) };
}

/**
 * Per-arm io-worker figures from a controller about to disconnect: thread CPU of the busiest worker (% of the run's
 * wall time), submissions per batch over all workers, relinquish events. Empty without workers.
 */
export function ioWorkerMetrics(ctrl: Controller, wallMs: number): Record<string, number> {
  const ws = ctrl.ioWorkerInfo();
  if (ws.length === 0) return {};
  const ios = ws.reduce((s, w) => s + w.ios, 0);
  const batches = ws.reduce((s, w) => s + w.batches, 0);
  const cpu = ws.map((w) => w.cpuMs).filter((x): x is number => x !== undefined);
  return {
    ioWorkers: ws.length,
    ioWorkerIosPerBatch: batches === 0 ? 0 : Math.round((ios / batches) * 10) / 10,
    ioWorkerRelinquish: ws.reduce((s, w) => s + w.relinquish, 0),
    // cpuMs is the worker thread's CPU since it started (its connection's life); this arm's run is most of it.
    ...(cpu.length === 0 || wallMs <= 0 ? {} : { ioWorkerMaxCpuPct: Math.round((Math.max(...cpu) / wallMs) * 1000) / 10 }),
  };
}

/** Runs `jobText` over one fresh controller; returns the run and the controller facts reports need. */
export async function runArmOnController(
  ctx: ScenarioContext,
  label: string,
  opts: ConnectOptions,
  jobText: string,
  engine: EngineOptions = {},
): Promise<{ run: RunResult; ioQueues: number; hctxs: number; workers: Record<string, number> }> {
  ctx.log(`${label}: connecting`);
  const ctrl: Controller = await connect(opts);
  try {
    const target = controllerBlockTarget(ctrl, 1);
    const jobs = resolveJobs(parseJobFile(jobText), target);
    const run = await runJobs(target, jobs, {
      cpuLabel: 'initiator+target (same process)',
      ...engine,
      ...(ctx.onProgress === undefined ? {} : { onProgress: (p) => ctx.onProgress?.(label, p) }),
      ...(ctx.signal === undefined ? {} : { signal: ctx.signal }),
    });
    return { run, ioQueues: ctrl.ioQueueCount, hctxs: ctrl.hctxs().length, workers: ioWorkerMetrics(ctrl, run.wallMs) };
  } finally {
    await ctrl.disconnect();
  }
}

/** A target in its own process, pinned apart from this one when the machine allows it. */
export interface SplitSetup {
  target: TargetProcess;
  placement: Placement;
  /** The CPUs the target was given (SPDK: its reactor mask), for IOPS per core given. */
  targetCpus: readonly number[];
  /** Engine options that read the target's CPU from /proc and label ours as the initiator's. */
  engine: EngineOptions;
  /** Connect options every arm adds: io workers (ctx.ioWorkers) pinned on this process's CPUs. */
  connect: Pick<ConnectOptions, 'io_workers' | 'io_worker_cpus'>;
  /** Where each end was allowed to run, read back from the kernel, and which target ran (for arm params). */
  where(): Promise<{ initiatorCpus: string; targetCpus: string; target: TargetKind }>;
  /** One line for the report's notes. */
  describe(): Promise<string>;
  /**
   * The arms with this target's figures: IOPS per target core given, and a polling target's CPU share (100 % of its
   * cores by design) moved from targetCpuPct to targetPollingCpuPct, so the bound verdict does not read it as load.
   */
  finish(arms: Arm[]): Arm[];
}

export type SplitContext = Pick<ScenarioContext, 'ioWorkers' | 'target' | 'targetCores' | 'spdkInterrupt'>;

/** The report's setup line for a split scenario, naming the target. */
export function splitSetupText(ctx: SplitContext): string {
  const name = (ctx.target ?? 'ours') === 'spdk' ? 'SPDK nvmf_tgt' : '`nvme-tcp target`';
  return `loopback (127.0.0.1), target (${name}) in a child process, initiator in this one, one host`;
}

/** What the split target serves and where it listens. */
export interface SplitTargetOptions extends TargetListen {
  /** Size of its one RAM (ours) or malloc (SPDK) namespace, e.g. '128M'. */
  ram: string;
  nqn?: string;
}

/** Starts the chosen target on the CPUs the placement reserved (all allowed ones, for SPDK's mask, when unpinned). */
async function startSplitTarget(o: SplitTargetOptions, placement: Placement, ctx: SplitContext): Promise<{ target: TargetProcess; cpus: number[] }> {
  const cores = ctx.targetCores ?? 1;
  if ((ctx.target ?? 'ours') === 'ours') {
    // Ours serves every queue on one event loop: a wider mask would only let that one thread wander.
    if (cores !== 1) throw new PlacementError(`targetCores ${cores}: our target serves its queues on one event loop; more cores apply to SPDK's nvmf_tgt`);
    if (ctx.spdkInterrupt === true) throw new PlacementError('spdkInterrupt applies to SPDK\'s nvmf_tgt only');
    const target = await startTargetProcess({ ...o, ...(placement.targetCpu === undefined ? {} : { cpu: placement.targetCpu }) });
    return { target, cpus: placement.targetCpu === undefined ? parseCpuList(await allowedCpus(target.pid)) : [placement.targetCpu] };
  }
  const cpus = placement.targetCpus.length > 0 ? placement.targetCpus : parseCpuList(await allowedCpus(process.pid)).slice(-cores);
  return { target: await startSpdkTargetProcess({ ...o, cpus, interrupt: ctx.spdkInterrupt === true }), cpus };
}

/** The describe() line: which target, where each end ran, and what a polling target's CPU figure means. */
async function describeSplit(s: Pick<SplitSetup, 'target' | 'placement' | 'targetCpus' | 'where'>, ctx: SplitContext): Promise<string> {
  const { target, placement } = s;
  const w = await s.where();
  const pin = placement.unpinnedReason === undefined ? 'pinned with taskset' : `not pinned: ${placement.unpinnedReason}`;
  const workers = (ctx.ioWorkers ?? 0) > 0 ? ` I/O queues on ${ctx.ioWorkers} io workers pinned over CPUs ${placement.initiatorCpus.join(',') || '(unpinned)'}.` : '';
  const me = `initiator and engine in this process (pid ${process.pid}, CPUs ${w.initiatorCpus}); ${pin}. Target CPU is read from /proc/${target.pid}/stat.${workers}`;
  if (target.kind === 'ours') return `Target: ${target.label} in a child process (pid ${target.pid}, CPUs ${w.targetCpus}), RAM namespace; ${me}`;
  const mode = target.polls
    ? 'Its reactors busy-poll: its CPU is 100 % of its cores by design (targetPollingCpuPct, kept out of the bound verdict), so compare IOPS per target core (iopsPerTargetCore), not CPU.'
    : 'In interrupt mode its reactors sleep until work arrives, so its CPU figure is load, as ours is.';
  return `Target: ${target.label} in a child process (pid ${target.pid}, reactors on CPUs ${s.targetCpus.join(',')}, one poll group per core), malloc namespace; ${me} ${mode}`;
}

/** finish() of SplitSetup. */
function finishArms(arms: Arm[], target: TargetProcess, cores: number): Arm[] {
  return arms.map((a) => {
    if (a.error !== undefined || a.skipped !== undefined) return a;
    const m = { ...a.metrics };
    if (m['iops'] !== undefined) m['iopsPerTargetCore'] = Math.round(m['iops'] / cores);
    if (target.polls) {
      if (m['targetCpuPct'] !== undefined) m['targetPollingCpuPct'] = m['targetCpuPct'];
      delete m['targetCpuPct'];
      delete m['targetBusiestThreadPct'];
    }
    return { ...a, params: { ...a.params, targetCores: cores, ...(target.kind === 'spdk' ? { targetMode: target.polls ? 'polling' : 'interrupt' } : {}) }, metrics: m };
  });
}

/**
 * Starts the target (ctx.target: `nvme-tcp target`, or SPDK's nvmf_tgt on ctx.targetCores cores) as a child pinned
 * apart from this process, which is pinned to the first CPU (restored afterwards), runs `fn`, and always stops the
 * child and restores the mask.
 */
export async function withSplitTarget<T>(o: SplitTargetOptions, fn: (s: SplitSetup) => Promise<T>, ctx: SplitContext = {}): Promise<T> {
  const placement = await pinApart({ spread: (ctx.ioWorkers ?? 0) > 0, targetCores: ctx.targetCores ?? 1 });
  try {
    const { target, cpus } = await startSplitTarget(o, placement, ctx);
    try {
      const where = async (): Promise<{ initiatorCpus: string; targetCpus: string; target: TargetKind }> => ({
        initiatorCpus: await allowedCpus(process.pid),
        // SPDK's main thread is its first reactor; the mask is what it was given.
        targetCpus: target.kind === 'spdk' ? cpus.join(',') : await allowedCpus(target.pid),
        target: target.kind,
      });
      const base = { target, placement, targetCpus: cpus, where };
      const setup: SplitSetup = {
        ...base,
        connect: ioWorkerConnect(ctx.ioWorkers, placement.initiatorCpus),
        engine: { cpuLabel: 'initiator', targetCpu: () => target.cpu(), targetCpuSource: `/proc/${target.pid}/stat`, targetPid: target.pid },
        describe: () => describeSplit(base, ctx),
        finish: (arms) => finishArms(arms, target, cpus.length),
      };
      return await fn(setup);
    } finally {
      await target.stop();
    }
  } finally {
    await placement.restore();
  }
}

/**
 * Folds repetitions of one arm into one: the repetition with the median `metric` supplies the run and metrics, and
 * `${metric}Min` / `${metric}Max` show the spread. An arm with any failed repetition reports the first error.
 */
export function medianArm(name: string, reps: Arm[], metric: string): Arm {
  const failed = reps.find((a) => a.error !== undefined || a.skipped !== undefined);
  if (failed !== undefined || reps.length === 0) return failed ?? { name, params: {}, metrics: {}, error: 'no repetitions ran' };
  const sorted = [...reps].sort((a, b) => (a.metrics[metric] ?? 0) - (b.metrics[metric] ?? 0));
  const mid = sorted[Math.floor((sorted.length - 1) / 2)] as Arm;
  const values = sorted.map((a) => a.metrics[metric] ?? 0);
  return {
    ...mid,
    name,
    metrics: { ...mid.metrics, repetitions: reps.length, ...(reps.length > 1 ? { [`${metric}Min`]: values[0] as number, [`${metric}Max`]: values[values.length - 1] as number } : {}) },
  };
}

/**
 * Runs every arm `reps` times, interleaved (A B C A B C ...) so slow drift on a shared machine falls on every arm
 * alike, and returns one median arm per name, in the given order.
 */
export async function runInterleaved(arms: { name: string; metric: string; run: () => Promise<Arm> }[], reps: number): Promise<Arm[]> {
  const results = new Map<string, Arm[]>(arms.map((a) => [a.name, []]));
  for (let r = 0; r < reps; r++) for (const a of arms) (results.get(a.name) as Arm[]).push(await a.run());
  return arms.map((a) => medianArm(a.name, results.get(a.name) as Arm[], a.metric));
}

/** Repetitions per arm: one in quick mode, three otherwise. */
export const repetitions = (quick: boolean): number => (quick ? 1 : 3);

/**
 * An unmeasured run first: a fresh process spends its first few hundred milliseconds of I/O in the JIT (IOPS in the
 * first 100 ms intervals were a tenth of the steady state on this machine), which would otherwise land on whichever
 * arm runs first.
 */
export function warmupJob(quick: boolean): string {
  return `[warmup]\nrw=randrw\nbs=4k\niodepth=32\nsize=16m\nruntime=${quick ? '400ms' : '1500ms'}\nhctx=0\n`;
}

/**
 * A sentence for the verdict when other work competed for the CPUs (mean otherCpuPct over the arms above half a core),
 * or '' when the machine was quiet enough. Pinning keeps our two ends apart but cannot keep other processes off them.
 */
export function contentionText(arms: readonly Arm[]): string {
  const other = arms.map((a) => a.metrics['otherCpuPct']).filter((x): x is number => x !== undefined);
  if (other.length === 0) return '';
  const mean = other.reduce((s, x) => s + x, 0) / other.length;
  return mean > 50 ? ` The machine was busy: other work used on average ${Math.round(mean)}% of a core during the arms (other CPU %), so these figures are disturbed; compare runs on a quiet machine.` : '';
}
