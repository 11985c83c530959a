// Sizes a host chooses outright (issue 48): Get Log Page NUMD (32 bits of dwords, NVMe Base 2.0 §5.16) and LPO
// (64 bits), and the SGL of Dataset Management and the reservation commands, each of which the target allocates or
// gathers in full. Past MDTS (Subsystem.hostSizedMax; 1 MiB by default, and for the discovery controller, which
// advertises none) the command is refused with Invalid Field (Figure 275, MDTS) before anything is allocated or an
// R2T sent; at and below it the command succeeds. SQEs are built from bytes (protocol/testing/pdu-builder.ts), not by
// the encoders under test.
import { describe, expect, it } from 'vitest';
import { DNR, Status } from '../../protocol/index.js';
import { sqe } from '../../protocol/testing/pdu-builder.js';
import { RamBackend } from '../backend/index.js';
import { TargetNamespace, WELL_KNOWN_DISCOVERY_NQN } from './index.js';
import { HostQueue, SUBNQN, controllerOf, makeTarget } from './testing/fake-transport.js';

const MIB = 1 << 20;
const GET_LOG_PAGE = 0x02;
const DSM = 0x09;
const RESV_REGISTER = 0x0d;
const RESV_REPORT = 0x0e;
const LID_ERROR = 0x01;
const LID_DISCOVERY = 0x70;

function setup(subnqn = SUBNQN) {
  const t = makeTarget();
  t.subsys.addNamespace(new TargetNamespace(SUBNQN, { nsid: 1, backend: { type: 'ram', size: MIB } }, new RamBackend(MIB)));
  const admin = new HostQueue(t.target, t.port);
  const cntlid = admin.connectAndEnable({ subnqn });
  const subsys = subnqn === WELL_KNOWN_DISCOVERY_NQN ? t.target.discovery : t.subsys;
  const ctrl = controllerOf(subsys, cntlid);
  return { ...t, admin, cntlid, ctrl };
}

/** Get Log Page: NUMD split into NUMDL (CDW10 31:16) and NUMDU (CDW11 15:0), LPO into CDW12/CDW13. */
function getLog(cid: number, lid: number, numd: number, sglLen: number, lpo = 0n): Buffer {
  const b = sqe({ opcode: GET_LOG_PAGE, cid, nsid: 0xffffffff, sglLen, cdw10: (lid | ((numd & 0xffff) << 16)) >>> 0 });
  b.writeUInt32LE(Math.floor(numd / 0x10000), 44);
  b.writeUInt32LE(Number(lpo & 0xffffffffn), 48);
  b.writeUInt32LE(Number(lpo >> 32n), 52);
  return b;
}

describe('Get Log Page NUMD and LPO', () => {
  for (const [name, subnqn, lid] of [
    ['I/O controller', SUBNQN, LID_ERROR],
    ['discovery controller (MDTS 0)', WELL_KNOWN_DISCOVERY_NQN, LID_DISCOVERY],
  ] as const) {
    describe(name, () => {
      it.each([
        ['0 (one dword)', 0],
        ['the largest within 1 MiB', MIB / 4 - 1],
      ])('NUMD %s: the page, zero-padded to the length asked', (_, numd) => {
        const { admin } = setup(subnqn);
        const len = (numd + 1) * 4;
        const c = admin.exec(getLog(admin.cid(), lid, numd, len));
        expect(c.status).toBe(0);
        expect(c.data?.length).toBe(len);
      });

      it.each([
        ['one dword past 1 MiB', MIB / 4, MIB + 4],
        ['2^31', 2 ** 31, 0xffffffff],
        ['2^32 − 1', 2 ** 32 - 1, 0xffffffff],
      ])('NUMD %s: Invalid Field at CDW10, nothing transferred', (_, numd, sglLen) => {
        const { admin, ctrl } = setup(subnqn);
        const cid = admin.cid();
        const c = admin.exec(getLog(cid, lid, numd, sglLen));
        expect(c.status).toBe(Status.INVALID_FIELD | DNR);
        expect(c.data).toBeUndefined();
        expect(ctrl.errors[0]).toMatchObject({ cmdid: cid, paramErrorLocation: 40 });
      });

      it.each([2n ** 31n, 2n ** 32n, 2n ** 64n - 4n])('LPO %d past the page: zeros, no throw', (lpo) => {
        const { admin } = setup(subnqn);
        const c = admin.exec(getLog(admin.cid(), lid, 3, 16, lpo));
        expect(c.status).toBe(0);
        expect(c.data).toEqual(Buffer.alloc(16));
      });
    });
  }
});

describe('SGL lengths the target gathers in full', () => {
  function io() {
    const s = setup();
    const q = new HostQueue(s.target, s.port);
    expect(q.connect({ qid: 1, cntlid: s.cntlid }).status).toBe(0);
    return { ...s, q };
  }

  it.each([
    ['NR+1 ranges exactly (16)', 16],
    ['4096 (what Linux sends)', 4096],
    ['1 MiB', MIB],
  ])('DSM with an SGL of %s: data asked for', (_, len) => {
    const { q } = io();
    const req = q.submit(sqe({ opcode: DSM, cid: q.cid(), nsid: 1, sglLen: len, cdw10: 0 }));
    expect(q.transport.dataRequests.map((d) => d.req)).toEqual([req]);
    expect(req.dataLen).toBe(len);
  });

  it.each([
    ['1 MiB + 1', MIB + 1],
    ['2^31', 2 ** 31],
    ['2^32 − 1', 2 ** 32 - 1],
  ])('DSM with an SGL of %s: Invalid Field at the SGL length, no R2T', (_, len) => {
    const { q } = io();
    const c = q.exec(sqe({ opcode: DSM, cid: q.cid(), nsid: 1, sglLen: len, cdw10: 255 }));
    expect(c.status).toBe(Status.INVALID_FIELD | DNR);
    expect(q.transport.dataRequests).toEqual([]);
  });

  it.each([MIB + 1, 2 ** 31, 2 ** 32 - 1])('Reservation Register with an SGL of %d bytes: Invalid Field, no R2T', (len) => {
    const { q } = io();
    const c = q.exec(sqe({ opcode: RESV_REGISTER, cid: q.cid(), nsid: 1, sglLen: len }));
    expect(c.status).toBe(Status.INVALID_FIELD | DNR);
    expect(q.transport.dataRequests).toEqual([]);
  });

  /** Reservation Report: NUMD in CDW10 (0's based dwords), EDS in CDW11 bit 0 (NVMe Base 2.0 §7.6). */
  function report(cid: number, numd: number, sglLen: number): Buffer {
    const b = sqe({ opcode: RESV_REPORT, cid, nsid: 1, sglLen, cdw10: numd });
    b.writeUInt32LE(1, 44);
    return b;
  }

  it.each([0, 256 * 1024 / 4 - 1])('Reservation Report NUMD %d: the report, padded to the length asked', (numd) => {
    const { q } = io();
    const c = q.exec(report(q.cid(), numd, (numd + 1) * 4));
    expect(c.status).toBe(0);
    expect(c.data?.length).toBe((numd + 1) * 4);
  });

  it.each([256 * 1024 / 4, 2 ** 31, 2 ** 32 - 1])('Reservation Report NUMD %d: Invalid Field', (numd) => {
    const { q } = io();
    const c = q.exec(report(q.cid(), numd, 0xffffffff));
    expect(c.status).toBe(Status.INVALID_FIELD | DNR);
    expect(c.data).toBeUndefined();
  });
});
