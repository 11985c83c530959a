// The Linux host's error paths against our target's fault rules (docs/faults.md): what a refused Connect or a stalled
// queue left behind on both sides. A clean unwind leaves no controller to the subsystem at the target
// (listControllers) nor at the host (/sys/class/nvme), and nothing in the kernel log that is the kernel's own failure.
import type { ControllerInfo, TargetService } from '../../target/index.js';
import type { KernelConnectOptions } from '../kernel-host/commands.js';
import { KernelHostCommandError, type KernelHost } from '../kernel-host/host.js';
import { armFault } from '../faults.js';

/** How long the target may take to see the host's last queue go (the emulated guest closes its sockets slowly). */
const SETTLE_MS = 15_000;

export interface Unwind {
  /** Metrics: targetControllersLeft, hostControllersLeft, kernelTroubleLines, hostNvmeLogLines, hostTimeoutLines. */
  metrics: Record<string, number>;
  /** The kernel's trouble lines, then its last nvme lines (at most 6), for the report's notes. */
  log: string[];
}

/**
 * After an error path ran and the arm disconnected what it had: waits up to SETTLE_MS for the target to hold no
 * controller to `nqn`, then counts what is left on each side and reads the kernel log written since `mark`.
 */
export async function unwindEvidence(svc: TargetService, host: KernelHost, nqn: string, mark: number): Promise<Unwind> {
  const left = (): number => svc.listControllers().filter((c) => c.subnqn === nqn && !c.discovery).length;
  const end = Date.now() + SETTLE_MS;
  while (left() > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
  const hostLeft = await host.controllersOf(nqn);
  const { trouble, nvme } = await host.kernelLog(mark);
  return {
    metrics: { targetControllersLeft: left(), hostControllersLeft: hostLeft.length, kernelTroubleLines: trouble.length, hostNvmeLogLines: nvme.length, hostTimeoutLines: nvme.filter((l) => /timeout/i.test(l)).length },
    log: [...trouble, ...nvme.slice(-6)],
  };
}

/** An unwind is clean when neither side holds a controller and the kernel logged no failure of its own. */
export const unwoundClean = (m: Record<string, number>): boolean => m['targetControllersLeft'] === 0 && m['hostControllersLeft'] === 0 && m['kernelTroubleLines'] === 0;

/** `nqn`'s newest controller at the target: the one whose admin queue connected last (a torn-down one may linger). */
export function newestController(svc: TargetService, nqn: string): ControllerInfo | undefined {
  return svc
    .listControllers()
    .filter((c) => c.subnqn === nqn && !c.discovery)
    .sort((a, b) => (a.queues[0]?.connectAt ?? 0) - (b.queues[0]?.connectAt ?? 0))
    .at(-1);
}

const hitsOf = (svc: TargetService, id: string): number => svc.listFaultRules().find((r) => r.id === id)?.hits ?? 0;

/**
 * A Connect refused on I/O queue `qid` in the middle of the setup (CONNECT_INVALID_PARAM with DNR, NVMe-oF 1.1
 * §3.3, Figure 21): the host must fail the connect and unwind the queues it had set up. Then the same connect
 * without the rule, which must succeed (the failure left the host able to connect).
 */
export async function refusedIoConnect(svc: TargetService, host: KernelHost, c: KernelConnectOptions, qid: number): Promise<Unwind> {
  const mark = await host.dmesgMark();
  const rule = armFault(svc, { match: { event: 'connect', subnqn: c.nqn, qid }, schedule: { nth: 1 }, action: { kind: 'status', status: 'CONNECT_INVALID_PARAM', dnr: true } });
  let connectFailed = 0;
  let refused = 0;
  let device: string | undefined;
  try {
    device = (await host.connect(c)).device;
  } catch (e) {
    if (!(e instanceof KernelHostCommandError)) throw e;
    connectFailed = 1;
  } finally {
    refused = hitsOf(svc, rule.id);
    svc.removeFaultRule(rule.id);
  }
  if (device !== undefined) await host.disconnect(device);
  const u = await unwindEvidence(svc, host, c.nqn, mark);
  const again = await host.connect(c);
  const ioQueues = (await host.ioQueues(again.device)) ?? 0;
  await host.disconnect(again.device);
  return { metrics: { connectFailed, refusedConnects: refused, ...u.metrics, reconnectIoQueues: ioQueues }, log: u.log };
}

/**
 * One queue of a queues-per-hctx group stalled: after the connect, the target drops the next Read on I/O queue `qid`
 * (it never completes). With nvme_core io_timeout at `timeoutS` the host times it out, recovers the controller
 * (reconnect_delay 1 s) and retries the Read on the new queues; dd must complete. io_timeout is put back after.
 */
export async function stalledGroupQueue(svc: TargetService, host: KernelHost, c: KernelConnectOptions, qid: number, timeoutS: number): Promise<Unwind> {
  const before = await host.ioTimeout();
  await host.ioTimeout(timeoutS);
  const mark = await host.dmesgMark();
  try {
    const { device } = await host.connect({ ...c, reconnectDelay: 1, ctrlLossTmo: 30 });
    const dev = (await host.subsystem(device))?.blockDevice ?? `/dev/${device}n1`;
    if (!(await host.waitBlock(dev))) throw new Error(`${dev} did not appear after nvme connect`);
    const rule = armFault(svc, { match: { subnqn: c.nqn, qid, opcode: 0x02 }, schedule: { times: 1 }, action: { kind: 'drop' } });
    const t0 = Date.now();
    let dd;
    let dropped = 0;
    try {
      dd = await host.runner.exec(['dd', `if=${dev}`, 'of=/dev/null', 'bs=4k', 'count=64', 'iflag=direct']);
    } finally {
      dropped = hitsOf(svc, rule.id);
      svc.removeFaultRule(rule.id);
    }
    const ioWallMs = Date.now() - t0;
    const state = await host.controllerState(device);
    const targetIoQueuesAfter = newestController(svc, c.nqn)?.queues.filter((q) => q.qid > 0).length ?? 0;
    await host.disconnect(device);
    const u = await unwindEvidence(svc, host, c.nqn, mark);
    return { metrics: { droppedReads: dropped, ioCompleted: dd.code === 0 ? 1 : 0, ioWallMs, hostRecovered: state === 'live' ? 1 : 0, targetIoQueuesAfter, ...u.metrics }, log: u.log };
  } finally {
    if (before !== undefined) await host.ioTimeout(before);
  }
}

/** Why an error-path arm does not run outside the lab: it reads the host's kernel log and changes nvme_core's io_timeout. */
export const LAB_ONLY = 'error paths run in the lab guest only (they read its kernel log and change nvme_core io_timeout)';
