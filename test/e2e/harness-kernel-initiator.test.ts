// `nvme-tcp bench --initiator kernel`: the flags' refusals, one line and exit 2 before anything connects (the driver
// itself is tested against fake nvme-cli and fio in harness/kernel-host/host.test.ts; the lab runs are in
// test/interop/kernel-initiator.test.ts).
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
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
    [['--scenario', 'parallel-connect', '--initiator', 'kernel'], /--initiator kernel needs --lab 6\.1\|6\.12\|newest or --local/],
    [['--scenario', 'parallel-connect', '--initiator', 'kernel', '--lab', '6.1', '--local'], /needs --lab 6\.1\|6\.12\|newest or --local \(one of them\)/],
    [['--scenario', 'parallel-connect', '--lab', '6.1'], /--lab needs --initiator kernel/],
    [['--scenario', 'parallel-connect', '--initiator', 'linux'], /--initiator must be ours or kernel, got "linux"/],
    [['--scenario', 'parallel-connect', '--initiator', 'kernel', '--lab', '5.4'], /--lab must be 6\.1 or 6\.12 or newest, got "5\.4"/],
    [['--scenario', 'kernel-interop', '--initiator', 'kernel', '--lab', '6.1'], /--initiator kernel runs parallel-connect, duplicate-connect, queue-groups, match-hw-queues; not kernel-interop/],
    [['--scenario', 'duplicate-connect', '--initiator', 'kernel', '--lab', '6.1', '--target', 'spdk'], /runs against our target only/],
    [['job.fio', '--initiator', 'kernel', '--local', '-a', '127.0.0.1', '-n', 'nqn.x'], /^nvme-tcp bench: -a does not apply to a job file with --initiator kernel \(the harness starts our target for the Linux host\): drop it$/m],
    [['job.fio', '--initiator', 'kernel', '--lab', '6.1', '--queues-per-hctx', '2'], /--queues-per-hctx does not apply to a job file with --initiator kernel \(use --scenario queue-groups --initiator kernel\)/],
    [['job.fio', '--initiator', 'kernel', '--local', '--hdr-digest'], /--hdr-digest does not apply to a job file with --initiator kernel/],
    [['job.fio', '--initiator', 'kernel', '--local', '--io-workers', '2'], /--io-workers is our initiator's: drop it with --initiator kernel/],
    [['job.fio', '--lab', '6.1'], /--lab needs --initiator kernel/],
    [['job.fio', '--initiator', 'kernel'], /--initiator kernel needs --lab 6\.1\|6\.12\|newest or --local/],
    [['job.fio', '--initiator', 'kernel', '--local', '--host-patches', 'queues-per-hctx'], /^nvme-tcp bench: --host-patches applies to --scenario with --initiator kernel --lab newest$/m],
    [['--scenario', 'queue-groups', '--host-patches', 'queues-per-hctx'], /^nvme-tcp bench: --host-patches needs --initiator kernel --lab newest \(the series are built for the newest lab kernel\)$/m],
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

  it('a job file: connected as the scenarios do, fio runs it on the namespace with JSON output, one arm per section, all disconnected', async () => {
    const fake = await fakeTools();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'nvme-kernel-job-'));
    try {
      const job = path.join(dir, 'rand.fio');
      await writeFile(job, '[global]\nbs=4k\niodepth=16\nruntime=2\ndirect=1\n\n[randread]\nrw=randread\nnumjobs=2\n\n[verify]\nstonewall\nrw=randwrite\nverify=crc32c\nsize=8m\n');
      const r = await bench([job, '--initiator', 'kernel', '--local', '--nr-io-queues', '2', '--json', '--out', dir], { env: fake.env, root: fake.root, uid: 0 });
      expect(r.err).not.toMatch(/bench:/);
      expect(r.code).toBe(0);
      const rep = JSON.parse(r.out) as Report;
      expect(rep).toMatchObject({ kind: 'workload', name: 'rand', title: 'Workload rand.fio (Linux host)', initiator: { kind: 'kernel', where: 'local' }, ok: true });
      // The fake fio prints one group (groupid 0): the first section's arm, with fio's figures.
      expect(rep.arms).toHaveLength(1);
      expect(rep.arms[0]).toMatchObject({ name: 'randread', params: { device: '/dev/nvme0n1', nr_io_queues: 2, rw: 'randread', bs: '4k', iodepth: '16', numjobs: '2' }, metrics: { iops: 100000, readIops: 100000, writeIops: 0, ioQueues: 2 } });
      expect(rep.notes.join(' ')).toMatch(/job-file reader drops \(not passed to fio\): direct/);
      const calls = await fake.calls();
      expect(calls.filter((c) => c.startsWith('nvme connect'))).toEqual([expect.stringMatching(/--nr-io-queues=2 .*-o json$/)]);
      expect(calls.filter((c) => c.startsWith('fio'))).toEqual([
        'fio --output-format=json --group_reporting --ioengine=libaio --direct=1 --filename=/dev/nvme0n1 --bs=4k --iodepth=16 --runtime=2 ' +
          '--name=randread --new_group --rw=randread --numjobs=2 --time_based --name=verify --new_group --stonewall --rw=randwrite --verify=crc32c --verify_fatal=1 --size=8m',
      ]);
      expect(calls.filter((c) => c.startsWith('nvme disconnect'))).toEqual(['nvme disconnect -d nvme0']);
      expect(await readdir(path.join(fake.root, 'sys/class/nvme'))).toEqual([]);
      expect((await readdir(dir)).sort()).toEqual(['rand.fio', 'rand.html', 'rand.json', 'rand.md']);
    } finally {
      await rm(dir, { recursive: true, force: true });
      await fake.cleanup();
    }
  }, 60_000);

  it('a job file whose fio fails: exit 1, the arm carries fio\'s message, the controller is disconnected, the report is written', async () => {
    const fake = await fakeTools({ extraEnv: { FAKE_FIO_FAIL: '1' } });
    const dir = await mkdtemp(path.join(os.tmpdir(), 'nvme-kernel-job-'));
    try {
      const job = path.join(dir, 'rr.fio');
      await writeFile(job, '[rr]\nrw=randread\nruntime=1\n');
      const r = await bench([job, '--initiator', 'kernel', '--local', '--out', dir], { env: fake.env, root: fake.root, uid: 0 });
      expect(r.code).toBe(1);
      expect(r.out).toMatch(/workload \(error: fio failed \(exit 1\): .*Input\/output error\)/);
      expect((await fake.calls()).filter((c) => c.startsWith('nvme disconnect'))).toHaveLength(1);
      expect(await readdir(path.join(fake.root, 'sys/class/nvme'))).toEqual([]);
      expect(JSON.parse(await readFile(path.join(dir, 'rr.json'), 'utf8'))).toMatchObject({ ok: false });
    } finally {
      await rm(dir, { recursive: true, force: true });
      await fake.cleanup();
    }
  }, 60_000);

  it('a job file naming a filename or our initiator\'s hctx: one line naming the line and the fix, exit 2, nothing connected', async () => {
    const fake = await fakeTools();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'nvme-kernel-job-'));
    try {
      for (const [body, line] of [
        ['[a]\nrw=randread\nfilename=/dev/nvme0n1\n', /job\.fio: line 3: filename=\/dev\/nvme0n1: with --initiator kernel fio runs on the namespace the harness connects .*remove the line$/],
        ['[a]\nrw=randread\nhctx=1\n', /line 3: hctx=1: our initiator's submission context; .*blk-mq.*remove the line$/],
      ] as const) {
        await writeFile(path.join(dir, 'job.fio'), body);
        const r = await bench([path.join(dir, 'job.fio'), '--initiator', 'kernel', '--local'], { env: fake.env, root: fake.root, uid: 0 });
        expect(r.code).toBe(2);
        expect(r.err.trim()).toMatch(line);
        expect(r.err.trim().split('\n')).toHaveLength(1);
      }
      expect(await fake.calls()).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
      await fake.cleanup();
    }
  });
});
