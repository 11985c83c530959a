/**
 * Test-only stand-in for one NVMe/TCP connection: a QueueTransportOps that records what the core hands a transport
 * (completions, data requests, closes) and a host-side driver that feeds a CoreQueue the way
 * target/transport/tcp/queue.ts does (Request.load, CoreQueue.submit inside beginChunk/endChunk, data then
 * CoreQueue.execute). No sockets. Built only on what target/core/index.ts exports, so it outlives internal splits.
 */
import { Buffer } from 'node:buffer';
import pino from 'pino';
import {
  AdminOpcode,
  CNTLID_DYNAMIC,
  FeatureId,
  PropertyOffset,
  decodeCqe,
  encodeConnectCmd,
  encodeConnectData,
  encodeCc,
  encodeCqe,
  encodeGetFeaturesCmd,
  encodeGetLogPageCmd,
  encodeIdentifyCmd,
  encodePropertyGetCmd,
  encodePropertySetCmd,
  encodeSetFeaturesCmd,
  encodeSqe,
  sglTransport,
  type Cqe,
} from '../../../protocol/index.js';
import { TargetController, CoreQueue, CorePort, Request, Subsystem, TargetCore, type QueueTransportOps } from '../index.js';

/** What the host would see for one completed command: the CQE (round-tripped through the protocol codec) and its data. */
export interface Completion extends Cqe {
  /** C2H payload, when the command returned data with a successful status. */
  data: Buffer | undefined;
  /** The read data would carry SUCCESS and no CapsuleResp follows (SQ flow control off, dw0/dw1 zero; NVMe-TCP 1.0 §3.3.5). */
  successFlag: boolean;
}

/** A command waiting for host data (what the TCP transport answers with R2T). */
export interface DataRequest {
  cid: number;
  /** Bytes the core wants from the host. */
  length: number;
  req: Request;
}

/** Records the transport side of one queue; `core` is the CoreQueue under test. */
export class FakeTransport implements QueueTransportOps {
  readonly peer: string;
  readonly localAddress = '192.0.2.1';
  readonly localPort = 4420;
  readonly dataDigest = false;
  readonly completions: Completion[] = [];
  readonly dataRequests: DataRequest[] = [];
  /** Reasons of every close() call, in order (close is idempotent for the connection, not for this record). */
  readonly closes: string[] = [];
  closed = false;
  readonly core: CoreQueue;

  constructor(target: TargetCore, port: CorePort, peer = '198.51.100.7:40000') {
    this.peer = peer;
    this.core = new CoreQueue(target, port, this);
  }

  queueResponse(req: Request): void {
    if (this.closed) return;
    const qid = this.core.qid < 0 ? 0 : this.core.qid;
    const cqe = decodeCqe(encodeCqe({ dw0: req.dw0, dw1: req.dw1, sqhd: req.sqhd, sqid: qid, cid: req.cid, status: req.status }));
    const out = req.out;
    const data = out !== undefined && req.status === 0 ? Buffer.concat(out) : undefined;
    const successFlag = data !== undefined && this.core.sqflowDisabled && req.dw0 === 0 && req.dw1 === 0;
    this.completions.push({ ...cqe, data, successFlag });
  }

  requestData(req: Request): void {
    this.dataRequests.push({ cid: req.cid, length: req.dataLen, req });
  }

  /** Like TargetTcpQueue.close: the socket goes, and its 'close' event tells the core the queue is gone. */
  close(reason: string): void {
    this.closes.push(reason);
    if (this.closed) return;
    this.closed = true;
    this.core.onTransportClosed();
  }

  /** The host closed the connection (socket 'close' without a core-initiated close). */
  hostClose(): void {
    if (this.closed) return;
    this.closed = true;
    this.core.onTransportClosed();
  }

  /** Completions recorded so far with this CID. */
  completionsFor(cid: number): Completion[] {
    return this.completions.filter((c) => c.cid === cid);
  }
}

export const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:6b8e1c2a-0d3f-4a57-9c11-2f4e5d6a7b8c';
export const HOSTID = Buffer.from('6b8e1c2a0d3f4a579c112f4e5d6a7b8c', 'hex');
export const SUBNQN = 'nqn.2024-01.io.example:core-tests';

export interface ConnectOptions {
  qid: number;
  /** 0's based, as on the wire. Default 31. */
  sqsize?: number;
  kato?: number;
  cattr?: number;
  recfmt?: number;
  cntlid?: number;
  subnqn?: string;
  hostnqn?: string;
  hostid?: Buffer;
  cid?: number;
  /** Connect data in the capsule (SGL 0x01, as Linux sends it) or fetched through requestData (SGL 0x5A). Default true. */
  inCapsule?: boolean;
  /** Raw Connect data instead of one encoded from the fields above. */
  data?: Buffer;
}

/** Host side of one queue: builds SQEs with the protocol encoders and feeds them to the CoreQueue. */
export class HostQueue {
  readonly transport: FakeTransport;
  #nextCid = 1;

  constructor(target: TargetCore, port: CorePort, peer?: string) {
    this.transport = new FakeTransport(target, port, peer);
  }

  get core(): CoreQueue {
    return this.transport.core;
  }

  get completions(): Completion[] {
    return this.transport.completions;
  }

  /** The most recent completion (fails the test if there is none). */
  last(): Completion {
    const c = this.transport.completions[this.transport.completions.length - 1];
    if (c === undefined) throw new Error('no completion recorded');
    return c;
  }

  cid(): number {
    const c = this.#nextCid;
    this.#nextCid = (c + 1) & 0xffff;
    return c;
  }

  /** One received capsule, handled the way TargetTcpQueue does: Request.load then CoreQueue.submit inside a chunk. */
  submit(sqe: Buffer, inCapsule?: Buffer): Request {
    const req = new Request();
    req.reset();
    this.core.beginChunk();
    try {
      req.load(sqe, inCapsule !== undefined && inCapsule.length > 0 ? [inCapsule] : undefined);
      this.core.submit(req);
    } finally {
      this.core.endChunk();
    }
    return req;
  }

  /** A capsule the transport fails before parsing (a data digest error on in-capsule data, as TargetTcpQueue does). */
  reject(sqe: Buffer, status: number): Request {
    const req = new Request();
    req.reset();
    req.load(sqe, undefined);
    this.core.reject(req, status);
    return req;
  }

  /** Submit and return the completion for its CID, which must have arrived synchronously. */
  exec(sqe: Buffer, inCapsule?: Buffer): Completion {
    return this.completionOf(this.submit(sqe, inCapsule));
  }

  /** The latest completion with this request's CID (fails the test if there is none). */
  completionOf(req: Request): Completion {
    const got = this.transport.completionsFor(req.cid);
    const c = got[got.length - 1];
    if (c === undefined) throw new Error(`no completion for cid ${req.cid}`);
    return c;
  }

  /** The host data of a requestData()ed command arrived (all H2CData received): like TargetTcpQueue, set data and execute. */
  sendData(req: Request, data: Buffer): void {
    this.core.beginChunk();
    try {
      req.data = [data];
      this.core.execute(req);
    } finally {
      this.core.endChunk();
    }
  }

  connectCapsule(o: ConnectOptions): { sqe: Buffer; data: Buffer } {
    const data =
      o.data ??
      encodeConnectData({
        hostid: o.hostid ?? HOSTID,
        cntlid: o.cntlid ?? CNTLID_DYNAMIC,
        subnqn: o.subnqn ?? SUBNQN,
        hostnqn: o.hostnqn ?? HOSTNQN,
      });
    const inCapsule = o.inCapsule ?? true;
    const sqe = encodeConnectCmd({
      cid: o.cid ?? this.cid(),
      qid: o.qid,
      sqsize: o.sqsize ?? 31,
      kato: o.kato ?? 0,
      cattr: o.cattr ?? 0,
      recfmt: o.recfmt ?? 0,
      ...(inCapsule ? {} : { sgl: sglTransport(data.length) }),
    });
    return { sqe, data };
  }

  /** Connect with the data in-capsule, or through requestData then sendData; returns its completion. */
  connect(o: ConnectOptions): Completion {
    const { sqe, data } = this.connectCapsule(o);
    if (o.inCapsule ?? true) return this.exec(sqe, data);
    const req = this.submit(sqe);
    if (this.transport.dataRequests.some((d) => d.req === req)) this.sendData(req, data);
    return this.completionOf(req);
  }

  /** Admin Connect then CC.EN = 1 with the entry sizes an NVM controller requires; returns the cntlid. */
  connectAndEnable(o: Omit<ConnectOptions, 'qid'> = {}): number {
    const c = this.connect({ ...o, qid: 0 });
    if (c.status !== 0) throw new Error(`admin connect failed: status 0x${c.status.toString(16)}`);
    const en = this.propertySet(PropertyOffset.CC, encodeCc({ en: true, iosqes: 6, iocqes: 4 }));
    if (en.status !== 0) throw new Error(`CC write failed: status 0x${en.status.toString(16)}`);
    return c.dw0 & 0xffff;
  }

  propertyGet(offset: number, size8?: boolean): Completion {
    return this.exec(encodePropertyGetCmd({ cid: this.cid(), offset, ...(size8 !== undefined ? { size8 } : {}) }));
  }

  propertySet(offset: number, value: number | bigint): Completion {
    return this.exec(encodePropertySetCmd({ cid: this.cid(), offset, value: BigInt(value) }));
  }

  keepAlive(): Completion {
    return this.exec(encodeSqe({ opcode: AdminOpcode.KEEP_ALIVE, cid: this.cid() }));
  }

  /** Post an Asynchronous Event Request; it usually stays outstanding (no completion yet). */
  asyncEvent(): Request {
    return this.submit(encodeSqe({ opcode: AdminOpcode.ASYNC_EVENT, cid: this.cid() }));
  }

  identify(cns: number, nsid = 0): Completion {
    return this.exec(encodeIdentifyCmd({ cid: this.cid(), cns, nsid }));
  }

  getLogPage(lid: number, length: number, rae = false): Completion {
    return this.exec(encodeGetLogPageCmd({ cid: this.cid(), lid, length, rae }));
  }

  setFeatures(fid: number, cdw11: number): Completion {
    return this.exec(encodeSetFeaturesCmd({ cid: this.cid(), fid, cdw11 }));
  }

  getFeatures(fid: number): Completion {
    return this.exec(encodeGetFeaturesCmd({ cid: this.cid(), fid }));
  }

  setKato(ms: number): Completion {
    return this.setFeatures(FeatureId.KATO, ms);
  }
}

type SubsystemConfig = ConstructorParameters<typeof Subsystem>[0];
type PortConfig = ConstructorParameters<typeof CorePort>[0];

/** A target core with one port (id 1) and one NVM subsystem (SUBNQN, any host), silent logger. */
/** The full Controller behind a cntlid (the subsystem's map holds the narrow ControllerEntry view). */
export function controllerOf(subsys: Subsystem, cntlid: number): TargetController {
  const ctrl = subsys.controllers.get(cntlid);
  if (!(ctrl instanceof TargetController)) throw new Error(`no controller ${cntlid}`);
  return ctrl;
}

export function makeTarget(sub: Partial<SubsystemConfig> = {}, portCfg: Partial<PortConfig> = {}): { target: TargetCore; port: CorePort; subsys: Subsystem } {
  const target = new TargetCore(pino({ level: 'silent' }));
  const port = new CorePort({ id: 1, addr: '192.0.2.1', port: 4420, ...portCfg });
  target.ports.set(port.id, port);
  const subsys = new Subsystem({ nqn: SUBNQN, allowAnyHost: true, ...sub });
  target.subsystems.set(subsys.nqn, subsys);
  return { target, port, subsys };
}
