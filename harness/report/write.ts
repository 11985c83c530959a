// Writes a report as report.json + report.md + report.html into a directory (created if missing).
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { renderHtml } from './html.js';
import { renderMarkdown } from './markdown.js';
import type { Report } from './types.js';

export interface WrittenReport {
  json: string;
  markdown: string;
  html: string;
}

/** Stable JSON: two-space indent, keys in the order the schema declares them (object construction order). */
export function renderJson(r: Report | object): string {
  return `${JSON.stringify(r, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 2)}\n`;
}

export async function writeReport(dir: string, r: Report, basename = r.name): Promise<WrittenReport> {
  await mkdir(dir, { recursive: true });
  const out: WrittenReport = {
    json: path.join(dir, `${basename}.json`),
    markdown: path.join(dir, `${basename}.md`),
    html: path.join(dir, `${basename}.html`),
  };
  await Promise.all([writeFile(out.json, renderJson(r)), writeFile(out.markdown, renderMarkdown(r)), writeFile(out.html, renderHtml(r))]);
  return out;
}
