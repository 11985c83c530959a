// Runs catalogue cases on hosts: one target, one adapter per host, a verdict per cell from its evidence, and each
// cell's evidence (rule firings, target log lines, host log) written under <out>/evidence/<host>/<case>/.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { CATALOGUE } from './cases.js';
import { CatalogueTarget } from './target.js';
import { judge } from './verdict.js';
import type { CatalogueCase, Cell, HostEvidence, HostInfo, Matrix } from './types.js';

/** What an adapter gets for one case: the target (ports, rules already cleared) and how to arm the case's rules. */
export interface CaseContext {
  target: CatalogueTarget;
  /** Arms the case's rules (the adapter calls it at the workload's armAt). */
  arm: () => void;
  log: (m: string) => void;
}

/** A host under test: our initiator, the Linux host in the lab, SPDK's perf. */
export interface HostAdapter {
  readonly id: string;
  /** Starts the host against `target` (boots the lab guest); undefined, or why it cannot run at all. */
  open(target: CatalogueTarget): Promise<string | undefined>;
  info(): HostInfo;
  /** Why this host cannot run `c` (a not-run cell), or undefined. */
  cannot(c: CatalogueCase): string | undefined;
  run(c: CatalogueCase, ctx: CaseContext): Promise<HostEvidence>;
  close(): Promise<void>;
}

/** A host step that ran past its bounded wait: the adapter's evidence for a `hung` verdict, never thrown out of it. */
export class HostHung extends Error {
  readonly code = 'HARNESS_ERR_HOST_HUNG';
}

export const emptyEvidence = (): HostEvidence => ({ failedBlocks: [], mismatchedBlocks: [], kernelWarnings: [], facts: {}, log: '' });

export interface CatalogueRun {
  hosts: readonly HostAdapter[];
  cases?: readonly CatalogueCase[];
  /** Directory for the evidence (and, with writeMatrix, the matrix); none: evidence is kept in memory only. */
  out?: string;
  log?: (m: string) => void;
  notes?: string[];
}

async function writeEvidence(out: string | undefined, host: string, c: CatalogueCase, files: Record<string, string>): Promise<string[]> {
  if (out === undefined) return [];
  const rel = path.join('evidence', host, c.id);
  await mkdir(path.join(out, rel), { recursive: true });
  await Promise.all(Object.entries(files).map(([f, text]) => writeFile(path.join(out, rel, f), text)));
  return Object.keys(files).map((f) => path.posix.join('evidence', host, c.id, f));
}

/** Runs every case on every host, one host at a time (the lab guest and SPDK share the machine's cores). */
export async function runCatalogue(o: CatalogueRun): Promise<Matrix> {
  const log = o.log ?? (() => undefined);
  const cases = o.cases ?? CATALOGUE;
  const cells: Cell[] = [];
  const hosts: HostInfo[] = [];
  const target = await CatalogueTarget.start();
  try {
    for (const h of o.hosts) {
      const unavailable = await h.open(target).catch((e: unknown) => `the host did not start: ${(e as Error).message}`);
      try {
        for (const c of cases) {
          const t0 = performance.now();
          target.reset();
          const why = c.pending !== undefined ? undefined : (unavailable ?? h.cannot(c));
          if (c.pending !== undefined || why !== undefined) {
            cells.push({ caseId: c.id, host: h.id, verdict: c.pending !== undefined ? 'pending' : 'not-run', asExpected: false, summary: c.pending ?? (why as string), checks: [], facts: {}, evidence: [], wallMs: 0 });
            continue;
          }
          log(`${h.id}: ${c.id}`);
          // An adapter that breaks leaves a cell saying so; the other cases and hosts still run.
          const ev = await h.run(c, { target, arm: () => target.arm(c.rules), log }).catch((e: unknown) => ({ ...emptyEvidence(), notRun: `the ${h.id} adapter failed: ${(e as Error).message}`, log: (e as Error).stack ?? '' }));
          const firings = target.firings();
          const j = judge(c, ev, firings);
          const wallMs = Math.round(performance.now() - t0);
          const cell: Omit<Cell, 'evidence'> = { caseId: c.id, host: h.id, verdict: j.verdict, asExpected: j.verdict === c.expect && j.checks.every((k) => k.ok), summary: j.summary, checks: j.checks, facts: ev.facts, wallMs };
          const evidence = await writeEvidence(o.out, h.id, c, {
            'verdict.json': `${JSON.stringify({ ...cell, case: c }, null, 2)}\n`,
            'firings.json': `${JSON.stringify(firings.rules, null, 2)}\n`,
            'target.log': firings.lines.join('\n') + '\n',
            'host.log': ev.log,
          });
          cells.push({ ...cell, evidence });
          log(`${h.id}: ${c.id}: ${j.verdict}${cell.asExpected || j.verdict === 'not-run' ? '' : ' (not as expected)'}`);
        }
      } finally {
        hosts.push(h.info());
        await h.close();
      }
    }
  } finally {
    await target.stop();
  }
  return {
    schema: 1,
    name: 'host-behaviour',
    generatedAt: new Date().toISOString(),
    cases: cases.map((c) => ({ id: c.id, title: c.title, spec: c.spec, correct: c.correct, expect: c.expect, ...(c.pending === undefined ? {} : { pending: c.pending }) })),
    hosts,
    cells,
    notes: o.notes ?? [],
  };
}
