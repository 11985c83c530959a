// Discovery, AENs, keep-alive, digests, in-capsule boundaries, C2H splitting, backends and stop, over real sockets.
import { Buffer } from 'node:buffer';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AdminOpcode, DNR, PduType, Status, decodeChangedNsList, decodeDiscoveryLog, decodeIdentifyController, encodePdu, encodeSqe } from '../../../protocol/index.js';
import { HOSTNQN, SUBNQN, adminCmd, bringUpAdmin, connectIo, defaultSubsystem, expectOk, getLog, identify, readCmd, setFeatures, startTarget, writeCmd, type Harness, type RawPeer } from './fixture.js';

const DISC = 'nqn.2014-08.org.nvmexpress.discovery';
const OTHER_HOST = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000002';
let h: Harness | undefined;
let tmp: string | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
  if (tmp !== undefined) await fs.rm(tmp, { recursive: true, force: true });
  tmp = undefined;
});

async function ioQueue(hh: Harness, o: { cattr?: number; digests?: { hdgst?: boolean; ddgst?: boolean } } = {}): Promise<{ admin: RawPeer; io: RawPeer; cntlid: number }> {
  const admin = await hh.peer();
  const cntlid = await bringUpAdmin(admin, o.digests !== undefined ? { digests: o.digests } : {});
  expectOk(await admin.command(setFeatures(0x07, 0x30003)));
  const io = await hh.peer();
  expectOk(await connectIo(io, cntlid, 1, { ...(o.cattr !== undefined ? { cattr: o.cattr } : {}), ...(o.digests !== undefined ? { digests: o.digests } : {}) }));
  return { admin, io, cntlid };
}

describe('discovery', () => {
  it('log: current entry first, per-host filtering, windows, GENCTR stable then bumped, change AEN', async () => {
    h = await startTarget({
      subsystems: [defaultSubsystem(), { nqn: 'nqn.2024-01.io.nvme-ts:private', hosts: [OTHER_HOST], namespaces: [{ nsid: 1, backend: { type: 'null', size: '1M' } }] }],
    });
    const p = await h.peer();
    const c = await p.connect({ subnqn: DISC, hostnqn: HOSTNQN, kato: 0 });
    expect(c.cqe?.status).toBe(0);
    expectOk(await p.command(encodeSqe({ opcode: 0x7f, cid: 2, nsid: 0, cdw12: 0x460001, cdw11: 0x14 })));
    const idc = decodeIdentifyController((await p.command(identify(1))).data);
    expect(idc).toMatchObject({ cntrltype: 2, subnqn: DISC, oaes: 0x80000000 });
    const head = decodeDiscoveryLog((await p.command(getLog(0x70, 1024, { nsid: 0 }))).data);
    expect(head.numrec).toBe(2);
    const full = (await p.command(getLog(0x70, 3072, { nsid: 0 }))).data;
    const log = decodeDiscoveryLog(full);
    expect(log.genctr).toBe(head.genctr);
    expect(log.entries.map((e) => [e.subtype, e.subnqn])).toEqual([
      [3, DISC],
      [2, SUBNQN],
    ]);
    expect(log.entries[1]).toMatchObject({ trtype: 3, adrfam: 1, treq: 4, cntlid: 0xffff, asqsz: 32, traddr: '127.0.0.1', trsvcid: String(h.port), portid: 1 });
    // an arbitrary window equals the same bytes of the whole log
    const win = (await p.command(getLog(0x70, 100, { nsid: 0, lpo: 1028n }))).data;
    expect(win.equals(full.subarray(1028, 1128))).toBe(true);
    // enable discovery-change AEN, post an AER, change the content
    expectOk(await p.command(setFeatures(0x0b, 0x80000000)));
    p.send({ type: PduType.CAPSULE_CMD, sqe: adminCmd(AdminOpcode.ASYNC_EVENT, { cid: 31 }), data: [] });
    h.svc.addReferral(1, { addr: '10.0.0.9', port: 8009 });
    const aen = await p.nextPdu();
    expect(aen.type).toBe(PduType.CAPSULE_RESP);
    const after = decodeDiscoveryLog((await p.command(getLog(0x70, 4096, { nsid: 0 }))).data);
    expect(after.genctr).toBeGreaterThan(head.genctr);
    expect(after.entries.map((e) => e.subtype)).toEqual([3, 2, 1]);
    expect(after.entries[2]).toMatchObject({ traddr: '10.0.0.9', trsvcid: '8009', subnqn: DISC });
  });

  it('the private subsystem appears only for its host', async () => {
    h = await startTarget({ subsystems: [{ nqn: 'nqn.2024-01.io.nvme-ts:private', hosts: [OTHER_HOST], namespaces: [{ nsid: 1, backend: { type: 'null', size: '1M' } }] }] });
    const read = async (host: string): Promise<string[]> => {
      const p = await (h as Harness).peer();
      expectOk(await p.connect({ subnqn: DISC, hostnqn: host }));
      expectOk(await p.command(encodeSqe({ opcode: 0x7f, cid: 2, nsid: 0, cdw12: 0x460001, cdw11: 0x14 })));
      return decodeDiscoveryLog((await p.command(getLog(0x70, 4096, { nsid: 0 }))).data).entries.map((e) => e.subnqn);
    };
    expect(await read(HOSTNQN)).toEqual([DISC]);
    expect(await read(OTHER_HOST)).toEqual([DISC, 'nqn.2024-01.io.nvme-ts:private']);
  });
});

describe('async events and keep-alive', () => {
  it('namespace add → AEN 0x00040002, changed-NS log, masked until read without RAE', async () => {
    h = await startTarget();
    const admin = await h.peer();
    await bringUpAdmin(admin);
    admin.send({ type: PduType.CAPSULE_CMD, sqe: adminCmd(AdminOpcode.ASYNC_EVENT, { cid: 31 }), data: [] });
    await h.svc.addNamespace(SUBNQN, { nsid: 5, backend: { type: 'ram', size: '1M' } });
    const aen = await admin.nextPdu();
    if (aen.type !== PduType.CAPSULE_RESP) throw new Error('no AEN');
    expect(aen.cqe.readUInt32LE(0)).toBe(0x00040002);
    admin.send({ type: PduType.CAPSULE_CMD, sqe: adminCmd(AdminOpcode.ASYNC_EVENT, { cid: 30 }), data: [] });
    await h.svc.addNamespace(SUBNQN, { nsid: 6, backend: { type: 'ram', size: '1M' } });
    const withRae = decodeChangedNsList((await admin.command(getLog(0x04, 4096, { rae: true }))).data);
    expect(withRae.nsids).toEqual([5, 6]);
    expect(admin.stray()).toEqual([]); // still masked
    const cleared = decodeChangedNsList((await admin.command(getLog(0x04, 4096))).data);
    expect(cleared.nsids).toEqual([5, 6]);
    expect(decodeChangedNsList((await admin.command(getLog(0x04, 4096))).data).nsids).toEqual([]);
    await h.svc.removeNamespace(SUBNQN, 6);
    const aen2 = await admin.nextPdu();
    expect(aen2.type === PduType.CAPSULE_RESP && aen2.cqe.readUInt32LE(0)).toBe(0x00040002);
  });

  it('AER limit: the 5th outstanding AER fails with ASYNC_LIMIT', async () => {
    h = await startTarget();
    const admin = await h.peer();
    await bringUpAdmin(admin);
    for (let i = 0; i < 4; i++) admin.send({ type: PduType.CAPSULE_CMD, sqe: adminCmd(AdminOpcode.ASYNC_EVENT, { cid: 40 + i }), data: [] });
    expect((await admin.command(adminCmd(AdminOpcode.ASYNC_EVENT, { cid: 50 }))).cqe?.status).toBe(Status.ASYNC_LIMIT | DNR);
  });

  it('ANA state change → AEN 0x000C0302 and I/O gets the path status', async () => {
    h = await startTarget();
    const { admin, io } = await ioQueue(h);
    admin.send({ type: PduType.CAPSULE_CMD, sqe: adminCmd(AdminOpcode.ASYNC_EVENT, { cid: 31 }), data: [] });
    h.svc.setAnaState(1, 1, 'inaccessible');
    const aen = await admin.nextPdu();
    expect(aen.type === PduType.CAPSULE_RESP && aen.cqe.readUInt32LE(0)).toBe(0x000c0302);
    expect((await io.command(readCmd(1, 0n, 1))).cqe?.status).toBe(Status.ANA_INACCESSIBLE);
    h.svc.setAnaState(1, 1, 'change');
    expect((await io.command(readCmd(1, 0n, 1))).cqe?.status).toBe(Status.ANA_TRANSITION);
    h.svc.setAnaState(1, 1, 'optimized');
    expectOk(await io.command(readCmd(1, 0n, 1)));
  });

  it('KATO expiry tears down the controller and all its queues; keep-alive with kato 0 is invalid', async () => {
    h = await startTarget();
    const admin = await h.peer();
    const cntlid = await bringUpAdmin(admin, { kato: 1000 });
    expectOk(await admin.command(setFeatures(0x07, 0x10001)));
    const io1 = await h.peer();
    expectOk(await connectIo(io1, cntlid, 1));
    const io2 = await h.peer();
    expectOk(await connectIo(io2, cntlid, 2));
    expect(h.svc.listControllers()[0]?.queues.map((q) => q.qid)).toEqual([0, 1, 2]);
    await Promise.all([admin.closed(4000), io1.closed(4000), io2.closed(4000)]);
    expect(h.svc.stats().katoExpiries).toBe(1);
    expect(h.svc.listControllers()).toEqual([]);
    const a2 = await h.peer();
    await bringUpAdmin(a2, { kato: 0 });
    expect((await a2.command(adminCmd(AdminOpcode.KEEP_ALIVE))).cqe?.status).toBe(Status.KA_TIMEOUT_INVALID);
  });

  it('keep-alive traffic keeps the controller alive past KATO', async () => {
    h = await startTarget();
    const admin = await h.peer();
    await bringUpAdmin(admin, { kato: 1000 });
    for (let i = 0; i < 6; i++) {
      await new Promise((r) => setTimeout(r, 300));
      expectOk(await admin.command(adminCmd(AdminOpcode.KEEP_ALIVE)));
    }
    expect(admin.isClosed).toBe(false);
  });
});

describe('data path', () => {
  it('in-capsule writes at inline limit −1/0 and R2T above; C2H split at c2hDataSize', async () => {
    h = await startTarget({ ports: [{ id: 1, addr: '127.0.0.1', port: 0, inlineDataSize: 4096, c2hDataSize: 8192 }] });
    const { io } = await ioQueue(h);
    const d = Buffer.from(Buffer.alloc(8192).map((_, i) => (i * 31) & 0xff));
    // 4096 − 512 and exactly 4096 in-capsule
    expectOk(await io.command(writeCmd(1, 0n, 7, { inCapsule: true }), { data: d.subarray(0, 3584), inCapsule: true }));
    expectOk(await io.command(writeCmd(1, 0n, 8, { inCapsule: true }), { data: d.subarray(0, 4096), inCapsule: true }));
    // one block over the limit in-capsule → SGL offset invalid (nvmet), via R2T → fine
    expect((await io.command(writeCmd(1, 0n, 9, { inCapsule: true }), { data: d.subarray(0, 4608), inCapsule: true })).cqe?.status).toBe(Status.SGL_INVALID_OFFSET | DNR);
    const w = await io.command(writeCmd(1, 0n, 16), { data: d, maxh2cdata: 4096 });
    expect(w.pdus.map((p) => p.type)).toEqual([PduType.R2T, PduType.CAPSULE_RESP]);
    const r = await io.command(readCmd(1, 0n, 40));
    const c2h = r.pdus.filter((p) => p.type === PduType.C2H_DATA);
    expect(c2h.map((p) => (p.type === PduType.C2H_DATA ? [p.datao, p.last] : []))).toEqual([
      [0, false],
      [8192, false],
      [16384, true],
    ]);
    expect(r.data.subarray(0, 8192).equals(d)).toBe(true);
  });

  it.each([
    [true, true],
    [true, false],
    [false, true],
  ])('digests hdgst=%s ddgst=%s: writes/reads round-trip', async (hd, dd) => {
    h = await startTarget();
    const { io } = await ioQueue(h, { digests: { hdgst: hd, ddgst: dd } });
    const d = Buffer.from(Buffer.alloc(70000 - (70000 % 512)).map((_, i) => (i ^ 0x5a) & 0xff));
    const nlb = d.length / 512;
    expectOk(await io.command(writeCmd(1, 100n, nlb), { data: d, maxh2cdata: 16384 }));
    expectOk(await io.command(writeCmd(1, 9000n, 2, { inCapsule: true }), { data: d.subarray(0, 1024), inCapsule: true }));
    expect((await io.command(readCmd(1, 100n, nlb))).data.equals(d)).toBe(true);
    expect((await io.command(readCmd(1, 9000n, 2))).data.equals(d.subarray(0, 1024))).toBe(true);
  });

  it('data digest error on H2C data completes the command with TRANSIENT_TRANSPORT', async () => {
    h = await startTarget();
    const { io } = await ioQueue(h, { digests: { ddgst: true } });
    const sqe = writeCmd(1, 0n, 1, { inCapsule: true });
    const orig = io.socket.write.bind(io.socket);
    const bytes: Buffer[] = [];
    (io.socket as unknown as { write: (b: Buffer) => boolean }).write = (b: Buffer) => (bytes.push(Buffer.from(b)), true);
    io.send({ type: PduType.CAPSULE_CMD, sqe, data: [Buffer.alloc(512, 1)] });
    (io.socket as unknown as { write: typeof orig }).write = orig;
    const raw = Buffer.concat(bytes);
    raw[raw.length - 1] = (raw[raw.length - 1] as number) ^ 0xff;
    io.sendRaw(raw);
    const resp = await io.nextPdu();
    expect(resp.type === PduType.CAPSULE_RESP && resp.cqe.readUInt16LE(14) >> 1).toBe(Status.TRANSIENT_TRANSPORT);
    expectOk(await io.command(readCmd(1, 0n, 1)));
    expect(h.svc.stats().dataDigestErrors).toBe(1);
  });

  it('a data digest error in one H2CData of an R2T transfer: the rest is taken, then TRANSIENT_TRANSPORT; the queue stays', async () => {
    h = await startTarget();
    const dg = { hdgst: true, ddgst: true };
    const { io } = await ioQueue(h, { digests: dg });
    const d = Buffer.from(Buffer.alloc(8192).map((_, i) => (i * 7) & 0xff));
    io.send({ type: PduType.CAPSULE_CMD, sqe: writeCmd(1, 40n, 16), data: [] });
    const r2t = await io.nextPdu();
    if (r2t.type !== PduType.R2T) throw new Error(`expected R2T, got ${r2t.type}`);
    expect([r2t.r2to, r2t.r2tl]).toEqual([0, 8192]);
    // Two H2CData PDUs of 4 KiB; the first one's DDGST (its last 4 bytes) flipped.
    const first = Buffer.concat(encodePdu({ type: PduType.H2C_DATA, cccid: r2t.cccid, ttag: r2t.ttag, datao: 0, last: false, data: [d.subarray(0, 4096)] }, { ...dg, pda: 0 }));
    first[first.length - 1] = (first[first.length - 1] as number) ^ 0xff;
    const second = Buffer.concat(encodePdu({ type: PduType.H2C_DATA, cccid: r2t.cccid, ttag: r2t.ttag, datao: 4096, last: true, data: [d.subarray(4096)] }, { ...dg, pda: 0 }));
    // Split mid-PDU, so the data and its digest arrive across reads.
    io.sendRaw(Buffer.concat([first, second]).subarray(0, 3000));
    await new Promise((r) => setTimeout(r, 10));
    io.sendRaw(Buffer.concat([first, second]).subarray(3000));
    const resp = await io.nextPdu();
    expect(resp.type === PduType.CAPSULE_RESP && resp.cqe.readUInt16LE(14) >> 1).toBe(Status.TRANSIENT_TRANSPORT);
    expect(h.svc.stats().dataDigestErrors).toBe(1);
    // Nothing was written (the RAM namespace starts zeroed), and the queue goes on.
    expect((await io.command(readCmd(1, 40n, 16))).data.equals(Buffer.alloc(8192))).toBe(true);
    expectOk(await io.command(writeCmd(1, 40n, 16), { data: d, maxh2cdata: 4096 }));
    expect((await io.command(readCmd(1, 40n, 16))).data.equals(d)).toBe(true);
  });

  it('write zeroes, DSM deallocate, compare, flush all, FUA', async () => {
    h = await startTarget();
    const { io } = await ioQueue(h);
    const d = Buffer.alloc(4096, 0xab);
    expectOk(await io.command(writeCmd(1, 0n, 8, { inCapsule: true, fua: true }), { data: d, inCapsule: true }));
    const cmp = encodeSqe({ opcode: 0x05, cid: 77, nsid: 1, cdw12: 7, sgl: { address: 0n, length: 4096, type: 0x01 } });
    expect((await io.command(cmp, { data: d, inCapsule: true })).cqe?.status).toBe(0);
    expect((await io.command(cmp, { data: Buffer.alloc(4096, 1), inCapsule: true })).cqe?.status).toBe(Status.COMPARE_FAILED);
    expectOk(await io.command(encodeSqe({ opcode: 0x08, cid: 78, nsid: 1, cdw10: 2, cdw12: 1 })));
    const r = (await io.command(readCmd(1, 0n, 8))).data;
    expect(r.subarray(1024, 2048).every((b) => b === 0)).toBe(true);
    expect(r[0]).toBe(0xab);
    const range = Buffer.alloc(16);
    range.writeUInt32LE(2, 4);
    range.writeBigUInt64LE(4n, 8);
    expectOk(await io.command(encodeSqe({ opcode: 0x09, cid: 79, nsid: 1, cdw10: 0, cdw11: 4, sgl: { address: 0n, length: 16, type: 0x01 } }), { data: range, inCapsule: true }));
    const r2 = (await io.command(readCmd(1, 0n, 8))).data;
    expect(r2.subarray(2048, 3072).every((b) => b === 0)).toBe(true);
    expect(r2[3072]).toBe(0xab);
    expectOk(await io.command(encodeSqe({ opcode: 0x00, cid: 80, nsid: 0xffffffff })));
    const st = h.svc.stats().subsystems[SUBNQN];
    expect(st?.namespaces[0]?.writes).toBe(1);
  });

  it('DSM with a range buffer longer than NR+1 ranges (Linux 6.1 blkdiscard sends 4096 bytes) deallocates only NR+1 ranges', async () => {
    h = await startTarget();
    const { io } = await ioQueue(h);
    expectOk(await io.command(writeCmd(1, 0n, 16, { inCapsule: true }), { data: Buffer.alloc(8192, 0xcd), inCapsule: true }));
    // One range (NR=0) in a 4096-byte buffer; a stale second range must be ignored.
    const ranges = Buffer.alloc(4096);
    ranges.writeUInt32LE(4, 4);
    ranges.writeBigUInt64LE(0n, 8);
    ranges.writeUInt32LE(4, 16 + 4);
    ranges.writeBigUInt64LE(8n, 16 + 8);
    expectOk(await io.command(encodeSqe({ opcode: 0x09, cid: 81, nsid: 1, cdw10: 0, cdw11: 4, sgl: { address: 0n, length: 4096, type: 0x01 } }), { data: ranges, inCapsule: true }));
    const r = (await io.command(readCmd(1, 0n, 16))).data;
    expect(r.subarray(0, 2048).every((b) => b === 0)).toBe(true);
    expect(r.subarray(4096, 6144).every((b) => b === 0xcd)).toBe(true);
    // Shorter than NR+1 ranges is what nvmet refuses.
    const short = encodeSqe({ opcode: 0x09, cid: 82, nsid: 1, cdw10: 1, cdw11: 4, sgl: { address: 0n, length: 16, type: 0x01 } });
    expect((await io.command(short, { data: ranges.subarray(0, 16), inCapsule: true })).cqe?.status).toBe(Status.SGL_INVALID_DATA | DNR);
  });

  it('fault knobs: failNext and command latency', async () => {
    h = await startTarget();
    const { io } = await ioQueue(h);
    h.svc.setFaults(SUBNQN, { failNext: { count: 2, status: 0x4002 }, commandLatencyUs: 20000 });
    const t0 = Date.now();
    expect((await io.command(readCmd(1, 0n, 1))).cqe?.status).toBe(0x4002);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(15);
    expect((await io.command(readCmd(1, 0n, 1))).cqe?.status).toBe(0x4002);
    h.svc.setFaults(SUBNQN, {});
    expectOk(await io.command(readCmd(1, 0n, 1)));
  });
});

describe('backends, ACL, config and stop', () => {
  it('file namespace: data survives stop and reopening; 4096-byte LBAs', async () => {
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'nvme-ts-'));
    const file = path.join(tmp, 'ns1.img');
    const sub = defaultSubsystem({ namespaces: [{ nsid: 1, blockSize: 4096, backend: { type: 'file', path: file, size: '4M' } }] });
    h = await startTarget({ subsystems: [sub] });
    let q = await ioQueue(h);
    const d = Buffer.from(Buffer.alloc(8192).map((_, i) => (i * 3) & 0xff));
    expectOk(await q.io.command(writeCmd(1, 3n, 2, { bs: 4096, fua: true }), { data: d }));
    await h.close();
    expect((await fs.stat(file)).size).toBe(4 * 1024 * 1024);
    h = await startTarget({ subsystems: [sub] });
    q = await ioQueue(h);
    expect((await q.io.command(readCmd(1, 3n, 2, 4096))).data.equals(d)).toBe(true);
    expect((await q.io.command(readCmd(1, 1023n, 2, 4096))).cqe?.status).toBe(Status.LBA_RANGE | DNR);
  });

  it('ACL: add and remove an allowed host at runtime; getConfig round-trips', async () => {
    h = await startTarget({ subsystems: [defaultSubsystem({ hosts: [OTHER_HOST] })] });
    const p1 = await h.peer();
    expect((await p1.connect({ subnqn: SUBNQN, hostnqn: HOSTNQN })).cqe?.status).toBe(Status.CONNECT_INVALID_HOST | DNR);
    h.svc.addAllowedHost(SUBNQN, HOSTNQN);
    const p2 = await h.peer();
    expect((await p2.connect({ subnqn: SUBNQN, hostnqn: HOSTNQN })).cqe?.status).toBe(0);
    const cfg = h.svc.getConfig();
    expect(cfg.subsystems[0]?.hosts?.sort()).toEqual([HOSTNQN, OTHER_HOST].sort());
    h.svc.removeAllowedHost(SUBNQN, HOSTNQN);
    const p3 = await h.peer();
    expect((await p3.connect({ subnqn: SUBNQN, hostnqn: HOSTNQN })).cqe?.status).toBe(Status.CONNECT_INVALID_HOST | DNR);
    const { TargetService } = await import('../../../target/service/index.js');
    const copy = new TargetService();
    await copy.apply({ ...cfg, ports: cfg.ports.map((p) => ({ ...p, port: 0 })) });
    expect(copy.getConfig().subsystems).toEqual(cfg.subsystems);
    await copy.stop();
  });

  it('graceful stop closes every connection and the listener', async () => {
    h = await startTarget();
    const { admin, io } = await ioQueue(h);
    await h.svc.stop();
    await Promise.all([admin.closed(), io.closed()]);
    expect(h.svc.boundPorts()).toEqual([]);
  });

  it('IPv6 listener', async () => {
    h = await startTarget({ ports: [{ id: 1, addr: '::1', port: 0 }] });
    const { RawPeer } = await import('./fixture.js');
    const p = await RawPeer.connect({ host: '::1', port: h.port });
    h.peers.push(p);
    expect((await p.connect({ subnqn: SUBNQN, hostnqn: HOSTNQN })).cqe?.status).toBe(0);
  });
});
