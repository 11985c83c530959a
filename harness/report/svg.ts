// Inline SVG charts (no external assets, no script needed to draw): line charts and bar charts with simple axes.

export interface Series {
  name: string;
  points: [number, number][];
}

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#17becf', '#e377c2', '#8c564b'];

export function seriesColor(i: number): string {
  return PALETTE[i % PALETTE.length] as string;
}

const escXml = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

function niceTicks(lo: number, hi: number, n = 5): number[] {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? raw) as number;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.round(v * 1e9) / 1e9);
  return out;
}

function shortNum(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  return String(+v.toFixed(2));
}

/** Geometry and opening markup every chart shares: the SVG element, its title, and the plot area inside the margins. */
interface Frame {
  W: number;
  H: number;
  m: { l: number; r: number; t: number; b: number };
  /** Plot area width and height. */
  pw: number;
  ph: number;
  /** The opening <svg> tag and the chart title. */
  head: string;
  title: string;
}

function chartFrame(o: { id: string; title: string; width?: number; height?: number }, bottomMargin: number): Frame {
  const W = o.width ?? 640;
  const H = o.height ?? 300;
  const m = { l: 64, r: 16, t: 28, b: bottomMargin };
  return {
    W,
    H,
    m,
    pw: W - m.l - m.r,
    ph: H - m.t - m.b,
    head: `<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="${escXml(o.id)}" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${escXml(o.title)}">`,
    title: `<text x="${W / 2}" y="18" text-anchor="middle" class="ct">${escXml(o.title)}</text>`,
  };
}

/** The whole chart when there is nothing to draw. */
function noDataChart(f: Frame): string {
  return `${f.head}${f.title}<text x="${f.W / 2}" y="${f.H / 2}" text-anchor="middle" class="empty">no data</text></svg>`;
}

/** A horizontal grid line and a left-hand label for each Y tick; `sy` maps a value to its pixel row. */
function yGrid(f: Frame, ticks: number[], sy: (y: number) => number): string[] {
  return ticks.map((t) => {
    const y = sy(t).toFixed(1);
    return `<line x1="${f.m.l}" x2="${f.m.l + f.pw}" y1="${y}" y2="${y}" class="grid"/><text x="${f.m.l - 6}" y="${y}" dy="4" text-anchor="end" class="tick">${shortNum(t)}</text>`;
  });
}

export interface LineChartOptions {
  id: string;
  title: string;
  xLabel: string;
  yLabel: string;
  series: Series[];
  logX?: boolean;
  width?: number;
  height?: number;
  /** Y axis from 0 (rates) rather than from the data minimum. */
  yFromZero?: boolean;
}

/** A line chart; every series path carries data-n (its point count) so tests can see data was drawn. */
export function lineChart(o: LineChartOptions): string {
  const f = chartFrame(o, 44);
  const { H, m, pw, ph } = f;
  const all = o.series.flatMap((s) => s.points).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!o.logX || x > 0));
  if (all.length === 0) return noDataChart(f);
  const tx = (x: number): number => (o.logX ? Math.log10(x) : x);
  let x0 = Math.min(...all.map(([x]) => tx(x)));
  let x1 = Math.max(...all.map(([x]) => tx(x)));
  let y0 = o.yFromZero === false ? Math.min(...all.map(([, y]) => y)) : 0;
  let y1 = Math.max(...all.map(([, y]) => y));
  if (x1 === x0) {
    x0 -= 1;
    x1 += 1;
  }
  if (y1 === y0) y1 = y0 + 1;
  y1 += (y1 - y0) * 0.05;
  if (o.yFromZero === false) y0 = Math.max(0, y0 - (y1 - y0) * 0.05);
  const sx = (x: number): number => m.l + ((tx(x) - x0) / (x1 - x0)) * pw;
  const sy = (y: number): number => m.t + ph - ((y - y0) / (y1 - y0)) * ph;
  const parts = [f.head, f.title, `<rect x="${m.l}" y="${m.t}" width="${pw}" height="${ph}" class="plot"/>`, ...yGrid(f, niceTicks(y0, y1), sy)];
  const xt = o.logX ? niceTicks(Math.floor(x0), Math.ceil(x1), Math.max(1, Math.ceil(x1) - Math.floor(x0))).filter((e) => e >= x0 - 1e-9 && e <= x1 + 1e-9).map((e) => 10 ** e) : niceTicks(x0, x1);
  for (const t of xt) {
    const x = sx(t).toFixed(1);
    parts.push(`<line x1="${x}" x2="${x}" y1="${m.t}" y2="${m.t + ph}" class="grid"/><text x="${x}" y="${m.t + ph + 16}" text-anchor="middle" class="tick">${shortNum(t)}</text>`);
  }
  parts.push(`<text x="${m.l + pw / 2}" y="${H - 6}" text-anchor="middle" class="axis">${escXml(o.xLabel)}</text>`);
  parts.push(`<text transform="translate(14 ${m.t + ph / 2}) rotate(-90)" text-anchor="middle" class="axis">${escXml(o.yLabel)}</text>`);
  o.series.forEach((s, i) => {
    const pts = s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!o.logX || x > 0));
    if (pts.length === 0) return;
    const d = pts.map(([x, y], k) => `${k === 0 ? 'M' : 'L'}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join('');
    const c = seriesColor(i);
    parts.push(`<path class="series" data-series="${escXml(s.name)}" data-n="${pts.length}" d="${d}" stroke="${c}" fill="none" stroke-width="2.5"/>`);
    if (pts.length === 1) {
      const [x, y] = pts[0] as [number, number];
      parts.push(`<circle cx="${sx(x).toFixed(1)}" cy="${sy(y).toFixed(1)}" r="4" fill="${c}"/>`);
    }
  });
  o.series.forEach((s, i) => {
    const y = m.t + 8 + i * 16;
    parts.push(`<rect x="${m.l + pw - 150}" y="${y - 8}" width="10" height="10" fill="${seriesColor(i)}"/><text x="${m.l + pw - 135}" y="${y + 1}" class="legend">${escXml(s.name)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('');
}

export interface Bar {
  label: string;
  value: number;
  /** Colour group (arm index). */
  group: number;
}

export interface BarChartOptions {
  id: string;
  title: string;
  yLabel: string;
  bars: Bar[];
  width?: number;
  height?: number;
}

/** Vertical bars; each bar carries data-value. */
export function barChart(o: BarChartOptions): string {
  const f = chartFrame(o, 64);
  const { m, pw, ph } = f;
  if (o.bars.length === 0) return noDataChart(f);
  const y1 = Math.max(1, ...o.bars.map((b) => b.value)) * 1.05;
  const sy = (y: number): number => m.t + ph - (y / y1) * ph;
  const slot = pw / o.bars.length;
  const bw = Math.max(2, slot * 0.7);
  const parts = [f.head, f.title, `<rect x="${m.l}" y="${m.t}" width="${pw}" height="${ph}" class="plot"/>`, ...yGrid(f, niceTicks(0, y1), sy)];
  o.bars.forEach((b, i) => {
    const x = m.l + i * slot + (slot - bw) / 2;
    const y = sy(b.value);
    parts.push(`<rect class="bar" data-value="${b.value}" x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${bw.toFixed(1)}" height="${(m.t + ph - y).toFixed(1)}" fill="${seriesColor(b.group)}"><title>${escXml(`${b.label}: ${b.value}`)}</title></rect>`);
    if (o.bars.length <= 32) {
      const lx = x + bw / 2;
      parts.push(`<text transform="translate(${lx.toFixed(1)} ${m.t + ph + 10}) rotate(40)" class="tick">${escXml(b.label)}</text>`);
    }
  });
  parts.push(`<text transform="translate(14 ${m.t + ph / 2}) rotate(-90)" text-anchor="middle" class="axis">${escXml(o.yLabel)}</text>`);
  parts.push('</svg>');
  return parts.join('');
}
