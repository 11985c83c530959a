// Building reports: machine description, arm metrics from engine runs, and ratios computed from the arms.
import os from 'node:os';
import type { RunResult } from '../load/types.js';
import type { Arm, ArmBound, Comparison, InitiatorInfo, KernelOffersInfo, MachineInfo, Report } from './types.js';
import { REPORT_SCHEMA_VERSION } from './types.js';

export function machineInfo(setup = 'loopback (127.0.0.1), initiator and target on one host'): MachineInfo {
  const cpus = os.cpus();
  return {
    hostname: os.hostname(),
    cpus: os.availableParallelism(),
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    platform: `${os.platform()} ${os.arch()}`,
    kernel: os.release(),
    node: process.version,
    setup: `${os.availableParallelism()} cores, ${setup}`,
  };
}

/** The scalar metrics every workload arm exposes. */
export function runMetrics(r: RunResult): Record<string, number> {
  return {
    iops: r.totals.iops,
    mbps: r.totals.mbps,
    p50Us: r.totals.latencyUs.p50,
    p99Us: r.totals.latencyUs.p99,
    p99_9Us: r.totals.latencyUs.p99_9,
    maxUs: r.totals.latencyUs.max,
    cpuPct: r.cpu.percentOfCore,
    loopLagP99Ms: r.eventLoop.p99Ms,
    errors: r.totals.errors,
    verifyMismatches: r.verify.mismatchCount,
    ...(r.cpu.busiestThread === undefined ? {} : { busiestThreadPct: r.cpu.busiestThread.percentOfCore }),
    ...(r.cpu.allowedCpus === undefined ? {} : { allowedCpus: r.cpu.allowedCpus }),
    ...(r.cpu.target === undefined ? {} : { targetCpuPct: r.cpu.target.percentOfCore }),
    ...(r.cpu.target?.busiestThread === undefined ? {} : { targetBusiestThreadPct: r.cpu.target.busiestThread.percentOfCore }),
    ...(r.cpu.target?.allowedCpus === undefined ? {} : { targetAllowedCpus: r.cpu.target.allowedCpus }),
    ...(r.cpu.machine === undefined ? {} : { otherCpuPct: r.cpu.machine.otherPercentOfCore }),
    ...(r.gc === undefined ? {} : { gcMs: r.gc.totalMs, gcMaxMs: r.gc.maxMs }),
  };
}

/** Above this share of one CPU an end counts as CPU-bound (issue: "initiator-bound" / "target-bound"). */
export const BOUND_PCT = 90;

/**
 * Which end capped an arm, from its metrics: an end is bound when its busiest thread used more than BOUND_PCT % of a
 * CPU (one event loop or one io worker saturated), or when the whole process used more than BOUND_PCT % of every CPU
 * it was allowed on (io workers sharing one pinned CPU: no single thread is busy, yet the CPU is full). Without
 * thread figures the process total stands in for the busiest thread. An in-process target shares the initiator's
 * figures, so that end is named "initiator+target".
 */
export function boundSides(a: Arm): ArmBound[] {
  const m = a.metrics;
  const out: ArmBound[] = [];
  const side = (name: ArmBound['side'], busiest: number | undefined, total: number | undefined, cpus: number | undefined): void => {
    if (busiest !== undefined && busiest > BOUND_PCT) out.push({ side: name, reason: `busiest thread at ${Math.round(busiest)} % of a CPU` });
    else if (total !== undefined && cpus !== undefined && total > BOUND_PCT * cpus) out.push({ side: name, reason: `${Math.round(total)} % over its ${cpus} allowed CPU${cpus === 1 ? '' : 's'}` });
    else if (busiest === undefined && total !== undefined && total > BOUND_PCT) out.push({ side: name, reason: `process at ${Math.round(total)} % of a CPU` });
  };
  const sameProcess = a.run?.cpu.label.includes('same process') === true;
  side(sameProcess ? 'initiator+target' : 'initiator', m['busiestThreadPct'], m['cpuPct'], m['allowedCpus']);
  side('target', m['targetBusiestThreadPct'], m['targetCpuPct'], m['targetAllowedCpus']);
  return out;
}

const boundText = (name: string, b: readonly ArmBound[]): string => `${name} ${b.map((x) => `${x.side}-bound (${x.reason})`).join(' and ')}`;

export function armFromRun(name: string, params: Arm['params'], run: RunResult, extra: Record<string, number> = {}): Arm {
  return { name, params, metrics: { ...runMetrics(run), ...extra }, run };
}

/** Thrown when a comparison names an arm or metric that did not produce a value. */
export class ReportError extends Error {
  readonly code = 'HARNESS_ERR_REPORT';
  constructor(message: string) {
    super(message);
    this.name = 'ReportError';
  }
}

/**
 * Ratio of one arm's metric to another's, read from the arms themselves (never passed in), so a report cannot state
 * a ratio its arms do not support. Returns undefined when either arm was skipped or failed.
 */
export function compare(arms: readonly Arm[], label: string, metric: string, numerator: string, denominator: string, better: 'higher' | 'lower'): Comparison | undefined {
  const a = arms.find((x) => x.name === numerator);
  const b = arms.find((x) => x.name === denominator);
  if (a === undefined || b === undefined) throw new ReportError(`comparison "${label}": no arm named ${a === undefined ? numerator : denominator}`);
  if (a.skipped !== undefined || b.skipped !== undefined || a.error !== undefined || b.error !== undefined) return undefined;
  const nv = a.metrics[metric];
  const dv = b.metrics[metric];
  if (nv === undefined || dv === undefined) throw new ReportError(`comparison "${label}": metric ${metric} missing`);
  const ratio = dv === 0 ? (nv === 0 ? 1 : Infinity) : nv / dv;
  return { label, metric, numerator, denominator, numeratorValue: nv, denominatorValue: dv, ratio: Math.round(ratio * 1000) / 1000, better };
}

export interface ReportInit {
  kind: Report['kind'];
  name: string;
  title: string;
  hypothesis: string;
  quick: boolean;
  createdAt: Date;
  arms: Arm[];
  comparisons: (Comparison | undefined)[];
  verdict: string;
  notes?: string[];
  skipped?: string;
  setup?: string;
  initiator?: InitiatorInfo;
}

export function makeReport(init: ReportInit): Report {
  const arms = init.arms.map((a) => {
    if (a.skipped !== undefined || a.error !== undefined) return a;
    const bound = boundSides(a);
    return bound.length === 0 ? a : { ...a, bound };
  });
  const comparisons = init.comparisons
    .filter((c): c is Comparison => c !== undefined)
    .map((c) => {
      const bound = [c.numerator, c.denominator]
        .map((n) => arms.find((a) => a.name === n))
        .filter((a): a is Arm & { bound: ArmBound[] } => a?.bound !== undefined)
        .map((a) => boundText(a.name, a.bound));
      return bound.length === 0 ? c : { ...c, caveat: bound.join('; ') };
    });
  // No verdict rests on a bound arm silently: the ratios it enters measure that end's CPU ceiling.
  const boundArms = arms.filter((a) => a.bound !== undefined && comparisons.some((c) => c.numerator === a.name || c.denominator === a.name));
  const verdict =
    boundArms.length === 0 || init.verdict === ''
      ? init.verdict
      : `${init.verdict} Caveat: ${boundArms.map((a) => boundText(a.name, a.bound as ArmBound[])).join('; ')}; a ratio involving ${boundArms.length === 1 ? 'that arm' : 'those arms'} measures that end's CPU ceiling, not the hypothesis alone.`;
  const ok =
    init.skipped === undefined &&
    arms.every((a) => a.error === undefined && (a.run === undefined || (a.run.verify.mismatchCount === 0 && a.run.totals.errors === 0)));
  return {
    schemaVersion: REPORT_SCHEMA_VERSION,
    kind: init.kind,
    name: init.name,
    title: init.title,
    hypothesis: init.hypothesis,
    createdAt: init.createdAt.toISOString(),
    quick: init.quick,
    machine: machineInfo(init.setup),
    arms,
    comparisons,
    verdict,
    notes: init.notes ?? [],
    ...(init.skipped === undefined ? {} : { skipped: init.skipped }),
    ...(init.initiator === undefined ? {} : { initiator: init.initiator }),
    ok,
  };
}

/** "1.38×" with the direction spelled out for readers. */
export function describeRatio(c: Comparison): string {
  const r = Number.isFinite(c.ratio) ? `${c.ratio.toFixed(2)}×` : '∞';
  return `${c.label}: ${r} (${c.numerator} ${fmtNum(c.numeratorValue)} vs ${c.denominator} ${fmtNum(c.denominatorValue)} ${c.metric}; ${c.better} is better)${c.caveat === undefined ? '' : ` [${c.caveat}]`}`;
}

export function fmtNum(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  if (Math.abs(n) >= 100_000) return `${Math.round(n / 1000)}k`;
  if (Math.abs(n) >= 1000) return `${(n / 1000).toFixed(1)}k`;
  if (Number.isInteger(n)) return String(n);
  return n.toFixed(Math.abs(n) >= 10 ? 1 : 2);
}

/** One line naming the initiator, for the Markdown and HTML pages (empty for ours). */
export function initiatorText(i: InitiatorInfo | undefined): string {
  if (i === undefined || i.kind === 'ours') return '';
  return `Initiator: the Linux host (nvme-cli + fio), kernel ${i.kernel ?? '?'}, ${i.where === 'lab' ? `in the qemu lab, ${i.emulated ?? 'emulated'}` : 'on this machine'}.`;
}

/**
 * One line on what the kernel offered (empty without a probe): the nvme-fabrics options, multipath and the iopolicy
 * values, the per-queue io_cpu attribute and queue info; the facts the skipped arms' reasons rest on.
 */
export function offersText(o: KernelOffersInfo | undefined): string {
  if (o === undefined) return '';
  const fab = o.fabricsOptions === undefined ? 'nvme-fabrics lists no options (kernel before 5.19)' : `nvme-fabrics options: ${o.fabricsOptions.join(', ')}`;
  const pol = o.iopolicies === undefined ? '' : `; iopolicy accepted: ${o.iopolicies.accepted.join(', ') || 'none'}, refused: ${o.iopolicies.refused.join(', ') || 'none'}`;
  const mp = `native multipath ${o.multipath ? 'on' : 'off'}, default iopolicy ${o.iopolicy ?? '?'}${pol}`;
  const pq = o.perQueue === undefined ? 'per-queue attributes not looked at (no controller connected)' : `per-queue io_cpu attribute: ${o.perQueue.ioCpu ?? 'none'}; per-queue info: ${o.perQueue.queueInfo ?? 'none'}`;
  return `Kernel offers: ${fab}; ${mp}; ${pq}.`;
}
