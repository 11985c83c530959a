// The catalogue's verdicts and matrix from hand-built evidence, and `bench --catalogue`'s usage errors.
import { describe, expect, it } from 'vitest';
import { runBenchCli } from '../../cli/harness.js';
import { parseFaultRule } from '../../target/index.js';
import { CATALOGUE, findCase } from './cases.js';
import { renderMatrixHtml, renderMatrixMarkdown } from './matrix.js';
import { emptyEvidence } from './runner.js';
import type { CatalogueCase, HostEvidence, Matrix, RuleFirings } from './types.js';
import { judge, readChunks } from './verdict.js';

const media = findCase('media-error') as CatalogueCase;
const fired: RuleFirings = { rules: [{ id: 'ure', matches: 1, hits: 1 }], lines: [] };
const ev = (o: Partial<HostEvidence>): HostEvidence => ({ ...emptyEvidence(), ...o });

describe('catalogue verdicts', () => {
  it('every case names its spec section, a correct behaviour and unique id; rules parse', () => {
    expect(new Set(CATALOGUE.map((c) => c.id)).size).toBe(CATALOGUE.length);
    for (const c of CATALOGUE) {
      expect(c.spec).toMatch(/§\d/);
      for (const r of c.rules) expect(() => parseFaultRule(r), `${c.id}: ${r.id ?? ''}`).not.toThrow();
    }
  });

  it('splits the read-back around the bad range, at the range edges too', () => {
    expect(readChunks({ start: 0, count: 32 }, undefined)).toEqual([{ start: 0, count: 32 }]);
    expect(readChunks({ start: 0, count: 32 }, { start: 16, count: 4 })).toEqual([{ start: 0, count: 16 }, { start: 16, count: 4 }, { start: 20, count: 12 }]);
    expect(readChunks({ start: 0, count: 32 }, { start: 0, count: 4 })).toEqual([{ start: 0, count: 4 }, { start: 4, count: 28 }]);
    expect(readChunks({ start: 0, count: 32 }, { start: 28, count: 4 })).toEqual([{ start: 0, count: 28 }, { start: 28, count: 4 }]);
  });

  it('media error: exactly the bad range failed is as expected; one block more is not', () => {
    const ok = judge(media, ev({ failedBlocks: [{ start: 16, count: 4 }], readError: 'EIO' }), fired);
    expect(ok.verdict).toBe('error-surfaced');
    expect(ok.checks.every((k) => k.ok)).toBe(true);
    const wide = judge(media, ev({ failedBlocks: [{ start: 0, count: 16 }, { start: 16, count: 4 }], readError: 'EIO' }), fired);
    expect(wide.verdict).toBe('error-surfaced');
    expect(wide.checks.find((k) => k.name === 'EIO for exactly the bad range')?.ok).toBe(false);
  });

  it('hung beats kernel warnings beats mismatch beats errors; nothing wrong is recovered', () => {
    const c = findCase('io-timeout') as CatalogueCase;
    const f: RuleFirings = { rules: [{ id: 'lost-read', matches: 1, hits: 1 }], lines: [] };
    expect(judge(c, ev({ hung: 'read', kernelWarnings: ['WARNING: x'] }), f).verdict).toBe('hung');
    expect(judge(c, ev({ kernelWarnings: ['INFO: task dd blocked for more than 10 seconds'], mismatchedBlocks: [{ start: 0, count: 1 }] }), f).verdict).toBe('kernel-warning');
    expect(judge(c, ev({ mismatchedBlocks: [{ start: 0, count: 1 }], failedBlocks: [{ start: 1, count: 1 }] }), f).verdict).toBe('data-mismatch');
    expect(judge(c, ev({ failedBlocks: [{ start: 0, count: 32 }] }), f).verdict).toBe('error-surfaced');
    const good = judge(c, ev({}), f);
    expect(good.verdict).toBe('recovered');
    expect(good.summary).toBe('every block read back as written');
  });

  it('a host that names no block: its first error line, and the bad-range check asks only for an error', () => {
    const j = judge(media, ev({ ioErrors: 'Read completed with error (sct=2, sc=129)', facts: { blocksAttributed: false } }), fired);
    expect(j.verdict).toBe('error-surfaced');
    expect(j.summary).toBe('I/O errors: Read completed with error (sct=2, sc=129)');
    expect(j.checks.map((k) => [k.name, k.ok])).toEqual([['rule fired', true], ['an error for the bad range', true]]);
  });

  it('a rule that never fired fails its check, whatever the host did', () => {
    const j = judge(findCase('retryable-status') as CatalogueCase, ev({}), { rules: [{ id: 'not-ready', matches: 0, hits: 0 }], lines: [] });
    expect(j.checks.find((k) => k.name === 'rule fired')?.ok).toBe(false);
    expect(j.summary).toContain('expected recovered');
  });

  it('a failed connect needs nothing left on the target and a clean second connect', () => {
    const c = findCase('connect-refused-nth') as CatalogueCase;
    const f: RuleFirings = { rules: [{ id: 'refuse-connect', matches: 2, hits: 1 }], lines: [] };
    expect(judge(c, ev({ connectError: 'x', retryConnected: true, facts: { leftControllers: 0, leftQueues: 0 } }), f).checks.every((k) => k.ok)).toBe(true);
    expect(judge(c, ev({ connectError: 'x', retryConnected: true, facts: { leftControllers: 1, leftQueues: 1 } }), f).checks.every((k) => k.ok)).toBe(false);
  });
});

describe('catalogue matrix', () => {
  const m: Matrix = {
    schema: 1,
    name: 'host-behaviour',
    generatedAt: '2026-01-01T00:00:00.000Z',
    cases: [{ id: 'media-error', title: media.title, spec: media.spec, correct: media.correct, expect: media.expect }],
    hosts: [{ id: 'h<1>', describe: 'a host', notes: [] }],
    cells: [{ caseId: 'media-error', host: 'h<1>', verdict: 'hung', asExpected: false, summary: 'a | b <x>', checks: [], facts: {}, evidence: ['evidence/h1/media-error/verdict.json', 'evidence/h1/media-error/host.log'], wallMs: 1000 }],
    notes: [],
  };

  it('Markdown: the cell links its host log and says finding; pipes escaped', () => {
    const md = renderMatrixMarkdown(m);
    expect(md).toContain('| media-error | error surfaced | [HUNG (finding)](evidence/h1/media-error/host.log) |');
    expect(md).toContain('a \\| b <x>');
  });

  it('HTML: escaped, linked, with the JSON embedded', () => {
    const html = renderMatrixHtml(m);
    expect(html).toContain('<th>h&lt;1&gt;</th>');
    expect(html).toContain('<a href="evidence/h1/media-error/host.log">HUNG (finding)</a>');
    expect(html).not.toContain('<x>');
    expect(html).toContain('"generatedAt": "2026-01-01T00:00:00.000Z"');
  });
});

describe('bench --catalogue usage', () => {
  const run = async (argv: string[]): Promise<{ code: number; err: string }> => {
    let err = '';
    const code = await runBenchCli(argv, { stdout: () => undefined, stderr: (s) => void (err += s) });
    return { code, err };
  };
  it.each([
    [['--catalogue', '--hosts', 'ours,freebsd'], '--hosts: unknown host "freebsd"'],
    [['--catalogue', '--cases', 'nope'], '--cases: unknown case "nope"'],
    [['--hosts', 'ours'], '--hosts needs --catalogue'],
    [['--catalogue', '--scenario', 'x'], '--catalogue takes no job file or --scenario'],
  ])('%j: one line, exit 2', async (argv, msg) => {
    const r = await run(argv);
    expect(r.code).toBe(2);
    expect(r.err).toContain(msg);
    expect(r.err.trim().split('\n')).toHaveLength(1);
  });
});
