// The seed experiments with the Linux host as the initiator (`--initiator kernel`): nvme-cli and fio on this machine
// or in the qemu lab's guest (harness/kernel-host), against our target, whose placement the scenario controls. Each
// arm first asks the kernel whether it can run (KernelHost probes) and is skipped with the reason otherwise.
import { TargetService } from '../../target/index.js';
import type { FioJob, FioResult } from '../kernel-host/commands.js';
import { KernelHost, type ArmCheck } from '../kernel-host/host.js';
import { loadHostModules } from '../kernel-host/host-patches.js';
import { nvmetAvailable, nvmetFreePortId, startNvmet } from '../kernel-host/nvmet.js';
import { KernelHostUnavailable, labRunner, localPrerequisites, localRunner, type HostRunner, type LabNet } from '../kernel-host/runner.js';
import { freePort } from '../lab.js';
import { startInProcessTarget, type InProcessTarget } from '../nvme.js';
import { compare, makeReport, type ReportInit } from '../report/build.js';
import type { Arm, Comparison, InitiatorInfo, Report } from '../report/types.js';
import { LAB_ONLY, newestController, refusedIoConnect, stalledGroupQueue, unwoundClean } from './kernel-unwind.js';
import { median, round1, type ScenarioContext } from './types.js';

/** The driver, what it reports about itself, and the address at which the host reaches our target. */
export interface KernelRun {
  host: KernelHost;
  initiator: InitiatorInfo;
  traddr: string;
  trsvcid: number;
  /** The report's setup line. */
  setup: string;
  /** The lab's network: a tap NIC or user-mode networking (absent for the local runner). */
  net?: LabNet;
}

/**
 * Starts the runner `ctx.kernelHost` names (the lab guest boots with `smp` vCPUs: the Linux host opens at most one
 * I/O queue per CPU), runs `fn`, then disconnects whatever is still connected and stops the runner.
 */
export async function withKernelHost<T>(ctx: ScenarioContext, targetPort: number, smp: number, fn: (k: KernelRun) => Promise<T>, tap?: TapChoice): Promise<T> {
  const choice = ctx.kernelHost;
  if (choice === undefined) throw new Error('withKernelHost without ctx.kernelHost');
  let runner: HostRunner;
  if (choice.where === 'local') {
    const missing = localPrerequisites({ ...(choice.env === undefined ? {} : { env: choice.env }), ...(choice.uid === undefined ? {} : { uid: choice.uid }), sysRoot: choice.root ?? '/' });
    if (missing !== undefined) throw new KernelHostUnavailable(missing);
    runner = localRunner(choice.env === undefined ? {} : { env: choice.env });
  } else {
    runner = await labRunner({ which: choice.lab, targetPort, smp, log: ctx.log, ...(choice.hostModules === undefined ? {} : { files: [choice.hostModules.dir] }), ...(tap === undefined ? {} : { tap: tap.queues }) });
  }
  const host = new KernelHost(runner, { root: choice.where === 'local' ? (choice.root ?? '') : '', digests: choice.digests ?? false });
  try {
    const offers = await host.offers();
    const net = runner.net;
    const { traddr, trsvcid } = net?.kind === 'tap' && tap !== undefined ? { traddr: net.hostIp, trsvcid: await tap.bind(net.hostIp) } : runner.targetAddress(targetPort);
    const path =
      net?.kind === 'tap'
        ? `over a tap NIC (virtio-net, ${net.queues} queue(s), vhost off; guest ${net.guestIp} eth1 -> ${traddr}:${trsvcid})`
        : `through user-mode networking, guestfwd + socat${tap !== undefined && net?.kind === 'user' && net.why !== undefined ? ` (${net.why})` : ''}`;
    const setup =
      choice.where === 'lab'
        ? `qemu guest (${runner.emulated ?? 'emulated'}, ${smp} vCPUs, kernel ${offers.kernel}) reaching our target in this process ${path}`
        : `loopback, the Linux host (kernel ${offers.kernel}) reaching our target in this process`;
    return await fn({ host, traddr, trsvcid, setup, ...(net === undefined ? {} : { net }), initiator: { kind: 'kernel', where: choice.where, kernel: offers.kernel, ...(runner.emulated === undefined ? {} : { emulated: runner.emulated }) } });
  } finally {
    await host.disconnectAll().catch(() => undefined);
    await runner.close();
  }
}

/**
 * A tap NIC for the lab guest (run.sh --tap) with `queues` queues, where the machine allows it: `bind` opens our
 * target on the tap's host address and returns the port the guest connects to. Without a tap the guestfwd stays.
 */
export interface TapChoice {
  queues: number;
  bind(addr: string): Promise<number>;
}

/** An arm present in both passes of a --host-patches run, compared patched vs stock on `metric`. */
export type CrossArm = readonly [arm: string, metric: string, better: 'higher' | 'lower'];

/**
 * A Linux-host scenario's report, from one pass (`run` with the kernel's modules) or, with a patch series'
 * modules (--host-patches), two passes in one guest boot: `run` with the stock modules, then again after the guest
 * loaded the series' modules (lab-host-modules). The passes' arms are named stock/ARM and SERIES/ARM; stock arms skipped
 * because stock nvme-fabrics lacks the series' option are left out (a note names them); `cross` compares the arms
 * both passes ran.
 */
export async function kernelPasses(ctx: ScenarioContext, targetPort: number, smp: number, run: (k: KernelRun) => Promise<Report>, cross: readonly CrossArm[] = [], tap?: TapChoice): Promise<Report> {
  const mods = ctx.kernelHost?.where === 'lab' ? ctx.kernelHost.hostModules : undefined;
  if (mods === undefined) return withKernelHost(ctx, targetPort, smp, run, tap);
  return withKernelHost(ctx, targetPort, smp, async (k) => {
    ctx.log(`stock modules (kernel ${k.initiator.kernel ?? '?'})`);
    const stock = await run(k);
    await k.host.disconnectAll();
    ctx.log(`loading the ${mods.series} modules in the guest`);
    await loadHostModules(k.host.runner, mods);
    const host = new KernelHost(k.host.runner, { digests: k.host.digests });
    await host.offers();
    const hostPatches = { series: mods.series, patches: mods.patches, base: mods.base, kver: mods.kver };
    try {
      const patched = await run({ ...k, host, initiator: { ...k.initiator, hostPatches } });
      return mergePasses(stock, patched, mods.series, cross);
    } finally {
      await host.disconnectAll().catch(() => undefined);
    }
  }, tap);
}

/** One report of kernelPasses' two: arms prefixed stock/ and SERIES/, both passes' comparisons, the cross ones. */
function mergePasses(stock: Report, patched: Report, series: string, cross: readonly CrossArm[]): Report {
  const notAccepted = (a: Arm): boolean => a.skipped !== undefined && a.skipped.includes('nvme-fabrics does not accept');
  const renamed = (r: Report, prefix: string, keep: (a: Arm) => boolean): { arms: Arm[]; comparisons: Comparison[] } => ({
    arms: r.arms.filter(keep).map((a) => ({ ...a, name: `${prefix}/${a.name}` })),
    comparisons: r.comparisons.map((c) => ({ ...c, label: `${prefix}: ${c.label}`, numerator: `${prefix}/${c.numerator}`, denominator: `${prefix}/${c.denominator}` })),
  });
  const s = renamed(stock, 'stock', (a) => !notAccepted(a));
  const p = renamed(patched, series, () => true);
  const arms = [...s.arms, ...p.arms];
  const has = (n: string): boolean => arms.some((a) => a.name === n);
  const crossed = cross.filter(([arm]) => has(`${series}/${arm}`) && has(`stock/${arm}`)).map(([arm, metric, better]) => compare(arms, `${series} vs stock: ${arm} ${metric}`, metric, `${series}/${arm}`, `stock/${arm}`, better));
  const dropped = stock.arms.filter(notAccepted);
  return {
    ...patched,
    createdAt: stock.createdAt,
    title: `${patched.title}: stock vs ${series}`,
    arms,
    comparisons: [...crossed.filter((c) => c !== undefined), ...s.comparisons, ...p.comparisons],
    verdict: `${series}: ${patched.verdict.replace(/\.?$/, '.')} Stock (same kernel, same guest boot): ${stock.verdict}`,
    notes: [
      `Two passes in one guest boot: the stock/ arms with the kernel's own nvme-core, nvme-fabrics and nvme-tcp, then the ${series}/ arms after the guest replaced them (rmmod, insmod of the modules built from the series; the kernel is tainted by unsigned out-of-tree modules).`,
      ...(dropped.length === 0 ? [] : [`Not run on stock: ${dropped.map((a) => a.name).join(', ')} (${dropped[0]?.skipped ?? ''}).`]),
      ...new Set([...patched.notes, ...stock.notes]),
    ],
    ok: stock.ok && patched.ok,
  };
}

/**
 * One arm: skipped with `check`'s reason when set; else `body`'s metrics, or its error. Every controller the body
 * connected is disconnected afterwards, failed or not.
 */
async function kernelArm(ctx: ScenarioContext, host: KernelHost, name: string, params: Arm['params'], check: ArmCheck | Promise<ArmCheck>, body: () => Promise<Record<string, number>>): Promise<Arm> {
  const skip = await check;
  if (skip !== undefined) {
    ctx.log(`${name}: skipped (${skip})`);
    return { name, params, metrics: {}, skipped: skip };
  }
  ctx.log(`${name}: running`);
  try {
    return { name, params, metrics: await body() };
  } catch (e) {
    if (e instanceof Skip) return { name, params, metrics: {}, skipped: e.message };
    return { name, params, metrics: {}, error: (e as Error).message };
  } finally {
    await host.disconnectAll().catch((e: Error) => ctx.log(`${name}: cleanup: ${e.message}`));
  }
}

/** Thrown by an arm's body when a probe made after connecting (iopolicy, io_cpu) says the kernel cannot run it. */
class Skip extends Error {}

export const fioMetrics = (r: FioResult): Record<string, number> => ({ iops: r.iops, mbps: r.mbps, p50Us: r.p50Us, p99Us: r.p99Us, fioIos: r.ios });

export function report(init: Omit<ReportInit, 'kind' | 'createdAt' | 'quick'>, ctx: ScenarioContext, createdAt: Date, k: KernelRun | undefined, kind: Report['kind'] = 'scenario'): Report {
  const notes = [...(init.notes ?? []), ...(k === undefined ? [] : k.host.notes)];
  // What the kernel offered, read when the report is made: the arms add the iopolicy values they wrote.
  return makeReport({ kind, quick: ctx.quick, createdAt, ...init, notes, ...(k === undefined ? {} : { initiator: { ...k.initiator, offers: k.host.offersReport() }, setup: k.setup }) });
}

const LATENCIES = [0, 1, 5] as const;
const PC_QUEUES = 64;

/**
 * parallel-connect with the Linux host: `nvme connect --nr-io-queues=64` with 0/1/5 ms of Connect latency injected
 * at our target. The slope (extra connect time per injected ms) counts the Connects the host waits for one after the
 * other: I/O queues + 1 when it sets queues up serially, about 2 (admin, then all I/O queues at once) in parallel.
 */
export async function kernelParallelConnect(ctx: ScenarioContext, title: string, hypothesis: string): Promise<Report> {
  const createdAt = new Date();
  const reps = ctx.quick ? 2 : 5;
  const svc = new TargetService();
  const nqn = 'nqn.2024-01.io.nvme-tcp-ts:kernel-connect';
  try {
    const port = (await svc.addPort({ id: 1, addr: '127.0.0.1', port: 0 })).port;
    await svc.addSubsystem({ nqn, maxIoQueues: PC_QUEUES, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '16M' }, blockSize: 512 }] });
    return await kernelPasses(ctx, port, ctx.quick ? 4 : 8, async (k) => {
      const arms: Arm[] = [];
      for (const lat of LATENCIES) {
        svc.setFaults(nqn, { connectLatencyMs: lat });
        arms.push(
          await kernelArm(ctx, k.host, `linux-${lat}ms`, { connectLatencyMs: lat, nr_io_queues: PC_QUEUES }, k.host.needsOption('nr_io_queues'), () => latencyArm(k, svc, nqn, lat, reps)),
        );
      }
      const unwindLog: string[] = [];
      arms.push(
        await kernelArm(ctx, k.host, 'refused-io-connect', { connectLatencyMs: 5, nr_io_queues: PC_QUEUES, refusedQid: REFUSED_QID }, k.initiator.where === 'lab' ? k.host.needsOption('nr_io_queues') : LAB_ONLY, async () => {
          svc.setFaults(nqn, { connectLatencyMs: 5 });
          const u = await refusedIoConnect(svc, k.host, { traddr: k.traddr, trsvcid: k.trsvcid, nqn, nrIoQueues: PC_QUEUES, ctrlLossTmo: 2 }, REFUSED_QID);
          unwindLog.push(...u.log.map((l) => `refused-io-connect, guest kernel log: ${l}`));
          return u.metrics;
        }),
      );
      return report(
        {
          name: 'parallel-connect',
          title: `${title} (Linux host)`,
          hypothesis,
          arms,
          comparisons: [
            compare(arms, 'connect time at 5 ms / 0 ms injected latency', 'connectMs', 'linux-5ms', 'linux-0ms', 'lower'),
            // Only where our target saw the Connects (a fake nvme-cli in the tests sends none).
            ...(arms.filter((a) => a.name.startsWith('linux-')).every((a) => a.metrics['targetIoConnectSpanMs'] !== undefined) ? [compare(arms, 'I/O-queue Connect span at the target, 5 ms / 0 ms', 'targetIoConnectSpanMs', 'linux-5ms', 'linux-0ms', 'lower')] : []),
          ],
          verdict: parallelVerdict(arms, k.initiator.kernel ?? '?') + refusedVerdict(arms.find((a) => a.name === 'refused-io-connect')),
          notes: [
            `connectMs is the median wall time of ${reps} \`nvme connect --nr-io-queues=${PC_QUEUES}\` call(s) where nvme-cli ran${k.initiator.where === 'lab' ? ' (in the guest, from /proc/timer_list; it includes nvme-cli, identify and the namespace scan, which an emulated CPU makes slow and noisy)' : ''}; ioQueues is what the controller set up (sysfs queue_count - 1): the Linux host caps it at its online CPUs.`,
            'targetIoConnectSpanMs: first to last I/O-queue Fabrics Connect as our target received them (median over the connects); targetMaxConnectsInFlight: the most I/O-queue Connects the target held at once during the injected latency. Both are protocol sequencing, meaningful even emulated: 1 in flight means the host waits for each Connect before sending the next.',
            'targetIoSetupSpanMs: first I/O-queue ICReq to the last I/O-queue Connect completion; targetMaxSetupsOverlapping: the most I/O queues whose setup window (ICReq received to Connect completed, i.e. Connect received + the injected latency) overlapped at one instant, over the connects: 1 means one queue after another. From the target\'s per-queue setup times (GET /controllers icReqAt, connectAt, firstCommandAt), read while the controller was connected.',
            'targetIcReqSpanMs: first to last I/O-queue ICReq; targetIcReqsBeforeFirstConnect: the I/O queues whose ICReq came before the first I/O-queue Connect (the fewest over the connects). A host that opens every queue\'s connection and IC exchange first and then sends the Connects one at a time (stock Linux: nvme_tcp_alloc_io_queues, then nvme_tcp_start_io_queues) has all of them before, and its setup windows overlap although its Connects are serial: read targetMaxConnectsInFlight for the Connects.',
            'targetIoQueuesWithCommand: I/O queues that had carried a command after their Connect when the view was read (the namespace scan\'s reads); the Linux host sends nothing on an idle I/O queue, so the setup window ends at the Connect\'s completion, not at a first command.',
            'Connect latency is injected by our target before each Fabrics Connect completes (TargetService.setFaults connectLatencyMs), admin queue included.',
            `refused-io-connect (error path, fault engine): at 5 ms Connect latency our target refuses the Connect of I/O queue ${REFUSED_QID} (CONNECT_INVALID_PARAM, DNR; rule {match: {event: connect, qid: ${REFUSED_QID}}, schedule: {nth: 1}}) while the others are set up. connectFailed: nvme connect failed; refusedConnects: the rule's firings; targetControllersLeft / hostControllersLeft: controllers to the subsystem left at our target (after up to 15 s) and in the guest's /sys/class/nvme; kernelTroubleLines: guest kernel log lines since the arm began matching WARNING, BUG, Oops, hung task and the like; reconnectIoQueues: I/O queues of the same connect without the rule right after.`,
            ...unwindLog,
          ],
        },
        ctx,
        createdAt,
        k,
      );
    }, [['linux-0ms', 'connectMs', 'lower'], ['linux-5ms', 'connectMs', 'lower'], ['linux-5ms', 'targetIoSetupSpanMs', 'lower'], ['linux-5ms', 'targetMaxConnectsInFlight', 'higher']]);
  } finally {
    await svc.stop();
  }
}

/** One latency arm of parallel-connect: `reps` connects, the host's connect time and the target's view of each setup. */
async function latencyArm(k: KernelRun, svc: TargetService, nqn: string, lat: number, reps: number): Promise<Record<string, number>> {
  const times: number[] = [];
  const seen: IoSetupSeen[] = [];
  let queues = 0;
  for (let i = 0; i < reps; i++) {
    const c = await k.host.connect({ traddr: k.traddr, trsvcid: k.trsvcid, nqn, nrIoQueues: PC_QUEUES, ctrlLossTmo: 2 });
    times.push(c.connectMs);
    queues = (await k.host.ioQueues(c.device)) ?? 0;
    const s = ioSetupSeen(svc, nqn, lat);
    if (s !== undefined) seen.push(s);
    await k.host.disconnect(c.device);
  }
  const most = (f: (s: IoSetupSeen) => number): number => Math.max(...seen.map(f));
  return {
    connectMs: round1(median(times)),
    minConnectMs: round1(Math.min(...times)),
    ioQueues: queues,
    repetitions: reps,
    ...(seen.length === 0
      ? {}
      : {
          targetIoConnectSpanMs: round1(median(seen.map((s) => s.connectSpanMs))),
          ...(lat > 0 ? { targetMaxConnectsInFlight: most((s) => s.maxConnectsInFlight) } : {}),
          targetIoSetupSpanMs: round1(median(seen.map((s) => s.setupSpanMs))),
          targetMaxSetupsOverlapping: most((s) => s.maxSetupsOverlapping),
          targetIoQueuesWithCommand: most((s) => s.firstCommands),
          targetIcReqSpanMs: round1(median(seen.map((s) => s.icReqSpanMs))),
          targetIcReqsBeforeFirstConnect: Math.min(...seen.map((s) => s.icReqsBeforeFirstConnect)),
        }),
  };
}

/** The I/O queue whose Connect refused-io-connect refuses: one in the middle of a setup of several. */
const REFUSED_QID = 2;

/** The verdict's sentence on refused-io-connect. */
function refusedVerdict(a: Arm | undefined): string {
  if (a === undefined || a.skipped !== undefined) return '';
  if (a.error !== undefined) return ` Refused I/O-queue Connect: the arm failed (${a.error}).`;
  const m = a.metrics;
  const failed = m['connectFailed'] === 1 ? 'nvme connect failed' : 'nvme connect did NOT fail';
  return ` With the Connect of I/O queue ${REFUSED_QID} refused mid-setup (${m['refusedConnects']} refusal): ${failed}; ${unwoundClean(m) ? 'the unwind was clean (no controller left at the target or in the guest, no kernel warning)' : `the unwind was NOT clean (target ${m['targetControllersLeft']}, guest ${m['hostControllersLeft']} controllers left, ${m['kernelTroubleLines']} kernel trouble lines)`}; the next connect set up ${m['reconnectIoQueues']} I/O queues.`;
}

/** Serial or parallel, from what the target saw at 5 ms; the connect-time slope where the target saw nothing. */
function parallelVerdict(arms: Arm[], kernel: string): string {
  const m0 = arms[0]?.metrics ?? {};
  const m5 = arms[2]?.metrics ?? {};
  const q = m5['ioQueues'];
  if (m0['connectMs'] === undefined || m5['connectMs'] === undefined || q === undefined) return 'An arm failed or was skipped: no verdict.';
  const slope = round1((m5['connectMs'] - m0['connectMs']) / 5);
  const inFlight = m5['targetMaxConnectsInFlight'];
  if (inFlight === undefined) {
    return `Kernel ${kernel}, ${q} I/O queues: each injected ms of Connect latency adds ${slope} ms to nvme connect (serial would be ${q + 1}, parallel about 2).`;
  }
  const how = inFlight <= 1 ? 'serially: it sends each I/O queue\'s Connect only after the previous one completed' : inFlight >= q ? 'in parallel: all its I/O queues\' Connects were in flight at once' : `partly in parallel: at most ${inFlight} of its ${q} I/O queues' Connects were in flight at once`;
  const before = m5['targetIcReqsBeforeFirstConnect'];
  const icFirst = before === undefined ? '' : before === q ? `every I/O queue's ICReq came before the first I/O-queue Connect (the IC exchanges first, then the Connects)` : `${before} of the ${q} I/O queues' ICReqs came before the first I/O-queue Connect`;
  const overlap = m5['targetMaxSetupsOverlapping'] === undefined ? '' : ` Setup windows (ICReq to Connect completed): at most ${m5['targetMaxSetupsOverlapping']} overlapping at 5 ms (${m0['targetMaxSetupsOverlapping']} at 0 ms), first ICReq to last Connect completed ${m5['targetIoSetupSpanMs']} ms; ${icFirst}.`;
  return `Kernel ${kernel} sets up its ${q} I/O queues ${how} (our target saw them over ${m5['targetIoConnectSpanMs']} ms at 5 ms injected latency, ${m0['targetIoConnectSpanMs']} ms at 0 ms); nvme connect took ${m5['connectMs']} vs ${m0['connectMs']} ms.${overlap}`;
}

/** One controller's I/O-queue setup as our target saw it (GET /controllers setup times), at `latMs` injected. */
export interface IoSetupSeen {
  /** First to last I/O-queue Connect received. */
  connectSpanMs: number;
  /** The most Connects whose injected latency window [connectAt, connectAt + latMs) overlapped. */
  maxConnectsInFlight: number;
  /** First ICReq to the last Connect's completion (connectAt + latMs). */
  setupSpanMs: number;
  /** The most I/O queues whose setup window [icReqAt, connectAt + latMs) overlapped at one instant. */
  maxSetupsOverlapping: number;
  /** I/O queues that carried a command after their Connect by the time the view was read. */
  firstCommands: number;
  /** First to last I/O-queue ICReq. */
  icReqSpanMs: number;
  /** I/O queues whose ICReq came before the first I/O-queue Connect: all of them when the host does every IC exchange first. */
  icReqsBeforeFirstConnect: number;
}

/**
 * The I/O-queue setup of `nqn`'s newest controller (the one whose admin queue connected last) from the target's
 * queue view. A queue's setup window runs from its ICReq to its Connect's completion, which the target holds back
 * `latMs` (connectLatencyMs): a host that sets queues up one after another sends the next ICReq only after the
 * previous Connect completed, so its windows never overlap (NVMe-TCP 1.0 §3.6.2.2, NVMe-oF 1.1 §3.3).
 */
export function ioSetupSeen(svc: TargetService, nqn: string, latMs: number): IoSetupSeen | undefined {
  const qs = (newestController(svc, nqn)?.queues ?? []).flatMap((q) => (q.qid > 0 && q.icReqAt !== undefined && q.connectAt !== undefined ? [{ icReq: q.icReqAt, connect: q.connectAt, used: q.firstCommandAt !== undefined }] : []));
  if (qs.length === 0) return undefined;
  const mostAtOnce = (w: readonly (readonly [number, number])[]): number => Math.max(...w.map(([t]) => w.filter(([a, b]) => a <= t && t < b).length));
  const connects = qs.map((q) => q.connect);
  return {
    connectSpanMs: Math.max(...connects) - Math.min(...connects),
    maxConnectsInFlight: mostAtOnce(connects.map((t) => [t, t + latMs] as const)),
    setupSpanMs: Math.max(...connects) + latMs - Math.min(...qs.map((q) => q.icReq)),
    maxSetupsOverlapping: mostAtOnce(qs.map((q) => [q.icReq, q.connect + latMs] as const)),
    firstCommands: qs.filter((q) => q.used).length,
    icReqSpanMs: Math.max(...qs.map((q) => q.icReq)) - Math.min(...qs.map((q) => q.icReq)),
    icReqsBeforeFirstConnect: qs.filter((q) => q.icReq < Math.min(...connects)).length,
  };
}

const DUP_POLICIES = ['round-robin', 'queue-depth', 'numa'] as const;

/** Where duplicate-connect's arms connect: our target with a placement (single, queue), or nvmet, the reference. */
interface DupTarget {
  /** The arm-name suffix: single, queue or nvmet. */
  key: string;
  traddr: string;
  trsvcid: number;
  nqn: string;
  params: Arm['params'];
  /** Why the arms against it cannot run (nvmet not available), or why setting it up failed. */
  skip?: string;
  error?: string;
  /** Runs fio with the target's own figures around it (our workers' counts; nothing for nvmet). */
  measure(fn: () => Promise<FioResult>): Promise<{ result: FioResult; counts: Record<string, number> }>;
}

/** One duplicate-connect arm: `controllers` controllers to `t` (duplicates when more than one), `policy` on the head, fio. */
function dupArm(ctx: ScenarioContext, k: KernelRun, t: DupTarget, name: string, controllers: number, policy: string | undefined, job: (dev: string) => FioJob, verify: boolean): Promise<Arm> {
  const params = { controllers, iopolicy: policy ?? 'single', nr_io_queues: 2, ...t.params, ...(verify ? { fio: 'randwrite 4k verify=crc32c 8m' } : {}) };
  const check = t.skip ?? (controllers > 1 ? k.host.needsMultipath() : undefined);
  return kernelArm(ctx, k.host, name, params, check, async () => {
    if (t.error !== undefined) throw new Error(t.error);
    let first: string | undefined;
    for (let i = 0; i < controllers; i++) {
      const c = await k.host.connect({ traddr: t.traddr, trsvcid: t.trsvcid, nqn: t.nqn, nrIoQueues: 2, duplicate: controllers > 1, ctrlLossTmo: 2 });
      first ??= c.device;
    }
    const sub = await k.host.subsystem(first as string);
    const dev = sub?.blockDevice ?? `/dev/${first as string}n1`;
    if (policy !== undefined) {
      const why = sub === undefined ? `no nvme-subsystem for ${first as string} (native multipath off?)` : await k.host.setIopolicy(sub.name, policy);
      if (why !== undefined) throw new Skip(why);
    }
    if (!(await k.host.waitBlock(dev))) throw new Error(`${dev} did not appear after nvme connect`);
    const { result: r, counts } = await t.measure(() => k.host.fio(job(dev)));
    return { ...fioMetrics(r), paths: sub?.paths.length ?? 1, ...counts };
  });
}

/**
 * nvmet as duplicate-connect's reference, on the host that runs the Linux initiator: in the lab guest over its
 * loopback (127.0.0.1:4420, file on tmpfs), locally on 127.0.0.1 at a free port (file on /dev/shm) where nvmet and
 * nvmet-tcp are loaded. A target with `skip` (not available) or `error` (setup failed) makes its arms say so.
 */
async function nvmetReference(ctx: ScenarioContext, k: KernelRun): Promise<{ target: DupTarget; stop(): Promise<void> }> {
  const lab = k.initiator.where === 'lab';
  const base = { key: 'nvmet', nqn: 'nqn.2024-01.io.nvme-tcp-ts:nvmet-reference', measure: async (fn: () => Promise<FioResult>) => ({ result: await fn(), counts: {} }) };
  const none = { stop: async () => undefined };
  const skip = await nvmetAvailable(k.host);
  if (skip !== undefined) return { ...none, target: { ...base, traddr: '127.0.0.1', trsvcid: 4420, params: { target: lab ? 'nvmet in the guest' : 'nvmet on this machine' }, skip } };
  const trsvcid = lab ? 4420 : await freePort();
  const file = lab ? '/tmp/nvmet-reference.img' : `/dev/shm/nvme-tcp-ts-nvmet-${process.pid}.img`;
  const where = lab ? 'nvmet in the guest, over its loopback 127.0.0.1:4420 (host and target share the guest vCPUs), file on tmpfs' : `nvmet on this machine, 127.0.0.1:${trsvcid}, file on /dev/shm`;
  const target: DupTarget = { ...base, traddr: '127.0.0.1', trsvcid, params: { target: where } };
  try {
    const e = await startNvmet(k.host, { nqn: base.nqn, traddr: '127.0.0.1', trsvcid, portId: await nvmetFreePortId(k.host), file, sizeMb: 128 });
    return { target, stop: () => e.stop().catch((err: Error) => ctx.log(`nvmet: ${err.message}`)) };
  } catch (e) {
    return { ...none, target: { ...target, error: (e as Error).message } };
  }
}

/** The arms against one target: 1 controller, K duplicates under each iopolicy, and with `verify` a verify arm. */
async function dupArms(ctx: ScenarioContext, k: KernelRun, t: DupTarget, K: number, runtimeS: number, verify: boolean): Promise<Arm[]> {
  const job = (v: boolean) => (filename: string): FioJob =>
    v
      ? { name: 'verify', filename, rw: 'randwrite', bs: '4k', iodepth: 16, runtimeS: 60, size: '8m', verify: 'crc32c' }
      : { name: 'randread', filename, rw: 'randread', bs: '4k', iodepth: 32, numjobs: 2, runtimeS, size: '64m' };
  const arms = [await dupArm(ctx, k, t, `1-ctrl/${t.key}`, 1, undefined, job(false), false)];
  for (const p of DUP_POLICIES) arms.push(await dupArm(ctx, k, t, `${K}-ctrl-${p}/${t.key}`, K, p, job(false), false));
  if (verify) arms.push(await dupArm(ctx, k, t, `${K}-ctrl-round-robin/${t.key}/verify`, K, 'round-robin', job(true), true));
  return arms;
}

/**
 * duplicate-connect with the Linux host: 1 controller vs K duplicate controllers under native multipath with each
 * iopolicy, against our target with 2 worker processes, placement single (every I/O queue on worker 0: nvmet's one-CPU
 * behaviour) and queue (spread), and against nvmet on the same host as the reference. Each arm against our target
 * carries its per-worker command counts and CPU beside the host's IOPS.
 */
export async function kernelDuplicateConnect(ctx: ScenarioContext, title: string, hypothesis: string): Promise<Report> {
  const createdAt = new Date();
  const K = ctx.quick ? 2 : 4;
  const runtimeS = ctx.quick ? 2 : 10;
  const workers = 2;
  const svc = new TargetService({ workers, placement: 'single' });
  const nqn = 'nqn.2024-01.io.nvme-tcp-ts:kernel-dup';
  try {
    const port = (await svc.addPort({ id: 1, addr: '127.0.0.1', port: 0 })).port;
    await svc.addSubsystem({ nqn, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '128M' }, blockSize: 512 }] });
    return await withKernelHost(ctx, port, 2, async (k) => {
      const arms: Arm[] = [];
      for (const placement of ['single', 'queue']) {
        const ours: DupTarget = { key: placement, traddr: k.traddr, trsvcid: k.trsvcid, nqn, params: { targetWorkers: workers, targetPlacement: placement }, measure: (fn) => {
          svc.setPlacement(placement);
          return workerCounts(svc, fn);
        } };
        arms.push(...(await dupArms(ctx, k, ours, K, runtimeS, placement === 'queue')));
      }
      const ref = await nvmetReference(ctx, k);
      try {
        arms.push(...(await dupArms(ctx, k, ref.target, K, runtimeS, true)));
      } finally {
        await ref.stop();
      }
      return report(dupReport(arms, K, workers, runtimeS, title, hypothesis, ref.target), ctx, createdAt, k);
    });
  } finally {
    await svc.stop();
  }
}

/** Comparisons, verdict and notes of kernelDuplicateConnect's report. */
function dupReport(arms: Arm[], K: number, workers: number, runtimeS: number, title: string, hypothesis: string, nvmet: DupTarget): Omit<ReportInit, 'kind' | 'createdAt' | 'quick'> {
  const comparisons = [
    ...['single', 'queue', 'nvmet'].flatMap((pl) => DUP_POLICIES.map((p) => compare(arms, `${K} controllers ${p} vs 1 controller IOPS, ${pl === 'nvmet' ? 'nvmet' : `placement ${pl}`}`, 'iops', `${K}-ctrl-${p}/${pl}`, `1-ctrl/${pl}`, 'higher'))),
    compare(arms, `${K} controllers round-robin: placement queue vs single IOPS`, 'iops', `${K}-ctrl-round-robin/queue`, `${K}-ctrl-round-robin/single`, 'higher'),
    compare(arms, '1 controller: our target (placement single) vs nvmet IOPS', 'iops', '1-ctrl/single', '1-ctrl/nvmet', 'higher'),
    compare(arms, `${K} controllers round-robin: our target (placement queue) vs nvmet IOPS`, 'iops', `${K}-ctrl-round-robin/queue`, `${K}-ctrl-round-robin/nvmet`, 'higher'),
  ];
  const m = (n: string): Record<string, number> | undefined => arms.find((a) => a.name === n)?.metrics;
  const rrS = m(`${K}-ctrl-round-robin/single`);
  const rrQ = m(`${K}-ctrl-round-robin/queue`);
  const pct = (x: number | undefined): string => `${Math.round((x ?? 0) * 100)}%`;
  const verdict =
    (rrS?.['iops'] === undefined || rrQ?.['iops'] === undefined
      ? 'A round-robin arm did not run: see the arms.'
      : `${K} duplicate controllers under round-robin: placement single put ${pct(rrS['targetMaxWorkerShare'])} of the commands on one worker (${rrS['targetWorkersUsed']} used) at ${rrS['iops']} IOPS; placement queue spread them over ${rrQ['targetWorkersUsed']} workers (busiest ${pct(rrQ['targetMaxWorkerShare'])}) at ${rrQ['iops']} IOPS. ` +
        `Multipath paths: ${rrQ['paths']}. fio verify: ${verifyText(arms.find((a) => a.name === `${K}-ctrl-round-robin/queue/verify`))}.`) + nvmetVerdict(arms, K, nvmet);
  return {
    name: 'duplicate-connect',
    title: `${title} (Linux host)`,
    hypothesis: `${hypothesis} With the Linux host: placement single reproduces nvmet's one-CPU behaviour (every queue on one target worker); placement queue spreads the duplicate controllers' queues, so a shortfall that disappears with queue is the target's. nvmet itself, on the same host, is the reference.`,
    arms,
    comparisons,
    verdict,
    notes: [
      `Our target runs its I/O queues in ${workers} worker processes (TargetService workers, the figures GET /workers serves): targetWorkerNIos are the commands worker N completed during fio, targetWorkerNCpuPct its CPU over fio's wall time; targetMaxWorkerShare the busiest worker's share.`,
      'paths: controllers under the native-multipath subsystem (/sys/class/nvme-subsystem/*/nvmeN); iopolicy is written to that subsystem\'s iopolicy file and read back, and an arm whose policy the kernel refuses is skipped.',
      `fio: 4k randread QD32 × 2 jobs, ${runtimeS} s, libaio, direct, on the multipath head; the verify arms write 8 MiB with verify=crc32c and read it back.`,
      `The */nvmet arms connect the same host to Linux's nvmet (${String(nvmet.params['target'])}), configured through configfs with one 128 MiB file namespace (buffered_io: the page cache, like our target's RAM namespace); they have no per-worker figures (nvmet's work runs in kernel workqueues, on the host's own CPUs). Paths differ: our target is reached as the setup line says, nvmet over the loopback of the host that runs the initiator, so a ratio against nvmet includes that difference.`,
    ],
  };
}

const verifyText = (v: Arm | undefined): string => (v === undefined ? 'not run' : v.error !== undefined ? `FAILED (${v.error})` : v.skipped !== undefined ? `skipped (${v.skipped})` : 'clean');

/** The verdict's sentence on the nvmet reference: its IOPS with 1 and K controllers, its paths and its verify. */
function nvmetVerdict(arms: Arm[], K: number, nvmet: DupTarget): string {
  if (nvmet.skip !== undefined) return ` nvmet reference: skipped (${nvmet.skip}).`;
  if (nvmet.error !== undefined) return ` nvmet reference: FAILED (${nvmet.error}).`;
  const one = arms.find((a) => a.name === '1-ctrl/nvmet')?.metrics['iops'];
  const rr = arms.find((a) => a.name === `${K}-ctrl-round-robin/nvmet`)?.metrics;
  if (one === undefined || rr?.['iops'] === undefined) return ' nvmet reference: an arm did not run, see the arms.';
  return ` nvmet (the reference, same host): 1 controller ${one} IOPS, ${K} duplicate controllers round-robin ${rr['iops']} IOPS over ${rr['paths']} paths; fio verify: ${verifyText(arms.find((a) => a.name === `${K}-ctrl-round-robin/nvmet/verify`))}.`;
}

/**
 * Runs `fn` (fio on the host) and reads the target's workers before and after (what GET /workers serves): commands
 * and CPU per worker over fio's wall time, workers used, the busiest worker's share of the commands.
 */
async function workerCounts<T>(svc: TargetService, fn: () => Promise<T>): Promise<{ result: T; counts: Record<string, number> }> {
  const before = svc.workers().map((w) => ({ ios: w.ios, cpuUs: w.cpuUserUs + w.cpuSystemUs }));
  const t0 = performance.now();
  const result = await fn();
  const wallUs = (performance.now() - t0) * 1000;
  await new Promise((res) => setTimeout(res, 450)); // two worker report intervals
  const after = svc.workers();
  const deltas = after.map((w, i) => w.ios - (before[i]?.ios ?? 0));
  const total = deltas.reduce((a, b) => a + b, 0);
  const counts: Record<string, number> = {
    targetWorkersUsed: deltas.filter((d) => d > 0).length,
    targetMaxWorkerShare: total === 0 ? 0 : Math.round((Math.max(...deltas) / total) * 1000) / 1000,
  };
  after.forEach((w, i) => {
    counts[`targetWorker${i}Ios`] = deltas[i] ?? 0;
    counts[`targetWorker${i}CpuPct`] = round1((100 * (w.cpuUserUs + w.cpuSystemUs - (before[i]?.cpuUs ?? 0))) / wallUs);
  });
  return { result, counts };
}

/** A randread fio job on `dev` (queue-groups and match-hw-queues). */
const randread = (dev: string, quick: boolean): FioJob => ({ name: 'randread', filename: dev, rw: 'randread', bs: '4k', iodepth: 64, runtimeS: quick ? 2 : 10, size: '64m' });

/**
 * Connects, finds the block device, runs fio: an arm's body for the single-controller scenarios. With `svc` (our
 * target) also the target's view of the controller fio ran on: its I/O queues and the commands each one carried; with
 * `verify`, then a fio randwrite with verify=crc32c over 8 MiB on the same device (a mismatch fails the arm).
 */
async function connectAndFio(k: KernelRun, nqn: string, o: { nrIoQueues?: number; queuesPerHctx?: number }, quick: boolean, svc?: TargetService, verify = false): Promise<Record<string, number>> {
  const c = await k.host.connect({ traddr: k.traddr, trsvcid: k.trsvcid, nqn, ctrlLossTmo: 2, ...o });
  const sub = await k.host.subsystem(c.device);
  const dev = sub?.blockDevice ?? `/dev/${c.device}n1`;
  if (!(await k.host.waitBlock(dev))) throw new Error(`${dev} did not appear after nvme connect`);
  const queues = await k.host.ioQueues(c.device);
  const fio = fioMetrics(await k.host.fio(randread(dev, quick)));
  const seen = svc === undefined ? {} : targetQueueCounts(svc, nqn);
  const verified = verify ? { verifyIos: (await k.host.fio({ name: 'verify', filename: dev, rw: 'randwrite', bs: '4k', iodepth: 16, runtimeS: 60, size: '8m', verify: 'crc32c' })).ios } : {};
  return { ...fio, ...(queues === undefined ? {} : { ioQueues: queues }), ...seen, ...verified };
}

/**
 * Our target's view of the newest controller of `nqn`: targetIoQueues, the commands each I/O queue carried
 * (targetQ<qid>Cmds) and targetQueueSpread, the least-used queue's commands over the busiest's (1: an even spread).
 */
function targetQueueCounts(svc: TargetService, nqn: string): Record<string, number> {
  const ctrl = svc.listControllers().filter((c) => c.subnqn === nqn).sort((a, b) => b.cntlid - a.cntlid)[0];
  const io = (ctrl?.queues ?? []).filter((q) => q.qid > 0).sort((a, b) => a.qid - b.qid);
  if (io.length === 0) return {};
  const cmds = io.map((q) => q.commands);
  const out: Record<string, number> = { targetIoQueues: io.length, targetQueueSpread: Math.round((Math.min(...cmds) / Math.max(1, ...cmds)) * 1000) / 1000 };
  for (const q of io) out[`targetQ${q.qid}Cmds`] = q.commands;
  return out;
}

/**
 * The NIC-aware RFC's own arm: connect with match_hw_queues (the kernel picks min(online CPUs, NIC queues) I/O
 * queues), read its debugfs io_queue_info and match it queue by queue to what our target saw, then fio.
 */
async function matchHwQueuesArm(k: KernelRun, target: InProcessTarget, nicQueues: number, quick: boolean): Promise<Record<string, number>> {
  const cpus = Number((await k.host.runner.exec(['nproc'])).stdout.trim()) || 1;
  const c = await k.host.connect({ traddr: k.traddr, trsvcid: k.trsvcid, nqn: target.nqn, ctrlLossTmo: 2, matchHwQueues: true });
  const info = await k.host.ioQueueInfo(c.device);
  const seen = targetQueueCounts(target.service, target.nqn);
  const targetQueues = newestController(target.service, target.nqn)?.queues.filter((q) => q.qid > 0) ?? [];
  const targetQids = targetQueues.map((q) => q.qid);
  // Over a tap the target sees the guest's own flows: each debugfs line's source is the peer of the queue with its qid.
  const flowsMatch = info !== undefined && info.length === targetQueues.length && info.every((l) => targetQueues.find((q) => q.qid === l.qid)?.peer === `${l.srcIp}:${l.srcPort}`);
  const infoQids = (info ?? []).map((q) => q.qid);
  if (info !== undefined) k.host.notes.add(`match_hw_queues: debugfs io_queue_info of ${c.device}: ${info.map((q) => `qid ${q.qid} cpu ${q.cpu} ${q.srcIp}:${q.srcPort} -> ${q.dstIp}:${q.dstPort}`).join('; ')}; our target saw I/O queues qid ${targetQids.join(', ')}.`);
  const sub = await k.host.subsystem(c.device);
  const dev = sub?.blockDevice ?? `/dev/${c.device}n1`;
  if (!(await k.host.waitBlock(dev))) throw new Error(`${dev} did not appear after nvme connect`);
  const queues = await k.host.ioQueues(c.device);
  return {
    ...fioMetrics(await k.host.fio(randread(dev, quick))),
    ...(queues === undefined ? {} : { ioQueues: queues }),
    expectedIoQueues: Math.min(cpus, nicQueues),
    onlineCpus: cpus,
    ...seen,
    queueInfoQueues: info?.length ?? 0,
    queueInfoQidsMatchTarget: info !== undefined && infoQids.length === targetQids.length && infoQids.every((q, i) => q === targetQids[i]) ? 1 : 0,
    ...(k.net?.kind === 'tap' ? { queueInfoFlowsMatchTarget: flowsMatch ? 1 : 0 } : {}),
  };
}

/** The CPU the io-cpu arms pin fio to: the highest online one (CPU 0 takes most interrupts), 0 when unknown. */
async function submitterCpu(host: KernelHost): Promise<number> {
  const r = await host.runner.exec(['cat', `${host.root}/sys/devices/system/cpu/online`]);
  const last = /(\d+)\s*$/.exec(r.code === 0 ? r.stdout : '');
  return last === null ? 0 : Number(last[1]);
}

/**
 * One io-cpu arm: connect, find every queue's io_cpu attribute (skip with the paths looked at when there is none),
 * with `write` set it to `cpu` and read it back (skip when the kernel refuses), then fio pinned to `cpu`.
 */
async function ioCpuArm(k: KernelRun, nqn: string, cpu: number, write: boolean, quick: boolean): Promise<Record<string, number>> {
  const c = await k.host.connect({ traddr: k.traddr, trsvcid: k.trsvcid, nqn, ctrlLossTmo: 2 });
  const attr = await k.host.ioCpuAttributes(c.device);
  if ('skip' in attr) throw new Skip(attr.skip);
  if (write) {
    const why = await k.host.setIoCpu(attr.paths, cpu);
    if (why !== undefined) throw new Skip(why);
  }
  const values = await k.host.ioCpus(attr.paths);
  const sub = await k.host.subsystem(c.device);
  const dev = sub?.blockDevice ?? `/dev/${c.device}n1`;
  if (!(await k.host.waitBlock(dev))) throw new Error(`${dev} did not appear after nvme connect`);
  const r = await k.host.fio({ ...randread(dev, quick), cpusAllowed: cpu });
  return { ...fioMetrics(r), submitterCpu: cpu, queuesOnSubmitterCpu: values.filter((v) => v === cpu).length, ioQueues: attr.paths.length };
}

/** queue-groups with the Linux host: queues_per_hctx 1/2/4 where nvme-fabrics accepts the option (the RFC kernel). */
export async function kernelQueueGroups(ctx: ScenarioContext, title: string, hypothesis: string): Promise<Report> {
  const createdAt = new Date();
  const target = await startInProcessTarget({ size: '128M' });
  try {
    return await kernelPasses(ctx, target.port, 2, async (k) => {
      const arms: Arm[] = [];
      for (const qph of [1, 2, 4]) {
        const check = qph === 1 ? undefined : k.host.needsOption('queues_per_hctx');
        arms.push(await kernelArm(ctx, k.host, `qph${qph}`, { queues_per_hctx: qph, nr_io_queues: 1 }, check, () => connectAndFio(k, target.nqn, { nrIoQueues: 1, ...(qph === 1 ? {} : { queuesPerHctx: qph }) }, ctx.quick, target.service, true)));
      }
      const unwindLog: string[] = [];
      arms.push(
        await kernelArm(ctx, k.host, 'qph2-stalled-queue', { queues_per_hctx: 2, nr_io_queues: 1, stalledQid: 2, io_timeout: STALL_IO_TIMEOUT_S }, k.initiator.where === 'lab' ? k.host.needsOption('queues_per_hctx') : LAB_ONLY, async () => {
          const u = await stalledGroupQueue(target.service, k.host, { traddr: k.traddr, trsvcid: k.trsvcid, nqn: target.nqn, nrIoQueues: 1, queuesPerHctx: 2 }, 2, STALL_IO_TIMEOUT_S);
          unwindLog.push(...u.log.map((l) => `qph2-stalled-queue, guest kernel log: ${l}`));
          return u.metrics;
        }),
      );
      const comparisons = [compare(arms, 'qph2 vs qph1 IOPS', 'iops', 'qph2', 'qph1', 'higher'), compare(arms, 'qph4 vs qph1 IOPS', 'iops', 'qph4', 'qph1', 'higher')];
      const ran = comparisons.filter((c) => c !== undefined);
      return report(
        {
          name: 'queue-groups',
          title: `${title} (Linux host)`,
          hypothesis,
          arms,
          comparisons,
          verdict: (ran.length === 0 ? `Kernel ${k.initiator.kernel} has no queues_per_hctx: only the qph1 baseline ran; the other arms are skipped with the reason.` : `${ran.map((c) => `${c.label}: ${round1(c.ratio)}×`).join('; ')}.`) + stalledVerdict(arms.find((a) => a.name === 'qph2-stalled-queue')),
          notes: [
            'qph1 is a plain connect with one I/O queue; qph2/qph4 add --queues-per-hctx, which only kernels with the queue-groups RFC accept (probed in cat /dev/nvme-fabrics).',
            'fio: 4k randread QD64, libaio, direct; then 4k randwrite QD16 over 8 MiB with verify=crc32c on the same controller (verifyIos; a mismatch fails the arm).',
            'ioQueues: the host\'s I/O queues (sysfs queue_count - 1); targetIoQueues: the I/O queues our target saw Connect for that controller; targetQ<qid>Cmds: the commands each carried (admin commands excluded), targetQueueSpread the least-used over the busiest (1 = even, as round-robin dispatch inside one hctx gives).',
            `qph2-stalled-queue (error path, fault engine): one hctx with 2 queues; after the connect our target drops the next Read on I/O queue 2 (rule {match: {qid: 2, opcode: 2}, schedule: {times: 1}, action: drop}: it never completes) while dd reads 64 × 4 KiB direct. With nvme_core io_timeout ${STALL_IO_TIMEOUT_S} s (put back after) the host times the Read out, recovers the controller (reconnect_delay 1 s) and retries it. droppedReads: the rule's firings; ioCompleted: dd succeeded; ioWallMs: dd's wall time; hostRecovered: the controller was live after; targetIoQueuesAfter: I/O queues of the controller our target then held; hostTimeoutLines: guest nvme log lines naming a timeout; then, after the disconnect, targetControllersLeft, hostControllersLeft, kernelTroubleLines as in parallel-connect.`,
            ...unwindLog,
          ],
        },
        ctx,
        createdAt,
        k,
      );
    }, [['qph1', 'iops', 'higher']]);
  } finally {
    await target.stop();
  }
}

/** nvme_core io_timeout (s) while qph2-stalled-queue runs: the dropped Read times out this soon. */
const STALL_IO_TIMEOUT_S = 5;

/** The verdict's sentence on qph2-stalled-queue. */
function stalledVerdict(a: Arm | undefined): string {
  if (a === undefined || a.skipped !== undefined) return '';
  if (a.error !== undefined) return ` Stalled queue in a group: the arm failed (${a.error}).`;
  const m = a.metrics;
  return ` With one Read dropped on queue 2 of the qph2 group (${m['droppedReads']} dropped): the host ${m['hostRecovered'] === 1 ? 'recovered the controller' : 'did NOT recover the controller'}, dd ${m['ioCompleted'] === 1 ? `completed in ${m['ioWallMs']} ms` : 'failed'} (${m['hostTimeoutLines']} timeout line(s) in the guest log); ${unwoundClean(m) ? 'after the disconnect nothing was left and the kernel logged no warning' : `NOT clean after the disconnect (target ${m['targetControllersLeft']}, guest ${m['hostControllersLeft']} controllers left, ${m['kernelTroubleLines']} kernel trouble lines)`}.`;
}

/**
 * match-hw-queues in the lab: 4 vCPUs and, where the machine allows a tap, a 2-queue NIC to the target, so
 * match_hw_queues is held by the NIC (min(4, 2)) and the baseline by the CPUs (4).
 */
const MHQ_SMP = 4;
const MHQ_NIC_QUEUES = 2;

/**
 * match-hw-queues with the Linux host: the kernel's default (one I/O queue per CPU) vs nr_io_queues = the rx queues of
 * the interface that reaches the target; and the io_cpu arm, where the kernel exposes a per-queue CPU attribute.
 */
export async function kernelMatchHwQueues(ctx: ScenarioContext, title: string, hypothesis: string): Promise<Report> {
  const createdAt = new Date();
  const target = await startInProcessTarget({ size: '128M' });
  try {
    return await kernelPasses(ctx, target.port, MHQ_SMP, async (k) => {
      const nic = k.initiator.where === 'lab' ? (k.net?.kind === 'tap' ? 'eth1' : 'eth0') : 'lo';
      const rx = await k.host.runner.exec(['sh', '-c', `ls -d ${k.host.root}/sys/class/net/${nic}/queues/rx-* | wc -l`]);
      const nicQueues = Number(rx.stdout.trim()) || 1;
      const cpu = await submitterCpu(k.host);
      const arms: Arm[] = [
        await kernelArm(ctx, k.host, 'baseline', { nr_io_queues: 'kernel default (one per CPU)' }, undefined, () => connectAndFio(k, target.nqn, {}, ctx.quick)),
        await kernelArm(ctx, k.host, 'matched', { nr_io_queues: nicQueues, nic, nicRxQueues: nicQueues }, k.host.needsOption('nr_io_queues'), () => connectAndFio(k, target.nqn, { nrIoQueues: nicQueues }, ctx.quick)),
        await kernelArm(ctx, k.host, 'match_hw_queues', { match_hw_queues: 'on', nic, nicRxQueues: nicQueues }, k.host.needsOption('match_hw_queues'), () => matchHwQueuesArm(k, target, nicQueues, ctx.quick)),
        // Both io-cpu arms pin fio to one CPU; default leaves each queue's io_cpu where connect put it, submitter moves it there.
        await kernelArm(ctx, k.host, 'io-cpu-default', { io_cpu: 'connect-time choice', fioCpu: cpu }, undefined, () => ioCpuArm(k, target.nqn, cpu, false, ctx.quick)),
        await kernelArm(ctx, k.host, 'io-cpu-submitter', { io_cpu: `submitter CPU ${cpu}`, fioCpu: cpu }, undefined, () => ioCpuArm(k, target.nqn, cpu, true, ctx.quick)),
      ];
      const c = compare(arms, 'matched vs baseline IOPS', 'iops', 'matched', 'baseline', 'higher');
      const io = compare(arms, `io_cpu = submitter CPU vs connect-time choice IOPS, fio on CPU ${cpu}`, 'iops', 'io-cpu-submitter', 'io-cpu-default', 'higher');
      const ioText = io === undefined ? '' : ` With fio on CPU ${cpu}, io_cpu set to that CPU ran at ${round1(io.ratio)}× the connect-time choice's IOPS.`;
      const mh = arms.find((a) => a.name === 'match_hw_queues' && a.skipped === undefined && a.error === undefined)?.metrics;
      const mhText = mh === undefined ? '' : ` match_hw_queues: the kernel set up ${mh['ioQueues']} I/O queue(s) (min of ${mh['onlineCpus']} CPUs and ${nicQueues} ${nic} queue(s) = ${mh['expectedIoQueues']}); its debugfs queue info listed ${mh['queueInfoQueues']}, ${mh['queueInfoQidsMatchTarget'] === 1 ? 'the same qids our target saw' : 'NOT the qids our target saw'}${mh['queueInfoFlowsMatchTarget'] === undefined ? '' : mh['queueInfoFlowsMatchTarget'] === 1 ? ', and each queue\'s TCP flow (source address and port) is the one our target saw Connect that qid on' : ', but NOT the TCP flows our target saw for those qids'}.`;
      return report(
        {
          name: 'match-hw-queues',
          title: `${title} (Linux host)`,
          hypothesis,
          arms,
          comparisons: [c, io],
          verdict: (c === undefined ? 'An arm did not run: see the arms.' : `nr_io_queues=${nicQueues} (the ${nic} rx queues) ran at ${round1(c.ratio)}× the kernel default's IOPS.`) + ioText + mhText,
          notes: [
            `The NIC is ${nic} (the interface that reaches the target here); its rx queue count is read from /sys/class/net/${nic}/queues.`,
            'fio: 4k randread QD64, libaio, direct.',
            `match_hw_queues (the NIC-aware RFC kernel only): the kernel chooses min(online CPUs, ${nic} queues) I/O queues (expectedIoQueues); queueInfoQueues counts the lines of its debugfs io_queue_info (qid, io_cpu, TCP flow), queueInfoQidsMatchTarget is 1 when their qids are the I/O queues our target saw Connect for. ${k.net?.kind === 'tap' ? 'Over the tap NIC our target sees the guest\'s own flows: queueInfoFlowsMatchTarget is 1 when each debugfs line\'s source address and port is the peer of the queue with that qid at our target (GET /controllers).' : 'Over the lab\'s user-mode network the flows\' source ports are the guest\'s; the target sees socat\'s (guestfwd), so flows are matched by qid, not by port.'}`,
            `io-cpu arms: fio pinned to CPU ${cpu} (the highest online CPU; fio cpus_allowed). io-cpu-default keeps each queue's io_cpu as connect chose it (nvme_tcp_set_queue_io_cpu); io-cpu-submitter writes ${cpu} to every queue's io_cpu attribute and reads it back. queuesOnSubmitterCpu counts the queues whose io_cpu is CPU ${cpu}. Both are skipped where the kernel has no per-queue io_cpu attribute.`,
          ],
        },
        ctx,
        createdAt,
        k,
      );
    }, [['baseline', 'iops', 'higher'], ['matched', 'iops', 'higher']], { queues: MHQ_NIC_QUEUES, bind: async (addr) => (await target.service.addPort({ id: 2, addr, port: 0 })).port });
  } finally {
    await target.stop();
  }
}
