// `nvme-tcp bench --initiator kernel`: the flags' refusals, one line and exit 2 before anything connects (the driver
// itself is tested against fake nvme-cli and fio in harness/kernel-host/host.test.ts; the lab runs are in
// test/interop/kernel-initiator.test.ts).
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runBenchCli, type BenchIo } from '../../cli/harness.js';
import { fakeTools } from '../../harness/kernel-host/fake-tools.js';
import type { Report } from '../../harness/report/types.js';

async function bench(argv: string[], local?: BenchIo['kernelHostLocal']): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runBenchCli(argv, { stdout: (s) => (out += s), stderr: (s) => (err += s), progress: { isTTY: false, write: () => true }, ...(local === undefined ? {} : { kernelHostLocal: local }) });
  return { code, out, err };
}

/** Runs `fn` with an environment variable changed, restoring it afterwards. */
async function withEnv<T>(name: string, value: string, fn: () => Promise<T>): Promise<T> {
  const old = process.env[name];
  process.env[name] = value;
  try {
    return await fn();
  } finally {
    if (old === undefined) delete process.env[name];
    else process.env[name] = old;
  }
}

describe('nvme-tcp bench --initiator kernel: bad input', () => {
  it.each([
    [['--scenario', 'parallel-connect', '--initiator', 'kernel'], /--initiator kernel needs --lab 6\.1\|newest or --local/],
    [['--scenario', 'parallel-connect', '--initiator', 'kernel', '--lab', '6.1', '--local'], /needs --lab 6\.1\|newest or --local \(one of them\)/],
    [['--scenario', 'parallel-connect', '--lab', '6.1'], /--lab needs --initiator kernel/],
    [['--scenario', 'parallel-connect', '--initiator', 'linux'], /--initiator must be ours or kernel, got "linux"/],
    [['--scenario', 'parallel-connect', '--initiator', 'kernel', '--lab', '5.4'], /--lab must be 6\.1 or newest, got "5\.4"/],
    [['--scenario', 'kernel-interop', '--initiator', 'kernel', '--lab', '6.1'], /--initiator kernel runs parallel-connect, duplicate-connect, queue-groups, match-hw-queues; not kernel-interop/],
    [['--scenario', 'duplicate-connect', '--initiator', 'kernel', '--lab', '6.1', '--target', 'spdk'], /runs against our target only/],
    [['job.fio', '--initiator', 'kernel', '--local'], /apply to --scenario only/],
  ])('%j: one line, exit 2', async (argv, line) => {
    const r = await bench(argv);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(line);
    expect(r.err.trim().split('\n')).toHaveLength(1);
  });

  it('--local without nvme-cli and fio on PATH (or without root or nvme-tcp): names what is missing and how to get it', async () => {
    const r = await withEnv('PATH', '/nonexistent', () => bench(['--scenario', 'duplicate-connect', '--initiator', 'kernel', '--local', '--quick']));
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/^nvme-tcp bench: --initiator kernel --local needs (root.*sudo|the nvme-tcp module.*modprobe nvme-tcp|nvme and fio on PATH.*apt-get install nvme-cli fio)/);
    expect(r.err.trim().split('\n')).toHaveLength(1);
  });

  it('a lab kernel that is not built: the line names the build script', async () => {
    const a = await withEnv('LAB_OUT', '/nonexistent/lab', () => bench(['--scenario', 'parallel-connect', '--initiator', 'kernel', '--lab', '6.1']));
    expect(a.code).toBe(2);
    expect(a.err).toMatch(/the 6\.1 lab kernel is not built \(\/nonexistent\/lab\/vmlinuz missing\): run "bash .*build\.sh"/);
    const b = await withEnv('LAB7_OUT', '/nonexistent/lab7', () => bench(['--scenario', 'parallel-connect', '--initiator', 'kernel', '--lab', 'newest']));
    expect(b.code).toBe(2);
    expect(b.err).toMatch(/the newest lab kernel is not built .*: run "bash .*build-newest-kernel\.sh"/);
  });
});

describe('nvme-tcp bench --initiator kernel --local against fake nvme-cli and fio', () => {
  it('an arm whose nvme connect fails: exit 1, and the JSON, Markdown and HTML reports are still written', async () => {
    // A kernel with queues_per_hctx, so qph2 connects (the second connect, which fails) and qph4 runs after it.
    const fake = await fakeTools({ connectFail: 2, fabrics: 'instance=-1,cntlid=-1,transport=%s,traddr=%s,trsvcid=%s,nqn=%s,nr_io_queues=%d,queues_per_hctx=%d' });
    const out = await mkdtemp(path.join(os.tmpdir(), 'nvme-kernel-cli-'));
    try {
      const r = await bench(['--scenario', 'queue-groups', '--initiator', 'kernel', '--local', '--quick', '--out', out], { env: fake.env, root: fake.root, uid: 0 });
      expect(r.code).toBe(1);
      expect(r.err).toMatch(/reports: .*queue-groups\.json .*queue-groups\.md .*queue-groups\.html/);
      const rep = JSON.parse(await readFile(path.join(out, 'queue-groups.json'), 'utf8')) as Report;
      expect(rep.ok).toBe(false);
      expect(rep.arms.find((a) => a.name === 'qph1')?.metrics['iops']).toBe(100000);
      expect(rep.arms.find((a) => a.name === 'qph2')?.error).toMatch(/nvme connect failed \(exit 1\): .*Connection refused/);
      expect(rep.arms.find((a) => a.name === 'qph4')?.metrics['iops']).toBe(100000);
      expect(await readFile(path.join(out, 'queue-groups.md'), 'utf8')).toMatch(/qph2 \(error: nvme connect failed/);
      expect(await readFile(path.join(out, 'queue-groups.html'), 'utf8')).toContain('error: nvme connect failed');
    } finally {
      await rm(out, { recursive: true, force: true });
      await fake.cleanup();
    }
  }, 60_000);
});
