// A scripted fake NVMe/TCP target peer over real loopback sockets, for initiator unit tests: enough of
// nvmet's behaviour to drive connect, identify, I/O on a RAM namespace, R2T/C2H data flows, ANA and AENs, plus knobs
// to misbehave. Built only from protocol/ (initiator tests must not import target/).
import net from 'node:net';
import { Buffer } from 'node:buffer';
import {
  AdminOpcode,
  Cns,
  CstsShst,
  DISCOVERY_NQN,
  DNR,
  FABRICS_OPCODE,
  FabricsSqeOffset,
  FabricsType,
  FeatureId,
  LogPageId,
  NidType,
  NvmeVersion,
  NvmOpcode,
  PduReader,
  PduType,
  PropertyOffset,
  Status,
  decodeCc,
  decodeConnectCmd,
  encodeCsts,
  decodeConnectData,
  decodeDsmRanges,
  decodeGetLogPageCmd,
  decodePropertyCmd,
  decodeRwFields,
  decodeSqe,
  dispatchPdu,
  encodeActiveNsList,
  encodeAnaLog,
  encodeCap,
  encodeCqe,
  encodeDiscoveryLog,
  encodeIdentifyController,
  encodeIdentifyNamespace,
  encodeNsDescList,
  encodePdu,
  sliceLogPage,
} from '../../protocol/index.js';
import type { CapsuleCmdPdu, DiscLogEntry, H2CDataPdu, IcReqPdu, Pdu, PduFraming, PduHandlers, Sqe } from '../../protocol/index.js';

type Respond = (cid: number, status?: number, dw0?: number, dw1?: number) => void;
type Send = (p: Pdu, f?: PduFraming) => void;
/** VS of the fake: NVMe 1.3, what a Linux nvmet of the 6.1 era reports (NVMe Base 2.0 §3.1.3.2). */
const FAKE_VS = NvmeVersion.V1_3;

export interface FakeNamespace {
  nsid: number;
  blockSize: 512 | 4096;
  data: Buffer;
  nguid: Buffer;
  uuid: Buffer;
  anagrpid: number;
}

export interface FakeOptions {
  subnqn?: string;
  /** MAXH2CDATA in ICResp. */
  maxh2cdata?: number;
  cpda?: number;
  /** Override the digest bits echoed in ICResp (to test the host's check). */
  icRespDigest?: number;
  /** In-capsule data on I/O queues (IOCCSZ = (64 + this) / 16); 0 clears SGLS bit 20. */
  inlineDataSize?: number;
  mdts?: number;
  maxcmd?: number;
  /** I/O queues granted by Set Features Number of Queues. */
  maxIoQueues?: number;
  /** C2HData payload per PDU for reads. */
  c2hChunk?: number;
  /** Bytes per R2T (several R2Ts per command when smaller than the transfer). */
  r2tChunk?: number;
  /** Send reads with DATA_SUCCESS and no CapsuleResp. */
  c2hSuccess?: boolean;
  connectLatencyMs?: number;
  kas?: number;
  tbkas?: boolean;
  cntrltype?: number;
  /** Identify cntlid differs from the Connect result. */
  wrongCntlid?: boolean;
  ana?: boolean;
  /** ANA state per group (default optimized). */
  anaStates?: Map<number, number>;
  discoveryEntries?: DiscLogEntry[];
  /** Bump GENCTR on the first N discovery log reads after the header (tests the host's re-read). */
  genctrBumps?: number;
  /** CRDT1..CRDT3 reported in Identify Controller (100 ms units). */
  crdt?: readonly [number, number, number];
  /** Per-command hook: return a status to fail it, 'drop' to never answer, 'close' to drop the connection. */
  onIo?: (sqe: Sqe, qid: number) => number | 'drop' | 'close' | 'corrupt-ddgst' | undefined;
  /** CQE Dword 0/1 for every successful I/O command (command-specific results); default 0/0. */
  ioResult?: { dw0: number; dw1: number };
}

export interface FakeConn {
  socket: net.Socket;
  qid: number;
  cntlid: number;
  cids: number[];
}

interface Cmd {
  sqe: Sqe;
  raw: Buffer;
  h2c?: Buffer;
  got: number;
}

/** One connection's wire state, shared by its PDU handlers (FakeController.#wire). */
interface Wire {
  readonly conn: FakeConn;
  framing: PduFraming;
  /** Commands waiting for H2CData, by CID; R2T transfer tags to CIDs. */
  readonly cmds: Map<number, Cmd>;
  readonly ttags: Map<number, number>;
  ttagNext: number;
  reader: PduReader | undefined;
  readonly send: Send;
  readonly respond: Respond;
}

export class FakeController {
  readonly server: net.Server;
  readonly opts: FakeOptions;
  readonly namespaces: FakeNamespace[] = [];
  readonly conns = new Set<FakeConn>();
  readonly commands: Array<{ qid: number; opcode: number; cid: number }> = [];
  #nextCntlid = 1;
  #aers: Array<() => void> = [];
  #pendingAen: number[] = [];
  concurrentConnects = 0;
  maxConcurrentConnects = 0;
  connectCount = 0;
  #genctr = 1n;
  #bumpsLeft: number;
  port = 0;

  constructor(opts: FakeOptions = {}) {
    this.opts = opts;
    this.#bumpsLeft = opts.genctrBumps ?? 0;
    this.server = net.createServer((s) => this.#accept(s));
  }

  get subnqn(): string {
    return this.opts.subnqn ?? 'nqn.2024-01.io.test:fake';
  }

  addNamespace(nsid: number, blocks: number, blockSize: 512 | 4096 = 512, anagrpid = 1): FakeNamespace {
    const ns: FakeNamespace = {
      nsid,
      blockSize,
      data: Buffer.alloc(blocks * blockSize),
      nguid: Buffer.from(`${nsid.toString(16).padStart(8, '0')}aabbccddeeff00112233445566`.slice(0, 32), 'hex'),
      uuid: Buffer.from(`${nsid.toString(16).padStart(8, '0')}11112222333344445555666677`.slice(0, 32), 'hex'),
      anagrpid,
    };
    this.namespaces.push(ns);
    return ns;
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    const a = this.server.address();
    this.port = typeof a === 'object' && a !== null ? a.port : 0;
    return this.port;
  }

  async close(): Promise<void> {
    for (const c of this.conns) c.socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Drop every connection (simulates a target crash / path loss). */
  dropAll(): void {
    for (const c of this.conns) c.socket.destroy();
  }

  /** Complete a held AER with this dw0 (or queue it). */
  sendAen(dw0: number): void {
    const a = this.#aers.shift();
    if (a !== undefined) {
      this.#pendingAen.push(dw0);
      a();
    } else this.#pendingAen.push(dw0);
  }

  /** One connection: its wire state, then one handler per PDU kind a controller takes; any other kind drops it. */
  #accept(socket: net.Socket): void {
    socket.setNoDelay(true);
    const conn: FakeConn = { socket, qid: -1, cntlid: 0, cids: [] };
    this.conns.add(conn);
    const w = this.#wire(conn);
    const received: PduHandlers = {
      [PduType.IC_REQ]: (pdu) => this.#icReq(w, pdu),
      [PduType.CAPSULE_CMD]: (pdu) => this.#capsuleCmd(w, pdu),
      [PduType.H2C_DATA]: (pdu) => this.#h2cData(w, pdu),
    };
    const reader = new PduReader({
      role: 'controller',
      onFatal: () => socket.destroy(),
      onPdu: (pdu) => {
        if (!dispatchPdu(received, pdu)) socket.destroy();
      },
    });
    w.reader = reader;
    socket.on('data', (d: Buffer) => reader.push(d));
    socket.on('close', () => this.conns.delete(conn));
    socket.on('error', () => undefined);
  }

  /** The per-connection state the PDU handlers share: framing, commands waiting for H2CData, R2T tags, writers. */
  #wire(conn: FakeConn): Wire {
    const socket = conn.socket;
    const w: Wire = {
      conn,
      framing: { hdgst: false, ddgst: false, pda: 0 },
      cmds: new Map(),
      ttags: new Map(),
      ttagNext: 1,
      reader: undefined,
      send: (pdu, f = w.framing) => {
        if (socket.destroyed) return;
        for (const p of encodePdu(pdu, f)) socket.write(p);
      },
      respond: (cid, status = 0, dw0 = 0, dw1 = 0) => {
        w.send({ type: PduType.CAPSULE_RESP, cqe: encodeCqe({ cid, status, dw0, dw1, sqid: Math.max(0, conn.qid), sqhd: 0xffff }) });
      },
    };
    return w;
  }

  /** ICReq → ICResp with the configured CPDA/digests; the framing applies from the next PDU (TCP 1.0 §3.6.2.2/3). */
  #icReq(w: Wire, pdu: IcReqPdu): void {
    const o = this.opts;
    const dg = o.icRespDigest ?? pdu.dgst;
    w.conn.socket.write(encodePdu({ type: PduType.IC_RESP, pfv: 0, cpda: o.cpda ?? 0, dgst: dg, maxh2cdata: o.maxh2cdata ?? 131072 })[0] as Buffer);
    w.framing = { hdgst: (pdu.dgst & 1) !== 0, ddgst: (pdu.dgst & 2) !== 0, pda: 0 };
    w.reader?.setFraming(w.framing.hdgst, w.framing.ddgst, o.cpda ?? 0);
    this.#framings.set(w.conn, w.framing);
  }

  /** A command: executed at once, or, for host-to-controller data not in the capsule, after its data came by R2T. */
  #capsuleCmd(w: Wire, pdu: CapsuleCmdPdu): void {
    const conn = w.conn;
    const raw = Buffer.from(pdu.sqe);
    const sqe = decodeSqe(raw);
    conn.cids.push(sqe.cid);
    this.commands.push({ qid: conn.qid, opcode: sqe.opcode, cid: sqe.cid });
    const inCap = pdu.data.length > 0 ? Buffer.concat(pdu.data) : undefined;
    const c: Cmd = { sqe, raw, got: 0, ...(inCap !== undefined ? { h2c: inCap } : {}) };
    const dir = sqe.opcode === FABRICS_OPCODE ? 'h2c' : (sqe.opcode & 3) === 1 ? 'h2c' : 'none';
    if (dir === 'h2c' && inCap === undefined && sqe.sgl.length > 0) {
      // Data by R2T: one R2T per chunk (TCP 1.0 §3.3.3 / nvmet sends one for the whole length).
      c.h2c = Buffer.alloc(sqe.sgl.length);
      w.cmds.set(sqe.cid, c);
      const ttag = w.ttagNext++;
      w.ttags.set(ttag, sqe.cid);
      const chunk = this.opts.r2tChunk ?? sqe.sgl.length;
      w.send({ type: PduType.R2T, cccid: sqe.cid, ttag, r2to: 0, r2tl: Math.min(chunk, sqe.sgl.length) });
      return;
    }
    this.#exec(conn, c, w.respond, w.send);
  }

  /** H2CData for an R2T: in order or the connection drops; the next R2T after a LAST, the command once all came. */
  #h2cData(w: Wire, pdu: H2CDataPdu): void {
    const cid = w.ttags.get(pdu.ttag);
    const c = cid === undefined ? undefined : w.cmds.get(cid);
    if (c === undefined || c.h2c === undefined || pdu.cccid !== cid || pdu.datao !== c.got) {
      w.conn.socket.destroy();
      return;
    }
    let off = pdu.datao;
    for (const d of pdu.data) {
      d.copy(c.h2c, off);
      off += d.length;
    }
    c.got = off;
    if (c.got === c.h2c.length) {
      w.cmds.delete(pdu.cccid);
      this.#exec(w.conn, c, w.respond, w.send);
    } else if (pdu.last) {
      const chunk = this.opts.r2tChunk ?? c.h2c.length;
      w.send({ type: PduType.R2T, cccid: pdu.cccid, ttag: pdu.ttag, r2to: c.got, r2tl: Math.min(chunk, c.h2c.length - c.got) });
    }
  }

  #ns(nsid: number): FakeNamespace | undefined {
    return this.namespaces.find((n) => n.nsid === nsid);
  }

  #exec(conn: FakeConn, c: Cmd, respond: Respond, send: Send): void {
    if (c.sqe.opcode === FABRICS_OPCODE) this.#fabrics(conn, c, respond);
    else if (conn.qid === 0) this.#admin(conn, c, respond, send);
    else this.#io(conn, c, respond, send);
  }

  /** Connect (with the configured latency), Property Get/Set of CAP, VS, CC, CSTS (NVMe-oF 1.1 §3.3–3.5). */
  #fabrics(conn: FakeConn, c: Cmd, respond: Respond): void {
    const sqe = c.sqe;
    const o = this.opts;
    const fctype = c.raw[FabricsSqeOffset.fctype] as number;
    if (fctype === FabricsType.CONNECT) {
      const cmd = decodeConnectCmd(c.raw);
      const data = decodeConnectData(c.h2c ?? Buffer.alloc(1024));
      this.connectCount++;
      this.concurrentConnects++;
      this.maxConcurrentConnects = Math.max(this.maxConcurrentConnects, this.concurrentConnects);
      const finish = (): void => {
        this.concurrentConnects--;
        conn.qid = cmd.qid;
        if (data.subnqn !== this.subnqn && data.subnqn !== DISCOVERY_NQN) {
          respond(sqe.cid, Status.CONNECT_INVALID_PARAM | DNR, (1 << 16) | 256);
          return;
        }
        conn.cntlid = cmd.qid === 0 ? this.#nextCntlid++ : data.cntlid;
        if (data.subnqn === DISCOVERY_NQN) this.#discConns.add(conn.cntlid);
        respond(sqe.cid, 0, conn.cntlid);
      };
      if ((o.connectLatencyMs ?? 0) > 0) setTimeout(finish, o.connectLatencyMs);
      else finish();
      return;
    }
    const p = decodePropertyCmd(c.raw);
    if (fctype === FabricsType.PROPERTY_GET) {
      let v = 0n;
      if (p.offset === PropertyOffset.CAP) v = encodeCap({ mqes: 1023, to: 2, css: 1 });
      else if (p.offset === PropertyOffset.VS) v = BigInt(FAKE_VS);
      else if (p.offset === PropertyOffset.CSTS) v = BigInt(this.#csts.get(conn.cntlid) ?? 0);
      else if (p.offset === PropertyOffset.CC) v = BigInt(this.#cc.get(conn.cntlid) ?? 0);
      respond(sqe.cid, 0, Number(v & 0xffffffffn), Number(v >> 32n));
      return;
    }
    if (fctype === FabricsType.PROPERTY_SET && p.offset === PropertyOffset.CC) {
      const cc = Number(p.value & 0xffffffffn);
      this.#cc.set(conn.cntlid, cc);
      const { en, shn } = decodeCc(cc);
      this.#csts.set(conn.cntlid, encodeCsts({ rdy: en, shst: shn !== 0 ? CstsShst.COMPLETE : CstsShst.NORMAL }));
      respond(sqe.cid);
      return;
    }
    respond(sqe.cid, Status.INVALID_FIELD | DNR);
  }

  /** An I/O command: the onIo hook first (drop, close, a status, corrupt-ddgst), then the namespace's RAM. */
  #io(conn: FakeConn, c: Cmd, respond: Respond, send: Send): void {
    const sqe = c.sqe;
    const o = this.opts;
    if (o.ioResult !== undefined) {
      const plain = respond;
      const r = o.ioResult;
      respond = (cid, status = 0, dw0 = 0, dw1 = 0) => (status === 0 ? plain(cid, 0, r.dw0, r.dw1) : plain(cid, status, dw0, dw1));
    }
    const hook = o.onIo?.(sqe, conn.qid);
    if (hook === 'drop') return;
    if (hook === 'close') {
      conn.socket.destroy();
      return;
    }
    if (typeof hook === 'number') {
      respond(sqe.cid, hook);
      return;
    }
    const ns = this.#ns(sqe.nsid);
    if (ns === undefined) {
      respond(sqe.cid, Status.INVALID_NS | DNR);
      return;
    }
    const rw = decodeRwFields(sqe);
    const off = Number(rw.slba) * ns.blockSize;
    const len = rw.nlb * ns.blockSize;
    if (sqe.opcode === NvmOpcode.READ) {
      this.#read(conn, c, ns, off, len, hook === 'corrupt-ddgst', respond, send);
      return;
    }
    switch (sqe.opcode) {
      case NvmOpcode.WRITE:
        if (off + len > ns.data.length) return respond(sqe.cid, Status.LBA_RANGE | DNR);
        (c.h2c ?? Buffer.alloc(0)).copy(ns.data, off, 0, len);
        return respond(sqe.cid);
      case NvmOpcode.COMPARE:
        return respond(sqe.cid, ns.data.subarray(off, off + len).equals((c.h2c ?? Buffer.alloc(0)).subarray(0, len)) ? 0 : Status.COMPARE_FAILED);
      case NvmOpcode.FLUSH:
        return respond(sqe.cid);
      case NvmOpcode.WRITE_ZEROES:
        ns.data.fill(0, off, off + len);
        return respond(sqe.cid);
      case NvmOpcode.DSM:
        for (const r of decodeDsmRanges(c.h2c ?? Buffer.alloc(0), (sqe.cdw10 & 0xff) + 1)) ns.data.fill(0, Number(r.slba) * ns.blockSize, (Number(r.slba) + r.nlb) * ns.blockSize);
        return respond(sqe.cid);
      default:
        return respond(sqe.cid, Status.INVALID_OPCODE | DNR);
    }
  }

  /** Read: C2HData in c2hChunk pieces, SUCCESS on the last when c2hSuccess (NVMe-TCP 1.0 §3.6.2.8), or a bad DDGST. */
  #read(conn: FakeConn, c: Cmd, ns: FakeNamespace, off: number, len: number, corruptDdgst: boolean, respond: Respond, send: Send): void {
    const cid = c.sqe.cid;
    const o = this.opts;
    if (off + len > ns.data.length) return respond(cid, Status.LBA_RANGE | DNR);
    const chunk = o.c2hChunk ?? len;
    for (let d = 0; d < len; d += chunk) {
      const n = Math.min(chunk, len - d);
      const last = d + n === len;
      const payload = Buffer.from(ns.data.subarray(off + d, off + d + n));
      if (corruptDdgst) {
        const parts = encodePdu({ type: PduType.C2H_DATA, cccid: cid, datao: d, last, success: false, data: [payload] }, this.#framingOf(conn));
        const tail = parts[parts.length - 1] as Buffer;
        tail.writeUInt32LE((tail.readUInt32LE(0) ^ 0xdeadbeef) >>> 0, 0);
        for (const part of parts) conn.socket.write(part);
      } else send({ type: PduType.C2H_DATA, cccid: cid, datao: d, last, success: last && o.c2hSuccess === true, data: [payload] });
    }
    if (o.c2hSuccess !== true || corruptDdgst) respond(cid);
  }

  #framings = new WeakMap<FakeConn, PduFraming>();
  #framingOf(conn: FakeConn): PduFraming {
    return this.#framings.get(conn) ?? { hdgst: false, ddgst: true, pda: 0 };
  }

  #cc = new Map<number, number>();
  #csts = new Map<number, number>();

  #admin(conn: FakeConn, c: Cmd, respond: Respond, send: Send): void {
    const sqe = c.sqe;
    const o = this.opts;
    const c2h = (buf: Buffer): void => {
      const len = Math.min(buf.length, sqe.sgl.length);
      send({ type: PduType.C2H_DATA, cccid: sqe.cid, datao: 0, last: true, success: false, data: [buf.subarray(0, len)] });
      respond(sqe.cid);
    };
    const disc = this.#discovery(conn);
    switch (sqe.opcode) {
      case AdminOpcode.IDENTIFY:
        return this.#identify(conn, c, c2h, respond);
      case AdminOpcode.SET_FEATURES: {
        const fid = sqe.cdw10 & 0xff;
        if (fid === FeatureId.NUM_QUEUES) {
          const req = (sqe.cdw11 & 0xffff) + 1;
          const n = Math.min(req, o.maxIoQueues ?? 128) - 1;
          return respond(sqe.cid, 0, (n | (n << 16)) >>> 0);
        }
        return respond(sqe.cid);
      }
      case AdminOpcode.GET_LOG_PAGE:
        return this.#getLogPage(c, c2h);
      case AdminOpcode.ASYNC_EVENT: {
        const fire = (): void => {
          const dw0 = this.#pendingAen.shift();
          if (dw0 !== undefined) respond(sqe.cid, 0, dw0);
        };
        if (this.#pendingAen.length > 0) fire();
        else this.#aers.push(fire);
        return;
      }
      case AdminOpcode.KEEP_ALIVE:
        return respond(sqe.cid);
      default:
        return respond(sqe.cid, Status.INVALID_OPCODE | DNR);
    }
  }

  /** Identify CNS 01h (controller, from the options), 02h (active namespace list), 00h (namespace), 03h (descriptors). */
  #identify(conn: FakeConn, c: Cmd, c2h: (buf: Buffer) => void, respond: Respond): void {
    const sqe = c.sqe;
    const o = this.opts;
    const disc = this.#discovery(conn);
    const cns = sqe.cdw10 & 0xff;
    if (cns === Cns.CTRL) {
      const inline = o.inlineDataSize ?? 8192;
      return c2h(
        encodeIdentifyController({
          cntlid: o.wrongCntlid === true ? conn.cntlid + 100 : conn.cntlid,
          sn: 'FAKE0001',
          mn: 'fake controller',
          fr: '1.0',
          cmic: o.ana === true ? 0x0b : 0x02,
          mdts: o.mdts ?? 5,
          ver: FAKE_VS,
          oaes: disc ? 0x8000_0000 : (1 << 8) | (o.ana === true ? 1 << 11 : 0),
          ctratt: 1 | (o.tbkas === true ? 1 << 6 : 0),
          ...(o.crdt !== undefined ? { crdt1: o.crdt[0], crdt2: o.crdt[1], crdt3: o.crdt[2] } : {}),
          cntrltype: o.cntrltype ?? (disc ? 2 : 1),
          aerl: 3,
          lpa: 0x07,
          kas: o.kas ?? 10,
          anacap: 0x1f,
          anagrpmax: 4,
          nanagrpid: 4,
          anatt: 10,
          sqes: 0x66,
          cqes: 0x44,
          maxcmd: o.maxcmd ?? 1024,
          nn: 16,
          oncs: 0x0d,
          vwc: 1,
          sgls: inline > 0 ? 0x100001 : 0x1,
          mnan: 16,
          subnqn: disc ? DISCOVERY_NQN : this.subnqn,
          ioccsz: (64 + inline) / 16,
          iorcsz: 1,
          icdoff: 0,
          msdbd: 1,
        }),
      );
    }
    if (cns === Cns.NS_ACTIVE_LIST) return c2h(encodeActiveNsList(this.namespaces.map((n) => n.nsid).filter((n) => n > sqe.nsid).sort((a, b) => a - b)));
    if (cns === Cns.NS) {
      const ns = this.#ns(sqe.nsid);
      if (ns === undefined) return c2h(Buffer.alloc(4096));
      const blocks = BigInt(ns.data.length / ns.blockSize);
      return c2h(
        encodeIdentifyNamespace({ nsze: blocks, ncap: blocks, nuse: blocks, nmic: 1, anagrpid: ns.anagrpid, nguid: ns.nguid, lbaf: [{ ms: 0, lbads: ns.blockSize === 512 ? 9 : 12, rp: 0 }] }),
      );
    }
    if (cns === Cns.NS_DESC_LIST) {
      const ns = this.#ns(sqe.nsid);
      if (ns === undefined) return respond(sqe.cid, Status.INVALID_NS | DNR);
      return c2h(encodeNsDescList([{ nidt: NidType.UUID, nid: ns.uuid }, { nidt: NidType.NGUID, nid: ns.nguid }, { nidt: NidType.CSI, nid: Buffer.from([0]) }]));
    }
    return respond(sqe.cid, Status.INVALID_FIELD | DNR);
  }

  /** Get Log Page: discovery (its generation counter bumped mid-read when asked), ANA, anything else zeros. */
  #getLogPage(c: Cmd, c2h: (buf: Buffer) => void): void {
    const o = this.opts;
    const g = decodeGetLogPageCmd(c.sqe);
    if (g.lid === LogPageId.DISCOVERY) {
      const log = encodeDiscoveryLog({ genctr: this.#genctr, entries: o.discoveryEntries ?? [] });
      if (g.lpo > 0n && this.#bumpsLeft > 0) {
        this.#bumpsLeft--;
        this.#genctr++;
      }
      return c2h(sliceLogPage(log, g.lpo, g.length));
    }
    if (g.lid === LogPageId.ANA) {
      const groups = [...new Set(this.namespaces.map((n) => n.anagrpid))].sort((a, b) => a - b);
      const log = encodeAnaLog({
        chgcnt: 1n,
        groups: groups.map((grpid) => ({ grpid, chgcnt: 1n, state: o.anaStates?.get(grpid) ?? 1, nsids: this.namespaces.filter((n) => n.anagrpid === grpid).map((n) => n.nsid) })),
      });
      return c2h(sliceLogPage(log, g.lpo, g.length));
    }
    return c2h(Buffer.alloc(g.length));
  }

  #discovery(conn: FakeConn): boolean {
    return this.#discConns.has(conn.cntlid);
  }

  #discConns = new Set<number>();
}
