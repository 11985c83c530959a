// Shared arm runner: connect with the given options, run a job text against namespace 1, disconnect.
import { connect, type ConnectOptions, type Controller } from '../../initiator/index.js';
import { runJobs, type EngineOptions } from '../load/engine.js';
import { parseJobFile, resolveJobs } from '../load/job-file.js';
import type { RunResult } from '../load/types.js';
import { controllerBlockTarget } from '../nvme.js';
import type { ScenarioContext } from './types.js';

/** Runs `jobText` over one fresh controller; returns the run and the controller facts reports need. */
export async function runArmOnController(
  ctx: ScenarioContext,
  label: string,
  opts: ConnectOptions,
  jobText: string,
  engine: EngineOptions = {},
): Promise<{ run: RunResult; ioQueues: number; hctxs: number }> {
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
    return { run, ioQueues: ctrl.ioQueueCount, hctxs: ctrl.hctxs().length };
  } finally {
    await ctrl.disconnect();
  }
}
