// Management parity with nvmet in the core model: names that are not NQNs (nvmet_execute_admin_connect looks names
// up, it does not parse them), per-namespace enable (nvmet_ns_enable / nvmet_ns_disable), the controller-ID range
// (attr_cntlid_min/max, nvmet_alloc_ctrl) and the I/O queue cap (attr_qid_max) as Set Features Number of Queues
// grants it (NVMe Base 2.0 §5.27.1.7).
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import {
  Cns,
  DNR,
  FeatureId,
  LogPageId,
  NvmOpcode,
  Status,
  decodeActiveNsList,
  decodeAenResult,
  decodeChangedNsList,
  decodeConnectResult,
  decodeIdentifyController,
  encodeRwCmd,
  sglTransport,
} from '../../protocol/index.js';
import { RamBackend } from '../backend/index.js';
import { TargetNamespace } from './index.js';
import { HostQueue, makeTarget } from './testing/fake-transport.js';

function withNamespaces(sub: Parameters<typeof makeTarget>[0] = {}) {
  const t = makeTarget(sub);
  for (const nsid of [1, 2]) t.subsys.addNamespace(new TargetNamespace(t.subsys.nqn, { nsid, backend: { type: 'ram', size: 1 << 20 } }, new RamBackend(1 << 20)));
  const admin = new HostQueue(t.target, t.port);
  const cntlid = admin.connectAndEnable(sub.nqn !== undefined ? { subnqn: sub.nqn } : {});
  const io = new HostQueue(t.target, t.port);
  expect(io.connect({ qid: 1, cntlid, ...(sub.nqn !== undefined ? { subnqn: sub.nqn } : {}) }).status).toBe(0);
  return { ...t, admin, io, cntlid, ns1: t.subsys.namespaces.get(1) as TargetNamespace };
}

const read = (io: HostQueue, nsid: number) => io.exec(encodeRwCmd({ opcode: NvmOpcode.READ, cid: io.cid(), nsid, slba: 0n, nlb: 1, sgl: sglTransport(512) }));

describe('names nvmet accepts that are not NQNs', () => {
  it.each(['testnqn', 'blktests-subsystem-1'])('a subsystem named %s takes Connect and reports its name in Identify', (nqn) => {
    const { admin } = withNamespaces({ nqn });
    const id = decodeIdentifyController(admin.identify(Cns.CTRL).data ?? Buffer.alloc(0));
    expect(id.subnqn).toBe(nqn);
  });

  it('a host NQN that is not an NQN connects (the ACL compares names)', () => {
    const { target, port } = makeTarget({ allowAnyHost: false, hosts: ['host-without-nqn-prefix'] });
    const q = new HostQueue(target, port);
    expect(q.connect({ qid: 0, hostnqn: 'host-without-nqn-prefix' }).status).toBe(0);
  });
});

describe('namespace enable/disable', () => {
  it('a disabled namespace leaves the active list, reads as inactive, fails I/O with Invalid Namespace, and raises the NS notice', () => {
    const { target, subsys, admin, io, ns1 } = withNamespaces();
    const aer = admin.asyncEvent();
    expect(subsys.setNamespaceEnabled(ns1, false)).toBe(true);
    target.nsChanged(subsys, 1);
    expect(decodeAenResult(admin.completionOf(aer).dw0).lid).toBe(LogPageId.CHANGED_NS);
    expect(decodeChangedNsList(admin.getLogPage(LogPageId.CHANGED_NS, 4096).data ?? Buffer.alloc(0)).nsids).toEqual([1]);
    expect(decodeActiveNsList(admin.identify(Cns.NS_ACTIVE_LIST).data ?? Buffer.alloc(0))).toEqual([2]);
    // Identify Namespace of an inactive NSID: all zeroes (NVMe Base 2.0 §5.17.2.1).
    expect((admin.identify(Cns.NS, 1).data ?? Buffer.alloc(1, 1)).every((b) => b === 0)).toBe(true);
    expect(admin.identify(Cns.NS_DESC_LIST, 1).status).toBe(Status.INVALID_NS | DNR);
    expect(read(io, 1).status).toBe(Status.INVALID_NS | DNR);
    expect(read(io, 2).status).toBe(0);
    // Enabled again: same identifiers, I/O works.
    const uuid = Buffer.from(ns1.uuid);
    expect(subsys.setNamespaceEnabled(ns1, true)).toBe(true);
    expect(subsys.setNamespaceEnabled(ns1, true)).toBe(false);
    expect(decodeActiveNsList(admin.identify(Cns.NS_ACTIVE_LIST).data ?? Buffer.alloc(0))).toEqual([1, 2]);
    expect(subsys.namespaces.get(1)?.uuid.equals(uuid)).toBe(true);
    expect(read(io, 1).status).toBe(0);
  });

  it('a write accepted before the disable finishes on the backend and is counted out of ns.executing', () => {
    const { subsys, io, ns1 } = withNamespaces();
    const wr = io.submit(encodeRwCmd({ opcode: NvmOpcode.WRITE, cid: io.cid(), nsid: 1, slba: 0n, nlb: 1, sgl: sglTransport(512) }));
    expect(io.transport.dataRequests).toHaveLength(1);
    subsys.setNamespaceEnabled(ns1, false);
    io.sendData(wr, Buffer.alloc(512, 0xab));
    expect(io.completionOf(wr).status).toBe(0);
    expect(ns1.executing).toBe(0);
    subsys.setNamespaceEnabled(ns1, true);
    expect(read(io, 1).data?.equals(Buffer.alloc(512, 0xab))).toBe(true);
  });

  it('re-mapping puts a new namespace under the NSID and detaches the old one', () => {
    const { subsys, io, ns1 } = withNamespaces();
    const next = new TargetNamespace(subsys.nqn, { nsid: 1, backend: { type: 'ram', size: 1 << 20 }, uuid: '11111111-2222-4333-8444-555555555555' }, new RamBackend(1 << 20));
    expect(subsys.replaceNamespace(next)).toBe(ns1);
    expect(ns1.enabled).toBe(false);
    expect(subsys.nsids).toEqual([1, 2]);
    expect(subsys.activeNs(1)).toBe(next);
    expect(read(io, 1).status).toBe(0);
  });
});

describe('controller-ID range (nvmet attr_cntlid_min/max)', () => {
  it('hands out IDs from the range only; an exhausted range refuses with Controller Busy, DNR', () => {
    const { target, port, subsys } = makeTarget({ cntlidMin: 5, cntlidMax: 6 });
    const qs = [0, 1, 2].map(() => new HostQueue(target, port));
    const [a, b, c] = qs.map((q) => q.connect({ qid: 0 }));
    expect([decodeConnectResult(a?.dw0 ?? 0).cntlid, decodeConnectResult(b?.dw0 ?? 0).cntlid]).toEqual([5, 6]);
    expect(c?.status).toBe(Status.CONNECT_CTRL_BUSY | DNR);
    subsys.controllers.get(5)?.teardown('test');
    expect(decodeConnectResult(new HostQueue(target, port).connect({ qid: 0 }).dw0).cntlid).toBe(5);
  });
});

describe('I/O queue cap (nvmet attr_qid_max)', () => {
  it('a controller created after maxIoQueues changed is granted the new count', () => {
    const { target, port, subsys } = makeTarget({ maxIoQueues: 8 });
    const before = new HostQueue(target, port);
    before.connectAndEnable();
    expect(before.setFeatures(FeatureId.NUM_QUEUES, 0x003f_003f).dw0).toBe(0x0007_0007);
    subsys.maxIoQueues = 2;
    const after = new HostQueue(target, port);
    after.connectAndEnable();
    expect(after.setFeatures(FeatureId.NUM_QUEUES, 0x003f_003f).dw0).toBe(0x0001_0001);
  });
});
