import { describe, expect, it } from 'vitest';
import { JobFileError, formatBs, parseBsSplit, parseBytes, parseFioJobFile, parseJobFile, parseJsonJobFile, parseTimeMs, resolveJobs } from './job-file.js';

const GEO = { blockSize: 512, capacityBlocks: 2 * 1024 * 1024 }; // 1 GiB

describe('fio job files', () => {
  it('parses [global] + [job] sections, comments, bare flags and aliases', () => {
    const f = parseFioJobFile(`
; comment
[global]
direct=1   ; ignored with a note
group_reporting
bs=4k
iodepth=32
runtime=2
time_based

[rand-reads]
readwrite=randread
numjobs=2
# another comment
[seq-writes]
rw=write
blocksize=128k
stonewall
`);
    expect(f.global).toEqual({ bs: '4k', iodepth: '32', runtime: '2', time_based: '1' });
    expect(f.ignored).toEqual(['direct', 'group_reporting']);
    expect(f.jobs.map((j) => j.name)).toEqual(['rand-reads', 'seq-writes']);
    const jobs = resolveJobs(f, GEO);
    expect(jobs[0]).toMatchObject({ name: 'rand-reads', rw: 'randread', rwmixread: 100, iodepth: 32, numjobs: 2, runtimeMs: 2000, bssplit: [{ bs: 4096, weight: 100 }], stonewall: false });
    expect(jobs[1]).toMatchObject({ name: 'seq-writes', rw: 'write', rwmixread: 0, bssplit: [{ bs: 131072, weight: 100 }], stonewall: true });
  });

  it('applies size suffixes, percentages, offsets, rate, verify, ramp and rwmix', () => {
    const f = parseFioJobFile(`[j]\nrw=randrw\nrwmixwrite=30\nsize=64m\noffset=25%\nio_size=1g\nrate_iops=500\nverify=crc32c\nramp_time=500ms\nbssplit=4k/50:64k/50\nhctx=sub0\nrandseed=7\n`);
    const [j] = resolveJobs(f, GEO);
    expect(j).toMatchObject({
      rw: 'randrw',
      rwmixread: 70,
      size: 64 * 1024 * 1024,
      offset: 256 * 1024 * 1024,
      ioSize: 1024 ** 3,
      rateIops: 500,
      verify: true,
      rampMs: 500,
      hctx: 'sub0',
      seed: 7,
      runtimeMs: undefined,
    });
    expect(j?.bssplit).toEqual([
      { bs: 4096, weight: 50 },
      { bs: 65536, weight: 50 },
    ]);
  });

  it.each([
    ['[j]\nrw=sideways\n', /line 2: rw must be/],
    ['[j]\nbs=4q\n', /line 2: cannot parse size/],
    ['[j]\nfrobnicate=1\n', /line 2: unknown option "frobnicate"/],
    ['bs=4k\n', /line 1: option outside a \[section\]/],
    ['[global]\nbs=4k\n', /no \[job\] section/],
    ['[j]\nrwmixread=150\n', /rwmixread must be 0..100/],
    ['[j]\nverify=md5\n', /verify supports crc32c/],
    ['[a]\n[a]\n', /duplicate job "a"/],
  ])('rejects %j with a line-numbered error', (text, re) => {
    expect(() => parseFioJobFile(text)).toThrow(re);
    expect(() => parseFioJobFile(text)).toThrow(JobFileError);
  });

  it.each([
    ['[global]\nfilename=/dev/nvme0n1\n[j]\n', 'line 2: filename=/dev/nvme0n1: bench runs against the NVMe/TCP target of -a/-s/-n'],
    ['[j]\nrw=read\nioengine=libaio\n', 'line 3: ioengine=libaio: bench submits through its own NVMe/TCP initiator'],
    ['[j]\nioengine=io_uring\n', 'line 2: ioengine=io_uring: '],
    ['[j]\ndirectory=/mnt\n', 'line 2: directory=/mnt: bench runs against one NVMe/TCP namespace'],
  ])('refuses %j: a device, file or I/O engine it would silently not use', (text, msg) => {
    expect(() => parseFioJobFile(text)).toThrow(msg);
    expect(() => parseFioJobFile(text)).toThrow(JobFileError);
  });

  it('rejects jobs that do not fit the namespace geometry', () => {
    expect(() => resolveJobs(parseFioJobFile('[j]\nbs=1000\n'), GEO)).toThrow(/not a multiple of the 512-byte LBA/);
    expect(() => resolveJobs(parseFioJobFile('[j]\noffset=2g\n'), GEO)).toThrow(/beyond the namespace/);
    expect(() => resolveJobs(parseFioJobFile('[j]\nsize=2k\nbs=4k\n'), GEO)).toThrow(/smaller than the block size/);
  });
});

describe('JSON job files', () => {
  it('accepts the same options with numbers and booleans', () => {
    const f = parseJsonJobFile(JSON.stringify({ global: { bs: '4k', iodepth: 8, direct: 1 }, jobs: [{ name: 'a', rw: 'randread', runtime: 1 }, { rw: 'write', verify: true, stonewall: true }] }));
    expect(f.ignored).toEqual(['direct']);
    const jobs = resolveJobs(f, GEO);
    expect(jobs.map((j) => [j.name, j.rw, j.iodepth, j.verify, j.stonewall])).toEqual([
      ['a', 'randread', 8, false, false],
      ['job1', 'write', 8, true, true],
    ]);
  });

  it('parseJobFile picks JSON or fio syntax by content', () => {
    expect(parseJobFile('{"jobs":[{"name":"x"}]}').jobs[0]?.name).toBe('x');
    expect(parseJobFile('[y]\n').jobs[0]?.name).toBe('y');
  });

  it.each([
    ['[]', /must be an object/],
    ['{"jobs":[]}', /non-empty array/],
    ['{"jobs":[{"bs":[1]}]}', /must be a string, number or boolean/],
    ['{"jobs":[{"iodepth":-1}]}', /jobs\[0\]: iodepth must be a non-negative integer/],
    ['{"jobz":[]}', /unknown top-level key/],
    ['{"jobs":[{"filename":"/dev/nvme0n1"}]}', /^jobs\[0\]: filename=\/dev\/nvme0n1: bench runs against the NVMe\/TCP target/],
    ['{"global":{"ioengine":"libaio"},"jobs":[{}]}', /^global: ioengine=libaio: bench submits through its own NVMe\/TCP initiator/],
    ['{', /invalid JSON/],
  ])('rejects %s', (text, re) => {
    expect(() => parseJsonJobFile(text)).toThrow(re);
  });
});

describe('value syntax', () => {
  it('sizes, times and bssplit', () => {
    expect(parseBytes('4k')).toBe(4096);
    expect(parseBytes('1M')).toBe(1048576);
    expect(parseBytes('2g')).toBe(2 * 1024 ** 3);
    expect(parseBytes('16KiB')).toBe(16384);
    expect(parseBytes('512')).toBe(512);
    expect(parseTimeMs('10')).toBe(10_000);
    expect(parseTimeMs('250ms')).toBe(250);
    expect(parseTimeMs('2m')).toBe(120_000);
    expect(parseBsSplit('4k/20:8k:16k')).toEqual([
      { bs: 4096, weight: 20 },
      { bs: 8192, weight: 40 },
      { bs: 16384, weight: 40 },
    ]);
    expect(formatBs([{ bs: 4096, weight: 50 }, { bs: 1048576, weight: 50 }])).toBe('4k/50:1m/50');
  });
});
