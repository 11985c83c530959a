// One NVMe/TCP connection = one queue (TCP 1.0 §3.3): IC exchange, capsules, R2T/H2CData, C2HData, TermReq, batched writes.
import { Buffer } from 'node:buffer';
import type net from 'node:net';
import type { Logger } from 'pino';
import {
  Fes,
  PduReader,
  PduType,
  Status,
  encodeCqeInto,
  encodePdu,
  fesName,
  termReqFor,
  type H2CDataPdu,
  type Pdu,
  type PduFraming,
  type ReaderFatal,
} from '../../../protocol/index.js';
import { CoreQueue, FABRICS_IN_CAPSULE_MAX, Request, type CorePort, type QueueTransportOps, type TargetCore } from '../../core/index.js';

/** Connection states: waiting for ICReq, waiting for Connect, connected, TermReq sent / closing, gone. */
export type TcpQueueState = 'ic-wait' | 'connect-wait' | 'live' | 'closing' | 'closed';

const ALLOWED: Readonly<Record<TcpQueueState, readonly TcpQueueState[]>> = {
  'ic-wait': ['connect-wait', 'closing', 'closed'],
  'connect-wait': ['live', 'closing', 'closed'],
  live: ['closing', 'closed'],
  closing: ['closed'],
  closed: [],
};

export interface TcpQueueOptions {
  /** Close a connection that sends no ICReq (and then no Connect) within this many ms. */
  icReqTimeoutMs: number;
}

const H2C_DATAO_OFFSET = 12;
const H2C_TTAG_OFFSET = 10;
const H2C_CCCID_OFFSET = 8;

export class TcpQueue implements QueueTransportOps {
  state: TcpQueueState = 'ic-wait';
  readonly core: CoreQueue;
  readonly peer: string;
  readonly #socket: net.Socket;
  readonly #reader: PduReader;
  readonly #log: Logger;
  #framing: PduFraming = { hdgst: false, ddgst: false, pda: 0 };
  #timer: NodeJS.Timeout | undefined;
  readonly #r2t = new Map<number, Request>();
  #nextTtag = 1;
  readonly #pool: Request[] = [];
  readonly #cqe = Buffer.alloc(16);
  #corked = false;
  #inChunk = false;
  #closeTimer: NodeJS.Timeout | undefined;
  readonly #onClosed: (q: TcpQueue) => void;

  constructor(
    readonly target: TargetCore,
    readonly port: CorePort,
    socket: net.Socket,
    opts: TcpQueueOptions,
    onClosed: (q: TcpQueue) => void,
  ) {
    this.#socket = socket;
    this.#onClosed = onClosed;
    this.peer = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? 0}`;
    this.#log = target.logger.child({ peer: this.peer, port: port.id });
    this.core = new CoreQueue(target, port, this);
    this.#reader = new PduReader({
      role: 'controller',
      onPdu: (pdu) => this.#handlePdu(pdu),
      onFatal: (f) => this.#fatal(f),
      onDataDigestError: (pdu) => this.#handleDataDigestError(pdu),
      maxDataLength: port.maxH2CData,
      maxInCapsuleData: Math.max(port.inlineDataSize, FABRICS_IN_CAPSULE_MAX),
    });
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('error', (err) => this.#log.debug({ err }, 'socket error'));
    socket.on('close', () => this.#onSocketClose());
    this.#timer = setTimeout(() => this.#timeout('no ICReq'), opts.icReqTimeoutMs);
    this.#timer.unref();
    this.#icReqTimeoutMs = opts.icReqTimeoutMs;
  }

  readonly #icReqTimeoutMs: number;

  get localAddress(): string {
    return this.#socket.localAddress ?? '';
  }
  get localPort(): number {
    return this.#socket.localPort ?? 0;
  }

  setState(next: TcpQueueState): boolean {
    if (!ALLOWED[this.state].includes(next)) return false;
    this.#log.trace({ from: this.state, to: next }, 'queue state');
    this.state = next;
    return true;
  }

  #onData(chunk: Buffer): void {
    // Reference: never let network input crash the process — catch at the socket boundary, close only this connection.
    this.#inChunk = true;
    try {
      this.#reader.push(chunk);
      this.core.counters.bytesIn += chunk.length;
    } catch (err) {
      this.#log.error({ err }, 'internal error handling received data; closing connection');
      this.close('internal error');
    } finally {
      this.#inChunk = false;
      this.#flush();
    }
  }

  #handlePdu(pdu: Pdu): void {
    switch (pdu.type) {
      case PduType.IC_REQ:
        return this.#handleIcReq(pdu.hpda, pdu.dgst);
      case PduType.CAPSULE_CMD:
        return this.#handleCapsule(pdu.sqe, pdu.data);
      case PduType.H2C_DATA:
        return this.#handleH2CData(pdu, false);
      case PduType.H2C_TERM_REQ:
        this.#log.warn({ fes: pdu.fes, fei: pdu.fei, reason: fesName(pdu.fes) }, 'host sent H2CTermReq; closing');
        this.close('H2CTermReq');
        return;
      default:
        // The host-role types never reach a controller reader; anything else is a sequence error.
        this.#fatal({ fes: Fes.PDU_SEQUENCE_ERROR, fei: 0, reason: `unexpected PDU type ${pdu.type}`, header: Buffer.from([pdu.type]) });
    }
  }

  #handleIcReq(hpda: number, dgst: number): void {
    if (hpda !== 0) {
      // nvmet rejects a non-zero HPDA (reference §3.2); report it as an unsupported parameter at offset 10.
      this.#fatal({ fes: Fes.UNSUPPORTED_PARAMETER, fei: 10, reason: `HPDA ${hpda} not supported`, header: Buffer.alloc(0) });
      return;
    }
    const hdgst = (dgst & 1) !== 0;
    const ddgst = (dgst & 2) !== 0;
    // Echo the host's digest request exactly and CPDA 0 (reference traps 1, 2).
    this.#send(encodePdu({ type: PduType.IC_RESP, pfv: 0, cpda: 0, dgst: dgst & 3, maxh2cdata: this.port.maxH2CData }));
    this.#framing = { hdgst, ddgst, pda: 0 };
    this.#reader.setFraming(hdgst, ddgst, 0);
    this.setState('connect-wait');
    this.#restartTimer('no Connect after ICResp');
  }

  #restartTimer(reason: string): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#timeout(reason), this.#icReqTimeoutMs);
    this.#timer.unref();
  }

  #timeout(reason: string): void {
    this.#timer = undefined;
    if (this.state === 'ic-wait' || this.state === 'connect-wait') {
      this.#log.info({ reason }, 'closing idle connection');
      this.close(reason);
    }
  }

  #alloc(): Request {
    const r = this.#pool.pop() ?? new Request();
    r.reset();
    return r;
  }

  #handleCapsule(sqe: Buffer, data: Buffer[]): void {
    const req = this.#alloc();
    req.load(sqe, data.length > 0 ? data : undefined);
    this.core.submit(req);
  }

  /** R2T for the whole remaining length, one per command (reference §6.2, trap 15). */
  requestData(req: Request): void {
    let ttag = this.#nextTtag;
    while (this.#r2t.has(ttag)) ttag = ttag >= 0xfffe ? 1 : ttag + 1;
    this.#nextTtag = ttag >= 0xfffe ? 1 : ttag + 1;
    req.ttag = ttag;
    req.received = 0;
    req.h2c = [];
    this.#r2t.set(ttag, req);
    this.#send(encodePdu({ type: PduType.R2T, cccid: req.cid, ttag, r2to: 0, r2tl: req.dataLen }, this.#framing));
  }

  #handleH2CData(pdu: H2CDataPdu, digestBad: boolean): void {
    const req = this.#r2t.get(pdu.ttag);
    const header = this.#h2cHeader(pdu);
    if (req === undefined) return this.#fatal({ fes: Fes.INVALID_HEADER_FIELD, fei: H2C_TTAG_OFFSET, reason: `H2CData with unknown ttag ${pdu.ttag}`, header });
    if (req.cid !== pdu.cccid) return this.#fatal({ fes: Fes.INVALID_HEADER_FIELD, fei: H2C_CCCID_OFFSET, reason: `H2CData cccid ${pdu.cccid} for ttag of cid ${req.cid}`, header });
    let len = 0;
    for (const b of pdu.data) len += b.length;
    if (pdu.datao !== req.received || pdu.datao + len > req.dataLen) {
      return this.#fatal({ fes: Fes.DATA_OUT_OF_RANGE, fei: H2C_DATAO_OFFSET, reason: `H2CData datao ${pdu.datao} len ${len}: expected offset ${req.received} of ${req.dataLen}`, header });
    }
    for (const b of pdu.data) req.h2c.push(b);
    req.received += len;
    if (digestBad) req.errorLoc = 0xfffe;
    if (req.received < req.dataLen) return;
    this.#r2t.delete(pdu.ttag);
    if (req.errorLoc === 0xfffe) {
      // A data digest error completes the command with a transient transport error, so the host retries (TCP 1.0 §3.6.1.4).
      this.target.stats.dataDigestErrors++;
      this.core.complete(req, Status.TRANSIENT_TRANSPORT);
      return;
    }
    req.data = req.h2c;
    this.core.execute(req);
  }

  #h2cHeader(pdu: H2CDataPdu): Buffer {
    return encodePdu({ ...pdu, data: [] }, this.#framing)[0]?.subarray(0, 24) ?? Buffer.alloc(0);
  }

  #handleDataDigestError(pdu: Pdu): void {
    if (pdu.type === PduType.H2C_DATA) return this.#handleH2CData(pdu, true);
    if (pdu.type === PduType.CAPSULE_CMD) {
      this.target.stats.dataDigestErrors++;
      const req = this.#alloc();
      req.load(pdu.sqe, undefined);
      this.#log.warn({ cid: req.cid }, 'data digest error on in-capsule data');
      this.core.reject(req, Status.TRANSIENT_TRANSPORT);
      return;
    }
    this.#fatal({ fes: Fes.HEADER_DIGEST_ERROR, fei: 0, reason: 'data digest error', header: Buffer.alloc(0) });
  }

  /** Completion from core: C2HData (split at c2hDataSize, SUCCESS only with SQ flow control off), then CapsuleResp. */
  queueResponse(req: Request): void {
    if (this.state === 'closing' || this.state === 'closed') return this.#release(req);
    if (req.opcode === 0x7f && this.state === 'connect-wait' && this.core.state === 'live') {
      this.setState('live');
      if (this.#timer !== undefined) clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    const out = req.out;
    let skipResp = false;
    if (out !== undefined && req.status === 0) {
      const success = this.core.sqflowDisabled && req.dw0 === 0 && req.dw1 === 0;
      this.#sendC2H(req.cid, out, success);
      skipResp = success;
    }
    if (!skipResp) {
      encodeCqeInto(this.#cqe, 0, { dw0: req.dw0, dw1: req.dw1, sqhd: req.sqhd, sqid: this.core.qid < 0 ? 0 : this.core.qid, cid: req.cid, status: req.status });
      this.#send(encodePdu({ type: PduType.CAPSULE_RESP, cqe: this.#cqe }, this.#framing));
    }
    this.#release(req);
  }

  #sendC2H(cid: number, out: Buffer[], success: boolean): void {
    const max = this.port.c2hDataSize;
    let total = 0;
    for (const b of out) total += b.length;
    if (total <= max) {
      this.#send(encodePdu({ type: PduType.C2H_DATA, cccid: cid, datao: 0, last: true, success, data: out }, this.#framing));
      return;
    }
    let datao = 0;
    let piece: Buffer[] = [];
    let pieceLen = 0;
    for (const b of out) {
      let off = 0;
      while (off < b.length) {
        const n = Math.min(b.length - off, max - pieceLen);
        piece.push(off === 0 && n === b.length ? b : b.subarray(off, off + n));
        pieceLen += n;
        off += n;
        if (pieceLen === max) {
          const last = datao + pieceLen === total;
          this.#send(encodePdu({ type: PduType.C2H_DATA, cccid: cid, datao, last, success: last && success, data: piece }, this.#framing));
          datao += pieceLen;
          piece = [];
          pieceLen = 0;
        }
      }
    }
    if (pieceLen > 0) this.#send(encodePdu({ type: PduType.C2H_DATA, cccid: cid, datao, last: true, success, data: piece }, this.#framing));
  }

  #release(req: Request): void {
    req.state = 'free';
    req.out = undefined;
    req.data = undefined;
    req.h2c = [];
    req.inCapsule = undefined;
    if (this.#pool.length < 256) this.#pool.push(req);
  }

  /** Batch writes: cork on the first write of a tick/chunk, one uncork (one writev) at the end (performance.md §2). */
  #send(parts: Buffer[]): void {
    if (this.state === 'closed') return;
    const s = this.#socket;
    if (!this.#corked) {
      this.#corked = true;
      s.cork();
      if (!this.#inChunk) process.nextTick(() => this.#flush());
    }
    for (const p of parts) {
      this.core.counters.bytesOut += p.length;
      s.write(p);
    }
  }

  #flush(): void {
    if (!this.#corked) return;
    this.#corked = false;
    this.#socket.uncork();
  }

  #fatal(f: ReaderFatal): void {
    if (this.state === 'closing' || this.state === 'closed') return;
    this.target.countPduError(f.fes);
    this.#log.warn({ fes: f.fes, fei: f.fei, reason: f.reason, hostnqn: this.core.ctrl?.hostnqn, qid: this.core.qid }, `fatal transport error (${fesName(f.fes)}): sending C2HTermReq`);
    this.#send(encodePdu(termReqFor('controller', f)));
    this.#flush();
    this.setState('closing');
    this.#socket.end();
    this.#closeTimer = setTimeout(() => this.#socket.destroy(), 1000);
    this.#closeTimer.unref();
    this.#failPending();
  }

  /** Core/teardown-initiated close. */
  close(reason: string): void {
    if (this.state === 'closed') return;
    this.#log.debug({ reason }, 'closing connection');
    this.#flush();
    if (this.state !== 'closing') this.setState('closing');
    this.#socket.destroy();
    this.#failPending();
  }

  #failPending(): void {
    this.#r2t.clear();
  }

  #onSocketClose(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    if (this.#closeTimer !== undefined) clearTimeout(this.#closeTimer);
    this.#timer = undefined;
    this.#r2t.clear();
    this.setState('closed');
    this.core.onTransportClosed();
    this.#onClosed(this);
  }

  /** Wait until nothing is in flight (graceful stop), at most `ms`. */
  async drain(ms: number): Promise<void> {
    const end = Date.now() + ms;
    while (this.core.inFlight - (this.core.ctrl?.aers.length ?? 0) > 0 && Date.now() < end && this.state !== 'closed') {
      await new Promise((r) => setTimeout(r, 5));
    }
  }
}

