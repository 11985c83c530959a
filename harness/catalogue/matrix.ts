// The host-behaviour matrix (issue 45 item 3): cases as rows, hosts as columns, each cell its verdict linking its
// evidence; written as host-behaviour.json, .md and .html next to the evidence/ folder the runner filled.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { escHtml, escMd, renderJson } from '../report/index.js';
import type { Cell, Matrix } from './types.js';

const MARK: Record<Cell['verdict'], string> = {
  recovered: 'recovered',
  'error-surfaced': 'error surfaced',
  hung: 'HUNG',
  'data-mismatch': 'DATA MISMATCH',
  'kernel-warning': 'KERNEL WARNING',
  'not-run': 'not run',
  pending: 'pending',
};

const cellOf = (m: Matrix, caseId: string, host: string): Cell | undefined => m.cells.find((c) => c.caseId === caseId && c.host === host);

/** A cell's short text: the verdict, and `(finding)` where a run cell differs from what a correct host does. */
function label(c: Cell): string {
  const ran = c.verdict !== 'not-run' && c.verdict !== 'pending';
  return `${MARK[c.verdict]}${ran && !c.asExpected ? ' (finding)' : ''}`;
}

const evidenceLink = (c: Cell): string | undefined => c.evidence.find((e) => e.endsWith('host.log')) ?? c.evidence[0];

export function renderMatrixMarkdown(m: Matrix): string {
  const hosts = m.hosts.map((h) => h.id);
  const out = [`# Host-behaviour matrix`, '', `Generated ${m.generatedAt} by \`nvme-tcp bench --catalogue\` (docs/faults.md, "The host-behaviour catalogue").`, ''];
  out.push('| case | expected | ' + hosts.join(' | ') + ' |', '|---|---|' + hosts.map(() => '---|').join(''));
  for (const k of m.cases) {
    const cells = hosts.map((h) => {
      const c = cellOf(m, k.id, h);
      if (c === undefined) return '';
      const l = evidenceLink(c);
      return l === undefined ? label(c) : `[${label(c)}](${l})`;
    });
    out.push(`| ${escMd(k.id)} | ${MARK[k.expect]} | ${cells.join(' | ')} |`);
  }
  out.push('', '## Hosts', '');
  for (const h of m.hosts) out.push(`- **${h.id}**: ${h.describe}${h.notes.length === 0 ? '' : ` (${h.notes.join('; ')})`}`);
  out.push('', '## Cells', '');
  for (const k of m.cases) {
    out.push(`### ${k.id}: ${k.title}`, '', `Spec: ${k.spec}. A correct host: ${k.correct} (**${MARK[k.expect]}**).`, '');
    for (const h of hosts) {
      const c = cellOf(m, k.id, h);
      if (c !== undefined) out.push(`- ${h}: **${label(c)}** — ${escMd(c.summary)}${c.wallMs > 0 ? ` (${(c.wallMs / 1000).toFixed(1)} s)` : ''}`);
    }
    out.push('');
  }
  if (m.notes.length > 0) out.push('## Notes', '', ...m.notes.map((n) => `- ${n}`), '');
  return out.join('\n');
}

const CSS = `body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1340px;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f4f4f4}
.recovered,.error-surfaced{background:#e9f7e9}.finding{background:#fde2e2;font-weight:600}.not-run,.pending{color:#777}`;

export function renderMatrixHtml(m: Matrix): string {
  const hosts = m.hosts.map((h) => h.id);
  const rows = m.cases.map((k) => {
    const tds = hosts.map((h) => {
      const c = cellOf(m, k.id, h);
      if (c === undefined) return '<td></td>';
      const l = evidenceLink(c);
      const cls = c.verdict === 'not-run' || c.verdict === 'pending' ? c.verdict : c.asExpected ? c.verdict : 'finding';
      const text = escHtml(label(c));
      return `<td class="${cls}" title="${escHtml(c.summary)}">${l === undefined ? text : `<a href="${escHtml(l)}">${text}</a>`}<br><small>${escHtml(c.summary)}</small></td>`;
    });
    return `<tr><td><b>${escHtml(k.id)}</b><br>${escHtml(k.title)}<br><small>${escHtml(k.spec)}</small></td><td>${escHtml(MARK[k.expect])}</td>${tds.join('')}</tr>`;
  });
  const hostList = m.hosts.map((h) => `<li><b>${escHtml(h.id)}</b>: ${escHtml(h.describe)}${h.notes.length === 0 ? '' : ` <small>(${escHtml(h.notes.join('; '))})</small>`}</li>`).join('');
  return `<!doctype html><html><head><meta charset="utf-8"><title>Host-behaviour matrix</title><style>${CSS}</style></head><body>
<h1>Host-behaviour matrix</h1><p>Generated ${escHtml(m.generatedAt)}. Each cell links its evidence (host log, rule firings, target log).</p>
<table><tr><th>case</th><th>expected</th>${hosts.map((h) => `<th>${escHtml(h)}</th>`).join('')}</tr>${rows.join('\n')}</table>
<h2>Hosts</h2><ul>${hostList}</ul>${m.notes.length === 0 ? '' : `<h2>Notes</h2><ul>${m.notes.map((n) => `<li>${escHtml(n)}</li>`).join('')}</ul>`}
<script type="application/json" id="matrix">${renderJson(m).replace(/</g, '\\u003c')}</script></body></html>
`;
}

export async function writeMatrix(dir: string, m: Matrix): Promise<{ json: string; markdown: string; html: string }> {
  await mkdir(dir, { recursive: true });
  const out = { json: path.join(dir, 'host-behaviour.json'), markdown: path.join(dir, 'host-behaviour.md'), html: path.join(dir, 'host-behaviour.html') };
  await Promise.all([writeFile(out.json, renderJson(m)), writeFile(out.markdown, renderMatrixMarkdown(m)), writeFile(out.html, renderMatrixHtml(m))]);
  return out;
}
