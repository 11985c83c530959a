// ioSetupSeen (parallel-connect's evidence with the Linux host) from the target's per-queue setup times, driven by our
// initiator over a real socket: I/O queues connected one at a time never overlap; connected all at once, every
// queue's ICReq..Connect-completed window overlaps the others while the target holds each Connect back.
import { describe, expect, it } from 'vitest';
import { connect } from '../../initiator/index.js';
import { TargetService } from '../../target/index.js';
import { cleanupAfterEach } from '../../test/fixtures/cleanups.js';
import { ioSetupSeen } from './kernel-initiator.js';

const NQN = 'nqn.2024-01.io.test:io-setup';
const LAT_MS = 50;
const cleanups = cleanupAfterEach();

async function target(): Promise<{ t: TargetService; port: number }> {
  const t = new TargetService();
  cleanups.push(() => t.stop());
  await t.apply({ ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [{ nqn: NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] }] });
  t.setFaults(NQN, { connectLatencyMs: LAT_MS });
  return { t, port: (t.boundPorts()[0] as { port: number }).port };
}

describe('ioSetupSeen: the I/O queues\' setup windows as the target saw them', () => {
  for (const [concurrency, overlapping] of [[1, 1], [4, 4]] as const) {
    it(`connect_concurrency ${concurrency}: at most ${overlapping} setup(s) overlapping, spans and Connects in flight to match`, async () => {
      const { t, port } = await target();
      expect(ioSetupSeen(t, NQN, LAT_MS)).toBeUndefined();
      const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, nr_io_queues: 4, connect_concurrency: concurrency, keep_alive_tmo: 60 });
      cleanups.push(() => c.disconnect());
      const s = ioSetupSeen(t, NQN, LAT_MS);
      expect(s?.maxSetupsOverlapping).toBe(overlapping);
      expect(s?.maxConnectsInFlight).toBe(overlapping);
      // One after the other: 4 windows of at least the injected latency end to end; at once: about one.
      if (concurrency === 1) expect(s?.setupSpanMs).toBeGreaterThanOrEqual(4 * LAT_MS - 1);
      else expect(s?.connectSpanMs).toBeLessThan(LAT_MS);
      // Our initiator opens each queue's connection and sends its Connect in one task: one at a time, the next ICReq
      // comes after the previous Connect completed (at once, how many ICReqs beat the first Connect is a race).
      if (concurrency === 1) expect(s?.icReqsBeforeFirstConnect).toBe(1);
      expect(s?.firstCommands).toBe(0);
      await c.namespace(1).read(0, 1);
      expect(ioSetupSeen(t, NQN, LAT_MS)?.firstCommands).toBe(1);
    });
  }
});
