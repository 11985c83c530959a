// Management parity with nvmet (issue 17), end to end: real TargetService + HTTP API on 127.0.0.1:0, our initiator and
// the raw PDU peer. Names nvmet accepts that are not NQNs, namespace enable/disable and re-mapping while a host is
// connected (the host's namespace list follows through the NS-changed AEN), maxIoQueues changed at runtime (the host
// reconnects and gets the new count, as with nvmet attr_qid_max) and the controller-ID range.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { connect, discover, type Controller } from '../../initiator/index.js';
import { DNR, Status } from '../../protocol/index.js';
import { HOSTNQN, RawPeer, bringUpAdmin, expectOk, readCmd, writeCmd } from './target-dataplane/fixture.js';
import { TargetService } from '../../target/index.js';
import { startApi, type ApiHandle } from '../../target/mgmt/index.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const cleanups = cleanupAfterEach();

async function setup(nqn: string, extra: { cntlidMin?: number; cntlidMax?: number; maxIoQueues?: number } = {}) {
  const warnings: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (l: string) => void warnings.push((JSON.parse(l) as { msg: string }).msg) });
  const t = new TargetService({ logger });
  cleanups.push(() => t.stop());
  const bound = await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 });
  await t.addSubsystem({
    nqn,
    ...extra,
    namespaces: [
      { nsid: 1, backend: { type: 'ram', size: '1M' } },
      { nsid: 2, backend: { type: 'ram', size: '1M' } },
    ],
  });
  const api = await startApi(t, { listen: '127.0.0.1:0' });
  cleanups.push(() => api.close());
  return { t, api, port: bound.port, warnings };
}

async function put(api: ApiHandle, path: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const res = await fetch(`${api.url}${path}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, json: text === '' ? undefined : (JSON.parse(text) as unknown) };
}

async function host(port: number, nqn: string, hostnqn = 'nqn.2024-01.io.test:host-a', more: Record<string, number> = {}): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn, hostnqn, nr_io_queues: 2, keep_alive_tmo: 5, ...more });
  cleanups.push(() => c.disconnect());
  return c;
}

function nextChange(c: Controller, ms = 5000): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out waiting for namespacesChanged')), ms);
    c.once('namespacesChanged', (ids: number[]) => {
      clearTimeout(timer);
      resolve(ids);
    });
  });
}

const seg = encodeURIComponent;

describe('names nvmet accepts', () => {
  it.each(['testnqn', 'blktests-subsystem-1'])('subsystem %s: created with one warning, in the discovery log, connectable, I/O works', async (nqn) => {
    const { port, warnings } = await setup(nqn);
    expect(warnings.filter((w) => w.includes(nqn))).toEqual([`subsystem name "${nqn}" is not a well-formed NQN (does not start with "nqn."; NVMe Base 2.0 §4.5); accepted as nvmet accepts it, but prefer nqn.YYYY-MM.reverse.domain:name`]);
    const log = await discover({ traddr: '127.0.0.1', trsvcid: port });
    expect(log.map((e) => e.subnqn)).toContain(nqn);
    // Our initiator insists on NQN syntax (initiator/options.ts), so the raw peer plays the Linux host, which sends
    // whatever name it is given; its host NQN is not an NQN either.
    const admin = await RawPeer.connect({ port });
    cleanups.push(async () => admin.close());
    const cntlid = await bringUpAdmin(admin, { subnqn: nqn, hostnqn: 'host-without-nqn-prefix' });
    const io = await RawPeer.connect({ port });
    cleanups.push(async () => io.close());
    expect((await io.connect({ subnqn: nqn, hostnqn: 'host-without-nqn-prefix', qid: 1, cntlid })).cqe?.status).toBe(0);
    expectOk(await io.command(writeCmd(1, 0n, 8), { data: Buffer.alloc(4096, 0x3c) }));
    expect((await io.command(readCmd(1, 0n, 8))).data.equals(Buffer.alloc(4096, 0x3c))).toBe(true);
  });

  it('refuses only what nvmet refuses: empty, over 223 bytes, the discovery NQN', async () => {
    const { t } = await setup('testnqn');
    await expect(t.addSubsystem({ nqn: '' })).rejects.toThrow(/empty/);
    await expect(t.addSubsystem({ nqn: 'x'.repeat(224) })).rejects.toThrow(/too long: 224 bytes/);
    await expect(t.addSubsystem({ nqn: 'nqn.2014-08.org.nvmexpress.discovery' })).rejects.toThrow(/discovery NQN/);
  });
});

describe('namespace enable/disable and re-mapping while a host is connected', () => {
  it('disable: the host drops the namespace, I/O to it gets Invalid Namespace; enable: it comes back with the same UUID', async () => {
    const nqn = 'nqn.2024-01.io.test:parity';
    const { api, port } = await setup(nqn);
    const c = await host(port, nqn);
    const uuid = c.namespace(1).info.uuid;
    const data = Buffer.alloc(4096, 0x77);
    await c.namespace(1).write(8, data);

    let changed = nextChange(c);
    const off = await put(api, `/subsystems/${seg(nqn)}/namespaces/1`, { enabled: false });
    expect(off.status).toBe(200);
    expect(off.json).toMatchObject({ nsid: 1, enabled: false });
    expect(await changed).toEqual([1]);
    expect(c.namespaces.map((n) => n.nsid)).toEqual([2]);

    // The raw peer reads the disabled NSID on its own controller: Invalid Namespace with DNR; nsid 2 still reads.
    const admin = await RawPeer.connect({ port });
    cleanups.push(async () => admin.close());
    const cntlid = await bringUpAdmin(admin, { subnqn: nqn });
    const io = await RawPeer.connect({ port });
    cleanups.push(async () => io.close());
    expect((await io.connect({ subnqn: nqn, hostnqn: HOSTNQN, qid: 1, cntlid })).cqe?.status).toBe(0);
    expect((await io.command(readCmd(1, 0n, 1))).cqe?.status).toBe(Status.INVALID_NS | DNR);
    expect((await io.command(readCmd(2, 0n, 1))).cqe?.status).toBe(0);

    changed = nextChange(c);
    expect((await put(api, `/subsystems/${seg(nqn)}/namespaces/1`, { enabled: true })).status).toBe(200);
    expect(await changed).toEqual([1]);
    expect(c.namespaces.map((n) => n.nsid)).toEqual([1, 2]);
    expect(c.namespace(1).info.uuid).toBe(uuid);
    expect((await c.namespace(1).read(8, 8)).equals(data)).toBe(true);
  });

  it('re-map: a new backend and UUID under nsid 1; the host sees the new UUID and the new (empty) data', async () => {
    const nqn = 'nqn.2024-01.io.test:remap';
    const { api, port } = await setup(nqn);
    const c = await host(port, nqn);
    await c.namespace(1).write(0, Buffer.alloc(512, 0xee));
    const changed = nextChange(c);
    const uuid = '0b1e2d3c-4b5a-4697-8887-a9b8c7d6e5f4';
    const res = await put(api, `/subsystems/${seg(nqn)}/namespaces/1`, { backend: { type: 'ram', size: '2M' }, uuid });
    expect(res.status).toBe(200);
    expect(await changed).toEqual([1]);
    expect(c.namespace(1).info.uuid).toBe(uuid);
    expect(c.namespace(1).info.blocks).toBe(4096n);
    expect((await c.namespace(1).read(0, 1)).equals(Buffer.alloc(512))).toBe(true);
  });

  it('rapid disable/re-map/enable cycles while writes run on the other namespace: no write lost, no leak, the final view is right', async () => {
    const nqn = 'nqn.2024-01.io.test:rapid';
    const { t, api, port } = await setup(nqn);
    const c = await host(port, nqn);
    const ns2 = c.namespace(2);
    let stop = false;
    let written = 0;
    const writer = (async () => {
      while (!stop) {
        await ns2.write(written % 2048, Buffer.alloc(512, written & 0xff));
        written++;
      }
    })();
    const path = `/subsystems/${seg(nqn)}/namespaces/1`;
    const uuids: string[] = [];
    const ops = [];
    for (let i = 0; i < 20; i++) {
      const uuid = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
      uuids.push(uuid);
      ops.push(put(api, path, { enabled: false }), put(api, path, { uuid, backend: { type: 'ram', size: '1M' } }), put(api, path, { enabled: true }));
    }
    expect((await Promise.all(ops)).map((r) => r.status)).toEqual(ops.map(() => 200));
    stop = true;
    await writer;
    expect(written).toBeGreaterThan(0);
    for (let i = Math.max(0, written - 2048); i < written; i++) {
      const got = await ns2.read(i % 2048, 1);
      if (i >= written - 2048 && i % 2048 === (written - 1) % 2048) expect(got[0]).toBe((written - 1) & 0xff);
    }
    await c.rescan();
    expect(c.namespaces.map((n) => n.nsid)).toEqual([1, 2]);
    expect(c.namespace(1).info.uuid).toBe(uuids[uuids.length - 1]);
    const cfg = t.getConfig().subsystems[0]?.namespaces?.[0];
    expect(cfg).toMatchObject({ nsid: 1, uuid: uuids[uuids.length - 1] });
    expect(cfg?.enabled).toBeUndefined();
    expect(t.debugCounts().pendingRequests).toBe(0);
  });
});

describe('runtime subsystem attributes', () => {
  it('maxIoQueues: the controller is disconnected and the reconnecting host gets the new I/O queue count', async () => {
    const nqn = 'nqn.2024-01.io.test:qidmax';
    const { api, port } = await setup(nqn);
    const c = await host(port, nqn, undefined, { nr_io_queues: 4, reconnect_delay: 0.05, ctrl_loss_tmo: 10 });
    expect(c.ioQueueCount).toBe(4);
    const live = new Promise<void>((resolve) => c.once('reconnected', () => resolve()));
    const res = await put(api, `/subsystems/${seg(nqn)}`, { maxIoQueues: 1 });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ nqn, maxIoQueues: 1 });
    await live;
    expect(c.ioQueueCount).toBe(1);
    const data = Buffer.alloc(512, 9);
    await c.namespace(2).write(1, data);
    expect((await c.namespace(2).read(1, 1)).equals(data)).toBe(true);
  });

  it('cntlid range: hosts get IDs from it, the one past it is refused with Controller Busy, and the range changes at runtime', async () => {
    const nqn = 'nqn.2024-01.io.test:cntlid';
    const { api, port } = await setup(nqn, { cntlidMin: 10, cntlidMax: 11 });
    const a = await host(port, nqn, 'nqn.2024-01.io.test:host-a');
    const b = await host(port, nqn, 'nqn.2024-01.io.test:host-b');
    expect([a.cntlid, b.cntlid].sort()).toEqual([10, 11]);
    const peer = await RawPeer.connect({ port });
    cleanups.push(async () => peer.close());
    expect((await peer.connect({ subnqn: nqn, hostnqn: HOSTNQN })).cqe?.status).toBe(Status.CONNECT_CTRL_BUSY | DNR);
    expect((await put(api, `/subsystems/${seg(nqn)}`, { cntlidMin: 12, cntlidMax: 11 })).status).toBe(400);
    expect((await put(api, `/subsystems/${seg(nqn)}`, { cntlidMax: 12 })).status).toBe(200);
    const c = await host(port, nqn, 'nqn.2024-01.io.test:host-c');
    expect(c.cntlid).toBe(12);
  });
});
