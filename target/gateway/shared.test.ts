// Reservations and host masks shared through etcd (target/gateway/shared.ts) against a real etcd: two gateways of one
// group in this process, each applying what the group decides to its own Subsystem, as GatewayPart does.
import { Buffer } from 'node:buffer';
import { Etcd3 } from 'etcd3';
import { startProxy } from '../../harness/peers/proxy.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { NvmOpcode, ResvNotifType, ResvType, Status } from '../../protocol/index.js';
import { RESV_CONFLICT, type ReservationState } from '../core/reservation.js';
import { Subsystem } from '../core/subsystem.js';
import { startEtcd, type EtcdServer } from '../../test/fixtures/etcd.js';
import { until } from '../../harness/until.js';
import type { GroupDescription } from './description.js';
import { GatewayFencedError } from './errors.js';
import { GatewayGroup } from './group.js';
import { GroupSharedState, resvKey } from './shared.js';

const NQN = 'nqn.2024-01.io.example:shared';
const desc: GroupDescription = { subsystems: [{ nqn: NQN, namespaces: [{ nsid: 1, size: '1048576', blockSize: 512, anagrpid: 1, hosts: null }] }] };
const hostid = (n: number): Buffer => Buffer.from(n.toString(16).padStart(32, '0'), 'hex');
const key = (n: number): string => hostid(n).toString('hex');
const A = 0xa1;
const B = 0xb2;

interface Gw {
  group: GatewayGroup;
  shared: GroupSharedState;
  sub: Subsystem;
  notices: Array<[string, number]>;
  masks: Array<string[] | null>;
  rs: () => ReservationState;
}

let etcd: EtcdServer;
let n = 0;
const open: Gw[] = [];

beforeAll(async () => {
  etcd = await startEtcd();
});
afterEach(async () => {
  for (const g of open.splice(0)) {
    g.shared.stop();
    await g.group.close();
  }
});
afterAll(async () => {
  await etcd?.stop();
});

async function gateway(group: string, id: string, seed: Parameters<GroupSharedState['start']>[0] = [], etcdUrl = etcd.url): Promise<Gw> {
  const g = await GatewayGroup.join({ group, id, etcd: [etcdUrl], description: desc, ttlSec: 2, failbackDelayMs: 300 });
  const sub = new Subsystem({ nqn: NQN, namespaces: [] });
  const gw: Gw = { group: g, sub, notices: [], masks: [], rs: () => sub.reservation(1), shared: undefined as unknown as GroupSharedState };
  gw.shared = new GroupSharedState(g, {
    resv: (_nqn, nsid, v, notify) => {
      sub.reservation(nsid).applyReplica(v.replica);
      if (notify) gw.notices.push(...v.notices.map(([host, type]): [string, number] => [host, type]));
    },
    mask: (_nqn, _nsid, hosts) => gw.masks.push(hosts),
  });
  await gw.shared.start(seed);
  open.push(gw);
  return gw;
}

const register = (gw: Gw, host: number, rkey: bigint): Promise<number> =>
  gw.shared.resvCommand(NQN, 1, (rs) => rs.register(key(host), hostid(host), { rrega: 0, iekey: false, cptpl: 0, crkey: 0n, nrkey: rkey }));
const acquire = (gw: Gw, host: number, crkey: bigint, rtype: number, racqa = 0, prkey = 0n): Promise<number> =>
  gw.shared.resvCommand(NQN, 1, (rs) => rs.acquire(key(host), { racqa, iekey: false, rtype, crkey, prkey }));

async function etcdValue(group: string, k: string): Promise<{ value: string | null; modRev: string }> {
  const c = new Etcd3({ hosts: [etcd.url] });
  try {
    const kv = (await c.get(`/nvme-tcp/gateway-groups/${group}/${k}`).exec()).kvs[0];
    return { value: kv?.value.toString() ?? null, modRev: kv?.mod_revision ?? '0' };
  } finally {
    c.close();
  }
}

describe('reservations shared through etcd (real etcd)', () => {
  it('a register + reserve through one gateway holds on the other; a conflicting acquire is refused on both alike', async () => {
    const name = `s${++n}`;
    const a = await gateway(name, 'a');
    const b = await gateway(name, 'b');
    expect(await register(a, A, 0xaan)).toBe(0);
    expect(await acquire(a, A, 0xaan, ResvType.WRITE_EXCLUSIVE)).toBe(0);
    // The writer answers only once applied here; the other gateway gets it from its watch.
    expect(a.rs().rtype).toBe(ResvType.WRITE_EXCLUSIVE);
    await until(() => b.rs().rtype === ResvType.WRITE_EXCLUSIVE);
    expect(b.rs().holder).toBe(key(A));
    expect(b.rs().checkAccess(key(B), NvmOpcode.WRITE)).toBe(RESV_CONFLICT);
    expect(b.rs().checkAccess(key(A), NvmOpcode.WRITE)).toBe(0);

    expect(await register(b, B, 0xbbn)).toBe(0);
    await until(() => a.rs().registrants.has(key(B)));
    // B acquiring A's reservation conflicts whichever gateway decides, and a refusal writes nothing.
    const before = await etcdValue(name, resvKey(NQN, 1));
    expect(await acquire(b, B, 0xbbn, ResvType.WRITE_EXCLUSIVE)).toBe(RESV_CONFLICT);
    expect(await acquire(a, B, 0xbbn, ResvType.WRITE_EXCLUSIVE)).toBe(RESV_CONFLICT);
    expect(await etcdValue(name, resvKey(NQN, 1))).toEqual(before);

    // B preempts A through gateway b: gateway a raises A's Registration Preempted notice for its controllers.
    expect(await acquire(b, B, 0xbbn, ResvType.WRITE_EXCLUSIVE, 1, 0xaan)).toBe(0);
    await until(() => a.rs().holder === key(B));
    expect(a.rs().registrants.has(key(A))).toBe(false);
    expect(a.notices).toContainEqual([key(A), ResvNotifType.REGISTRATION_PREEMPTED]);
    expect(b.notices).toContainEqual([key(A), ResvNotifType.REGISTRATION_PREEMPTED]);
  });

  it('a gateway cut off from etcd replays, once it catches up, the notices of the changes it missed', async () => {
    const name = `s${++n}`;
    const proxy = await startProxy({ upstreamHost: '127.0.0.1', upstreamPort: etcd.clientPort });
    try {
      const a = await gateway(name, 'a');
      const b = await gateway(name, 'b', [], `http://127.0.0.1:${proxy.port}`);
      expect(await register(a, A, 0xaan)).toBe(0);
      expect(await register(a, B, 0xbbn)).toBe(0);
      await until(() => b.rs().registrants.size === 2);
      // b's connections to etcd cut and new ones held: its watch sees nothing, its lease lapses and it fences; its
      // rejoin (rejoinMs after the fence) replaces the client, and with it the watch, before the traffic flows again.
      proxy.pause();
      for (const c of proxy.connections()) proxy.dropConnection(c.id);
      await until(() => b.group.isFenced, 15_000, 'b to fence');
      // A preempts B (B's Registration Preempted, §8.19.4), then a later change that raises nothing: b, catching up,
      // reads only the latest revision.
      expect(await acquire(a, A, 0xaan, ResvType.WRITE_EXCLUSIVE, 1, 0xbbn)).toBe(0);
      expect(await register(a, 0xc3, 0xccn)).toBe(0);
      await new Promise((r) => setTimeout(r, 1500));
      expect(b.notices).toEqual([]);
      proxy.resume();
      await until(() => b.rs().registrants.has(key(0xc3)), 15_000, 'b to catch up');
      expect(b.rs().registrants.has(key(B))).toBe(false);
      expect(b.notices).toEqual([[key(B), ResvNotifType.REGISTRATION_PREEMPTED]]);
      // a raised it once, when it decided it; replaying is b's alone.
      expect(a.notices).toEqual([[key(B), ResvNotifType.REGISTRATION_PREEMPTED]]);
    } finally {
      await proxy.close();
    }
  });

  it('concurrent registrations through both gateways: none is lost (compare-and-swap retries)', async () => {
    const name = `s${++n}`;
    const a = await gateway(name, 'a');
    const b = await gateway(name, 'b');
    const hosts = Array.from({ length: 16 }, (_, i) => i + 1);
    const st = await Promise.all(hosts.map((h) => register(h % 2 === 0 ? a : b, h, BigInt(h))));
    expect(st).toEqual(hosts.map(() => 0));
    const want = hosts.map(key).sort();
    await until(() => a.rs().registrants.size === 16 && b.rs().registrants.size === 16);
    expect([...a.rs().registrants.keys()].sort()).toEqual(want);
    expect([...b.rs().registrants.keys()].sort()).toEqual(want);
    const stored = JSON.parse((await etcdValue(name, resvKey(NQN, 1))).value as string) as { replica: { registrants: { hostid: string }[]; gen: number } };
    expect(stored.replica.registrants.map((r) => r.hostid).sort()).toEqual(want);
    expect(stored.replica.gen).toBe(16);
  });

  it('a fenced gateway changes nothing: ANA Inaccessible, and the key in etcd is untouched', async () => {
    const name = `s${++n}`;
    const a = await gateway(name, 'a');
    const b = await gateway(name, 'b');
    expect(await register(a, A, 0xaan)).toBe(0);
    const before = await etcdValue(name, resvKey(NQN, 1));
    // b's lease is revoked behind its back: its member key is gone before b notices (the transaction's lease compare).
    const lease = (await a.group.leases()).b?.lease as string;
    const c = new Etcd3({ hosts: [etcd.url] });
    await c.leaseClient.leaseRevoke({ ID: lease });
    c.close();
    expect(await register(b, B, 0xbbn)).toBe(Status.ANA_INACCESSIBLE);
    // Once b knows (fenced), it refuses before asking etcd; masks too.
    await until(() => b.group.isFenced);
    expect(await acquire(b, A, 0xaan, ResvType.WRITE_EXCLUSIVE)).toBe(Status.ANA_INACCESSIBLE);
    await expect(b.shared.setMask(NQN, 1, () => ['nqn.2014-08.org.nvmexpress:uuid:x'])).rejects.toBeInstanceOf(GatewayFencedError);
    expect(await etcdValue(name, resvKey(NQN, 1))).toEqual(before);
    expect(b.rs().registrants.has(key(B))).toBe(false);
    expect(a.rs().registrants.has(key(B))).toBe(false);
  });

  it('PTPL state a gateway restored seeds the group only where it has none; the group state replaces it otherwise', async () => {
    const name = `s${++n}`;
    const replica = (host: number) => ({ rtype: 0, holder: null, gen: 1, ptpl: true, registrants: [{ hostid: key(host), rkey: '7' }], abortGen: 0, abortedAt: [] });
    const a = await gateway(name, 'a', [{ nqn: NQN, nsid: 1, replica: replica(A) }]);
    expect([...a.rs().registrants.keys()]).toEqual([key(A)]);
    // b restored another registration from its own file: the group's (a's) wins, on b and in etcd.
    const b = await gateway(name, 'b', [{ nqn: NQN, nsid: 1, replica: replica(B) }]);
    expect([...b.rs().registrants.keys()]).toEqual([key(A)]);
    expect(b.rs().ptpl).toBe(true);
    const stored = JSON.parse((await etcdValue(name, resvKey(NQN, 1))).value as string) as { by: string };
    expect(stored.by).toBe('a');
  });
});

describe('host masks shared through etcd (real etcd)', () => {
  it('a mask changed through one gateway reaches the other, and overrides a joiner\'s configured mask', async () => {
    const name = `s${++n}`;
    const a = await gateway(name, 'a');
    const b = await gateway(name, 'b');
    const h1 = 'nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-000000000001';
    await a.shared.setMask(NQN, 1, (cur) => {
      expect(cur).toBeUndefined();
      return [h1];
    });
    expect(a.masks).toEqual([[h1]]);
    await until(() => b.masks.length === 1);
    expect(b.masks).toEqual([[h1]]);
    // A gateway configured with the old mask (all hosts) joins: the group's runtime mask wins, and it loads it.
    const c = await gateway(name, 'c');
    expect(c.masks).toEqual([[h1]]);
    // Anything else different is still refused.
    const other: GroupDescription = { subsystems: [{ nqn: NQN, namespaces: [{ nsid: 1, size: '2097152', blockSize: 512, anagrpid: 1, hosts: null }] }] };
    await expect(GatewayGroup.join({ group: name, id: 'd', etcd: [etcd.url], description: other, ttlSec: 2 })).rejects.toThrow(/size/);
  });
});
