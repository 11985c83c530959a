// A gateway with worker processes fences its workers too (issue 30, docs/gateway-groups.md "Fencing"): the I/O queues
// a gateway hands to its workers run in other processes, which hear of ANA changes only from the primary. When the
// primary stops (SIGSTOP: it neither renews its lease nor tells anyone), its workers keep running; the lease deadline
// they got on each renewal is what stops their writes once the lease may have expired, so a worker never writes for a
// group that another gateway may already own. Two gateways with `--workers 2` from the sources, a real etcd.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayLab, groupView, type LabGateway } from '../../harness/gateway-lab.js';
import { connect, type Controller } from '../../initiator/index.js';
import { Status } from '../../protocol/index.js';
import { startEtcd, type EtcdServer } from '../fixtures/etcd.js';
import { statusOf } from '../fixtures/status-of.js';
import { sleep, until } from '../../harness/until.js';

const HOST = 'nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000c3';
const LEASE_MS = 2000;

describe('gateway group with --workers: a stopped primary fences its workers', () => {
  let etcd: EtcdServer;
  let lab: GatewayLab;
  let ctrl: Controller | undefined;

  beforeAll(async () => {
    etcd = await startEtcd();
    const bin = path.resolve(import.meta.dirname, '../fixtures/source-cli/nvme-tcp.mjs');
    lab = await GatewayLab.start({ etcdPort: etcd.clientPort, gateways: 2, namespaces: 1, leaseMs: LEASE_MS, failbackDelayMs: 500, group: 'workers', bin, extraArgs: ['--workers', '2'] });
  }, 120_000);

  afterAll(async () => {
    for (const gw of lab?.gateways ?? []) lab.stall(gw, false);
    await ctrl?.disconnect().catch(() => undefined);
    await lab?.close();
    await etcd?.stop();
  });

  it('writes on a worker queue of the stopped owner fail with ANA Inaccessible once its lease may have expired', async () => {
    const [gw1, gw2] = lab.gateways as [LabGateway, LabGateway];
    expect((await groupView(gw1))?.anaGroups[0]?.owner).toBe('gw1');
    // A long keep-alive timeout: the admin queue is the stopped primary's, and the host must not tear the controller
    // down (closing the worker's queue) before the write below.
    ctrl = await connect({ traddr: '127.0.0.1', trsvcid: gw1.port, nqn: lab.nqn, hostnqn: HOST, nr_io_queues: 1, keep_alive_tmo: 60, io_timeout: 10, ctrl_loss_tmo: 0 });
    const block = Buffer.alloc(512, 0x33);
    expect(await statusOf(ctrl.namespace(1).write(0, block))).toBe(0);
    lab.stall(gw1, true);
    await until(async () => (await groupView(gw2))?.anaGroups[0]?.owner === 'gw2', 20_000, 'gw2 to take ANA group 1');
    // The worker still runs and still reports the group optimized (no state change reached it); its deadline passed.
    await sleep(200);
    expect(await statusOf(ctrl.namespace(1).write(0, block))).toBe(Status.ANA_INACCESSIBLE);
    lab.stall(gw1, false);
  }, 90_000);
});
