// SIGKILL durability (issue 6 item 3), short version of bench/durability-sigkill.ts: `nvme-tcp target` on a file
// namespace in a child process, FUA writes and Flush-covered writes, SIGKILL at random points, restart on the same
// port, and every acknowledged-durable block read back intact (stamp: LBA + generation + CRC32C).
import { describe, expect, it } from 'vitest';
import { runDurability } from '../../harness/fuzz/durability.js';

describe('durability across SIGKILL of the target', () => {
  it('3 kill/restart cycles: every acknowledged FUA or flushed block reads back intact', async () => {
    const r = await runDurability({ cycles: 3, blocks: 2048, runMs: [150, 450], seed: 0x5eed });
    expect(r.cycles).toBe(3);
    expect(r.failures).toEqual([]);
    // The check must have had something to check: durable writes in every cycle, verified after each restart.
    for (const c of r.reports) {
      expect(c.durableWrites).toBeGreaterThan(0);
      expect(c.verified).toBeGreaterThan(0);
    }
    expect(r.blocksVerified).toBeGreaterThan(100);
  }, 30_000);

  it('negative control: blocks zeroed in the file while the target is down are reported as lost', async () => {
    const r = await runDurability({ cycles: 1, blocks: 512, runMs: [150, 200], seed: 0xbad, sabotageBlocks: 3 });
    expect(r.sabotaged.length).toBe(3);
    expect(r.failures.map((f) => f.lba).sort((a, b) => a - b)).toEqual(r.sabotaged.map((s) => s.lba).sort((a, b) => a - b));
    for (const f of r.failures) expect(f.found).toBe('zeros');
  }, 30_000);
});
