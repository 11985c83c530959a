// Property Get/Set (NVMe-oF 1.1 §3.4, §3.5) over CAP, VS, CC and CSTS, and the controller's CC → CSTS transitions:
// enable, reset and shutdown notification (NVMe Base 2.0 Figures 41-42, CC.EN/SHN and CSTS.RDY/CFS/SHST).
import { describe, expect, it } from 'vitest';
import {
  AdminOpcode,
  CapCss,
  CcShn,
  CstsShst,
  DNR,
  NvmeVersion,
  PropertyOffset,
  Status,
  cqeResult64,
  decodeCap,
  decodeCc,
  decodeCsts,
  encodeCc,
  encodeSqe,
} from '../../protocol/index.js';
import { WELL_KNOWN_DISCOVERY_NQN } from './index.js';
import { HostQueue, controllerOf, makeTarget, type Completion } from './testing/fake-transport.js';

/** CC of an NVM host: EN plus the 64-byte SQE / 16-byte CQE sizes (NVMe Base 2.0 Figure 41). */
const CC_EN = encodeCc({ en: true, iosqes: 6, iocqes: 4 });

function connected(sub: Parameters<typeof makeTarget>[0] = {}, subnqn?: string) {
  const t = makeTarget(sub);
  const admin = new HostQueue(t.target, t.port);
  const c = admin.connect({ qid: 0, ...(subnqn !== undefined ? { subnqn } : {}) });
  expect(c.status).toBe(0);
  return { ...t, admin, cntlid: c.dw0 & 0xffff };
}

function csts(admin: HostQueue) {
  const c = admin.propertyGet(PropertyOffset.CSTS);
  expect(c.status).toBe(0);
  return decodeCsts(c.dw0);
}

function ok(c: Completion): Completion {
  expect(c.status).toBe(0);
  return c;
}

describe('Property Get', () => {
  it('CAP (8 bytes): MQES from maxQueueSize, TO 7.5 s, NVM and I/O command sets, 4 KiB pages', () => {
    const { admin } = connected({ maxQueueSize: 256 });
    const c = ok(admin.propertyGet(PropertyOffset.CAP));
    const cap = decodeCap(cqeResult64(c));
    expect(cap.mqes).toBe(255);
    expect(cap.to).toBe(15);
    expect(cap.css).toBe(CapCss.NVM | CapCss.IO_CMD_SETS);
    expect(cap.mpsmin).toBe(0);
    expect(cap.mpsmax).toBe(0);
    expect(cap.dstrd).toBe(0);
    expect(c.dw1).not.toBe(0);
  });

  it('CAP read as 4 bytes returns the low dword only', () => {
    const { admin } = connected();
    const full = cqeResult64(ok(admin.propertyGet(PropertyOffset.CAP)));
    const low = ok(admin.propertyGet(PropertyOffset.CAP, false));
    expect(low.dw0).toBe(Number(full & 0xffff_ffffn));
    expect(low.dw1).toBe(0);
    expect(decodeCap(BigInt(low.dw0)).mqes).toBe(1023);
  });

  it('VS is NVMe 1.4.0 (CTRATT TBKAS and ANA are 1.4 features)', () => {
    const { admin } = connected();
    expect(ok(admin.propertyGet(PropertyOffset.VS)).dw0).toBe(NvmeVersion.V1_4);
  });

  it('CC and CSTS start at 0', () => {
    const { admin } = connected();
    expect(ok(admin.propertyGet(PropertyOffset.CC)).dw0).toBe(0);
    expect(ok(admin.propertyGet(PropertyOffset.CSTS)).dw0).toBe(0);
  });

  it.each([
    ['INTMS', PropertyOffset.INTMS],
    ['INTMC', PropertyOffset.INTMC],
    ['NSSR', PropertyOffset.NSSR],
    ['CRTO', PropertyOffset.CRTO],
    ['0x04 (inside CAP)', 0x04],
    ['0x1000', 0x1000],
  ])('unimplemented offset %s: Invalid Field, DNR', (_n, offset) => {
    const { admin } = connected();
    const c = admin.propertyGet(offset);
    expect(c.status).toBe(Status.INVALID_FIELD | DNR);
    expect(c.dw0).toBe(0);
  });

  it('on an I/O queue: Invalid Opcode (admin queue only)', () => {
    const { target, port, admin, cntlid } = connected();
    ok(admin.propertySet(PropertyOffset.CC, CC_EN));
    const io = new HostQueue(target, port);
    ok(io.connect({ qid: 1, cntlid }));
    expect(io.propertyGet(PropertyOffset.CSTS).status).toBe(Status.INVALID_OPCODE | DNR);
    expect(io.propertySet(PropertyOffset.CC, 0).status).toBe(Status.INVALID_OPCODE | DNR);
    expect(csts(admin).rdy).toBe(true);
  });
});

describe('Property Set and CC/CSTS transitions', () => {
  it('CC.EN 0 → 1 sets CSTS.RDY and CC reads back as written', () => {
    const { admin, subsys, cntlid } = connected();
    ok(admin.propertySet(PropertyOffset.CC, CC_EN));
    expect(ok(admin.propertyGet(PropertyOffset.CC)).dw0).toBe(CC_EN);
    expect(csts(admin)).toMatchObject({ rdy: true, cfs: false, shst: CstsShst.NORMAL });
    expect(controllerOf(subsys, cntlid).ready).toBe(true);
  });

  it('CC.EN 1 → 0 clears CSTS.RDY, and admin commands then fail with Command Sequence Error', () => {
    const { admin } = connected();
    ok(admin.propertySet(PropertyOffset.CC, CC_EN));
    ok(admin.identify(0x01));
    ok(admin.propertySet(PropertyOffset.CC, encodeCc({ iosqes: 6, iocqes: 4 })));
    expect(csts(admin)).toMatchObject({ rdy: false, cfs: false });
    expect(admin.identify(0x01).status).toBe(Status.CMD_SEQ_ERROR | DNR);
    // Enabling again makes it ready again.
    ok(admin.propertySet(PropertyOffset.CC, CC_EN));
    expect(csts(admin).rdy).toBe(true);
    expect(admin.identify(0x01).status).toBe(0);
  });

  it('admin commands before CC.EN: Command Sequence Error', () => {
    const { admin } = connected();
    expect(admin.identify(0x01).status).toBe(Status.CMD_SEQ_ERROR | DNR);
    expect(admin.exec(encodeSqe({ opcode: AdminOpcode.KEEP_ALIVE, cid: 500 })).status).toBe(Status.CMD_SEQ_ERROR | DNR);
  });

  it('I/O queue commands before CC.EN: Command Sequence Error', () => {
    const { target, port, cntlid } = connected();
    const io = new HostQueue(target, port);
    ok(io.connect({ qid: 1, cntlid }));
    expect(io.exec(encodeSqe({ opcode: 0x00, cid: 3, nsid: 1 })).status).toBe(Status.CMD_SEQ_ERROR | DNR);
  });

  it('shutdown notification: CSTS.SHST complete and RDY cleared; SHN back to 0 clears SHST', () => {
    const { admin, subsys, cntlid } = connected();
    ok(admin.propertySet(PropertyOffset.CC, CC_EN));
    const shn = encodeCc({ ...decodeCc(CC_EN), shn: CcShn.NORMAL });
    ok(admin.propertySet(PropertyOffset.CC, shn));
    expect(csts(admin)).toMatchObject({ rdy: false, shst: CstsShst.COMPLETE, cfs: false });
    expect(subsys.controllers.get(cntlid)?.state).toBe('shutdown');
    // Re-enable after shutdown: clear SHN and EN, then set EN again.
    ok(admin.propertySet(PropertyOffset.CC, 0));
    expect(csts(admin).shst).toBe(CstsShst.NORMAL);
    expect(subsys.controllers.get(cntlid)?.state).toBe('live');
    ok(admin.propertySet(PropertyOffset.CC, CC_EN));
    expect(csts(admin)).toMatchObject({ rdy: true, shst: CstsShst.NORMAL });
  });

  it('abrupt shutdown is reported the same way', () => {
    const { admin } = connected();
    ok(admin.propertySet(PropertyOffset.CC, CC_EN));
    ok(admin.propertySet(PropertyOffset.CC, encodeCc({ ...decodeCc(CC_EN), shn: CcShn.ABRUPT })));
    expect(csts(admin)).toMatchObject({ rdy: false, shst: CstsShst.COMPLETE });
  });

  it.each([
    ['IOSQES 5', encodeCc({ en: true, iosqes: 5, iocqes: 4 })],
    ['IOCQES 0', encodeCc({ en: true, iosqes: 6, iocqes: 0 })],
    ['MPS 1 (8 KiB pages)', encodeCc({ en: true, iosqes: 6, iocqes: 4, mps: 1 })],
    ['AMS 1', encodeCc({ en: true, iosqes: 6, iocqes: 4, ams: 1 })],
    ['CSS 7 (admin only)', encodeCc({ en: true, iosqes: 6, iocqes: 4, css: 7 })],
  ])('enable with %s: CSTS.CFS instead of RDY, the Property Set itself succeeds', (_n, cc) => {
    const { admin } = connected();
    ok(admin.propertySet(PropertyOffset.CC, cc));
    expect(csts(admin)).toMatchObject({ rdy: false, cfs: true });
  });

  it('CSS 6 (all supported I/O command sets) is accepted', () => {
    const { admin } = connected();
    ok(admin.propertySet(PropertyOffset.CC, encodeCc({ en: true, iosqes: 6, iocqes: 4, css: 6 })));
    expect(csts(admin)).toMatchObject({ rdy: true, cfs: false });
  });

  it('a discovery controller also accepts zero entry sizes (it has no I/O queues)', () => {
    const { admin } = connected({}, WELL_KNOWN_DISCOVERY_NQN);
    ok(admin.propertySet(PropertyOffset.CC, encodeCc({ en: true })));
    expect(csts(admin)).toMatchObject({ rdy: true, cfs: false });
  });

  it('an NVM controller refuses zero entry sizes', () => {
    const { admin } = connected();
    ok(admin.propertySet(PropertyOffset.CC, encodeCc({ en: true })));
    expect(csts(admin)).toMatchObject({ rdy: false, cfs: true });
  });

  it('rewriting CC with EN still 1 keeps RDY', () => {
    const { admin } = connected();
    ok(admin.propertySet(PropertyOffset.CC, CC_EN));
    ok(admin.propertySet(PropertyOffset.CC, CC_EN));
    expect(csts(admin).rdy).toBe(true);
  });

  it.each([
    ['CAP', PropertyOffset.CAP],
    ['VS', PropertyOffset.VS],
    ['CSTS', PropertyOffset.CSTS],
    ['NSSR', PropertyOffset.NSSR],
  ])('Property Set of %s: Invalid Field, DNR, CC and CSTS unchanged', (_n, offset) => {
    const { admin } = connected();
    ok(admin.propertySet(PropertyOffset.CC, CC_EN));
    expect(admin.propertySet(offset, 0x1).status).toBe(Status.INVALID_FIELD | DNR);
    expect(ok(admin.propertyGet(PropertyOffset.CC)).dw0).toBe(CC_EN);
    expect(csts(admin).rdy).toBe(true);
  });

  it('failed property commands go to the error log with their CID', () => {
    const { admin, subsys, cntlid } = connected();
    const c = admin.propertyGet(0x1000);
    const ctrl = controllerOf(subsys, cntlid);
    expect(ctrl.errorCount).toBe(1n);
    expect(ctrl.errors[0]).toMatchObject({ sqid: 0, cmdid: c.cid, status: Status.INVALID_FIELD | DNR, paramErrorLocation: 44 });
  });
});
