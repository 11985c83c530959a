// TargetService as a gateway (real etcd, real API, real ctl): ports start with the group's ANA states, controller-ID
// ranges are disjoint, GET /group and the ctl commands move groups, a failover to a non-member moves nothing, the
// metrics count transitions, a second gateway with the same id is refused, a joiner whose description differs (serial,
// host keys) is refused with one line naming the difference, and etcd unreachable is one line, exit 2.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCtlCli } from '../../cli/ctl.js';
import { connect } from '../../initiator/index.js';
import { generateDhchapKey } from '../../protocol/auth/index.js';
import { runTargetCli } from '../../cli/target.js';
import { startEtcd, type EtcdServer } from '../fixtures/etcd.js';
import type { TargetConfig } from '../../target/model/config.js';
import type { BoundPort } from '../../target/index.js';
import { startTargetApi, type ApiHandle } from '../../target/mgmt/index.js';
import { TargetService } from '../../target/service/index.js';
import { until } from '../../harness/until.js';

const NQN = 'nqn.2024-01.io.example:gwsvc';
const HOST = 'nqn.2014-08.org.nvmexpress:uuid:gw-ptpl-';
const DHCHAP = generateDhchapKey({ hmac: 1, hostnqn: 'nqn.2014-08.org.nvmexpress:uuid:h1' }).format();
let etcd: EtcdServer;
const services: TargetService[] = [];
const apis: ApiHandle[] = [];

beforeAll(async () => {
  etcd = await startEtcd();
});
afterAll(async () => {
  for (const a of apis) await a.close();
  for (const s of services) await s.stop();
  await etcd?.stop();
});

function config(id: string): TargetConfig {
  return {
    ports: [{ id: 1, addr: '127.0.0.1', port: 0 }],
    subsystems: [{ nqn: NQN, allowAnyHost: true, namespaces: [1, 2].map((nsid) => ({ nsid, anaGroup: nsid, backend: { type: 'ram' as const, size: '1M' } })) }],
    gateway: { group: 'svc', etcd: [etcd.url], id, leaseTtlMs: 1000, failbackDelayMs: 200 },
  };
}

async function gateway(id: string): Promise<{ svc: TargetService; api: ApiHandle }> {
  const svc = new TargetService();
  services.push(svc);
  await svc.apply(config(id));
  const api = (await startTargetApi(svc, { listen: '127.0.0.1:0' })) as ApiHandle;
  apis.push(api);
  return { svc, api };
}

async function ctl(api: ApiHandle, ...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCtlCli(['--api', api.url, ...args], { stdout: (s) => (out += s), stderr: (s) => (err += s), env: {} });
  return { code, out, err };
}

const anaOf = (svc: TargetService) => svc.getConfig().ports[0]?.anaStates;

describe('TargetService in a gateway group (real etcd)', () => {
  it('ANA states, cntlid ranges, GET /group, ctl moves, metrics, duplicate id', async () => {
    const a = await gateway('a');
    const b = await gateway('b');
    // Each claims one ANA group as preferred; ports report it optimized and the other inaccessible.
    await until(() => anaOf(a.svc)?.['1'] === 'optimized' && anaOf(b.svc)?.['2'] === 'optimized');
    expect(anaOf(a.svc)).toEqual({ '1': 'optimized', '2': 'inaccessible' });
    expect(anaOf(b.svc)).toEqual({ '1': 'inaccessible', '2': 'optimized' });
    // (getConfig omits a cntlidMin equal to the default 1.)
    const [sa, sb] = [a.svc.getConfig().subsystems[0], b.svc.getConfig().subsystems[0]];
    expect([sa?.cntlidMin ?? 1, sa?.cntlidMax, sb?.cntlidMin, sb?.cntlidMax]).toEqual([1, 1000, 1001, 2000]);

    const status = await ctl(a.api, '-o', 'json', 'group', 'status');
    expect(status.code, status.err).toBe(0);
    const view = JSON.parse(status.out) as { members: { id: string; ttlLeftS: number }[]; anaGroups: { grpid: number; owner: string }[] };
    expect(view.members.map((m) => m.id).sort()).toEqual(['a', 'b']);
    expect(view.members.every((m) => m.ttlLeftS >= 0)).toBe(true);
    expect(view.anaGroups.map((g) => [g.grpid, g.owner])).toEqual([
      [1, 'a'],
      [2, 'b'],
    ]);

    // Failover to a non-member: an error, nothing moves.
    const bad = await ctl(a.api, 'group', 'failover', '1', '--to', 'zz');
    expect(bad.code).toBe(1);
    expect(bad.err).toContain("'zz' is not a serving member");
    expect(anaOf(a.svc)?.['1']).toBe('optimized');

    const moved = await ctl(a.api, 'group', 'failover', '1', '--to', 'b');
    expect(moved.code, moved.err).toBe(0);
    await until(() => anaOf(b.svc)?.['1'] === 'optimized');
    expect(anaOf(a.svc)?.['1']).toBe('inaccessible');
    expect((await ctl(a.api, 'group', 'failback', '1')).code).toBe(0);
    await until(() => anaOf(a.svc)?.['1'] === 'optimized' && anaOf(b.svc)?.['1'] === 'inaccessible');

    // Drain b: both groups on a; enable: group 2 fails back.
    expect((await ctl(b.api, 'gateway', 'disable')).code).toBe(0);
    await until(() => anaOf(a.svc)?.['2'] === 'optimized' && anaOf(b.svc)?.['2'] === 'inaccessible');
    expect((await ctl(b.api, 'gateway', 'enable')).code).toBe(0);
    await until(() => anaOf(b.svc)?.['2'] === 'optimized' && anaOf(a.svc)?.['2'] === 'inaccessible');

    const metrics = (await ctl(a.api, 'metrics')).out;
    expect(metrics).toMatch(/nvme_tcp_gateway_transitions_total\{cause="manual"\} 1/);
    expect(metrics).toMatch(/nvme_tcp_gateway_transitions_total\{cause="drain"\} 1/);
    expect(metrics).toMatch(/nvme_tcp_gateway_owned_groups 1/);

    // A second gateway 'a' while the first lives: refused (after one TTL).
    const dup = new TargetService();
    await expect(dup.apply(config('a'))).rejects.toMatchObject({ code: 'NVMEOF_ERR_GATEWAY_DUPLICATE' });
    await dup.stop();
  }, 30_000);

  it('a joiner whose serial or host keys differ from the group record: one line naming it, exit 2', async () => {
    const first = new TargetService();
    services.push(first);
    await first.apply({ ...config('d1'), gateway: { ...config('d1').gateway!, group: 'desc' } });
    const dir = mkdtempSync(path.join(os.tmpdir(), 'gw-desc-'));
    const file = path.join(dir, 'gw.json');
    const start = async (change: (c: TargetConfig) => void): Promise<{ code: number; err: string }> => {
      const c: TargetConfig = { ...config('d2'), gateway: { ...config('d2').gateway!, group: 'desc' } };
      change(c);
      writeFileSync(file, JSON.stringify(c));
      let err = '';
      const code = await runTargetCli(['--config', file, '--log-level', 'silent'], { stderr: (s) => (err += s), stdout: () => undefined, processHandlers: false });
      return { code, err };
    };
    try {
      const serial = await start((c) => (c.subsystems[0]!.serial = 'OTHER'));
      expect(serial.code).toBe(2);
      expect(serial.err).toMatch(new RegExp(`^nvme-tcp target: --gateway-group: gateway group 'desc': subsystem ${NQN}: serial OTHER here, [0-9a-f]{20} in the group's record\n$`));
      const keys = await start((c) => (c.hosts = [{ nqn: 'nqn.2014-08.org.nvmexpress:uuid:h1', dhchapKey: DHCHAP }]));
      expect(keys.code).toBe(2);
      expect(keys.err).toBe("nvme-tcp target: --gateway-group: gateway group 'desc': host key configuration (DH-HMAC-CHAP/TLS) differs from the group's record (digest mismatch)\n");
      expect(keys.err).not.toContain('DHHC-1');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);

  it('gateways sharing one --config keep the group PTPL reservations in distinct files (FILE.ID.reservations.json)', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'gw-ptpl-'));
    const file = path.join(dir, 'gw.json');
    const c = config('x');
    writeFileSync(file, JSON.stringify({ ...c, gateway: { group: 'ptpl', etcd: c.gateway!.etcd, notOwned: 'non-optimized', leaseTtlMs: 1000 } }));
    const stops: AbortController[] = [];
    const runs: Promise<number>[] = [];
    const start = (id: string): Promise<number> =>
      new Promise((resolve, reject) => {
        const ac = new AbortController();
        stops.push(ac);
        const io = { stderr: () => undefined, stdout: () => undefined, processHandlers: false, signal: ac.signal, onReady: (b: BoundPort[]) => resolve(b[0]!.port) };
        runs.push(runTargetCli(['--config', file, '--gateway-id', id, '--log-level', 'silent'], io).then((code) => (reject(new Error(`exit ${code}`)), code)));
      });
    try {
      const [pa, pb] = [await start('a'), await start('b')];
      const host = (port: number, who: { hostnqn: string; hostid: string }) =>
        connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, ...who, nr_io_queues: 1, duplicate_connect: true, ctrl_loss_tmo: 0 });
      const ha = await host(pa, { hostnqn: `${HOST}1`, hostid: '11111111-1111-4000-8000-000000000001' });
      const hb = await host(pb, { hostnqn: `${HOST}2`, hostid: '22222222-2222-4000-8000-000000000002' });
      await ha.namespace(1).reservation.register({ nrkey: 0x11n, cptpl: 3 });
      await hb.namespace(1).reservation.register({ nrkey: 0x22n, cptpl: 3 });
      await Promise.all([ha.disconnect(), hb.disconnect()]);
      const ptplFile = (id: string) => path.join(dir, `gw.${id}.reservations.json`);
      const rkeys = (id: string) => (existsSync(ptplFile(id)) ? [...readFileSync(ptplFile(id), 'utf8').matchAll(/"rkey":\s*"(\d+)"/g)].map((m) => m[1]).sort() : []);
      // Reservations are the group's (etcd, docs/gateway-groups.md): each gateway's own file holds both registrations
      // (0x11 = 17 through a, 0x22 = 34 through b; the other one arrives by the watch), and the shared
      // FILE.reservations.json is not used.
      await until(() => rkeys('a').length === 2 && rkeys('b').length === 2);
      expect(rkeys('a')).toEqual(['17', '34']);
      expect(rkeys('b')).toEqual(['17', '34']);
      expect(existsSync(path.join(dir, 'gw.reservations.json'))).toBe(false);
    } finally {
      for (const ac of stops) ac.abort();
      await Promise.allSettled(runs);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);

  it('etcd unreachable at start: one line naming the URL, exit 2', async () => {
    let err = '';
    const code = await runTargetCli(['--listen', '127.0.0.1:0', '--ram', '1M', '--gateway-group', 'x', '--etcd', 'http://127.0.0.1:9', '--log-level', 'silent'], {
      stderr: (s) => (err += s),
      stdout: () => undefined,
      processHandlers: false,
    });
    expect(code).toBe(2);
    expect(err).toBe('nvme-tcp target: --etcd: etcd unreachable at http://127.0.0.1:9; start etcd there or give its client URL\n');
  }, 20_000);
});
