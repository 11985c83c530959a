// Management API end to end over real HTTP on 127.0.0.1:0 against a real TargetService and our initiator:
// runtime namespace add/remove with the NS-changed AEN, ANA changes with the ANA AEN and log, body validation,
// auth, GET /config round trip and write-back.
import { Buffer } from 'node:buffer';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { connect, type AsyncEvent, type Controller } from '../../initiator/index.js';
import { parseTargetConfig } from '../../target/config/schema.js';
import { TargetService, type ControllerInfo, type TargetConfig } from '../../target/index.js';
import { ApiConfigError, startApi, type ApiHandle } from '../../target/mgmt/index.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const NQN = 'nqn.2024-01.io.test:mgmt-api';
const HOSTNQN = 'nqn.2024-01.io.test:host-a';
const cleanups = cleanupAfterEach();

async function setup(opts: { token?: string; configPath?: string; writeBack?: boolean } = {}): Promise<{ t: TargetService; api: ApiHandle; port: number }> {
  const t = new TargetService();
  cleanups.push(() => t.stop());
  const bound = await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 });
  await t.addSubsystem({ nqn: NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] });
  const api = await startApi(t, { listen: '127.0.0.1:0', ...opts });
  cleanups.push(() => api.close());
  return { t, api, port: bound.port };
}

async function call(api: ApiHandle, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: unknown; text: string }> {
  const res = await fetch(`${api.url}${path}`, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

async function host(port: number): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, hostnqn: HOSTNQN, nr_io_queues: 1, keep_alive_tmo: 5 });
  cleanups.push(() => c.disconnect());
  return c;
}

function waitFor<T>(what: string, register: (resolve: (v: T) => void) => void, ms = 5000): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
    register((v) => {
      clearTimeout(timer);
      resolve(v);
    });
  });
}

const seg = encodeURIComponent;

describe('management API: runtime changes reach connected hosts', () => {
  it('adds a namespace while a host is connected: the host gets the NS-changed AEN and sees and uses the namespace', async () => {
    const { api, port } = await setup();
    const c = await host(port);
    expect(c.namespaces.map((n) => n.nsid)).toEqual([1]);
    const aens: AsyncEvent[] = [];
    c.on('aen', (e) => aens.push(e));
    const changed = waitFor<number[]>('namespacesChanged', (r) => c.once('namespacesChanged', r));

    const res = await call(api, 'POST', `/subsystems/${seg(NQN)}/namespaces`, { nsid: 2, backend: { type: 'ram', size: '2M' }, blockSize: 4096 });
    expect(res.status).toBe(201);
    expect(res.json).toMatchObject({ nsid: 2, blockSize: 4096 });

    expect(await changed).toEqual([2]);
    // Notice type 2, info 0 = Namespace Attribute Changed, log page 0x04 (NVMe Base 2.0 Figure 150).
    expect(aens.some((e) => e.type === 2 && e.info === 0 && e.lid === 0x04)).toBe(true);
    expect(c.namespaces.map((n) => n.nsid)).toEqual([1, 2]);
    const ns2 = c.namespace(2);
    expect(ns2.info.blockSize).toBe(4096);
    expect(ns2.info.blocks).toBe(512n);
    const data = Buffer.alloc(8192, 0x5a);
    await ns2.write(3, data);
    expect((await ns2.read(3, 2)).equals(data)).toBe(true);

    const listed = await call(api, 'GET', `/subsystems/${seg(NQN)}/namespaces`);
    expect((listed.json as Array<{ nsid: number }>).map((n) => n.nsid)).toEqual([1, 2]);

    const gone = waitFor<number[]>('namespacesChanged after remove', (r) => c.once('namespacesChanged', r));
    expect((await call(api, 'DELETE', `/subsystems/${seg(NQN)}/namespaces/2`)).status).toBe(204);
    expect(await gone).toEqual([2]);
    expect(c.namespaces.map((n) => n.nsid)).toEqual([1]);
    expect((await call(api, 'DELETE', `/subsystems/${seg(NQN)}/namespaces/2`)).status).toBe(404);
  });

  it('changes an ANA state: the host gets the ANA AEN and reads the new state from the ANA log', async () => {
    const { api, port } = await setup();
    const c = await host(port);
    expect(c.anaStates.get(1)).toBe('optimized');
    const aen = waitFor<AsyncEvent>('ANA AEN', (r) => c.on('aen', (e) => e.info === 0x03 && r(e)));
    const change = waitFor<ReadonlyMap<number, string>>('anaChange', (r) => c.once('anaChange', r));

    const res = await call(api, 'PUT', '/ports/1/ana/1', { state: 'inaccessible' });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ portId: 1, anaGroup: 1, state: 'inaccessible' });

    // Notice type 2, info 3 = ANA Change, log page 0x0C.
    expect(await aen).toMatchObject({ type: 2, info: 0x03, lid: 0x0c });
    expect((await change).get(1)).toBe('inaccessible');
    expect(c.namespace(1).anaState).toBe('inaccessible');
    const ports = (await call(api, 'GET', '/ports')).json as Array<{ id: number; anaStates?: Record<string, string>; bound: { port: number } }>;
    expect(ports[0]?.anaStates).toEqual({ '1': 'inaccessible' });
    expect(ports[0]?.bound.port).toBe(port);

    const back = waitFor<ReadonlyMap<number, string>>('anaChange back', (r) => c.once('anaChange', r));
    expect((await call(api, 'PUT', '/ports/1/ana/1', { state: 'optimized' })).status).toBe(200);
    expect((await back).get(1)).toBe('optimized');
  });

  it('lists controllers with per-queue counters, KATO, host NQN and peer address', async () => {
    const { api, port } = await setup();
    const c = await host(port);
    await c.namespace(1).write(0, Buffer.alloc(4096, 1));
    const list = (await call(api, 'GET', '/controllers')).json as ControllerInfo[];
    const mine = list.filter((x) => x.subnqn === NQN);
    expect(mine).toHaveLength(1);
    const ctrl = mine[0] as ControllerInfo;
    expect(ctrl.cntlid).toBe(c.cntlid);
    expect(ctrl.hostnqn).toBe(HOSTNQN);
    expect(ctrl.kato).toBe(5000);
    expect(ctrl.queues.map((q) => q.qid)).toEqual([0, 1]);
    const io = ctrl.queues[1];
    expect(io?.peer).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(io?.commands).toBeGreaterThanOrEqual(1);
    expect(io?.bytesIn).toBeGreaterThanOrEqual(4096);
  });
});

describe('management API: validation and errors', () => {
  it('answers a bad body with 400 naming the field path, and never applies it', async () => {
    const { api, t } = await setup();
    const badSize = await call(api, 'POST', `/subsystems/${seg(NQN)}/namespaces`, { nsid: 3, backend: { type: 'ram', size: 'huge' } });
    expect(badSize.status).toBe(400);
    expect(badSize.json).toMatchObject({ path: 'backend.size' });
    expect((badSize.json as { error: string }).error).toMatch(/backend\.size/);

    const badZones = await call(api, 'POST', `/subsystems/${seg(NQN)}/namespaces`, { nsid: 3, backend: { type: 'ram', size: '3M' }, zoned: { zoneSize: '2M' } });
    expect(badZones).toMatchObject({ status: 400, json: { path: 'zoned.zoneSize' } });
    expect((badZones.json as { error: string }).error).toMatch(/not a whole number of 2097152-byte zones/);
    expect((await call(api, 'POST', `/subsystems/${seg(NQN)}/namespaces`, { nsid: 3, backend: { type: 'ram', size: '4M' }, zoned: { zoneSize: '2M' } })).status).toBe(201);
    expect(t.zones(NQN, 3)?.map((z) => z.state)).toEqual(['empty', 'empty']);
    const zonesPath = `/subsystems/${seg(NQN)}/namespaces/3/zones`;
    expect(await call(api, 'GET', zonesPath)).toMatchObject({ status: 200, json: [{ zslba: 0, zcap: 4096, wp: 0, state: 'empty' }, { zslba: 4096, state: 'empty' }] });
    expect(await call(api, 'PUT', `${zonesPath}/1`, { condition: 'read-only' })).toMatchObject({ status: 200, json: { zslba: 4096, state: 'read-only' } });
    expect(await call(api, 'PUT', `${zonesPath}/1`, { condition: 'broken' })).toMatchObject({ status: 400, json: { path: 'condition' } });
    const past = await call(api, 'PUT', `${zonesPath}/2`, { condition: 'offline' });
    expect(past.status).toBe(400);
    expect((past.json as { error: string }).error).toMatch(/zone: 2 is not a zone of namespace 3; use 0\.\.1/);
    expect((await call(api, 'GET', `/subsystems/${seg(NQN)}/namespaces/1/zones`)).status).toBe(404);
    await call(api, 'DELETE', `/subsystems/${seg(NQN)}/namespaces/3`);

    const typo = await call(api, 'POST', '/ports', { id: 2, addr: '127.0.0.1', port: 0, inlineDataSzie: 4096 });
    expect(typo.status).toBe(400);
    expect((typo.json as { error: string }).error).toMatch(/did you mean "inlineDataSize"/);

    // nvmet's limit, not NQN syntax: names that are not NQNs are accepted (issue 17), over 223 bytes are not.
    const badNqn = await call(api, 'POST', '/subsystems', { nqn: 'n'.repeat(224) });
    expect(badNqn).toMatchObject({ status: 400, json: { path: 'nqn' } });

    const badAna = await call(api, 'PUT', '/ports/1/ana/1', { state: 'sideways' });
    expect(badAna).toMatchObject({ status: 400, json: { path: 'state' } });

    const nested = await call(api, 'POST', '/subsystems', { nqn: 'nqn.2024-01.io.test:x', namespaces: [{ nsid: 1, backend: { type: 'ram', size: 1024 }, blockSize: 4096 }] });
    expect(nested).toMatchObject({ status: 400, json: { path: 'namespaces[0].backend.size' } });

    const notJson = await call(api, 'POST', '/subsystems', '{"nqn": ');
    expect(notJson.status).toBe(400);
    expect((notJson.json as { error: string }).error).toMatch(/not JSON/);

    expect(t.getConfig().subsystems.map((s) => s.nqn)).toEqual([NQN]);
    expect(t.getConfig().ports.map((p) => p.id)).toEqual([1]);
    expect(t.getConfig().subsystems[0]?.namespaces?.map((n) => n.nsid)).toEqual([1]);
  });

  it('maps unknown resources to 404, wrong methods to 405 and conflicts to 409', async () => {
    const { api } = await setup();
    expect((await call(api, 'GET', '/nope')).status).toBe(404);
    expect((await call(api, 'GET', `/subsystems/${seg('nqn.2024-01.io.test:missing')}`)).status).toBe(404);
    expect((await call(api, 'DELETE', '/ports/9')).status).toBe(404);
    expect((await call(api, 'PUT', '/ports/9/ana/1', { state: 'optimized' })).status).toBe(404);
    const m = await call(api, 'PATCH', '/subsystems');
    expect(m.status).toBe(405);
    expect((await call(api, 'POST', '/subsystems', { nqn: NQN })).status).toBe(409);
    expect((await call(api, 'POST', `/subsystems/${seg(NQN)}/namespaces`, { nsid: 1, backend: { type: 'ram', size: '1M' } })).status).toBe(409);
    expect((await call(api, 'POST', '/ports', { id: 1, addr: '127.0.0.1', port: 0 })).status).toBe(409);
    expect((await call(api, 'DELETE', `/subsystems/${seg(NQN)}/hosts/${seg(HOSTNQN)}`)).status).toBe(404);
    const missingFile = await call(api, 'POST', `/subsystems/${seg(NQN)}/namespaces`, { nsid: 5, backend: { type: 'file', path: '/nonexistent/dir/x.img' } });
    expect(missingFile).toMatchObject({ status: 409, json: { error: expect.stringMatching(/does not exist/) } });
    expect((await call(api, 'GET', '/healthz')).json).toMatchObject({ status: 'ok', ports: 1 });
  });

  it('manages ports, hosts, referrals and faults', async () => {
    const { api, t } = await setup();
    const p = await call(api, 'POST', '/ports', { id: 2, addr: '127.0.0.1', port: 0 });
    expect(p.status).toBe(201);
    expect(p.json).toMatchObject({ id: 2, addr: '127.0.0.1' });
    expect(t.boundPorts().map((b) => b.id).sort()).toEqual([1, 2]);

    expect((await call(api, 'POST', `/subsystems/${seg(NQN)}/hosts`, { nqn: HOSTNQN })).status).toBe(201);
    expect((await call(api, 'GET', `/subsystems/${seg(NQN)}/hosts`)).json).toEqual({ allowAnyHost: false, hosts: [HOSTNQN] });
    expect((await call(api, 'POST', `/subsystems/${seg(NQN)}/hosts`, { nqn: HOSTNQN })).status).toBe(409);
    expect((await call(api, 'DELETE', `/subsystems/${seg(NQN)}/hosts/${seg(HOSTNQN)}`)).status).toBe(204);

    expect((await call(api, 'POST', '/ports/1/referrals', { addr: '10.0.0.9', port: 8009 })).status).toBe(201);
    expect((await call(api, 'POST', '/ports/1/referrals', { addr: '10.0.0.10', port: 8009 })).status).toBe(201);
    expect((await call(api, 'GET', '/ports/1/referrals')).json).toEqual([{ addr: '10.0.0.9', port: 8009 }, { addr: '10.0.0.10', port: 8009 }]);
    expect((await call(api, 'DELETE', `/ports/1/referrals/${seg('10.0.0.9')}/8009`)).status).toBe(204);
    expect((await call(api, 'DELETE', '/ports/1/referrals', { addr: '10.0.0.10', port: 8009 })).status).toBe(204);
    expect((await call(api, 'GET', '/ports/1/referrals')).json).toEqual([]);

    const f = await call(api, 'PUT', `/subsystems/${seg(NQN)}/faults`, { commandLatencyUs: 250, failNext: { count: 2, status: 0x4002 } });
    expect(f).toMatchObject({ status: 200, json: { commandLatencyUs: 250, failNext: { count: 2, status: 0x4002 } } });
    expect(t.getConfig().subsystems[0]?.faults).toEqual({ commandLatencyUs: 250, failNext: { count: 2, status: 0x4002 } });

    expect((await call(api, 'DELETE', '/ports/2')).status).toBe(204);
    expect(t.boundPorts().map((b) => b.id)).toEqual([1]);
    expect((await call(api, 'DELETE', `/subsystems/${seg(NQN)}`)).status).toBe(204);
    expect((await call(api, 'GET', '/subsystems')).json).toEqual([]);
  });
});

describe('management API: security', () => {
  it('refuses a non-loopback address without a token', async () => {
    const t = new TargetService();
    cleanups.push(() => t.stop());
    await expect(startApi(t, { listen: '0.0.0.0:0' })).rejects.toBeInstanceOf(ApiConfigError);
    await expect(startApi(t, { listen: '0.0.0.0:0' })).rejects.toThrow(/without a token/);
    await expect(startApi(t, { listen: '[::]:0', token: '' })).rejects.toThrow(/without a token/);
    await expect(startApi(t, { listen: 'localhost:80' })).rejects.toThrow(/not ADDR:PORT/);
  });

  it('with a token, every request but /healthz needs the bearer token', async () => {
    const t = new TargetService();
    cleanups.push(() => t.stop());
    const api = await startApi(t, { listen: '0.0.0.0:0', token: 's3cret' });
    cleanups.push(() => api.close());
    const url = `http://127.0.0.1:${api.port}`;
    expect((await fetch(`${url}/config`)).status).toBe(401);
    expect((await fetch(`${url}/config`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    expect((await fetch(`${url}/metrics`, { headers: { authorization: 'Bearer s3cret' } })).status).toBe(200);
    const ok = await fetch(`${url}/config`, { headers: { authorization: 'Bearer s3cret' } });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ ports: [], subsystems: [] });
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
  });
});

describe('management API: configuration', () => {
  it('GET /config passes the config schema and, loaded into a fresh target, reproduces the same target', async () => {
    const { api } = await setup();
    await call(api, 'POST', '/ports/1/referrals', { addr: '10.0.0.9', port: 8009 });
    await call(api, 'PUT', '/ports/1/ana/2', { state: 'non-optimized' });
    await call(api, 'POST', `/subsystems/${seg(NQN)}/namespaces`, { nsid: 7, backend: { type: 'null', size: '4M' }, anaGroup: 2, readOnly: true });
    await call(api, 'POST', `/subsystems/${seg(NQN)}/hosts`, { nqn: HOSTNQN });
    await call(api, 'PUT', `/subsystems/${seg(NQN)}/faults`, { connectLatencyMs: 5 });
    await call(api, 'POST', '/subsystems', { nqn: 'nqn.2024-01.io.test:second', serial: 'SER2', ports: [1] });
    const cfg = parseTargetConfig((await call(api, 'GET', '/config')).json, 'GET /config');

    const t2 = new TargetService();
    cleanups.push(() => t2.stop());
    await t2.apply(cfg);
    expect(t2.getConfig()).toEqual(cfg);
    expect(cfg.subsystems.find((s) => s.nqn === NQN)?.namespaces?.find((n) => n.nsid === 7)).toMatchObject({ anaGroup: 2, readOnly: true });
  });

  it('writes every change back to the config file, keeping its api section', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mgmt-wb-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const path = join(dir, 'target.json');
    const initial: TargetConfig = { ports: [], subsystems: [], api: { listen: '127.0.0.1:0' } };
    await writeFile(path, JSON.stringify(initial));
    const { api, t } = await setup({ configPath: path, writeBack: true });
    await call(api, 'POST', `/subsystems/${seg(NQN)}/namespaces`, { nsid: 4, backend: { type: 'ram', size: '1M' } });
    const saved = parseTargetConfig(JSON.parse(await readFile(path, 'utf8')));
    expect(saved).toEqual({ ...t.getConfig(), api: { listen: '127.0.0.1:0' } });
    expect(saved.subsystems[0]?.namespaces?.map((n) => n.nsid)).toEqual([1, 4]);
    // A refused change leaves the file alone.
    const before = await readFile(path, 'utf8');
    expect((await call(api, 'POST', '/subsystems', { nqn: '' })).status).toBe(400);
    expect(await readFile(path, 'utf8')).toBe(before);
  });
});
