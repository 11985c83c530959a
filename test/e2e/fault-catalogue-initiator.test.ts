// The host-behaviour catalogue (harness/catalogue, docs/faults.md) against our initiator in this process: every case
// that can run gets the verdict a correct host earns, from the evidence (data read back, errors, rule firings).
import { describe, expect, it } from 'vitest';
import { CATALOGUE } from '../../harness/catalogue/cases.js';
import { OursHost } from '../../harness/catalogue/hosts/ours.js';
import { runCatalogue } from '../../harness/catalogue/runner.js';

describe('catalogue: our initiator', () => {
  for (const c of CATALOGUE) {
    // Skipped cases say why in their cell: pending (the engine lacks the action) or a host that has no such feature.
    it.skipIf(c.pending !== undefined || new OursHost().cannot(c) !== undefined)(`${c.id}: ${c.title} → ${c.expect}`, { timeout: 60_000 }, async () => {
      const m = await runCatalogue({ hosts: [new OursHost()], cases: [c] });
      const cell = m.cells[0];
      expect(cell?.summary).toBeDefined();
      expect({ verdict: cell?.verdict, failed: cell?.checks.filter((k) => !k.ok) }).toEqual({ verdict: c.expect, failed: [] });
      if (c.rules.length > 0) expect(cell?.checks.find((k) => k.name === 'rule fired')?.ok).toBe(true);
    });
  }
});
