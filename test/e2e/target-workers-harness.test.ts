// The duplicate-connect scenario's target arms (harness/scenarios/duplicate-connect.ts targetWorkerArms) in quick mode:
// each placement's arm runs, and the target's worker spread matches the policy (single: one worker carries every
// command; queue and controller: both workers carry some).
import { describe, expect, it } from 'vitest';
import { targetWorkerArms } from '../../harness/scenarios/duplicate-connect.js';

describe('duplicate-connect target arms (target workers)', () => {
  it('runs single / controller / queue placement arms against a target with 2 workers', async () => {
    const job = '[rand4k]\nrw=randread\nbs=4k\niodepth=8\nnumjobs=2\nsize=8m\nruntime=400ms\n';
    const arms = await targetWorkerArms({ quick: true, log: () => undefined } as never, 2, job, 1);
    expect(arms.map((a) => a.name)).toEqual(['2-ctrl-target-single', '2-ctrl-target-controller', '2-ctrl-target-queue']);
    for (const a of arms) {
      expect(a.error).toBeUndefined();
      expect(a.metrics['iops']).toBeGreaterThan(0);
    }
    const [single, ctrl, queue] = arms;
    expect(single?.metrics['targetWorkersUsed']).toBe(1);
    expect(single?.metrics['targetMaxWorkerShare']).toBe(1);
    expect(ctrl?.metrics['targetWorkersUsed']).toBe(2);
    expect(queue?.metrics['targetWorkersUsed']).toBe(2);
    expect(queue?.metrics['targetMaxWorkerShare']).toBeLessThan(1);
  }, 90_000);
});
