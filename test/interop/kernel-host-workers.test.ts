// The kernel-host interop suite (kernel-host-suite.ts), unchanged, against the multi-process data plane: two worker
// processes, each I/O queue on the next worker (docs/target.md "Target workers"). The Linux host opens one I/O queue
// per CPU of the guest, so its queues land on both workers; the last check proves they did.
import { expect } from 'vitest';
import { kernelHostSuite } from './kernel-host-suite.js';

/** Workers named in the primary's "queue handed to worker" debug lines. */
function workersUsed(log: readonly string[]): Set<number> {
  const used = new Set<number>();
  for (const line of log) {
    if (!line.includes('queue handed to worker')) continue;
    try {
      const w = (JSON.parse(line) as { worker?: unknown }).worker;
      if (typeof w === 'number') used.add(w);
    } catch {
      // not a log line
    }
  }
  return used;
}

kernelHostSuite({
  label: 'workers 2, placement queue',
  targetArgs: ['--workers', '2', '--placement', 'queue'],
  // Write Uncorrectable needs the namespace in one process (Subsystem.mediaStateLocal).
  skipSteps: ['write-uncor'],
  checks: {
    'the I/O queues were served by both worker processes': (log) => {
      expect(log.some((l) => l.includes('worker processes ready')), 'the target did not start its workers').toBe(true);
      expect([...workersUsed(log)].sort()).toEqual([0, 1]);
    },
  },
});
