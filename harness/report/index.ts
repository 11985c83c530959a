// Public face of harness/report: the report schema, builders, and the JSON / Markdown / HTML renderers.
export * from './types.js';
export { machineInfo, runMetrics, armFromRun, compare, makeReport, describeRatio, fmtNum, initiatorText, ReportError, type ReportInit } from './build.js';
export { renderMarkdown, escMd } from './markdown.js';
export { renderHtml, escHtml } from './html.js';
export { renderJson, writeReport, type WrittenReport } from './write.js';
export { lineChart, barChart, seriesColor, type Series, type Bar } from './svg.js';
export { progressEnabled, progressLine, formatProgress, type ProgressSink } from './progress.js';
