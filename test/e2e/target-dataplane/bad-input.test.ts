// Bad input over real sockets: malformed PDUs → C2HTermReq + close of that connection only; bad commands → exact status + DNR.
import { Buffer } from 'node:buffer';
import { afterEach, describe, expect, it } from 'vitest';
import { DNR, Fes, NvmOpcode, PduType, Status, encodeConnectCmd, encodeConnectData, encodeRwCmd, encodeSqe, sglInCapsule, sglTransport } from '../../../protocol/index.js';
import { HOSTNQN, SUBNQN, adminCmd, bringUpAdmin, connectIo, defaultSubsystem, expectOk, nextCid, readCmd, setFeatures, startTarget, writeCmd, type Harness } from './fixture.js';
import type { RawPeer } from './fixture.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function ioQueue(hh: Harness): Promise<{ admin: RawPeer; io: RawPeer; cntlid: number }> {
  const admin = await hh.peer();
  const cntlid = await bringUpAdmin(admin);
  expectOk(await admin.command(setFeatures(0x07, 0x30003)));
  const io = await hh.peer();
  expectOk(await connectIo(io, cntlid, 1));
  return { admin, io, cntlid };
}

describe('malformed PDUs', () => {
  it('bad hlen → C2HTermReq FES 1 FEI 2, only that connection closes, another controller keeps doing I/O', async () => {
    h = await startTarget();
    const other = await ioQueue(h);
    const bad = await h.peer();
    // Without digests, whatever NVME_TCP_TEST_DIGESTS says: the bytes below are a digest-less capsule with only its
    // HLEN wrong (with HDGST on, its FLAGS would be wrong first).
    await bad.ic({ hdgst: false, ddgst: false });
    const sqe = readCmd(1, 0n, 1);
    const pdu = Buffer.alloc(72);
    pdu[0] = PduType.CAPSULE_CMD;
    pdu[2] = 70; // wrong hlen
    pdu[3] = 0;
    pdu.writeUInt32LE(72, 4);
    sqe.copy(pdu, 8);
    bad.sendRaw(pdu);
    const t = await bad.nextPdu();
    expect(t.type).toBe(PduType.C2H_TERM_REQ);
    if (t.type !== PduType.C2H_TERM_REQ) return;
    expect(t.fes).toBe(Fes.INVALID_HEADER_FIELD);
    expect(t.fei).toBe(2);
    expect(t.errorData.subarray(0, 8).equals(pdu.subarray(0, 8))).toBe(true);
    await bad.closed();
    expectOk(await other.io.command(readCmd(1, 0n, 8)));
    expect(h.svc.stats().pduErrorsByFes['0x01']).toBe(1);
  });

  it('CapsuleCmd before ICReq → FES 2 (PDU sequence error)', async () => {
    h = await startTarget();
    const p = await h.peer();
    p.send({ type: PduType.CAPSULE_CMD, sqe: readCmd(1, 0n, 1), data: [] });
    const t = await p.nextPdu();
    expect(t).toMatchObject({ type: PduType.C2H_TERM_REQ, fes: Fes.PDU_SEQUENCE_ERROR });
    await p.closed();
  });

  it('header digest mismatch → FES 3', async () => {
    h = await startTarget();
    const p = await h.peer();
    await p.ic({ hdgst: true });
    const enc = Buffer.concat(p.framing.hdgst ? [Buffer.concat(encodeForTest(p, readCmd(1, 0n, 1)))] : []);
    enc[72] = (enc[72] as number) ^ 0xff;
    p.sendRaw(enc);
    expect(await p.nextPdu()).toMatchObject({ type: PduType.C2H_TERM_REQ, fes: Fes.HEADER_DIGEST_ERROR });
    await p.closed();
  });

  it('H2CData with unknown ttag → FES 1 FEI 10; out-of-order datao → FES 4', async () => {
    h = await startTarget();
    const { io } = await ioQueue(h);
    const sqe = writeCmd(1, 0n, 16);
    const cid = sqe.readUInt16LE(2);
    io.send({ type: PduType.CAPSULE_CMD, sqe, data: [] });
    const r2t = await io.nextPdu();
    expect(r2t).toMatchObject({ type: PduType.R2T, cccid: cid, r2to: 0, r2tl: 8192 });
    if (r2t.type !== PduType.R2T) return;
    io.send({ type: PduType.H2C_DATA, cccid: cid, ttag: r2t.ttag + 1000, datao: 0, last: true, data: [Buffer.alloc(8192)] });
    expect(await io.nextPdu()).toMatchObject({ type: PduType.C2H_TERM_REQ, fes: Fes.INVALID_HEADER_FIELD, fei: 10 });
    await io.closed();

    const second = await ioQueue(h);
    const sqe2 = writeCmd(1, 0n, 16);
    second.io.send({ type: PduType.CAPSULE_CMD, sqe: sqe2, data: [] });
    const r2 = await second.io.nextPdu();
    if (r2.type !== PduType.R2T) throw new Error('no R2T');
    second.io.send({ type: PduType.H2C_DATA, cccid: r2.cccid, ttag: r2.ttag, datao: 4096, last: true, data: [Buffer.alloc(4096)] });
    expect(await second.io.nextPdu()).toMatchObject({ type: PduType.C2H_TERM_REQ, fes: Fes.DATA_OUT_OF_RANGE, fei: 12 });
    await second.io.closed();
  });

  it('H2CTermReq from the host closes the connection', async () => {
    h = await startTarget();
    const p = await h.peer();
    await p.ic();
    p.send({ type: PduType.H2C_TERM_REQ, fes: 1, fei: 0, errorData: Buffer.alloc(8) });
    await p.closed();
  });

  it('a socket that sends no ICReq within the timeout is closed', async () => {
    h = await startTarget({}, { icReqTimeoutS: 0.2 });
    const p = await h.peer();
    const t0 = Date.now();
    await p.closed(2000);
    expect(Date.now() - t0).toBeLessThan(1500);
    const p2 = await h.peer();
    await p2.ic();
    await p2.closed(2000); // no Connect after ICResp either
  });

  // icReqTimeoutS is a library option too: past 2^31−1 ms a plain setTimeout would close the socket after 1 ms.
  it.each([(2 ** 31 - 1) / 1000, 2 ** 31 / 1000, (2 ** 32 - 1) / 1000])('an ICReq timeout of %d s waits (no early close)', async (s) => {
    h = await startTarget({}, { icReqTimeoutS: s });
    const p = await h.peer();
    await new Promise((r) => setTimeout(r, 200));
    expect(p.isClosed).toBe(false);
    await p.ic();
    await new Promise((r) => setTimeout(r, 200));
    expect(p.isClosed).toBe(false);
  });

  it('HPDA beyond 31 is refused (HPDA 0-31 is honoured: test/e2e/other-initiators.test.ts)', async () => {
    h = await startTarget();
    const p = await h.peer();
    p.send({ type: PduType.IC_REQ, pfv: 0, hpda: 32, dgst: 0, maxr2t: 0 });
    expect(await p.nextPdu()).toMatchObject({ type: PduType.C2H_TERM_REQ, fei: 10 });
    await p.closed();
  });

  it('random bytes after ICReq never crash the target', async () => {
    h = await startTarget();
    for (let i = 0; i < 20; i++) {
      const p = await h.peer();
      await p.ic();
      const junk = Buffer.from(Buffer.alloc(200).map(() => Math.floor(Math.random() * 256)));
      junk[0] = [4, 6, 2, 0][i % 4] as number;
      p.sendRaw(junk);
      await p.closed(3000).catch(() => p.close());
    }
    const { io } = await ioQueue(h);
    expectOk(await io.command(readCmd(1, 0n, 1)));
  });
});

function encodeForTest(p: RawPeer, sqe: Buffer): Buffer[] {
  const out: Buffer[] = [];
  const orig = p.socket.write.bind(p.socket);
  // Capture what send() would write, without sending it.
  (p.socket as unknown as { write: (b: Buffer) => boolean }).write = (b: Buffer) => {
    out.push(Buffer.from(b));
    return true;
  };
  p.send({ type: PduType.CAPSULE_CMD, sqe, data: [] });
  (p.socket as unknown as { write: typeof orig }).write = orig;
  return out;
}

describe('bad commands → exact status with DNR', () => {
  it('I/O command errors', async () => {
    h = await startTarget({ subsystems: [defaultSubsystem({ mdts: 5, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }, { nsid: 2, backend: { type: 'ram', size: '1M' }, readOnly: true }] })] });
    const { io } = await ioQueue(h);
    const st = async (sqe: Buffer, opts: Parameters<RawPeer['command']>[1] = {}): Promise<number> => (await io.command(sqe, opts)).cqe?.status ?? -1;
    expect(await st(encodeSqe({ opcode: 0x7e, cid: nextCid(), nsid: 1 }))).toBe(Status.INVALID_OPCODE | DNR);
    expect(await st(readCmd(1, 2047n, 2))).toBe(Status.LBA_RANGE | DNR);
    expect(await st(readCmd(1, 2046n, 2))).toBe(0);
    expect(await st(readCmd(9, 0n, 1))).toBe(Status.INVALID_NS | DNR);
    // NLB beyond MDTS (5 → 128 KiB)
    expect(await st(readCmd(1, 0n, 257))).toBe(Status.INVALID_FIELD | DNR);
    // NLB beyond the SGL length
    expect(await st(encodeRwCmd({ opcode: NvmOpcode.READ, cid: nextCid(), nsid: 1, slba: 0n, nlb: 8, sgl: sglTransport(512) }))).toBe(Status.SGL_INVALID_DATA | DNR);
    // write whose SGL is shorter than NLB: rejected before any R2T
    const w = await io.command(encodeRwCmd({ opcode: NvmOpcode.WRITE, cid: nextCid(), nsid: 1, slba: 0n, nlb: 8, sgl: sglTransport(1024) }), { data: Buffer.alloc(1024) });
    expect(w.cqe?.status).toBe(Status.SGL_INVALID_DATA | DNR);
    expect(w.pdus.map((p) => p.type)).toEqual([PduType.CAPSULE_RESP]);
    // PSDT ≠ SGL, FUSE set
    const prp = readCmd(1, 0n, 1);
    prp[1] = 0x00;
    expect(await st(prp)).toBe(Status.INVALID_FIELD | DNR);
    const fused = readCmd(1, 0n, 1);
    fused[1] = 0x41;
    expect(await st(fused)).toBe(Status.INVALID_FIELD | DNR);
    // bad SGL type, in-capsule offset ≠ 0
    const badType = readCmd(1, 0n, 1);
    badType[39] = 0x40;
    expect(await st(badType)).toBe(Status.SGL_INVALID_TYPE | DNR);
    const off = encodeRwCmd({ opcode: NvmOpcode.WRITE, cid: nextCid(), nsid: 1, slba: 0n, nlb: 1, sgl: { ...sglInCapsule(512), address: 16n } });
    expect(await st(off, { data: Buffer.alloc(512), inCapsule: true })).toBe(Status.SGL_INVALID_OFFSET | DNR);
    // read-only namespace
    expect(await st(writeCmd(2, 0n, 1, { inCapsule: true }), { data: Buffer.alloc(512), inCapsule: true })).toBe(Status.NS_WRITE_PROTECTED);
    // admin opcode on the admin queue that does not exist
    expect(io.isClosed).toBe(false);
  });

  it('admin command errors', async () => {
    h = await startTarget();
    const admin = await h.peer();
    await bringUpAdmin(admin);
    expect((await admin.command(adminCmd(0x7e))).cqe?.status).toBe(Status.INVALID_OPCODE | DNR);
    expect((await admin.command(adminCmd(0x02, { cdw10: 0x42 | (127 << 16), sgl: sglTransport(512) }))).cqe?.status).toBe(Status.INVALID_LOG_PAGE | DNR);
    expect((await admin.command(adminCmd(0x06, { cdw10: 0x1f, sgl: sglTransport(4096) }))).cqe?.status).toBe(Status.INVALID_FIELD | DNR);
    // Firmware Activation notices (bit 9): not sent by this controller. SMART warnings (bits 7:0) are settable.
    expect((await admin.command(setFeatures(0x0b, 0x200))).cqe?.status).toBe(Status.INVALID_FIELD | DNR);
    expectOk(await admin.command(setFeatures(0x0b, 0x1)));
    expect((await admin.command(setFeatures(0x55, 0x1))).cqe?.status).toBe(Status.INVALID_FIELD | DNR);
    const abort = await admin.command(adminCmd(0x08, { cdw10: 5 << 16 }));
    expect(abort.cqe).toMatchObject({ status: 0, dw0: 1 });
  });
});

describe('Connect refusals carry DNR', () => {
  async function connectRaw(hh: Harness, subnqn: string, hostnqn: string, extra: { qid?: number; sqsize?: number; cntlid?: number; rawData?: Buffer } = {}): Promise<{ status: number; dw0: number }> {
    const p = await hh.peer();
    await p.ic();
    const sqe = encodeConnectCmd({ cid: 1, qid: extra.qid ?? 0, sqsize: extra.sqsize ?? 31, kato: 5000, sgl: sglInCapsule(1024) });
    const data = extra.rawData ?? encodeConnectData({ hostid: Buffer.alloc(16, 1), cntlid: extra.cntlid ?? 0xffff, subnqn, hostnqn });
    const r = await p.command(sqe, { data, inCapsule: true });
    return { status: r.cqe?.status ?? -1, dw0: r.cqe?.dw0 ?? -1 };
  }

  it('unknown subsystem, host not allowed, bad NQNs, sqsize 0, bad qid, duplicate qid', async () => {
    h = await startTarget({ subsystems: [defaultSubsystem({ hosts: [HOSTNQN] })] });
    expect(await connectRaw(h, 'nqn.2024-01.io.nope:x', HOSTNQN)).toEqual({ status: Status.CONNECT_INVALID_PARAM | DNR, dw0: (1 << 16) | 256 });
    expect((await connectRaw(h, SUBNQN, 'nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000099')).status).toBe(Status.CONNECT_INVALID_HOST | DNR);
    // An empty HOSTNQN names no host: refused behind an allow list (admitted where any host is allowed; docs/peers.md).
    expect(await connectRaw(h, SUBNQN, '')).toEqual({ status: Status.CONNECT_INVALID_HOST | DNR, dw0: (1 << 16) | 512 });
    const long = Buffer.alloc(1024);
    Buffer.from(SUBNQN).copy(long, 256);
    long.fill(0x61, 512, 768);
    expect(await connectRaw(h, '', '', { rawData: long })).toEqual({ status: Status.CONNECT_INVALID_PARAM | DNR, dw0: (1 << 16) | 512 });
    expect(await connectRaw(h, SUBNQN, HOSTNQN, { sqsize: 0 })).toEqual({ status: Status.CONNECT_INVALID_PARAM | DNR, dw0: 44 });
    expect(await connectRaw(h, SUBNQN, HOSTNQN, { qid: 1, cntlid: 77 })).toEqual({ status: Status.CONNECT_INVALID_PARAM | DNR, dw0: (1 << 16) | 16 });
    const admin = await h.peer();
    const cntlid = await bringUpAdmin(admin);
    expectOk(await admin.command(setFeatures(0x07, 0)));
    expect(await connectRaw(h, SUBNQN, HOSTNQN, { qid: 2, cntlid, sqsize: 127 })).toEqual({ status: Status.CONNECT_INVALID_PARAM | DNR, dw0: 42 });
    expect((await connectRaw(h, SUBNQN, HOSTNQN, { qid: 1, cntlid, sqsize: 127 })).status).toBe(0);
    expect((await connectRaw(h, SUBNQN, HOSTNQN, { qid: 1, cntlid, sqsize: 127 })).status).toBe(Status.CMD_SEQ_ERROR | DNR);
    expect(h.svc.stats().connects.failed).toBeGreaterThanOrEqual(8);
  });

  it('commands before Connect are sequence errors', async () => {
    h = await startTarget();
    const p = await h.peer();
    await p.ic();
    expect((await p.command(readCmd(1, 0n, 1))).cqe?.status).toBe(Status.CMD_SEQ_ERROR | DNR);
    const pg = encodeSqe({ opcode: 0x7f, cid: 3, nsid: 4 });
    expect((await p.command(pg)).cqe?.status).toBe(Status.CMD_SEQ_ERROR | DNR);
  });
});
