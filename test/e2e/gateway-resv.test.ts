// Reservations and host masks across a gateway group end to end (issue 30 item 4, docs/gateway-groups.md): a real
// etcd, two `nvme-tcp target` processes (harness/gateway-lab.ts), our initiator as host A on both gateways and host B
// on gw2. A registers and takes a Write Exclusive reservation through gw1 (the owner of the ANA group); the group
// moves to gw2 (`group failover`), where the reservation must hold: Report shows it, B's write is a Reservation
// Conflict, and after A releases through gw2 B's write succeeds. Then a mask change through gw1's API hides the
// namespace from B on gw2. Per gateway state (nvmet's) fails every step after the move.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { statusOf } from '../fixtures/status-of.js';
import { GatewayLab, groupView, type LabGateway } from '../../harness/gateway-lab.js';
import { connect, type Controller } from '../../initiator/index.js';
import { ResvType, Status } from '../../protocol/index.js';
import { startEtcd, type EtcdServer } from '../fixtures/etcd.js';
import { until } from '../../harness/until.js';

const HOST_A = 'nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000a1';
const HOST_B = 'nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000b2';
const KEY_A = 0xa1n;
const KEY_B = 0xb2n;
const block = Buffer.alloc(512, 0x5a);

const sc = statusOf;

async function api(gw: LabGateway, method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown }> {
  const res = await fetch(`http://127.0.0.1:${gw.api}${path}`, { method, ...(body !== undefined ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  return { status: res.status, json: text === '' ? undefined : (JSON.parse(text) as unknown) };
}

describe('gateway group: reservations and masks shared through etcd, two target processes', () => {
  let etcd: EtcdServer;
  let lab: GatewayLab;
  const ctrls: Controller[] = [];

  beforeAll(async () => {
    etcd = await startEtcd();
    // The targets run from the sources (a dist/ from an older build would not share anything). Nothing here waits
    // for a lease to expire (the move is an operator failover), so a 3 s lease keeps a slow start on a loaded machine
    // (tsx compiling in the gateway) from fencing a gateway mid-test.
    const bin = path.resolve(import.meta.dirname, '../fixtures/source-cli/nvme-tcp.mjs');
    lab = await GatewayLab.start({ etcdPort: etcd.clientPort, gateways: 2, namespaces: 1, leaseMs: 3000, failbackDelayMs: 500, group: 'resv', bin });
  }, 120_000);

  afterAll(async () => {
    for (const c of ctrls) await c.disconnect().catch(() => undefined);
    await lab?.close();
    await etcd?.stop();
  });

  const host = async (gw: LabGateway, hostnqn: string): Promise<Controller> => {
    const c = await connect({ traddr: '127.0.0.1', trsvcid: gw.port, nqn: lab.nqn, hostnqn, nr_io_queues: 1, reconnect_delay: 0.5, ctrl_loss_tmo: -1, keep_alive_tmo: 1, io_timeout: 5 });
    ctrls.push(c);
    return c;
  };

  it('a reservation taken through gw1 holds through gw2; A releases through gw2; a mask set through gw1 hides the namespace on gw2', async () => {
    const [gw1, gw2] = lab.gateways as [LabGateway, LabGateway];
    const a1 = await host(gw1, HOST_A);
    const a2 = await host(gw2, HOST_A);
    const b2 = await host(gw2, HOST_B);

    // Through gw1, the ANA group's owner.
    await a1.namespace(1).reservation.register({ nrkey: KEY_A });
    await a1.namespace(1).reservation.acquire({ crkey: KEY_A, rtype: ResvType.WRITE_EXCLUSIVE });

    // The group moves to gw2: from here on every command goes through gw2.
    expect((await api(gw1, 'POST', '/group/ana-groups/1/failover', { to: 'gw2' })).status).toBe(200);
    await until(async () => (await groupView(gw2))?.anaGroups[0]?.state === 'optimized', 15_000, 'gw2 to own ANA group 1');

    const report = await a2.namespace(1).reservation.report();
    expect(report.rtype).toBe(ResvType.WRITE_EXCLUSIVE);
    expect(report.regctls.map((r) => ({ hostid: r.hostid.toString('hex'), holder: r.holder, rkey: r.rkey }))).toEqual([{ hostid: '000000000000400080000000000000a1', holder: true, rkey: KEY_A }]);
    // B is not a registrant: its write is refused by the reservation gw1 granted.
    expect(await sc(b2.namespace(1).write(0, block))).toBe(Status.RESERVATION_CONFLICT);
    // B registers through gw2 and still may not take A's reservation (the same decision gw1 would make).
    await b2.namespace(1).reservation.register({ nrkey: KEY_B });
    expect(await sc(b2.namespace(1).reservation.acquire({ crkey: KEY_B, rtype: ResvType.WRITE_EXCLUSIVE }))).toBe(Status.RESERVATION_CONFLICT);
    expect(await sc(b2.namespace(1).write(0, block))).toBe(Status.RESERVATION_CONFLICT);

    // A releases through gw2 (A's registration is known there): B's write goes through.
    await a2.namespace(1).reservation.release({ crkey: KEY_A, rtype: ResvType.WRITE_EXCLUSIVE });
    expect(await sc(b2.namespace(1).write(0, block))).toBe(0);
    // gw1 sees the same state (its watch): two registrants, no reservation.
    await until(async () => {
      const v = (await api(gw1, 'GET', `/subsystems/${encodeURIComponent(lab.nqn)}/namespaces/1/reservation`)).json as { rtype: number; registrants: unknown[] };
      return v.rtype === 0 && v.registrants.length === 2;
    }, 5000, 'gw1 to show two registrants and no reservation');

    // Masking: attach the namespace to A only, through gw1's API; on gw2 B no longer sees it.
    expect((await api(gw1, 'POST', `/subsystems/${lab.nqn}/namespaces/1/hosts`, { nqn: HOST_A })).status).toBe(201);
    await until(async () => JSON.stringify((await api(gw2, 'GET', `/subsystems/${lab.nqn}/namespaces/1/hosts`)).json) === JSON.stringify({ hosts: [HOST_A] }), 10_000, 'gw2 to apply the mask');
    // B's host may already have rescanned after the Namespace Attribute Changed AEN (the namespace gone from its list)
    // or not yet (its write then fails with Invalid Namespace): either way B cannot use it.
    const bWrite = await sc(Promise.resolve().then(() => b2.namespace(1).write(0, block)));
    expect(bWrite === Status.INVALID_NS || (typeof bWrite === 'string' && bWrite.includes('no active namespace 1')), String(bWrite)).toBe(true);
    expect(await sc(a2.namespace(1).write(0, block))).toBe(0);
  }, 90_000);
});
