// One NVMe/TCP connection as a host sees it (TCP 1.0 §3): socket, ICReq/ICResp, PDU framing, R2T/H2CData and
// C2HData handling, digests. Modelled on Linux drivers/nvme/host/tcp.c (nvme_tcp_init_connection,
// nvme_tcp_handle_r2t, nvme_tcp_recv_data, nvme_tcp_try_send). It knows commands only through HostCommand.
import net from 'node:net';
import { Buffer } from 'node:buffer';
import {
  ConnectionClosedError,
  Fes,
  PduBatch,
  PduReader,
  PduType,
  TimeoutError,
  TransportFatalError,
  fesName,
  termReqFor,
} from '../../protocol/index.js';
import type { C2HDataPdu, CapsuleCmdPdu, IcRespPdu, Pdu, PduFraming, R2TPdu, ReaderFatal } from '../../protocol/index.js';

/** A command as the transport needs to see it: where its data comes from or goes to. */
export interface HostCommand {
  readonly cid: number;
  /** Host-to-controller data (writes) sent by R2T; undefined when the command has none or sent it in-capsule. */
  readonly h2c: Buffer | undefined;
  /** Controller-to-host destination (reads). */
  readonly c2h: Buffer | undefined;
  /** Bytes of h2c already sent by H2CData. */
  h2cSent: number;
  /** Bytes of c2h already received by C2HData. */
  c2hReceived: number;
  /** A status the transport decided on (data digest error → DATA_XFER_ERROR, like Linux req->status). */
  transportStatus: number;
}

export interface TcpQueueHandlers {
  /** Find the in-flight command a CID belongs to. */
  command(cid: number): HostCommand | undefined;
  /** A CapsuleResp arrived (cqe is a view valid only during the call) or a C2HData with SUCCESS completed one. */
  onResponse(cqe: Buffer | undefined, cmd: HostCommand | undefined, cid: number): void;
  /** The connection is gone (fatal PDU error, TermReq, socket error or close); called once. */
  onClose(err: Error): void;
}

export interface TcpQueueOptions {
  host: string;
  port: number;
  hdgst: boolean;
  ddgst: boolean;
  /** Source address (host_traddr / host_iface). */
  localAddress?: string;
  /** TCP connect + ICResp deadline (Linux: 10 s receive timeout on the socket). */
  icTimeoutMs?: number;
  /** Label for errors and logs ("q3"). */
  label?: string;
}

/** Negotiated connection parameters from ICResp. */
export interface IcParams {
  hdgst: boolean;
  ddgst: boolean;
  /** Controller PDU data alignment (0's based dwords) that H2C data PDUs honour. */
  cpda: number;
  /** MAXH2CDATA: largest H2CData payload. */
  maxh2cdata: number;
}

/** Linux NVME_SC_DATA_XFER_ERROR, Linux-style 15-bit status. */
const DATA_XFER_ERROR = 0x04;

type QueueState = 'connecting' | 'ready' | 'closed';

const NO_DATA: Buffer[] = [];
const NO_FRAMING: PduFraming = { hdgst: false, ddgst: false, pda: 0 };
const EMPTY = Buffer.alloc(0);
/** Receive buffer: large enough for a 128 KiB C2HData PDU per read. */
const RX_BUFFER = 256 * 1024;

export class TcpQueue {
  readonly #opts: TcpQueueOptions;
  #handlers: TcpQueueHandlers | undefined;
  #socket: net.Socket | undefined;
  #reader: PduReader;
  #state: QueueState = 'connecting';
  #framing: PduFraming = { hdgst: false, ddgst: false, pda: 0 };
  #params: IcParams | undefined;
  /** Outgoing PDUs of this tick: headers in a reused slab, one write per batch (performance.md §2). */
  readonly #batch = new PduBatch(64 * 1024);
  #flushScheduled = false;
  /** Reused CapsuleCmd object: the batch copies the SQE before sendCapsule returns. */
  readonly #cmd: CapsuleCmdPdu = { type: PduType.CAPSULE_CMD, sqe: Buffer.alloc(64), data: [] };
  #icWaiter: { resolve: (p: IcParams) => void; reject: (e: Error) => void } | undefined;
  #closeErr: Error | undefined;
  bytesOut = 0;

  constructor(opts: TcpQueueOptions) {
    this.#opts = opts;
    this.#reader = new PduReader({
      role: 'host',
      onPdu: (pdu) => this.#handlePdu(pdu),
      onFatal: (f) => this.#handleReaderFatal(f),
      onDataDigestError: (pdu) => this.#handleDataDigestError(pdu),
      reusesChunks: true,
    });
  }

  get params(): IcParams | undefined {
    return this.#params;
  }

  get localAddress(): string | undefined {
    return this.#socket?.localAddress;
  }

  get localPort(): number | undefined {
    return this.#socket?.localPort;
  }

  get remoteAddress(): string | undefined {
    return this.#socket?.remoteAddress;
  }

  get remotePort(): number | undefined {
    return this.#socket?.remotePort;
  }

  get bytesIn(): number {
    return this.#reader.bytesIn;
  }

  get closed(): boolean {
    return this.#state === 'closed';
  }

  setHandlers(h: TcpQueueHandlers): void {
    this.#handlers = h;
  }

  /** TCP connect, then ICReq → ICResp with the Linux host's checks (nvme_tcp_init_connection). */
  connect(): Promise<IcParams> {
    const o = this.#opts;
    return new Promise<IcParams>((resolve, reject) => {
      this.#icWaiter = { resolve, reject };
      const timer = setTimeout(() => {
        this.#fail(new TimeoutError(`${this.#label()}: no ICResp from ${o.host}:${o.port} within ${o.icTimeoutMs ?? 10_000} ms`));
      }, o.icTimeoutMs ?? 10_000);
      const settle = (fn: () => void): void => {
        clearTimeout(timer);
        fn();
      };
      this.#icWaiter = { resolve: (p) => settle(() => resolve(p)), reject: (e) => settle(() => reject(e)) };
      // Receive into one reused buffer instead of a fresh 64 KiB allocation per read (performance.md §3); the reader
      // copies whatever an incomplete PDU still needs (reusesChunks) and handlers copy data out during onPdu.
      const rx = Buffer.allocUnsafeSlow(RX_BUFFER);
      const socket = net.connect({
        host: o.host,
        port: o.port,
        noDelay: true,
        onread: { buffer: rx, callback: (n: number, buf: Uint8Array) => this.#onRead(buf as Buffer, n) },
        ...(o.localAddress !== undefined ? { localAddress: o.localAddress } : {}),
      });
      this.#socket = socket;
      socket.setNoDelay(true);
      socket.on('connect', () => {
        // ICReq: pfv 0, hpda 0 (no alignment wanted), maxr2t 0 (one R2T per command), digests as asked (§3.6.2.2).
        this.#write({ type: PduType.IC_REQ, pfv: 0, hpda: 0, dgst: (o.hdgst ? 1 : 0) | (o.ddgst ? 2 : 0), maxr2t: 0 });
      });
      socket.on('error', (err) => this.#fail(new ConnectionClosedError(`${this.#label()}: ${err.message}`, { cause: err })));
      socket.on('close', () => this.#fail(new ConnectionClosedError(`${this.#label()}: connection closed by ${o.host}:${o.port}`)));
    });
  }

  /** onread callback: true keeps reading. */
  #onRead(buf: Buffer, n: number): boolean {
    // Protocol errors are reported through the reader's onFatal; never let a handler bug escape into libuv's callback.
    try {
      this.#reader.push(buf.subarray(0, n));
    } catch (err) {
      this.#fail(new ConnectionClosedError(`${this.#label()}: internal error handling received data`, { cause: err }));
    }
    return true;
  }

  /** Queue a CapsuleCmd (sqe + optional in-capsule data) for sending in this tick's batch. */
  sendCapsule(sqe: Buffer, inCapsule?: Buffer): void {
    if (this.#state !== 'ready') return;
    const cmd = this.#cmd;
    cmd.sqe = sqe;
    cmd.data = inCapsule === undefined || inCapsule.length === 0 ? NO_DATA : [inCapsule];
    this.#write(cmd);
    cmd.data = NO_DATA;
  }

  /** Close the socket; pending commands are reported through onClose with `err`. */
  close(err: Error = new ConnectionClosedError(`${this.#label()}: closed by host`)): void {
    this.#fail(err);
  }

  #label(): string {
    return this.#opts.label ?? 'queue';
  }

  /** Add a PDU to this tick's batch; the batch goes out on the next tick as one write (STYLE.md §2.3). */
  #write(pdu: Pdu): void {
    const s = this.#socket;
    if (s === undefined || s.destroyed) return;
    this.#batch.add(pdu, pdu.type === PduType.IC_REQ ? NO_FRAMING : this.#framing);
    if (!this.#flushScheduled) {
      this.#flushScheduled = true;
      process.nextTick(() => this.#flush());
    }
  }

  #flush(): void {
    this.#flushScheduled = false;
    const batch = this.#batch;
    if (batch.empty) return;
    this.bytesOut += batch.bytes;
    const chunks = batch.take();
    const s = this.#socket;
    if (s === undefined || s.destroyed) {
      batch.recycle(false);
      return;
    }
    if (chunks.length === 1) s.write(chunks[0] as Buffer);
    else {
      s.cork();
      for (const c of chunks) s.write(c);
      s.uncork();
    }
    // Synchronously completed writes leave nothing buffered: the slab is free again (PduBatch.recycle).
    const release = batch.recycle(s.writableLength > 0);
    if (release !== undefined) s.write(EMPTY, release);
  }

  #handlePdu(pdu: Pdu): void {
    switch (pdu.type) {
      case PduType.IC_RESP:
        this.#handleIcResp(pdu);
        return;
      case PduType.CAPSULE_RESP: {
        const cid = pdu.cqe.readUInt16LE(12);
        this.#handlers?.onResponse(pdu.cqe, this.#handlers.command(cid), cid);
        return;
      }
      case PduType.C2H_DATA:
        this.#handleC2HData(pdu);
        return;
      case PduType.R2T:
        this.#handleR2T(pdu);
        return;
      case PduType.C2H_TERM_REQ:
        this.#fail(new TransportFatalError(`${this.#label()}: controller sent C2HTermReq: ${fesName(pdu.fes)} (fei ${pdu.fei})`, pdu.fes, pdu.fei));
        return;
      default:
        // The reader only hands a host C2H PDU types; anything else is a sequence error.
        this.#protocolError(Fes.PDU_SEQUENCE_ERROR, 0, `unexpected PDU type ${pdu.type}`);
    }
  }

  #handleIcResp(pdu: IcRespPdu): void {
    const o = this.#opts;
    const want = (o.hdgst ? 1 : 0) | (o.ddgst ? 2 : 0);
    // Linux nvme_tcp_init_connection: digest bits must equal the request; maxdata ≥ 4096 and a multiple of 4 (the
    // reader already enforced pfv 0 and maxdata). Unlike Linux we honour a non-zero CPDA (SPDK echoes HPDA).
    if (pdu.dgst !== want) {
      this.#protocolError(Fes.INVALID_HEADER_FIELD, 11, `ICResp digest 0x${pdu.dgst.toString(16)} differs from requested 0x${want.toString(16)}`);
      return;
    }
    this.#framing = { hdgst: o.hdgst, ddgst: o.ddgst, pda: pdu.cpda };
    this.#reader.setFraming(o.hdgst, o.ddgst, 0);
    this.#params = { hdgst: o.hdgst, ddgst: o.ddgst, cpda: pdu.cpda, maxh2cdata: pdu.maxh2cdata };
    this.#state = 'ready';
    const w = this.#icWaiter;
    this.#icWaiter = undefined;
    w?.resolve(this.#params);
  }

  /** C2HData (§3.6.2.9; Linux nvme_tcp_handle_c2h_data / nvme_tcp_recv_data): in-order offsets within the buffer. */
  #handleC2HData(pdu: C2HDataPdu): void {
    const cmd = this.#handlers?.command(pdu.cccid);
    if (cmd === undefined || cmd.c2h === undefined) {
      this.#protocolError(Fes.INVALID_HEADER_FIELD, 8, `C2HData for unknown or non-read cid 0x${pdu.cccid.toString(16)}`);
      return;
    }
    let len = 0;
    for (const d of pdu.data) len += d.length;
    if (pdu.datao !== cmd.c2hReceived) {
      this.#protocolError(Fes.INVALID_HEADER_FIELD, 12, `C2HData datao ${pdu.datao}, expected ${cmd.c2hReceived}`);
      return;
    }
    if (pdu.datao + len > cmd.c2h.length) {
      this.#protocolError(Fes.DATA_OUT_OF_RANGE, 16, `C2HData ${pdu.datao}+${len} beyond ${cmd.c2h.length}`);
      return;
    }
    let off = pdu.datao;
    for (const d of pdu.data) {
      d.copy(cmd.c2h, off);
      off += d.length;
    }
    cmd.c2hReceived = off;
    if (pdu.success) {
      // §3.6.2.9: SUCCESS completes the command without a CapsuleResp; only valid once all data arrived.
      if (cmd.c2hReceived !== cmd.c2h.length) {
        this.#protocolError(Fes.INVALID_HEADER_FIELD, 1, `C2HData SUCCESS after ${cmd.c2hReceived} of ${cmd.c2h.length} bytes`);
        return;
      }
      this.#handlers?.onResponse(undefined, cmd, pdu.cccid);
    }
  }

  /** R2T (§3.6.2.10; Linux nvme_tcp_handle_r2t): answer with H2CData chunks ≤ MAXH2CDATA, DATA_LAST on the last one. */
  #handleR2T(pdu: R2TPdu): void {
    const cmd = this.#handlers?.command(pdu.cccid);
    if (cmd === undefined || cmd.h2c === undefined) {
      this.#protocolError(Fes.INVALID_HEADER_FIELD, 8, `R2T for unknown or non-write cid 0x${pdu.cccid.toString(16)}`);
      return;
    }
    if (pdu.r2to !== cmd.h2cSent) {
      this.#protocolError(Fes.INVALID_HEADER_FIELD, 12, `R2T r2to ${pdu.r2to}, expected ${cmd.h2cSent}`);
      return;
    }
    if (pdu.r2to + pdu.r2tl > cmd.h2c.length) {
      this.#protocolError(Fes.DATA_OUT_OF_RANGE, 16, `R2T ${pdu.r2to}+${pdu.r2tl} beyond ${cmd.h2c.length}`);
      return;
    }
    const max = this.#params?.maxh2cdata ?? 4096;
    const end = pdu.r2to + pdu.r2tl;
    for (let off = pdu.r2to; off < end; ) {
      const n = Math.min(max, end - off);
      this.#write({ type: PduType.H2C_DATA, cccid: pdu.cccid, ttag: pdu.ttag, datao: off, last: off + n === end, data: [cmd.h2c.subarray(off, off + n)] });
      off += n;
    }
    cmd.h2cSent = end;
  }

  /** Linux nvme_tcp_ddgst_error path: the command completes with DATA_XFER_ERROR once its response arrives. */
  #handleDataDigestError(pdu: Pdu): void {
    if (pdu.type !== PduType.C2H_DATA) {
      this.#protocolError(Fes.HEADER_DIGEST_ERROR, 0, 'data digest error');
      return;
    }
    const cmd = this.#handlers?.command(pdu.cccid);
    if (cmd === undefined || cmd.c2h === undefined) {
      this.#protocolError(Fes.INVALID_HEADER_FIELD, 8, `C2HData for unknown cid 0x${pdu.cccid.toString(16)}`);
      return;
    }
    let len = 0;
    for (const d of pdu.data) len += d.length;
    cmd.c2hReceived = pdu.datao + len;
    cmd.transportStatus = DATA_XFER_ERROR;
    if (pdu.success) this.#handlers?.onResponse(undefined, cmd, pdu.cccid);
  }

  #handleReaderFatal(f: ReaderFatal): void {
    this.#sendTermReq(f);
    this.#fail(new TransportFatalError(`${this.#label()}: ${f.reason}`, f.fes, f.fei));
  }

  /** A target broke the protocol: H2CTermReq with the finding, then close (§3.6.2.4). */
  #protocolError(fes: number, fei: number, reason: string): void {
    this.#sendTermReq({ fes, fei, header: Buffer.alloc(0) });
    this.#fail(new TransportFatalError(`${this.#label()}: ${reason}`, fes, fei));
  }

  #sendTermReq(f: Pick<ReaderFatal, 'fes' | 'fei' | 'header'>): void {
    const s = this.#socket;
    if (s === undefined || s.destroyed || this.#state === 'closed') return;
    // After whatever is batched, then out at once (the socket is ended right after).
    this.#batch.add(termReqFor('host', f), NO_FRAMING);
    this.#flush();
  }

  #fail(err: Error): void {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    this.#closeErr = err;
    const s = this.#socket;
    if (s !== undefined && !s.destroyed) {
      // Let a queued TermReq go out before the FIN; destroy soon after in case the peer never reads.
      s.end();
      setTimeout(() => s.destroy(), 100).unref();
    }
    const w = this.#icWaiter;
    this.#icWaiter = undefined;
    w?.reject(err);
    this.#handlers?.onClose(err);
  }

  get closeError(): Error | undefined {
    return this.#closeErr;
  }
}
