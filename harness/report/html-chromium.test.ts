// Opens a real HTML report in headless Chromium: the page script must run without errors and the screenshot must
// show the charts drawn with data (coloured pixels inside each chart's box, as the page itself reports the boxes).
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runJobs } from '../load/engine.js';
import { parseFioJobFile, resolveJobs } from '../load/job-file.js';
import { MemoryBlockTarget } from '../load/memory-target.js';
import { armFromRun, compare, makeReport } from './build.js';
import { findChromium, headless, screenshotPng } from './chromium.js';
import { countColoredPixels, decodePng } from './png.js';
import { writeReport } from './write.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

const chromium = await findChromium();

describe.skipIf(chromium === undefined && process.env['CI'] !== 'true')('HTML report in headless Chromium', () => {
  it('renders without console errors and with charts drawn from data', async () => {
    const bin = chromium;
    if (bin === undefined) throw new Error('chromium not installed (.ci/run must apt-get install -y chromium)');
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

    const dom = await headless(bin, files.html, { dumpDom: true });
    expect(dom.consoleLines).toEqual([]);
    expect(dom.stdout).not.toContain('id="report-error"');
    const ready = /<div id="report-ready" data-charts="([^"]*)" data-arms="(\d+)">ready<\/div>/.exec(dom.stdout);
    expect(ready, 'page script did not mark the report ready').not.toBeNull();
    expect(ready?.[2]).toBe('2');
    const boxes = (ready?.[1] ?? '').split(';').map((s) => {
      const [id, x, y, w, h, marks] = s.split(',');
      return { id: id ?? '', x: Number(x), y: Number(y), w: Number(w), h: Number(h), marks: Number(marks) };
    });
    expect(boxes.map((b) => b.id).sort()).toEqual(['arms', 'cdf', 'iops', 'queues']);
    expect(boxes.find((b) => b.id === 'iops')?.marks).toBe(2);
    expect(boxes.find((b) => b.id === 'queues')?.marks).toBe(6);
    const series = [...dom.stdout.matchAll(/class="series" data-series="[^"]+" data-n="(\d+)"/g)].map((m) => Number(m[1]));
    expect(series).toHaveLength(4);
    expect(series.every((n) => n >= 3)).toBe(true);

    const shot = await screenshotPng(bin, files.html);
    expect(shot.consoleLines).toEqual([]);
    const img = decodePng(shot.png);
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
});
