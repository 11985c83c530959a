// `nvme-tcp bench --initiator kernel`: the flags' refusals, one line and exit 2 before anything connects (the driver
// itself is tested against fake nvme-cli and fio in harness/kernel-host/host.test.ts; the lab runs are in
// test/interop/kernel-initiator.test.ts).
import { describe, expect, it } from 'vitest';
import { runBenchCli } from '../../cli/harness.js';

async function bench(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runBenchCli(argv, { stdout: (s) => (out += s), stderr: (s) => (err += s), progress: { isTTY: false, write: () => true } });
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
