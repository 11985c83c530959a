// Building reports: machine description, arm metrics from engine runs, and ratios computed from the arms.
import os from 'node:os';
import type { JobResult, LatencySummary, RunResult, VerifyResult } from '../load/types.js';
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
  const hp = i.hostPatches === undefined ? '' : `; the ${i.hostPatches.series}/ arms with nvme-core, nvme-fabrics and nvme-tcp built from ${i.hostPatches.base} + ${i.hostPatches.series} (${i.hostPatches.patches.length} patch(es)), the stock/ arms with the kernel's own`;
  return `Initiator: the Linux host (nvme-cli + fio), kernel ${i.kernel ?? '?'}, ${i.where === 'lab' ? `in the qemu lab, ${i.emulated ?? 'emulated'}` : 'on this machine'}${hp}.`;
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

/** Column heads of the arm metrics (runMetrics and the scenarios' extras), in table order; other keys show as named. */
export const METRIC_HEADS: readonly { key: string; head: string }[] = [
  { key: 'iops', head: 'IOPS' },
  { key: 'mbps', head: 'MB/s' },
  { key: 'p50Us', head: 'p50 µs' },
  { key: 'p99Us', head: 'p99 µs' },
  { key: 'p99_9Us', head: 'p99.9 µs' },
  { key: 'maxUs', head: 'max µs' },
  { key: 'cpuPct', head: 'CPU %' },
  { key: 'busiestThreadPct', head: 'busiest thread %' },
  { key: 'allowedCpus', head: 'allowed CPUs' },
  { key: 'targetCpuPct', head: 'target CPU %' },
  { key: 'targetBusiestThreadPct', head: 'target busiest thread %' },
  { key: 'targetAllowedCpus', head: 'target allowed CPUs' },
  { key: 'otherCpuPct', head: 'other CPU %' },
  { key: 'loopLagP99Ms', head: 'loop lag p99 ms' },
  { key: 'gcMs', head: 'GC ms' },
  { key: 'gcMaxMs', head: 'GC max ms' },
  { key: 'errors', head: 'errors' },
  { key: 'verifyMismatches', head: 'verify mismatches' },
  { key: 'ioQueues', head: 'I/O queues' },
  { key: 'checkedBlocks', head: 'blocks checked' },
];

/**
 * The metric columns of an arm table: every key some arm has, but `hidden`, with readable heads, in METRIC_HEADS order
 * (other keys after, as named). A job file's arm runs several jobs, so a workload report hides RATE_KEYS there.
 */
export function metricColumns(r: Report, hidden: readonly string[] = []): { key: string; head: string }[] {
  const skip = [...hidden, ...(r.kind === 'workload' ? RATE_KEYS : [])];
  const keys = [...new Set(r.arms.flatMap((a) => Object.keys(a.metrics)))].filter((k) => !skip.includes(k));
  const order = (k: string): number => {
    const i = METRIC_HEADS.findIndex((c) => c.key === k);
    return i < 0 ? METRIC_HEADS.length : i;
  };
  return keys.sort((x, y) => order(x) - order(y)).map((k) => ({ key: k, head: metricHead(k) }));
}

/** The readable head of a metric key ("p99.9 µs" for p99_9Us); a key without one as named. */
export function metricHead(key: string): string {
  return METRIC_HEADS.find((c) => c.key === key)?.head ?? key;
}

/** The throughput and latency columns: per job they are true, for an arm running several jobs they blend them. */
export const RATE_KEYS: readonly string[] = ['iops', 'mbps', 'p50Us', 'p99Us', 'p99_9Us', 'maxUs'];

/** One row of a job table: a whole job, or one direction of a mixed job (fio's read and write sections). */
export interface JobRow {
  job: string;
  /** "randrw bs=4k qd=16 ×2" */
  workload: string;
  dir: 'all' | 'read' | 'write';
  iops: number;
  mbps: number;
  latencyUs: LatencySummary | undefined;
  ios: number;
  errors: number | undefined;
}

const workloadText = (j: JobResult): string => `${j.rw} bs=${j.bs} qd=${j.iodepth}${j.numjobs > 1 ? ` ×${j.numjobs}` : ''}${j.stonewall ? ' (after the jobs before)' : ''}`;

/**
 * A run's job table: one row per job, and for a job that both read and wrote (randrw, readwrite) its reads and
 * writes apart under it, as fio prints a mixed job. With several jobs that ran at once (none waits on a stonewall),
 * a last row sums their IOPS and MB/s; latencies of different jobs are never combined into one figure.
 */
export function jobRows(run: RunResult): JobRow[] {
  const rows: JobRow[] = [];
  for (const j of run.jobs) {
    const w = workloadText(j);
    rows.push({ job: j.name, workload: w, dir: 'all', iops: j.iops, mbps: j.mbps, latencyUs: j.latencyUs, ios: j.ios, errors: j.errors });
    if (j.readIos === 0 || j.writeIos === 0) continue;
    rows.push({ job: j.name, workload: w, dir: 'read', iops: j.readIops, mbps: j.readMbps, latencyUs: j.readLatencyUs, ios: j.readIos, errors: undefined });
    rows.push({ job: j.name, workload: w, dir: 'write', iops: j.writeIops, mbps: j.writeMbps, latencyUs: j.writeLatencyUs, ios: j.writeIos, errors: undefined });
  }
  if (run.jobs.length > 1 && run.jobs.slice(1).every((j) => !j.stonewall)) {
    const sum = (f: (j: JobResult) => number): number => run.jobs.reduce((a, j) => a + f(j), 0);
    rows.push({ job: `all ${run.jobs.length} jobs, at once`, workload: "sum of the jobs' rates", dir: 'all', iops: sum((j) => j.iops), mbps: Math.round(sum((j) => j.mbps) * 10) / 10, latencyUs: undefined, ios: sum((j) => j.ios), errors: sum((j) => j.errors) });
  }
  return rows;
}

/** "1234 reads verified (4.8 MiB in 9872 blocks), 0 mismatches", then the first `shown` mismatches. */
export function verifyText(v: VerifyResult, shown = 1): string {
  const list = v.mismatches.slice(0, shown).map((m) => `LBA ${m.lba} (${m.reason})`);
  return `${v.checkedReads} reads verified (${fmtNum(v.checkedBytes / 2 ** 20)} MiB in ${v.checkedBlocks} blocks), ${v.mismatchCount} mismatches${list.length === 0 ? '' : `; first at ${list.join(', ')}`}`;
}
