// Our initiator's zone commands (ns.zones) against our target over 127.0.0.1: report with filters and partial
// reports, Zone Append's LBA, the zone actions, and the target's zone statuses as NvmeStatusError.
import { Buffer } from 'node:buffer';
import { afterEach, describe, expect, it } from 'vitest';
import { connect, type Controller } from '../../initiator/index.js';
import { DNR, Status } from '../../protocol/index.js';
import { TargetService } from '../../target/index.js';
import { fullStatusOf } from '../fixtures/status-of.js';

const NQN = 'nqn.2024-01.io.test:zoned';
let t: TargetService | undefined;
let c: Controller | undefined;
afterEach(async () => {
  await c?.disconnect().catch(() => undefined);
  c = undefined;
  await t?.stop();
  t = undefined;
});

describe('initiator zone commands', () => {
  it('report, append, open/close/finish/reset with Select All, and zone statuses', async () => {
    t = new TargetService();
    const port = (await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 })).port;
    await t.addSubsystem({ nqn: NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' }, zoned: { zoneSize: '256K', maxOpen: 1 } }] });
    c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, nr_io_queues: 1 });
    const z = c.namespace(1).zones;
    const first = await z.report();
    expect(first.nrZones).toBe(4n);
    expect(first.zones.map((d) => [d.zs, d.zslba, d.wp, d.zcap])).toEqual([0, 1, 2, 3].map((i) => [1, i * 512, i * 512, 512]));
    expect(await z.append(512, Buffer.alloc(1024, 7))).toBe(512);
    expect(await z.append(512, Buffer.alloc(512, 7))).toBe(514);
    expect((await c.namespace(1).read(513, 1)).equals(Buffer.alloc(512, 7))).toBe(true);
    const part = await z.report({ slba: 512, partial: true, length: 128 });
    expect([part.nrZones, part.zones[0]?.zs, part.zones[0]?.wp]).toEqual([1n, 2, 515]);
    expect(await fullStatusOf(z.open(1024))).toBe(0); // zone 1 implicitly closed for room (maxOpen 1)
    expect((await z.report({ filter: 'closed' })).zones.map((d) => d.zslba)).toEqual([512]);
    expect(await fullStatusOf(z.append(513, Buffer.alloc(512)))).toBe(Status.INVALID_FIELD | DNR);
    expect(await fullStatusOf(c.namespace(1).write(600, Buffer.alloc(512)))).toBe(Status.ZONE_INVALID_WRITE | DNR);
    await z.close(0, { all: true });
    await z.finish(512);
    expect(await fullStatusOf(z.append(512, Buffer.alloc(512)))).toBe(Status.ZONE_FULL | DNR);
    expect(await fullStatusOf(z.offline(512))).toBe(Status.ZONE_INVALID_TRANSITION | DNR);
    await z.reset(0, { all: true });
    expect((await z.report({ filter: 'empty' })).nrZones).toBe(4n);
    await expect(z.report({ length: 60 })).rejects.toThrow(/at least 64/);
  });
});
