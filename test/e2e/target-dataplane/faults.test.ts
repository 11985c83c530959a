// The fault engine's actions (docs/faults.md) as a raw peer sees them on the wire, and rules that must not fire
// outside their match: each test arms rules through TargetService (the API, the CLI and armFault all end there).
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { AdminOpcode, AenConfig, CRD_SHIFT, DNR, FeatureId, MORE, NvmOpcode, PduType, Status, decodeChangedNsList, decodeCqe, encodeSqe, type Pdu } from '../../../protocol/index.js';
import { armFault } from '../../../harness/faults.js';
import { HOSTNQN, adminCmd, bringUpAdmin, connectIo, expectOk, getLog, nextCid, propGet, readCmd, setFeatures, startTarget, writeCmd, type Harness, type RawPeer } from './fixture.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const OTHER_HOST = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000009';

async function ioQueue(hh: Harness, qid = 1): Promise<{ admin: RawPeer; io: RawPeer; cntlid: number }> {
  const admin = await hh.peer();
  const cntlid = await bringUpAdmin(admin);
  expectOk(await admin.command(setFeatures(FeatureId.NUM_QUEUES, 0x30003)));
  const io = await hh.peer();
  expectOk(await connectIo(io, cntlid, qid));
  return { admin, io, cntlid };
}

const flush = (nsid = 1, cid = nextCid()): Buffer => encodeSqe({ opcode: NvmOpcode.FLUSH, cid, nsid });
const statusOf = (r: { cqe?: { status: number } | undefined }): number | undefined => r.cqe?.status;
const hits = (hh: Harness, id: string): number | undefined => hh.svc.listFaultRules().find((r) => r.id === id)?.hits;

/** The next PDU, or 'none' when nothing comes within `ms`. */
async function pduWithin(p: RawPeer, ms: number): Promise<Pdu | 'none'> {
  try {
    return await p.nextPdu(ms);
  } catch (err) {
    if (/no PDU within/.test((err as Error).message)) return 'none';
    throw err;
  }
}

/** How the controller closed the socket: 'fin' (an end before close) or 'rst' (ECONNRESET). */
function closeKind(p: RawPeer): Promise<'fin' | 'rst'> {
  return new Promise((resolve) => {
    let kind: 'fin' | 'rst' | undefined;
    p.socket.once('end', () => (kind ??= 'fin'));
    p.socket.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'ECONNRESET') kind = 'rst';
    });
    p.socket.once('close', () => resolve(kind ?? 'fin'));
  });
}

describe('NVMe-level actions', () => {
  it('status: the Nth matching read gets SCT/SC with CRD and More as asked; other reads and writes do not', async () => {
    h = await startTarget();
    const { io } = await ioQueue(h);
    armFault(h.svc, { id: 'ana', match: { qid: 1, opcode: NvmOpcode.READ }, schedule: { nth: 2 }, action: { kind: 'status', status: 'ANA_INACCESSIBLE', crd: 1, more: true } });
    expectOk(await io.command(writeCmd(1, 0n, 1), { data: Buffer.alloc(512, 1) }));
    expect(statusOf(await io.command(readCmd(1, 0n, 1)))).toBe(0);
    const r = await io.command(readCmd(1, 0n, 1));
    expect(r.cqe?.status).toBe(Status.ANA_INACCESSIBLE | (1 << CRD_SHIFT) | MORE);
    expect(r.pdus.map((p) => p.type)).toEqual([PduType.CAPSULE_RESP]);
    expect(statusOf(await io.command(readCmd(1, 0n, 1)))).toBe(0);
    expectOk(await io.command(writeCmd(1, 0n, 1), { data: Buffer.alloc(512, 1) }));
    expect(hits(h, 'ana')).toBe(1);
  });

  it('status on a write that needs R2T: the completion comes without an R2T, and the blocks keep their data', async () => {
    h = await startTarget();
    const { io } = await ioQueue(h);
    expectOk(await io.command(writeCmd(1, 0n, 8), { data: Buffer.alloc(4096, 1) }));
    armFault(h.svc, { match: { opcode: NvmOpcode.WRITE }, schedule: { nth: 1 }, action: { kind: 'status', status: Status.WRITE_FAULT } });
    const r = await io.command(writeCmd(1, 0n, 8), { data: Buffer.alloc(4096, 2) });
    expect(r.cqe?.status).toBe(Status.WRITE_FAULT);
    expect(r.pdus.map((p) => p.type)).toEqual([PduType.CAPSULE_RESP]);
    expect((await io.command(readCmd(1, 0n, 8))).data.equals(Buffer.alloc(4096, 1))).toBe(true);
  });

  it('status with DNR on every Kth command, from the Nth on', async () => {
    h = await startTarget();
    const { io } = await ioQueue(h);
    armFault(h.svc, { id: 'k', match: { set: 'io' }, schedule: { nth: 2, every: 3 }, action: { kind: 'status', status: Status.NS_NOT_READY, dnr: true } });
    const got: number[] = [];
    for (let i = 0; i < 9; i++) got.push(statusOf(await io.command(flush())) ?? -1);
    const F = Status.NS_NOT_READY | DNR;
    expect(got).toEqual([0, F, 0, 0, F, 0, 0, F, 0]);
  });

  it('delay: a matching command completes no sooner than asked; others at once', async () => {
    h = await startTarget();
    const { io } = await ioQueue(h);
    armFault(h.svc, { match: { opcode: NvmOpcode.READ }, action: { kind: 'delay', us: 300_000 } });
    let t0 = performance.now();
    expectOk(await io.command(flush()));
    expect(performance.now() - t0).toBeLessThan(250);
    t0 = performance.now();
    expectOk(await io.command(readCmd(1, 0n, 8)));
    expect(performance.now() - t0).toBeGreaterThanOrEqual(300);
  });

  it('drop on keep-alive: Keep Alive never answered while TCP stays up and other admin commands run', async () => {
    h = await startTarget();
    const admin = await h.peer();
    await bringUpAdmin(admin);
    armFault(h.svc, { id: 'ka', match: { event: 'keep-alive' }, action: { kind: 'drop' } });
    admin.send({ type: PduType.CAPSULE_CMD, sqe: adminCmd(AdminOpcode.KEEP_ALIVE), data: [] });
    expect(await pduWithin(admin, 300)).toBe('none');
    expectOk(await admin.command(propGet(0x1c)));
    expect(admin.isClosed).toBe(false);
    expect(hits(h, 'ka')).toBe(1);
  });

  it('duplicate: the same CQE arrives twice', async () => {
    h = await startTarget();
    const { io } = await ioQueue(h);
    armFault(h.svc, { match: { opcode: NvmOpcode.FLUSH }, schedule: { nth: 1 }, action: { kind: 'duplicate' } });
    const cid = nextCid();
    const first = await io.command(flush(1, cid));
    expect(first.cqe).toMatchObject({ cid, status: 0 });
    const again = await io.nextPdu();
    expect(again.type).toBe(PduType.CAPSULE_RESP);
    if (again.type === PduType.CAPSULE_RESP) expect(decodeCqe(again.cqe)).toMatchObject({ cid, status: 0, sqhd: first.cqe?.sqhd });
  });

  it('cid: unknown flips bit 15; stale repeats the previous command\'s CID', async () => {
    h = await startTarget();
    const { io } = await ioQueue(h);
    armFault(h.svc, { id: 'u', match: { opcode: NvmOpcode.FLUSH }, schedule: { nth: 1 }, action: { kind: 'cid', cid: 'unknown' } });
    const cid = 0x0123;
    io.send({ type: PduType.CAPSULE_CMD, sqe: flush(1, cid), data: [] });
    const p = await io.nextPdu();
    expect(p.type === PduType.CAPSULE_RESP && decodeCqe(p.cqe).cid).toBe(cid ^ 0x8000);
    h.svc.removeFaultRule('u');
    const prev = nextCid();
    expectOk(await io.command(flush(1, prev)));
    armFault(h.svc, { match: { opcode: NvmOpcode.FLUSH }, schedule: { nth: 1 }, action: { kind: 'cid', cid: 'stale' } });
    io.send({ type: PduType.CAPSULE_CMD, sqe: flush(1, 0x0456), data: [] });
    const s = await io.nextPdu();
    expect(s.type === PduType.CAPSULE_RESP && decodeCqe(s.cqe).cid).toBe(prev);
  });

  it('media-error: reads of the range fail with Unrecovered Read Error until each block is rewritten', async () => {
    h = await startTarget();
    const { io } = await ioQueue(h);
    armFault(h.svc, { id: 'bad', match: { nsid: 1, lba: { start: 8, count: 8 } }, action: { kind: 'media-error' } });
    const URE = Status.READ_ERROR | DNR;
    expect(statusOf(await io.command(readCmd(1, 0n, 8)))).toBe(0);
    expect(statusOf(await io.command(readCmd(1, 16n, 8)))).toBe(0);
    expect(statusOf(await io.command(readCmd(1, 4n, 8)))).toBe(URE);
    expectOk(await io.command(writeCmd(1, 8n, 4), { data: Buffer.alloc(2048, 7) }));
    const fixed = await io.command(readCmd(1, 8n, 4));
    expect(fixed.cqe?.status ?? 0).toBe(0);
    expect(fixed.data.equals(Buffer.alloc(2048, 7))).toBe(true);
    expect(statusOf(await io.command(readCmd(1, 8n, 5)))).toBe(URE);
    expectOk(await io.command(writeCmd(1, 12n, 4), { data: Buffer.alloc(2048, 8) }));
    expect(statusOf(await io.command(readCmd(1, 0n, 24))) ?? 0).toBe(0);
    expect(hits(h, 'bad')).toBe(2);
  });

  it('grant-queues: Set Features Number of Queues grants fewer, and a Connect beyond them is refused', async () => {
    h = await startTarget();
    armFault(h.svc, { match: { hostnqn: HOSTNQN }, action: { kind: 'grant-queues', count: 2 } });
    const admin = await h.peer();
    const cntlid = await bringUpAdmin(admin);
    const r = await admin.command(setFeatures(FeatureId.NUM_QUEUES, 0x30003));
    expect(r.cqe).toMatchObject({ status: 0, dw0: 0x10001 });
    expectOk(await connectIo(await h.peer(), cntlid, 2));
    const three = await connectIo(await h.peer(), cntlid, 3);
    expect(three.cqe?.status).toBe(Status.CONNECT_INVALID_PARAM | DNR);
  });

  it('the Nth I/O-queue Connect is refused; the admin Connect and the others are not', async () => {
    h = await startTarget();
    armFault(h.svc, { id: 'c', match: { event: 'connect', qid: 'io' }, schedule: { nth: 2 }, action: { kind: 'status', status: 'CONNECT_INVALID_PARAM', dnr: true } });
    const { cntlid } = await ioQueue(h, 1);
    const second = await connectIo(await h.peer(), cntlid, 2);
    expect(second.cqe?.status).toBe(Status.CONNECT_INVALID_PARAM | DNR);
    expectOk(await connectIo(await h.peer(), cntlid, 2));
    expectOk(await connectIo(await h.peer(), cntlid, 3));
    expect(hits(h, 'c')).toBe(1);
  });

  it('ana with the AEN: the AER completes with ANA change and the next read meets the state', async () => {
    h = await startTarget();
    const { admin, io } = await ioQueue(h);
    expectOk(await admin.command(setFeatures(FeatureId.ASYNC_EVENT, AenConfig.ANA)));
    admin.send({ type: PduType.CAPSULE_CMD, sqe: adminCmd(AdminOpcode.ASYNC_EVENT, { cid: 0x77 }), data: [] });
    armFault(h.svc, { match: { opcode: NvmOpcode.FLUSH }, schedule: { nth: 1 }, action: { kind: 'ana', group: 1, state: 'inaccessible' } });
    expectOk(await io.command(flush()));
    const aen = await admin.nextPdu();
    expect(aen.type === PduType.CAPSULE_RESP && decodeCqe(aen.cqe)).toMatchObject({ cid: 0x77, dw0: 0x000c_0302 });
    expect(statusOf(await io.command(readCmd(1, 0n, 1)))).toBe(Status.ANA_INACCESSIBLE);
  });

  it('ana without the AEN: the state changes and no AER completes', async () => {
    h = await startTarget();
    const { admin, io } = await ioQueue(h);
    expectOk(await admin.command(setFeatures(FeatureId.ASYNC_EVENT, AenConfig.ANA)));
    admin.send({ type: PduType.CAPSULE_CMD, sqe: adminCmd(AdminOpcode.ASYNC_EVENT, { cid: 0x78 }), data: [] });
    armFault(h.svc, { match: { opcode: NvmOpcode.FLUSH }, schedule: { nth: 1 }, action: { kind: 'ana', group: 1, state: 'change', aen: false } });
    expectOk(await io.command(flush()));
    expect(statusOf(await io.command(readCmd(1, 0n, 1)))).toBe(Status.ANA_TRANSITION);
    expect(await pduWithin(admin, 300)).toBe('none');
  });

  it('aen storm: every outstanding AER completes with a namespace notice while the Changed NS log stays empty', async () => {
    h = await startTarget();
    const { admin, io } = await ioQueue(h);
    expectOk(await admin.command(setFeatures(FeatureId.ASYNC_EVENT, AenConfig.NS_ATTR)));
    for (const cid of [0x61, 0x62, 0x63]) admin.send({ type: PduType.CAPSULE_CMD, sqe: adminCmd(AdminOpcode.ASYNC_EVENT, { cid }), data: [] });
    armFault(h.svc, { match: { opcode: NvmOpcode.FLUSH }, schedule: { nth: 1 }, action: { kind: 'aen', event: 'ns', count: 3 } });
    expectOk(await io.command(flush()));
    const cqes = [];
    for (let i = 0; i < 3; i++) {
      const p = await admin.nextPdu();
      if (p.type === PduType.CAPSULE_RESP) cqes.push(decodeCqe(p.cqe));
    }
    expect(cqes.map((c) => [c.cid, c.dw0])).toEqual([
      [0x61, 0x0004_0002],
      [0x62, 0x0004_0002],
      [0x63, 0x0004_0002],
    ]);
    const log = decodeChangedNsList((await admin.command(getLog(0x04, 4096))).data);
    expect(log).toEqual({ overflow: false, nsids: [] });
  });

  it('fatal: CSTS.CFS is set after the rule fires, not before', async () => {
    h = await startTarget();
    const { admin, io } = await ioQueue(h);
    armFault(h.svc, { match: { qid: 1, opcode: NvmOpcode.FLUSH }, schedule: { nth: 2 }, action: { kind: 'fatal' } });
    expectOk(await io.command(flush()));
    expect((await admin.command(propGet(0x1c))).cqe?.dw0).toBe(1);
    expectOk(await io.command(flush()));
    expect((await admin.command(propGet(0x1c))).cqe?.dw0).toBe(3);
  });
});

describe('connection-level actions', () => {
  it('icresp with unusual fields: MAXH2CDATA 4 KiB, CPDA, digests the host did not ask for', async () => {
    h = await startTarget();
    armFault(h.svc, { match: { event: 'icreq' }, action: { kind: 'icresp', maxh2cdata: 4096, cpda: 3, hdgst: true } });
    const p = await h.peer();
    // No digests asked, whatever NVME_TCP_TEST_DIGESTS says: the point is a grant the host did not ask for.
    const resp = await p.ic({ hdgst: false, ddgst: false });
    expect(resp).toMatchObject({ maxh2cdata: 4096, cpda: 3, dgst: 1 });
  });

  it('icresp delayed, and never sent (the connection then closes at the ICReq timeout)', async () => {
    h = await startTarget({}, { icReqTimeoutS: 1 });
    armFault(h.svc, { id: 'late', match: { event: 'icreq' }, schedule: { nth: 1 }, action: { kind: 'icresp', delayMs: 300 } });
    armFault(h.svc, { id: 'never', match: { event: 'icreq' }, schedule: { nth: 1 }, action: { kind: 'icresp', never: true } });
    const late = await h.peer();
    const t0 = performance.now();
    await late.ic();
    expect(performance.now() - t0).toBeGreaterThanOrEqual(295);
    // The first rule fired on the first ICReq; the second rule's own first match is the next ICReq.
    const never = await h.peer();
    never.send({ type: PduType.IC_REQ, pfv: 0, hpda: 0, dgst: 0, maxr2t: 0 });
    expect(await pduWithin(never, 600)).toBe('none');
    await never.closed(2000);
    expect(hits(h, 'late')).toBe(1);
    expect(hits(h, 'never')).toBe(1);
  });

  it('close at the Nth command: FIN, or RST', async () => {
    h = await startTarget();
    armFault(h.svc, { id: 'fin', match: { qid: 0, hostnqn: HOSTNQN }, schedule: { nth: 4 }, action: { kind: 'close' } });
    const a = await h.peer();
    const how = closeKind(a);
    // Connect, Property Get CAP, two Property Sets, Property Get CSTS: the 4th command is the second Set.
    expect(await bringUpAdmin(a).then(() => 'completed', () => 'failed')).toBe('failed');
    expect(await how).toBe('fin');
    h.svc.clearFaultRules();
    armFault(h.svc, { id: 'rst', match: { qid: 0 }, schedule: { nth: 2 }, action: { kind: 'close', rst: true } });
    const b = await h.peer();
    const how2 = closeKind(b);
    await bringUpAdmin(b).catch(() => undefined);
    expect(await how2).toBe('rst');
  });

  it('close at ICReq with RST', async () => {
    h = await startTarget();
    armFault(h.svc, { match: { event: 'icreq', port: 1 }, action: { kind: 'close', rst: true } });
    const p = await h.peer();
    const how = closeKind(p);
    p.send({ type: PduType.IC_REQ, pfv: 0, hpda: 0, dgst: 0, maxr2t: 0 });
    expect(await how).toBe('rst');
  });
});

describe('a rule never fires outside its match', () => {
  it('other host, other namespace, other port, other queue, outside the window: nothing fires', async () => {
    h = await startTarget({ subsystems: [{ nqn: 'nqn.2024-01.io.nvme-ts:test', namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }, { nsid: 2, backend: { type: 'ram', size: '1M' } }] }] });
    const fail = { kind: 'status', status: Status.INTERNAL } as const;
    armFault(h.svc, { id: 'host', match: { hostnqn: OTHER_HOST }, action: fail });
    armFault(h.svc, { id: 'ns', match: { nsid: 2 }, action: fail });
    armFault(h.svc, { id: 'port', match: { port: 9 }, action: fail });
    armFault(h.svc, { id: 'qid', match: { qid: [2, 3] }, action: fail });
    armFault(h.svc, { id: 'lba', match: { nsid: 1, lba: { start: 100, count: 4 } }, action: fail });
    armFault(h.svc, { id: 'later', match: { set: 'io' }, schedule: { afterMs: 60_000 }, action: fail });
    armFault(h.svc, { id: 'icreq', match: { event: 'icreq', port: 9 }, action: { kind: 'close' } });
    armFault(h.svc, { id: 'never', match: { set: 'io' }, schedule: { probability: 0, seed: 1 }, action: fail });
    const { io } = await ioQueue(h);
    expectOk(await io.command(flush(1)));
    expectOk(await io.command(readCmd(1, 96n, 4)));
    expectOk(await io.command(readCmd(1, 104n, 4)));
    expectOk(await io.command(writeCmd(1, 0n, 1), { data: Buffer.alloc(512) }));
    expect(statusOf(await io.command(flush(2)))).toBe(Status.INTERNAL);
    expect(statusOf(await io.command(readCmd(1, 103n, 2)))).toBe(Status.INTERNAL);
    expect(Object.fromEntries(h.svc.listFaultRules().map((r) => [r.id, r.hits]))).toEqual({ host: 0, ns: 1, port: 0, qid: 0, lba: 1, later: 0, icreq: 0, never: 0 });
  });

  it('a rule added while hosts are connected fires on their next command; removed, it stops', async () => {
    h = await startTarget();
    const { io } = await ioQueue(h);
    expectOk(await io.command(flush()));
    armFault(h.svc, { id: 'live', match: { qid: 1 }, action: { kind: 'status', status: Status.NS_NOT_READY } });
    expect(statusOf(await io.command(flush()))).toBe(Status.NS_NOT_READY);
    expect(h.svc.removeFaultRule('live')).toBe(true);
    expectOk(await io.command(flush()));
    expect(h.svc.listFaultRules()).toEqual([]);
  });
});
