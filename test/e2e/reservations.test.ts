// Reservations end to end: three hosts (and a second controller of one of them) through our initiator against our
// target over 127.0.0.1. Every reservation type × every acquire/release action is checked against the access table
// of NVMe Base 2.0 §8.19, written out below from the spec; then notifications, masks, preempt-and-abort, bad input.
import { Buffer } from 'node:buffer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Controller, type Namespace } from '../../initiator/index.js';
import { NvmeStatusError } from '../../protocol/errors.js';
import {
  AEN_RESV_LOG_AVAILABLE,
  FeatureId,
  LogPageId,
  NSID_BROADCAST,
  RESV_NOTIF_LOG_SIZE,
  ResvNotifMask,
  decodeResvNotifLog,
  encodeGetFeaturesCmd,
  encodeGetLogPageCmd,
  encodeSetFeaturesCmd,
} from '../../protocol/index.js';
import { TargetService } from '../../target/index.js';

const NQN = 'nqn.2024-01.io.test:resv';
const HOST = {
  A: { nqn: 'nqn.2014-08.org.nvmexpress:uuid:aaaaaaaa-0000-4000-8000-000000000001', id: 'aaaaaaaa-0000-4000-8000-000000000001', key: 0xa1n },
  B: { nqn: 'nqn.2014-08.org.nvmexpress:uuid:bbbbbbbb-0000-4000-8000-000000000002', id: 'bbbbbbbb-0000-4000-8000-000000000002', key: 0xb2n },
  C: { nqn: 'nqn.2014-08.org.nvmexpress:uuid:cccccccc-0000-4000-8000-000000000003', id: 'cccccccc-0000-4000-8000-000000000003', key: 0xc3n },
} as const;
type HostName = keyof typeof HOST;

/**
 * NVMe Base 2.0 §8.19 "Command Behavior in the Presence of a Reservation" (Read group / Write group for the holder,
 * a registrant, a non-registrant), copied from the spec's table.
 */
const SPEC: Record<number, { read: [string, string, string]; write: [string, string, string] }> = {
  1: { read: ['A', 'A', 'A'], write: ['A', 'C', 'C'] },
  2: { read: ['A', 'C', 'C'], write: ['A', 'C', 'C'] },
  3: { read: ['A', 'A', 'A'], write: ['A', 'A', 'C'] },
  4: { read: ['A', 'A', 'C'], write: ['A', 'A', 'C'] },
  5: { read: ['A', 'A', 'A'], write: ['A', 'A', 'C'] },
  6: { read: ['A', 'A', 'C'], write: ['A', 'A', 'C'] },
};
const TYPE_NAME: Record<number, string> = { 1: 'Write Exclusive', 2: 'Exclusive Access', 3: 'WE Registrants Only', 4: 'EA Registrants Only', 5: 'WE All Registrants', 6: 'EA All Registrants' };

let t: TargetService;
let port = 0;
const ctrls: Record<HostName, Controller> = {} as Record<HostName, Controller>;
let a2: Controller;
const events: Record<HostName | 'A2', number[]> = { A: [], B: [], C: [], A2: [] };

async function open(h: HostName): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, hostnqn: HOST[h].nqn, hostid: HOST[h].id, nr_io_queues: 1, duplicate_connect: true });
  return c;
}

beforeAll(async () => {
  t = new TargetService();
  port = (await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 })).port;
  await t.addSubsystem({
    nqn: NQN,
    hosts: [HOST.A.nqn, HOST.B.nqn, HOST.C.nqn],
    namespaces: [
      { nsid: 1, backend: { type: 'ram', size: '4M' } },
      { nsid: 2, backend: { type: 'ram', size: '4M' }, hosts: [HOST.A.nqn] },
    ],
  });
  for (const h of ['A', 'B', 'C'] as const) {
    ctrls[h] = await open(h);
    ctrls[h].on('aen', (ev: { dw0: number }) => events[h].push(ev.dw0));
  }
  a2 = await open('A');
  a2.on('aen', (ev: { dw0: number }) => events.A2.push(ev.dw0));
});

afterAll(async () => {
  for (const c of [...Object.values(ctrls), a2]) await c?.disconnect().catch(() => undefined);
  await t?.stop();
});

const ns = (h: HostName, nsid = 1): Namespace => ctrls[h].namespace(nsid);
/** Status code of a rejected promise (sct << 8 | sc), 0 when it resolved. */
async function sc(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 0;
  } catch (e) {
    if (e instanceof NvmeStatusError) return (e.sct << 8) | e.sc;
    throw e;
  }
}
const CONFLICT = 0x83;
const INVALID_FIELD = 0x02;
const INVALID_NS = 0x0b;
const block = Buffer.alloc(512, 0x5a);

async function access(h: HostName): Promise<{ read: string; write: string }> {
  const r = await sc(ns(h).read(0, 1));
  const w = await sc(ns(h).write(0, block));
  for (const s of [r, w]) if (s !== 0 && s !== CONFLICT) throw new Error(`unexpected status 0x${s.toString(16)}`);
  return { read: r === 0 ? 'A' : 'C', write: w === 0 ? 'A' : 'C' };
}

/** Back to no reservation and A, B registered (C never is). */
async function reset(): Promise<void> {
  const st = await ns('A').reservation.report();
  if (st.regctls.length > 0) {
    for (const h of ['A', 'B', 'C'] as const) {
      if (await ns(h).reservation.register({ rrega: 1, iekey: true }).then(() => true, () => false)) continue;
    }
  }
  expect(await sc(ns('A').reservation.register({ nrkey: HOST.A.key }))).toBe(0);
  expect(await sc(ns('B').reservation.register({ nrkey: HOST.B.key }))).toBe(0);
}

async function readLog(c: Controller): Promise<ReturnType<typeof decodeResvNotifLog>> {
  const buf = Buffer.alloc(RESV_NOTIF_LOG_SIZE);
  await c.adminCommand(encodeGetLogPageCmd({ cid: 0, lid: LogPageId.RESV_NOTIF, length: RESV_NOTIF_LOG_SIZE, nsid: NSID_BROADCAST }), { c2h: buf });
  return decodeResvNotifLog(buf);
}
async function drainLog(c: Controller): Promise<number[]> {
  const types: number[] = [];
  for (let i = 0; i < 100; i++) {
    const e = await readLog(c);
    if (e.type === 0) break;
    types.push(e.type);
  }
  return types;
}

describe('every reservation type × action, three hosts, against the spec table', () => {
  for (let rtype = 1; rtype <= 6; rtype++) {
    const row = SPEC[rtype] as (typeof SPEC)[number];
    it(`${TYPE_NAME[rtype]}: acquire then release`, async () => {
      await reset();
      expect(await sc(ns('A').reservation.acquire({ crkey: HOST.A.key, rtype }))).toBe(0);
      expect(await access('A')).toEqual({ read: row.read[0], write: row.write[0] });
      // a second controller of the holder's host is the holder too (registrants are hosts, §8.19.2)
      const viaA2 = await sc(a2.namespace(1).write(0, block));
      expect(viaA2 === 0 ? 'A' : 'C').toBe(row.write[0]);
      expect(await access('B')).toEqual({ read: row.read[1], write: row.write[1] });
      expect(await access('C')).toEqual({ read: row.read[2], write: row.write[2] });
      const rep = await ns('C').reservation.report();
      expect(rep.rtype).toBe(rtype);
      expect(rep.regctls.map((r) => [r.hostid.toString('hex'), r.rkey, r.holder])).toEqual([
        [HOST.A.id.replace(/-/g, ''), HOST.A.key, true],
        [HOST.B.id.replace(/-/g, ''), HOST.B.key, rtype >= 5],
      ]);
      // release: the wrong type is refused, then everyone has full access
      expect(await sc(ns('A').reservation.release({ crkey: HOST.A.key, rtype: rtype === 1 ? 2 : 1 }))).toBe(INVALID_FIELD);
      expect(await sc(ns('A').reservation.release({ crkey: HOST.A.key, rtype }))).toBe(0);
      for (const h of ['A', 'B', 'C'] as const) expect(await access(h)).toEqual({ read: 'A', write: 'A' });
    });

    it(`${TYPE_NAME[rtype]}: preempt and preempt-and-abort move the reservation; clear ends it`, async () => {
      for (const racqa of [1, 2]) {
        await reset();
        expect(await sc(ns('A').reservation.acquire({ crkey: HOST.A.key, rtype }))).toBe(0);
        // Under All Registrants there is no single holder key: PRKEY 0 preempts everyone else (§8.19.7).
        const prkey = rtype >= 5 ? 0n : HOST.A.key;
        expect(await sc(ns('C').reservation.acquire({ crkey: HOST.C.key, rtype, racqa, prkey }))).toBe(CONFLICT);
        expect(await sc(ns('B').reservation.acquire({ crkey: HOST.B.key, rtype, racqa, prkey }))).toBe(0);
        // B holds now; A's registration is gone, so A is a non-registrant
        expect(await access('B')).toEqual({ read: row.read[0], write: row.write[0] });
        expect(await access('A')).toEqual({ read: row.read[2], write: row.write[2] });
        const rep = await ns('A').reservation.report();
        expect(rep.regctls.map((r) => r.rkey)).toEqual([HOST.B.key]);
        expect(await drainLog(ctrls.A)).toEqual([1]);
        await drainLog(a2);
        // clear by a registrant: no reservation, nobody registered
        expect(await sc(ns('B').reservation.release({ crkey: HOST.B.key, rrela: 1 }))).toBe(0);
        const after = await ns('C').reservation.report();
        expect([after.rtype, after.regctls.length]).toEqual([0, 0]);
        for (const h of ['A', 'B', 'C'] as const) expect(await access(h)).toEqual({ read: 'A', write: 'A' });
      }
    });
  }
});

describe('notifications, features and bad input', () => {
  it('a preempted host gets the reservation-log AEN on each of its controllers and the log entry says why', async () => {
    await reset();
    await drainLog(ctrls.A);
    await drainLog(a2);
    await drainLog(ctrls.B);
    events.A.length = 0;
    events.A2.length = 0;
    expect(await sc(ns('A').reservation.acquire({ crkey: HOST.A.key, rtype: 3 }))).toBe(0);
    expect(await sc(ns('B').reservation.acquire({ crkey: HOST.B.key, rtype: 3, racqa: 1, prkey: HOST.A.key }))).toBe(0);
    await new Promise((r) => setTimeout(r, 100));
    expect(events.A).toContain(AEN_RESV_LOG_AVAILABLE);
    expect(events.A2).toContain(AEN_RESV_LOG_AVAILABLE);
    const e = await readLog(ctrls.A);
    expect(e).toMatchObject({ type: 1, nsid: 1, nalp: 0 });
    expect(e.count).toBeGreaterThan(0n);
    expect((await readLog(ctrls.A)).type).toBe(0);
    // B releases a Registrants Only reservation: the other registrants hear "released" — A no longer is one.
    expect(await sc(ns('A').reservation.register({ nrkey: HOST.A.key }))).toBe(0);
    expect(await sc(ns('B').reservation.release({ crkey: HOST.B.key, rtype: 3 }))).toBe(0);
    expect(await drainLog(ctrls.A)).toEqual([2]);
    expect(await drainLog(ctrls.B)).toEqual([]);
  });

  it('the notification mask (FID 82h) suppresses a notice; reservation persistence (FID 83h) reads back', async () => {
    await reset();
    await drainLog(ctrls.A);
    await drainLog(a2);
    await ctrls.A.adminCommand(encodeSetFeaturesCmd({ cid: 0, fid: FeatureId.RESV_MASK, nsid: 1, cdw11: ResvNotifMask.REG_PREEMPTED }));
    const got = await ctrls.A.adminCommand(encodeGetFeaturesCmd({ cid: 0, fid: FeatureId.RESV_MASK, nsid: 1 }));
    expect(got.dw0).toBe(ResvNotifMask.REG_PREEMPTED);
    expect(await sc(ns('B').reservation.acquire({ crkey: HOST.B.key, rtype: 1, racqa: 1, prkey: HOST.A.key }))).toBe(0);
    expect(await drainLog(ctrls.A)).toEqual([]);
    expect((await drainLog(a2)).length).toBe(1);
    await ctrls.A.adminCommand(encodeSetFeaturesCmd({ cid: 0, fid: FeatureId.RESV_MASK, nsid: 1, cdw11: 0 }));
    expect(await sc(ctrls.A.adminCommand(encodeSetFeaturesCmd({ cid: 0, fid: FeatureId.RESV_MASK, nsid: 1, cdw11: 1 })))).toBe(INVALID_FIELD);
    await ctrls.B.adminCommand(encodeSetFeaturesCmd({ cid: 0, fid: FeatureId.RESV_PERSIST, nsid: 1, cdw11: 1 }));
    expect((await ctrls.C.adminCommand(encodeGetFeaturesCmd({ cid: 0, fid: FeatureId.RESV_PERSIST, nsid: 1 }))).dw0).toBe(1);
    expect((await ns('C').reservation.report()).ptpls).toBe(true);
    await ctrls.B.adminCommand(encodeSetFeaturesCmd({ cid: 0, fid: FeatureId.RESV_PERSIST, nsid: 1, cdw11: 0 }));
  });

  it('wrong keys, unknown actions and types, a non-holder release, a 64-bit report: the spec statuses', async () => {
    await reset();
    expect(await sc(ns('A').reservation.register({ nrkey: 0x99n }))).toBe(CONFLICT);
    expect(await sc(ns('A').reservation.register({ rrega: 2, crkey: 0x99n, nrkey: 1n }))).toBe(CONFLICT);
    expect(await sc(ns('A').reservation.register({ rrega: 5, nrkey: 1n }))).toBe(INVALID_FIELD);
    expect(await sc(ns('A').reservation.register({ nrkey: HOST.A.key, cptpl: 1 }))).toBe(INVALID_FIELD);
    expect(await sc(ns('A').reservation.acquire({ crkey: HOST.A.key, rtype: 7 }))).toBe(INVALID_FIELD);
    expect(await sc(ns('A').reservation.acquire({ crkey: HOST.A.key, rtype: 1, racqa: 4 }))).toBe(INVALID_FIELD);
    expect(await sc(ns('A').reservation.acquire({ crkey: 0x1n, rtype: 1 }))).toBe(CONFLICT);
    expect(await sc(ns('C').reservation.release({ crkey: 0n, rtype: 1 }))).toBe(CONFLICT);
    expect(await sc(ns('A').reservation.acquire({ crkey: HOST.A.key, rtype: 1 }))).toBe(0);
    expect(await sc(ns('B').reservation.release({ crkey: HOST.B.key, rtype: 1 }))).toBe(0);
    expect((await ns('B').reservation.report()).rtype).toBe(1);
    expect(await sc(ns('A').reservation.release({ crkey: HOST.A.key, rtype: 1, rrela: 3 }))).toBe(INVALID_FIELD);
    // EDS cleared with 128-bit host identifiers: Host Identifier Inconsistent Format (§7.4)
    expect(await sc(ns('A').reservation.report({ eds: false }))).toBe(0x18);
    expect(await sc(ns('A').reservation.release({ crkey: HOST.A.key, rtype: 1 }))).toBe(0);
  });

  it('preempt-and-abort aborts the commands the preempted host has queued', async () => {
    await reset();
    expect(await sc(ns('A').reservation.acquire({ crkey: HOST.A.key, rtype: 2 }))).toBe(0);
    t.setFaults(NQN, { commandLatencyUs: 300_000 });
    try {
      const queued = [0, 1, 2, 3].map((i) => sc(ns('A').write(i, block)));
      await new Promise((r) => setTimeout(r, 50));
      expect(await sc(ns('B').reservation.acquire({ crkey: HOST.B.key, rtype: 2, racqa: 2, prkey: HOST.A.key }))).toBe(0);
      // Command Aborted due to Preempt and Abort (generic 1Bh)
      expect(await Promise.all(queued)).toEqual([0x1b, 0x1b, 0x1b, 0x1b]);
    } finally {
      t.setFaults(NQN, {});
    }
    expect(await sc(ns('A').read(0, 1))).toBe(CONFLICT);
    expect(await sc(ns('B').reservation.release({ crkey: HOST.B.key, rrela: 1 }))).toBe(0);
  });
});

describe('namespace masking', () => {
  it('a namespace attached to A only does not exist for B: active list, I/O; attach raises the AEN only on B', async () => {
    expect(ctrls.A.namespaces.map((n) => n.nsid)).toEqual([1, 2]);
    expect(ctrls.B.namespaces.map((n) => n.nsid)).toEqual([1]);
    await ns('A', 2).write(0, block);
    events.A.length = 0;
    events.B.length = 0;
    events.C.length = 0;
    const changed = new Promise<number[]>((resolve) => ctrls.B.once('namespacesChanged', resolve));
    t.attachNamespaceHost(NQN, 2, HOST.B.nqn);
    await changed;
    expect(ctrls.B.namespaces.map((n) => n.nsid)).toEqual([1, 2]);
    expect((await ns('B', 2).read(0, 1)).equals(block)).toBe(true);
    await new Promise((r) => setTimeout(r, 100));
    expect(events.A).toEqual([]);
    expect(events.C).toEqual([]);
    const gone = new Promise<number[]>((resolve) => ctrls.B.once('namespacesChanged', resolve));
    t.detachNamespaceHost(NQN, 2, HOST.B.nqn);
    await gone;
    expect(ctrls.B.namespaces.map((n) => n.nsid)).toEqual([1]);
    expect(t.namespaceHosts(NQN, 2)).toEqual([HOST.A.nqn]);
    expect(() => t.attachNamespaceHost(NQN, 2, 'nqn.2014-08.org.nvmexpress:uuid:dddddddd-0000-4000-8000-000000000004')).toThrow(/not a host of/);
  });

  it('I/O to a masked namespace is Invalid Namespace, as for an absent one', async () => {
    // Build the SQE by hand: B's initiator has no Namespace object for NSID 2.
    const { encodeRwCmd } = await import('../../protocol/index.js');
    const sqe = encodeRwCmd({ opcode: 0x02, cid: 0, nsid: 2, slba: 0n, nlb: 1 });
    const c = ctrls.B;
    const st = await sc(c.execIo(() => ({ sqe, c2h: Buffer.alloc(512), timeoutMs: 5000 }), { write: false }));
    expect(st).toBe(INVALID_NS);
  });
});
