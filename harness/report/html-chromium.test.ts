// Opens a real HTML report in headless Chromium (the one test/fixtures/tools.ts provides): the page script must run
// without errors and the screenshot must show the charts drawn with data (coloured pixels inside each chart's box, as
// the page itself reports the boxes).
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { renderPage } from '../../test/fixtures/chromium.js';
import { countColoredPixels, decodePng } from '../../test/fixtures/png.js';
import { canProvide, provideChromium } from '../../test/fixtures/tools.js';
import { runJobs } from '../load/engine.js';
import { parseFioJobFile, resolveJobs } from '../load/job-file.js';
import { MemoryBlockTarget } from '../load/memory-target.js';
import { armFromRun, compare, makeReport } from './build.js';
import { writeReport } from './write.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

describe('HTML report in headless Chromium', () => {
  it('renders without console errors and with charts drawn from data', async (ctx) => {
    const bin = await provideChromium().catch((e: unknown) => {
      // Off Linux x64 nothing is provided: skipped with the line saying what to install. On Linux x64 it fails.
      ctx.skip(!canProvide(), (e as Error).message);
      throw e;
    });
    const arms = [];
    for (const [name, lat] of [['no-delay', 0], ['1ms', 1000]] as const) {
      const t = new MemoryBlockTarget({ capacityBlocks: 16384, queues: 3, latencyUs: lat });
      const jobs = resolveJobs(parseFioJobFile('[r]\nrw=randread\nbs=4k\niodepth=8\nnumjobs=3\nruntime=300ms\n'), t);
      arms.push(armFromRun(name, { latencyUs: lat }, await runJobs(t, jobs, { intervalMs: 30 })));
    }
    const report = makeReport({
      kind: 'scenario',
      name: 'chromium-check',
      title: 'Chromium check',
      hypothesis: 'added latency lowers IOPS',
      quick: true,
      createdAt: new Date(),
      arms,
      comparisons: [compare(arms, 'IOPS', 'iops', 'no-delay', '1ms', 'higher')],
      verdict: 'n/a',
    });
    const dir = await mkdtemp(path.join(os.tmpdir(), 'nvme-tcp-report-'));
    dirs.push(dir);
    const files = await writeReport(dir, report);

    const page = await renderPage(bin, files.html);
    expect(page.console).toEqual([]);
    expect(page.html).not.toContain('id="report-error"');
    const ready = /<div id="report-ready" data-charts="([^"]*)" data-arms="(\d+)">ready<\/div>/.exec(page.html);
    expect(ready, 'page script did not mark the report ready').not.toBeNull();
    expect(ready?.[2]).toBe('2');
    const boxes = (ready?.[1] ?? '').split(';').map((s) => {
      const [id, x, y, w, h, marks] = s.split(',');
      return { id: id ?? '', x: Number(x), y: Number(y), w: Number(w), h: Number(h), marks: Number(marks) };
    });
    expect(boxes.map((b) => b.id).sort()).toEqual(['arms', 'cdf', 'iops', 'queues']);
    expect(boxes.find((b) => b.id === 'iops')?.marks).toBe(2);
    expect(boxes.find((b) => b.id === 'queues')?.marks).toBe(6);
    const series = [...page.html.matchAll(/class="series" data-series="[^"]+" data-n="(\d+)"/g)].map((m) => Number(m[1]));
    expect(series).toHaveLength(4);
    expect(series.every((n) => n >= 3)).toBe(true);

    const img = decodePng(page.png);
    expect(img.width).toBe(1360);
    for (const b of boxes) {
      expect(b.y + b.h, `chart ${b.id} is below the screenshot`).toBeLessThanOrEqual(img.height);
      const colored = countColoredPixels(img, b.x, b.y, b.w, b.h);
      // Legend swatches alone are ~200 px; series lines and bars add thousands.
      expect(colored, `chart ${b.id} has too few coloured pixels`).toBeGreaterThan(800);
    }
    // A blank area (below the last content) has none.
    expect(countColoredPixels(img, 0, img.height - 50, img.width, 50)).toBe(0);
  }, 60_000);

  it('names NVME_TCP_CHROMIUM in one line when it points at something that does not run', async () => {
    const saved = { bin: process.env['NVME_TCP_CHROMIUM'], error: process.env['NVME_TCP_CHROMIUM_ERROR'] };
    process.env['NVME_TCP_CHROMIUM'] = '/nonexistent/chromium';
    delete process.env['NVME_TCP_CHROMIUM_ERROR'];
    try {
      await expect(provideChromium()).rejects.toThrow(/^chromium: NVME_TCP_CHROMIUM=\/nonexistent\/chromium does not run \(.*\): run `npm ci`.*$/);
    } finally {
      for (const [k, v] of [['NVME_TCP_CHROMIUM', saved.bin], ['NVME_TCP_CHROMIUM_ERROR', saved.error]] as const) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });
});
