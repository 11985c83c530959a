// GatewayGroup against a real etcd (test/fixtures/etcd.ts): membership, spread failover, failback, fencing.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startEtcd, type EtcdServer } from '../../test/fixtures/etcd.js';
import { startProxy, type FaultProxy } from '../../harness/peers/proxy.js';
import type { GroupDescription } from './description.js';
import { GatewayGroup, type GatewayGroupOptions, type OwnershipEvent } from './group.js';
import { until } from '../../harness/until.js';

const desc: GroupDescription = {
  subsystems: [
    {
      nqn: 'nqn.2024-01.io.example:gw',
      namespaces: [1, 2, 3, 4, 5, 6].map((nsid) => ({ nsid, size: '1048576', blockSize: 512, anagrpid: nsid })),
    },
  ],
};

let etcd: EtcdServer;
const open: GatewayGroup[] = [];
let n = 0;

beforeAll(async () => {
  etcd = await startEtcd();
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((g) => g.close()));
});
afterAll(async () => {
  await etcd?.stop();
});

function opts(group: string, id: string, extra: Partial<GatewayGroupOptions> = {}): GatewayGroupOptions {
  return { group, id, etcd: [etcd.url], description: desc, ttlSec: 1, failbackDelayMs: 300, ...extra };
}
async function join(o: GatewayGroupOptions): Promise<GatewayGroup & { events: OwnershipEvent[] }> {
  const g = (await GatewayGroup.join(o)) as GatewayGroup & { events: OwnershipEvent[] };
  g.events = [];
  g.on('ownership', (e: OwnershipEvent) => g.events.push(e));
  open.push(g);
  return g;
}
const owners = (g: GatewayGroup) => g.snapshot?.groups.map((x) => x.owner);

describe('GatewayGroup (real etcd)', () => {
  it('three gateways own their preferred groups; a dead one spreads; failback after the delay', async () => {
    const name = `g${++n}`;
    const a = await join(opts(name, 'a', { preferred: [1, 2] }));
    const b = await join(opts(name, 'b', { preferred: [3, 4] }));
    const c = await join(opts(name, 'c', { preferred: [5, 6] }));
    await until(() => a.owned().length === 2 && b.owned().length === 2 && c.owned().length === 2);
    expect(a.owned()).toEqual([1, 2]);
    expect(new Set([a.cntlidRange[0], b.cntlidRange[0], c.cntlidRange[0]]).size).toBe(3);
    // a crashes (its lease expires in etcd): its groups spread, one to b and one to c.
    a.abandon();
    open.splice(open.indexOf(a), 1);
    await until(() => b.owned().length === 3 && c.owned().length === 3);
    expect(owners(b)?.slice(0, 2).sort()).toEqual(['b', 'c']);
    // a returns: its groups come back after the failback delay, through a handoff (ANA change on the releaser).
    const t0 = Date.now();
    const a2 = await join(opts(name, 'a', { preferred: [1, 2] }));
    await until(() => a2.owned().length === 2 && b.owned().length === 2 && c.owned().length === 2);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
    expect([...b.events, ...c.events].some((e) => Object.values(e.states).includes('change'))).toBe(true);
    expect(a2.snapshot?.transitions.some((t) => t.cause === 'failback')).toBe(true);
  });

  it('refuses a duplicate id and a mismatched description, naming the difference', async () => {
    const name = `g${++n}`;
    await join(opts(name, 'a'));
    await expect(GatewayGroup.join(opts(name, 'a'))).rejects.toMatchObject({ code: 'NVMEOF_ERR_GATEWAY_DUPLICATE' });
    const other = structuredClone(desc);
    other.subsystems[0]!.namespaces[0]!.blockSize = 4096;
    await expect(GatewayGroup.join(opts(name, 'b', { description: other }))).rejects.toThrow(
      "gateway group 'g2': subsystem nqn.2024-01.io.example:gw namespace 1: block size 4096 here, 512 in the group's record",
    );
  });

  /** Gateway a reaches etcd through a fault proxy, b directly; each owns its three preferred groups when `body` runs. */
  async function withProxiedPair(body: (proxy: FaultProxy, a: Awaited<ReturnType<typeof join>>, b: Awaited<ReturnType<typeof join>>) => Promise<void>): Promise<void> {
    const name = `g${++n}`;
    const proxy: FaultProxy = await startProxy({ upstreamHost: '127.0.0.1', upstreamPort: etcd.clientPort });
    try {
      const a = await join(opts(name, 'a', { preferred: [1, 2, 3], etcd: [`http://127.0.0.1:${proxy.port}`] }));
      const b = await join(opts(name, 'b', { preferred: [4, 5, 6] }));
      await until(() => a.owned().length === 3 && b.owned().length === 3);
      await body(proxy, a, b);
    } finally {
      await Promise.all(open.splice(0).map((g) => g.close()));
      await proxy.close();
    }
  }

  it('fencing: a gateway cut off from etcd owns nothing before the others take over, then rejoins', async () => {
    await withProxiedPair(async (proxy, a, b) => {
      proxy.pause();
      await until(() => b.owned().length === 6);
      const fencedAt = a.events.find((e) => e.fenced)?.at;
      const takeoverAt = b.events.find((e) => e.owned.length === 6)?.at;
      expect(fencedAt).toBeDefined();
      expect(fencedAt!).toBeLessThan(takeoverAt!);
      expect(a.owned()).toEqual([]);
      proxy.resume();
      await until(() => !a.isFenced && a.owned().length === 3 && b.owned().length === 3, 15_000, 'a back with its groups');
    });
  });

  it('a partition that leaves its connections open but dead: fenced, then rejoins on new ones and follows the group', async () => {
    // What `podman network disconnect` does to a gateway: its TCP connections to etcd neither carry bytes nor reset,
    // while new ones work once the network is back. A rejoin on the old gRPC channel (and a watch on it) never returns.
    await withProxiedPair(async (proxy, a, b) => {
      const seen = a.events.length;
      for (const c of proxy.connections()) proxy.pause(c.id);
      // Its keep-alives go nowhere: it fences within its TTL (new connections flow, so it may rejoin at once).
      await until(() => a.events.slice(seen).some((e) => e.fenced), 15_000, 'a to fence');
      // Back in the group on new connections (its preferred groups return after failbackDelayMs), and its watch
      // follows a change made after the rejoin.
      await until(() => !a.isFenced && a.owned().length === 3 && b.owned().length === 3, 15_000, 'a rejoined on new connections');
      await b.failover(4, 'a');
      await until(() => a.owned().length === 4 && b.owned().length === 2, 15_000, 'a saw the change made after its rejoin');
    });
  });

  it('fencing: a process stalled past its TTL owns nothing the moment it runs again, then rejoins', async () => {
    const a = await join(opts(`g${++n}`, 'a', { preferred: [1, 2, 3, 4, 5, 6] }));
    await until(() => a.owned().length === 6);
    expect(a.ownsNow(1)).toBe(true);
    // Block the whole process (as SIGSTOP would) longer than the 1 s lease: no timer can run meanwhile.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1100);
    expect(a.ownsNow(1)).toBe(false);
    expect(a.owned()).toEqual([]);
    await until(() => !a.isFenced && a.owned().length === 6);
  });

  it('concurrent joins never lose an update (txn on the record revision)', async () => {
    const name = `g${++n}`;
    const gws = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((id) => join(opts(name, id))));
    await until(() => Object.keys(gws[0]!.snapshot?.members ?? {}).length === 5);
    const rec = gws[0]!.snapshot!;
    expect(Object.keys(rec.members).sort()).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(new Set(Object.values(rec.cntlidSlots)).size).toBe(5);
    expect(rec.groups.every((g) => g.owner !== null)).toBe(true);
  });

  it('operator moves: failover to a non-member moves nothing; failover --to, failback, drain and undrain', async () => {
    const name = `g${++n}`;
    const a = await join(opts(name, 'a', { preferred: [1, 2, 3] }));
    const b = await join(opts(name, 'b', { preferred: [4, 5, 6] }));
    await until(() => a.owned().length === 3 && b.owned().length === 3);
    const before = a.snapshot!.counter;
    await expect(a.failover(1, 'zz')).rejects.toMatchObject({ code: 'NVMEOF_ERR_GATEWAY_OPERATION', message: expect.stringContaining("'zz' is not a serving member") });
    await expect(a.failover(99)).rejects.toMatchObject({ code: 'NVMEOF_ERR_GATEWAY_OPERATION' });
    expect(a.snapshot!.counter).toBe(before);
    expect(owners(a)).toEqual(['a', 'a', 'a', 'b', 'b', 'b']);
    // Asked on b, carried out by a (the owner releases through a handoff).
    await b.failover(1, 'b');
    await until(() => b.owned().includes(1) && !a.owned().includes(1));
    expect(b.snapshot!.transitions.at(-1)).toMatchObject({ grpid: 1, from: 'a', to: 'b', cause: 'manual' });
    await a.failback(1);
    await until(() => a.owned().includes(1) && !b.owned().includes(1));
    await b.setDraining(true);
    await until(() => a.owned().length === 6 && b.owned().length === 0);
    expect(a.snapshot!.transitions.filter((t) => t.cause === 'drain')).toHaveLength(3);
    await b.setDraining(false);
    await until(() => a.owned().length === 3 && b.owned().length === 3);
  });
});
