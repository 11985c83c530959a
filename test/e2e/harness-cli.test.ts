// `nvme-tcp bench` end to end: a job file against the in-process target, report files, and usage errors (exit 2).
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runBenchCli } from '../../cli/harness.js';
import { fmtNum } from '../../harness/report/build.js';
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
    await writeFile(job, '[global]\ndirect=1\nbs=4k\nruntime=300ms\nsize=4m\n[w]\nrw=randwrite\niodepth=8\nverify=crc32c\n[r]\nrw=randread\niodepth=8\nnumjobs=2\n');
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
    expect(rep.notes[0]).toBe('fio options without effect here: direct');
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

  it('two different jobs: per-job rows (reads and writes apart), a labelled sum, readable HTML heads, -o json', async () => {
    const d = await tmp();
    const job = path.join(d, 'two.fio');
    await writeFile(job, '[global]\nruntime=300ms\nsize=4m\n[mix]\nrw=randrw\nbs=4k\niodepth=8\nverify=crc32c\n[seq]\nrw=read\nbs=64k\niodepth=4\noffset=4m\n');
    const r = await bench([job, '--out', d, '--ram', '16M']);
    expect(r.code, r.err).toBe(0);
    const rep = JSON.parse(await readFile(path.join(d, 'two.json'), 'utf8')) as Report;
    const run = rep.arms[0]?.run;
    const mix = run?.jobs.find((j) => j.name === 'mix');
    const seq = run?.jobs.find((j) => j.name === 'seq');
    if (run === undefined || mix === undefined || seq === undefined) throw new Error('jobs missing from the report');
    expect(mix.readIos > 0 && mix.writeIos > 0 && seq.writeIos === 0).toBe(true);

    // Markdown: no arm row blending a 4k randrw with a 64k read; one row per job, the mixed one split, then the sum.
    const md = r.out;
    const head = md.split('\n').find((l) => l.startsWith('| arm |')) ?? '';
    expect(head).not.toMatch(/\| (IOPS|MB\/s|p50 µs|p99 µs|p99\.9 µs) \|/);
    const rowOf = (job: string, dir: string): string | undefined => md.split('\n').find((l) => l.startsWith(`| ${job} |`) && l.includes(` | ${dir} | `));
    expect(rowOf('mix', 'all')).toContain(`| randrw bs=4k qd=8 | all | ${fmtNum(mix.iops)} | ${fmtNum(mix.mbps)} |`);
    expect(rowOf('mix', 'read')).toContain(`| read | ${fmtNum(mix.readIops)} | ${fmtNum(mix.readMbps)} | ${fmtNum(mix.readLatencyUs.p50)} |`);
    expect(rowOf('mix', 'write')).toContain(`| write | ${fmtNum(mix.writeIops)} | ${fmtNum(mix.writeMbps)} |`);
    expect(rowOf('seq', 'all')).toContain(`| read bs=64k qd=4 | all | ${fmtNum(seq.iops)} | ${fmtNum(seq.mbps)} | ${fmtNum(seq.latencyUs.p50)} |`);
    expect(rowOf('seq', 'read')).toBeUndefined();
    const sum = rowOf('all 2 jobs, at once', 'all');
    expect(sum).toContain(`| sum of the jobs' rates | all | ${fmtNum(mix.iops + seq.iops)} |`);
    expect(sum).toMatch(/\|\s+\|\s+\|\s+\| \d+ \| 0 \|$/); // no latency is made up for the sum
    // Verify counts the reads it checked, with their bytes; blocks are the namespace's LBAs.
    expect(run.verify.checkedReads).toBeGreaterThan(0);
    expect(run.verify.checkedBytes).toBe(run.verify.checkedBlocks * 512);
    expect(md).toContain(`Verify (workload): ${run.verify.checkedReads} reads verified (${fmtNum(run.verify.checkedBytes / 2 ** 20)} MiB in ${run.verify.checkedBlocks} blocks), 0 mismatches.`);

    // HTML: readable heads, never the JSON keys; the mixed job's reads and writes apart.
    const html = await readFile(path.join(d, 'two.html'), 'utf8');
    const heads = [...html.matchAll(/<th>([^<]*)<\/th>/g)].map((m) => m[1]);
    expect(heads).toEqual(expect.arrayContaining(['CPU %', 'loop lag p99 ms', 'p99.9 µs', 'dir']));
    expect(heads.filter((h) => /^[a-z]+[A-Z]\w*$|_/.test(h ?? ''))).toEqual([]); // no camelCase or snake_case key
    expect(html).toMatch(new RegExp(`<td>mix</td><td class="l">randrw bs=4k qd=8</td><td class="l">read</td><td>${fmtNum(mix.readIops)}</td>`));
    expect(html).toMatch(new RegExp(`<td>mix</td><td class="l">randrw bs=4k qd=8</td><td class="l">write</td><td>${fmtNum(mix.writeIops)}</td>`));

    // -o json, as every other verb takes it: the JSON report on stdout, per-job figures in it.
    const j = await bench([job, '-o', 'json', '--ram', '16M']);
    expect(j.code, j.err).toBe(0);
    const jr = JSON.parse(j.out) as Report;
    expect(jr.arms[0]?.run?.jobs.map((x) => [x.name, x.rw, x.bs, x.ios > 0, x.readIos > 0, x.writeIos > 0])).toEqual([
      ['mix', 'randrw', '4k', true, true, true],
      ['seq', 'read', '64k', true, true, false],
    ]);
  }, 30_000);

  it('stonewalled jobs ran one after another: no sum row', async () => {
    const d = await tmp();
    const job = path.join(d, 'seq.fio');
    await writeFile(job, '[global]\nruntime=150ms\nsize=2m\nbs=4k\n[a]\nrw=randwrite\n[b]\nstonewall\nrw=randread\n');
    const r = await bench([job, '--ram', '8M']);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^\| b \| randread bs=4k qd=1 \(after the jobs before\) \| all \|/m);
    expect(r.out).not.toContain('at once');
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
    [['--bogus'], /^nvme-tcp bench: unknown option '--bogus'; see nvme-tcp bench --help\n$/],
    [[], /need a job file, --scenario NAME or --list/],
    [['--scenario', 'nope'], /unknown scenario "nope"; one of: queue-groups, /],
    [['a.fio', 'b.fio'], /one job file at a time/],
    [['/nonexistent/x.fio'], /cannot read \/nonexistent\/x.fio: ENOENT/],
    [['x.fio', '--nr-io-queues', 'many'], /^nvme-tcp bench: --nr-io-queues many: not an integer; use e\.g\. 1\n$/],
    // The parsers connect uses: "1e3" is no port there either; -n and --ram are checked before anything starts.
    [['x.fio', '-a', '127.0.0.1', '-s', '1e3', '-n', 'nqn.2024-01.io.example:x'], /^nvme-tcp bench: --trsvcid 1e3: not an integer; use e\.g\. 1\n$/],
    [['x.fio', '-a', '127.0.0.1', '-n', 'x'.repeat(224)], /^nvme-tcp bench: --nqn "x+": cannot name a subsystem or host \(too long/],
    [['x.fio', '--ram', '1X'], /^nvme-tcp bench: --ram 1X: not a size; use bytes or a K\/M\/G\/T suffix \(e\.g\. 1G\)\n$/],
    [['x.fio', '-a', ''], /^nvme-tcp bench: -a\/--traddr: empty/],
    [['--quick', 'x.fio'], /--quick applies to --scenario only/],
    [['--scenario', 'parallel-connect', '--io-workers', '2'], /--io-workers does not apply to scenario parallel-connect; it does to queue-groups, duplicate-connect, match-hw-queues/],
    [['--scenario', 'queue-groups', '--io-workers=-1'], /^nvme-tcp bench: --io-workers -1: out of range; use 0\.\.4096\n$/],
    [['x.fio', '--output-format=terse'], /^nvme-tcp bench: --output-format must be normal or json, got "terse"\n$/],
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

  it.each([
    ['[global]\nioengine=libaio\n[j]\nrw=randread\n', 'line 2: ioengine=libaio: bench submits through its own NVMe/TCP initiator, not a kernel or plugin I/O engine; remove the line'],
    ['[j]\nfilename=/dev/nvme0n1\n', 'line 2: filename=/dev/nvme0n1: bench runs against the NVMe/TCP target of -a/-s/-n (or --target, or an in-process RAM target), not a file or device; remove the line and give the target with -a ADDR -s PORT -n NQN'],
  ])('a pasted job that names a device or I/O engine is refused, not run against RAM: %j', async (text, msg) => {
    const d = await tmp();
    const job = path.join(d, 'pasted.fio');
    await writeFile(job, text);
    const r = await bench([job, '--ram', '8M']);
    expect(r.err).toBe(`nvme-tcp bench: ${job}: ${msg}\n`);
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
  });

  it('randrw: reads and writes apart in the summary and the JSON, and --output-format json is the report the summary shows', async () => {
    const d = await tmp();
    const job = path.join(d, 'mix.fio');
    await writeFile(job, '[mix]\nrw=randrw\nrwmixread=70\nbs=4k\niodepth=4\nruntime=400ms\nsize=4m\n');
    const normal = await bench([job, '--ram', '8M', '--output-format=normal', '--out', d]);
    expect(normal.code).toBe(0);
    const rep = JSON.parse(await readFile(path.join(d, 'mix.json'), 'utf8')) as Report;
    const j = rep.arms[0]?.run?.jobs[0];
    if (j === undefined) throw new Error('no job in the report');
    expect(j.readIos).toBeGreaterThan(0);
    expect(j.writeIos).toBeGreaterThan(0);
    expect(j.readIos + j.writeIos).toBe(j.ios);
    expect(j.readLatencyUs.count).toBe(j.readIos);
    expect(j.writeLatencyUs.count).toBe(j.writeIos);
    expect(j.readIops + j.writeIops).toBeGreaterThanOrEqual(j.iops - 1);
    expect(j.readIops + j.writeIops).toBeLessThanOrEqual(j.iops + 1);
    expect(j.readMbps).toBeCloseTo((j.readBytes / j.durationMs) * 1000 / 1e6, 1);
    // 70 % reads: the split is the job's rwmixread, within the randomness of a few thousand draws.
    expect(j.readIos / j.ios).toBeGreaterThan(0.6);
    expect(j.readIos / j.ios).toBeLessThan(0.8);
    const rows = normal.out.split('\n').filter((l) => l.startsWith('| mix | randrw bs=4k qd=4 |'));
    expect(rows).toEqual([
      `| mix | randrw bs=4k qd=4 | all | ${fmtNum(j.iops)} | ${fmtNum(j.mbps)} | ${fmtNum(j.latencyUs.p50)} | ${fmtNum(j.latencyUs.p99)} | ${fmtNum(j.latencyUs.p99_9)} | ${j.ios} | 0 |`,
      `| mix | randrw bs=4k qd=4 | read | ${fmtNum(j.readIops)} | ${fmtNum(j.readMbps)} | ${fmtNum(j.readLatencyUs.p50)} | ${fmtNum(j.readLatencyUs.p99)} | ${fmtNum(j.readLatencyUs.p99_9)} | ${j.readIos} |  |`,
      `| mix | randrw bs=4k qd=4 | write | ${fmtNum(j.writeIops)} | ${fmtNum(j.writeMbps)} | ${fmtNum(j.writeLatencyUs.p50)} | ${fmtNum(j.writeLatencyUs.p99)} | ${fmtNum(j.writeLatencyUs.p99_9)} | ${j.writeIos} |  |`,
    ]);
    const json = await bench([job, '--ram', '8M', '--output-format', 'json']);
    expect(json.code).toBe(0);
    const printed = JSON.parse(json.out) as Report;
    expect(printed.arms[0]?.run?.jobs[0]?.readIos).toBeGreaterThan(0);
    expect(printed.arms[0]?.run?.jobs[0]?.writeIos).toBeGreaterThan(0);
  }, 30_000);

  it('a read-only job has no read or write rows of its own, and one job no sum', async () => {
    const d = await tmp();
    const job = path.join(d, 'r.fio');
    await writeFile(job, '[r]\nrw=randread\nbs=4k\nsize=1m\n');
    const r = await bench([job, '--ram', '8M']);
    expect(r.code).toBe(0);
    expect(r.out).toContain('## Workload r.fio');
    expect(r.out.split('\n').filter((l) => l.startsWith('| r |')).map((l) => l.split(' | ')[2])).toEqual(['all']);
    expect(r.out).not.toContain('at once');
  }, 30_000);

  it('--list names every scenario', async () => {
    const r = await bench(['--list']);
    expect(r.code).toBe(0);
    expect(r.out.split('\n').filter(Boolean).map((l) => l.split(' ')[0])).toEqual(['queue-groups', 'duplicate-connect', 'parallel-connect', 'match-hw-queues', 'kernel-interop']);
  });
});
