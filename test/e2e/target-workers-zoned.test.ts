// Zoned namespaces with target workers: zone state has one owner, the primary, so the I/O queues of a subsystem with
// a zoned namespace stay there while another subsystem's queues go to workers, and a zoned namespace cannot join a
// subsystem whose queues a worker already serves (target/core/zoned.ts, docs/target.md zoned namespaces).
import { Buffer } from 'node:buffer';
import { afterEach, describe, expect, it } from 'vitest';
import { NvmOpcode, encodeRwCmd, sglInCapsule } from '../../protocol/index.js';
import { TargetService } from '../../target/index.js';
import { until } from '../../harness/until.js';
import { bringUpAdmin, expectOk, nextCid, setFeatures, RawPeer } from './target-dataplane/fixture.js';

const ZONED = 'nqn.2024-01.io.nvme-ts:test';
const PLAIN = 'nqn.2024-01.io.nvme-ts:plain';
let t: TargetService | undefined;
const peers: RawPeer[] = [];
afterEach(async () => {
  for (const p of peers.splice(0)) p.close();
  await t?.stop();
  t = undefined;
});

async function ioQueue(port: number, subnqn: string): Promise<RawPeer> {
  const admin = await RawPeer.connect({ port });
  peers.push(admin);
  const cntlid = await bringUpAdmin(admin, { subnqn });
  expectOk(await admin.command(setFeatures(0x07, 0x10001)));
  const io = await RawPeer.connect({ port });
  peers.push(io);
  const c = await io.connect({ subnqn, hostnqn: 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000001', qid: 1, cntlid, sqsize: 127 });
  expect(c.cqe?.status).toBe(0);
  return io;
}

describe('zoned namespaces with target workers', () => {
  it('zoned queues stay on the primary; plain ones go to workers; a zoned namespace cannot join a worker-served subsystem', async () => {
    t = new TargetService({ workers: 2, placement: 'queue' });
    const port = (await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 })).port;
    await t.addSubsystem({ nqn: ZONED, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' }, zoned: { zoneSize: '256K' } }] });
    await t.addSubsystem({ nqn: PLAIN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] });
    const zio = await ioQueue(port, ZONED);
    const app = encodeRwCmd({ opcode: NvmOpcode.ZONE_APPEND, cid: nextCid(), nsid: 1, slba: 512n, nlb: 2, sgl: sglInCapsule(1024) });
    const r = await zio.command(app, { data: Buffer.alloc(1024, 1), inCapsule: true });
    expect([r.cqe?.status, r.cqe?.dw0]).toEqual([0, 512]);
    expect(t.workers().reduce((n, w) => n + w.queues, 0)).toBe(0);
    expect(t.zones(ZONED, 1)?.[1]).toEqual({ zslba: 512, zcap: 512, wp: 514, state: 'imp-open' });
    await ioQueue(port, PLAIN);
    await until(() => (t as TargetService).workers().reduce((n, w) => n + w.queues, 0) === 1, 30_000, 'the plain queue on a worker');
    await expect(t.addNamespace(PLAIN, { nsid: 2, backend: { type: 'ram', size: '1M' }, zoned: { zoneSize: '256K' } })).rejects.toThrow(/namespaces\.zoned: .* has I\/O queues on target workers/);
  }, 60_000);
});
