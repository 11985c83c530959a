// SPDK v26.05's NVMe/TCP host (spdk_nvme_identify, spdk_nvme_perf, bdevperf over bdev_nvme) against our target, each
// a real SPDK process on a real socket: identify, perf (digests, several queues, two cores), write-read-compare
// verify, the same on `--workers 2`, discovery with its log-change AEN, namespace and ANA AENs, reconnect across a
// target restart, ANA multipath, DH-HMAC-CHAP and TLS. SPDK must be built ($SPDK_SRC/build.sh, see spdkSourceDir):
// without its source the file skips, without a build of a provided source every case fails, each with one line saying how.
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { findSpdk, spdkIdentify, spdkSkipReason, spdkPerf, type PerfResult, type TransportIdOptions } from '../../harness/peers/spdk.js';
import { withPeerDigests } from '../fixtures/peer-digests.js';
import { generateDhchapKey } from '../../protocol/auth/index.js';
import { formatTlsKey } from '../../protocol/tls/index.js';
import type { TargetService } from '../../target/index.js';
import {
  HOSTNQN,
  MODEL,
  SERIAL,
  SUBNQN,
  baseConfig,
  removeTempDirs,
  sampleIoQueues,
  spdkErrorLines,
  startBdevHost,
  startOurCliTarget,
  startOurServiceTarget,
  tempDir,
  waitFor,
  type BdevHost,
  type OurTarget,
  type PerformResult,
  type SampledQueue,
} from './spdk-host-lab.js';

const cleanups: Array<() => Promise<unknown>> = [];
async function runCleanups(): Promise<void> {
  for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
}
afterEach(runCleanups);
afterAll(async () => {
  await runCleanups();
  await removeTempDirs();
});

// SPDK neither built nor its source provided (SPDK_SRC): skip, saying in one line how to provide it. With the source
// there but no build, the cases fail with the build command instead (CI builds it first).
const noSpdk = spdkSkipReason();
if (noSpdk !== undefined) describe('SPDK', () => it.skip(noSpdk, () => undefined));
beforeAll(() => {
  if (noSpdk === undefined) findSpdk();
});

const NS_BYTES = 64 * 1024 * 1024;

interface PerfCase {
  workload: 'randread' | 'randrw';
  qd: number;
  ioSize: number;
  digests: boolean;
}

function perfCases(full: boolean): PerfCase[] {
  const all: PerfCase[] = [];
  for (const workload of ['randread', 'randrw'] as const)
    for (const qd of [1, 32])
      for (const ioSize of [4096, 131072])
        for (const digests of [false, true]) all.push({ workload, qd, ioSize, digests });
  if (full) return all;
  // For the workers' target, four that pair every level of each factor with both levels of every other one.
  return [
    { workload: 'randread', qd: 32, ioSize: 4096, digests: false },
    { workload: 'randread', qd: 1, ioSize: 131072, digests: true },
    { workload: 'randrw', qd: 1, ioSize: 4096, digests: true },
    { workload: 'randrw', qd: 32, ioSize: 131072, digests: false },
  ];
}

const MODES = [
  { label: 'one process', args: [] as string[], workers: 1, full: true },
  { label: '--workers 2', args: ['--workers', '2'], workers: 2, full: false },
];

describe.skipIf(noSpdk !== undefined).each(MODES)('SPDK host tools against our target ($label)', (mode) => {
  let t: OurTarget;
  let trid: TransportIdOptions;

  beforeAll(async () => {
    t = await startOurCliTarget({ config: baseConfig(), args: mode.args });
    trid = { traddr: t.addr, trsvcid: t.ports[0] as number, subnqn: SUBNQN, hostnqn: HOSTNQN };
  });
  afterAll(async () => {
    await t?.stop();
  });

  /** Runs perf while reading our controller's queues; checks what the target executed against what perf counted. */
  async function perfOnTarget(o: Parameters<typeof spdkPerf>[1]): Promise<{ perf: PerfResult; queues: Map<string, SampledQueue> }> {
    const before = await t.settledNsCommands(SUBNQN, 1);
    const { result: perf, queues } = await sampleIoQueues(t, SUBNQN, spdkPerf(trid, o));
    expect(perf.iops).toBeGreaterThan(0);
    expect(spdkErrorLines(perf.out)).toEqual([]);
    const after = await t.settledNsCommands(SUBNQN, 1);
    // perf counts what completed in its timed window; the target also executed what was in flight at the end.
    expect(after.reads + after.writes - before.reads - before.writes).toBeGreaterThanOrEqual(Math.floor(perf.iops * o.seconds * 0.95));
    const reads = after.reads - before.reads;
    const writes = after.writes - before.writes;
    if (o.workload === 'randread') expect(writes).toBe(0);
    else {
      // -M 70: each I/O is a read with probability 0.7; allow four standard deviations of the binomial share.
      const n = reads + writes;
      expect(Math.abs(reads / n - 0.7)).toBeLessThanOrEqual(Math.max(0.05, 4 * Math.sqrt((0.7 * 0.3) / n)));
    }
    return { perf, queues };
  }

  it('spdk_nvme_identify names our serial, model and subsystem, and namespace 1 with its size', async () => {
    const r = await spdkIdentify(trid);
    expect(r.code).toBe(0);
    expect(spdkErrorLines(r.out)).toEqual([]);
    expect(r.out).toMatch(new RegExp(`^Serial Number:\\s+${SERIAL}\\s*$`, 'm'));
    expect(r.out).toMatch(new RegExp(`^Model Number:\\s+${MODEL}\\s*$`, 'm'));
    expect(r.out).toMatch(new RegExp(`^Subsystem NQN:\\s+${SUBNQN.replace(/\./g, '\\.')}\\s*$`, 'm'));
    expect(r.out).toMatch(/^Namespace ID:1$/m);
    expect(r.out).toMatch(new RegExp(`^Size \\(in LBAs\\):\\s+${NS_BYTES / 512} `, 'm'));
    expect(r.out).toMatch(/^LBA Format #00: Data Size:\s+512 /m);
  });

  for (const c of perfCases(mode.full)) {
    const name = `perf ${c.workload}${c.workload === 'randrw' ? ' -M 70' : ''} QD${c.qd} ${c.ioSize / 1024} KiB, digests ${c.digests ? 'on' : 'off'}`;
    it(name, async () => {
      const { queues } = await perfOnTarget({ workload: c.workload, qd: c.qd, ioSize: c.ioSize, seconds: 1, ...(c.workload === 'randrw' ? { rwmixread: 70 } : {}), hdgst: c.digests, ddgst: c.digests });
      const busy = [...queues.values()].filter((q) => q.commands > 1);
      expect(busy.length).toBe(1);
      if (c.workload === 'randread') expectReadWire(busy[0] as SampledQueue, c);
    });
  }

  it('perf -P 4: four I/O queues of one controller, each carrying commands', async () => {
    const { queues } = await perfOnTarget({ workload: 'randread', qd: 16, ioSize: 4096, seconds: 2, args: ['-P', '4'] });
    const byCtrl = busyQueuesByController(queues);
    expect(byCtrl.size).toBe(1);
    const qs = [...byCtrl.values()][0] ?? [];
    expect(qs.length).toBeGreaterThanOrEqual(4);
    // `queue` placement (the default) deals a controller's I/O queues round-robin over the workers.
    if (mode.workers > 1) expect(new Set(qs.map((q) => q.worker)).size).toBe(mode.workers);
  });

  it('perf on two cores: one I/O queue per core, both carrying commands', async () => {
    const { queues } = await perfOnTarget({ workload: 'randrw', rwmixread: 70, qd: 16, ioSize: 4096, seconds: 2, cpus: [0, 1] });
    const byCtrl = busyQueuesByController(queues);
    expect(byCtrl.size).toBe(1);
    expect(([...byCtrl.values()][0] ?? []).length).toBeGreaterThanOrEqual(2);
  });

  it('bdevperf -w verify for 5 s at 4 KiB, then at 128 KiB with digests: every block read back as written', async () => {
    const h = await startBdevHost();
    cleanups.push(() => h.stop());
    for (const v of [
      { name: 'N0', ioSize: 4096, digests: false },
      { name: 'N1', ioSize: 131072, digests: true },
    ]) {
      const before = await t.settledNsCommands(SUBNQN, 1);
      expect(await h.attach({ name: v.name, traddr: t.addr, trsvcid: t.ports[0] as number, subnqn: SUBNQN, hostnqn: HOSTNQN, hdgst: v.digests, ddgst: v.digests })).toEqual([`${v.name}n1`]);
      const r = await verifyRun(h, { seconds: 5, ioSize: v.ioSize });
      expect(r.results.map((j) => j.job)).toEqual([`${v.name}n1`]);
      const after = await t.settledNsCommands(SUBNQN, 1);
      // verify writes each block, then reads it back: both directions reached the namespace.
      expect(after.writes - before.writes).toBeGreaterThan(0);
      expect(after.reads - before.reads).toBeGreaterThan(0);
      await h.call('bdev_nvme_detach_controller', { name: v.name });
    }
  });

  // perf copies the transport ID's hostnqn into its controller options as is (perf.c add_trid / register_ctrlr), so
  // without `hostnqn:` its Connect data carries an empty HOSTNQN (NVMe-oF 1.1 §3.3.1). spdk_nvme_identify instead
  // starts from spdk_nvme_ctrlr_get_default_ctrlr_opts, which makes one up from the host ID.
  it('perf without hostnqn: sends an empty HOSTNQN, admitted (any host allowed) with a warning', async () => {
    const from = t.log.length;
    const { hostnqn: _h, ...anon } = trid;
    const hostnqns = new Set<string>();
    const seen = sampleHostnqns(t, hostnqns);
    const perf = await spdkPerf(anon, withPeerDigests<Parameters<typeof spdkPerf>[1]>({ workload: 'randread', qd: 1, ioSize: 4096, seconds: 1 })).finally(() => seen.stop());
    await seen.done;
    expect(perf.iops).toBeGreaterThan(0);
    expect(spdkErrorLines(perf.out)).toEqual([]);
    expect([...hostnqns]).toEqual(['']);
    await waitFor('the warning in our log', () => t.log.slice(from).some((l) => l.includes('"level":40') && l.includes('empty host NQN admitted')), 5000);
  });
});

describe.skipIf(noSpdk !== undefined)('SPDK bdev_nvme host against our target', () => {
  const SUBNQN2 = `${SUBNQN}-2`;

  async function serviceTarget(o: Parameters<typeof baseConfig>[0] = {}): Promise<OurTarget & { service: TargetService }> {
    const t = await startOurServiceTarget(baseConfig(o));
    cleanups.push(() => t.stop());
    return t;
  }

  async function bdevHost(): Promise<BdevHost> {
    const h = await startBdevHost();
    cleanups.push(() => h.stop());
    return h;
  }

  /** Our controllers of `subnqn` (I/O controllers only) with their port and I/O commands so far. */
  async function ioByPort(t: OurTarget, subnqn: string): Promise<Map<number, number>> {
    const out = new Map<number, number>();
    for (const c of await t.controllers()) {
      if (c.subnqn !== subnqn || c.discovery) continue;
      const n = c.queues.filter((q) => q.qid > 0).reduce((a, q) => a + q.commands, 0);
      out.set(c.portId, (out.get(c.portId) ?? 0) + n);
    }
    return out;
  }

  it('discovery: bdev_nvme_start_discovery attaches our subsystem, and a subsystem added later by itself (Discovery Log Change AEN)', async () => {
    const t = await serviceTarget();
    const h = await bdevHost();
    await h.call('bdev_nvme_start_discovery', { name: 'D', trtype: 'tcp', adrfam: 'ipv4', traddr: t.addr, trsvcid: String(t.ports[0]), hostnqn: HOSTNQN, wait_for_attach: true });
    const info = await h.call<Array<{ name: string; trid: { subnqn: string } }>>('bdev_nvme_get_discovery_info');
    expect(info.map((d) => [d.name, d.trid.subnqn])).toEqual([['D', 'nqn.2014-08.org.nvmexpress.discovery']]);
    const subnqns = async (): Promise<string[]> => (await h.controllers()).flatMap((c) => c.ctrlrs.map((x) => x.trid.subnqn)).sort();
    expect(await subnqns()).toEqual([SUBNQN]);
    expect((await h.bdevs()).map((b) => [b.name, b.num_blocks])).toEqual([['D0n1', NS_BYTES / 512]]);
    // SPDK keeps its discovery controller connected, with an AER outstanding for the log change.
    const disc = (await t.controllers()).filter((c) => c.discovery);
    expect(disc.map((c) => c.hostnqn)).toEqual([HOSTNQN]);

    // bdev_nvme re-reads the discovery log only when the AER completes (bdev_nvme.c discovery_aer_cb): no polling.
    await t.service.addSubsystem({ nqn: SUBNQN2, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '8M' } }] });
    await waitFor('SPDK attached the new subsystem', async () => (await subnqns()).length === 2, 5000);
    expect(await subnqns()).toEqual([SUBNQN, SUBNQN2].sort());
    const added = await waitFor('its bdev', async () => (await h.bdevs()).find((b) => b.num_blocks === (8 << 20) / 512), 5000);
    expect(added.name).toMatch(/^D\dn1$/);

    // And a subsystem removed: the log no longer names it, SPDK detaches that controller and its bdev goes.
    await t.service.removeSubsystem(SUBNQN2);
    await waitFor('SPDK dropped the removed subsystem', async () => (await subnqns()).length === 1 && !(await h.bdevs()).some((b) => b.name === added.name), 10_000);
    expect(await subnqns()).toEqual([SUBNQN]);
    await h.call('bdev_nvme_stop_discovery', { name: 'D' });
  });

  it('namespace add / remove and ANA changes reach bdev_nvme through AENs', async () => {
    const t = await serviceTarget();
    const h = await bdevHost();
    expect(await h.attach({ name: 'N0', traddr: t.addr, trsvcid: t.ports[0] as number, subnqn: SUBNQN, hostnqn: HOSTNQN })).toEqual(['N0n1']);
    const names = async (): Promise<string[]> => (await h.bdevs()).map((b) => b.name).sort();

    // Namespace Attribute Changed notice (NVMe Base 2.0 §5.2), Changed Namespace List log 04h (§5.16.1.5): the
    // host rescans.
    await t.service.addNamespace(SUBNQN, { nsid: 2, backend: { type: 'ram', size: '8M' } });
    await waitFor('bdev N0n2 created', async () => (await names()).includes('N0n2'), 5000);
    expect((await h.bdevs()).find((b) => b.name === 'N0n2')?.num_blocks).toBe((8 << 20) / 512);
    await t.service.removeNamespace(SUBNQN, 2);
    await waitFor('bdev N0n2 removed', async () => !(await names()).includes('N0n2'), 5000);
    expect(await names()).toEqual(['N0n1']);

    // ANA change notice (NVMe Base 2.0 §5.2), ANA log 0Ch (§5.16.1.13, states §8.1.3): the host re-reads each
    // group's state.
    const anaState = async (): Promise<string | undefined> => (await h.bdevs()).find((b) => b.name === 'N0n1')?.driver_specific?.nvme?.[0]?.ns_data.ana_state;
    expect(await anaState()).toBe('optimized');
    t.service.setAnaState(1, 1, 'non-optimized');
    await waitFor('ana_state non_optimized', async () => (await anaState()) === 'non_optimized', 5000);

    // An inaccessible path while I/O runs: the I/O path stops being accessible (and current), I/O waits, and the
    // run completes once the group is optimized again.
    const run = verifyRun(h, { seconds: 4 });
    run.catch(() => undefined);
    await waitFor('an I/O path while the run is on', async () => (await h.ioPaths()).length === 1, 5000);
    t.service.setAnaState(1, 1, 'inaccessible');
    // An I/O failing with Asymmetric Access Inaccessible (SCT 3h, SC 02h) may reach bdev_nvme before the AEN's log
    // read: it marks the path "updating" (not accessible) at once and takes the state from the log page after.
    await waitFor('ana_state inaccessible, the path neither accessible nor current', async () => {
      const p = (await h.ioPaths())[0];
      return (await anaState()) === 'inaccessible' && p !== undefined && !p.accessible && !p.current;
    }, 5000);
    t.service.setAnaState(1, 1, 'optimized');
    await waitFor('I/O path accessible again', async () => (await h.ioPaths())[0]?.accessible === true, 5000);
    await run;
    expect(await anaState()).toBe('optimized');
  });

  it('unmap, write_zeroes and flush workloads, then bdev_nvme_reset_controller: a new association, and verify passes after it', async () => {
    const t = await serviceTarget();
    const h = await bdevHost();
    // bdev_nvme completes a flush itself unless enable_flush is set (default false in v26.05), even with our
    // Volatile Write Cache bit (Identify Controller VWC bit 0) set; the Linux host sends Flush whenever VWC is set.
    await h.call('bdev_nvme_set_options', { enable_flush: true });
    await h.attach({ name: 'N0', traddr: t.addr, trsvcid: t.ports[0] as number, subnqn: SUBNQN, hostnqn: HOSTNQN });
    const opcodes = (): Record<string, number> => t.service.stats().subsystems[SUBNQN]?.opcodes ?? {};
    // bdev unmap is Dataset Management with the Deallocate attribute, write_zeroes Write Zeroes, flush Flush (NVM
    // Command Set 1.0 §3.2.3, §3.2.8, NVMe Base 2.0 §7.1): each reaches the namespace as that opcode, none fails.
    for (const [workload, opcode] of [
      ['unmap', 'dsm'],
      ['write_zeroes', 'write-zeroes'],
      ['flush', 'flush'],
    ] as const) {
      const before = opcodes()[opcode] ?? 0;
      const r = await h.perform({ seconds: 1, workload });
      expect(r.results.map((j) => [j.workload, j.status, j.io_failed])).toEqual([[workload, 'finished', 0]]);
      expect((opcodes()[opcode] ?? 0) - before).toBeGreaterThan(0);
    }
    const cntlid = (await h.controllers())[0]?.ctrlrs[0]?.cntlid;
    // Over fabrics bdev_nvme resets by dropping the admin queue and connecting again (a new controller: NVMe-oF 1.1
    // §3.3, Connect with CNTLID FFFFh); our old controller goes with its admin queue.
    await h.call('bdev_nvme_reset_controller', { name: 'N0' });
    await waitFor('a new controller, enabled', async () => {
      const c = (await h.controllers())[0]?.ctrlrs[0];
      return c !== undefined && c.state === 'enabled' && c.cntlid !== cntlid;
    }, 5000);
    const ours = (await t.controllers()).filter((c) => !c.discovery);
    expect(ours.map((c) => c.cntlid)).toEqual([(await h.controllers())[0]?.ctrlrs[0]?.cntlid]);
    await verifyRun(h, { seconds: 2 });
  });

  it('reconnect: our target restarted (same port, file namespace) during a verify run; bdev_nvme reconnects and verify passes', async () => {
    const dir = await tempDir('spdk-host-file-');
    const log: string[] = [];
    let t = await startOurCliTarget({ config: baseConfig({ file: path.join(dir, 'ns1.img') }), log });
    cleanups.push(() => t.stop());
    const h = await bdevHost();
    await h.attach({ name: 'N0', traddr: t.addr, trsvcid: t.ports[0] as number, subnqn: SUBNQN, hostnqn: HOSTNQN, extra: { ctrlr_loss_timeout_sec: 60, reconnect_delay_sec: 1 } });
    const state = async (): Promise<string | undefined> => (await h.controllers())[0]?.ctrlrs[0]?.state;
    expect(await state()).toBe('enabled');
    const run = verifyRun(h, { seconds: 12 });
    run.catch(() => undefined);
    // Let verify write and read back a while before the target goes.
    await waitFor('verify I/O on our target', async () => (await t.nsCommands(SUBNQN, 1)).writes > 100, 10_000);
    await t.stop();
    await waitFor('bdev_nvme saw the controller go', async () => (await state()) !== 'enabled', 10_000);
    t = await startOurCliTarget(t.restartArgs);
    await waitFor('bdev_nvme reconnected', async () => (await state()) === 'enabled', 20_000);
    // The run goes on against the restarted target; a block whose read-back the restart cut is read from the file.
    await waitFor('verify I/O on the restarted target', async () => (await t.nsCommands(SUBNQN, 1)).reads > 0, 10_000);
    await run;
    expect((await t.controllers()).filter((c) => !c.discovery).map((c) => c.hostnqn)).toEqual([HOSTNQN]);
  });

  it('multipath over two ports with ANA: one path made inaccessible, I/O moves to the other and verify passes', async () => {
    const t = await serviceTarget({ ports: 2 });
    const [portA, portB] = t.ports as [number, number];
    const h = await bdevHost();
    for (const p of [portA, portB]) expect(await h.attach({ name: 'N0', traddr: t.addr, trsvcid: p, subnqn: SUBNQN, hostnqn: HOSTNQN, extra: { multipath: 'multipath' } })).toEqual(['N0n1']);
    expect((await h.controllers())[0]?.ctrlrs.map((c) => Number(c.trid.trsvcid))).toEqual([portA, portB]);
    const current = async (): Promise<number | undefined> => {
      const p = (await h.ioPaths()).find((x) => x.current);
      return p === undefined ? undefined : Number(p.transport.trsvcid);
    };
    const run = verifyRun(h, { seconds: 6 });
    run.catch(() => undefined);
    // Active-passive (bdev_nvme's default policy): the first path attached carries the I/O.
    expect(await waitFor('a current path', current, 5000)).toBe(portA);
    await waitFor('I/O on port 1', async () => ((await ioByPort(t, SUBNQN)).get(1) ?? 0) > 100, 5000);
    const onB = (await ioByPort(t, SUBNQN)).get(2) ?? 0;
    t.service.setAnaState(1, 1, 'inaccessible');
    await waitFor('current path on port 2', async () => (await current()) === portB, 5000);
    const pathA = (await h.ioPaths()).find((p) => Number(p.transport.trsvcid) === portA);
    expect(pathA?.accessible).toBe(false);
    await waitFor('I/O on port 2', async () => ((await ioByPort(t, SUBNQN)).get(2) ?? 0) > onB + 100, 5000);
    await run;
  });

  it('DH-HMAC-CHAP: bidirectional with SHA-384 / ffdhe3072 keys from SPDK\'s keyring; a wrong key is refused', async () => {
    const key = generateDhchapKey({ hmac: 2, hostnqn: HOSTNQN }).format();
    const ctrlKey = generateDhchapKey({ hmac: 2, hostnqn: SUBNQN }).format();
    const t = await startOurCliTarget({ config: baseConfig(), args: ['--dhchap-key', `${HOSTNQN}=${key}`, '--dhchap-ctrl-key', `${HOSTNQN}=${ctrlKey}`] });
    cleanups.push(() => t.stop());
    const h = await bdevHost();
    // Only what the test asks for, so the negotiated pair is known (NVMe Base 2.0 §8.3.4.2, AUTH_Negotiate).
    await h.call('bdev_nvme_set_options', { dhchap_digests: ['sha384'], dhchap_dhgroups: ['ffdhe3072'] });
    await h.addKey('key0', key);
    await h.addKey('ckey0', ctrlKey);
    await h.addKey('wrong', generateDhchapKey({ hmac: 2, hostnqn: HOSTNQN }).format());
    const at = { traddr: t.addr, trsvcid: t.ports[0] as number, subnqn: SUBNQN, hostnqn: HOSTNQN };
    await expect(h.attach({ name: 'BAD', ...at, extra: { dhchap_key: 'wrong', dhchap_ctrlr_key: 'ckey0' } })).rejects.toThrow(/bdev_nvme_attach_controller/);
    expect(await h.bdevs()).toEqual([]);
    await waitFor('our log names the failed authentication', () => t.log.some((l) => l.includes('"level":40') && l.includes('"msg":"authentication failed"') && l.includes(HOSTNQN)), 5000);

    expect(await h.attach({ name: 'N0', ...at, extra: { dhchap_key: 'key0', dhchap_ctrlr_key: 'ckey0' } })).toEqual(['N0n1']);
    const run = verifyRun(h, { seconds: 2 });
    const { queues } = await sampleIoQueues(t, SUBNQN, run);
    expect([...queues.values()].some((q) => q.commands > 1)).toBe(true);
    const ctrls = (await t.controllers()).filter((c) => !c.discovery);
    expect(ctrls.length).toBe(1);
    for (const q of ctrls[0]?.queues ?? []) expect(q.auth).toMatchObject({ authenticated: true, hash: 'sha384', dhgroup: 'ffdhe3072', bidirectional: true });
  });

  it('TLS 1.3 with a PSK from SPDK\'s keyring on a TLS-only port; a wrong PSK is refused', async () => {
    const psk = formatTlsKey(1, randomBytes(32));
    const t = await startOurCliTarget({ config: baseConfig(), args: ['--tls', 'required', '--tls-key', `${HOSTNQN}=${psk}`] });
    cleanups.push(() => t.stop());
    const h = await bdevHost();
    await h.addKey('psk0', psk);
    await h.addKey('wrong', formatTlsKey(1, randomBytes(32)));
    const at = { traddr: t.addr, trsvcid: t.ports[0] as number, subnqn: SUBNQN, hostnqn: HOSTNQN };
    await expect(h.attach({ name: 'BAD', ...at, extra: { psk: 'wrong' } })).rejects.toThrow(/bdev_nvme_attach_controller/);
    await expect(h.attach({ name: 'PLAIN', ...at })).rejects.toThrow(/bdev_nvme_attach_controller/);
    expect(await h.bdevs()).toEqual([]);
    await waitFor('our log names both refusals', () => {
      const refusals = t.log.filter((l) => l.includes('TLS: closing connection'));
      return refusals.some((l) => /"code":"handshake"/.test(l)) && refusals.some((l) => /"code":"cleartext-on-required"/.test(l));
    }, 5000);

    // SPDK offers one identity, the version 0 retained one "NVMe0R01 <hostnqn> <subnqn>" (TP 8011; docs/tls.md),
    // with TLS_AES_128_GCM_SHA256 for an hh 01 key (include/spdk_internal/nvme_tcp.h nvme_tcp_generate_psk_identity).
    expect(await h.attach({ name: 'N0', ...at, extra: { psk: 'psk0' } })).toEqual(['N0n1']);
    const run = verifyRun(h, { seconds: 2 });
    const { queues } = await sampleIoQueues(t, SUBNQN, run);
    expect([...queues.values()].some((q) => q.commands > 1)).toBe(true);
    const ctrls = (await t.controllers()).filter((c) => !c.discovery);
    expect(ctrls.length).toBe(1);
    for (const q of ctrls[0]?.queues ?? []) expect(q.tls).toBe(true);
  });
});

/**
 * NVMe/TCP 1.0 PDU sizes (§3.6; digests as ICReq / ICResp DGST enabled them, §3.6.2.2 / §3.6.2.3): a read's
 * CapsuleCmd is 72 bytes (8-byte common header + 64-byte SQE), its reply one C2HData (24-byte header + the data, one
 * PDU up to our 128 KiB C2H size) and a CapsuleResp (8 + 16); HDGST adds 4 bytes to every PDU header, DDGST 4 after
 * the data. Between the first and the latest sample of a randread queue, the bytes the target took in and sent must be
 * whole multiples of those: this proves perf's -H / -I were negotiated and that every PDU carried them, both ways.
 */
function expectReadWire(q: SampledQueue, c: { ioSize: number; digests: boolean; qd: number }): void {
  const dg = c.digests ? 4 : 0;
  const cmd = 72 + dg;
  const reply = 24 + dg + c.ioSize + dg + (24 + dg);
  const cmds = q.commands - q.first.commands;
  // Enough commands that one more or fewer digest per command cannot hide within a partly received capsule.
  expect(cmds).toBeGreaterThan(40);
  expect(Math.abs(q.bytesIn - q.first.bytesIn - cmds * cmd)).toBeLessThan(cmd);
  const out = q.bytesOut - q.first.bytesOut;
  expect(out % reply).toBe(0);
  expect(Math.abs(out / reply - cmds)).toBeLessThanOrEqual(c.qd);
}

/** Collects the host NQNs of SUBNQN's I/O controllers every 100 ms until stop(). */
function sampleHostnqns(t: OurTarget, into: Set<string>): { stop(): void; done: Promise<void> } {
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      for (const c of await t.controllers().catch(() => [])) if (c.subnqn === SUBNQN && !c.discovery) into.add(c.hostnqn);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return { stop: () => void (stopped = true), done };
}

/** I/O queues that carried commands, grouped by controller. */
function busyQueuesByController(queues: Map<string, SampledQueue>): Map<string, Array<{ qid: string; worker: number | undefined }>> {
  const out = new Map<string, Array<{ qid: string; worker: number | undefined }>>();
  for (const [k, q] of queues) {
    if (q.commands <= 1) continue; // the Connect alone
    const [cntlid = '', qid = ''] = k.split('/');
    const list = out.get(cntlid) ?? [];
    list.push({ qid, worker: q.worker });
    out.set(cntlid, list);
  }
  return out;
}

/**
 * perform_tests on every bdev of `h`: each job finished without a failed, timed-out or miscompared I/O (bdevperf
 * answers the RPC with an error when a job fails, and prints "Buffer mismatch" for a verify miscompare).
 */
async function verifyRun(h: BdevHost, o: { seconds: number; ioSize?: number; qd?: number }): Promise<PerformResult> {
  const from = h.app.output().length;
  const r = await h.perform({ seconds: o.seconds, workload: 'verify', ...(o.ioSize === undefined ? {} : { ioSize: o.ioSize }), ...(o.qd === undefined ? {} : { qd: o.qd }) });
  expect(r.results.length).toBeGreaterThan(0);
  for (const j of r.results) {
    expect(j.status).toBe('finished');
    expect(j.workload).toBe('verify');
    expect(j.io_failed).toBe(0);
    expect(j.io_timeout).toBe(0);
    expect(j.iops).toBeGreaterThan(0);
  }
  const out = h.app.output().slice(from);
  expect(out).not.toMatch(/Buffer mismatch|miscompare|\bfails\b/i);
  return r;
}
