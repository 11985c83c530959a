// One NVMe/TCP connection as a host sees it (TCP 1.0 §3): ICReq/ICResp, R2T/H2CData and C2HData handling, digests,
// over the shared connection core (connection/: socket, PDU reader, batched writes, TermReq on a fatal finding).
// Modelled on Linux drivers/nvme/host/tcp.c (nvme_tcp_init_connection, nvme_tcp_handle_r2t, nvme_tcp_recv_data).
// It knows commands only through HostCommand.
import { Buffer } from 'node:buffer';
import { TcpConnection, type ConnectionFatal, type ConnectionHandler } from '../../connection/index.js';
import {
  ConnectionClosedError,
  CqeOffset,
  DataPduOffset,
  DataPshOffset,
  Fes,
  PduFlag,
  PduType,
  TimeoutError,
  TransportFatalError,
  checkC2HData,
  checkR2T,
  fesName,
  packDigests,
} from '../../protocol/index.js';
import type { CapsuleCmdPdu, DataSink, H2CDataPdu, IcRespPdu } from '../../protocol/index.js';
import { rd16, rd32 } from '../../protocol/le.js';
import { tlsConnect, type TlsQueueCredentials } from '../tls.js';

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
  /**
   * A CapsuleResp arrived (its CQE at `cqeOff` in `buf`, valid only during the call) or a C2HData with SUCCESS
   * completed one (`buf` undefined).
   */
  onResponse(buf: Buffer | undefined, cqeOff: number, cmd: HostCommand | undefined, cid: number): void;
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
  /** Run the queue over TLS 1.3 with this identity and PSK (TP 8011); one handshake per queue, again on reconnect. */
  tls?: TlsQueueCredentials;
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

/** connecting: TCP connect and ICReq sent, no ICResp yet. ready: commands flow. closed: failed or closed, once. */
type QueueState = 'connecting' | 'ready' | 'closed';

const ALLOWED: Readonly<Record<QueueState, readonly QueueState[]>> = {
  connecting: ['ready', 'closed'],
  ready: ['closed'],
  closed: [],
};

const NO_DATA: Buffer[] = [];
const EMPTY = Buffer.alloc(0);
/** Receive buffer: large enough for a 128 KiB C2HData PDU per read. */
const RX_BUFFER = 256 * 1024;
/** Send batch slab (docs/performance.md: one write per batch). */
const BATCH_SLAB = 64 * 1024;
/** After an H2CTermReq or close the target gets this long to read before the socket is destroyed. */
const LINGER_MS = 100;

export class HostTcpQueue {
  readonly #opts: TcpQueueOptions;
  #handlers: TcpQueueHandlers | undefined;
  #conn: TcpConnection | undefined;
  #state: QueueState = 'connecting';
  #params: IcParams | undefined;
  /** Reused CapsuleCmd and H2CData objects: the batch copies headers (and takes data views) before send returns. */
  readonly #cmd: CapsuleCmdPdu = { type: PduType.CAPSULE_CMD, sqe: Buffer.alloc(64), data: [] };
  readonly #h2c: H2CDataPdu = { type: PduType.H2C_DATA, cccid: 0, ttag: 0, datao: 0, last: false, data: [] };
  readonly #h2cData: Buffer[] = [EMPTY];
  #icWaiter: { resolve: (p: IcParams) => void; reject: (e: Error) => void } | undefined;
  #closeErr: Error | undefined;
  /** The host role's side of the connection core (one object per queue). */
  readonly #handler: ConnectionHandler = {
    // One entry per PDU kind a host takes; the connection core makes any other kind a sequence error. The data-path
    // kinds arrive as header views, nothing allocated per I/O, with or without digests.
    received: {
      [PduType.IC_RESP]: (pdu) => this.#handleIcResp(pdu),
      [PduType.CAPSULE_RESP]: (cqe) => {
        const cid = rd16(cqe, CqeOffset.cid);
        this.#handlers?.onResponse(cqe, 0, this.#handlers.command(cid), cid);
        return undefined;
      },
      [PduType.C2H_DATA]: (psh, datal, flags) => this.#c2hDataHeader(rd16(psh, DataPshOffset.cccid), rd32(psh, DataPshOffset.datao), datal, flags),
      [PduType.R2T]: (psh) => this.#handleR2T(rd16(psh, DataPshOffset.cccid), rd16(psh, DataPshOffset.ttag), rd32(psh, DataPshOffset.r2to), rd32(psh, DataPshOffset.r2tl)),
      [PduType.C2H_TERM_REQ]: (pdu) => this.#fail(new TransportFatalError(`${this.#label()}: controller sent C2HTermReq: ${fesName(pdu.fes)} (fei ${pdu.fei})`, pdu.fes, pdu.fei)),
    },
    dataEnd: (_sink, digestOk) => this.#c2hDataEnd(digestOk),
    onFatal: (f) => this.#onFatal(f),
    onInternalError: (err) => this.#fail(new ConnectionClosedError(`${this.#label()}: internal error handling received data`, { cause: err })),
    // TCP connected (connecting → open): the IC exchange starts (TCP 1.0 §3.3).
    onStateChange: (_from, to) => {
      if (to === 'open') this.#sendIcReq();
    },
    onClose: (err) =>
      this.#fail(
        err !== undefined
          ? new ConnectionClosedError(`${this.#label()}: ${err.message}`, { cause: err })
          : new ConnectionClosedError(`${this.#label()}: connection closed by ${this.#opts.host}:${this.#opts.port}`),
      ),
  };
  /** The C2HData whose data is arriving: its command, CCCID, where its data ends, its CH flags, and its sink. */
  #dataCmd: HostCommand | undefined;
  #dataCid = 0;
  #dataEnd = 0;
  #dataFlags = 0;
  readonly #sink: DataSink = { buf: EMPTY, at: 0 };

  constructor(opts: TcpQueueOptions) {
    this.#opts = opts;
  }

  get params(): IcParams | undefined {
    return this.#params;
  }

  get localAddress(): string | undefined {
    return this.#conn?.localAddress;
  }

  get localPort(): number | undefined {
    return this.#conn?.localPort;
  }

  get remoteAddress(): string | undefined {
    return this.#conn?.remoteAddress;
  }

  get remotePort(): number | undefined {
    return this.#conn?.remotePort;
  }

  get bytesIn(): number {
    return this.#conn?.bytesIn ?? 0;
  }

  get bytesOut(): number {
    return this.#conn?.bytesOut ?? 0;
  }

  get closed(): boolean {
    return this.#state === 'closed';
  }

  get closeError(): Error | undefined {
    return this.#closeErr;
  }

  setHandlers(h: TcpQueueHandlers): void {
    this.#handlers = h;
  }

  /** TCP connect, then ICReq → ICResp with the Linux host's checks (nvme_tcp_init_connection). */
  connect(): Promise<IcParams> {
    const o = this.#opts;
    const ms = o.icTimeoutMs ?? 10_000;
    return new Promise<IcParams>((resolve, reject) => {
      const timer = setTimeout(() => this.#fail(new TimeoutError(`${this.#label()}: no ICResp from ${o.host}:${o.port} within ${ms} ms`)), ms);
      const settle = (fn: () => void): void => {
        clearTimeout(timer);
        fn();
      };
      this.#icWaiter = { resolve: (p) => settle(() => resolve(p)), reject: (e) => settle(() => reject(e)) };
      // Receive into one reused buffer instead of a fresh 64 KiB allocation per read (docs/performance.md); the reader
      // copies whatever an incomplete PDU still needs and handlers copy data out during onPdu.
      const to = { host: o.host, port: o.port, ...(o.localAddress !== undefined ? { localAddress: o.localAddress } : {}) };
      const cred = o.tls;
      this.#conn = TcpConnection.connect(
        cred === undefined ? to : { ...to, createSocket: () => tlsConnect(to, cred), readyEvent: 'secureConnect' },
        { role: 'host', handler: this.#handler, rxBuffer: Buffer.allocUnsafeSlow(RX_BUFFER), batchSlab: BATCH_SLAB, lingerMs: LINGER_MS },
      );
    });
  }

  /** ICReq: pfv 0, hpda 0 (no alignment wanted), maxr2t 0 (one R2T per command), digests as asked (TCP 1.0 §3.6.2.2). */
  #sendIcReq(): void {
    const o = this.#opts;
    this.#conn?.send({ type: PduType.IC_REQ, pfv: 0, hpda: 0, dgst: packDigests(o.hdgst, o.ddgst), maxr2t: 0 });
  }

  /** Queue a CapsuleCmd (sqe + optional in-capsule data) for sending in this tick's batch. */
  sendCapsule(sqe: Buffer, inCapsule?: Buffer): void {
    if (this.#state !== 'ready') return;
    const cmd = this.#cmd;
    cmd.sqe = sqe;
    cmd.data = inCapsule === undefined || inCapsule.length === 0 ? NO_DATA : [inCapsule];
    this.#conn?.send(cmd);
    cmd.data = NO_DATA;
  }

  /** Close the socket; pending commands are reported through onClose with `err`. */
  close(err: Error = new ConnectionClosedError(`${this.#label()}: closed by host`)): void {
    this.#fail(err);
  }

  #label(): string {
    return this.#opts.label ?? 'queue';
  }

  #setState(next: QueueState): boolean {
    if (!ALLOWED[this.#state].includes(next)) return false;
    this.#state = next;
    return true;
  }


  #handleIcResp(pdu: IcRespPdu): void {
    const o = this.#opts;
    const want = packDigests(o.hdgst, o.ddgst);
    // Linux nvme_tcp_init_connection: digest bits must equal the request; maxdata ≥ 4096 and a multiple of 4 (the
    // reader already enforced pfv 0 and maxdata). Unlike Linux we honour a non-zero CPDA (SPDK echoes HPDA).
    if (pdu.dgst !== want) {
      this.#protocolError(Fes.INVALID_HEADER_FIELD, 11, `ICResp digest 0x${pdu.dgst.toString(16)} differs from requested 0x${want.toString(16)}`);
      return;
    }
    this.#conn?.setFraming(o.hdgst, o.ddgst, pdu.cpda, 0);
    this.#params = { hdgst: o.hdgst, ddgst: o.ddgst, cpda: pdu.cpda, maxh2cdata: pdu.maxh2cdata };
    if (!this.#setState('ready')) return;
    const w = this.#icWaiter;
    this.#icWaiter = undefined;
    w?.resolve(this.#params);
  }

  /**
   * The C2HData checks (TCP 1.0 §3.6.2.9; Linux nvme_tcp_handle_c2h_data / nvme_tcp_recv_data): a read command with
   * this CID, in-order offsets within its buffer. Returns where its data goes (the command's buffer at DATAO), or
   * undefined once the connection ends. A C2HData without data (SUCCESS only) completes at once (#c2hDataEnd).
   */
  #c2hDataHeader(cccid: number, datao: number, datal: number, flags: number): DataSink | undefined {
    const cmd = this.#c2hCommand(cccid);
    if (cmd === undefined || cmd.c2h === undefined) return undefined;
    const finding = checkC2HData(datao, datal, cmd.c2hReceived, cmd.c2h.length);
    if (finding !== undefined) {
      this.#conn?.fatal({ ...finding, reason: `${finding.reason} (cid 0x${cccid.toString(16)})` });
      return undefined;
    }
    this.#dataCmd = cmd;
    this.#dataCid = cccid;
    this.#dataEnd = datao + datal;
    this.#dataFlags = flags;
    const sink = this.#sink;
    sink.buf = cmd.c2h;
    sink.at = datao;
    return sink;
  }

  /**
   * The data of the C2HData #c2hDataHeader accepted has arrived. TCP 1.0 §3.6.2.9: SUCCESS completes the command
   * without a CapsuleResp, with the data that came (SPDK ends an Authentication Receive short of its buffer; checkC2HData).
   * A data digest mismatch fails the command with DATA_XFER_ERROR once it completes (Linux nvme_tcp_ddgst_error path).
   */
  #c2hDataEnd(digestOk: boolean): void {
    const cmd = this.#dataCmd;
    this.#dataCmd = undefined;
    this.#sink.buf = EMPTY;
    if (cmd === undefined) return;
    cmd.c2hReceived = this.#dataEnd;
    if (!digestOk) cmd.transportStatus = DATA_XFER_ERROR;
    if ((this.#dataFlags & PduFlag.DATA_SUCCESS) !== 0) this.#handlers?.onResponse(undefined, 0, cmd, this.#dataCid);
  }

  /** The read command a C2HData's CCCID names; otherwise H2CTermReq (FEI: the CCCID field) and undefined. */
  #c2hCommand(cccid: number): HostCommand | undefined {
    const cmd = this.#handlers?.command(cccid);
    if (cmd !== undefined && cmd.c2h !== undefined) return cmd;
    this.#protocolError(Fes.INVALID_HEADER_FIELD, DataPduOffset.cccid, `C2HData for unknown or non-read cid 0x${cccid.toString(16)}`);
    return undefined;
  }

  /** R2T (TCP 1.0 §3.6.2.10; Linux nvme_tcp_handle_r2t): answer with H2CData chunks ≤ MAXH2CDATA, DATA_LAST on the last one. */
  #handleR2T(cccid: number, ttag: number, r2to: number, r2tl: number): undefined {
    const cmd = this.#handlers?.command(cccid);
    if (cmd === undefined || cmd.h2c === undefined) {
      this.#protocolError(Fes.INVALID_HEADER_FIELD, DataPduOffset.cccid, `R2T for unknown or non-write cid 0x${cccid.toString(16)}`);
      return;
    }
    const finding = checkR2T(r2to, r2tl, cmd.h2cSent, cmd.h2c.length);
    if (finding !== undefined) {
      this.#conn?.fatal(finding);
      return;
    }
    const conn = this.#conn;
    if (conn === undefined) return;
    const max = this.#params?.maxh2cdata ?? 4096;
    const end = r2to + r2tl;
    const h2c = this.#h2c;
    const data = this.#h2cData;
    h2c.cccid = cccid;
    h2c.ttag = ttag;
    h2c.data = data;
    for (let off = r2to; off < end; ) {
      const n = Math.min(max, end - off);
      h2c.datao = off;
      h2c.last = off + n === end;
      data[0] = cmd.h2c.subarray(off, off + n);
      conn.send(h2c);
      off += n;
    }
    // Not pinning the command's buffer once its data is queued.
    data[0] = EMPTY;
    cmd.h2cSent = end;
  }

  /** A target broke the protocol: H2CTermReq with the finding, then close (TCP 1.0 §3.6.2.4); onFatal follows. */
  #protocolError(fes: number, fei: number, reason: string): void {
    this.#conn?.fatal({ fes, fei, reason });
  }

  /** The core sent the H2CTermReq for a finding (the reader's or ours) and is closing. */
  #onFatal(f: ConnectionFatal): void {
    this.#fail(new TransportFatalError(`${this.#label()}: ${f.reason}`, f.fes, f.fei));
  }

  #fail(err: Error): void {
    if (!this.#setState('closed')) return;
    this.#closeErr = err;
    // Graceful: anything batched (a TermReq) goes out before the FIN; the core destroys the socket after LINGER_MS.
    this.#conn?.close();
    const w = this.#icWaiter;
    this.#icWaiter = undefined;
    w?.reject(err);
    this.#handlers?.onClose(err);
  }
}
