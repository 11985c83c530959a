// Markdown summary of a report: hypothesis, arms table, ratios, verdict; what goes into a README or a PR comment.
import { describeRatio, fmtNum, initiatorText, offersText } from './build.js';
import type { Arm, Report } from './types.js';

const COLUMNS: { key: string; head: string }[] = [
  { key: 'iops', head: 'IOPS' },
  { key: 'mbps', head: 'MB/s' },
  { key: 'p50Us', head: 'p50 µs' },
  { key: 'p99Us', head: 'p99 µs' },
  { key: 'p99_9Us', head: 'p99.9 µs' },
  { key: 'cpuPct', head: 'CPU %' },
  { key: 'busiestThreadPct', head: 'busiest thread %' },
  { key: 'targetCpuPct', head: 'target CPU %' },
  { key: 'targetBusiestThreadPct', head: 'target busiest thread %' },
  { key: 'otherCpuPct', head: 'other CPU %' },
  { key: 'loopLagP99Ms', head: 'loop lag p99 ms' },
  { key: 'gcMs', head: 'GC ms' },
];

const esc = (s: string): string => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

function paramText(a: Arm): string {
  const p = Object.entries(a.params).map(([k, v]) => `${k}=${String(v)}`);
  return p.length === 0 ? '' : p.join(', ');
}

/**
 * Reads and writes apart for every job that did both (randrw, readwrite), as fio prints a mixed job's read and write
 * sections: the combined row above would hide a slow direction behind a fast one.
 */
function directionTables(arms: readonly Arm[]): string[] {
  const rows: string[] = [];
  for (const a of arms) {
    for (const j of a.run?.jobs ?? []) {
      if (j.readIos === 0 || j.writeIos === 0) continue;
      const lat = (l: { p50: number; p99: number; p99_9: number }): string => `${fmtNum(l.p50)} | ${fmtNum(l.p99)} | ${fmtNum(l.p99_9)}`;
      rows.push(`| ${esc(a.name)} | ${esc(j.name)} | ${j.rw} | read | ${fmtNum(j.readIops)} | ${fmtNum(j.readMbps)} | ${lat(j.readLatencyUs)} | ${j.readIos} |`);
      rows.push(`| ${esc(a.name)} | ${esc(j.name)} | ${j.rw} | write | ${fmtNum(j.writeIops)} | ${fmtNum(j.writeMbps)} | ${lat(j.writeLatencyUs)} | ${j.writeIos} |`);
    }
  }
  if (rows.length === 0) return [];
  return ['**Reads and writes apart** (mixed jobs):', '', '| arm | job | rw | dir | IOPS | MB/s | p50 µs | p99 µs | p99.9 µs | I/Os |', '|---|---|---|---|---:|---:|---:|---:|---:|---:|', ...rows, ''];
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
    const extraKeys = [...new Set(armRows.flatMap((a) => Object.keys(a.metrics)))].filter(
      (k) => !COLUMNS.some((c) => c.key === k) && !['maxUs', 'errors', 'verifyMismatches', 'gcMaxMs', 'allowedCpus', 'targetAllowedCpus'].includes(k),
    );
    const cols = [...COLUMNS.filter((c) => armRows.some((a) => a.metrics[c.key] !== undefined)), ...extraKeys.map((k) => ({ key: k, head: k }))];
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
  out.push(...directionTables(armRows));
  const verify = armRows.filter((a) => a.run?.verify.enabled === true);
  for (const a of verify) {
    const v = a.run?.verify;
    if (v === undefined) continue;
    out.push(`Verify (${a.name}): ${v.checkedBlocks} blocks checked, ${v.mismatchCount} mismatches${v.mismatches.length > 0 ? `; first at LBA ${v.mismatches[0]?.lba} (${v.mismatches[0]?.reason})` : ''}.`);
  }
  if (verify.length > 0) out.push('');
  for (const n of r.notes) out.push(`- ${n}`);
  if (r.notes.length > 0) out.push('');
  out.push(r.ok ? 'Status: ok.' : 'Status: FAILED (an arm errored, or verification found mismatches).', '');
  return out.join('\n');
}
