// Every scenario in --quick mode: all arms ran (real measurements, no errors) and every ratio equals the quotient of
// the two arms' metrics it names. Scenarios that need privileges may skip, but only with a stated reason.
import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { findScenario } from '../../harness/scenarios/index.js';
import { allowedCpus } from '../../harness/scenarios/placement.js';
import type { Arm, Report } from '../../harness/report/types.js';

const quiet = { quick: true, log: () => undefined };

async function runQuick(name: string): Promise<Report> {
  const s = findScenario(name);
  if (s === undefined) throw new Error(`no scenario ${name}`);
  return s.run(quiet);
}

/** The checks every scenario report must pass when it ran. */
function checkRan(r: Report, expectArms: string[], expectComparisons: number): void {
  expect(r.schemaVersion).toBe(1);
  expect(r.hypothesis.length).toBeGreaterThan(40);
  expect(r.arms.map((a) => a.name)).toEqual(expectArms);
  for (const a of r.arms) {
    expect(a.error, `arm ${a.name} failed`).toBeUndefined();
    expect(a.skipped, `arm ${a.name} skipped`).toBeUndefined();
    expect(Object.keys(a.metrics).length).toBeGreaterThan(0);
    if (a.run !== undefined) {
      expect(a.run.totals.ios, `arm ${a.name} did no I/O`).toBeGreaterThan(0);
      expect(a.run.totals.errors).toBe(0);
      expect(a.metrics['iops']).toBe(a.run.totals.iops);
    }
  }
  expect(r.comparisons).toHaveLength(expectComparisons);
  for (const c of r.comparisons) {
    const num = r.arms.find((a) => a.name === c.numerator)?.metrics[c.metric];
    const den = r.arms.find((a) => a.name === c.denominator)?.metrics[c.metric];
    expect(num).toBe(c.numeratorValue);
    expect(den).toBe(c.denominatorValue);
    expect(num).toBeGreaterThan(0);
    expect(c.ratio).toBeCloseTo((num as number) / (den as number), 2);
  }
  expect(r.verdict).not.toBe('');
}

/** Split scenarios: the target ran in another process whose CPU was read, and the arm says where each end ran. */
function checkSplit(a: Arm): void {
  expect(a.run?.cpu.label).toBe('initiator');
  expect(a.run?.cpu.target?.source).toMatch(/^\/proc\/\d+\/stat$/);
  expect(a.metrics['targetCpuPct']).toBe(a.run?.cpu.target?.percentOfCore);
  expect(a.metrics['targetCpuPct']).toBeGreaterThan(0);
  const cpus = os.availableParallelism();
  if (cpus >= 2) {
    // Pinned apart: one CPU each, and not the same one.
    expect(a.params['initiatorCpus']).toMatch(/^\d+$/);
    expect(a.params['targetCpus']).toMatch(/^\d+$/);
    expect(a.params['initiatorCpus']).not.toBe(a.params['targetCpus']);
  }
}

describe('scenarios --quick', () => {
  it('queue-groups: qph 1/2/4 for both workloads, ratios against qph1, target in its own process on its own CPU', async () => {
    const before = await allowedCpus(process.pid);
    const r = await runQuick('queue-groups');
    checkRan(r, ['seq128k-qd16/qph1', 'seq128k-qd16/qph2', 'seq128k-qd16/qph4', 'rand4k-qd64/qph1', 'rand4k-qd64/qph2', 'rand4k-qd64/qph4'], 4);
    // The arms really used the queue layout they claim: one hctx, qph queues.
    for (const a of r.arms) {
      expect(a.metrics['hctxs']).toBe(1);
      expect(a.metrics['ioQueues']).toBe(a.params['queues_per_hctx']);
      expect(a.run?.queues.filter((q) => q.commands > 0).length).toBe(a.params['queues_per_hctx']);
      checkSplit(a);
    }
    // This process's CPU mask was restored after the scenario pinned it.
    expect(await allowedCpus(process.pid)).toBe(before);
  }, 60_000);

  it('duplicate-connect: 1 controller vs 2 duplicates (round-robin, queue-depth), target spread from listControllers', async () => {
    const r = await runQuick('duplicate-connect');
    checkRan(r, ['1-ctrl', '2-ctrl-round-robin', '2-ctrl-queue-depth'], 4);
    const [one, rr, qd] = r.arms;
    expect(one?.metrics['targetControllers']).toBe(1);
    expect(rr?.metrics['targetControllers']).toBe(2);
    expect(qd?.metrics['targetControllers']).toBe(2);
    expect(rr?.metrics['targetQueuesUsed']).toBe(4);
    expect(qd?.metrics['targetQueuesUsed']).toBe(4);
    expect(one?.metrics['targetQueuesUsed']).toBe(2);
    for (const a of r.arms) checkSplit(a);
    // Initiator side: the multipath arms spread commands over both controllers' queues.
    expect(new Set(rr?.run?.queues.filter((q) => q.commands > 0).map((q) => q.queue.split('q')[0]))).toEqual(new Set(['c0', 'c1']));
  }, 60_000);

  it('parallel-connect: serial vs parallel at 0/1/5 ms, 64 queues each, latency shows up in the serial arms', async () => {
    const r = await runQuick('parallel-connect');
    checkRan(r, ['serial-0ms', 'parallel-0ms', 'serial-1ms', 'parallel-1ms', 'serial-5ms', 'parallel-5ms'], 3);
    for (const a of r.arms) expect(a.metrics['ioQueues']).toBe(64);
    // 65 serial Connects with 5 ms each cannot take less than 325 ms: the fault really was injected.
    expect(r.arms.find((a) => a.name === 'serial-5ms')?.metrics['connectMs']).toBeGreaterThanOrEqual(325);
  }, 60_000);

  it('match-hw-queues: baseline vs matched through a veth namespace (or a stated reason to skip)', async () => {
    const r = await runQuick('match-hw-queues');
    if (r.skipped !== undefined) {
      expect(r.skipped).toMatch(/namespace|Linux/);
      expect(r.ok).toBe(false);
      return;
    }
    checkRan(r, ['baseline-randread', 'matched-randread'], 2);
    expect(r.arms[0]?.metrics['ioQueues']).toBe(8);
    expect(r.arms[1]?.metrics['ioQueues']).toBeLessThan(8);
    expect(r.arms[1]?.run?.cpu.target?.source).toMatch(/^\/proc\/\d+\/stat$/);
  }, 90_000);
});

describe('scenarios --quick --io-workers', () => {
  it('duplicate-connect on 2 io workers per controller: every arm ran its queues on workers, pinned apart from the target', async () => {
    const s = findScenario('duplicate-connect');
    const r = await (s as NonNullable<typeof s>).run({ ...quiet, ioWorkers: 2 });
    checkRan(r, ['1-ctrl', '2-ctrl-round-robin', '2-ctrl-queue-depth'], 4);
    const [one, rr] = r.arms;
    expect(one?.params['io_workers']).toBe(2);
    // Duplicate controllers share the process's 2 workers (one pool per io-worker settings, like Linux's nvme_tcp_wq).
    expect(one?.metrics['ioWorkers']).toBe(2);
    expect(rr?.metrics['ioWorkers']).toBe(2);
    expect(rr?.metrics['targetQueuesUsed']).toBe(4);
    for (const a of r.arms) {
      expect(a.metrics['ioWorkerMaxCpuPct']).toBeGreaterThan(0);
      // Every arm is classified from its threads: the busiest one and the CPUs the process may use were read.
      expect(a.metrics['busiestThreadPct']).toBeGreaterThan(0);
      expect(a.metrics['allowedCpus']).toBeGreaterThanOrEqual(1);
      expect(a.metrics['targetBusiestThreadPct']).toBeGreaterThan(0);
      if (os.availableParallelism() >= 2) expect(a.params['initiatorCpus']).not.toContain(String(a.params['targetCpus']));
    }
    expect(r.notes.join(' ')).toMatch(/I\/O queues on 2 io workers pinned over CPUs/);
  }, 90_000);

  it('match-hw-queues on io workers: match_hw_queues caps the workers at the NIC queue count', async () => {
    const s = findScenario('match-hw-queues');
    const r = await (s as NonNullable<typeof s>).run({ ...quiet, ioWorkers: 4 });
    if (r.skipped !== undefined) {
      expect(r.skipped).toMatch(/namespace|Linux/);
      return;
    }
    checkRan(r, ['baseline-randread', 'matched-randread'], 2);
    expect(r.arms[0]?.metrics['ioWorkers']).toBe(4);
    expect(r.arms[1]?.metrics['ioWorkers']).toBe(r.arms[1]?.metrics['ioQueues']);
    expect(r.arms[1]?.metrics['ioWorkers']).toBeLessThan(4);
  }, 90_000);
});
