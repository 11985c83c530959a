// match_hw_queues building blocks on a real veth pair with 4 rx/tx queues (and one with 1) in a network namespace.
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import os from 'node:os';
import { connect } from './connect.js';
import { FakeController } from '../harness/peers/fake-controller.js';
import { checkHost, limitQueuesToHardware, nicQueueCounts, routeInterface } from './topology.js';

const NS = `nvti1t${process.pid % 10000}`;
const V4 = `vq4${process.pid % 10000}`;
const V1 = `vq1${process.pid % 10000}`;
let available = true;
let why = '';

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: 'pipe' });
}

beforeAll(() => {
  try {
    ip('netns', 'add', NS);
    ip('link', 'add', V4, 'numtxqueues', '4', 'numrxqueues', '4', 'type', 'veth', 'peer', 'name', `${V4}p`, 'numtxqueues', '4', 'numrxqueues', '4');
    ip('link', 'set', `${V4}p`, 'netns', NS);
    ip('addr', 'add', '10.213.7.1/24', 'dev', V4);
    ip('link', 'set', V4, 'up');
    ip('-n', NS, 'link', 'set', `${V4}p`, 'up');
    ip('link', 'add', V1, 'numtxqueues', '1', 'numrxqueues', '1', 'type', 'veth', 'peer', 'name', `${V1}p`);
    ip('link', 'set', `${V1}p`, 'netns', NS);
    ip('addr', 'add', '10.213.8.1/24', 'dev', V1);
    ip('link', 'set', V1, 'up');
    ip('-n', NS, 'link', 'set', `${V1}p`, 'up');
  } catch (e) {
    available = false;
    why = (e as Error).message.split('\n')[0] ?? 'unknown';
  }
});

afterAll(() => {
  for (const args of [['link', 'del', V4], ['link', 'del', V1], ['netns', 'del', NS]]) {
    try {
      ip(...args);
    } catch {
      // already gone
    }
  }
});

describe('topology (veth in a network namespace)', () => {
  it('finds the interface that routes to an address and counts its queues', async (ctx) => {
    if (!available) ctx.skip(`network namespaces unavailable here: ${why}`);
    expect((await routeInterface('10.213.7.2'))?.iface).toBe(V4);
    expect((await routeInterface('10.213.8.2'))?.iface).toBe(V1);
    const q = await nicQueueCounts(V4);
    expect([q.rx, q.tx]).toEqual([4, 4]);
    const q1 = await nicQueueCounts(V1);
    expect([q1.rx, q1.tx]).toEqual([1, 1]);
  });

  it('limits I/O queues to min(CPUs, NIC queues)', async (ctx) => {
    if (!available) ctx.skip(`network namespaces unavailable here: ${why}`);
    const lines: string[] = [];
    const log = { info: (_o: unknown, msg: string) => lines.push(msg), warn: () => undefined } as unknown as Parameters<typeof limitQueuesToHardware>[2];
    expect(await limitQueuesToHardware('10.213.7.2', undefined, log, 8)).toBe(4);
    expect(await limitQueuesToHardware('10.213.7.2', undefined, log, 2)).toBe(2);
    expect(await limitQueuesToHardware('10.213.8.2', undefined, log, 8)).toBe(1);
    expect(await limitQueuesToHardware('192.0.2.1', V4, log, 16)).toBe(4);
    expect(lines[0]).toBe('limiting I/O queues to 4 (NIC queues 4, CPUs 8)');
  });

  it('check-host warns when NIC queues < CPUs and lists RPS/XPS masks', async (ctx) => {
    if (!available) ctx.skip(`network namespaces unavailable here: ${why}`);
    const rep = await checkHost('10.213.8.2');
    expect(rep.iface).toBe(V1);
    if (rep.cpus > 1) expect(rep.warnings.join('\n')).toMatch(/1 rx\/tx queue pairs/);
    // A single-queue device has no XPS file (the kernel answers ENOENT): reported as unreadable, not invented.
    expect(rep.unreadable.join('\n')).toMatch(/tx-0\/xps_cpus/);
    const rep4 = await checkHost('10.213.7.2');
    expect(Object.keys(rep4.xps)).toEqual(['tx-0', 'tx-1', 'tx-2', 'tx-3']);
    expect(Object.keys(rep4.rps)).toEqual(['rx-0', 'rx-1', 'rx-2', 'rx-3']);
  });

  it('connect with match_hw_queues limits I/O queues unless nr_io_queues is explicit (host_iface on the veth)', async (ctx) => {
    if (!available) ctx.skip(`network namespaces unavailable here: ${why}`);
    const f = new FakeController();
    f.addNamespace(1, 64);
    await f.listen();
    try {
      const cpus = os.availableParallelism();
      const base = { traddr: '127.0.0.1', trsvcid: f.port, nqn: f.subnqn, match_hw_queues: true, duplicate_connect: true };
      const a = await connect({ ...base, host_iface: V4 });
      expect(a.ioQueueCount).toBe(Math.min(cpus, 4));
      expect(a.queueInfo()[0]?.source.startsWith('10.213.7.1:')).toBe(true);
      await a.disconnect();
      const b = await connect({ ...base, host_iface: V1 });
      expect(b.ioQueueCount).toBe(1);
      await b.disconnect();
      const c = await connect({ ...base, host_iface: V1, nr_io_queues: 3 });
      expect(c.ioQueueCount).toBe(3);
      await c.disconnect();
    } finally {
      await f.close();
    }
  });
});
