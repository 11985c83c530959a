// Scenario parallel-connect: connect time of a controller with 64 I/O queues, serial (connect_concurrency=1, what
// Linux does) vs parallel (all at once), with 0, 1 and 5 ms of Connect latency injected at the target.
import { kernelParallelConnect } from './kernel-initiator.js';
import { connect } from '../../initiator/index.js';
import { startInProcessTarget } from '../nvme.js';
import { FaultProxy } from '../peers/proxy.js';
import { compare, makeReport } from '../report/build.js';
import type { Arm } from '../report/types.js';
import { allowedCpus } from './placement.js';
import { median, round1, type Scenario, type ScenarioContext } from './types.js';
import { withSplitTarget } from './workload.js';

const QUEUES = 64;
const LATENCIES = [0, 1, 5] as const;
/** ICResp is 128 bytes (NVMe-TCP 1.0 §3.6.2.3): the target's next bytes on every queue are the Connect response. */
const ICRESP_BYTES = 128;

/** A target to connect to, and how to make its Fabrics Connect completions `ms` later. */
interface ConnectTarget {
  traddr: string;
  port: number;
  nqn: string;
  setConnectLatency(ms: number): void;
}

/** Every latency × serial/parallel arm against `t`: the median of `reps` connect() calls each. */
async function connectArms(ctx: ScenarioContext, t: ConnectTarget, reps: number): Promise<Arm[]> {
  const arms: Arm[] = [];
  for (const lat of LATENCIES) {
    t.setConnectLatency(lat);
    for (const mode of ['serial', 'parallel'] as const) {
      const name = `${mode}-${lat}ms`;
      const params = { connectLatencyMs: lat, connect_concurrency: mode === 'serial' ? 1 : QUEUES, nr_io_queues: QUEUES, target: ctx.target ?? 'ours' };
      try {
        const times: number[] = [];
        let queues = 0;
        for (let i = 0; i < reps; i++) {
          ctx.log(`${name}: connect ${i + 1}/${reps}`);
          const t0 = performance.now();
          const c = await connect({ traddr: t.traddr, trsvcid: t.port, nqn: t.nqn, nr_io_queues: QUEUES, queue_size: 32, connect_concurrency: params.connect_concurrency });
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
  return arms;
}

/** Our target in this process: the latency is its own fault knob (TargetService.setFaults connectLatencyMs). */
async function oursArms(ctx: ScenarioContext, reps: number, notes: string[]): Promise<Arm[]> {
  const target = await startInProcessTarget({ size: '16M', maxIoQueues: QUEUES });
  try {
    const arms = await connectArms(ctx, { traddr: target.addr, port: target.port, nqn: target.nqn, setConnectLatency: (ms) => target.service.setFaults(target.nqn, { connectLatencyMs: ms }) }, reps);
    notes.push(
      'Connect latency is injected by the target before each Fabrics Connect completes (TargetService.setFaults connectLatencyMs), admin queue included.',
      `Initiator and target in this one process (pid ${process.pid}), allowed on CPUs ${await allowedCpus(process.pid)}, unpinned: connect time is dominated by round trips on one event loop, not by CPU placement.`,
    );
    return arms;
  } finally {
    await target.stop();
  }
}

/**
 * SPDK's nvmf_tgt has no Connect-latency knob, so every arm connects through the fault proxy, which holds each
 * connection's bytes from offset 128 on (the Connect response) for the injected latency; at 0 ms it only relays.
 */
async function spdkArms(ctx: ScenarioContext, reps: number, notes: string[]): Promise<Arm[]> {
  return withSplitTarget(
    { ram: '16M' },
    async (s) => {
      const proxy = await FaultProxy.start({ upstreamHost: s.target.addr, upstreamPort: s.target.port });
      try {
        const arms = await connectArms(ctx, { traddr: '127.0.0.1', port: proxy.port, nqn: s.target.nqn, setConnectLatency: (ms) => proxy.setFaults({ toClient: { stallAtOffset: ICRESP_BYTES, stallMs: ms } }) }, reps);
        notes.push(
          await s.describe(),
          `Connect latency is injected by the fault proxy (harness/peers/proxy.ts, in this process) in front of nvmf_tgt: it holds the target's bytes from offset ${ICRESP_BYTES} of each connection, the Fabrics Connect response after the ICResp, admin queue included. Every arm relays through it, so each pays the same extra hop.`,
        );
        return s.finish(arms);
      } finally {
        await proxy.close();
      }
    },
    ctx,
  );
}

export const parallelConnect: Scenario = {
  name: 'parallel-connect',
  title: 'Parallel connect: 64 I/O queues, serial vs parallel, with injected Connect latency',
  hypothesis:
    'Serial queue setup costs about 64 × (TCP handshake + ICReq + Connect round trip + injected latency); connecting the queues ' +
    'in parallel overlaps those waits, so the speedup grows with the injected latency (issue 4: 61 ms -> 11 ms for 64 queues). ' +
    'At 0 ms the gain is bounded by how fast one event loop handles 64 handshakes.',
  async run(ctx) {
    if (ctx.kernelHost !== undefined) return kernelParallelConnect(ctx, parallelConnect.title, parallelConnect.hypothesis);
    const createdAt = new Date();
    const reps = ctx.quick ? 1 : 5;
    const notes: string[] = [];
    const arms = ctx.target === 'spdk' ? await spdkArms(ctx, reps, notes) : await oursArms(ctx, reps, notes);
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
      verdict: `Parallel connect of ${QUEUES} queues${ctx.target === 'spdk' ? " against SPDK's nvmf_tgt" : ''}: ${txt.join('; ')}.`,
      notes: [
        `connectMs is the median of ${reps} connect() call(s) (admin queue, identify, ${QUEUES} I/O queues, namespace scan), wall time.`,
        ...notes,
        'The ratios read as: serial time / parallel time (above 1 = parallel is faster).',
      ],
      ...(ctx.target === 'spdk' ? { setup: 'loopback (127.0.0.1), SPDK nvmf_tgt in a child process behind the fault proxy, initiator in this one, one host' } : {}),
    });
  },
};
