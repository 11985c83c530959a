// The Linux-host driver's local runner against fake nvme-cli and fio on PATH (fake-tools.ts): the command lines it
// builds, fio JSON parsing, skipped arms with their reasons, and cleanup (every controller disconnected, even when
// fio fails). No root, no kernel module, no qemu.
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { findScenario } from '../scenarios/index.js';
import type { KernelHostChoice, ScenarioContext } from '../scenarios/types.js';
import { renderHtml } from '../report/html.js';
import { renderMarkdown } from '../report/markdown.js';
import { connectArgv, fabricsWriteScript, fioArgv, parseFabricsOptions, parseFioJson, parseIoQueueInfo } from './commands.js';
import { HostPatchesError, resolveHostPatches } from './host-patches.js';
import { fakeTools, FIO_JSON, type FakeTools } from './fake-tools.js';
import { nvmetSetupScript, nvmetTeardownScript, type NvmetConfig } from './nvmet.js';
import { localPrerequisites, localRunner, parseLabNet } from './runner.js';

let fake: FakeTools | undefined;
afterEach(async () => {
  await fake?.cleanup();
  fake = undefined;
});

const ctxFor = (f: FakeTools): ScenarioContext => ({ quick: true, log: () => undefined, kernelHost: { where: 'local', env: f.env, root: f.root, uid: 0 } });
const run = async (name: string, f: FakeTools) => (findScenario(name) as NonNullable<ReturnType<typeof findScenario>>).run(ctxFor(f));
/** Controllers left in the fake /sys after a run (the kernel's view of what is still connected). */
const leftConnected = async (f: FakeTools): Promise<string[]> => readdir(path.join(f.root, 'sys/class/nvme'));

describe('kernel host command lines', () => {
  it('nvme connect with every option, and fio with JSON output', () => {
    expect(connectArgv({ traddr: '10.0.2.100', trsvcid: 4420, nqn: 'nqn.x', nrIoQueues: 64, duplicate: true, queuesPerHctx: 2, ctrlLossTmo: 2 })).toEqual([
      'nvme', 'connect', '-t', 'tcp', '-a', '10.0.2.100', '-s', '4420', '-n', 'nqn.x', '--nr-io-queues=64', '--duplicate-connect', '--queues-per-hctx=2', '--ctrl-loss-tmo=2', '-o', 'json',
    ]);
    const f = fioArgv({ name: 'a', filename: '/dev/nvme0n1', rw: 'randread', bs: '4k', iodepth: 16, runtimeS: 2, size: '64m' });
    expect(f).toContain('--output-format=json');
    expect(f).toContain('--time_based');
    expect(fioArgv({ name: 'v', filename: '/dev/x', rw: 'randwrite', bs: '4k', iodepth: 16, runtimeS: 60, size: '8m', verify: 'crc32c' })).toContain('--verify=crc32c');
  });

  it("parses fio's JSON (after a warning line) and the option list of /dev/nvme-fabrics", () => {
    const r = parseFioJson(`fio: note: both iodepth >= 1 and synchronous I/O engine are selected\n${FIO_JSON}`);
    expect(r).toMatchObject({ iops: 100000, readIops: 100000, writeIops: 0, mbps: 409.6, p50Us: 148.5, p99Us: 255, error: 0, ios: 300001, fioVersion: 'fio-3.33' });
    expect(() => parseFioJson('fio: failed to open /dev/nvme9n1')).toThrow(/no JSON.*nvme9n1/);
    expect(parseFabricsOptions('instance=-1,cntlid=-1,transport=%s,nr_io_queues=%d,duplicate_connect\n')).toEqual(['instance', 'cntlid', 'transport', 'nr_io_queues', 'duplicate_connect']);
  });

  it('--local prerequisites: one line naming what is missing and how to get it', async () => {
    fake = await fakeTools();
    expect(localPrerequisites({ uid: 1000, env: fake.env, sysRoot: fake.root })).toMatch(/needs root.*sudo/);
    expect(localPrerequisites({ uid: 0, env: fake.env, sysRoot: path.join(fake.root, 'nowhere') })).toMatch(/nvme-tcp module.*modprobe nvme-tcp/);
    expect(localPrerequisites({ uid: 0, env: { PATH: '/nonexistent' }, sysRoot: fake.root })).toMatch(/needs nvme and fio on PATH.*apt-get install nvme-cli fio/);
    expect(localPrerequisites({ uid: 0, env: fake.env, sysRoot: fake.root })).toBeUndefined();
  });
});

describe('nvmet through configfs (a fake configfs tree)', () => {
  const cfg: NvmetConfig = { nqn: 'nqn.x:ref', traddr: '127.0.0.1', trsvcid: 4421, portId: 2, file: '/dev/shm/ref.img', sizeMb: 128 };

  it('the setup writes one subsystem, one file namespace (buffered), one tcp port linking it; the teardown removes them all', async () => {
    const f = (fake = await fakeTools({ nvmet: true }));
    const sh = (script: string) => localRunner({ env: f.env }).exec(['sh', '-c', script]);
    const T = path.join(fake.root, 'sys/kernel/config/nvmet');
    const up = await sh(nvmetSetupScript(cfg, fake.root));
    expect(up.stderr).toBe('');
    expect(up.code).toBe(0);
    const read = (p: string) => readFile(path.join(T, p), 'utf8');
    expect(await read('subsystems/nqn.x:ref/attr_allow_any_host')).toBe('1\n');
    expect(await read('subsystems/nqn.x:ref/namespaces/1/device_path')).toBe(`${fake.root}/dev/shm/ref.img`);
    expect(await read('subsystems/nqn.x:ref/namespaces/1/buffered_io')).toBe('1\n');
    expect(await read('subsystems/nqn.x:ref/namespaces/1/enable')).toBe('1\n');
    expect(await Promise.all(['addr_trtype', 'addr_adrfam', 'addr_traddr', 'addr_trsvcid'].map((f) => read(`ports/2/${f}`)))).toEqual(['tcp\n', 'ipv4\n', '127.0.0.1\n', '4421\n']);
    expect(await readlink(path.join(T, 'ports/2/subsystems/nqn.x:ref'))).toBe(path.join(T, 'subsystems/nqn.x:ref'));
    expect((await lstat(path.join(fake.root, 'dev/shm/ref.img'))).size).toBe(128 * 1024 * 1024);
    // configfs refuses to remove a subsystem that still has a namespace (the fake rmdir as well).
    expect((await sh(`rmdir ${T}/subsystems/nqn.x:ref`)).code).not.toBe(0);
    const down = await sh(nvmetTeardownScript(cfg, fake.root));
    expect(down.stderr).toBe('');
    expect(down.code).toBe(0);
    expect([...(await readdir(path.join(T, 'ports'))), ...(await readdir(path.join(T, 'subsystems'))), ...(await readdir(path.join(fake.root, 'dev/shm')))]).toEqual([]);
    // A second teardown finds nothing to undo and still succeeds.
    expect((await sh(nvmetTeardownScript(cfg, fake.root))).code).toBe(0);
  });
});

describe('scenarios with --initiator kernel --local (fake nvme-cli and fio)', () => {
  it('duplicate-connect: K duplicate controllers per iopolicy and placement, fio JSON in the arms, all disconnected', async () => {
    fake = await fakeTools();
    const r = await run('duplicate-connect', fake);
    expect(r.initiator).toMatchObject({ kind: 'kernel', where: 'local' });
    expect(r.arms.map((a) => a.name)).toEqual([
      '1-ctrl/single', '2-ctrl-round-robin/single', '2-ctrl-queue-depth/single', '2-ctrl-numa/single',
      '1-ctrl/queue', '2-ctrl-round-robin/queue', '2-ctrl-queue-depth/queue', '2-ctrl-numa/queue', '2-ctrl-round-robin/queue/verify',
      '1-ctrl/nvmet', '2-ctrl-round-robin/nvmet', '2-ctrl-queue-depth/nvmet', '2-ctrl-numa/nvmet', '2-ctrl-round-robin/nvmet/verify',
    ]);
    // No nvmet on this (fake) machine: its reference arms are skipped with the reason, never dropped.
    for (const a of r.arms.filter((x) => x.name.includes('/nvmet'))) expect(a.skipped, a.name).toMatch(/^nvmet is not available on this host \(no \/sys\/kernel\/config\/nvmet\): load it with "modprobe nvmet-tcp"/);
    expect(r.verdict).toMatch(/nvmet reference: skipped \(nvmet is not available/);
    expect(renderMarkdown(r)).toMatch(/1-ctrl\/nvmet \(skipped: nvmet is not available/);
    for (const a of r.arms.filter((x) => !x.name.includes('/nvmet'))) {
      expect(a.error, a.name).toBeUndefined();
      expect(a.metrics['iops'], a.name).toBe(100000);
      expect(a.metrics['paths'], a.name).toBe(a.params['controllers']);
      expect(a.metrics['targetWorker0Ios'], a.name).toBeTypeOf('number');
      expect(a.metrics['targetWorker1Ios'], a.name).toBeTypeOf('number');
    }
    const calls = await fake.calls();
    const connects = calls.filter((c) => c.startsWith('nvme connect'));
    expect(connects).toHaveLength(16); // 2 placements × (1 + 3 policies × 2) + 2 (verify)
    expect(connects.filter((c) => c.includes('--duplicate-connect'))).toHaveLength(14);
    expect(connects.every((c) => c.includes('--nr-io-queues=2') && c.includes('-o json'))).toBe(true);
    expect(calls.filter((c) => c.startsWith('nvme disconnect'))).toHaveLength(16);
    expect(calls.filter((c) => c.startsWith('fio')).every((c) => c.includes('--output-format=json'))).toBe(true);
    expect(calls.some((c) => c.startsWith('fio') && c.includes('--verify=crc32c'))).toBe(true);
    expect(await leftConnected(fake)).toEqual([]);
    expect(renderMarkdown(r)).toMatch(/Initiator: the Linux host \(nvme-cli \+ fio\), kernel .*, on this machine\./);
    // What the kernel offered, as probed: the fake's nvme-fabrics list, multipath, the iopolicy values the arms wrote.
    expect(r.initiator?.offers).toEqual({
      fabricsOptions: ['instance', 'cntlid', 'transport', 'traddr', 'trsvcid', 'nqn', 'queue_size', 'nr_io_queues', 'duplicate_connect', 'hostnqn', 'hostid'],
      multipath: true,
      iopolicy: 'numa',
      iopolicies: { accepted: ['round-robin', 'queue-depth', 'numa'], refused: [] },
      perQueue: {},
    });
    expect(renderMarkdown(r)).toMatch(/Kernel offers: nvme-fabrics options: instance, .*duplicate_connect.*; native multipath on, default iopolicy numa; iopolicy accepted: round-robin, queue-depth, numa, refused: none; per-queue io_cpu attribute: none; per-queue info: none\./);
    expect(renderHtml(r)).toContain('Kernel offers: nvme-fabrics options: instance,');
  }, 60_000);

  it('duplicate-connect with nvmet loaded: the reference arms connect to nvmet on 127.0.0.1, paths = K, verify, then nvmet is torn down', async () => {
    fake = await fakeTools({ nvmet: true });
    const r = await run('duplicate-connect', fake);
    const nv = r.arms.filter((a) => a.name.endsWith('/nvmet') || a.name.endsWith('/nvmet/verify'));
    expect(nv.map((a) => a.name)).toEqual(['1-ctrl/nvmet', '2-ctrl-round-robin/nvmet', '2-ctrl-queue-depth/nvmet', '2-ctrl-numa/nvmet', '2-ctrl-round-robin/nvmet/verify']);
    for (const a of nv) {
      expect(a.error, a.name).toBeUndefined();
      expect(a.skipped, a.name).toBeUndefined();
      expect(a.metrics['iops'], a.name).toBe(100000);
      expect(a.metrics['paths'], a.name).toBe(a.params['controllers']);
      expect(a.metrics['targetWorker0Ios'], a.name).toBeUndefined();
      expect(a.params['target'], a.name).toMatch(/^nvmet on this machine, 127\.0\.0\.1:\d+, file on \/dev\/shm$/);
    }
    // The fake nvme accepted these connects only because the configfs port linked the subsystem with its namespace enabled.
    const port = /127\.0\.0\.1:(\d+)/.exec(String(nv[0]?.params['target']))?.[1];
    const served = (await readFile(path.join(fake.root, 'nvmet-connects'), 'utf8')).trim().split('\n');
    expect(served).toHaveLength(1 + 2 * 3 + 2);
    expect(new Set(served)).toEqual(new Set([`nqn.2024-01.io.nvme-tcp-ts:nvmet-reference 127.0.0.1:${port}`]));
    const calls = await fake.calls();
    expect(calls.filter((c) => c.startsWith('nvme connect') && c.includes(`-a 127.0.0.1 -s ${port} -n nqn.2024-01.io.nvme-tcp-ts:nvmet-reference`))).toHaveLength(9);
    expect(calls.some((c) => c.startsWith('fio') && c.includes('--verify=crc32c') && c.includes('--filename=/dev/nvme'))).toBe(true);
    // Torn down after the last arm, every host disconnected first: nothing left in configfs or /dev/shm.
    expect(calls.filter((c) => c.startsWith('rmdir')).map((c) => c.replace(fake?.root ?? '', ''))).toEqual([
      'rmdir /sys/kernel/config/nvmet/ports/1', 'rmdir /sys/kernel/config/nvmet/subsystems/nqn.2024-01.io.nvme-tcp-ts:nvmet-reference/namespaces/1', 'rmdir /sys/kernel/config/nvmet/subsystems/nqn.2024-01.io.nvme-tcp-ts:nvmet-reference',
    ]);
    expect(calls.lastIndexOf(calls.filter((c) => c.startsWith('nvme disconnect')).pop() ?? '')).toBeLessThan(calls.findIndex((c) => c.startsWith('rmdir')));
    const T = path.join(fake.root, 'sys/kernel/config/nvmet');
    expect([...(await readdir(path.join(T, 'ports'))), ...(await readdir(path.join(T, 'subsystems'))), ...(await readdir(path.join(fake.root, 'dev/shm')))]).toEqual([]);
    expect(await leftConnected(fake)).toEqual([]);
    expect(r.comparisons.map((c) => c.label)).toEqual(expect.arrayContaining(['2 controllers round-robin vs 1 controller IOPS, nvmet', '1 controller: our target (placement single) vs nvmet IOPS', '2 controllers round-robin: our target (placement queue) vs nvmet IOPS']));
    expect(r.verdict).toMatch(/nvmet \(the reference, same host\): 1 controller 100000 IOPS, 2 duplicate controllers round-robin 100000 IOPS over 2 paths; fio verify: clean\./);
    expect(r.ok).toBe(true);
  }, 120_000);

  it('fio failing: the arm fails with fio\'s message, every controller it connected is disconnected, the report is still made', async () => {
    fake = await fakeTools({ extraEnv: { FAKE_FIO_FAIL: '1' } });
    const r = await run('duplicate-connect', fake);
    expect(r.ok).toBe(false);
    for (const a of r.arms.filter((x) => x.skipped === undefined)) expect(a.error, a.name).toMatch(/fio failed \(exit 1\): .*Input\/output error/);
    const calls = await fake.calls();
    expect(calls.filter((c) => c.startsWith('nvme disconnect')).length).toBe(calls.filter((c) => c.startsWith('nvme connect')).length);
    expect(await leftConnected(fake)).toEqual([]);
  }, 60_000);

  it('nvme connect failing mid-scenario: that arm fails with nvme-cli\'s message, the controllers it connected are disconnected, the rest run', async () => {
    // Connect 1 is 1-ctrl/single's; 2 and 3 are 2-ctrl-round-robin/single's two controllers: the second one fails.
    fake = await fakeTools({ connectFail: 3 });
    const r = await run('duplicate-connect', fake);
    expect(r.ok).toBe(false);
    const failed = r.arms.filter((a) => a.error !== undefined);
    expect(failed.map((a) => a.name)).toEqual(['2-ctrl-round-robin/single']);
    expect(failed[0]?.error).toMatch(/^nvme connect failed \(exit 1\): Failed to write to \/dev\/nvme-fabrics: Connection refused \/ could not add new controller/);
    for (const a of r.arms.filter((x) => x.error === undefined && x.skipped === undefined)) expect(a.metrics['iops'], a.name).toBe(100000);
    const calls = await fake.calls();
    const disconnects = calls.filter((c) => c.startsWith('nvme disconnect'));
    expect(disconnects).toHaveLength(calls.filter((c) => c.startsWith('nvme connect')).length - 1);
    // The failed arm's first controller (connect 2) is disconnected right after the failed connect (3), before the next arm.
    const third = calls.map((c, i) => (c.startsWith('nvme connect') ? i : -1)).filter((i) => i >= 0)[2] as number;
    expect(calls[third + 1]).toMatch(/^nvme disconnect -d nvme\d+$/);
    expect(calls[third + 2]).toMatch(/^nvme connect/);
    expect(await leftConnected(fake)).toEqual([]);
    expect(renderMarkdown(r)).toMatch(/2-ctrl-round-robin\/single \(error: nvme connect failed/);
  }, 60_000);

  it('arms the kernel cannot run are skipped with the reason: no queues_per_hctx, no multipath, no io_cpu attribute', async () => {
    fake = await fakeTools({ multipath: false });
    const qg = await run('queue-groups', fake);
    expect(qg.arms.find((a) => a.name === 'qph1')?.metrics['iops']).toBe(100000);
    for (const n of ['qph2', 'qph4']) expect(qg.arms.find((a) => a.name === n)?.skipped).toMatch(/nvme-fabrics does not accept queues_per_hctx/);
    expect(renderMarkdown(qg)).toMatch(/qph2 \(skipped: kernel .*queues_per_hctx/);
    expect((await fake.calls()).some((c) => c.includes('--queues-per-hctx'))).toBe(false);

    expect(qg.initiator?.offers).toMatchObject({ multipath: false });
    expect(qg.initiator?.offers?.fabricsOptions).not.toContain('queues_per_hctx');
    expect(renderMarkdown(qg)).toMatch(/Kernel offers: .*native multipath off/);

    const mh = await run('match-hw-queues', fake);
    for (const n of ['io-cpu-default', 'io-cpu-submitter']) expect(mh.arms.find((a) => a.name === n)?.skipped, n).toMatch(/no per-queue io_cpu attribute \(looked in \/sys\/class\/nvme\/nvme\d+\/queues\/\*\/io_cpu/);
    expect(mh.comparisons.map((c) => c.label)).toEqual(['matched vs baseline IOPS']);
    expect(mh.arms.find((a) => a.name === 'matched')?.params['nr_io_queues']).toBe(1);

    const dc = await run('duplicate-connect', fake);
    expect(dc.arms.filter((a) => a.name.startsWith('2-ctrl') && !a.name.includes('/nvmet')).every((a) => /native multipath is off/.test(a.skipped ?? ''))).toBe(true);
    expect(dc.arms.find((a) => a.name === '1-ctrl/single')?.metrics['iops']).toBe(100000);
    expect(await leftConnected(fake)).toEqual([]);
  }, 60_000);

  it('io_cpu where the kernel has the attribute: submitter arm writes fio\'s CPU to every queue and reads it back, default keeps connect\'s', async () => {
    fake = await fakeTools({ ioCpu: true });
    const r = await run('match-hw-queues', fake);
    // The fake's queues start on CPUs 0 and 1 (queue 1 → 0, queue 2 → 1); its highest online CPU is 1.
    expect(r.arms.find((a) => a.name === 'io-cpu-default')).toMatchObject({ params: { fioCpu: 1 }, metrics: { iops: 100000, submitterCpu: 1, queuesOnSubmitterCpu: 1, ioQueues: 2 } });
    expect(r.arms.find((a) => a.name === 'io-cpu-submitter')).toMatchObject({ params: { fioCpu: 1 }, metrics: { iops: 100000, submitterCpu: 1, queuesOnSubmitterCpu: 2, ioQueues: 2 } });
    expect(r.comparisons.map((c) => c.label)).toContain('io_cpu = submitter CPU vs connect-time choice IOPS, fio on CPU 1');
    expect(r.verdict).toMatch(/With fio on CPU 1, io_cpu set to that CPU ran at 1× the connect-time choice's IOPS\./);
    const fio = (await fake.calls()).filter((c) => c.startsWith('fio'));
    expect(fio.filter((c) => c.includes('--cpus_allowed=1'))).toHaveLength(2);
    expect(r.initiator?.offers?.perQueue).toEqual({ ioCpu: '/sys/class/nvme/nvmeN/queues/1/io_cpu', queueInfo: '/sys/class/nvme/nvmeN/queues' });
    expect(renderMarkdown(r)).toMatch(/per-queue io_cpu attribute: \/sys\/class\/nvme\/nvmeN\/queues\/1\/io_cpu; per-queue info: \/sys\/class\/nvme\/nvmeN\/queues\./);
    expect(await leftConnected(fake)).toEqual([]);
  }, 60_000);

  it('parallel-connect: nvme connect --nr-io-queues=64 at 0/1/5 ms, each controller disconnected', async () => {
    fake = await fakeTools();
    const r = await run('parallel-connect', fake);
    expect(r.arms.map((a) => a.name)).toEqual(['linux-0ms', 'linux-1ms', 'linux-5ms', 'refused-io-connect']);
    for (const a of r.arms.slice(0, 3)) expect(a.metrics).toMatchObject({ ioQueues: 64, repetitions: 2 });
    // The error path needs the lab's guest (its kernel log, io_timeout): skipped here with the reason, nothing run.
    expect(r.arms[3]?.skipped).toMatch(/^error paths run in the lab guest only/);
    const calls = await fake.calls();
    expect(calls.filter((c) => c.startsWith('nvme connect') && c.includes('--nr-io-queues=64'))).toHaveLength(6);
    expect(calls.filter((c) => c.startsWith('nvme disconnect'))).toHaveLength(6);
    expect(r.verdict).toMatch(/64 I\/O queues: each injected ms/);
  }, 60_000);

  it('kernelHost digests: every nvme connect asks for header and data digests (-g -G); without it none does', async () => {
    fake = await fakeTools();
    const ctx = ctxFor(fake);
    await (findScenario('parallel-connect') as NonNullable<ReturnType<typeof findScenario>>).run({ ...ctx, kernelHost: { ...(ctx.kernelHost as KernelHostChoice), digests: true } });
    const on = (await fake.calls()).filter((c) => c.startsWith('nvme connect'));
    expect(on).toHaveLength(6);
    for (const c of on) expect(c.split(' ').filter((w) => w.endsWith('-digest'))).toEqual(['--hdr-digest', '--data-digest']);
    await fake.cleanup();
    fake = await fakeTools();
    await run('parallel-connect', fake);
    const off = (await fake.calls()).filter((c) => c.startsWith('nvme connect'));
    expect(off).toHaveLength(6);
    for (const c of off) expect(c).not.toMatch(/digest/);
  }, 60_000);
});

describe('parseLabNet: run.sh\'s net line', () => {
  it('a tap with its device, addresses and queues; user-mode with and without the reason; none', () => {
    expect(parseLabNet('booting\nrun.sh: net=tap dev=nvlab12 host=10.201.3.1 guest=10.201.3.2 queues=4\nmore')).toEqual({ kind: 'tap', dev: 'nvlab12', hostIp: '10.201.3.1', guestIp: '10.201.3.2', queues: 4 });
    expect(parseLabNet('run.sh: net=user\n')).toEqual({ kind: 'user' });
    expect(parseLabNet('run.sh: net=user (no tap: run.sh is not root)\n')).toEqual({ kind: 'user', why: 'no tap: run.sh is not root' });
    // The end-of-run line carries net=tap too, without the fields: not the line to read.
    expect(parseLabNet('run.sh: accel=tcg smp=2 mem=1024M net=tap wall=10s script rc=0\n')).toBeUndefined();
  });
});

describe('host patch series (--host-patches)', () => {
  it('stock is no series; a seed name or a directory resolves to the directory holding its series file', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'host-patches-'));
    try {
      await mkdir(path.join(dir, 'queues-per-hctx'));
      await writeFile(path.join(dir, 'queues-per-hctx', 'series'), '0001-a.patch\n');
      expect(resolveHostPatches('stock')).toBeUndefined();
      expect(resolveHostPatches('queues-per-hctx', { HOST_PATCHES_SRC: dir })).toBe(path.join(dir, 'queues-per-hctx'));
      expect(resolveHostPatches(path.join(dir, 'queues-per-hctx'))).toBe(path.join(dir, 'queues-per-hctx'));
      expect(() => resolveHostPatches('nic-aware-queues', { HOST_PATCHES_SRC: dir })).toThrow(/^--host-patches nic-aware-queues: no .*nic-aware-queues\/series; set HOST_PATCHES_SRC/);
      expect(() => resolveHostPatches(dir)).toThrow(HostPatchesError);
      expect(() => resolveHostPatches(dir)).toThrow(/^--host-patches must be stock, queues-per-hctx, nic-aware-queues, parallel-queue-setup or a directory of patches with a series file; .* has no series file$/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('digests go to nvme connect as --hdr-digest / --data-digest and to /dev/nvme-fabrics as hdr_digest / data_digest', () => {
    const o = { traddr: 'a', trsvcid: 1, nqn: 'n' };
    expect(connectArgv({ ...o, hdrDigest: true, dataDigest: true }).filter((w) => w.includes('digest'))).toEqual(['--hdr-digest', '--data-digest']);
    expect(connectArgv({ ...o, hdrDigest: false, dataDigest: true }).filter((w) => w.includes('digest'))).toEqual(['--data-digest']);
    expect(connectArgv(o).filter((w) => w.includes('digest'))).toEqual([]);
    expect(fabricsWriteScript({ ...o, hdrDigest: true, dataDigest: true })).toContain('trsvcid=1,hdr_digest,data_digest');
    expect(fabricsWriteScript(o)).not.toMatch(/digest/);
  });

  it('match_hw_queues goes to /dev/nvme-fabrics as an option without a value', () => {
    const s = fabricsWriteScript({ traddr: '10.0.2.100', trsvcid: 4420, nqn: 'nqn.x', matchHwQueues: true, ctrlLossTmo: 2 });
    expect(s).toContain('o="nqn=nqn.x,transport=tcp,traddr=10.0.2.100,trsvcid=4420,match_hw_queues,ctrl_loss_tmo=2');
    expect(connectArgv({ traddr: 'a', trsvcid: 1, nqn: 'n', matchHwQueues: true })).toContain('--match-hw-queues');
    // reconnect_delay (the stalled-queue error path's fast recovery) both ways.
    expect(fabricsWriteScript({ traddr: 'a', trsvcid: 1, nqn: 'n', queuesPerHctx: 2, ctrlLossTmo: 30, reconnectDelay: 1 })).toContain('o="nqn=n,transport=tcp,traddr=a,trsvcid=1,queues_per_hctx=2,ctrl_loss_tmo=30,reconnect_delay=1');
    expect(connectArgv({ traddr: 'a', trsvcid: 1, nqn: 'n', reconnectDelay: 1 })).toContain('--reconnect-delay=1');
  });

  it('debugfs io_queue_info lines: IPv4 and IPv6 flows, unbound CPU, other lines left out', () => {
    const text = [
      'qid=1 cpu=0 src_ip=10.0.2.15 src_port=43852 dst_ip=10.0.2.100 dst_port=4420',
      'qid=2 cpu=-1 src_ip=fe80::1 src_port=65535 dst_ip=::1 dst_port=4420',
      'garbage qid=3',
      '',
    ].join('\n');
    expect(parseIoQueueInfo(text)).toEqual([
      { qid: 1, cpu: 0, srcIp: '10.0.2.15', srcPort: 43852, dstIp: '10.0.2.100', dstPort: 4420 },
      { qid: 2, cpu: -1, srcIp: 'fe80::1', srcPort: 65535, dstIp: '::1', dstPort: 4420 },
    ]);
    expect(parseIoQueueInfo('')).toEqual([]);
  });
});
