// Connect (NVMe-oF 1.1 §3.3): admin Connect allocates a controller, I/O Connects join it; every refusal carries the
// §3.3 status, and Connect Invalid Parameters names the field (IATTR: data or SQE; IPO: byte offset, Figure 22).
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import {
  ConnectCattr,
  DNR,
  PropertyOffset,
  Status,
  decodeConnectInvalidParam,
  decodeConnectResult,
  encodeConnectData,
  encodeRwCmd,
  encodeSqe,
  AdminOpcode,
  NvmOpcode,
  sglTransport,
} from '../../protocol/index.js';
import { RamBackend } from '../backend/index.js';
import { TargetNamespace, WELL_KNOWN_DISCOVERY_NQN } from './index.js';
import { HOSTID, HOSTNQN, HostQueue, SUBNQN, makeTarget, type ConnectOptions } from './testing/fake-transport.js';

const OTHER_HOST = 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-4908-8706-050403020100';

function setup(sub: Parameters<typeof makeTarget>[0] = {}) {
  const t = makeTarget(sub);
  const queue = (): HostQueue => new HostQueue(t.target, t.port);
  return { ...t, queue };
}

/** setup(), then an enabled admin queue and one I/O queue (qid 1) joined to its controller. */
function setupWithIoQueue(sub: Parameters<typeof setup>[0] = {}) {
  const t = setup(sub);
  const admin = t.queue();
  const cntlid = admin.connectAndEnable();
  const io = t.queue();
  expect(io.connect({ qid: 1, cntlid }).status).toBe(0);
  return { ...t, admin, cntlid, io };
}

describe('admin Connect', () => {
  it('allocates a controller ID from 1, binds the queue live as qid 0, reports SQHD', () => {
    const { target, subsys, queue } = setup();
    const admin = queue();
    const c = admin.connect({ qid: 0, sqsize: 31, kato: 5000 });
    expect(c.status).toBe(0);
    expect(decodeConnectResult(c.dw0)).toEqual({ cntlid: 1, atr: false, ascr: false });
    expect(c.sqid).toBe(0);
    // SQ flow control on: the head advances once per completion, modulo sqsize + 1 (NVMe Base 2.0 §4.6).
    expect(c.sqhd).toBe(1);
    expect(admin.core.state).toBe('live');
    expect(admin.core.qid).toBe(0);
    expect(admin.core.sqsize).toBe(31);
    const ctrl = subsys.controllers.get(1);
    expect(ctrl?.hostnqn).toBe(HOSTNQN);
    expect(ctrl?.hostid.equals(HOSTID)).toBe(true);
    expect(ctrl?.katoMs).toBe(5000);
    expect(target.stats.connectsOk).toBe(1);
    expect(target.stats.connectsFailed).toBe(0);
    ctrl?.teardown('test end');
  });

  it('gives each admin Connect its own controller ID', () => {
    const { subsys, queue } = setup();
    const ids = [queue(), queue(), queue()].map((q) => decodeConnectResult(q.connect({ qid: 0 }).dw0).cntlid);
    expect(ids).toEqual([1, 2, 3]);
    expect([...subsys.controllers.keys()].sort()).toEqual([1, 2, 3]);
  });

  it('with CATTR "disable SQ flow control" reports SQHD 0xFFFF', () => {
    const { queue } = setup();
    const admin = queue();
    const c = admin.connect({ qid: 0, cattr: ConnectCattr.DISABLE_SQFLOW });
    expect(c.status).toBe(0);
    expect(c.sqhd).toBe(0xffff);
    expect(admin.core.sqflowDisabled).toBe(true);
    expect(admin.propertyGet(PropertyOffset.VS).sqhd).toBe(0xffff);
  });

  it('SQHD wraps at sqsize + 1', () => {
    const { queue } = setup();
    const admin = queue();
    expect(admin.connect({ qid: 0, sqsize: 2 }).sqhd).toBe(1);
    expect(admin.propertyGet(PropertyOffset.VS).sqhd).toBe(2);
    expect(admin.propertyGet(PropertyOffset.VS).sqhd).toBe(0);
    expect(admin.propertyGet(PropertyOffset.VS).sqhd).toBe(1);
  });

  it('fetches Connect data through requestData when the SGL is a transport data block', () => {
    const { queue } = setup();
    const admin = queue();
    const { sqe, data } = admin.connectCapsule({ qid: 0, inCapsule: false });
    const req = admin.submit(sqe);
    expect(admin.transport.dataRequests).toHaveLength(1);
    expect(admin.transport.dataRequests[0]?.cid).toBe(req.cid);
    expect(admin.transport.dataRequests[0]?.length).toBe(1024);
    expect(admin.completions).toHaveLength(0);
    expect(admin.core.state).toBe('connecting');
    admin.sendData(req, data);
    expect(admin.completionOf(req).status).toBe(0);
    expect(admin.core.state).toBe('live');
  });

  it('accepts the discovery NQN and makes a discovery controller with the 120 s default KATO', () => {
    const { target, queue } = setup();
    const admin = queue();
    const c = admin.connect({ qid: 0, subnqn: WELL_KNOWN_DISCOVERY_NQN, kato: 0 });
    expect(c.status).toBe(0);
    const ctrl = target.discovery.controllers.get(c.dw0 & 0xffff);
    expect(ctrl?.discovery).toBe(true);
    expect(ctrl?.katoMs).toBe(120_000);
    ctrl?.teardown('test end');
  });
});

describe('I/O queue Connect', () => {
  it('joins the controller the admin Connect allocated', () => {
    const { subsys, queue } = setup();
    const admin = queue();
    const cntlid = admin.connectAndEnable();
    const io1 = queue();
    const io2 = queue();
    const c1 = io1.connect({ qid: 1, cntlid, sqsize: 127 });
    const c2 = io2.connect({ qid: 2, cntlid, sqsize: 127 });
    expect([c1.status, c2.status]).toEqual([0, 0]);
    expect(decodeConnectResult(c1.dw0).cntlid).toBe(cntlid);
    expect(decodeConnectResult(c2.dw0).cntlid).toBe(cntlid);
    expect(c1.sqid).toBe(1);
    expect(c2.sqid).toBe(2);
    const ctrl = subsys.controllers.get(cntlid);
    expect([...(ctrl?.queues.keys() ?? [])].sort()).toEqual([0, 1, 2]);
    expect(io1.core.ctrl).toBe(ctrl);
    expect(io1.core.sqsize).toBe(127);
  });

  it('runs I/O once connected to a ready controller', () => {
    const { subsys, queue } = setup();
    subsys.addNamespace(new TargetNamespace(SUBNQN, { nsid: 1, backend: { type: 'ram', size: 1 << 20 } }, new RamBackend(1 << 20)));
    const admin = queue();
    const cntlid = admin.connectAndEnable();
    const io = queue();
    io.connect({ qid: 1, cntlid });
    const rd = io.submit(encodeRwCmd({ opcode: NvmOpcode.READ, cid: 9, nsid: 1, slba: 0n, nlb: 1, sgl: sglTransport(512) }));
    const c = io.completionOf(rd);
    expect(c.status).toBe(0);
    expect(c.data?.length).toBe(512);
  });

  it('closing the admin queue tears the controller down and closes its I/O queues', () => {
    const { subsys, queue, admin, cntlid, io } = setupWithIoQueue();
    admin.transport.hostClose();
    expect(subsys.controllers.has(cntlid)).toBe(false);
    expect(io.transport.closes).toEqual(['admin queue closed']);
    expect(io.core.state).toBe('closed');
    // The torn-down controller's ID no longer accepts I/O queues.
    const late = queue().connect({ qid: 2, cntlid });
    expect(late.status).toBe(Status.CONNECT_INVALID_PARAM | DNR);
    expect(decodeConnectInvalidParam(late.dw0)).toEqual({ inData: true, offset: 16 });
  });

  it('closing an I/O queue frees its qid and leaves the controller', () => {
    const { subsys, queue, admin, cntlid, io } = setupWithIoQueue();
    io.transport.hostClose();
    expect(subsys.controllers.get(cntlid)?.queues.has(1)).toBe(false);
    expect(admin.transport.closes).toEqual([]);
    expect(queue().connect({ qid: 1, cntlid }).status).toBe(0);
  });
});

describe('Connect refusals (NVMe-oF 1.1 §3.3)', () => {
  /** Status and decoded dw0 of a refused Connect, and that the queue stayed unbound. */
  function refused(q: HostQueue, c: { status: number; dw0: number }) {
    expect(q.core.state).toBe('connecting');
    expect(q.core.ctrl).toBeUndefined();
    return { status: c.status, param: decodeConnectInvalidParam(c.dw0) };
  }

  it('record format other than 0: Incompatible Format', () => {
    const { target, queue } = setup();
    const q = queue();
    const c = q.connect({ qid: 0, recfmt: 1 });
    expect(c.status).toBe(Status.CONNECT_INCOMPATIBLE_FORMAT | DNR);
    refused(q, c);
    expect(target.stats.connectsFailed).toBe(1);
  });

  /** Connect data whose SUBNQN field runs to the end of its 256 bytes with no NUL. */
  function subnqnWithoutNul(): Buffer {
    const data = encodeConnectData({ hostid: HOSTID, cntlid: 0xffff, subnqn: SUBNQN, hostnqn: HOSTNQN });
    data.fill(0x61, 256 + SUBNQN.length, 512);
    return data;
  }

  // Each refused NQN names its field in the Connect data: SUBNQN at byte 256, HOSTNQN at byte 512.
  const nqnRefusals: { name: string; subsystem?: Parameters<typeof setup>[0]; connect: Omit<ConnectOptions, 'qid'>; offset: number }[] = [
    // Not an NQN and not configured: unknown, like any other name (nvmet looks names up, it does not parse them).
    { name: 'unknown subsystem name that is not an NQN', connect: { subnqn: 'not-an-nqn' }, offset: 256 },
    { name: 'empty subsystem NQN', connect: { subnqn: '' }, offset: 256 },
    { name: 'unknown subsystem NQN', connect: { subnqn: 'nqn.2024-01.io.example:no-such-subsystem' }, offset: 256 },
    { name: 'subsystem NQN not NUL-terminated within its 256 bytes', connect: { data: subnqnWithoutNul() }, offset: 256 },
    { name: 'subsystem not exported on this port', subsystem: { ports: [2] }, connect: {}, offset: 256 },
    { name: 'host NQN longer than 223 bytes', connect: { hostnqn: 'h'.repeat(224) }, offset: 512 },
  ];

  it.each(nqnRefusals.map((r) => [r.name, r.offset, r] as const))('%s: Invalid Parameters, data offset %d', (_name, offset, { subsystem, connect }) => {
    const { queue } = setup(subsystem);
    const q = queue();
    expect(refused(q, q.connect({ ...connect, qid: 0 }))).toEqual({ status: Status.CONNECT_INVALID_PARAM | DNR, param: { inData: true, offset } });
  });

  it('empty host NQN where any host is allowed: admitted, as nvmet and SPDK nvmf_tgt admit it (the SPDK host sends one)', () => {
    const { queue } = setup();
    const q = queue();
    expect(q.connect({ qid: 0, hostnqn: '' }).status).toBe(0);
    expect(q.core.ctrl?.hostnqn).toBe('');
  });

  it('empty host NQN on a subsystem with an ACL: Invalid Host, pointing at the host NQN', () => {
    const { queue } = setup({ allowAnyHost: false, hosts: [OTHER_HOST] });
    const q = queue();
    expect(refused(q, q.connect({ qid: 0, hostnqn: '' }))).toEqual({ status: Status.CONNECT_INVALID_HOST | DNR, param: { inData: true, offset: 512 } });
  });

  it('host not on the subsystem ACL: Invalid Host, pointing at the host NQN', () => {
    const { queue } = setup({ allowAnyHost: false, hosts: [OTHER_HOST] });
    const q = queue();
    expect(refused(q, q.connect({ qid: 0 }))).toEqual({ status: Status.CONNECT_INVALID_HOST | DNR, param: { inData: true, offset: 512 } });
    expect(queue().connect({ qid: 0, hostnqn: OTHER_HOST }).status).toBe(0);
  });

  it.each([
    ['0', 0],
    ['above MQES', 1024],
  ])('sqsize %s: Invalid Parameters, SQE offset 44', (_what, sqsize) => {
    const { queue } = setup();
    const q = queue();
    expect(refused(q, q.connect({ qid: 0, sqsize }))).toEqual({ status: Status.CONNECT_INVALID_PARAM | DNR, param: { inData: false, offset: 44 } });
  });

  it('sqsize equal to MQES is accepted (maxQueueSize 64 → MQES 63)', () => {
    const { queue } = setup({ maxQueueSize: 64 });
    expect(queue().connect({ qid: 0, sqsize: 63 }).status).toBe(0);
    const q = queue();
    expect(refused(q, q.connect({ qid: 0, sqsize: 64 })).param).toEqual({ inData: false, offset: 44 });
  });

  it('admin Connect naming a controller ID: Invalid Parameters, data offset 16', () => {
    const { queue } = setup();
    const q = queue();
    expect(refused(q, q.connect({ qid: 0, cntlid: 1 }))).toEqual({ status: Status.CONNECT_INVALID_PARAM | DNR, param: { inData: true, offset: 16 } });
  });

  it('I/O Connect to an unknown controller or one of another host: data offset 16', () => {
    const { queue } = setup();
    const cntlid = queue().connectAndEnable();
    const a = queue();
    expect(refused(a, a.connect({ qid: 1, cntlid: cntlid + 1 }))).toEqual({ status: Status.CONNECT_INVALID_PARAM | DNR, param: { inData: true, offset: 16 } });
    const b = queue();
    expect(refused(b, b.connect({ qid: 1, cntlid, hostnqn: OTHER_HOST }))).toEqual({ status: Status.CONNECT_INVALID_PARAM | DNR, param: { inData: true, offset: 16 } });
  });

  it('I/O qid beyond the granted queues: Invalid Parameters, SQE offset 42', () => {
    const { queue } = setup({ maxIoQueues: 4 });
    const admin = queue();
    const cntlid = admin.connectAndEnable();
    expect(queue().connect({ qid: 4, cntlid }).status).toBe(0);
    const q = queue();
    expect(refused(q, q.connect({ qid: 5, cntlid }))).toEqual({ status: Status.CONNECT_INVALID_PARAM | DNR, param: { inData: false, offset: 42 } });
  });

  it('I/O qid beyond what Set Features Number of Queues granted: SQE offset 42', () => {
    const { queue } = setup();
    const admin = queue();
    const cntlid = admin.connectAndEnable();
    // NSQR = NCQR = 1 (0's based): two I/O queues granted.
    const nq = admin.setFeatures(0x07, 0x0001_0001);
    expect(nq.status).toBe(0);
    expect(nq.dw0).toBe(0x0001_0001);
    expect(queue().connect({ qid: 2, cntlid }).status).toBe(0);
    const q = queue();
    expect(refused(q, q.connect({ qid: 3, cntlid })).param).toEqual({ inData: false, offset: 42 });
  });

  it('I/O Connect to a discovery controller: SQE offset 42', () => {
    const { queue } = setup();
    const c = queue().connect({ qid: 0, subnqn: WELL_KNOWN_DISCOVERY_NQN });
    const q = queue();
    expect(refused(q, q.connect({ qid: 1, subnqn: WELL_KNOWN_DISCOVERY_NQN, cntlid: c.dw0 & 0xffff }))).toEqual({
      status: Status.CONNECT_INVALID_PARAM | DNR,
      param: { inData: false, offset: 42 },
    });
  });

  it('duplicate qid: Command Sequence Error, first queue undisturbed', () => {
    const { subsys, queue } = setup();
    const cntlid = queue().connectAndEnable();
    const first = queue();
    expect(first.connect({ qid: 1, cntlid }).status).toBe(0);
    const dup = queue();
    expect(refused(dup, dup.connect({ qid: 1, cntlid })).status).toBe(Status.CMD_SEQ_ERROR | DNR);
    expect(subsys.controllers.get(cntlid)?.queues.get(1)).toBe(first.core);
  });

  it('controller limit reached: Controller Busy', () => {
    const { queue } = setup({ maxControllers: 1 });
    expect(queue().connect({ qid: 0 }).status).toBe(0);
    const q = queue();
    expect(refused(q, q.connect({ qid: 0 })).status).toBe(Status.CONNECT_CTRL_BUSY | DNR);
  });

  it('a second Connect on a live queue: Command Sequence Error', () => {
    const { queue } = setup();
    const q = queue();
    const cntlid = q.connectAndEnable();
    const again = q.connect({ qid: 0 });
    expect(again.status).toBe(Status.CMD_SEQ_ERROR | DNR);
    expect(q.core.ctrl?.cntlid).toBe(cntlid);
  });

  it('commands before Connect: Command Sequence Error, queue still connecting', () => {
    const { queue } = setup();
    const q = queue();
    expect(q.propertyGet(PropertyOffset.CAP).status).toBe(Status.CMD_SEQ_ERROR | DNR);
    expect(q.exec(encodeSqe({ opcode: AdminOpcode.KEEP_ALIVE, cid: 77 })).status).toBe(Status.CMD_SEQ_ERROR | DNR);
    expect(q.core.state).toBe('connecting');
    expect(q.connect({ qid: 0 }).status).toBe(0);
  });

  it('counts refused and accepted Connects', () => {
    const { target, queue } = setup();
    queue().connect({ qid: 0, recfmt: 3 });
    queue().connect({ qid: 0, sqsize: 0 });
    queue().connect({ qid: 0 });
    expect(target.stats.connectsFailed).toBe(2);
    expect(target.stats.connectsOk).toBe(1);
  });

  it('refused Connect data fetched by requestData reports the same field', () => {
    const { queue } = setup();
    const q = queue();
    const c = q.connect({ qid: 0, inCapsule: false, hostnqn: 'h'.repeat(224) });
    expect(q.transport.dataRequests).toHaveLength(1);
    expect(refused(q, c)).toEqual({ status: Status.CONNECT_INVALID_PARAM | DNR, param: { inData: true, offset: 512 } });
  });

  it('keeps the Connect data it was given (hostid copied, not a view of the capsule)', () => {
    const { subsys, queue } = setup();
    const q = queue();
    const { sqe, data } = q.connectCapsule({ qid: 0 });
    q.exec(sqe, data);
    data.fill(0);
    expect(subsys.controllers.get(1)?.hostid.equals(HOSTID)).toBe(true);
    expect(Buffer.isBuffer(subsys.controllers.get(1)?.hostid)).toBe(true);
  });
});
