// What a scenario is: a named experiment with a hypothesis, run as arms in one invocation, producing a Report.
import type { ProgressInfo } from '../load/types.js';
import type { Report } from '../report/types.js';
import type { HostModules } from '../kernel-host/host-patches.js';
import type { LabKernel } from '../kernel-host/runner.js';
import type { TargetKind } from './placement.js';

/**
 * The Linux host as the initiator (`--initiator kernel`): nvme-cli and fio on this machine as root (`local`; `env`
 * `root` and `uid` let tests put fake tools and a fake /sys in place) or in the qemu lab's guest (`lab`, 6.1, 6.12 or newest).
 * `hostModules` (lab): a patch series' modules, loaded in the guest after the stock arms ran (--host-patches).
 */
export type KernelHostChoice = ({ where: 'local'; env?: NodeJS.ProcessEnv; root?: string; uid?: number } | { where: 'lab'; lab: LabKernel; hostModules?: HostModules }) & {
  /** Every nvme connect that names neither digest asks for header and data digests (NVMe/TCP 1.0 §3.6.2.2). */
  digests?: boolean;
};

export interface ScenarioContext {
  /** Seconds rather than minutes: short runtimes, fewer repetitions; same arms. */
  quick: boolean;
  /** One-line status messages (stderr on a TTY; silent in CI and tests). */
  log: (msg: string) => void;
  /** Engine progress for the current arm (TTY progress line). */
  onProgress?: (label: string, p: ProgressInfo) => void;
  signal?: AbortSignal;
  /**
   * Run the initiator's I/O queues in this many io workers (connect option io_workers; 0 or absent: on this thread).
   * Split scenarios then pin this process to every CPU but the target's and the workers across those CPUs.
   */
  ioWorkers?: number;
  /** The target under test: ours (`nvme-tcp target`, default) or SPDK's nvmf_tgt; every scenario takes either. */
  target?: TargetKind;
  /**
   * Cores given to the target (SPDK: its reactor mask, one poll group per core; ours serves every queue on one event
   * loop, so only 1). Default 1. The initiator keeps its own CPU, so this needs targetCores + 1 allowed CPUs to pin.
   */
  targetCores?: number;
  /** SPDK only: reactors sleep until work arrives (--interrupt-mode) instead of busy-polling their cores. */
  spdkInterrupt?: boolean;
  /** Run the arms with the Linux host as the initiator instead of ours (harness/scenarios/kernel-initiator.ts). */
  kernelHost?: KernelHostChoice;
}

export interface Scenario {
  name: string;
  title: string;
  /** Stated before running; copied into the report. */
  hypothesis: string;
  /** Whether run() honours ScenarioContext.ioWorkers (the CLI refuses --io-workers for the others). */
  ioWorkers?: boolean;
  run(ctx: ScenarioContext): Promise<Report>;
}

/** Runtime and ramp for workload arms: quick keeps a whole scenario within seconds. */
export function timing(quick: boolean): { runtime: string; ramp: string } {
  return quick ? { runtime: '300ms', ramp: '100ms' } : { runtime: '5s', ramp: '1s' };
}

/** Median of a non-empty list (repetitions of a timing). */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

export const round1 = (x: number): number => Math.round(x * 10) / 10;
