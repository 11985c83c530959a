// kernel-interop --quick boots the qemu lab once (TCG: ~20 s) and runs fio from the Linux host against our target and
// against nvmet. Without a built lab it must say so instead of pretending.
import { describe, expect, it } from 'vitest';
import { findScenario } from '../../harness/scenarios/index.js';

describe('kernel-interop --quick', () => {
  it('both fio arms ran in the guest and the ratio comes from them (or the lab is missing, with the reason)', async () => {
    const s = findScenario('kernel-interop');
    const r = await (s as NonNullable<typeof s>).run({ quick: true, log: () => undefined });
    if (r.skipped !== undefined) {
      expect(r.skipped).toMatch(/lab is not available/);
      return;
    }
    expect(r.arms.map((a) => a.name)).toEqual(['linux-host->ts-target', 'linux-host->linux-target']);
    for (const a of r.arms) {
      expect(a.error, `${a.name}: ${a.error ?? ''}`).toBeUndefined();
      expect(a.metrics['iops']).toBeGreaterThan(0);
    }
    const c = r.comparisons[0];
    expect(c?.numeratorValue).toBe(r.arms[0]?.metrics['iops']);
    expect(c?.denominatorValue).toBe(r.arms[1]?.metrics['iops']);
    expect(c?.ratio).toBeCloseTo((c?.numeratorValue ?? 0) / (c?.denominatorValue ?? 1), 2);
    expect(r.notes.join(' ')).toMatch(/emulated \((TCG|KVM|UNKNOWN)\)/);
  }, 300_000);
});
