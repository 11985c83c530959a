import { describe, expect, it } from 'vitest';
import { runJobs } from '../load/engine.js';
import { parseFioJobFile, resolveJobs } from '../load/job-file.js';
import { MemoryBlockTarget } from '../load/memory-target.js';
import { armFromRun, boundSides, compare, makeReport, ReportError } from './build.js';
import { renderHtml } from './html.js';
import { renderMarkdown } from './markdown.js';
import { formatProgress, progressEnabled, progressLine } from './progress.js';
import { renderJson } from './write.js';
import type { Arm } from './types.js';

async function sampleArm(name: string, latencyUs: number): Promise<Arm> {
  const t = new MemoryBlockTarget({ capacityBlocks: 16384, queues: 2, latencyUs });
  const jobs = resolveJobs(parseFioJobFile('[r]\nrw=randread\nbs=4k\niodepth=4\nnumjobs=2\nruntime=150ms\n'), t);
  return armFromRun(name, { latencyUs }, await runJobs(t, jobs, { intervalMs: 30 }));
}

describe('reports', () => {
  it('ratios are computed from the arms metrics; JSON carries schemaVersion and round-trips', async () => {
    const fast = await sampleArm('fast', 0);
    const slow = await sampleArm('slow', 2000);
    const c = compare([fast, slow], 'fast vs slow IOPS', 'iops', 'fast', 'slow', 'higher');
    expect(c?.ratio).toBeCloseTo((fast.metrics['iops'] as number) / (slow.metrics['iops'] as number), 2);
    expect(c?.ratio).toBeGreaterThan(1);
    const r = makeReport({ kind: 'scenario', name: 'demo', title: 'Demo', hypothesis: 'latency lowers IOPS', quick: true, createdAt: new Date(0), arms: [fast, slow], comparisons: [c], verdict: 'as expected' });
    const j = JSON.parse(renderJson(r)) as typeof r;
    expect(j.schemaVersion).toBe(1);
    expect(j.ok).toBe(true);
    expect(Object.keys(j)).toEqual(['schemaVersion', 'kind', 'name', 'title', 'hypothesis', 'createdAt', 'quick', 'machine', 'arms', 'comparisons', 'verdict', 'notes', 'ok']);
    expect(j.arms[0]?.run?.timeSeries.points.length).toBeGreaterThan(0);
    expect(j.comparisons[0]?.numeratorValue).toBe(fast.metrics['iops']);
  });

  it('comparisons refuse unknown arms and skip skipped arms', () => {
    const a: Arm = { name: 'a', params: {}, metrics: { x: 2 } };
    const b: Arm = { name: 'b', params: {}, metrics: {}, skipped: 'no permission' };
    expect(() => compare([a], 'l', 'x', 'a', 'zzz', 'higher')).toThrow(ReportError);
    expect(compare([a, b], 'l', 'x', 'a', 'b', 'higher')).toBeUndefined();
    expect(() => compare([a, { ...a, name: 'c', metrics: {} }], 'l', 'x', 'a', 'c', 'higher')).toThrow(/metric x missing/);
  });

  it('markdown has the hypothesis, one row per arm, the ratios and the verdict', async () => {
    const fast = await sampleArm('fast', 0);
    const slow = await sampleArm('slow', 1000);
    const r = makeReport({ kind: 'scenario', name: 'demo', title: 'Demo', hypothesis: 'H.', quick: false, createdAt: new Date(), arms: [fast, slow], comparisons: [compare([fast, slow], 'speedup', 'iops', 'fast', 'slow', 'higher')], verdict: 'V.' });
    const md = renderMarkdown(r);
    expect(md).toContain('**Hypothesis.** H.');
    expect(md).toMatch(/\| fast( \([a-z+-]+\))? \| latencyUs=0 \| [\d.k]+ \|/);
    expect(md).toMatch(/\| slow \| latencyUs=1000 \|/);
    expect(md).toMatch(/- speedup: \d+\.\d\d× \(fast .* vs slow .* iops; higher is better\)/);
    expect(md).toContain('**Verdict.** V.');
  });

  it('HTML is self-contained: inline SVG with data-bearing paths, no external references', async () => {
    const a = await sampleArm('a', 0);
    const html = renderHtml(makeReport({ kind: 'workload', name: 'w', title: 'W', hypothesis: '', quick: true, createdAt: new Date(), arms: [a], comparisons: [], verdict: '' }));
    expect(html).not.toMatch(/<(link|img|iframe)\b|src="http|href="http|@import/);
    expect(html).toContain('data-chart="iops"');
    expect(html).toContain('data-chart="cdf"');
    expect(html).toContain('data-chart="queues"');
    const n = [...html.matchAll(/class="series" data-series="a" data-n="(\d+)"/g)].map((m) => Number(m[1]));
    expect(n.length).toBe(2);
    expect(n.every((x) => x >= 2)).toBe(true);
    expect((html.match(/class="bar"/g) ?? []).length).toBe(2);
  });

  it('progress shows only on a TTY outside CI', () => {
    expect(progressEnabled({ isTTY: true, write: () => true }, {})).toBe(true);
    expect(progressEnabled({ isTTY: true, write: () => true }, { CI: 'true' })).toBe(false);
    expect(progressEnabled({ isTTY: false, write: () => true }, {})).toBe(false);
    const lines: string[] = [];
    const p = progressLine('bench', { isTTY: true, write: (s) => lines.push(s) > 0 }, {});
    p.update({ elapsedMs: 1500, totalMs: 10_000, iops: 123456, mbps: 505.7 });
    p.done();
    expect(lines[0]).toContain('bench 1.5s 123,456 IOPS 505.7 MB/s eta 8.5s');
    const quiet: string[] = [];
    progressLine('x', { isTTY: true, write: (s) => quiet.push(s) > 0 }, { CI: 'true' }).update({ elapsedMs: 1, totalMs: undefined, iops: 1, mbps: 1 });
    expect(quiet).toEqual([]);
    expect(formatProgress('b', { elapsedMs: 0, totalMs: undefined, iops: 0, mbps: 0 })).not.toContain('eta');
  });
});

describe('bound arms', () => {
  const arm = (name: string, metrics: Record<string, number>): Arm => ({ name, params: {}, metrics: { iops: 1000, ...metrics } });

  it('an end is bound by its busiest thread, or by all its allowed CPUs being full', () => {
    expect(boundSides(arm('a', { cpuPct: 97, busiestThreadPct: 95, allowedCpus: 1 }))).toEqual([{ side: 'initiator', reason: 'busiest thread at 95 % of a CPU' }]);
    // io workers sharing one pinned CPU: no thread above 90 %, the CPU is.
    expect(boundSides(arm('b', { cpuPct: 97, busiestThreadPct: 40, allowedCpus: 1 }))).toEqual([{ side: 'initiator', reason: '97 % over its 1 allowed CPU' }]);
    expect(boundSides(arm('c', { cpuPct: 150, busiestThreadPct: 60, allowedCpus: 2 }))).toEqual([]);
    expect(boundSides(arm('d', { cpuPct: 30, targetCpuPct: 96 }))).toEqual([{ side: 'target', reason: 'process at 96 % of a CPU' }]);
    expect(boundSides(arm('e', { cpuPct: 30, targetCpuPct: 96, targetBusiestThreadPct: 80, targetAllowedCpus: 2 }))).toEqual([]);
    expect(boundSides(arm('f', { cpuPct: 50, targetCpuPct: 50 }))).toEqual([]);
  });

  it('a verdict that rests on a bound arm says so, and so does the ratio', () => {
    const a = arm('4-ctrl', { cpuPct: 98, busiestThreadPct: 98, allowedCpus: 1, targetCpuPct: 40 });
    const b = arm('1-ctrl', { cpuPct: 60, busiestThreadPct: 60, allowedCpus: 1, targetCpuPct: 35 });
    const c = compare([a, b], '4 vs 1', 'iops', '4-ctrl', '1-ctrl', 'higher');
    const r = makeReport({ kind: 'scenario', name: 'x', title: 'X', hypothesis: 'h', quick: true, createdAt: new Date(0), arms: [a, b], comparisons: [c], verdict: '4 controllers ran at 1×.' });
    expect(r.arms[0]?.bound?.[0]?.side).toBe('initiator');
    expect(r.arms[1]?.bound).toBeUndefined();
    expect(r.verdict).toMatch(/^4 controllers ran at 1×\. Caveat: 4-ctrl initiator-bound \(busiest thread at 98 % of a CPU\)/);
    expect(r.comparisons[0]?.caveat).toBe('4-ctrl initiator-bound (busiest thread at 98 % of a CPU)');
    const md = renderMarkdown(r);
    expect(md).toContain('| 4-ctrl (initiator-bound) |');
    expect(md).toContain('[4-ctrl initiator-bound (busiest thread at 98 % of a CPU)]');
    // Neither arm bound: the verdict is left as the scenario wrote it.
    const calm = makeReport({ kind: 'scenario', name: 'x', title: 'X', hypothesis: 'h', quick: true, createdAt: new Date(0), arms: [b, { ...b, name: 'b2' }], comparisons: [compare([b, { ...b, name: 'b2' }], 'l', 'iops', 'b2', '1-ctrl', 'higher')], verdict: 'v.' });
    expect(calm.verdict).toBe('v.');
  });

  it.runIf(process.platform === 'linux')('engine runs carry this process\'s busiest thread and allowed CPUs', async () => {
    const a = await sampleArm('x', 0);
    expect(a.run?.cpu.busiestThread?.tid).toBeGreaterThan(0);
    expect(a.metrics['busiestThreadPct']).toBeGreaterThanOrEqual(0);
    expect(a.metrics['allowedCpus']).toBeGreaterThanOrEqual(1);
  });
});
