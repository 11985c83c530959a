// `nvme-tcp bench` end to end: a job file against the in-process target, report files, and usage errors (exit 2).
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runBenchCli } from '../../cli/harness.js';
import type { Report } from '../../harness/report/types.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function tmp(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), 'nvme-tcp-bench-'));
  dirs.push(d);
  return d;
}

async function bench(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runBenchCli(argv, { stdout: (s) => (out += s), stderr: (s) => (err += s), progress: { isTTY: false, write: () => true } });
  return { code, out, err };
}

describe('nvme-tcp bench', () => {
  it('runs an fio job file against an in-process target and writes JSON, Markdown and HTML', async () => {
    const d = await tmp();
    const job = path.join(d, 'mixed.fio');
    await writeFile(job, '[global]\nioengine=libaio\nbs=4k\nruntime=300ms\nsize=4m\n[w]\nrw=randwrite\niodepth=8\nverify=crc32c\n[r]\nrw=randread\niodepth=8\nnumjobs=2\n');
    const r = await bench([job, '--out', d, '--ram', '16M']);
    expect(r.err).toMatch(/reports: .*mixed\.json .*mixed\.md .*mixed\.html/);
    expect(r.code).toBe(0);
    expect(r.out).toContain('## Workload mixed.fio');
    const rep = JSON.parse(await readFile(path.join(d, 'mixed.json'), 'utf8')) as Report;
    expect(rep.schemaVersion).toBe(1);
    expect(rep.kind).toBe('workload');
    const run = rep.arms[0]?.run;
    expect(run?.jobs.map((j) => [j.name, j.clones.length])).toEqual([
      ['w', 1],
      ['r', 2],
    ]);
    expect(run?.jobs.every((j) => j.ios > 0)).toBe(true);
    expect(run?.verify.mismatchCount).toBe(0);
    expect(run?.verify.checkedBlocks).toBeGreaterThan(0);
    expect(run?.queues.length).toBe(3);
    expect(rep.notes[0]).toContain('ioengine');
    expect(await readFile(path.join(d, 'mixed.html'), 'utf8')).toContain('data-chart="cdf"');
  }, 30_000);

  it('accepts JSON job files and prints the JSON report with --json', async () => {
    const d = await tmp();
    const job = path.join(d, 'j.json');
    await writeFile(job, JSON.stringify({ jobs: [{ name: 'seq', rw: 'read', bs: '64k', iodepth: 4, size: '2m' }] }));
    const r = await bench([job, '--json', '--ram', '8M']);
    expect(r.code).toBe(0);
    const rep = JSON.parse(r.out) as Report;
    expect(rep.arms[0]?.run?.totals.readBytes).toBe(2 * 1024 * 1024);
  }, 30_000);

  it('runs a scenario through the CLI and writes its reports', async () => {
    const d = await tmp();
    const r = await bench(['--scenario', 'parallel-connect', '--quick', '--out', d]);
    expect(r.code).toBe(0);
    expect(r.out).toContain('**Ratios**');
    const rep = JSON.parse(await readFile(path.join(d, 'parallel-connect.json'), 'utf8')) as Report;
    expect(rep.quick).toBe(true);
    expect(rep.comparisons).toHaveLength(3);
  }, 30_000);

  it.each([
    [['--bogus'], /^nvme-tcp bench: Unknown option '--bogus'; see nvme-tcp bench --help\n$/],
    [[], /need a job file, --scenario NAME or --list/],
    [['--scenario', 'nope'], /unknown scenario "nope"; one of: queue-groups, /],
    [['a.fio', 'b.fio'], /one job file at a time/],
    [['/nonexistent/x.fio'], /cannot read \/nonexistent\/x.fio: ENOENT/],
    [['x.fio', '--nr-io-queues', 'many'], /--nr-io-queues must be an integer/],
    [['--quick', 'x.fio'], /--quick applies to --scenario only/],
    [['--scenario', 'parallel-connect', '--io-workers', '2'], /--io-workers does not apply to scenario parallel-connect; it does to queue-groups, duplicate-connect, match-hw-queues/],
    [['--scenario', 'queue-groups', '--io-workers=-1'], /--io-workers must be an integer 0..4096, got "-1"/],
  ])('bad usage %j: one line, exit 2', async (argv, re) => {
    const r = await bench(argv);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(re);
    expect(r.err.trim().split('\n')).toHaveLength(1);
  });

  it('a job file error names the line; exit 2', async () => {
    const d = await tmp();
    const job = path.join(d, 'bad.fio');
    await writeFile(job, '[j]\nrw=randread\nbs=4z\n');
    const r = await bench([job]);
    expect(r.code).toBe(2);
    expect(r.err).toBe(`nvme-tcp bench: ${job}: line 3: cannot parse size "4z"\n`);
  });

  it('--list names every scenario', async () => {
    const r = await bench(['--list']);
    expect(r.code).toBe(0);
    expect(r.out.split('\n').filter(Boolean).map((l) => l.split(' ')[0])).toEqual(['queue-groups', 'duplicate-connect', 'parallel-connect', 'match-hw-queues', 'kernel-interop']);
  });
});
