// Verify, Write Uncorrectable, Supported Log Pages (LID 00h), Feature Identifiers Supported and Effects (LID 12h),
// Host Behavior Support (FID 16h) and Namespace Write Protection Config (FID 84h), as raw PDUs over real sockets: each
// status edge, and the host-controlled fields at 0, the maximum, 2^31 and 2^32−1.
import { Buffer } from 'node:buffer';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../../fixtures/cleanups.js';
import { AdminOpcode, DNR, NvmOpcode, PduType, Status, decodeCqe, decodeChangedNsList, decodeIdentifyController, decodeIdentifyNamespace, encodeSqe, sglInCapsule, sglTransport } from '../../../protocol/index.js';
import { adminCmd, bringUpAdmin, connectIo, defaultSubsystem, expectOk, getLog, identify, nextCid, readCmd, setFeatures, startTarget, writeCmd, type Harness, type RawPeer } from './fixture.js';

const cleanups = cleanupAfterEach();
let h: Harness;
let tmp: string;

/** startTarget, closed after the test. */
async function target(cfg?: Parameters<typeof startTarget>[0]): Promise<Harness> {
  const hh = await startTarget(cfg);
  cleanups.push(() => hh.close());
  return hh;
}

/** A temporary folder, removed after the test. */
async function tempDir(prefix: string): Promise<string> {
  const d = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  cleanups.push(() => fs.rm(d, { recursive: true, force: true }));
  return d;
}

async function ioQueue(hh: Harness): Promise<{ admin: RawPeer; io: RawPeer }> {
  const admin = await hh.peer();
  const cntlid = await bringUpAdmin(admin);
  expectOk(await admin.command(setFeatures(0x07, 0)));
  const io = await hh.peer();
  expectOk(await connectIo(io, cntlid, 1));
  return { admin, io };
}

/** An NVM command with SLBA in CDW10–11 and CDW12 as given (NLB 0's based in bits 15:0), no data. */
function lbaCmd(opcode: number, slba: bigint, cdw12: number, nsid = 1): Buffer {
  return encodeSqe({ opcode, cid: nextCid(), nsid, cdw10: Number(slba & 0xffff_ffffn), cdw11: Number(slba >> 32n), cdw12 });
}

async function status(p: RawPeer, sqe: Buffer, data?: Buffer): Promise<number> {
  const r = await p.command(sqe, data !== undefined ? { data } : {});
  return r.cqe?.status ?? 0;
}

/** Status of a one-block read at `lba`. */
async function readStatus(io: RawPeer, lba: bigint): Promise<number> {
  return (await io.command(readCmd(1, lba, 1))).cqe?.status ?? 0;
}

const NS_BLOCKS = 64n * 2048n; // the fixture's 64 MiB RAM namespace in 512-byte blocks

describe('Verify (NVM Command Set 1.0 §3.2.9)', () => {
  it('reads the range without data; LBA Out of Range at every SLBA/NLB edge past the end', async () => {
    h = await target();
    const { io } = await ioQueue(h);
    expect(await status(io, lbaCmd(NvmOpcode.VERIFY, 0n, 0))).toBe(0);
    // NLB at its maximum (65,536 blocks, 32 MiB) and the last block of the namespace.
    expect(await status(io, lbaCmd(NvmOpcode.VERIFY, 0n, 0xffff))).toBe(0);
    expect(await status(io, lbaCmd(NvmOpcode.VERIFY, NS_BLOCKS - 1n, 0))).toBe(0);
    for (const [slba, nlb] of [
      [NS_BLOCKS, 0],
      [NS_BLOCKS - 1n, 1],
      [NS_BLOCKS - 0xffffn, 0xffff],
      [0x8000_0000n, 0],
      [0xffff_ffffn, 0],
      [0xffff_ffff_ffff_ffffn, 0xffff],
    ] as const) {
      expect(await status(io, lbaCmd(NvmOpcode.VERIFY, slba, nlb)), `${slba}+${nlb}`).toBe(Status.LBA_RANGE | DNR);
    }
  });
});

describe('Write Uncorrectable (NVM Command Set 1.0 §3.2.7)', () => {
  it('marks exactly its range: Read, Compare and Verify fail there, neighbours read; a write clears it', async () => {
    h = await target();
    const { io } = await ioQueue(h);
    expect(await status(io, lbaCmd(NvmOpcode.WRITE_UNCOR, 100n, 3))).toBe(0); // LBAs 100..103
    for (const lba of [99n, 104n, 0n]) expect(await readStatus(io, lba), `lba ${lba}`).toBe(0);
    for (const lba of [100n, 101n, 103n]) expect(await readStatus(io, lba), `lba ${lba}`).toBe(Status.READ_ERROR | DNR);
    // A read that only straddles the range fails too.
    expect((await io.command(readCmd(1, 96n, 5))).cqe?.status).toBe(Status.READ_ERROR | DNR);
    expect(await status(io, lbaCmd(NvmOpcode.VERIFY, 90n, 10))).toBe(Status.READ_ERROR | DNR);
    expect(await status(io, lbaCmd(NvmOpcode.VERIFY, 90n, 9))).toBe(0);
    const cmp = encodeSqe({ opcode: NvmOpcode.COMPARE, cid: nextCid(), nsid: 1, sgl: sglTransport(512), cdw10: 101, cdw12: 0 });
    expect(await status(io, cmp, Buffer.alloc(512))).toBe(Status.READ_ERROR | DNR);
    // Writing LBA 101 clears only LBA 101.
    expectOk(await io.command(writeCmd(1, 101n, 1), { data: Buffer.alloc(512, 7) }));
    expect(await readStatus(io, 101n)).toBe(0);
    expect(await readStatus(io, 100n)).toBe(Status.READ_ERROR | DNR);
    expect(await readStatus(io, 102n)).toBe(Status.READ_ERROR | DNR);
    // Write Zeroes clears 102; deallocate (DSM AD) clears 100 and 103.
    expect(await status(io, lbaCmd(NvmOpcode.WRITE_ZEROES, 102n, 0))).toBe(0);
    expect(await readStatus(io, 102n)).toBe(0);
    const ranges = Buffer.alloc(32);
    ranges.writeUInt32LE(1, 4);
    ranges.writeUInt32LE(100, 8);
    ranges.writeUInt32LE(1, 16 + 4);
    ranges.writeUInt32LE(103, 16 + 8);
    const dsm = encodeSqe({ opcode: NvmOpcode.DSM, cid: nextCid(), nsid: 1, sgl: sglInCapsule(32), cdw10: 1, cdw11: 0x4 });
    expect((await io.command(dsm, { data: ranges, inCapsule: true })).cqe?.status ?? 0).toBe(0);
    for (const lba of [100n, 103n]) expect(await readStatus(io, lba), `lba ${lba}`).toBe(0);
  });

  it('range edges, the write-protected namespace, and ONCS / effects log advertise it', async () => {
    h = await target({ subsystems: [defaultSubsystem({ namespaces: [{ nsid: 1, backend: { type: 'ram', size: '64M' } }, { nsid: 2, readOnly: true, backend: { type: 'ram', size: '1M' } }] })] });
    const { admin, io } = await ioQueue(h);
    expect(await status(io, lbaCmd(NvmOpcode.WRITE_UNCOR, NS_BLOCKS - 0x10000n, 0xffff))).toBe(0);
    expect(await readStatus(io, NS_BLOCKS - 1n)).toBe(Status.READ_ERROR | DNR);
    for (const [slba, nlb] of [
      [NS_BLOCKS, 0],
      [0x8000_0000n, 0],
      [0xffff_ffffn, 0xffff],
      [0xffff_ffff_ffff_ffffn, 0],
    ] as const) {
      expect(await status(io, lbaCmd(NvmOpcode.WRITE_UNCOR, slba, nlb)), `${slba}+${nlb}`).toBe(Status.LBA_RANGE | DNR);
    }
    expect(await status(io, lbaCmd(NvmOpcode.WRITE_UNCOR, 0n, 0, 2))).toBe(Status.NS_WRITE_PROTECTED);
    expect(await status(io, lbaCmd(NvmOpcode.WRITE_UNCOR, 0n, 0, 3))).toBe(Status.INVALID_NS | DNR);
    const idc = decodeIdentifyController((await admin.command(identify(1))).data);
    expect(idc.oncs & 0x82).toBe(0x82); // Write Uncorrectable (bit 1), Verify (bit 7)
    const fx = (await admin.command(getLog(0x05, 4096))).data;
    expect(fx.readUInt32LE(1024 + NvmOpcode.WRITE_UNCOR * 4)).toBe(0x3);
    expect(fx.readUInt32LE(1024 + NvmOpcode.VERIFY * 4)).toBe(0x1);
  });

  it('a file namespace keeps its marks across a restart; clearing them removes the file', async () => {
    tmp = await tempDir('nvm-uncor-');
    const file = path.join(tmp, 'ns1.img');
    const sub = defaultSubsystem({ namespaces: [{ nsid: 1, backend: { type: 'file', path: file, size: '1M' } }] });
    h = await target({ subsystems: [sub] });
    let { io } = await ioQueue(h);
    expect(await status(io, lbaCmd(NvmOpcode.WRITE_UNCOR, 10n, 1))).toBe(0);
    expect(JSON.parse(await fs.readFile(`${file}.uncor`, 'utf8'))).toEqual([{ lba: 10, count: 2 }]);
    await h.close();
    h = await target({ subsystems: [sub] });
    ({ io } = await ioQueue(h));
    expect(await readStatus(io, 11n)).toBe(Status.READ_ERROR | DNR);
    expect(await readStatus(io, 12n)).toBe(0);
    expect(await status(io, lbaCmd(NvmOpcode.WRITE_ZEROES, 10n, 1))).toBe(0);
    await expect(fs.stat(`${file}.uncor`)).rejects.toMatchObject({ code: 'ENOENT' });
    await h.close();
    h = await target({ subsystems: [sub] });
    ({ io } = await ioQueue(h));
    expect(await readStatus(io, 11n)).toBe(0);
  });

  it('a damaged marks file refuses the namespace with the field and the fix', async () => {
    tmp = await tempDir('nvm-uncor-');
    const file = path.join(tmp, 'ns1.img');
    await fs.writeFile(`${file}.uncor`, '[{"lba":-1,"count":1}]');
    await expect(startTarget({ subsystems: [defaultSubsystem({ namespaces: [{ nsid: 1, backend: { type: 'file', path: file, size: '1M' } }] })] })).rejects.toThrow(/namespaces\.backend\.path.*fix or delete it/);
  });
});

describe('Copy (NVM Command Set 1.0 §3.2.2)', () => {
  /** Source Range Entries built by hand: format 0 is 32 bytes, format 1 is 40; SLBA at byte 8, NLB (0's based) at 16. */
  function entries(format: 0 | 1, ranges: Array<[bigint, number]>): Buffer {
    const size = format === 0 ? 32 : 40;
    const b = Buffer.alloc(ranges.length * size, 0);
    ranges.forEach(([slba, nlb0], i) => {
      b.writeBigUInt64LE(slba, i * size + 8);
      b.writeUInt16LE(nlb0, i * size + 16);
    });
    return b;
  }
  const copyCmd = (sdlba: bigint, nr0: number, format: number, len: number): Buffer =>
    encodeSqe({ opcode: NvmOpcode.COPY, cid: nextCid(), nsid: 1, sgl: sglTransport(len), cdw10: Number(sdlba & 0xffff_ffffn), cdw11: Number(sdlba >> 32n), cdw12: nr0 | (format << 8) });

  async function fill(io: RawPeer, lba: bigint, blocks: number, seed: number): Promise<Buffer> {
    const data = Buffer.alloc(blocks * 512);
    for (let i = 0; i < data.length; i++) data[i] = (i * 7 + seed) & 0xff;
    expectOk(await io.command(writeCmd(1, lba, blocks), { data }));
    return data;
  }

  it('formats 0 and 1 copy the sources in order to SDLBA; Identify reports the limits', async () => {
    h = await target();
    const { admin, io } = await ioQueue(h);
    const a = await fill(io, 10n, 2, 1);
    const b = await fill(io, 40n, 3, 2);
    for (const format of [0, 1] as const) {
      const dest = format === 0 ? 1000n : 2000n;
      const list = entries(format, [
        [40n, 2],
        [10n, 1],
      ]);
      expect(await status(io, copyCmd(dest, 1, format, list.length), list)).toBe(0);
      const back = (await io.command(readCmd(1, dest, 5))).data;
      expect(back.equals(Buffer.concat([b, a]))).toBe(true);
    }
    const idc = decodeIdentifyController((await admin.command(identify(1))).data);
    expect(idc.oncs & 0x100).toBe(0x100);
    expect(idc.ocfs).toBe(0x3);
    const idn = decodeIdentifyNamespace((await admin.command(identify(0, 1))).data);
    expect([idn.mssrl, idn.mcl, idn.msrc]).toEqual([1024, 4096, 127]);
  });

  it('a destination overlapping a source gets the source as it was before the copy', async () => {
    h = await target();
    const { io } = await ioQueue(h);
    const a = await fill(io, 100n, 4, 3);
    const list = entries(0, [[100n, 3]]);
    expect(await status(io, copyCmd(102n, 0, 0, list.length), list)).toBe(0);
    expect((await io.command(readCmd(1, 102n, 4))).data.equals(a)).toBe(true);
  });

  it('each limit and field at its edges', async () => {
    h = await target();
    const { io } = await ioQueue(h);
    const one = entries(0, [[0n, 0]]);
    // Descriptor Formats 2..15 are not offered.
    for (const format of [2, 0xf]) expect(await status(io, copyCmd(0n, 0, format, 40), Buffer.alloc(40)), `format ${format}`).toBe(Status.INVALID_FIELD | DNR);
    // NR: MSRC + 1 = 128 ranges pass, 129 and 256 are Command Size Limit Exceeded.
    const max = entries(0, Array.from({ length: 128 }, (_, i) => [BigInt(i), 0] as [bigint, number]));
    expect(await status(io, copyCmd(5000n, 127, 0, max.length), max)).toBe(0);
    expect(await status(io, copyCmd(5000n, 128, 0, 129 * 32), Buffer.alloc(129 * 32))).toBe(Status.CMD_SIZE_LIMIT_EXCEEDED | DNR);
    expect(await status(io, copyCmd(5000n, 255, 0, 256 * 32), Buffer.alloc(256 * 32))).toBe(Status.CMD_SIZE_LIMIT_EXCEEDED | DNR);
    // An SGL shorter than NR+1 entries: SGL Data Block Invalid.
    expect(await status(io, copyCmd(0n, 1, 0, 32), one)).toBe(Status.SGL_INVALID_DATA | DNR);
    expect(await status(io, copyCmd(0n, 0, 1, 32), one)).toBe(Status.SGL_INVALID_DATA | DNR);
    // MSSRL: 1024 blocks in one range pass, 1025 and 65,536 do not.
    for (const [nlb0, want] of [
      [1023, 0],
      [1024, Status.CMD_SIZE_LIMIT_EXCEEDED | DNR],
      [0xffff, Status.CMD_SIZE_LIMIT_EXCEEDED | DNR],
    ] as const) {
      const l = entries(0, [[0n, nlb0]]);
      expect(await status(io, copyCmd(10_000n, 0, 0, l.length), l), `nlb ${nlb0 + 1}`).toBe(want);
    }
    // MCL: 4 × 1024 = 4096 blocks pass, one more does not.
    const full = entries(0, [0n, 1024n, 2048n, 3072n].map((s) => [s, 1023] as [bigint, number]));
    expect(await status(io, copyCmd(10_000n, 3, 0, full.length), full)).toBe(0);
    const over = entries(0, [...[0n, 1024n, 2048n, 3072n].map((s) => [s, 1023] as [bigint, number]), [5000n, 0]]);
    expect(await status(io, copyCmd(10_000n, 4, 0, over.length), over)).toBe(Status.CMD_SIZE_LIMIT_EXCEEDED | DNR);
    // Source and destination past the end, at 2^31, 2^32−1 and 2^64−1.
    for (const slba of [NS_BLOCKS, 0x8000_0000n, 0xffff_ffffn, 0xffff_ffff_ffff_ffffn]) {
      const l = entries(0, [[slba, 0]]);
      expect(await status(io, copyCmd(0n, 0, 0, l.length), l), `source ${slba}`).toBe(Status.LBA_RANGE | DNR);
      expect(await status(io, copyCmd(slba, 0, 0, one.length), one), `dest ${slba}`).toBe(Status.LBA_RANGE | DNR);
    }
    const two = entries(0, [[0n, 1]]);
    expect(await status(io, copyCmd(NS_BLOCKS - 1n, 0, 0, two.length), two)).toBe(Status.LBA_RANGE | DNR);
    expect(await status(io, copyCmd(NS_BLOCKS - 2n, 0, 0, two.length), two)).toBe(0);
  });

  it('a marked source is Unrecovered Read Error; a copy over marked blocks clears them; write protection refuses it', async () => {
    h = await target();
    const { admin, io } = await ioQueue(h);
    expect(await status(io, lbaCmd(NvmOpcode.WRITE_UNCOR, 50n, 0))).toBe(0);
    const from50 = entries(1, [[49n, 1]]);
    expect(await status(io, copyCmd(300n, 0, 1, from50.length), from50)).toBe(Status.READ_ERROR | DNR);
    const onto50 = entries(1, [[0n, 0]]);
    expect(await status(io, copyCmd(50n, 0, 1, onto50.length), onto50)).toBe(0);
    expect(await readStatus(io, 50n)).toBe(0);
    expect((await admin.command(encodeSqe({ opcode: AdminOpcode.SET_FEATURES, cid: nextCid(), nsid: 1, cdw10: 0x84, cdw11: 1 }))).cqe?.status).toBe(0);
    expect(await status(io, copyCmd(60n, 0, 1, onto50.length), onto50)).toBe(Status.NS_WRITE_PROTECTED);
  });
});

describe('Supported Log Pages (LID 00h) and Feature Identifiers Supported and Effects (LID 12h)', () => {
  it('list exactly the pages and features this controller answers', async () => {
    h = await target();
    const admin = await h.peer();
    await bringUpAdmin(admin);
    const sup = (await admin.command(getLog(0x00, 1024))).data;
    const lids: number[] = [];
    for (let i = 0; i < 256; i++) if ((sup.readUInt32LE(i * 4) & 1) !== 0) lids.push(i);
    expect(lids).toEqual([0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x0c, 0x12, 0x80]);
    // Every listed page reads; an unlisted one is Invalid Log Page.
    for (const lid of lids) expect((await admin.command(getLog(lid, 512))).cqe?.status ?? 0, `lid ${lid}`).toBe(0);
    expect((await admin.command(getLog(0x06, 512))).cqe?.status).toBe(Status.INVALID_LOG_PAGE | DNR);
    const fx = (await admin.command(getLog(0x12, 1024))).data;
    const entry = (fid: number): number => fx.readUInt32LE(fid * 4);
    expect(entry(0x07)).toBe(0x1 | (1 << 21)); // Number of Queues: supported, controller scope
    expect(entry(0x16)).toBe(0x1 | (1 << 21));
    expect(entry(0x84)).toBe(0x1 | 0x4 | (1 << 20)); // write protection: namespace scope, NCC
    expect(entry(0x82)).toBe(0x1 | (1 << 20));
    expect(entry(0x03)).toBe(0); // LBA Range Type: not supported
    // A window at LPO 0x210 (FID 84h) is the same bytes.
    const win = (await admin.command(getLog(0x12, 4, { lpo: 0x210n }))).data;
    expect(win.readUInt32LE(0)).toBe(entry(0x84));
  });
});

describe('Host Behavior Support (FID 16h)', () => {
  const getHbs = (): Buffer => encodeSqe({ opcode: AdminOpcode.GET_FEATURES, cid: nextCid(), sgl: sglTransport(512), cdw10: 0x16 });
  const setHbs = (len = 512): Buffer => encodeSqe({ opcode: AdminOpcode.SET_FEATURES, cid: nextCid(), sgl: sglInCapsule(len), cdw10: 0x16 });

  it('Get returns what Set stored; ACRE/ETDAS/LBAFEE above 1 are Invalid Field; a short SGL is refused', async () => {
    h = await target();
    const admin = await h.peer();
    await bringUpAdmin(admin);
    expect((await admin.command(getHbs())).data.equals(Buffer.alloc(512))).toBe(true);
    const hbs = Buffer.alloc(512);
    hbs[0] = 1; // ACRE
    hbs[2] = 1; // LBAFEE
    hbs[511] = 0xff; // reserved: kept, not checked
    expect((await admin.command(setHbs(), { data: hbs, inCapsule: true })).cqe?.status).toBe(0);
    expect((await admin.command(getHbs())).data.equals(hbs)).toBe(true);
    for (const off of [0, 1, 2]) {
      for (const v of [2, 0x80, 0xff]) {
        const bad = Buffer.alloc(512);
        bad[off] = v;
        expect((await admin.command(setHbs(), { data: bad, inCapsule: true })).cqe?.status, `byte ${off} = ${v}`).toBe(Status.INVALID_FIELD | DNR);
      }
    }
    expect((await admin.command(getHbs())).data.equals(hbs)).toBe(true);
    expect((await admin.command(setHbs(256), { data: Buffer.alloc(256), inCapsule: true })).cqe?.status).toBe(Status.SGL_INVALID_DATA | DNR);
  });
});

describe('Namespace Write Protection Config (FID 84h)', () => {
  const setWp = (nsid: number, cdw11: number): Buffer => encodeSqe({ opcode: AdminOpcode.SET_FEATURES, cid: nextCid(), nsid, cdw10: 0x84, cdw11 });
  const getWp = (nsid: number): Buffer => encodeSqe({ opcode: AdminOpcode.GET_FEATURES, cid: nextCid(), nsid, cdw10: 0x84 });

  it('Write Protect refuses writes, sets NSATTR and sends the namespace-changed AEN; No Write Protect lifts it', async () => {
    h = await target();
    const { admin, io } = await ioQueue(h);
    expect(decodeIdentifyController((await admin.command(identify(1))).data).nwpc).toBe(0x3);
    admin.send({ type: PduType.CAPSULE_CMD, sqe: adminCmd(AdminOpcode.ASYNC_EVENT, { cid: 31 }), data: [] });
    expect((await admin.command(setWp(1, 1))).cqe?.status).toBe(0);
    // The notice completes the AER before the Set Features itself completes.
    expect(admin.stray().map((c) => [c.cid, c.dw0])).toEqual([[31, 0x00040002]]);
    expect(decodeChangedNsList((await admin.command(getLog(0x04, 4096))).data).nsids).toEqual([1]);
    expect((await admin.command(getWp(1))).cqe?.dw0).toBe(1);
    expect(decodeIdentifyNamespace((await admin.command(identify(0, 1))).data).nsattr).toBe(1);
    expect((await io.command(writeCmd(1, 0n, 1), { data: Buffer.alloc(512) })).cqe?.status).toBe(Status.NS_WRITE_PROTECTED);
    expect(await status(io, lbaCmd(NvmOpcode.WRITE_ZEROES, 0n, 0))).toBe(Status.NS_WRITE_PROTECTED);
    expect(await readStatus(io, 0n)).toBe(0);
    // Setting the state it already has changes nothing and sends no notice.
    expect((await admin.command(setWp(1, 1))).cqe?.status).toBe(0);
    expect(decodeChangedNsList((await admin.command(getLog(0x04, 4096, { rae: true }))).data).nsids).toEqual([]);
    admin.send({ type: PduType.CAPSULE_CMD, sqe: adminCmd(AdminOpcode.ASYNC_EVENT, { cid: 30 }), data: [] });
    expect(admin.stray()).toEqual([]);
    expect((await admin.command(setWp(1, 0))).cqe?.status).toBe(0);
    expect(admin.stray().map((c) => [c.cid, c.dw0])).toEqual([[30, 0x00040002]]);
    expectOk(await io.command(writeCmd(1, 0n, 1), { data: Buffer.alloc(512) }));
    expect(decodeIdentifyNamespace((await admin.command(identify(0, 1))).data).nsattr).toBe(0);
  });

  it('Until Power Cycle is final; Permanent, reserved states, unknown and broadcast NSIDs are refused', async () => {
    h = await target({ subsystems: [defaultSubsystem({ namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }, { nsid: 2, readOnly: true, backend: { type: 'ram', size: '1M' } }] })] });
    const { admin, io } = await ioQueue(h);
    for (const wps of [3, 4, 7]) expect((await admin.command(setWp(1, wps))).cqe?.status, `wps ${wps}`).toBe(Status.INVALID_FIELD | DNR);
    for (const nsid of [0, 5, 0x8000_0000, 0xffff_ffff]) {
      expect((await admin.command(setWp(nsid, 1))).cqe?.status, `nsid ${nsid}`).toBe(Status.INVALID_NS | DNR);
      expect((await admin.command(getWp(nsid))).cqe?.status, `nsid ${nsid}`).toBe(Status.INVALID_NS | DNR);
    }
    // Bits 31:3 are reserved: 0xfffffff8 | 0 is No Write Protect.
    expect((await admin.command(setWp(1, 0xffff_fff8))).cqe?.status).toBe(0);
    // The config's read-only namespace reads as Write Protect and cannot be lifted.
    expect((await admin.command(getWp(2))).cqe?.dw0).toBe(1);
    expect((await admin.command(setWp(2, 0))).cqe?.status).toBe(Status.FEATURE_NOT_CHANGEABLE | DNR);
    expect((await admin.command(setWp(1, 2))).cqe?.status).toBe(0);
    expect((await admin.command(getWp(1))).cqe?.dw0).toBe(2);
    for (const wps of [0, 1, 2]) expect((await admin.command(setWp(1, wps))).cqe?.status, `wps ${wps}`).toBe(Status.FEATURE_NOT_CHANGEABLE | DNR);
    expect(await status(io, lbaCmd(NvmOpcode.WRITE_UNCOR, 0n, 0))).toBe(Status.NS_WRITE_PROTECTED);
  });
});

describe('Abort (NVMe Base 2.0 §5.1)', () => {
  const abort = (sqid: number, cid: number): Buffer => encodeSqe({ opcode: AdminOpcode.ABORT, cid: nextCid(), cdw10: ((cid << 16) | sqid) >>> 0 });

  it('aborts a command parked over the in-flight limit and one waiting for its R2T data; neither runs', async () => {
    h = await target({ ports: [{ id: 1, addr: '127.0.0.1', port: 0, maxInFlightBytes: 4096, inlineDataSize: 0 }] });
    const { admin, io } = await ioQueue(h);
    const write = writeCmd(1, 0n, 8); // 4 KiB by R2T: fills the queue's in-flight budget
    const wcid = write.readUInt16LE(2);
    io.send({ type: PduType.CAPSULE_CMD, sqe: write, data: [] });
    const r2t = await io.nextPdu();
    if (r2t.type !== PduType.R2T) throw new Error(`expected R2T, got ${r2t.type}`);
    const read = readCmd(1, 0n, 1);
    const rcid = read.readUInt16LE(2);
    io.send({ type: PduType.CAPSULE_CMD, sqe: read, data: [] }); // parked behind the write's data
    await new Promise((r) => setTimeout(r, 20));
    const parked = await admin.command(abort(1, rcid));
    expect([parked.cqe?.status, parked.cqe?.dw0]).toEqual([0, 0]);
    const rresp = await io.nextPdu();
    expect(rresp.type === PduType.CAPSULE_RESP && [decodeCqe(rresp.cqe).cid, decodeCqe(rresp.cqe).status]).toEqual([rcid, Status.ABORT_REQ]);
    // The write waits for its data: aborted, and a second Abort of it finds nothing left to abort.
    expect((await admin.command(abort(1, wcid))).cqe?.dw0).toBe(0);
    expect((await admin.command(abort(1, wcid))).cqe?.dw0).toBe(1);
    io.send({ type: PduType.H2C_DATA, cccid: wcid, ttag: r2t.ttag, datao: 0, last: true, data: [Buffer.alloc(4096, 0xaa)] });
    const wresp = await io.nextPdu();
    expect(wresp.type === PduType.CAPSULE_RESP && [decodeCqe(wresp.cqe).cid, decodeCqe(wresp.cqe).status]).toEqual([wcid, Status.ABORT_REQ]);
    expect((await io.command(readCmd(1, 0n, 8))).data.equals(Buffer.alloc(4096))).toBe(true);
    // The queue goes on: the same write with its data now runs.
    expectOk(await io.command(writeCmd(1, 0n, 8), { data: Buffer.alloc(4096, 0xbb) }));
    expect((await io.command(readCmd(1, 0n, 8))).data.equals(Buffer.alloc(4096, 0xbb))).toBe(true);
  });

  it('answers "not aborted" for a finished, unknown or running command and for any SQID without that command', async () => {
    h = await target();
    const { admin, io } = await ioQueue(h);
    const done = readCmd(1, 0n, 1);
    expectOk(await io.command(done));
    for (const [sqid, cid] of [
      [1, done.readUInt16LE(2)],
      [0, 0],
      [1, 0xffff],
      [2, 1],
      [0x8000, 0x8000],
      [0xffff, 0xffff],
    ] as const) {
      const r = await admin.command(abort(sqid, cid));
      expect([r.cqe?.status, r.cqe?.dw0], `sqid ${sqid} cid ${cid}`).toEqual([0, 1]);
    }
  });
});

/** [CID, status] of a CapsuleResp PDU. */
function decodeCqeOf(p: Awaited<ReturnType<RawPeer['nextPdu']>>): [number, number] {
  if (p.type !== PduType.CAPSULE_RESP) throw new Error(`expected CapsuleResp, got ${p.type}`);
  const c = decodeCqe(p.cqe);
  return [c.cid, c.status];
}

describe('fused Compare and Write (NVMe Base 2.0 §3.4.2)', () => {
  /** Compare (FUSE 01b) or Write (FUSE 10b) of `nlb` blocks at `slba` with in-capsule data, as the SPDK host sends them. */
  const fused = (opcode: number, fuse: number, slba: number, nlb: number, inCapsule = true): Buffer =>
    encodeSqe({ opcode, cid: nextCid(), nsid: 1, fuse, sgl: inCapsule ? sglInCapsule(nlb * 512) : sglTransport(nlb * 512), cdw10: slba, cdw12: nlb - 1 });

  /** Sends both halves back to back and returns their completions' status, first then second. */
  async function pair(io: RawPeer, cmp: Buffer, cmpData: Buffer, wr: Buffer, wrData: Buffer): Promise<[number, number]> {
    io.send({ type: PduType.CAPSULE_CMD, sqe: cmp, data: [cmpData] });
    io.send({ type: PduType.CAPSULE_CMD, sqe: wr, data: [wrData] });
    const got = new Map<number, number>();
    while (got.size < 2) {
      const p = await io.nextPdu();
      if (p.type !== PduType.CAPSULE_RESP) throw new Error(`unexpected PDU ${p.type}`);
      const c = decodeCqe(p.cqe);
      got.set(c.cid, c.status);
    }
    return [got.get(cmp.readUInt16LE(2)) ?? -1, got.get(wr.readUInt16LE(2)) ?? -1];
  }

  it('writes only when the compare matches; FUSES bit 0 is set', async () => {
    h = await target();
    const { admin, io } = await ioQueue(h);
    expect(decodeIdentifyController((await admin.command(identify(1))).data).fuses).toBe(1);
    const old = Buffer.alloc(1024, 1);
    expectOk(await io.command(writeCmd(1, 8n, 2), { data: old }));
    expect(await pair(io, fused(NvmOpcode.COMPARE, 1, 8, 2), Buffer.alloc(1024, 9), fused(NvmOpcode.WRITE, 2, 8, 2), Buffer.alloc(1024, 2))).toEqual([Status.COMPARE_FAILED, Status.FUSED_FAIL]);
    expect((await io.command(readCmd(1, 8n, 2))).data.equals(old)).toBe(true);
    expect(await pair(io, fused(NvmOpcode.COMPARE, 1, 8, 2), old, fused(NvmOpcode.WRITE, 2, 8, 2), Buffer.alloc(1024, 2))).toEqual([0, 0]);
    expect((await io.command(readCmd(1, 8n, 2))).data.equals(Buffer.alloc(1024, 2))).toBe(true);
  });

  it('both halves by R2T', async () => {
    h = await target({ ports: [{ id: 1, addr: '127.0.0.1', port: 0, inlineDataSize: 0 }] });
    const { io } = await ioQueue(h);
    const cmp = fused(NvmOpcode.COMPARE, 1, 0, 1, false);
    const wr = fused(NvmOpcode.WRITE, 2, 0, 1, false);
    io.send({ type: PduType.CAPSULE_CMD, sqe: cmp, data: [] });
    io.send({ type: PduType.CAPSULE_CMD, sqe: wr, data: [] });
    const got = new Map<number, number>();
    while (got.size < 2) {
      const p = await io.nextPdu();
      if (p.type === PduType.R2T) {
        const data = p.cccid === cmp.readUInt16LE(2) ? Buffer.alloc(512) : Buffer.alloc(512, 5);
        io.send({ type: PduType.H2C_DATA, cccid: p.cccid, ttag: p.ttag, datao: 0, last: true, data: [data] });
      } else if (p.type === PduType.CAPSULE_RESP) {
        got.set(decodeCqe(p.cqe).cid, decodeCqe(p.cqe).status);
      }
    }
    expect([...got.values()]).toEqual([0, 0]);
    expect((await io.command(readCmd(1, 0n, 1))).data.equals(Buffer.alloc(512, 5))).toBe(true);
  });

  it('a missing, mismatched or misplaced half: Missing Fused, Failed Fused, Invalid Field', async () => {
    h = await target();
    const { admin, io } = await ioQueue(h);
    // A Compare then an ordinary Read: the Compare is aborted as missing its Write; the Read runs.
    const lone = fused(NvmOpcode.COMPARE, 1, 0, 1);
    io.send({ type: PduType.CAPSULE_CMD, sqe: lone, data: [Buffer.alloc(512)] });
    const read = await io.command(readCmd(1, 0n, 1));
    expect(read.cqe?.status ?? 0).toBe(0);
    expect(io.stray().map((c) => [c.cid, c.status])).toEqual([[lone.readUInt16LE(2), Status.FUSED_MISSING]]);
    // A Write (second) with no Compare before it.
    expect((await io.command(fused(NvmOpcode.WRITE, 2, 0, 1), { data: Buffer.alloc(512), inCapsule: true })).cqe?.status).toBe(Status.FUSED_MISSING);
    // A Write over another range, or another opcode as the second: Invalid Field, and the Compare fails with it.
    for (const wr of [fused(NvmOpcode.WRITE, 2, 1, 1), fused(NvmOpcode.WRITE, 2, 0, 2), fused(NvmOpcode.READ, 2, 0, 1, false)]) {
      const cmp = fused(NvmOpcode.COMPARE, 1, 0, 1);
      io.send({ type: PduType.CAPSULE_CMD, sqe: cmp, data: [Buffer.alloc(512)] });
      const r = await io.command(wr, wr.readUInt8(0) === NvmOpcode.WRITE ? { data: Buffer.alloc(wr.readUInt16LE(48) * 512 + 512), inCapsule: true } : {});
      expect(r.cqe?.status).toBe(Status.INVALID_FIELD | DNR);
      expect(io.stray().map((c) => [c.cid, c.status])).toEqual([[cmp.readUInt16LE(2), Status.FUSED_FAIL]]);
    }
    // FUSE 01b on anything but Compare, FUSE 11b, and any fused admin command.
    expect((await io.command(fused(NvmOpcode.WRITE, 1, 0, 1), { data: Buffer.alloc(512), inCapsule: true })).cqe?.status).toBe(Status.INVALID_FIELD | DNR);
    expect((await io.command(fused(NvmOpcode.COMPARE, 3, 0, 1), { data: Buffer.alloc(512), inCapsule: true })).cqe?.status).toBe(Status.INVALID_FIELD | DNR);
    expect((await admin.command(encodeSqe({ opcode: AdminOpcode.IDENTIFY, cid: nextCid(), fuse: 1, sgl: sglTransport(4096), cdw10: 1 }))).cqe?.status).toBe(Status.INVALID_FIELD | DNR);
  });

  it('a half aborted while waiting for its data takes its partner with it; the queue pairs nothing stale', async () => {
    h = await target({ ports: [{ id: 1, addr: '127.0.0.1', port: 0, inlineDataSize: 0 }] });
    const { admin, io } = await ioQueue(h);
    const abort = (cid: number): Buffer => encodeSqe({ opcode: AdminOpcode.ABORT, cid: nextCid(), cdw10: ((cid << 16) | 1) >>> 0 });
    const next = async (): Promise<{ type: number; cid: number; status: number; ttag: number }> => {
      const p = await io.nextPdu();
      if (p.type === PduType.R2T) return { type: p.type, cid: p.cccid, status: -1, ttag: p.ttag };
      if (p.type === PduType.CAPSULE_RESP) return { type: p.type, ...decodeCqe(p.cqe), ttag: -1 };
      throw new Error(`unexpected PDU ${p.type}`);
    };
    // The first half waits for its data and is aborted: then the second finds no first.
    const cmp = fused(NvmOpcode.COMPARE, 1, 0, 1, false);
    io.send({ type: PduType.CAPSULE_CMD, sqe: cmp, data: [] });
    const r2t = await next();
    expect((await admin.command(abort(cmp.readUInt16LE(2)))).cqe?.dw0).toBe(0);
    io.send({ type: PduType.H2C_DATA, cccid: r2t.cid, ttag: r2t.ttag, datao: 0, last: true, data: [Buffer.alloc(512)] });
    expect(await next()).toMatchObject({ cid: cmp.readUInt16LE(2), status: Status.ABORT_REQ });
    const lone = fused(NvmOpcode.WRITE, 2, 0, 1, false);
    expect((await io.command(lone, { data: Buffer.alloc(512, 1) })).cqe?.status).toBe(Status.FUSED_MISSING);
    // Both halves wait for data; the second is aborted: the first fails with it once its own data is in.
    const cmp2 = fused(NvmOpcode.COMPARE, 1, 0, 1, false);
    const wr2 = fused(NvmOpcode.WRITE, 2, 0, 1, false);
    io.send({ type: PduType.CAPSULE_CMD, sqe: cmp2, data: [] });
    io.send({ type: PduType.CAPSULE_CMD, sqe: wr2, data: [] });
    const r2ts = [await next(), await next()];
    expect((await admin.command(abort(wr2.readUInt16LE(2)))).cqe?.dw0).toBe(0);
    for (const r of r2ts) io.send({ type: PduType.H2C_DATA, cccid: r.cid, ttag: r.ttag, datao: 0, last: true, data: [Buffer.alloc(512, 2)] });
    const done = [await next(), await next()].map((c) => [c.cid, c.status]).sort((a, b) => (a[0] as number) - (b[0] as number));
    expect(done).toEqual(
      [
        [cmp2.readUInt16LE(2), Status.FUSED_FAIL],
        [wr2.readUInt16LE(2), Status.ABORT_REQ],
      ].sort((a, b) => (a[0] as number) - (b[0] as number)),
    );
    // Nothing was written, and the queue goes on.
    expect((await io.command(readCmd(1, 0n, 1))).data.equals(Buffer.alloc(512))).toBe(true);
  });

  it('a first waiting for its second on one queue does not stall a pair on another', async () => {
    h = await target();
    const admin = await h.peer();
    const cntlid = await bringUpAdmin(admin);
    expectOk(await admin.command(setFeatures(0x07, 0x10001)));
    const [a, b] = [await h.peer(), await h.peer()] as [RawPeer, RawPeer];
    expectOk(await connectIo(a, cntlid, 1));
    expectOk(await connectIo(b, cntlid, 2));
    const cmpA = fused(NvmOpcode.COMPARE, 1, 0, 1);
    a.send({ type: PduType.CAPSULE_CMD, sqe: cmpA, data: [Buffer.alloc(512)] });
    await new Promise((r) => setTimeout(r, 20));
    expect(await pair(b, fused(NvmOpcode.COMPARE, 1, 8, 1), Buffer.alloc(512), fused(NvmOpcode.WRITE, 2, 8, 1), Buffer.alloc(512, 4))).toEqual([0, 0]);
    const wrA = fused(NvmOpcode.WRITE, 2, 0, 1);
    a.send({ type: PduType.CAPSULE_CMD, sqe: wrA, data: [Buffer.alloc(512, 6)] });
    const got = [decodeCqeOf(await a.nextPdu()), decodeCqeOf(await a.nextPdu())].sort((x, y) => x[0] - y[0]);
    expect(got).toEqual([[cmpA.readUInt16LE(2), 0], [wrA.readUInt16LE(2), 0]].sort((x, y) => (x[0] as number) - (y[0] as number)));
    expect((await a.command(readCmd(1, 0n, 1))).data.equals(Buffer.alloc(512, 6))).toBe(true);
  });

  it('is atomic: two queues incrementing one block by compare-and-write lose no update (file namespace)', async () => {
    tmp = await tempDir('nvm-caw-');
    h = await target({ subsystems: [defaultSubsystem({ namespaces: [{ nsid: 1, backend: { type: 'file', path: path.join(tmp, 'ns.img'), size: '1M' } }] })] });
    const admin = await h.peer();
    const cntlid = await bringUpAdmin(admin);
    expectOk(await admin.command(setFeatures(0x07, 0x10001)));
    const queues: RawPeer[] = [];
    for (const qid of [1, 2]) {
      const io = await h.peer();
      expectOk(await connectIo(io, cntlid, qid));
      queues.push(io);
    }
    const block = (n: number): Buffer => {
      const b = Buffer.alloc(512);
      b.writeUInt32LE(n, 0);
      return b;
    };
    const PER_QUEUE = 40;
    let retries = 0;
    const worker = async (io: RawPeer): Promise<void> => {
      for (let done = 0; done < PER_QUEUE; ) {
        const cur = (await io.command(readCmd(1, 5n, 1))).data.readUInt32LE(0);
        const [s1, s2] = await pair(io, fused(NvmOpcode.COMPARE, 1, 5, 1), block(cur), fused(NvmOpcode.WRITE, 2, 5, 1), block(cur + 1));
        if (s1 === 0 && s2 === 0) done++;
        else if (s1 === Status.COMPARE_FAILED && s2 === Status.FUSED_FAIL) retries++;
        else throw new Error(`statuses ${s1}, ${s2}`);
      }
    };
    await Promise.all(queues.map((q) => worker(q)));
    expect((await (queues[0] as RawPeer).command(readCmd(1, 5n, 1))).data.readUInt32LE(0)).toBe(2 * PER_QUEUE);
    expect(retries).toBeGreaterThan(0); // the two queues did race
  });
});

describe('Format NVM (NVMe Base 2.0 §5.23) between 512- and 4096-byte LBAs', () => {
  const format = (nsid: number, cdw10: number): Buffer => encodeSqe({ opcode: AdminOpcode.FORMAT_NVM, cid: nextCid(), nsid, cdw10 });

  it('LBAF 1 makes the namespace 4096-byte blocks with the notice; LBAF 0 back; SES 1 erases', async () => {
    h = await target();
    const { admin, io } = await ioQueue(h);
    const idc = decodeIdentifyController((await admin.command(identify(1))).data);
    expect(idc.oacs & 0x2).toBe(0x2);
    let idn = decodeIdentifyNamespace((await admin.command(identify(0, 1))).data);
    expect([idn.nlbaf, idn.flbas, idn.nsze, idn.lbaf[0]?.lbads, idn.lbaf[1]?.lbads]).toEqual([1, 0, NS_BLOCKS, 9, 12]);
    expectOk(await io.command(writeCmd(1, 0n, 8), { data: Buffer.alloc(4096, 3) }));
    admin.send({ type: PduType.CAPSULE_CMD, sqe: adminCmd(AdminOpcode.ASYNC_EVENT, { cid: 31 }), data: [] });
    expect((await admin.command(format(1, 1))).cqe?.status).toBe(0);
    expect(admin.stray().map((c) => [c.cid, c.dw0])).toEqual([[31, 0x00040002]]);
    idn = decodeIdentifyNamespace((await admin.command(identify(0, 1))).data);
    expect([idn.flbas, idn.nsze]).toEqual([1, NS_BLOCKS / 8n]);
    // SES 0 keeps the bytes: block 0 is now the old first 4 KiB. A 512-byte transfer no longer fits one block.
    expect((await io.command(readCmd(1, 0n, 1, 4096))).data.equals(Buffer.alloc(4096, 3))).toBe(true);
    expect((await io.command(readCmd(1, 0n, 1, 512))).cqe?.status).toBe(Status.SGL_INVALID_DATA | DNR);
    expect(await status(io, lbaCmd(NvmOpcode.VERIFY, NS_BLOCKS / 8n, 0))).toBe(Status.LBA_RANGE | DNR);
    // Back to 512 with User Data Erase (SES 1, CDW10 bits 11:9): zeroes.
    expect((await admin.command(format(1, 0 | (1 << 9)))).cqe?.status).toBe(0);
    idn = decodeIdentifyNamespace((await admin.command(identify(0, 1))).data);
    expect([idn.flbas, idn.nsze]).toEqual([0, NS_BLOCKS]);
    expect((await io.command(readCmd(1, 0n, 8))).data.equals(Buffer.alloc(4096))).toBe(true);
  });

  it('refuses formats, settings and namespaces it does not have', async () => {
    h = await target({ subsystems: [defaultSubsystem({ namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }, { nsid: 2, readOnly: true, backend: { type: 'ram', size: '1M' } }] })] });
    const admin = await h.peer();
    await bringUpAdmin(admin);
    for (const [cdw10, want] of [
      [2, Status.INVALID_FORMAT | DNR], // LBAF 2
      [0xf, Status.INVALID_FORMAT | DNR],
      [1 << 12, Status.INVALID_FORMAT | DNR], // LBAFU: LBAF 16
      [0x10, Status.INVALID_FORMAT | DNR], // MSET
      [0xe0, Status.INVALID_FORMAT | DNR], // PI
      [0x100, Status.INVALID_FORMAT | DNR], // PIL
      [2 << 9, Status.INVALID_FIELD | DNR], // SES 2, cryptographic erase
      [7 << 9, Status.INVALID_FIELD | DNR],
      [0xffff_ffff, Status.INVALID_FORMAT | DNR],
    ] as const) {
      expect((await admin.command(format(1, cdw10))).cqe?.status, `cdw10 ${cdw10.toString(16)}`).toBe(want);
    }
    for (const nsid of [0, 3, 0x8000_0000, 0xffff_ffff]) expect((await admin.command(format(nsid, 1))).cqe?.status, `nsid ${nsid}`).toBe(Status.INVALID_NS | DNR);
    expect((await admin.command(format(2, 1))).cqe?.status).toBe(Status.NS_WRITE_PROTECTED);
    expect(decodeIdentifyNamespace((await admin.command(identify(0, 1))).data).flbas).toBe(0);
  });
});

/** Whether this machine lets the test attach a loop device (root and a free /dev/loopN); else the test says why it skips. */
function loopDevices(): boolean {
  try {
    execFileSync('losetup', ['-f'], { stdio: 'pipe' });
    return process.getuid?.() === 0;
  } catch {
    return false;
  }
}

/** A loop device over a `bytes`-long image in a temporary folder; detached after the test. */
async function loopDevice(bytes: number): Promise<{ img: string; dev: string }> {
  tmp = await tempDir('nvm-bdev-');
  const img = path.join(tmp, 'disk.img');
  await fs.writeFile(img, Buffer.alloc(0));
  await fs.truncate(img, bytes);
  const dev = execFileSync('losetup', ['-f', '--show', img], { encoding: 'utf8' }).trim();
  cleanups.push(() => execFileSync('losetup', ['-d', dev]));
  return { img, dev };
}

describe('block-device namespaces', () => {
  it.skipIf(!loopDevices())('a loop device serves as a namespace of its size; Write Uncorrectable keeps no file in /dev', async () => {
    const { img, dev } = await loopDevice(4 << 20);
    h = await target({ subsystems: [defaultSubsystem({ namespaces: [{ nsid: 1, backend: { type: 'file', path: dev } }] })] });
    const { admin, io } = await ioQueue(h);
    expect(decodeIdentifyNamespace((await admin.command(identify(0, 1))).data).nsze).toBe(8192n);
    const data = Buffer.alloc(4096, 0x5c);
    expectOk(await io.command(writeCmd(1, 8184n, 8), { data }));
    expect(await status(io, lbaCmd(NvmOpcode.FLUSH, 0n, 0))).toBe(0);
    expect((await io.command(readCmd(1, 8184n, 8))).data.equals(data)).toBe(true);
    expect(await status(io, lbaCmd(NvmOpcode.VERIFY, 8192n, 0))).toBe(Status.LBA_RANGE | DNR);
    // The bytes reached the device: the image file behind it holds them.
    const fd = await fs.open(img, 'r');
    const back = Buffer.alloc(4096);
    await fd.read(back, 0, 4096, 8184 * 512);
    await fd.close();
    expect(back.equals(data)).toBe(true);
    expect(await status(io, lbaCmd(NvmOpcode.WRITE_UNCOR, 0n, 0))).toBe(0);
    expect(await readStatus(io, 0n)).toBe(Status.READ_ERROR | DNR);
    await expect(fs.stat(`${dev}.uncor`)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it.skipIf(!loopDevices())('a configured size above the device is refused', async () => {
    const { dev } = await loopDevice(1 << 20);
    await expect(target({ subsystems: [defaultSubsystem({ namespaces: [{ nsid: 1, backend: { type: 'file', path: dev, size: '2M' } }] })] })).rejects.toThrow(/smaller than the configured size/);
  });
});
