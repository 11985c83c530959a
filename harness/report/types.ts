// The report document: one stable JSON schema for workload runs and scenarios (schemaVersion bumps on breaking change).
import type { RunResult } from '../load/types.js';

/** Version of the JSON layout below. Additive fields keep the version; renames/removals bump it. */
export const REPORT_SCHEMA_VERSION = 1;

export type ParamValue = string | number | boolean;

export interface MachineInfo {
  hostname: string;
  /** Logical CPUs Node sees (os.availableParallelism()). */
  cpus: number;
  cpuModel: string;
  platform: string;
  kernel: string;
  node: string;
  /** Free text: where the ends ran, e.g. "2 cores, loopback, initiator and target on one host". */
  setup: string;
}

/** One arm of an experiment: a configuration, run in the same invocation as the others. */
export interface Arm {
  name: string;
  /** The knobs that distinguish this arm (queues_per_hctx, connect latency, ...). */
  params: Record<string, ParamValue>;
  /** Scalar results the comparisons are computed from (iops, mbps, p99Us, connectMs, ...). */
  metrics: Record<string, number>;
  /** Full engine measurements when the arm ran a workload. */
  run?: RunResult;
  /** Ends whose CPU capped this arm (build.ts boundSides); absent when neither was above the threshold. */
  bound?: ArmBound[];
  /** Set when the arm could not run; metrics are then empty. */
  skipped?: string;
  error?: string;
}

export interface ArmBound {
  side: 'initiator' | 'target' | 'initiator+target';
  /** e.g. "busiest thread at 97 % of a CPU". */
  reason: string;
}

/** ratio = arms[numerator].metrics[metric] / arms[denominator].metrics[metric]. */
export interface Comparison {
  label: string;
  metric: string;
  numerator: string;
  denominator: string;
  numeratorValue: number;
  denominatorValue: number;
  ratio: number;
  /** Whether a ratio above 1 means the numerator arm is better. */
  better: 'higher' | 'lower';
  /** Set when an arm of the ratio was CPU-bound: which, and why (the ratio then measures that end's ceiling). */
  caveat?: string;
}

/** Which initiator drove the arms: ours (this process) or the Linux host (nvme-cli + fio), and where that ran. */
export interface InitiatorInfo {
  kind: 'ours' | 'kernel';
  /** kernel only: on this machine (local) or in the qemu lab's guest (lab). */
  where?: 'local' | 'lab';
  /** kernel only: `uname -r` where it ran. */
  kernel?: string;
  /** Set for the lab: "emulated (TCG)" or "emulated (KVM)"; figures are then not comparable to real hardware. */
  emulated?: string;
  /** kernel only: what the kernel offered, as the driver probed it (the facts the arms' skips rest on). */
  offers?: KernelOffersInfo;
  /** kernel only: the patch series whose nvme host modules the patched arms ran with (--host-patches). */
  hostPatches?: { series: string; patches: string[]; base: string; kver: string };
}

/** What the Linux host's kernel offers the experiments, as harness/kernel-host/host.ts probed it. */
export interface KernelOffersInfo {
  /** Tokens `cat /dev/nvme-fabrics` lists; absent when the kernel does not list them (before 5.19). */
  fabricsOptions?: string[];
  /** nvme_core's multipath parameter (native multipath: duplicate controllers share one head). */
  multipath: boolean;
  /** nvme_core's default iopolicy. */
  iopolicy?: string;
  /** iopolicy values a subsystem's iopolicy file took (read back) or refused when the arms wrote them. */
  iopolicies?: { accepted: string[]; refused: string[] };
  /**
   * Looked for on the first controller connected (absent when none was): the per-queue io_cpu attribute and a
   * per-queue info directory, as paths with the controller written nvmeN; absent inside when not found.
   */
  perQueue?: { ioCpu?: string; queueInfo?: string };
}

export interface Report {
  schemaVersion: typeof REPORT_SCHEMA_VERSION;
  /** "workload" for a job file run, "scenario" for harness/scenarios. */
  kind: 'workload' | 'scenario';
  name: string;
  title: string;
  /** What the scenario expects to see, stated before it runs. */
  hypothesis: string;
  /** ISO 8601 time the run started. */
  createdAt: string;
  quick: boolean;
  machine: MachineInfo;
  arms: Arm[];
  comparisons: Comparison[];
  /** One line: what the ratios say about the hypothesis. */
  verdict: string;
  notes: string[];
  /** Whole scenario not run (e.g. no permission to create network namespaces); arms are then empty or skipped. */
  skipped?: string;
  /** Absent: our initiator. Arms the initiator could not run carry `skipped` with the reason. */
  initiator?: InitiatorInfo;
  /** False when an arm failed or verification found a mismatch. */
  ok: boolean;
}
