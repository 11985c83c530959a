// Verdicts from evidence (issue 45 item 3): what the host returned, read back and logged decides, not its exit status.
import type { BlockRange, CatalogueCase, Check, HostEvidence, RuleFirings, Verdict } from './types.js';

/** Kernel log lines that make a cell `kernel-warning` whatever the workload saw. */
export const KERNEL_WARNING = /WARNING:|BUG:|Oops|blocked for more than|hung_task|general protection fault|Call Trace|KASAN|UBSAN/;

/** The read-back in pieces: before the bad range, the bad range, after it (one piece without a bad range). */
export function readChunks(range: BlockRange, bad: BlockRange | undefined): BlockRange[] {
  if (bad === undefined) return [range];
  const end = range.start + range.count;
  const badEnd = bad.start + bad.count;
  return [
    { start: range.start, count: bad.start - range.start },
    bad,
    { start: badEnd, count: end - badEnd },
  ].filter((c) => c.count > 0);
}

const fmt = (rs: readonly BlockRange[]): string => (rs.length === 0 ? 'none' : rs.map((r) => `${r.start}..${r.start + r.count - 1}`).join(', '));

/** The cell's verdict, the checks it rests on, and one line saying what the host did. */
export function judge(c: CatalogueCase, ev: HostEvidence, firings: RuleFirings): { verdict: Verdict; checks: Check[]; summary: string } {
  if (ev.notRun !== undefined) return { verdict: 'not-run', checks: [], summary: ev.notRun };
  const checks: Check[] = [];
  const hits = firings.rules.reduce((n, r) => n + r.hits, 0);
  if (c.rules.length > 0) checks.push({ name: 'rule fired', ok: hits > 0, detail: firings.rules.map((r) => `${r.id}: ${r.hits} hit(s) of ${r.matches} match(es)`).join('; ') });
  const verdict: Verdict =
    ev.hung !== undefined ? 'hung'
    : ev.kernelWarnings.length > 0 ? 'kernel-warning'
    : ev.mismatchedBlocks.length > 0 ? 'data-mismatch'
    : ev.connectError !== undefined || ev.failedBlocks.length > 0 || ev.ioErrors !== undefined ? 'error-surfaced'
    : 'recovered';
  const bad = c.workload.badRange;
  if (bad !== undefined && ev.facts['blocksAttributed'] === false) {
    checks.push({ name: 'an error for the bad range', ok: ev.ioErrors !== undefined, detail: `${ev.ioErrors ?? 'no error reported'} (this host does not say which blocks failed)` });
  } else if (bad !== undefined) {
    const exact = ev.failedBlocks.length === 1 && ev.failedBlocks[0]?.start === bad.start && ev.failedBlocks[0]?.count === bad.count;
    checks.push({ name: 'EIO for exactly the bad range', ok: exact, detail: `failed: ${fmt(ev.failedBlocks)} (${ev.readError ?? 'no error'}); bad: ${fmt([bad])}` });
  }
  if (c.workload.armAt === 'before-connect' && ev.connectError !== undefined) {
    checks.push({ name: 'nothing left on the target after the failed connect', ok: ev.facts['leftControllers'] === 0 && ev.facts['leftQueues'] === 0, detail: `controllers ${String(ev.facts['leftControllers'])}, queues ${String(ev.facts['leftQueues'])}` });
    checks.push({ name: 'a second connect comes up cleanly', ok: ev.retryConnected === true, detail: ev.retryConnected === true ? 'connected, data read back' : 'the retry failed' });
  }
  const granted = c.rules.find((r) => r.action.kind === 'grant-queues')?.action;
  if (granted?.kind === 'grant-queues') {
    const q = ev.facts['ioQueues'];
    checks.push({ name: `at most ${granted.count} I/O queue(s) in use`, ok: typeof q === 'number' && q <= granted.count, detail: `I/O queues: ${String(q ?? 'not seen')}` });
  }
  const asked = verdict === c.expect && checks.every((k) => k.ok);
  const what =
    verdict === 'hung' ? `hung: ${ev.hung as string}`
    : verdict === 'kernel-warning' ? `kernel log: ${ev.kernelWarnings[0] as string}`
    : verdict === 'data-mismatch' ? `blocks ${fmt(ev.mismatchedBlocks)} read back different from what was written`
    : verdict === 'error-surfaced' ? (ev.connectError !== undefined ? `connect failed: ${ev.connectError}` : ev.failedBlocks.length > 0 ? `blocks ${fmt(ev.failedBlocks)} failed: ${ev.readError ?? '?'}` : `I/O errors: ${ev.ioErrors ?? '?'}`)
    : ev.facts['blocksAttributed'] === false ? 'no error, no hang (this host compares no data)' : 'every block read back as written';
  const failed = checks.filter((k) => !k.ok).map((k) => `${k.name}: no (${k.detail})`);
  return { verdict, checks, summary: [what, ...failed].join('; ') + (asked ? '' : ` — expected ${c.expect}`) };
}
