// The seed experiments with the Linux host as the initiator (`--initiator kernel --lab`), in the qemu lab: the
// connect sequencing of the 6.1 and newest kernels against our target with injected Connect latency (and a Connect
// refused mid-setup, which must unwind cleanly), and duplicate
// controllers under native multipath against our target's placement single vs queue, with its per-worker counts, and
// against nvmet in the same guest (its loopback) as the reference.
// Skipped, with the build command in the title, when a lab kernel is not built.
import { describe, expect, it } from 'vitest';
import { labPrerequisites, type LabKernel } from '../../harness/kernel-host/runner.js';
import { findScenario } from '../../harness/scenarios/index.js';
import type { Report } from '../../harness/report/types.js';
import { PEER_DIGESTS } from '../fixtures/peer-digests.js';

const run = (name: string, lab: LabKernel): Promise<Report> =>
  (findScenario(name) as NonNullable<ReturnType<typeof findScenario>>).run({ quick: true, log: () => undefined, kernelHost: { where: 'lab', lab, digests: PEER_DIGESTS } });

for (const lab of ['6.1', 'newest'] as const) {
  const missing = labPrerequisites(lab);
  describe.skipIf(missing !== undefined)(`Linux host (${lab} lab) as the initiator against our target${missing === undefined ? '' : ` — skipped: ${missing}`}`, () => {
    it('parallel-connect --quick: every arm ran, the target saw each I/O-queue Connect, the verdict says serial or parallel', async () => {
      const r = await run('parallel-connect', lab);
      expect(r.initiator).toMatchObject({ kind: 'kernel', where: 'lab', emulated: expect.stringMatching(/^emulated \((TCG|KVM)\)$/) });
      expect(r.arms.map((a) => [a.name, a.error, a.skipped])).toEqual([
        ['linux-0ms', undefined, undefined],
        ['linux-1ms', undefined, undefined],
        ['linux-5ms', undefined, undefined],
        ['refused-io-connect', undefined, undefined],
      ]);
      for (const a of r.arms.slice(0, 3)) {
        // The guest boots with 4 vCPUs in quick mode: the Linux host opens one I/O queue per CPU.
        expect(a.metrics['ioQueues'], a.name).toBe(4);
        expect(a.metrics['targetIoConnectSpanMs'], a.name).toBeGreaterThanOrEqual(0);
      }
      const inFlight = r.arms[2]?.metrics['targetMaxConnectsInFlight'] ?? 0;
      expect(inFlight).toBeGreaterThanOrEqual(1);
      // Serial: each Connect waits for the previous one, so 3 gaps of at least the injected 5 ms.
      if (inFlight === 1) expect(r.arms[2]?.metrics['targetIoConnectSpanMs']).toBeGreaterThanOrEqual(15);
      expect(r.verdict).toMatch(/sets up its 4 I\/O queues (serially|in parallel|partly in parallel)/);
      // The error path: one I/O queue's Connect refused mid-setup; the connect fails and nothing is left behind.
      expect(r.arms[3]?.metrics).toMatchObject({ connectFailed: 1, refusedConnects: 1, targetControllersLeft: 0, hostControllersLeft: 0, kernelTroubleLines: 0, reconnectIoQueues: 4 });
      expect(r.verdict).toMatch(/nvme connect failed; the unwind was clean/);
      expect(r.ok).toBe(true);
    });

    it.skipIf(lab !== '6.1')('duplicate-connect --quick: 2 paths, single on one worker, queue on both, nvmet beside them, fio verify clean', async () => {
      const r = await run('duplicate-connect', lab);
      const arm = (n: string) => r.arms.find((a) => a.name === n);
      for (const a of r.arms) expect(a.error, `${a.name}: ${a.error ?? ''}`).toBeUndefined();
      const single = arm('2-ctrl-round-robin/single')?.metrics ?? {};
      const queue = arm('2-ctrl-round-robin/queue')?.metrics ?? {};
      expect(single['paths']).toBe(2);
      expect(queue['paths']).toBe(2);
      expect(single['targetWorkersUsed']).toBe(1);
      expect(single['targetMaxWorkerShare']).toBe(1);
      expect(single['targetWorker1Ios']).toBe(0);
      expect(queue['targetWorkersUsed']).toBe(2);
      expect(queue['targetWorker0Ios']).toBeGreaterThan(0);
      expect(queue['targetWorker1Ios']).toBeGreaterThan(0);
      // 6.1 predates the queue-depth iopolicy (6.11): skipped with the reason, never run as something else.
      expect(arm('2-ctrl-queue-depth/single')?.skipped).toMatch(/refuses iopolicy queue-depth/);
      const v = arm('2-ctrl-round-robin/queue/verify');
      expect(v?.metrics['paths']).toBe(2);
      expect(v?.metrics['fioIos']).toBeGreaterThan(0);
      expect(r.verdict).toMatch(/fio verify: clean/);
      // The reference: the same guest's Linux host against nvmet in the guest over its loopback, the same arms.
      expect(r.arms.filter((a) => a.name.includes('/nvmet')).map((a) => a.name)).toEqual(['1-ctrl/nvmet', '2-ctrl-round-robin/nvmet', '2-ctrl-queue-depth/nvmet', '2-ctrl-numa/nvmet', '2-ctrl-round-robin/nvmet/verify']);
      expect(arm('1-ctrl/nvmet')?.metrics['iops']).toBeGreaterThan(0);
      for (const n of ['2-ctrl-round-robin/nvmet', '2-ctrl-numa/nvmet', '2-ctrl-round-robin/nvmet/verify']) {
        expect(arm(n)?.skipped, n).toBeUndefined();
        expect(arm(n)?.metrics['paths'], n).toBe(2);
        expect(arm(n)?.metrics['fioIos'], n).toBeGreaterThan(0);
      }
      expect(arm('2-ctrl-round-robin/nvmet')?.params['target']).toMatch(/^nvmet in the guest, over its loopback 127\.0\.0\.1:4420/);
      expect(arm('2-ctrl-queue-depth/nvmet')?.skipped).toMatch(/refuses iopolicy queue-depth/);
      expect(r.verdict).toMatch(/nvmet \(the reference, same host\): 1 controller \d+ IOPS, 2 duplicate controllers round-robin \d+ IOPS over 2 paths; fio verify: clean\./);
      expect(r.ok).toBe(true);
    });
  });
}
