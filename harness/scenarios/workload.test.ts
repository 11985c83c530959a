import { describe, expect, it } from 'vitest';
import type { Arm } from '../report/types.js';
import { parseCpuList } from './placement.js';
import { medianArm, runInterleaved } from './workload.js';

const arm = (name: string, iops: number): Arm => ({ name, params: {}, metrics: { iops } });

describe('repetitions', () => {
  it('medianArm keeps the median repetition and records the spread', () => {
    const a = medianArm('x', [arm('x', 30), arm('x', 10), arm('x', 20)], 'iops');
    expect(a.metrics).toEqual({ iops: 20, repetitions: 3, iopsMin: 10, iopsMax: 30 });
    expect(medianArm('x', [arm('x', 7)], 'iops').metrics).toEqual({ iops: 7, repetitions: 1 });
  });

  it('medianArm reports a failed repetition instead of hiding it', () => {
    const failed: Arm = { name: 'x', params: {}, metrics: {}, error: 'boom' };
    expect(medianArm('x', [arm('x', 1), failed], 'iops').error).toBe('boom');
  });

  it('runInterleaved runs A B A B, not A A B B', async () => {
    const order: string[] = [];
    const mk = (name: string) => ({ name, metric: 'iops', run: async () => (order.push(name), arm(name, order.length)) });
    const out = await runInterleaved([mk('a'), mk('b')], 2);
    expect(order).toEqual(['a', 'b', 'a', 'b']);
    expect(out.map((a) => [a.name, a.metrics['repetitions']])).toEqual([['a', 2], ['b', 2]]);
  });
});

describe('parseCpuList', () => {
  it('reads /proc Cpus_allowed_list syntax', () => {
    expect(parseCpuList('0-1')).toEqual([0, 1]);
    expect(parseCpuList('0,2-4,7\n')).toEqual([0, 2, 3, 4, 7]);
    expect(parseCpuList('3')).toEqual([3]);
  });
});
