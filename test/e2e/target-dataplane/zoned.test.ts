// Zoned namespaces and I/O command set discovery over real sockets, as raw PDUs: CAP.CSS / CC.CSS, Identify CNS
// 03h/05h/06h/07h/08h/1Ch, the per-CSI effects log, FID 19h, and every zone status edge (ZNS 1.1 §3.4, §5).
// Expected bytes are read at the spec's offsets here, not through protocol's decoders.
import { Buffer } from 'node:buffer';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AdminOpcode, DNR, NvmOpcode, Status, encodeGetLogPageCmd, encodeResvCmd, encodeResvKeys, encodeRwCmd, encodeSglInto, encodeSqe, sglInCapsule, sglTransport } from '../../../protocol/index.js';
import type { SubsystemConfig } from '../../../target/model/config.js';
import { TargetService } from '../../../target/service/index.js';
import { SUBNQN, bringUpAdmin, connectIo, expectOk, identify, nextCid, propGet, propSet, readCmd, setFeatures, startTarget, type Harness, type RawPeer } from './fixture.js';

let h: Harness | undefined;
/** The file namespace's directory, removed after its target stopped. */
const dirs: string[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const d of dirs.splice(0)) await fs.rm(d, { recursive: true, force: true });
});

/** 4 zones of 64 KiB (128 blocks of 512 bytes), at most 2 open and 3 active; NSID 2 conventional. */
function zonedSubsystem(backend: SubsystemConfig['namespaces'] extends (infer N)[] | undefined ? N extends { backend: infer B } ? B : never : never = { type: 'ram', size: '256K' }): SubsystemConfig {
  return {
    nqn: SUBNQN,
    namespaces: [
      { nsid: 1, backend, zoned: { zoneSize: '64K', maxOpen: 2, maxActive: 3 } },
      { nsid: 2, backend: { type: 'ram', size: '1M' } },
    ],
  };
}

const ZS = 128;

async function queues(hh: Harness): Promise<{ admin: RawPeer; io: RawPeer }> {
  const admin = await hh.peer();
  const cntlid = await bringUpAdmin(admin);
  expectOk(await admin.command(setFeatures(0x07, 0x10001)));
  const io = await hh.peer();
  expectOk(await connectIo(io, cntlid, 1));
  return { admin, io };
}

function zms(slba: bigint, zsa: number, o: { all?: boolean; nsid?: number } = {}): Buffer {
  const lo = Number(slba & 0xffff_ffffn);
  const hi = Number(slba >> 32n);
  return encodeSqe({ opcode: 0x79, cid: nextCid(), nsid: o.nsid ?? 1, cdw10: lo, cdw11: hi, cdw13: (zsa | (o.all === true ? 0x100 : 0)) >>> 0 });
}

function zmr(slba: bigint, bytes: number, o: { filter?: number; partial?: boolean; numd?: number; zra?: number } = {}): Buffer {
  const numd = o.numd ?? bytes / 4 - 1;
  return encodeSqe({ opcode: 0x7a, cid: nextCid(), nsid: 1, sgl: sglTransport(bytes), cdw10: Number(slba & 0xffff_ffffn), cdw11: Number(slba >> 32n), cdw12: numd >>> 0, cdw13: ((o.zra ?? 0) | ((o.filter ?? 0) << 8) | (o.partial === true ? 0x10000 : 0)) >>> 0 });
}

/** A Write (or Zone Append) of `nlb` blocks of 0xab: in the capsule up to 8 KiB, else through R2T. */
function write(slba: number, nlb: number, opcode: number = NvmOpcode.WRITE): [Buffer, { data: Buffer; inCapsule: boolean }] {
  const len = nlb * 512;
  const inCapsule = len <= 8192;
  return [encodeRwCmd({ opcode, cid: nextCid(), nsid: 1, slba: BigInt(slba), nlb, sgl: inCapsule ? sglInCapsule(len) : sglTransport(len) }), { data: Buffer.alloc(len, 0xab), inCapsule }];
}

/** The report's zones, read at ZNS 1.1 Figures 37/38 offsets: [state nibble, zslba, wp, zcap]. */
function zonesOf(data: Buffer): { nr: number; zones: [number, number, number, number][] } {
  const nr = Number(data.readBigUInt64LE(0));
  const zones: [number, number, number, number][] = [];
  for (let o = 64; o + 64 <= data.length && zones.length < nr; o += 64) {
    if (data[o] !== 2) break;
    zones.push([(data[o + 1] as number) >> 4, Number(data.readBigUInt64LE(o + 16)), Number(data.readBigUInt64LE(o + 24)), Number(data.readBigUInt64LE(o + 8))]);
  }
  return { nr, zones };
}

async function status(p: RawPeer, sqe: Buffer, opts: { data?: Buffer; inCapsule?: boolean } = {}): Promise<number> {
  return (await p.command(sqe, opts)).cqe?.status ?? -1;
}

describe('I/O command set discovery', () => {
  it('CAP.CSS has NVM and I/O command sets, CC.CSS 110b enables, FID 19h selects index 0', async () => {
    h = await startTarget({ subsystems: [zonedSubsystem()] });
    const p = await h.peer();
    const c = await p.connect({ subnqn: SUBNQN, hostnqn: 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000001', kato: 5000 });
    expect(c.cqe?.status).toBe(0);
    const cap = await p.command(propGet(0, true));
    const capHi = cap.cqe?.dw1 ?? 0;
    // CAP bits 44:37: bit 37 NVM, bit 43 one or more I/O command sets (NVMe Base 2.0 Figure 36).
    expect((capHi >>> 5) & 1).toBe(1);
    expect((capHi >>> 11) & 1).toBe(1);
    expectOk(await p.command(propSet(0x14, 0x460060)));
    expectOk(await p.command(propSet(0x14, 0x460061)));
    expect(((await p.command(propGet(0x1c))).cqe?.dw0 ?? 0) & 3).toBe(1);
    expect((await p.command(adminCmd(AdminOpcode.GET_FEATURES, 0x19))).cqe?.dw0).toBe(0);
    expect(await status(p, setFeatures(0x19, 0))).toBe(0);
    expect(await status(p, setFeatures(0x19, 1))).toBe(Status.INVALID_FIELD | DNR);
    expect(await status(p, setFeatures(0x19, 0x1ff))).toBe(Status.INVALID_FIELD | DNR);
  });

  it('CSI descriptors, CNS 05h/06h/07h/08h/1Ch per CSI, and their edges', async () => {
    h = await startTarget({ subsystems: [zonedSubsystem()] });
    const { admin } = await queues(h);
    const csiOf = (d: Buffer): number | undefined => {
      for (let o = 0; o + 4 <= d.length && d[o] !== 0; o += 4 + (d[o + 1] as number)) if (d[o] === 4) return d[o + 4];
      return undefined;
    };
    expect(csiOf((await admin.command(identify(3, 1))).data)).toBe(2);
    expect(csiOf((await admin.command(identify(3, 2))).data)).toBe(0);
    const zns = (await admin.command(identify(5, 1, 2 << 24))).data;
    // ZNS 1.1 Figure 48: ZOC 0, OZCS RAZB, MAR 2 and MOR 1 (0's based), LBAFE0 ZSZE 128 at byte 2816.
    expect([zns.readUInt16LE(0), zns.readUInt16LE(2), zns.readUInt32LE(4), zns.readUInt32LE(8), Number(zns.readBigUInt64LE(2816))]).toEqual([0, 1, 2, 1, ZS]);
    expect((await admin.command(identify(5, 2, 2 << 24))).cqe?.status).toBe(Status.INVALID_FIELD | DNR);
    expect((await admin.command(identify(5, 1, 0))).data.equals(Buffer.alloc(4096))).toBe(true);
    expect((await admin.command(identify(5, 1, 1 << 24))).cqe?.status).toBe(Status.INVALID_FIELD | DNR);
    expect((await admin.command(identify(5, 0xffff_ffff, 2 << 24))).cqe?.status).toBe(Status.INVALID_NS | DNR);
    const inactive = await admin.command(identify(5, 0x8000_0000, 2 << 24));
    expect([inactive.cqe?.status ?? 0, inactive.data.equals(Buffer.alloc(4096))]).toEqual([0, true]);
    expect((await admin.command(identify(6, 0, 2 << 24))).data[0]).toBe(0);
    expect((await admin.command(identify(6, 0, 0xff << 24))).cqe?.status).toBe(Status.INVALID_FIELD | DNR);
    expect((await admin.command(identify(7, 0, 2 << 24))).data.readUInt32LE(0)).toBe(1);
    const nvmList = (await admin.command(identify(7, 0, 0))).data;
    expect([nvmList.readUInt32LE(0), nvmList.readUInt32LE(4)]).toEqual([2, 0]);
    expect((await admin.command(identify(7, 1, 2 << 24))).data.readUInt32LE(0)).toBe(0);
    expect((await admin.command(identify(7, 0xffff_fffe, 0))).cqe?.status).toBe(Status.INVALID_NS | DNR);
    expect((await admin.command(identify(7, 0, 3 << 24))).cqe?.status).toBe(Status.INVALID_FIELD | DNR);
    const indep = (await admin.command(identify(8, 1))).data;
    expect([indep[1], indep.readUInt32LE(4), indep[14]]).toEqual([1, 1, 1]);
    expect((await admin.command(identify(8, 0xffff_ffff))).cqe?.status).toBe(Status.INVALID_NS | DNR);
    expect((await admin.command(identify(8, 7))).data.equals(Buffer.alloc(4096))).toBe(true);
    expect((await admin.command(identify(0x1c))).data.readBigUInt64LE(0)).toBe(0b101n);
  });

  it('effects log per CSI: Zone Append and Zone Management only under CSI 02h; an unknown CSI is Invalid Field', async () => {
    h = await startTarget({ subsystems: [zonedSubsystem()] });
    const { admin } = await queues(h);
    const log = async (csi: number): Promise<Buffer> => (await admin.command(encodeGetLogPageCmd({ cid: nextCid(), lid: 5, length: 4096, nsid: 0, csi }))).data;
    const zns = await log(2);
    const nvm = await log(0);
    const io = (b: Buffer, op: number): number => b.readUInt32LE(1024 + op * 4);
    expect([io(zns, 0x79), io(zns, 0x7a), io(zns, 0x7d), io(zns, 0x01)]).toEqual([3, 1, 3, 3]);
    expect([io(nvm, 0x79), io(nvm, 0x7a), io(nvm, 0x7d), io(nvm, 0x01)]).toEqual([0, 0, 0, 3]);
    expect((await admin.command(encodeGetLogPageCmd({ cid: nextCid(), lid: 5, length: 4096, nsid: 0, csi: 1 }))).cqe?.status).toBe(Status.INVALID_FIELD | DNR);
  });
});

function adminCmd(opcode: number, cdw10: number): Buffer {
  return encodeSqe({ opcode, cid: nextCid(), cdw10 });
}

describe('zoned RAM namespace', () => {
  it('write pointer rules: invalid write, boundary, full, append LBA in DW0/DW1, append not at a zone start', async () => {
    h = await startTarget({ subsystems: [zonedSubsystem()] });
    const { io } = await queues(h);
    const all = zonesOf((await io.command(zmr(0n, 64 + 4 * 64))).data);
    expect(all).toEqual({ nr: 4, zones: [0, 1, 2, 3].map((z) => [1, z * ZS, z * ZS, ZS]) });
    expect(await status(io, ...write(0, 8))).toBe(0);
    expect(await status(io, ...write(4, 8))).toBe(Status.ZONE_INVALID_WRITE | DNR);
    expect(await status(io, ...write(ZS, 1))).toBe(0);
    expect(await status(io, ...write(8, 112))).toBe(0);
    // Past the zone's end (SLBA at the write pointer, 120 + 16 > 128): Zone Boundary Error.
    expect(await status(io, ...write(120, 16))).toBe(Status.ZONE_BOUNDARY_ERROR | DNR);
    expect(await status(io, ...write(120, 8))).toBe(0);
    expect(await status(io, ...write(ZS - 1, 1))).toBe(Status.ZONE_FULL | DNR);
    const [a1, d1] = write(ZS, 4, NvmOpcode.ZONE_APPEND);
    const r1 = await io.command(a1, d1);
    expect([r1.cqe?.status, r1.cqe?.dw0, r1.cqe?.dw1]).toEqual([0, ZS + 1, 0]);
    const r2 = await io.command(...write(ZS, 4, NvmOpcode.ZONE_APPEND));
    expect(r2.cqe?.dw0).toBe(ZS + 5);
    expect(await status(io, ...write(ZS + 1, 1, NvmOpcode.ZONE_APPEND))).toBe(Status.INVALID_FIELD | DNR);
    expect(await status(io, ...write(0, 1, NvmOpcode.ZONE_APPEND))).toBe(Status.ZONE_FULL | DNR);
    const zs = zonesOf((await io.command(zmr(0n, 64 + 2 * 64))).data);
    expect(zs.zones).toEqual([
      [0xe, 0, ZS, ZS],
      [2, ZS, ZS + 9, ZS],
    ]);
    // The data went where the append said.
    const back = await io.command(readCmd(1, BigInt(ZS + 5), 1));
    expect(back.data.equals(Buffer.alloc(512, 0xab))).toBe(true);
    expect(h.svc.zones(SUBNQN, 1)?.map((z) => z.state)).toEqual(['full', 'imp-open', 'empty', 'empty']);
  });

  it('open and active resources: implicit close, Too Many Open Zones, Too Many Active Zones', async () => {
    h = await startTarget({ subsystems: [zonedSubsystem()] });
    const { io } = await queues(h);
    expect(await status(io, ...write(ZS, 1))).toBe(0); // zone 1 implicitly open
    expect(await status(io, zms(BigInt(2 * ZS), 3))).toBe(0); // zone 2 explicitly open: 2 open
    expect(await status(io, ...write(3 * ZS, 1))).toBe(0); // zone 3 opens, zone 1 implicitly closed
    expect(h.svc.zones(SUBNQN, 1)?.map((z) => z.state)).toEqual(['empty', 'closed', 'exp-open', 'imp-open']);
    expect(await status(io, zms(BigInt(ZS), 3))).toBe(0); // zone 1 explicitly opened, zone 3 closed for it
    expect(await status(io, ...write(3 * ZS + 1, 1))).toBe(Status.ZONE_TOO_MANY_OPEN | DNR);
    expect(await status(io, zms(BigInt(3 * ZS), 3))).toBe(Status.ZONE_TOO_MANY_OPEN | DNR);
    expect(await status(io, ...write(0, 1))).toBe(Status.ZONE_TOO_MANY_ACTIVE | DNR);
    expect(await status(io, zms(0n, 3))).toBe(Status.ZONE_TOO_MANY_ACTIVE | DNR);
    expect(await status(io, zms(0n, 2))).toBe(Status.ZONE_TOO_MANY_ACTIVE | DNR);
    expect(h.svc.zones(SUBNQN, 1)?.map((z) => z.state)).toEqual(['empty', 'exp-open', 'exp-open', 'closed']);
    // Select All close: the open zones close; zone 1 and 2 hold writes? zone 2 was never written: it goes empty.
    expect(await status(io, zms(0n, 1, { all: true }))).toBe(0);
    expect(h.svc.zones(SUBNQN, 1)?.map((z) => z.state)).toEqual(['empty', 'closed', 'empty', 'closed']);
    expect(await status(io, zms(0n, 2, { all: true }))).toBe(0);
    expect(h.svc.zones(SUBNQN, 1)?.map((z) => z.state)).toEqual(['empty', 'full', 'empty', 'full']);
    expect(await status(io, zms(0n, 4, { all: true }))).toBe(0);
    expect(h.svc.zones(SUBNQN, 1)?.map((z) => z.state)).toEqual(['empty', 'empty', 'empty', 'empty']);
  });

  it('reset zeroes the zone; Invalid Zone State Transition; read only and offline zones', async () => {
    h = await startTarget({ subsystems: [zonedSubsystem()] });
    const { io } = await queues(h);
    expect(await status(io, ...write(0, 4))).toBe(0);
    expect(await status(io, zms(0n, 4))).toBe(0);
    expect((await io.command(readCmd(1, 0n, 4))).data.equals(Buffer.alloc(2048))).toBe(true);
    expect(await status(io, zms(0n, 1))).toBe(Status.ZONE_INVALID_TRANSITION | DNR); // close an empty zone
    expect(await status(io, zms(0n, 5))).toBe(Status.ZONE_INVALID_TRANSITION | DNR); // offline needs read only
    h.svc.setZoneCondition(SUBNQN, 1, 1, 'read-only');
    expect(await status(io, ...write(ZS, 1))).toBe(Status.ZONE_READ_ONLY | DNR);
    expect(await status(io, ...write(ZS, 1, NvmOpcode.ZONE_APPEND))).toBe(Status.ZONE_READ_ONLY | DNR);
    expect(await status(io, zms(BigInt(ZS), 4))).toBe(Status.ZONE_INVALID_TRANSITION | DNR);
    expect(await status(io, readCmd(1, BigInt(ZS), 1))).toBe(0);
    expect(await status(io, zms(0n, 5, { all: true }))).toBe(0);
    expect(h.svc.zones(SUBNQN, 1)?.[1]?.state).toBe('offline');
    expect(await status(io, ...write(ZS, 1))).toBe(Status.ZONE_OFFLINE | DNR);
    expect(await status(io, readCmd(1, BigInt(ZS - 1), 2))).toBe(Status.ZONE_OFFLINE | DNR);
    expect(await status(io, readCmd(1, BigInt(ZS - 2), 2))).toBe(0); // reads may cross zones (OZCS.RAZB)
    expect(await status(io, zms(BigInt(ZS), 3))).toBe(Status.ZONE_INVALID_TRANSITION | DNR);
    expect(() => h?.svc.setZoneCondition(SUBNQN, 1, 1, 'read-only')).toThrow(/zone 1 is offline/);
    expect(() => h?.svc.setZoneCondition(SUBNQN, 1, 4, 'offline')).toThrow(/use 0\.\.3/);
    expect(() => h?.svc.setZoneCondition(SUBNQN, 2, 0, 'offline')).toThrow(/not zoned/);
    const off = zonesOf((await io.command(zmr(0n, 64 + 4 * 64, { filter: 7 }))).data);
    expect(off.nr).toBe(1);
    expect(off.zones[0]?.slice(0, 2)).toEqual([0xf, ZS]);
  });

  it('reports: filters, partial report, and the edges of SLBA, NUMD, ZSA, ZRA and ZRASF', async () => {
    h = await startTarget({ subsystems: [zonedSubsystem()] });
    const { io } = await queues(h);
    expect(await status(io, ...write(2 * ZS, 1))).toBe(0);
    // One descriptor's room: Number of Zones counts every zone from SLBA on, or with Partial Report those returned.
    expect(zonesOf((await io.command(zmr(0n, 128))).data).nr).toBe(4);
    expect(zonesOf((await io.command(zmr(0n, 128, { partial: true }))).data).nr).toBe(1);
    expect(zonesOf((await io.command(zmr(BigInt(ZS + 5), 128))).data)).toEqual({ nr: 3, zones: [[1, ZS, ZS, ZS]] });
    expect(zonesOf((await io.command(zmr(0n, 320, { filter: 2 }))).data)).toEqual({ nr: 1, zones: [[2, 2 * ZS, 2 * ZS + 1, ZS]] });
    expect(zonesOf((await io.command(zmr(0n, 320, { filter: 1 }))).data).nr).toBe(3);
    expect(zonesOf((await io.command(zmr(0n, 64))).data).nr).toBe(4);
    for (const slba of [BigInt(4 * ZS), 0x8000_0000n, 0xffff_ffffn, 0xffff_ffff_ffff_ffffn]) {
      expect(await status(io, zmr(slba, 128))).toBe(Status.LBA_RANGE | DNR);
      expect(await status(io, zms(slba, 4))).toBe(Status.LBA_RANGE | DNR);
    }
    expect(await status(io, zms(1n, 4))).toBe(Status.INVALID_FIELD | DNR);
    expect(await status(io, zms(BigInt(ZS - 1), 3))).toBe(Status.INVALID_FIELD | DNR);
    for (const zsa of [0, 6, 0x10, 0xff]) expect(await status(io, zms(0n, zsa))).toBe(Status.INVALID_FIELD | DNR);
    expect(await status(io, zmr(0n, 128, { filter: 8 }))).toBe(Status.INVALID_FIELD | DNR);
    expect(await status(io, zmr(0n, 128, { zra: 1 }))).toBe(Status.INVALID_FIELD | DNR);
    expect(await status(io, zmr(0n, 60))).toBe(Status.INVALID_FIELD | DNR);
    expect(await status(io, zmr(0n, 128, { numd: 0xffff_ffff }))).toBe(Status.INVALID_FIELD | DNR);
    expect(await status(io, zmr(0n, 128, { numd: 0x7fff_ffff }))).toBe(Status.INVALID_FIELD | DNR);
    expect(await status(io, zmr(0n, 128, { numd: 63 }))).toBe(Status.SGL_INVALID_DATA | DNR);
    expect(await status(io, zms(0n, 4, { nsid: 2 }))).toBe(Status.INVALID_OPCODE | DNR);
  });

  it('a zone geometry the namespace cannot have is refused in one line naming the field', async () => {
    await expect(startTarget({ subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '256K' }, zoned: { zoneSize: '96K' } }] }] })).rejects.toThrow(/zoned\.zoneSize: 98304 bytes is not a power of two/);
    await expect(startTarget({ subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '192K' }, zoned: { zoneSize: '128K' } }] }] })).rejects.toThrow(/not a whole number of 131072-byte zones/);
    await expect(startTarget({ subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '256K' }, zoned: { zoneSize: '64K', zoneCapacity: '65K' } }] }] })).rejects.toThrow(/zoned\.zoneCapacity/);
    await expect(startTarget({ subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '256K' }, zoned: { zoneSize: '64K', maxOpen: 3, maxActive: 2 } }] }] })).rejects.toThrow(/zoned\.maxOpen: 3 is more than maxActive 2/);
  });
});

describe('zoned namespaces under ANA and reservations', () => {
  it('ANA states and the reservation access table apply to the zoned commands as to Write and Read', async () => {
    h = await startTarget({ subsystems: [zonedSubsystem()] });
    const { io } = await queues(h);
    h.svc.setAnaState(1, 1, 'inaccessible');
    expect(await status(io, ...write(0, 1, NvmOpcode.ZONE_APPEND))).toBe(Status.ANA_INACCESSIBLE);
    expect(await status(io, zms(0n, 3))).toBe(Status.ANA_INACCESSIBLE);
    expect(await status(io, zmr(0n, 128))).toBe(Status.ANA_INACCESSIBLE);
    h.svc.setAnaState(1, 1, 'optimized');
    // Another host (its own host ID) registers and takes Write Exclusive: this host may report zones, not change them.
    const admin2 = await h.peer();
    const other = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000002';
    const c2 = await admin2.connect({ subnqn: SUBNQN, hostnqn: other, hostid: Buffer.alloc(16, 0x22), kato: 5000 });
    const cntlid2 = (c2.cqe?.dw0 ?? 0) & 0xffff;
    expectOk(await admin2.command(propSet(0x14, 0x460001)));
    expectOk(await admin2.command(setFeatures(0x07, 0x10001)));
    const io2 = await h.peer();
    expectOk(await io2.connect({ subnqn: SUBNQN, hostnqn: other, hostid: Buffer.alloc(16, 0x22), qid: 1, cntlid: cntlid2, sqsize: 127 }));
    const resv = (opcode: number, cdw10: number, data: Buffer): Promise<number> => {
      const sqe = encodeResvCmd({ opcode, cid: nextCid(), nsid: 1, cdw10 });
      encodeSglInto(sqe, 24, sglInCapsule(data.length));
      return status(io2, sqe, { data, inCapsule: true });
    };
    expect(await resv(NvmOpcode.RESV_REGISTER, 0, encodeResvKeys(0n, 7n))).toBe(0);
    expect(await resv(NvmOpcode.RESV_ACQUIRE, 1 << 8, encodeResvKeys(7n, 0n))).toBe(0);
    expect(await status(io, zms(0n, 3))).toBe(Status.RESERVATION_CONFLICT | DNR);
    expect(await status(io, ...write(0, 1, NvmOpcode.ZONE_APPEND))).toBe(Status.RESERVATION_CONFLICT | DNR);
    expect(zonesOf((await io.command(zmr(0n, 128))).data).nr).toBe(4);
    expect(await status(io2, zms(0n, 3))).toBe(0);
  });
});

describe('zoned namespaces where zone state could not have one owner', () => {
  it('a gateway group refuses a zoned namespace before it joins', async () => {
    const svc = new TargetService();
    try {
      // etcd at a port nothing listens on: the refusal must come first, from the namespace.
      const cfg = { ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [zonedSubsystem()], gateway: { group: 'g', etcd: ['http://127.0.0.1:9'], id: 'a' } };
      await expect(svc.apply(cfg)).rejects.toThrow(/namespaces\.zoned: a gateway group cannot serve a zoned namespace/);
    } finally {
      await svc.stop();
    }
  });
});

describe('zoned file namespace', () => {
  it('zone states and write pointers survive a restart; zone capacity below the zone size', async () => {
    const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'zns-'));
    dirs.push(tmp);
    const file = path.join(tmp, 'z.img');
    const sub = (): SubsystemConfig => ({ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'file', path: file, size: '256K' }, zoned: { zoneSize: '64K', zoneCapacity: '32K' } }] });
    h = await startTarget({ subsystems: [sub()] });
    let q = await queues(h);
    expect(await status(q.io, ...write(0, 64))).toBe(0);
    expect(await status(q.io, ...write(ZS, 10))).toBe(0);
    expect(await status(q.io, ...write(ZS + 10, 60))).toBe(Status.ZONE_BOUNDARY_ERROR | DNR); // past ZCAP 64
    expect(await status(q.io, zms(BigInt(2 * ZS), 3))).toBe(0);
    expect(await status(q.io, ...write(2 * ZS, 3))).toBe(0);
    expect(await status(q.io, zms(BigInt(3 * ZS), 2))).toBe(0);
    const before = h.svc.zones(SUBNQN, 1);
    expect(before?.map((z) => [z.state, z.wp])).toEqual([
      ['full', 64],
      ['imp-open', ZS + 10],
      ['exp-open', 2 * ZS + 3],
      ['full', 3 * ZS + 64],
    ]);
    await h.close();
    h = await startTarget({ subsystems: [sub()] });
    q = await queues(h);
    // Open zones come back closed (a restart is a new controller); write pointers and data are where they were.
    expect(h.svc.zones(SUBNQN, 1)?.map((z) => [z.state, z.wp])).toEqual([
      ['full', 64],
      ['closed', ZS + 10],
      ['closed', 2 * ZS + 3],
      ['full', 3 * ZS + 64],
    ]);
    expect(zonesOf((await q.io.command(zmr(BigInt(ZS), 128))).data).zones).toEqual([[4, ZS, ZS + 10, 64]]);
    expect((await q.io.command(readCmd(1, BigInt(ZS + 9), 1))).data.equals(Buffer.alloc(512, 0xab))).toBe(true);
    expect(await status(q.io, ...write(ZS + 10, 1))).toBe(0);
    expect(await status(q.io, ...write(ZS, 1))).toBe(Status.ZONE_INVALID_WRITE | DNR);
    await h.close();
    h = undefined;
    await expect(startTarget({ subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'file', path: file, size: '256K' }, zoned: { zoneSize: '128K' } }] }] })).rejects.toThrow(/do not fit this geometry/);
  });
});
