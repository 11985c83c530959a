// Scenario parallel-connect: connect time of a controller with 64 I/O queues, serial (connect_concurrency=1, what
// Linux does) vs parallel (all at once), with 0, 1 and 5 ms of Connect latency injected at the target.
import { connect } from '../../initiator/index.js';
import { startInProcessTarget } from '../nvme.js';
import { compare, makeReport } from '../report/build.js';
import type { Arm } from '../report/types.js';
import { allowedCpus } from './placement.js';
import { median, round1, type Scenario } from './types.js';

const QUEUES = 64;
const LATENCIES = [0, 1, 5] as const;

export const parallelConnect: Scenario = {
  name: 'parallel-connect',
  oursOnly: 'it injects Connect latency at the target, a fault knob of ours that nvmf_tgt lacks',
  title: 'Parallel connect: 64 I/O queues, serial vs parallel, with injected Connect latency',
  hypothesis:
    'Serial queue setup costs about 64 × (TCP handshake + ICReq + Connect round trip + injected latency); connecting the queues ' +
    'in parallel overlaps those waits, so the speedup grows with the injected latency (issue 4: 61 ms -> 11 ms for 64 queues). ' +
    'At 0 ms the gain is bounded by how fast one event loop handles 64 handshakes.',
  async run(ctx) {
    const createdAt = new Date();
    const reps = ctx.quick ? 1 : 5;
    const cpus = await allowedCpus(process.pid);
    const target = await startInProcessTarget({ size: '16M', maxIoQueues: QUEUES });
    const arms: Arm[] = [];
    try {
      for (const lat of LATENCIES) {
        target.service.setFaults(target.nqn, { connectLatencyMs: lat });
        for (const mode of ['serial', 'parallel'] as const) {
          const name = `${mode}-${lat}ms`;
          const params = { connectLatencyMs: lat, connect_concurrency: mode === 'serial' ? 1 : QUEUES, nr_io_queues: QUEUES };
          try {
            const times: number[] = [];
            let queues = 0;
            for (let i = 0; i < reps; i++) {
              ctx.log(`${name}: connect ${i + 1}/${reps}`);
              const t0 = performance.now();
              const c = await connect({ traddr: target.addr, trsvcid: target.port, nqn: target.nqn, nr_io_queues: QUEUES, queue_size: 32, connect_concurrency: params.connect_concurrency });
              times.push(performance.now() - t0);
              queues = c.ioQueueCount;
              await c.disconnect();
            }
            arms.push({ name, params, metrics: { connectMs: round1(median(times)), minConnectMs: round1(Math.min(...times)), ioQueues: queues, repetitions: reps } });
          } catch (e) {
            arms.push({ name, params, metrics: {}, error: (e as Error).message });
          }
        }
      }
    } finally {
      await target.stop();
    }
    const comparisons = LATENCIES.map((l) => compare(arms, `serial / parallel connect time at ${l} ms`, 'connectMs', `serial-${l}ms`, `parallel-${l}ms`, 'lower'));
    const txt = comparisons.filter((c) => c !== undefined).map((c) => `${c.label.split(' at ')[1]}: ${c.numeratorValue} -> ${c.denominatorValue} ms (${round1(c.ratio)}× faster)`);
    return makeReport({
      kind: 'scenario',
      name: 'parallel-connect',
      title: parallelConnect.title,
      hypothesis: parallelConnect.hypothesis,
      quick: ctx.quick,
      createdAt,
      arms,
      comparisons,
      verdict: `Parallel connect of ${QUEUES} queues: ${txt.join('; ')}.`,
      notes: [
        `connectMs is the median of ${reps} connect() call(s) (admin queue, identify, ${QUEUES} I/O queues, namespace scan), wall time.`,
        'Connect latency is injected by the target before each Fabrics Connect completes (TargetService.setFaults connectLatencyMs), admin queue included.',
        'The ratios read as: serial time / parallel time (above 1 = parallel is faster).',
        `Initiator and target in this one process (pid ${process.pid}), allowed on CPUs ${cpus}, unpinned: connect time is dominated by round trips on one event loop, not by CPU placement.`,
      ],
    });
  },
};
