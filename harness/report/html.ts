// Self-contained HTML report: inline CSS, inline SVG charts (IOPS over time, latency CDF, per-queue bars), the report
// JSON embedded for machines, and a few lines of script that only mark the page ready (used by the headless check).
import { describeRatio, fmtNum, initiatorText, jobRows, metricColumns, metricHead, offersText, verifyText, type JobRow } from './build.js';
import { barChart, lineChart, type Bar, type Series } from './svg.js';
import type { Arm, Report } from './types.js';

export const escHtml = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const esc = escHtml;

const CSS = `
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:1340px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:24px 0 8px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f4f4f4}
td:first-child,th:first-child,td.l{text-align:left}tr.dir td{color:#555}.meta{color:#555}.bad{color:#b00;font-weight:600}.ok{color:#070;font-weight:600}
.charts{display:flex;flex-wrap:wrap;gap:12px}.chart{background:#fff;border:1px solid #e4e4e4}
.chart .ct{font-size:13px;font-weight:600;fill:#222}.chart .tick{font-size:10px;fill:#555}.chart .axis{font-size:11px;fill:#333}
.chart .legend{font-size:11px;fill:#222}.chart .grid{stroke:#eee;stroke-width:1}.chart .plot{fill:none;stroke:#ccc}.chart .empty{fill:#999}
#report-ready{display:none}`;

/** The SVG charts: IOPS over time, latency CDF and commands per queue of the arms that ran, and the first ratio's metric per arm. */
function renderCharts(r: Report, runArms: readonly Arm[]): string[] {
  const charts: string[] = [];
  if (runArms.length > 0) {
    const iops: Series[] = runArms.map((a) => ({ name: a.name, points: (a.run?.timeSeries.points ?? []).map((p) => [p.tMs / 1000, p.iops] as [number, number]) }));
    charts.push(lineChart({ id: 'iops', title: 'IOPS over time', xLabel: 'seconds since start (ramp included)', yLabel: 'IOPS', series: iops }));
    const cdf: Series[] = runArms.map((a) => ({ name: a.name, points: (a.run?.latencyCdf ?? []).map(([us, f]) => [us, f * 100] as [number, number]) }));
    charts.push(lineChart({ id: 'cdf', title: 'Latency CDF', xLabel: 'latency µs (log)', yLabel: '% of I/Os ≤ latency', series: cdf, logX: true }));
    const bars: Bar[] = [];
    runArms.forEach((a, i) => {
      for (const q of a.run?.queues ?? []) bars.push({ label: runArms.length > 1 ? `${a.name}:${q.queue}` : q.queue, value: q.commands, group: i });
    });
    charts.push(barChart({ id: 'queues', title: 'Commands per queue', yLabel: 'commands', bars, width: Math.min(1300, Math.max(640, bars.length * 22 + 100)) }));
  }
  const first = r.comparisons[0];
  if (first !== undefined) {
    const metric = first.metric;
    const bars: Bar[] = r.arms.filter((a) => a.metrics[metric] !== undefined).map((a, i) => ({ label: a.name, value: a.metrics[metric] as number, group: i }));
    charts.push(barChart({ id: 'arms', title: `${metricHead(metric)} per arm`, yLabel: metricHead(metric), bars }));
  }
  return charts;
}

/** One row per arm: its name (and why it is bound, skipped or failed), params and every metric any arm has. */
function renderArmTable(r: Report): string {
  const cols = metricColumns(r);
  return `<table><tr><th>arm</th><th>params</th>${cols.map((c) => `<th>${esc(c.head)}</th>`).join('')}</tr>${r.arms
      .map(
        (a) =>
          `<tr><td>${esc(a.name)}${a.bound === undefined ? '' : ` <span class="bad">${esc(a.bound.map((b) => `${b.side}-bound (${b.reason})`).join(', '))}</span>`}${a.skipped !== undefined ? ` <span class="bad">skipped: ${esc(a.skipped)}</span>` : ''}${a.error !== undefined ? ` <span class="bad">error: ${esc(a.error)}</span>` : ''}</td><td class="l">${esc(
            Object.entries(a.params)
              .map(([k, v]) => `${k}=${String(v)}`)
              .join(', '),
          )}</td>${cols.map((c) => `<td>${a.metrics[c.key] === undefined ? '' : esc(fmtNum(a.metrics[c.key] as number))}</td>`).join('')}</tr>`,
      )
      .join('')}</table>`;
}

/** An arm's job table (mixed jobs with their reads and writes apart), CPU and event-loop line, verify result and errors. */
function renderJobs(a: Arm): string {
  const run = a.run;
  if (run === undefined) return '';
  const lat = (l: JobRow['latencyUs'], k: 'p50' | 'p90' | 'p99' | 'p99_9' | 'max'): string => (l === undefined ? '' : fmtNum(l[k]));
  const rows = jobRows(run)
    .map(
      (j) =>
        `<tr${j.dir === 'all' ? '' : ' class="dir"'}><td>${esc(j.job)}</td><td class="l">${esc(j.workload)}</td><td class="l">${j.dir}</td><td>${fmtNum(j.iops)}</td><td>${fmtNum(j.mbps)}</td>${(['p50', 'p90', 'p99', 'p99_9', 'max'] as const).map((k) => `<td>${lat(j.latencyUs, k)}</td>`).join('')}<td>${j.ios}</td><td>${j.errors ?? ''}</td></tr>`,
    )
    .join('');
  const cpu = run.cpu;
  const tcpu = cpu.target === undefined ? '' : `; target ${cpu.target.percentOfCore}% of a core (${esc(cpu.target.source)})`;
  const v = run.verify.enabled ? `<p>Verify: <span class="${run.verify.mismatchCount === 0 ? 'ok' : 'bad'}">${esc(verifyText(run.verify, 8))}</span></p>` : '';
  const errs = run.errorMessages.length === 0 ? '' : `<p class="bad">${run.errorMessages.map(esc).join('<br>')}</p>`;
  return `<h3>${esc(a.name)}</h3><table><tr><th>job</th><th>workload</th><th>dir</th><th>IOPS</th><th>MB/s</th><th>p50 µs</th><th>p90 µs</th><th>p99 µs</th><th>p99.9 µs</th><th>max µs</th><th>I/Os</th><th>errors</th></tr>${rows}</table><p class="meta">Measured ${fmtNum(run.durationMs)} ms; CPU ${cpu.percentOfCore}% of a core (${esc(cpu.label)})${tcpu}; event-loop delay p99 ${run.eventLoop.p99Ms} ms, max ${run.eventLoop.maxMs} ms.</p>${v}${errs}`;
}

/** Marks the page ready for the headless check: each chart's box and mark count, and the arm count. */
const READY_SCRIPT = `<script>
window.onerror = function (msg) {
  var d = document.createElement('div');
  d.id = 'report-error';
  d.textContent = 'script error: ' + msg;
  document.body.appendChild(d);
};
(function () {
  var out = [];
  var charts = document.querySelectorAll('svg.chart');
  for (var i = 0; i < charts.length; i++) {
    var c = charts[i];
    var b = c.getBoundingClientRect();
    var marks = c.querySelectorAll('path.series, rect.bar').length;
    out.push([c.getAttribute('data-chart'), Math.round(b.left + window.scrollX), Math.round(b.top + window.scrollY), Math.round(b.width), Math.round(b.height), marks].join(','));
  }
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var ready = document.getElementById('report-ready');
  ready.setAttribute('data-charts', out.join(';'));
  ready.setAttribute('data-arms', String(data.arms.length));
  ready.textContent = 'ready';
})();
</script>
`;

/** The page; `renderHtml(report)` is deterministic for a given report. */
export function renderHtml(r: Report): string {
  const runArms = r.arms.filter((a) => a.run !== undefined);
  const charts = renderCharts(r, runArms);
  const armTable = r.arms.length === 0 ? '' : renderArmTable(r);
  const jobTables = runArms.map(renderJobs).join('');
  const m = r.machine;
  const json = JSON.stringify(r).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${esc(r.title)}</title><style>${CSS}</style></head>
<body>
<h1>${esc(r.title)}${r.quick ? ' <small>(quick)</small>' : ''}</h1>
<p class="meta">${esc(m.setup)} · ${esc(m.cpuModel)} · ${esc(m.platform)} ${esc(m.kernel)} · Node ${esc(m.node)} · ${esc(r.createdAt)} · schema v${r.schemaVersion}</p>
${r.initiator?.kind === 'kernel' ? `<p class="meta">${esc(initiatorText(r.initiator))}</p>${r.initiator.offers === undefined ? '' : `<p class="meta">${esc(offersText(r.initiator.offers))}</p>`}` : ''}
${r.hypothesis === '' ? '' : `<p><b>Hypothesis.</b> ${esc(r.hypothesis)}</p>`}
${r.skipped === undefined ? '' : `<p class="bad">Skipped: ${esc(r.skipped)}</p>`}
${r.comparisons.length === 0 ? '' : `<h2>Ratios</h2><ul>${r.comparisons.map((c) => `<li>${esc(describeRatio(c))}</li>`).join('')}</ul>`}
${r.verdict === '' ? '' : `<p><b>Verdict.</b> ${esc(r.verdict)}</p>`}
<p>Status: ${r.ok ? '<span class="ok">ok</span>' : '<span class="bad">FAILED</span>'}</p>
${charts.length === 0 ? '' : `<h2>Charts</h2><div class="charts">${charts.join('\n')}</div>`}
<h2>Arms</h2>${armTable}
${jobTables === '' ? '' : `<h2>Jobs</h2>${jobTables}`}
${r.notes.length === 0 ? '' : `<h2>Notes</h2><ul>${r.notes.map((n) => `<li>${esc(n)}</li>`).join('')}</ul>`}
<div id="report-ready"></div>
<script type="application/json" id="report-data">${json}</script>
${READY_SCRIPT}</body></html>
`;
}
