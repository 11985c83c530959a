// What hosts other than Linux and SPDK may send (issue: "what other initiators would do"), each over a real socket to
// an in-process target: zero-length SGLs of every descriptor type, Keyed SGLs on TCP, PDU data alignment (HPDA, and
// padding towards a CPDA-0 controller), digests, MAXR2T > 0 and H2CData split at every boundary. Each case either
// works or gets the status / C2HTermReq the spec names. Bytes sent are laid out by the independent test builder; what
// comes back is split and checked here by byte offset (NVMe-TCP 1.0 §3.6.1–§3.6.2), not by the PduReader under test.
// Section numbers: NVMe-TCP 1.0 (TCP), NVMe-oF 1.1 (oF), NVMe Base 2.0 (Base); "ref §n" = shared/reference/nvme-tcp.md.
import { Buffer } from 'node:buffer';
import { setImmediate as tick } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { RawPeer } from '../../harness/peers/raw-peer.js';
import { Bytes } from '../../protocol/testing/fixture-builder.js';
import { TargetService, type PortConfig } from '../../target/index.js';
import { F, T, capsuleCmd, crc32cBitwise, h2cData, icReq, pattern, type BuildFraming, type IcReqFields } from '../../protocol/testing/pdu-builder.js';

// Base 2.0 Figures 88/98 (opcodes), 101 (generic status), oF 1.1 Figure 13 (fctype); written out, not imported.
const OPC = { FLUSH: 0x00, WRITE: 0x01, READ: 0x02, WRITE_ZEROES: 0x08, GET_LOG_PAGE: 0x02, IDENTIFY: 0x06, SET_FEATURES: 0x09, KEEP_ALIVE: 0x18, FABRICS: 0x7f } as const;
const FCTYPE = { PROPERTY_SET: 0x00, CONNECT: 0x01, PROPERTY_GET: 0x04 } as const;
const SC = { SUCCESS: 0x000, SGL_INVALID_TYPE: 0x011, TRANSIENT_TRANSPORT: 0x022 } as const;
const DNR = 0x4000;
// C2HTermReq Fatal Error Status, TCP 1.0 §3.6.2.5 (ref §3.6).
const FES = { INVALID_HEADER_FIELD: 0x01, HEADER_DIGEST_ERROR: 0x03, DATA_OUT_OF_RANGE: 0x04, DATA_LIMIT_EXCEEDED: 0x05 } as const;
// SGL descriptor type byte 15 (Base 2.0 §4.3.2: descriptor type in bits 7:4, sub-type in 3:0).
const SGL = { DATA_BLOCK: 0x00, DATA_BLOCK_OFFSET: 0x01, BIT_BUCKET: 0x10, SEGMENT: 0x20, LAST_SEGMENT: 0x30, KEYED: 0x40, KEYED_INVALIDATE: 0x4f, TRANSPORT: 0x5a } as const;

const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:6f746865-722d-696e-6974-696174000001';
const BS = 512;

/** A received PDU, split by CH.plen and checked against the negotiated framing. */
interface RxPdu {
  type: number;
  flags: number;
  raw: Buffer;
  /** DATAL bytes from PDO (data PDUs), else empty. */
  data: Buffer;
}

interface Negotiated {
  hdgst: boolean;
  ddgst: boolean;
  /** The host's HPDA: C2H data starts at a multiple of (hpda+1)*4 (TCP 1.0 §3.6.2.2). */
  hpda: number;
}

/**
 * Checks one controller PDU by the spec's offsets (TCP 1.0 §3.6.1, §3.6.2.3/5/7/9/10; ref §2–§4): hlen per type,
 * HDGSTF/DDGSTF exactly as negotiated, HDGST over the hlen header bytes, PDO the smallest multiple of (HPDA+1)*4 at
 * or after header+HDGST with zero padding, DDGST over the data only.
 */
function checkFraming(raw: Buffer, n: Negotiated): RxPdu {
  const type = raw[0] as number;
  const flags = raw[1] as number;
  const hlen = raw[2] as number;
  const pdo = raw[3] as number;
  const plen = raw.readUInt32LE(4);
  expect(plen, 'plen').toBe(raw.length);
  if (type === T.IC_RESP || type === T.C2H_TERM_REQ) {
    // Neither ever carries a digest (TCP 1.0 §3.6.2.3, §3.6.2.5).
    expect({ flags, hlen, pdo }).toEqual({ flags: 0, hlen: type === T.IC_RESP ? 128 : 24, pdo: 0 });
    return { type, flags, raw, data: Buffer.alloc(0) };
  }
  expect([T.CAPSULE_RESP, T.C2H_DATA, T.R2T], `PDU type ${type}`).toContain(type);
  expect(hlen, 'hlen').toBe(24);
  expect((flags & F.HDGSTF) !== 0, 'HDGSTF').toBe(n.hdgst);
  const hd = n.hdgst ? 4 : 0;
  if (n.hdgst) expect(raw.readUInt32LE(hlen), 'HDGST').toBe(crc32cBitwise(raw.subarray(0, hlen)));
  if (type !== T.C2H_DATA) {
    expect({ pdo, plen, ddgstf: flags & F.DDGSTF }).toEqual({ pdo: 0, plen: hlen + hd, ddgstf: 0 });
    return { type, flags, raw, data: Buffer.alloc(0) };
  }
  const unit = (n.hpda + 1) * 4;
  const wantPdo = Math.ceil((hlen + hd) / unit) * unit;
  expect(pdo, 'PDO').toBe(wantPdo);
  expect(raw.subarray(hlen + hd, pdo).every((b) => b === 0), 'zero padding').toBe(true);
  expect((flags & F.DDGSTF) !== 0, 'DDGSTF').toBe(n.ddgst);
  const datal = raw.readUInt32LE(16);
  const dd = n.ddgst ? 4 : 0;
  expect(plen, 'plen = PDO + DATAL + DDGST').toBe(pdo + datal + dd);
  const data = raw.subarray(pdo, pdo + datal);
  if (n.ddgst) expect(raw.readUInt32LE(pdo + datal), 'DDGST').toBe(crc32cBitwise(data));
  return { type, flags, raw, data };
}

interface Result {
  /** 15-bit status (SCT/SC/DNR, Base 2.0 Figure 92 bits 31:17), or -1 when the last C2HData carried SUCCESS. */
  status: number;
  dw0: number;
  data: Buffer;
  types: number[];
}

interface SqeFields {
  opcode: number;
  nsid?: number;
  sglType: number;
  sglLen?: number;
  /** Keyed SGL Data Block (Base 2.0 §4.3.2): its length is bytes 10:08 only, the key bytes 14:11. */
  sglKey?: number;
  sglAddr?: bigint;
  cdw10?: number;
  cdw11?: number;
  cdw12?: number;
}

/** A raw host on one connection (= one queue, TCP 1.0 §3.3): builder bytes out, checked PDUs in. */
class Host {
  readonly peer: RawPeer;
  neg: Negotiated = { hdgst: false, ddgst: false, hpda: 0 };
  maxh2cdata = 0;
  #rx = Buffer.alloc(0);
  #wake: (() => void) | undefined;
  #cid = 0x100;

  private constructor(peer: RawPeer) {
    this.peer = peer;
    peer.socket.on('data', (b: Buffer) => {
      this.#rx = Buffer.concat([this.#rx, b]);
      this.#wake?.();
    });
    peer.socket.on('close', () => this.#wake?.());
  }

  static async open(port: number): Promise<Host> {
    const h = new Host(await RawPeer.connect({ port, timeoutMs: 5000 }));
    hosts.push(h);
    return h;
  }

  get fr(): BuildFraming {
    return { hdgst: this.neg.hdgst, ddgst: this.neg.ddgst, pda: 0 };
  }

  nextCid(): number {
    this.#cid = (this.#cid + 1) & 0xffff;
    return this.#cid;
  }

  send(b: Buffer): void {
    this.peer.sendRaw(b);
  }

  /** The next whole PDU the controller sent (split by CH.plen), unchecked. */
  async nextRaw(timeoutMs = 5000): Promise<Buffer> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      if (this.#rx.length >= 8) {
        const plen = this.#rx.readUInt32LE(4);
        if (this.#rx.length >= plen) {
          const pdu = this.#rx.subarray(0, plen);
          this.#rx = this.#rx.subarray(plen);
          return pdu;
        }
      }
      if (this.peer.isClosed) throw new Error(`connection closed with ${this.#rx.length} bytes of a PDU pending`);
      const left = end - Date.now();
      if (left <= 0) throw new Error(`no PDU within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.#wake = () => {
          clearTimeout(t);
          this.#wake = undefined;
          resolve();
        };
      });
    }
  }

  async next(): Promise<RxPdu> {
    return checkFraming(await this.nextRaw(), this.neg);
  }

  /** ICReq (TCP 1.0 §3.6.2.2, never a digest) → ICResp; the framing becomes what the ICResp granted. */
  async ic(f: IcReqFields = {}): Promise<{ cpda: number; dgst: number; maxh2cdata: number }> {
    this.send(icReq(f));
    const resp = (await this.next()).raw;
    expect(resp[0]).toBe(T.IC_RESP);
    const r = { cpda: resp[10] as number, dgst: resp[11] as number, maxh2cdata: resp.readUInt32LE(12) };
    this.neg = { hdgst: (r.dgst & 1) !== 0, ddgst: (r.dgst & 2) !== 0, hpda: f.hpda ?? 0 };
    this.maxh2cdata = r.maxh2cdata;
    return r;
  }

  /** An SQE (Base 2.0 Figure 88): PSDT 01b (SGL, always on fabrics, ref §5.1), SGL1 at bytes 24-39, CDW10-12 at 40/44/48. */
  sqe(f: SqeFields, cid = this.nextCid()): Buffer {
    const b = new Bytes(64)
      .u8(0, f.opcode)
      .u8(1, 0x40)
      .u16(2, cid)
      .u32(4, f.nsid ?? 0)
      .u64(24, f.sglAddr ?? 0n)
      .u8(39, f.sglType)
      .u32(40, f.cdw10 ?? 0)
      .u32(44, f.cdw11 ?? 0)
      .u32(48, f.cdw12 ?? 0);
    if (f.sglKey !== undefined) b.u24(32, f.sglLen ?? 0).u32(35, f.sglKey);
    else b.u32(32, f.sglLen ?? 0);
    return b.build();
  }

  /**
   * One command to its completion: CapsuleCmd (in-capsule data with SGL 0x01), R2Ts answered with H2CData of at most
   * MAXH2CDATA (TCP 1.0 §3.6.2.8), C2HData gathered (§3.6.2.9), then the CapsuleResp (§3.6.2.7) with this CID.
   */
  async exec(sqe: Buffer, o: { data?: Buffer; inCapsule?: boolean } = {}): Promise<Result> {
    const cid = sqe.readUInt16LE(2);
    this.send(capsuleCmd({ sqe, ...(o.inCapsule === true && o.data !== undefined ? { data: o.data } : {}) }, this.fr));
    const types: number[] = [];
    const got: Buffer[] = [];
    for (;;) {
      const p = await this.next();
      types.push(p.type);
      const cccid = p.raw.readUInt16LE(8);
      if (p.type === T.R2T) {
        expect(cccid).toBe(cid);
        const ttag = p.raw.readUInt16LE(10);
        const r2to = p.raw.readUInt32LE(12);
        const r2tl = p.raw.readUInt32LE(16);
        const data = o.data as Buffer;
        for (let off = r2to; off < r2to + r2tl; off += this.maxh2cdata) {
          const n = Math.min(this.maxh2cdata, r2to + r2tl - off);
          this.send(h2cData({ cccid: cid, ttag, datao: off, last: off + n === r2to + r2tl, data: data.subarray(off, off + n) }, this.fr));
        }
      } else if (p.type === T.C2H_DATA) {
        expect(cccid).toBe(cid);
        expect(p.raw.readUInt32LE(12), 'DATAO in order').toBe(got.reduce((s, b) => s + b.length, 0));
        got.push(Buffer.from(p.data));
        if ((p.flags & F.SUCCESS) !== 0) return { status: -1, dw0: 0, data: Buffer.concat(got), types };
      } else {
        expect(p.type).toBe(T.CAPSULE_RESP);
        // CQE (Base 2.0 Figure 92) at PDU offset 8: DW0 at 0, CID at 12, status field at 14 (bit 0 the phase tag).
        expect(p.raw.readUInt16LE(8 + 12)).toBe(cid);
        return { status: p.raw.readUInt16LE(8 + 14) >> 1, dw0: p.raw.readUInt32LE(8), data: Buffer.concat(got), types };
      }
    }
  }

  async ok(sqe: Buffer, o: { data?: Buffer; inCapsule?: boolean } = {}): Promise<Result> {
    const r = await this.exec(sqe, o);
    expect(r.status, `status of opcode 0x${(sqe[0] as number).toString(16)}`).toBe(SC.SUCCESS);
    return r;
  }

  /** A C2HTermReq (TCP 1.0 §3.6.2.5) and then the close of the connection. */
  async termReq(): Promise<{ fes: number; fei: number; errorData: Buffer }> {
    const p = await this.next();
    expect(p.type, 'C2HTermReq').toBe(T.C2H_TERM_REQ);
    await this.peer.closed(5000);
    return { fes: p.raw.readUInt16LE(8), fei: p.raw.readUInt32LE(10), errorData: p.raw.subarray(24) };
  }

  // Fabrics commands (oF 1.1 §3.3–§3.5), laid out from their figures.
  async connect(qid: number, cntlid: number, subnqn: string): Promise<number> {
    const sqe = new Bytes(64).u8(0, OPC.FABRICS).u8(1, 0x40).u16(2, this.nextCid()).u8(4, FCTYPE.CONNECT).u32(32, 1024).u8(39, SGL.DATA_BLOCK_OFFSET);
    sqe.u16(42, qid).u16(44, 31).u32(48, qid === 0 ? 30_000 : 0);
    const data = new Bytes(1024).fill(0, 16, 0x5a).u16(16, cntlid).ascii(256, subnqn).ascii(512, HOSTNQN).build();
    const r = await this.ok(sqe.build(), { data, inCapsule: true });
    return r.dw0 & 0xffff;
  }

  async propertySet(ofst: number, value: number): Promise<void> {
    await this.ok(new Bytes(64).u8(0, OPC.FABRICS).u8(1, 0x40).u16(2, this.nextCid()).u8(4, FCTYPE.PROPERTY_SET).u8(39, SGL.TRANSPORT).u32(44, ofst).u64(48, value).build());
  }

  async propertyGet(ofst: number): Promise<number> {
    return (await this.ok(new Bytes(64).u8(0, OPC.FABRICS).u8(1, 0x40).u16(2, this.nextCid()).u8(4, FCTYPE.PROPERTY_GET).u8(39, SGL.TRANSPORT).u32(44, ofst).build())).dw0;
  }

  rw(opcode: number, slba: number, bytes: number, sgl: { type: number; len?: number; key?: number } = { type: SGL.TRANSPORT }): Buffer {
    const blocks = Math.ceil(bytes / BS);
    return this.sqe({ opcode, nsid: 1, sglType: sgl.type, sglLen: sgl.len ?? bytes, ...(sgl.key !== undefined ? { sglKey: sgl.key, sglAddr: 0x1000n } : {}), cdw10: slba, cdw11: 0, cdw12: blocks - 1 });
  }

  async write(slba: number, data: Buffer, inCapsule = false): Promise<void> {
    await this.ok(this.rw(OPC.WRITE, slba, data.length, { type: inCapsule ? SGL.DATA_BLOCK_OFFSET : SGL.TRANSPORT }), { data, inCapsule });
  }

  async read(slba: number, bytes: number): Promise<Buffer> {
    const r = await this.ok(this.rw(OPC.READ, slba, bytes));
    expect(r.data.length).toBe(bytes);
    return r.data;
  }
}

interface Target {
  service: TargetService;
  port: number;
  nqn: string;
}

let target: Target | undefined;
const hosts: Host[] = [];
afterEach(async () => {
  for (const h of hosts.splice(0)) h.peer.close();
  await target?.service.stop();
  target = undefined;
});

/** A target on 127.0.0.1, port 0, with one 4 MiB RAM namespace (nsid 1, 512-byte blocks) any host may use. */
async function start(port: Partial<Omit<PortConfig, 'id' | 'addr' | 'port'>> = {}): Promise<Target> {
  const service = new TargetService();
  const nqn = 'nqn.2024-01.io.nvme-tcp-ts:other-initiators';
  target = { service, nqn, port: 0 };
  target.port = (await service.addPort({ id: 1, addr: '127.0.0.1', port: 0, ...port })).port;
  await service.addSubsystem({ nqn, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '4M' } }] });
  return target;
}

/** Admin queue: ICReq, Connect (KATO 30 s), CC.EN=1 with IOSQES/IOCQES, CSTS.RDY (Base 2.0 §3.5, ref §7.4); the cntlid. */
async function adminQueue(t: Target, ic: IcReqFields = {}): Promise<{ admin: Host; cntlid: number }> {
  const admin = await Host.open(t.port);
  await admin.ic(ic);
  const cntlid = await admin.connect(0, 0xffff, t.nqn);
  await admin.propertySet(0x14, 0x00460001);
  expect((await admin.propertyGet(0x1c)) & 1, 'CSTS.RDY').toBe(1);
  return { admin, cntlid };
}

async function ioQueue(t: Target, cntlid: number, ic: IcReqFields = {}): Promise<Host> {
  const io = await Host.open(t.port);
  await io.ic(ic);
  await io.connect(1, cntlid, t.nqn);
  return io;
}

/** Error Information log (LID 01h, Base 2.0 Figure 205), newest entry: SQID 8, CID 10, status 12 (bits 15:1), location 14. */
async function lastError(admin: Host): Promise<{ sqid: number; cid: number; status: number; location: number }> {
  const r = await admin.ok(admin.sqe({ opcode: OPC.GET_LOG_PAGE, nsid: 0xffffffff, sglType: SGL.TRANSPORT, sglLen: 64, cdw10: 0x01 | (15 << 16) }));
  const e = r.data;
  return { sqid: e.readUInt16LE(8), cid: e.readUInt16LE(10), status: e.readUInt16LE(12) >> 1, location: e.readUInt16LE(14) };
}

describe('zero-length SGLs: no data, whatever the descriptor type', () => {
  // A descriptor of length 0 describes no data (Base 2.0 §4.3.2); nvmet_tcp_map_data returns early on it and SPDK's
  // target maps every zero-length type to "no data" (ref §5.2), so a host may put any type on a no-data command.
  const TYPES = [SGL.DATA_BLOCK, SGL.DATA_BLOCK_OFFSET, SGL.BIT_BUCKET, SGL.SEGMENT, SGL.LAST_SEGMENT, SGL.KEYED, SGL.KEYED_INVALIDATE, SGL.TRANSPORT];

  it('Keep Alive, Set Features 07h, Flush and Write Zeroes complete successfully with no data PDU', async () => {
    const t = await start();
    const { admin, cntlid } = await adminQueue(t);
    const io = await ioQueue(t, cntlid);
    for (const [i, type] of TYPES.entries()) {
      const why = `SGL type 0x${type.toString(16)}`;
      // Keyed descriptors get key 0 so that the 3-byte length and the reserved byte 11 of the others both read 0.
      const sgl = { sglType: type, sglLen: 0, ...(type >> 4 === 4 ? { sglKey: 0 } : {}) };
      const ka = await admin.exec(admin.sqe({ opcode: OPC.KEEP_ALIVE, ...sgl }));
      expect({ why, status: ka.status, types: ka.types }).toEqual({ why, status: SC.SUCCESS, types: [T.CAPSULE_RESP] });
      // Number of Queues (FID 07h, Base 2.0 §5.27; ref §10): 4 SQs / 4 CQs asked for, 0's based.
      const nq = await admin.exec(admin.sqe({ opcode: OPC.SET_FEATURES, ...sgl, cdw10: 0x07, cdw11: 0x00030003 }));
      expect({ why, status: nq.status, types: nq.types }).toEqual({ why, status: SC.SUCCESS, types: [T.CAPSULE_RESP] });
      const flush = await io.exec(io.sqe({ opcode: OPC.FLUSH, nsid: 1, ...sgl }));
      expect({ why, status: flush.status, types: flush.types }).toEqual({ why, status: SC.SUCCESS, types: [T.CAPSULE_RESP] });
      // Write Zeroes (opcode 08h, ref §15) over 2 blocks written with a pattern first: the read proves it ran.
      const slba = 16 * i;
      await io.write(slba, pattern(2 * BS, i + 1), true);
      const wz = await io.exec(io.sqe({ opcode: OPC.WRITE_ZEROES, nsid: 1, ...sgl, cdw10: slba, cdw12: 1 }));
      expect({ why, status: wz.status, types: wz.types }).toEqual({ why, status: SC.SUCCESS, types: [T.CAPSULE_RESP] });
      expect((await io.read(slba, 2 * BS)).equals(Buffer.alloc(2 * BS)), why).toBe(true);
    }
  });

  it('a zero-length Keyed SGL with a non-zero key: no data, success, one CapsuleResp', async () => {
    // A Keyed descriptor's length is bytes 10:08 only (Base 2.0 §4.3.2), so length 0 with key 0x11223344 is still
    // zero-length: SPDK's spdk_nvmf_req_get_xfer reads keyed.length and finds no data, and so do we.
    const t = await start();
    const { cntlid } = await adminQueue(t);
    const io = await ioQueue(t, cntlid);
    const r = await io.exec(io.sqe({ opcode: OPC.FLUSH, nsid: 1, sglType: SGL.KEYED, sglLen: 0, sglKey: 0x11223344 }));
    expect(r.status).toBe(SC.SUCCESS);
    expect(r.types).toEqual([T.CAPSULE_RESP]);
    await io.ok(io.sqe({ opcode: OPC.FLUSH, nsid: 1, sglType: SGL.TRANSPORT }));
  });
});

describe('Keyed SGL Data Block with a length (RDMA-only, TCP 1.0 §3.3.3)', () => {
  // Only the Transport SGL Data Block (0x5A) and Data Block / Offset (0x01) carry data on TCP (ref §5.2); any other
  // type with a length is SGL Descriptor Type Invalid (Base 2.0 Figure 101, 11h) with DNR, error location byte 39
  // (SGL1 type byte) — before any data moves, so no R2T and no C2HData.
  for (const type of [SGL.KEYED, SGL.KEYED_INVALIDATE]) {
    it(`type 0x${type.toString(16)} on a Read and a Write → 0x11 | DNR, no data requested, the queue stays usable`, async () => {
      const t = await start();
      const { admin, cntlid } = await adminQueue(t);
      const io = await ioQueue(t, cntlid);
      const before = pattern(8 * BS, 9);
      await io.write(0, before);

      const rd = io.rw(OPC.READ, 0, 8 * BS, { type, key: 0x0badcafe });
      const r = await io.exec(rd);
      expect(r.status).toBe(SC.SGL_INVALID_TYPE | DNR);
      expect(r.types).toEqual([T.CAPSULE_RESP]);
      expect(await lastError(admin)).toEqual({ sqid: 1, cid: rd.readUInt16LE(2), status: SC.SGL_INVALID_TYPE | DNR, location: 39 });

      const wr = io.rw(OPC.WRITE, 0, 8 * BS, { type, key: 0x0badcafe });
      const w = await io.exec(wr, { data: pattern(8 * BS, 77) });
      expect(w.status).toBe(SC.SGL_INVALID_TYPE | DNR);
      expect(w.types, 'no R2T').toEqual([T.CAPSULE_RESP]);
      expect(await lastError(admin)).toEqual({ sqid: 1, cid: wr.readUInt16LE(2), status: SC.SGL_INVALID_TYPE | DNR, location: 39 });

      expect((await io.read(0, 8 * BS)).equals(before), 'the refused write changed nothing').toBe(true);
      expect(io.peer.isClosed).toBe(false);
    });
  }
});

describe('PDU data alignment (TCP 1.0 §3.6.2.2 HPDA, §3.6.2.3 CPDA; ref §4)', () => {
  // HPDA "specifies the data alignment for all PDUs transferred from the controller to the host that contain data",
  // 0's based dwords, 0..31: C2HData starts at a multiple of (HPDA+1)*4, zero-padded, the padding outside both
  // digests. checkFraming asserts exactly that on every PDU; CapsuleResp and R2T carry no data and stay unpadded.
  const CASES: Array<{ hpda: number; dgst: number }> = [
    { hpda: 1, dgst: 0 },
    { hpda: 3, dgst: 0 },
    { hpda: 31, dgst: 0 },
    { hpda: 1, dgst: 2 },
    { hpda: 3, dgst: 3 },
    { hpda: 31, dgst: 2 },
    { hpda: 31, dgst: 3 },
    { hpda: 7, dgst: 1 },
  ];

  it('reads come back padded to (HPDA+1)*4 for HPDA 1, 3, 7, 31, with and without digests; CPDA advertised 0', async () => {
    const t = await start({ c2hDataSize: 4096 });
    const { admin, cntlid } = await adminQueue(t, { hpda: 5 });
    // Identify Controller (CNS 01h, ref §9.1; CNTLID at byte 78) over the HPDA-5 admin queue: 4 KiB at PDO 24.
    const id = await admin.ok(admin.sqe({ opcode: OPC.IDENTIFY, sglType: SGL.TRANSPORT, sglLen: 4096, cdw10: 0x01 }));
    expect(id.data.readUInt16LE(78), 'CNTLID in Identify').toBe(cntlid);
    for (const [i, c] of CASES.entries()) {
      const io = await Host.open(t.port);
      const resp = await io.ic({ hpda: c.hpda, dgst: c.dgst });
      expect(resp, `ICResp for ${JSON.stringify(c)}`).toMatchObject({ cpda: 0, dgst: c.dgst });
      await io.connect(i + 1, cntlid, t.nqn);
      const slba = 64 * i;
      // 12 KiB by R2T (its R2T checked unpadded), 512 B in-capsule; read back as three 4 KiB C2HData and one of 512 B.
      const big = pattern(12 * 1024, i + 3, 13);
      await io.write(slba, big);
      const small = pattern(BS, i + 100, 5);
      await io.write(slba + 40, small, true);
      expect((await io.read(slba, big.length)).equals(big)).toBe(true);
      expect((await io.read(slba + 40, BS)).equals(small)).toBe(true);
    }
  });

  it('a C2HTermReq on an HPDA-31 connection stays unpadded (PDO 0), its error data the header in error', async () => {
    const t = await start();
    const { cntlid } = await adminQueue(t);
    const io = await ioQueue(t, cntlid, { hpda: 31, dgst: 3 });
    const sqe = io.rw(OPC.WRITE, 0, 4096);
    io.send(capsuleCmd({ sqe }, io.fr));
    const r2t = await io.next();
    expect({ type: r2t.type, pdo: r2t.raw[3] }).toEqual({ type: T.R2T, pdo: 0 });
    const bad = h2cData({ cccid: sqe.readUInt16LE(2), ttag: r2t.raw.readUInt16LE(10) ^ 0x0f0f, datao: 0, last: true, data: pattern(4096, 8) }, io.fr);
    io.send(bad);
    const term = await io.termReq();
    expect({ fes: term.fes, fei: term.fei }).toEqual({ fes: FES.INVALID_HEADER_FIELD, fei: 10 });
    expect(term.errorData.subarray(0, 24).toString('hex')).toBe(bad.subarray(0, 24).toString('hex'));
  });

  it('HPDA 32 is outside 0..31: C2HTermReq Invalid PDU Header Field at byte 10, then close', async () => {
    const t = await start();
    const h = await Host.open(t.port);
    h.send(icReq({ hpda: 32 }));
    const term = await h.termReq();
    expect({ fes: term.fes, fei: term.fei }).toEqual({ fes: FES.INVALID_HEADER_FIELD, fei: 10 });
    expect(term.errorData.equals(icReq({ hpda: 32 })), 'the ICReq header is copied').toBe(true);
  });

  // Our ICResp says CPDA 0 (4-byte alignment, ref §18 item 1): in-capsule / H2C data then starts right after the
  // header (+HDGST), PDO 72/76 or 24/28. A host padding as for a CPDA of 3 (16 bytes) puts a PDO the negotiated
  // alignment does not call for: refused as Invalid PDU Header Field at the PDO byte (FEI 3).
  it('CapsuleCmd whose in-capsule data starts after 8 bytes of padding → C2HTermReq FES 1 FEI 3, then close', async () => {
    const t = await start();
    const { cntlid } = await adminQueue(t);
    const io = await ioQueue(t, cntlid);
    const data = pattern(BS, 1);
    const padded = capsuleCmd({ sqe: io.rw(OPC.WRITE, 0, BS, { type: SGL.DATA_BLOCK_OFFSET }), data }, { pda: 3 });
    expect(padded[3], 'PDO with padding').toBe(80);
    io.send(padded);
    const term = await io.termReq();
    expect({ fes: term.fes, fei: term.fei }).toEqual({ fes: FES.INVALID_HEADER_FIELD, fei: 3 });
  });

  it('H2CData whose data starts after padding → C2HTermReq FES 1 FEI 3, then close', async () => {
    const t = await start();
    const { cntlid } = await adminQueue(t);
    const io = await ioQueue(t, cntlid);
    const sqe = io.rw(OPC.WRITE, 0, 4096);
    io.send(capsuleCmd({ sqe }, io.fr));
    const r2t = await io.next();
    expect(r2t.type).toBe(T.R2T);
    const bad = h2cData({ cccid: sqe.readUInt16LE(2), ttag: r2t.raw.readUInt16LE(10), datao: 0, last: true, data: pattern(4096, 2) }, { pda: 3 });
    expect(bad[3], 'PDO with padding').toBe(32);
    io.send(bad);
    const term = await io.termReq();
    expect({ fes: term.fes, fei: term.fei }).toEqual({ fes: FES.INVALID_HEADER_FIELD, fei: 3 });
  });
});

describe('digests (TCP 1.0 §3.6.2.2/3 negotiation, §3.6.1 HDGST/DDGST; ref §4)', () => {
  it('the ICReq carries no digest and the ICResp neither; every later PDU does, both ways', async () => {
    const t = await start();
    const { cntlid } = await adminQueue(t);
    const io = await Host.open(t.port);
    const req = icReq({ dgst: 3 });
    expect({ len: req.length, flags: req[1], plen: req.readUInt32LE(4) }).toEqual({ len: 128, flags: 0, plen: 128 });
    io.send(req);
    // checkFraming: the ICResp is exactly 128 bytes with flags 0, so the next PDU starts right after it.
    const resp = await io.next();
    expect({ type: resp.type, dgst: resp.raw[11] }).toEqual({ type: T.IC_RESP, dgst: 3 });
    io.neg = { hdgst: true, ddgst: true, hpda: 0 };
    io.maxh2cdata = resp.raw.readUInt32LE(12);
    await io.connect(1, cntlid, t.nqn);
    const d = pattern(8192, 4);
    await io.write(8, d);
    await io.write(24, d.subarray(0, 1024), true);
    expect((await io.read(8, 8192)).equals(d)).toBe(true);
  });

  it('an ICReq with HDGSTF set and a digest appended → C2HTermReq Invalid PDU Header Field, then close', async () => {
    const t = await start();
    const h = await Host.open(t.port);
    const bad = Buffer.concat([icReq({ dgst: 1 }, { flags: F.HDGSTF, plen: 132 }), Buffer.alloc(4)]);
    bad.writeUInt32LE(crc32cBitwise(bad.subarray(0, 128)), 128);
    h.send(bad);
    const term = await h.termReq();
    expect(term.fes).toBe(FES.INVALID_HEADER_FIELD);
    // flags (1) and plen (4) are both wrong; either offset names an invalid field.
    expect([1, 4]).toContain(term.fei);
  });

  it('a bad header digest → C2HTermReq Header Digest Error carrying the header, then close', async () => {
    const t = await start();
    const { cntlid } = await adminQueue(t, { dgst: 1 });
    const io = await ioQueue(t, cntlid, { dgst: 1 });
    const cmd = capsuleCmd({ sqe: io.rw(OPC.READ, 0, BS) }, io.fr);
    cmd.writeUInt32LE((cmd.readUInt32LE(72) ^ 0x1) >>> 0, 72);
    io.send(cmd);
    const term = await io.termReq();
    expect(term.fes).toBe(FES.HEADER_DIGEST_ERROR);
    expect(term.errorData.subarray(0, 72).equals(cmd.subarray(0, 72))).toBe(true);
  });

  it('a bad data digest fails only that command with Transient Transport Error; the queue goes on', async () => {
    // A data digest error is not fatal to the connection: the command completes with Transient Transport Error (22h,
    // Base 2.0 Figure 101), without DNR so the host retries (TCP 1.0 §3.6.1 data digest; ref §4).
    const t = await start({ maxH2CData: 8192 });
    const { cntlid } = await adminQueue(t, { dgst: 3 });
    const io = await ioQueue(t, cntlid, { dgst: 3 });
    const old = pattern(16 * 1024, 5);
    await io.write(0, old);

    // H2CData: the second of two PDUs has a corrupted DDGST.
    const sqe = io.rw(OPC.WRITE, 0, 16 * 1024);
    const cid = sqe.readUInt16LE(2);
    io.send(capsuleCmd({ sqe }, io.fr));
    const r2t = await io.next();
    expect(r2t.type).toBe(T.R2T);
    const ttag = r2t.raw.readUInt16LE(10);
    const fresh = pattern(16 * 1024, 6);
    io.send(h2cData({ cccid: cid, ttag, datao: 0, data: fresh.subarray(0, 8192) }, io.fr));
    const second = h2cData({ cccid: cid, ttag, datao: 8192, last: true, data: fresh.subarray(8192) }, io.fr);
    second.writeUInt32LE((second.readUInt32LE(second.length - 4) ^ 0x80000000) >>> 0, second.length - 4);
    io.send(second);
    const resp = await io.next();
    expect(resp.type).toBe(T.CAPSULE_RESP);
    expect({ cid: resp.raw.readUInt16LE(20), status: resp.raw.readUInt16LE(22) >> 1 }).toEqual({ cid, status: SC.TRANSIENT_TRANSPORT });

    // In-capsule data with a corrupted DDGST.
    const ic = io.rw(OPC.WRITE, 0, BS, { type: SGL.DATA_BLOCK_OFFSET });
    const capsule = capsuleCmd({ sqe: ic, data: pattern(BS, 7) }, io.fr);
    capsule.writeUInt32LE((capsule.readUInt32LE(capsule.length - 4) ^ 1) >>> 0, capsule.length - 4);
    io.send(capsule);
    const resp2 = await io.next();
    expect({ cid: resp2.raw.readUInt16LE(20), status: resp2.raw.readUInt16LE(22) >> 1 }).toEqual({ cid: ic.readUInt16LE(2), status: SC.TRANSIENT_TRANSPORT });

    expect((await io.read(0, 16 * 1024)).equals(old), 'neither failed write landed').toBe(true);
  });

  it('header digest negotiated, a CapsuleCmd without HDGSTF → C2HTermReq Invalid PDU Header Field at flags (1)', async () => {
    const t = await start();
    const { cntlid } = await adminQueue(t, { dgst: 1 });
    const io = await ioQueue(t, cntlid, { dgst: 1 });
    io.send(capsuleCmd({ sqe: io.rw(OPC.READ, 0, BS) }));
    const term = await io.termReq();
    expect({ fes: term.fes, fei: term.fei }).toEqual({ fes: FES.INVALID_HEADER_FIELD, fei: 1 });
  });

  it('data digest negotiated, an H2CData without DDGSTF → C2HTermReq Invalid PDU Header Field at flags (1)', async () => {
    const t = await start();
    const { cntlid } = await adminQueue(t, { dgst: 2 });
    const io = await ioQueue(t, cntlid, { dgst: 2 });
    const sqe = io.rw(OPC.WRITE, 0, 4096);
    io.send(capsuleCmd({ sqe }, io.fr));
    const r2t = await io.next();
    io.send(h2cData({ cccid: sqe.readUInt16LE(2), ttag: r2t.raw.readUInt16LE(10), datao: 0, last: true, data: pattern(4096, 1) }));
    const term = await io.termReq();
    expect({ fes: term.fes, fei: term.fei }).toEqual({ fes: FES.INVALID_HEADER_FIELD, fei: 1 });
  });
});

describe('MAXR2T > 0 (TCP 1.0 §3.6.2.2: outstanding R2Ts per command, 0\'s based)', () => {
  for (const maxr2t of [0, 3]) {
    it(`MAXR2T ${maxr2t}: a 1 MiB write with MAXH2CDATA 8 KiB never has more than ${maxr2t + 1} R2T(s) outstanding; data intact`, async () => {
      const t = await start({ maxH2CData: 8192 });
      const { cntlid } = await adminQueue(t);
      const io = await Host.open(t.port);
      const resp = await io.ic({ maxr2t });
      expect(resp.maxh2cdata).toBe(8192);
      await io.connect(1, cntlid, t.nqn);
      const len = 1 << 20;
      const data = pattern(len, 11, 31);
      const sqe = io.rw(OPC.WRITE, 0, len);
      const cid = sqe.readUInt16LE(2);
      io.send(capsuleCmd({ sqe }, io.fr));
      // Before answering, let the controller send every R2T it means to: outstanding ones pile up unanswered here.
      let expectedOffset = 0;
      let status: number | undefined;
      while (status === undefined) {
        const first = await io.next();
        const batch = [first];
        await new Promise((r) => setTimeout(r, 20));
        while (batch.length < 64) {
          const more = await io.nextRaw(1).catch(() => undefined);
          if (more === undefined) break;
          batch.push(checkFraming(more, io.neg));
        }
        const r2ts = batch.filter((p) => p.type === T.R2T);
        expect(r2ts.length, 'R2Ts outstanding at once').toBeLessThanOrEqual(maxr2t + 1);
        for (const p of batch) {
          if (p.type === T.CAPSULE_RESP) {
            expect(p.raw.readUInt16LE(20)).toBe(cid);
            status = p.raw.readUInt16LE(22) >> 1;
            continue;
          }
          expect(p.type).toBe(T.R2T);
          const ttag = p.raw.readUInt16LE(10);
          const r2to = p.raw.readUInt32LE(12);
          const r2tl = p.raw.readUInt32LE(16);
          expect({ cccid: p.raw.readUInt16LE(8), r2to }, 'R2Ts cover the data in order').toEqual({ cccid: cid, r2to: expectedOffset });
          expect(r2tl).toBeGreaterThan(0);
          expect(r2to + r2tl).toBeLessThanOrEqual(len);
          expectedOffset += r2tl;
          for (let off = r2to; off < r2to + r2tl; off += 8192) {
            const n = Math.min(8192, r2to + r2tl - off);
            io.send(h2cData({ cccid: cid, ttag, datao: off, last: off + n === r2to + r2tl, data: data.subarray(off, off + n) }, io.fr));
          }
        }
      }
      expect(status).toBe(SC.SUCCESS);
      expect(expectedOffset).toBe(len);
      expect((await io.read(0, len)).equals(data)).toBe(true);
    });
  }
});

describe('H2CData split at every boundary (TCP 1.0 §3.6.2.8, §3.6.2.10)', () => {
  // One R2T's range sent as H2CData PDUs of awkward sizes, DATAO increasing, DATA_LAST on the last one only; and the
  // whole byte stream (CapsuleCmd, then the H2CData) cut into 1-byte writes, then random ones: TCP is a byte stream, so
  // none of these boundaries may matter to the controller.
  const SIZES = [1, 3, 512, 4095, 4096, 4097];
  const LEN = 16 * 1024;

  function h2cStream(io: Host, cid: number, ttag: number, r2tl: number, data: Buffer): Buffer {
    const parts: Buffer[] = [];
    let off = 0;
    for (const s of [...SIZES, r2tl - SIZES.reduce((a, b) => a + b, 0)]) {
      parts.push(h2cData({ cccid: cid, ttag, datao: off, last: off + s === r2tl, data: data.subarray(off, off + s) }, io.fr));
      off += s;
    }
    return Buffer.concat(parts);
  }

  async function trickle(io: Host, bytes: Buffer, cut: () => number): Promise<void> {
    for (let off = 0; off < bytes.length; ) {
      const n = Math.min(cut(), bytes.length - off);
      io.send(Buffer.from(bytes.subarray(off, off + n)));
      off += n;
      await tick();
    }
  }

  for (const dgst of [0, 3]) {
    it(`1-byte and random TCP chunks, digests ${dgst === 0 ? 'off' : 'on'}: the data reads back intact`, async () => {
      const t = await start();
      const { cntlid } = await adminQueue(t);
      const io = await ioQueue(t, cntlid, { dgst });
      let seed = 0x2545f491 + dgst;
      const rnd = (): number => {
        seed ^= seed << 13;
        seed ^= seed >>> 17;
        seed ^= seed << 5;
        return (seed >>> 0) / 0x1_0000_0000;
      };
      const cuts: Array<[string, () => number]> = [
        ['1-byte', () => 1],
        ['random', () => 1 + Math.floor(rnd() * 700)],
      ];
      for (const [k, [name, cut]] of cuts.entries()) {
        const slba = 64 * k;
        const data = pattern(LEN, 17 + k + dgst, 29);
        const sqe = io.rw(OPC.WRITE, slba, LEN);
        const cid = sqe.readUInt16LE(2);
        await trickle(io, capsuleCmd({ sqe }, io.fr), cut);
        const r2t = await io.next();
        expect(r2t.type, name).toBe(T.R2T);
        expect({ r2to: r2t.raw.readUInt32LE(12), r2tl: r2t.raw.readUInt32LE(16) }).toEqual({ r2to: 0, r2tl: LEN });
        await trickle(io, h2cStream(io, cid, r2t.raw.readUInt16LE(10), LEN, data), cut);
        const resp = await io.next();
        expect({ type: resp.type, cid: resp.raw.readUInt16LE(20), status: resp.raw.readUInt16LE(22) >> 1 }, name).toEqual({ type: T.CAPSULE_RESP, cid, status: SC.SUCCESS });
        expect((await io.read(slba, LEN)).equals(data), name).toBe(true);
      }
    });
  }

  /** A write of 16 KiB waiting for its data: the R2T's ttag. */
  async function awaitingData(maxH2CData?: number): Promise<{ io: Host; cid: number; ttag: number }> {
    const t = await start(maxH2CData === undefined ? {} : { maxH2CData });
    const { cntlid } = await adminQueue(t);
    const io = await ioQueue(t, cntlid);
    const sqe = io.rw(OPC.WRITE, 0, LEN);
    io.send(capsuleCmd({ sqe }, io.fr));
    const r2t = await io.next();
    expect({ type: r2t.type, r2tl: r2t.raw.readUInt32LE(16) }).toEqual({ type: T.R2T, r2tl: LEN });
    return { io, cid: sqe.readUInt16LE(2), ttag: r2t.raw.readUInt16LE(10) };
  }

  it('DATAO + DATAL past the R2T range → C2HTermReq Data Transfer Out of Range, then close', async () => {
    const { io, cid, ttag } = await awaitingData();
    io.send(h2cData({ cccid: cid, ttag, datao: 0, data: pattern(8192, 1) }, io.fr));
    io.send(h2cData({ cccid: cid, ttag, datao: 8192, last: true, data: pattern(8192 + 512, 2) }, io.fr));
    expect((await io.termReq()).fes).toBe(FES.DATA_OUT_OF_RANGE);
  });

  it('DATAO beyond the end of the R2T range → C2HTermReq Data Transfer Out of Range, then close', async () => {
    const { io, cid, ttag } = await awaitingData();
    io.send(h2cData({ cccid: cid, ttag, datao: LEN, last: true, data: pattern(512, 3) }, io.fr));
    expect((await io.termReq()).fes).toBe(FES.DATA_OUT_OF_RANGE);
  });

  it('DATAL beyond MAXH2CDATA → C2HTermReq Data Transfer Limit Exceeded, then close', async () => {
    // C2HTermReq FES 05h (TCP 1.0 §3.6.2.5): an H2CData PDU with more data than the MAXH2CDATA of the ICResp.
    const { io, cid, ttag } = await awaitingData(8192);
    io.send(h2cData({ cccid: cid, ttag, datao: 0, data: pattern(8196, 4) }, io.fr));
    expect((await io.termReq()).fes).toBe(FES.DATA_LIMIT_EXCEEDED);
  });

  it('an unknown TTAG → C2HTermReq Invalid PDU Header Field at TTAG (10), header copied, then close', async () => {
    const { io, cid, ttag } = await awaitingData();
    const bad = h2cData({ cccid: cid, ttag: ttag ^ 0x5555, datao: 0, last: true, data: pattern(LEN, 5) }, io.fr);
    io.send(bad);
    const term = await io.termReq();
    expect({ fes: term.fes, fei: term.fei }).toEqual({ fes: FES.INVALID_HEADER_FIELD, fei: 10 });
    expect(term.errorData.subarray(0, 24).toString('hex')).toBe(bad.subarray(0, 24).toString('hex'));
  });

  it('the TTAG of another command (CCCID mismatch) → C2HTermReq Invalid PDU Header Field at CCCID (8), then close', async () => {
    const { io, cid, ttag } = await awaitingData();
    io.send(h2cData({ cccid: (cid + 1) & 0xffff, ttag, datao: 0, last: true, data: pattern(LEN, 6) }, io.fr));
    const term = await io.termReq();
    expect({ fes: term.fes, fei: term.fei }).toEqual({ fes: FES.INVALID_HEADER_FIELD, fei: 8 });
  });
});
