// Markdown summary of a report: hypothesis, arms table, ratios, verdict; what goes into a README or a PR comment.
import { describeRatio, fmtNum, initiatorText, jobRows, metricColumns, offersText, verifyText, type JobRow } from './build.js';
import type { Arm, Report } from './types.js';

/** Metrics the arm table leaves out (the status line and the verify line say them; allowed CPUs explain boundness). */
const HIDDEN: readonly string[] = ['maxUs', 'errors', 'verifyMismatches', 'gcMaxMs', 'allowedCpus', 'targetAllowedCpus'];

export const escMd = (s: string): string => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
const esc = escMd;

function paramText(a: Arm): string {
  const p = Object.entries(a.params).map(([k, v]) => `${k}=${String(v)}`);
  return p.length === 0 ? '' : p.join(', ');
}

const lat = (l: JobRow['latencyUs']): string => (l === undefined ? ' |  | ' : `${fmtNum(l.p50)} | ${fmtNum(l.p99)} | ${fmtNum(l.p99_9)}`);

/** Each workload arm's jobs, one row each (mixed jobs with their reads and writes apart): what the arm row blends. */
function jobTables(arms: readonly Arm[]): string[] {
  const out: string[] = [];
  for (const a of arms) {
    if (a.run === undefined) continue;
    out.push(`**Jobs${arms.length > 1 ? ` (${esc(a.name)})` : ''}:**`, '', '| job | workload | dir | IOPS | MB/s | p50 µs | p99 µs | p99.9 µs | I/Os | errors |', '|---|---|---|---:|---:|---:|---:|---:|---:|---:|');
    for (const r of jobRows(a.run)) out.push(`| ${esc(r.job)} | ${esc(r.workload)} | ${r.dir} | ${fmtNum(r.iops)} | ${fmtNum(r.mbps)} | ${lat(r.latencyUs)} | ${r.ios} | ${r.errors ?? ''} |`);
    out.push('');
  }
  return out;
}

/**
 * Reads and writes apart for every job that did both (randrw, readwrite), as fio prints a mixed job's read and write
 * sections: the combined row above would hide a slow direction behind a fast one.
 */
function directionTables(arms: readonly Arm[]): string[] {
  const rows: string[] = [];
  for (const a of arms) {
    for (const r of a.run === undefined ? [] : jobRows(a.run)) {
      if (r.dir !== 'all') rows.push(`| ${esc(a.name)} | ${esc(r.job)} | ${esc(r.workload)} | ${r.dir} | ${fmtNum(r.iops)} | ${fmtNum(r.mbps)} | ${lat(r.latencyUs)} | ${r.ios} |`);
    }
  }
  if (rows.length === 0) return [];
  return ['**Reads and writes apart** (mixed jobs):', '', '| arm | job | workload | dir | IOPS | MB/s | p50 µs | p99 µs | p99.9 µs | I/Os |', '|---|---|---|---|---:|---:|---:|---:|---:|---:|', ...rows, ''];
}

export function renderMarkdown(r: Report): string {
  const out: string[] = [];
  out.push(`## ${esc(r.title)}${r.quick ? ' (quick)' : ''}`, '');
  if (r.hypothesis !== '') out.push(`**Hypothesis.** ${r.hypothesis}`, '');
  out.push(`Machine: ${r.machine.setup}; ${r.machine.cpuModel}; ${r.machine.platform}, kernel ${r.machine.kernel}; Node ${r.machine.node}. Run ${r.createdAt}.`, '');
  if (r.initiator !== undefined && r.initiator.kind === 'kernel') {
    out.push(initiatorText(r.initiator), '');
    if (r.initiator.offers !== undefined) out.push(offersText(r.initiator.offers), '');
  }
  if (r.skipped !== undefined) {
    out.push(`**Skipped:** ${r.skipped}`, '');
  }
  const armRows = r.arms;
  if (armRows.length > 0) {
    // A job file's rates and latencies go in the job table below, not in one row blending its jobs.
    const cols = metricColumns(r, HIDDEN);
    out.push(`| arm | params | ${cols.map((c) => c.head).join(' | ')} |`);
    out.push(`|---|---|${cols.map(() => '---:').join('|')}|`);
    for (const a of armRows) {
      const cells = cols.map((c) => {
        const v = a.metrics[c.key];
        return v === undefined ? '' : fmtNum(v);
      });
      const bound = a.bound === undefined ? '' : ` (${a.bound.map((b) => `${b.side}-bound`).join(', ')})`;
      const name = a.skipped !== undefined ? `${a.name} (skipped: ${a.skipped})` : a.error !== undefined ? `${a.name} (error: ${a.error})` : `${a.name}${bound}`;
      out.push(`| ${esc(name)} | ${esc(paramText(a))} | ${cells.join(' | ')} |`);
    }
    out.push('');
  }
  if (r.comparisons.length > 0) {
    out.push('**Ratios** (from the arms above, same run):', '');
    for (const c of r.comparisons) out.push(`- ${describeRatio(c)}`);
    out.push('');
  }
  if (r.verdict !== '') out.push(`**Verdict.** ${r.verdict}`, '');
  out.push(...(r.kind === 'workload' ? jobTables(armRows) : directionTables(armRows)));
  const verify = armRows.filter((a) => a.run?.verify.enabled === true);
  for (const a of verify) if (a.run !== undefined) out.push(`Verify (${a.name}): ${verifyText(a.run.verify)}.`);
  if (verify.length > 0) out.push('');
  for (const n of r.notes) out.push(`- ${n}`);
  if (r.notes.length > 0) out.push('');
  out.push(r.ok ? 'Status: ok.' : 'Status: FAILED (an arm errored, or verification found mismatches).', '');
  return out.join('\n');
}
