// SPDK's nvmf_tgt as the target of harness scenarios and job files (ScenarioContext.target 'spdk', `nvme-tcp bench
// --target spdk`): every scenario in quick mode (duplicate-connect, queue-groups, parallel-connect, match-hw-queues, kernel-interop), and a job file, against a real nvmf_tgt. SPDK must be built ($SPDK_SRC/build.sh, or SPDK_DIR):
// without its source the file skips, without a build of a provided source the tests fail, each with one line saying how.
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runBenchCli } from '../../cli/harness.js';
import { findSpdk, spdkSkipReason } from '../../harness/peers/spdk.js';
import type { Report } from '../../harness/report/types.js';
import { findScenario } from '../../harness/scenarios/index.js';
import { allowedCpus } from '../../harness/scenarios/placement.js';
import type { ScenarioContext } from '../../harness/scenarios/types.js';

// SPDK neither built nor its source provided (SPDK_SRC): skip, saying in one line how to provide it. With the source
// there but no build, the cases fail with the build command instead (CI builds it first).
const noSpdk = spdkSkipReason();
if (noSpdk !== undefined) describe('SPDK', () => it.skip(noSpdk, () => undefined));

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

describe.skipIf(noSpdk !== undefined)('SPDK nvmf_tgt as a scenario target', () => {
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

async function runScenario(name: string, ctx: Partial<ScenarioContext>): Promise<Report> {
  findSpdk();
  const s = findScenario(name);
  if (s === undefined) throw new Error(`no scenario ${name}`);
  return s.run({ quick: true, log: () => undefined, target: 'spdk', ...ctx });
}

describe.skipIf(noSpdk !== undefined)('SPDK nvmf_tgt as the target of every scenario and of job files', () => {
  it('a job file with --target spdk runs against nvmf_tgt in its own process, named in the report, IOPS per core given', async () => {
    findSpdk();
    const d = await mkdtemp(path.join(os.tmpdir(), 'nvme-tcp-spdk-job-'));
    try {
      const job = path.join(d, 'rw.fio');
      await writeFile(job, '[rw]\nrw=randrw\nbs=4k\niodepth=16\nsize=8m\nruntime=400ms\nverify=crc32c\n');
      let out = '';
      let err = '';
      const code = await runBenchCli([job, '--target', 'spdk', '--spdk-interrupt', '--ram', '16M', '--json'], { stdout: (s) => (out += s), stderr: (s) => (err += s), progress: { isTTY: false, write: () => true } });
      expect(code, err).toBe(0);
      const r = JSON.parse(out) as Report;
      const arm = r.arms[0];
      expect(arm?.params['target']).toMatch(/^SPDK nvmf_tgt \(SPDK v\d+\.\d+.*, interrupt mode, 1 reactor core\)$/);
      expect(arm?.params['targetMode']).toBe('interrupt');
      expect(arm?.run?.totals.errors).toBe(0);
      expect(arm?.run?.verify.checkedBlocks).toBeGreaterThan(0);
      expect(arm?.run?.verify.mismatchCount).toBe(0);
      expect(arm?.metrics['iopsPerTargetCore']).toBe(Math.round(arm?.metrics['iops'] as number));
      expect(arm?.metrics['targetCpuPct']).toBeGreaterThan(0);
      expect(r.machine.setup).toMatch(/target \(SPDK nvmf_tgt\) in a child process/);
    } finally {
      await rm(d, { recursive: true, force: true });
    }
  }, 120_000);

  it('parallel-connect --quick against nvmf_tgt: 64 queues each arm, the proxy\'s Connect stall shows in the serial arms', async () => {
    const r = await runScenario('parallel-connect', { spdkInterrupt: true });
    expect(r.ok).toBe(true);
    expect(r.arms.map((a) => a.name)).toEqual(['serial-0ms', 'parallel-0ms', 'serial-1ms', 'parallel-1ms', 'serial-5ms', 'parallel-5ms']);
    for (const a of r.arms) {
      expect(a.error, `${a.name}: ${a.error ?? ''}`).toBeUndefined();
      expect(a.metrics['ioQueues']).toBe(64);
      expect(a.params['target']).toBe('spdk');
    }
    const ms = (n: string): number => r.arms.find((a) => a.name === n)?.metrics['connectMs'] as number;
    // 65 serial Connects (admin + 64), each answered 5 ms late, cannot take less than 325 ms; parallel overlaps them.
    expect(ms('serial-5ms')).toBeGreaterThanOrEqual(325);
    expect(ms('parallel-5ms')).toBeLessThan(ms('serial-5ms'));
    expect(r.notes.join(' ')).toMatch(/fault proxy .* in front of nvmf_tgt/);
    expect(r.notes.find((n) => n.startsWith('Target: SPDK nvmf_tgt'))).toBeDefined();
  }, 120_000);

  it('queue-groups --quick against nvmf_tgt: one hctx over 1, 2 and 4 queues, ratios against qph1', async () => {
    const r = await runScenario('queue-groups', { spdkInterrupt: true });
    expect(r.ok).toBe(true);
    const names = ['seq128k-qd16', 'rand4k-qd64'].flatMap((w) => [1, 2, 4].map((g) => `${w}/qph${g}`));
    expect(r.arms.map((a) => a.name)).toEqual(names);
    for (const a of r.arms) {
      expect(a.error, `${a.name}: ${a.error ?? ''}`).toBeUndefined();
      expect(a.params['target']).toBe('spdk');
      expect(a.run?.totals.errors).toBe(0);
      expect(a.metrics['iops']).toBeGreaterThan(0);
      // One hctx over qph I/O queues, each a qpair that nvmf_tgt accepted.
      expect(a.metrics['hctxs']).toBe(1);
      expect(a.metrics['ioQueues']).toBe(a.params['queues_per_hctx']);
      expect(a.metrics['iopsPerTargetCore']).toBe(Math.round(a.metrics['iops'] as number));
    }
    expect(r.comparisons).toHaveLength(4);
    expect(r.notes.find((n) => n.startsWith('Target: SPDK nvmf_tgt'))).toBeDefined();
  }, 120_000);

  it('match-hw-queues --quick with nvmf_tgt inside the network namespace: matched picks fewer queues than the baseline', async () => {
    const r = await runScenario('match-hw-queues', { spdkInterrupt: true });
    if (r.skipped !== undefined) {
      // Only where namespaces are not allowed (no root): say so rather than pass quietly.
      expect(r.skipped).toMatch(/cannot create a network namespace/);
      return;
    }
    expect(r.ok).toBe(true);
    expect(r.arms.map((a) => a.name)).toEqual(['baseline-randread', 'matched-randread']);
    for (const a of r.arms) {
      expect(a.error, `${a.name}: ${a.error ?? ''}`).toBeUndefined();
      expect(a.run?.totals.errors).toBe(0);
      expect(a.metrics['iops']).toBeGreaterThan(0);
      expect(a.run?.cpu.target?.source).toMatch(/^\/proc\/\d+\/stat$/);
    }
    expect(r.arms[0]?.metrics['ioQueues']).toBe(8);
    expect(r.arms[1]?.metrics['ioQueues']).toBeLessThan(8);
    expect(r.notes.join(' ')).toMatch(/the target \(SPDK's nvmf_tgt\) is a child process inside the namespace/);
  }, 120_000);

  it('kernel-interop --quick with nvmf_tgt: the Linux host runs fio against it through guestfwd, beside nvmet (or the lab is missing)', async () => {
    const r = await runScenario('kernel-interop', { spdkInterrupt: true });
    if (r.skipped !== undefined) {
      expect(r.skipped).toMatch(/lab is not available/);
      return;
    }
    expect(r.arms.map((a) => a.name)).toEqual(['linux-host->spdk-target', 'linux-host->linux-target', 'ts-initiator->linux-target', 'ts-initiator->linux-target/verify']);
    for (const a of r.arms) {
      expect(a.error, `${a.name}: ${a.error ?? ''}`).toBeUndefined();
      expect(a.metrics['iops']).toBeGreaterThan(0);
    }
    expect(r.comparisons[0]?.numerator).toBe('linux-host->spdk-target');
    expect(r.comparisons[0]?.label).toMatch(/SPDK nvmf_tgt \/ linux target/);
    // nvmf_tgt itself counted the guest's I/O.
    const served = /SPDK nvmf_tgt completed (\d+) I\/O commands/.exec(r.notes.join(' '))?.[1];
    expect(Number(served)).toBeGreaterThan(0);
    expect(r.ok).toBe(true);
  }, 360_000);
});
