// Asynchronous Event Requests (NVMe Base 2.0 §5.2): at most AERL + 1 outstanding (Identify Controller AERL is
// 0's based), the excess completes with Asynchronous Event Request Limit Exceeded; an event completes one outstanding
// request with type, information and log page in dw0 (Figure 151); events wait while none is outstanding; a notice
// stays masked until its log page is read without RAE (§5.16).
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import {
  AenConfig,
  AenNotice,
  AenType,
  DNR,
  FeatureId,
  LogPageId,
  PropertyOffset,
  Status,
  decodeAenResult,
  decodeChangedNsList,
  decodeIdentifyController,
  encodeCc,
} from '../../protocol/index.js';
import { WELL_KNOWN_DISCOVERY_NQN } from './index.js';
import { HostQueue, makeTarget } from './testing/fake-transport.js';

function ready(opts: { subnqn?: string; ana?: boolean } = {}) {
  const t = makeTarget(opts.ana !== undefined ? { ana: opts.ana } : {});
  const admin = new HostQueue(t.target, t.port);
  const cntlid = admin.connectAndEnable(opts.subnqn !== undefined ? { subnqn: opts.subnqn } : {});
  const id = decodeIdentifyController(admin.identify(0x01).data ?? Buffer.alloc(0));
  return { ...t, admin, cntlid, aerl: id.aerl, oaes: id.oaes };
}

/** Completions recorded for these AER requests' CIDs. */
function aerCompletions(admin: HostQueue, cids: readonly number[]) {
  return admin.completions.filter((c) => cids.includes(c.cid));
}

const NS_NOTICE = { type: AenType.NOTICE, info: AenNotice.NS_CHANGED, lid: LogPageId.CHANGED_NS };

describe('AER slots', () => {
  it('Identify advertises AERL 3 (four outstanding) and the notices it can send', () => {
    const { aerl, oaes } = ready();
    expect(aerl).toBe(3);
    expect(oaes).toBe(AenConfig.NS_ATTR | AenConfig.ANA);
  });

  it('holds AERL + 1 requests without completing them; the next one gets AER Limit Exceeded', () => {
    const { admin, aerl } = ready();
    const before = admin.completions.length;
    const held = Array.from({ length: aerl + 1 }, () => admin.asyncEvent().cid);
    expect(admin.completions.length).toBe(before);
    const extra = admin.asyncEvent();
    const c = admin.completionOf(extra);
    expect(c.status).toBe(Status.ASYNC_LIMIT | DNR);
    expect(admin.completions.length).toBe(before + 1);
    expect(aerCompletions(admin, held)).toEqual([]);
    expect(admin.core.inFlight).toBe(aerl + 1);
  });

  it('an event completes exactly one outstanding request, the oldest, with the notice in dw0', () => {
    const { target, subsys, admin, aerl } = ready();
    const held = Array.from({ length: aerl + 1 }, () => admin.asyncEvent().cid);
    target.nsChanged(subsys, 7);
    const done = aerCompletions(admin, held);
    expect(done).toHaveLength(1);
    expect(done[0]?.cid).toBe(held[0]);
    expect(done[0]?.status).toBe(0);
    expect(decodeAenResult(done[0]?.dw0 ?? 0)).toEqual(NS_NOTICE);
    expect(admin.core.inFlight).toBe(aerl);
    // The slot it held is free again.
    const again = admin.asyncEvent();
    expect(admin.transport.completionsFor(again.cid)).toEqual([]);
    expect(admin.completionOf(admin.asyncEvent()).status).toBe(Status.ASYNC_LIMIT | DNR);
  });

  it('events wait while no request is outstanding, and the next request completes at once', () => {
    const { target, subsys, admin } = ready();
    const before = admin.completions.length;
    target.nsChanged(subsys, 3);
    expect(admin.completions.length).toBe(before);
    const aer = admin.asyncEvent();
    const c = admin.completionOf(aer);
    expect(c.status).toBe(0);
    expect(decodeAenResult(c.dw0)).toEqual(NS_NOTICE);
  });

  it('queued events of different kinds are delivered in order, one per request', () => {
    const { target, subsys, port, admin } = ready();
    target.nsChanged(subsys, 1);
    target.anaChanged(port.id);
    const first = admin.completionOf(admin.asyncEvent());
    const second = admin.completionOf(admin.asyncEvent());
    expect(decodeAenResult(first.dw0)).toEqual(NS_NOTICE);
    expect(decodeAenResult(second.dw0)).toEqual({ type: AenType.NOTICE, info: AenNotice.ANA, lid: LogPageId.ANA });
    const third = admin.asyncEvent();
    expect(admin.transport.completionsFor(third.cid)).toEqual([]);
  });

  it('a notice stays masked until its log page is read without RAE, and the log lists the changed NSIDs', () => {
    const { target, subsys, admin } = ready();
    const held = [admin.asyncEvent().cid, admin.asyncEvent().cid];
    target.nsChanged(subsys, 5);
    target.nsChanged(subsys, 2);
    expect(aerCompletions(admin, held)).toHaveLength(1);
    // RAE set: the host keeps the event masked.
    const rae = admin.getLogPage(LogPageId.CHANGED_NS, 4096, true);
    expect(decodeChangedNsList(rae.data ?? Buffer.alloc(0)).nsids).toEqual([2, 5]);
    target.nsChanged(subsys, 9);
    expect(aerCompletions(admin, held)).toHaveLength(1);
    // Read without RAE: unmasked and the list cleared; the next change notifies again.
    const log = admin.getLogPage(LogPageId.CHANGED_NS, 4096);
    expect(decodeChangedNsList(log.data ?? Buffer.alloc(0)).nsids).toEqual([2, 5, 9]);
    target.nsChanged(subsys, 4);
    const done = aerCompletions(admin, held);
    expect(done).toHaveLength(2);
    expect(done[1]?.cid).toBe(held[1]);
    expect(decodeAenResult(done[1]?.dw0 ?? 0)).toEqual(NS_NOTICE);
    expect(decodeChangedNsList(admin.getLogPage(LogPageId.CHANGED_NS, 4096, true).data ?? Buffer.alloc(0)).nsids).toEqual([4]);
  });

  it('ANA change notice names log page 0x0C', () => {
    const { target, port, admin } = ready();
    const aer = admin.asyncEvent();
    target.anaChanged(port.id);
    expect(decodeAenResult(admin.completionOf(aer).dw0)).toEqual({ type: AenType.NOTICE, info: AenNotice.ANA, lid: LogPageId.ANA });
  });

  it('ANA changes on another port do not notify', () => {
    const { target, admin } = ready();
    const aer = admin.asyncEvent();
    target.anaChanged(2);
    expect(admin.transport.completionsFor(aer.cid)).toEqual([]);
  });

  it('a subsystem without ANA sends no ANA notice', () => {
    const { target, port, admin, oaes } = ready({ ana: false });
    expect(oaes).toBe(AenConfig.NS_ATTR);
    const aer = admin.asyncEvent();
    target.anaChanged(port.id);
    expect(admin.transport.completionsFor(aer.cid)).toEqual([]);
  });

  it('a discovery controller gets the discovery log change notice (log page 0x70)', () => {
    const { target, admin, oaes } = ready({ subnqn: WELL_KNOWN_DISCOVERY_NQN });
    expect(oaes >>> 0).toBe(AenConfig.DISC);
    const aer = admin.asyncEvent();
    const gen = target.genctr;
    target.discoveryChanged();
    expect(target.genctr).toBe(gen + 1n);
    expect(decodeAenResult(admin.completionOf(aer).dw0)).toEqual({ type: AenType.NOTICE, info: AenNotice.DISC_CHANGE, lid: LogPageId.DISCOVERY });
  });

  it('Set Features Asynchronous Event Configuration without NS_ATTR suppresses namespace notices', () => {
    const { target, subsys, admin } = ready();
    const set = admin.setFeatures(FeatureId.ASYNC_EVENT, AenConfig.ANA);
    expect(set.status).toBe(0);
    expect(admin.getFeatures(FeatureId.ASYNC_EVENT).dw0).toBe(AenConfig.ANA);
    const aer = admin.asyncEvent();
    target.nsChanged(subsys, 1);
    expect(admin.transport.completionsFor(aer.cid)).toEqual([]);
    // Not queued either: re-enabling later does not replay it.
    expect(admin.setFeatures(FeatureId.ASYNC_EVENT, AenConfig.ANA | AenConfig.NS_ATTR).status).toBe(0);
    expect(admin.transport.completionsFor(aer.cid)).toEqual([]);
  });

  it('Set Features Asynchronous Event Configuration with an unsupported bit: Invalid Field', () => {
    const { admin } = ready();
    expect(admin.setFeatures(FeatureId.ASYNC_EVENT, AenConfig.FW_ACT).status).toBe(Status.INVALID_FIELD | DNR);
    expect(admin.getFeatures(FeatureId.ASYNC_EVENT).dw0).toBe(AenConfig.NS_ATTR | AenConfig.ANA);
  });

  it.each([
    ['controller reset (CC.EN 1 → 0)', encodeCc({ iosqes: 6, iocqes: 4 })],
    ['shutdown (CC.SHN normal)', encodeCc({ en: true, iosqes: 6, iocqes: 4, shn: 1 })],
  ])('%s forgets outstanding requests without completing them (nvmet, nvmf_tgt; the SPDK host has aborted them)', async (_name, cc) => {
    const { admin } = ready();
    const held = [admin.asyncEvent().cid, admin.asyncEvent().cid];
    expect(admin.core.inFlight).toBe(2);
    const set = admin.propertySet(PropertyOffset.CC, cc);
    expect(set.status).toBe(0);
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(aerCompletions(admin, held)).toEqual([]);
    expect(admin.core.inFlight).toBe(0);
  });

  it('AERs are not counted in the command latency histogram (they stay outstanding by design)', () => {
    const { subsys, admin } = ready();
    admin.asyncEvent();
    const name = 'async-event';
    expect(subsys.opcodeCounts[name]).toBe(1);
    expect(subsys.latency[name]?.count).toBe(0);
  });

  it('controller teardown drops outstanding requests without completing them', () => {
    const { subsys, cntlid, admin } = ready();
    const held = [admin.asyncEvent().cid];
    subsys.controllers.get(cntlid)?.teardown('test');
    expect(aerCompletions(admin, held)).toEqual([]);
    expect(admin.transport.closes).toEqual(['test']);
  });
});
