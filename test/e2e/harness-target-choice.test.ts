// The target choice of job files and scenarios (`nvme-tcp bench --target ours|spdk`, ScenarioContext.target) where no
// SPDK is needed: what the CLI refuses, a job file against our target in its own process, and how many CPUs pinning
// the target's cores apart takes. The runs against a real nvmf_tgt are in test/interop/spdk-scenario.test.ts.
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runBenchCli } from '../../cli/harness.js';
import type { Report } from '../../harness/report/types.js';
import { allowedCpus, parseCpuList, pinApart } from '../../harness/scenarios/placement.js';
import { withSplitTarget } from '../../harness/scenarios/workload.js';

async function bench(argv: string[]): Promise<{ code: number; err: string }> {
  let err = '';
  const code = await runBenchCli(argv, { stdout: () => undefined, stderr: (s) => (err += s), progress: { isTTY: false, write: () => true } });
  return { code, err };
}

describe('nvme-tcp bench --target', () => {
  it('refuses an unknown target, SPDK-only flags without --target spdk, and --target beside -a', async () => {
    expect(await bench(['--scenario', 'duplicate-connect', '--target', 'linux'])).toEqual({ code: 2, err: 'nvme-tcp bench: --target must be ours or spdk, got "linux"\n' });
    expect(await bench(['--scenario', 'duplicate-connect', '--target-cores', '2'])).toEqual({ code: 2, err: 'nvme-tcp bench: --target-cores needs --target spdk\n' });
    expect(await bench(['--scenario', 'queue-groups', '--target', 'ours', '--spdk-interrupt'])).toEqual({ code: 2, err: 'nvme-tcp bench: --spdk-interrupt needs --target spdk\n' });
    expect(await bench(['--scenario', 'queue-groups', '--target', 'spdk', '--target-cores', '0'])).toEqual({ code: 2, err: 'nvme-tcp bench: --target-cores 0: out of range; use 1..1024\n' });
    expect(await bench(['job.fio', '--spdk-interrupt'])).toEqual({ code: 2, err: 'nvme-tcp bench: --spdk-interrupt needs --target spdk\n' });
    expect(await bench(['job.fio', '-a', '127.0.0.1', '-n', 'nqn.2014-08.org.example:x', '--target', 'ours'])).toEqual({
      code: 2,
      err: 'nvme-tcp bench: -a names a running target and --target starts one: use one of them\n',
    });
  });

  it('a job file with --target ours runs against `nvme-tcp target` in its own process, pinned apart, its CPU read from /proc', async () => {
    const d = await mkdtemp(path.join(os.tmpdir(), 'nvme-tcp-bench-target-'));
    try {
      const job = path.join(d, 'r.fio');
      await writeFile(job, '[r]\nrw=randread\nbs=4k\niodepth=8\nsize=4m\nruntime=300ms\n');
      const before = await allowedCpus(process.pid);
      let out = '';
      const code = await runBenchCli([job, '--target', 'ours', '--ram', '8M', '--json'], { stdout: (s) => (out += s), stderr: () => undefined, progress: { isTTY: false, write: () => true } });
      expect(code).toBe(0);
      expect(await allowedCpus(process.pid)).toBe(before);
      const r = JSON.parse(out) as Report;
      const arm = r.arms[0];
      expect(arm?.params['target']).toBe('`nvme-tcp target`');
      expect(arm?.params['targetCores']).toBe(1);
      expect(arm?.run?.totals.readIos).toBeGreaterThan(0);
      expect(arm?.run?.totals.errors).toBe(0);
      // Not this process's CPU: the child's, from its /proc entry, and the child is gone afterwards.
      expect(arm?.run?.cpu.target?.source).toMatch(/^\/proc\/\d+\/stat$/);
      const pid = /\/proc\/(\d+)\/stat/.exec(arm?.run?.cpu.target?.source ?? '')?.[1];
      expect(Number(pid)).not.toBe(process.pid);
      expect(existsSync(`/proc/${pid}`)).toBe(false);
      expect(r.machine.setup).toMatch(/target \(`nvme-tcp target`\) in a child process/);
      expect(r.notes.some((n) => n.startsWith(`Target: \`nvme-tcp target\` in a child process (pid ${pid}`))).toBe(true);
    } finally {
      await rm(d, { recursive: true, force: true });
    }
  }, 60_000);
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
      withSplitTarget({ ram: '16M' }, async () => {
        started = true;
      }, { target: 'ours', targetCores: 2 }),
    ).rejects.toThrow(/our target serves its queues on one event loop/);
    expect(started).toBe(false);
    expect(await allowedCpus(process.pid)).toBe(before);
  });
});
