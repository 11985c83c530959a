// kernel-interop --quick boots the qemu lab once (TCG: ~20 s): fio from the Linux host against our target and against
// nvmet, and our initiator (randread, then randrw with verify) against that nvmet. Without a built lab it must say so.
import { describe, expect, it } from 'vitest';
import { findScenario } from '../../harness/scenarios/index.js';

describe('kernel-interop --quick', () => {
  it('both directions ran in one boot, the ratios come from the arms, verify against nvmet passed (or the lab is missing, with the reason)', async () => {
    const s = findScenario('kernel-interop');
    const r = await (s as NonNullable<typeof s>).run({ quick: true, log: () => undefined });
    if (r.skipped !== undefined) {
      expect(r.skipped).toMatch(/lab is not available/);
      return;
    }
    expect(r.arms.map((a) => a.name)).toEqual(['linux-host->ts-target', 'linux-host->linux-target', 'ts-initiator->linux-target', 'ts-initiator->linux-target/verify']);
    for (const a of r.arms) {
      expect(a.error, `${a.name}: ${a.error ?? ''}`).toBeUndefined();
      expect(a.metrics['iops']).toBeGreaterThan(0);
    }
    // Both comparisons are quotients of the arms they name.
    expect(r.comparisons.map((c) => [c.numerator, c.denominator])).toEqual([
      ['linux-host->ts-target', 'linux-host->linux-target'],
      ['ts-initiator->linux-target', 'linux-host->linux-target'],
    ]);
    for (const c of r.comparisons) {
      expect(c.numeratorValue).toBe(r.arms.find((a) => a.name === c.numerator)?.metrics['iops']);
      expect(c.denominatorValue).toBe(r.arms.find((a) => a.name === c.denominator)?.metrics['iops']);
      expect(c.ratio).toBeCloseTo(c.numeratorValue / c.denominatorValue, 2);
    }
    // Our initiator against nvmet: real I/O through the engine, and the verify arm wrote, read back and checked blocks.
    const host = r.arms[2]?.run;
    expect(host?.totals.readIos).toBeGreaterThan(0);
    expect(host?.totals.errors).toBe(0);
    const v = r.arms[3]?.run;
    expect(v?.verify.enabled).toBe(true);
    expect(v?.totals.writeIos).toBeGreaterThan(0);
    expect(v?.verify.checkedBlocks).toBeGreaterThan(0);
    expect(v?.verify.mismatchCount).toBe(0);
    expect(v?.totals.errors).toBe(0);
    expect(r.ok).toBe(true);
    expect(r.notes.join(' ')).toMatch(/emulated \((TCG|KVM|UNKNOWN)\)/);
  }, 300_000);
});
