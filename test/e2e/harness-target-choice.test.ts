// The target choice of the split scenarios (`nvme-tcp bench --target ours|spdk`, ScenarioContext.target) where no
// SPDK is needed: what the CLI refuses, and how many CPUs pinning the target's cores apart takes. The runs against a
// real nvmf_tgt are in test/interop/spdk-scenario.test.ts.
import { describe, expect, it } from 'vitest';
import { runBenchCli } from '../../cli/harness.js';
import { allowedCpus, parseCpuList, pinApart } from '../../harness/scenarios/placement.js';
import { withSplitTarget } from '../../harness/scenarios/workload.js';

async function bench(argv: string[]): Promise<{ code: number; err: string }> {
  let err = '';
  const code = await runBenchCli(argv, { stdout: () => undefined, stderr: (s) => (err += s), progress: { isTTY: false, write: () => true } });
  return { code, err };
}

describe('nvme-tcp bench --target', () => {
  it('refuses a target a scenario cannot use, an unknown target, and SPDK-only flags without --target spdk', async () => {
    expect(await bench(['--scenario', 'parallel-connect', '--quick', '--target', 'spdk'])).toEqual({
      code: 2,
      err: 'nvme-tcp bench: --target spdk does not apply to scenario parallel-connect (it injects Connect latency at the target, a fault knob of ours that nvmf_tgt lacks); it does to queue-groups, duplicate-connect\n',
    });
    expect(await bench(['--scenario', 'duplicate-connect', '--target', 'linux'])).toEqual({ code: 2, err: 'nvme-tcp bench: --target must be ours or spdk, got "linux"\n' });
    expect(await bench(['--scenario', 'duplicate-connect', '--target-cores', '2'])).toEqual({ code: 2, err: 'nvme-tcp bench: --target-cores needs --target spdk\n' });
    expect(await bench(['--scenario', 'queue-groups', '--target', 'ours', '--spdk-interrupt'])).toEqual({ code: 2, err: 'nvme-tcp bench: --spdk-interrupt needs --target spdk\n' });
    expect(await bench(['--scenario', 'queue-groups', '--target', 'spdk', '--target-cores', '0'])).toEqual({ code: 2, err: 'nvme-tcp bench: --target-cores must be an integer 1..1024, got "0"\n' });
    expect(await bench(['job.fio', '--target', 'spdk'])).toEqual({ code: 2, err: 'nvme-tcp bench: --target applies to --scenario only\n' });
  });
});

describe('pinning the target apart', () => {
  it('reserves targetCores CPUs after the initiator\'s, or pins nothing and says why when there are too few', async () => {
    const before = await allowedCpus(process.pid);
    const allowed = parseCpuList(before);
    const p = await pinApart({ targetCores: allowed.length });
    try {
      expect(p.targetCpus).toEqual([]);
      expect(p.unpinnedReason).toMatch(allowed.length < 2 ? /only 1 CPU allowed/ : new RegExp(`only ${allowed.length} CPUs allowed: the target's ${allowed.length} and the initiator's one need ${allowed.length + 1}`));
      expect(await allowedCpus(process.pid)).toBe(before);
    } finally {
      await p.restore();
    }
    if (allowed.length < 2) return;
    const q = await pinApart({ targetCores: allowed.length - 1 });
    try {
      expect(q.initiatorCpus).toEqual([allowed[0]]);
      expect(q.targetCpus).toEqual(allowed.slice(1));
      expect(q.targetCpu).toBe(allowed[1]);
      expect(await allowedCpus(process.pid)).toBe(String(allowed[0]));
    } finally {
      await q.restore();
    }
    expect(await allowedCpus(process.pid)).toBe(before);
  });

  it('our target refuses more than one core (one event loop serves every queue) before starting anything', async () => {
    const before = await allowedCpus(process.pid);
    let started = false;
    await expect(
      withSplitTarget('16M', async () => {
        started = true;
      }, { target: 'ours', targetCores: 2 }),
    ).rejects.toThrow(/our target serves its queues on one event loop/);
    expect(started).toBe(false);
    expect(await allowedCpus(process.pid)).toBe(before);
  });
});
