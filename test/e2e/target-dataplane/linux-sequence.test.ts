// The Linux host's connect / identify / I/O / shutdown sequence (as drivers/nvme/host/{tcp,fabrics,core}.c send it) against the TS target over real sockets.
import { Buffer } from 'node:buffer';
import { afterEach, describe, expect, it } from 'vitest';
import {
  AdminOpcode,
  DNR,
  PduType,
  Status,
  decodeActiveNsList,
  decodeAnaLog,
  decodeIdentifyController,
  decodeIdentifyNamespace,
  decodeNsDescList,
  encodeSqe,
} from '../../../protocol/index.js';
import { HOSTNQN, SUBNQN, adminCmd, bringUpAdmin, connectIo, expectOk, getLog, identify, propGet, propSet, readCmd, setFeatures, startTarget, writeCmd, type Harness } from './fixture.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('Linux host connect sequence', () => {
  it('ICResp echoes digests with CPDA 0 and MAXH2CDATA 131072', async () => {
    h = await startTarget();
    const p = await h.peer();
    const ic = await p.ic({ hdgst: true, ddgst: false });
    expect(ic).toMatchObject({ pfv: 0, cpda: 0, dgst: 1, maxh2cdata: 131072 });
  });

  it('admin connect, properties, identify with the host checks, queues, AER, namespace scan, I/O, shutdown', async () => {
    h = await startTarget();
    const admin = await h.peer();
    const c = await admin.connect({ subnqn: SUBNQN, hostnqn: HOSTNQN, kato: 5000 });
    expect(c.cqe?.status).toBe(0);
    const cntlid = (c.cqe?.dw0 ?? 0) & 0xffff;
    expect(cntlid).toBeGreaterThanOrEqual(1);
    expect(c.cqe?.sqhd).toBe(1);

    const cap = await admin.command(propGet(0, true));
    const capv = (BigInt(cap.cqe?.dw1 ?? 0) << 32n) | BigInt(cap.cqe?.dw0 ?? 0);
    expect(Number(capv & 0xffffn)).toBe(1023);
    expect(Number((capv >> 24n) & 0xffn)).toBe(15);
    expect((capv >> 37n) & 1n).toBe(1n);
    // CSS bit 43, I/O command sets: the Linux host then writes CC.CSS 110b (nvme_enable_ctrl).
    expect((capv >> 43n) & 1n).toBe(1n);
    expectOk(await admin.command(propSet(0x14, 0x460060)));
    expectOk(await admin.command(propSet(0x14, 0x460061)));
    expect((await admin.command(propGet(0x1c))).cqe?.dw0).toBe(1);
    expect((await admin.command(propGet(0x08))).cqe?.dw0).toBe(0x10400);

    const idc = await admin.command(identify(1));
    expect(idc.data.length).toBe(4096);
    const id = decodeIdentifyController(idc.data);
    expect(id.cntlid).toBe(cntlid);
    expect(id.kas).toBe(10);
    expect(id.ioccsz).toBe((64 + 16384) / 16);
    expect(id.iorcsz).toBe(1);
    expect(id.icdoff).toBe(0);
    expect(id.sgls).toBe(0x00100001);
    expect(id.maxcmd).toBe(1024);
    expect(id.cntrltype).toBe(1);
    expect(id.subnqn).toBe(SUBNQN);
    expect(id.cmic).toBe(0x0b);
    expect(id.ctratt).toBe(0x41);
    expect(id.oaes).toBe(0x900);
    expect(id.mnan).toBe(id.nn);
    expect(id.mdts).toBe(8);
    expect(id.oncs & 0x0d).toBe(0x0d);
    expect(id.vwc).toBe(1);
    expect(id.sn.length).toBeGreaterThan(0);
    expect(idc.data.subarray(4, 24).every((b) => b >= 0x20 && b <= 0x7e)).toBe(true);

    // ANA log must fit MDTS and the host's buffer (16 + NANAGRPID*32 + MNAN*4).
    const anaSize = 16 + id.nanagrpid * 32 + id.mnan * 4;
    expect(anaSize).toBeLessThanOrEqual(4096 * 2 ** id.mdts);
    const ana = await admin.command(getLog(0x0c, anaSize, { rae: true }));
    const al = decodeAnaLog(ana.data);
    expect(al.groups[0]).toMatchObject({ grpid: 1, state: 1, nsids: [1] });
    expectOk(await admin.command(getLog(0x05, 4096, { nsid: 0 })));
    const smart = await admin.command(getLog(0x02, 512));
    expect(smart.cqe?.status).toBe(0);

    const nq = await admin.command(setFeatures(0x07, (3 << 16) | 3));
    expect(nq.cqe?.dw0).toBe((3 << 16) | 3);

    const io = await h.peer();
    const ioc = await connectIo(io, cntlid, 1);
    expect(ioc.cqe?.status).toBe(0);
    expect((ioc.cqe?.dw0 ?? 0) & 0xffff).toBe(cntlid);

    expectOk(await admin.command(setFeatures(0x0b, 0x900)));
    admin.send({ type: PduType.CAPSULE_CMD, sqe: adminCmd(AdminOpcode.ASYNC_EVENT, { cid: 31 }), data: [] });

    expectOk(await admin.command(identify(0x06, 0, 0)));
    const list = decodeActiveNsList((await admin.command(identify(2, 0))).data);
    expect(list).toEqual([1]);
    const desc = decodeNsDescList((await admin.command(identify(3, 1))).data);
    expect(desc.map((d) => d.nidt)).toEqual([3, 2, 4]);
    const ns = decodeIdentifyNamespace((await admin.command(identify(0, 1))).data);
    expect(ns.nsze).toBe(BigInt((64 * 1024 * 1024) / 512));
    expect(ns.ncap).toBe(ns.nsze);
    expect(ns.lbaf[0]?.lbads).toBe(9);
    expect(ns.anagrpid).toBe(1);
    expect(ns.nmic).toBe(1);
    // inactive NSID: zeros with success
    const inactive = await admin.command(identify(0, 7));
    expect(inactive.cqe?.status).toBe(0);
    expect(inactive.data.every((b) => b === 0)).toBe(true);

    // partition scan read of LBA 0 (unwritten → zeros), then write/read back
    const r0 = await io.command(readCmd(1, 0n, 8));
    expect(r0.data.length).toBe(4096);
    expect(r0.data.every((b) => b === 0)).toBe(true);
    const pattern = Buffer.from(Buffer.alloc(4096, 0).map((_, i) => (i * 7) & 0xff));
    expectOk(await io.command(writeCmd(1, 16n, 8, { inCapsule: true }), { data: Buffer.from(pattern), inCapsule: true }));
    expect((await io.command(readCmd(1, 16n, 8))).data.equals(Buffer.from(pattern))).toBe(true);
    const big = Buffer.from(Buffer.alloc(131072).map((_, i) => (i * 13 + 5) & 0xff));
    const w = await io.command(writeCmd(1, 256n, 256), { data: Buffer.from(big) });
    expect(w.cqe?.status).toBe(0);
    expect(w.pdus[0]?.type).toBe(PduType.R2T);
    expect((await io.command(readCmd(1, 256n, 256))).data.equals(Buffer.from(big))).toBe(true);
    expectOk(await io.command(encodeSqe({ opcode: 0, cid: 9, nsid: 1 })));

    // shutdown: CC.SHN=1 → SHST complete; the held AER is not completed, as nvmet_clear_ctrl and nvmf_tgt leave it
    // (the SPDK host has aborted it locally by then; docs/peers.md).
    expectOk(await admin.command(propSet(0x14, 0x464001)));
    const csts = await admin.command(propGet(0x1c));
    expect((csts.cqe?.dw0 ?? 0) & 0xc).toBe(0x8);
    expect(admin.stray()).toEqual([]);
    io.close();
    admin.close();
    await admin.closed();
  });

  it('SQHD advances mod sqsize+1 and is 0xFFFF with SQ flow control disabled', async () => {
    h = await startTarget();
    const admin = await h.peer();
    const cntlid = await bringUpAdmin(admin);
    expectOk(await admin.command(setFeatures(0x07, 0x10001)));
    const io = await h.peer();
    const c = await connectIo(io, cntlid, 1, { sqsize: 2 });
    expect(c.cqe?.sqhd).toBe(1);
    const heads: number[] = [];
    for (let i = 0; i < 4; i++) heads.push((await io.command(readCmd(1, 0n, 1))).cqe?.sqhd ?? -1);
    expect(heads).toEqual([2, 0, 1, 2]);
    const io2 = await h.peer();
    const c2 = await connectIo(io2, cntlid, 2, { cattr: 4 });
    expect(c2.cqe?.sqhd).toBe(0xffff);
    // SUCCESS flag on the last C2HData, no CapsuleResp.
    const r = await io2.command(readCmd(1, 0n, 8));
    expect(r.cqe).toBeUndefined();
    expect(r.data.length).toBe(4096);
    const err = await io2.command(readCmd(1, 1n << 40n, 1));
    expect(err.cqe?.status).toBe(Status.LBA_RANGE | DNR);
    expect(err.cqe?.sqhd).toBe(0xffff);
  });
});
