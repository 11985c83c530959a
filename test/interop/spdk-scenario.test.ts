// SPDK's nvmf_tgt as the target of a harness scenario (ScenarioContext.target 'spdk', `nvme-tcp bench --target spdk`):
// duplicate-connect in quick mode against a real nvmf_tgt. SPDK must be built (../shared/spdk/build.sh, or SPDK_DIR):
// without it these tests fail with the build's instructions rather than skip.
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { findSpdk } from '../../harness/peers/spdk.js';
import type { Report } from '../../harness/report/types.js';
import { findScenario } from '../../harness/scenarios/index.js';
import { allowedCpus } from '../../harness/scenarios/placement.js';
import type { ScenarioContext } from '../../harness/scenarios/types.js';

async function runDuplicateConnect(ctx: Partial<ScenarioContext>): Promise<Report> {
  findSpdk();
  const s = findScenario('duplicate-connect');
  if (s === undefined) throw new Error('no scenario duplicate-connect');
  const before = await allowedCpus(process.pid);
  const r = await s.run({ quick: true, log: () => undefined, target: 'spdk', ...ctx });
  expect(await allowedCpus(process.pid)).toBe(before);
  return r;
}

/** What every SPDK run must show: SPDK named, every arm measured I/O, the spread read over SPDK's RPC, nvmf_tgt gone. */
function checkSpdkReport(r: Report, mode: 'interrupt' | 'polling'): void {
  expect(r.ok).toBe(true);
  expect(r.machine.setup).toMatch(/target \(SPDK nvmf_tgt\)/);
  const target = r.notes.find((n) => n.startsWith('Target: '));
  expect(target).toMatch(new RegExp(`^Target: SPDK nvmf_tgt \\(SPDK v\\d+\\.\\d+.*, ${mode === 'polling' ? 'polling' : 'interrupt mode'}, 1 reactor core\\)`));
  expect(r.arms.map((a) => a.name)).toEqual(['1-ctrl', '2-ctrl-round-robin', '2-ctrl-queue-depth']);
  for (const a of r.arms) {
    expect(a.error, `arm ${a.name} failed`).toBeUndefined();
    expect(a.params['target']).toBe('spdk');
    expect(a.params['targetMode']).toBe(mode);
    expect(a.run?.totals.errors).toBe(0);
    expect(a.metrics['iops']).toBeGreaterThan(0);
    expect(a.metrics['iops']).toBe(a.run?.totals.iops);
    expect(a.metrics['iopsPerTargetCore']).toBe(Math.round(a.metrics['iops'] as number));
    // One reactor core: one poll group serves every queue of the arm and completed its I/O.
    expect(a.metrics['targetGroups']).toBe(1);
    expect(a.metrics['targetQueueGroups']).toBe(1);
    expect(a.metrics['targetGroupsUsed']).toBe(1);
    expect(a.metrics['targetMaxGroupShare']).toBe(1);
    // SPDK counts per poll group, not per queue: the per-queue figures are absent rather than invented.
    expect(a.metrics['targetQueuesUsed']).toBeUndefined();
    expect(a.metrics['targetLoopLagP99Ms']).toBeUndefined();
  }
  const [one, rr, qd] = r.arms;
  expect([one, rr, qd].map((a) => a?.metrics['targetControllers'])).toEqual([1, 2, 2]);
  expect([one, rr, qd].map((a) => a?.metrics['targetIoQueues'])).toEqual([2, 4, 4]);
  expect(r.comparisons).toHaveLength(4);
  for (const c of r.comparisons) expect(c.ratio).toBeCloseTo(c.numeratorValue / c.denominatorValue, 2);
  // stop() waited for nvmf_tgt to exit.
  const pid = /\(pid (\d+), reactors on CPUs/.exec(target ?? '')?.[1];
  expect(pid).toBeDefined();
  expect(existsSync(`/proc/${pid}`)).toBe(false);
}

describe('SPDK nvmf_tgt as a scenario target', () => {
  it('duplicate-connect --quick against nvmf_tgt in interrupt mode: SPDK named, every arm measured, its CPU counted as load', async () => {
    const r = await runDuplicateConnect({ spdkInterrupt: true });
    checkSpdkReport(r, 'interrupt');
    for (const a of r.arms) expect(a.metrics['targetCpuPct']).toBeGreaterThan(0);
  }, 120_000);

  it('duplicate-connect --quick against a polling nvmf_tgt: its CPU share is reported apart and never makes an arm target-bound', async () => {
    const r = await runDuplicateConnect({});
    checkSpdkReport(r, 'polling');
    for (const a of r.arms) {
      expect(a.metrics['targetCpuPct']).toBeUndefined();
      expect(a.metrics['targetPollingCpuPct']).toBeGreaterThan(0);
      expect(a.bound?.some((b) => b.side === 'target') ?? false).toBe(false);
    }
    expect(r.notes.join(' ')).toMatch(/busy-poll: its CPU is 100 % of its cores by design/);
  }, 120_000);
});
