// Raw NVMe/TCP host peer for tests: writes hand-made bytes or encoded PDUs and awaits decoded PDUs or the close.
// It validates what it receives with the host-role PduReader, so a malformed controller reply fails the test too.
import { Buffer } from 'node:buffer';
import net from 'node:net';
import {
  PduReader,
  PduType,
  decodeCqe,
  encodeConnectCmd,
  encodeConnectData,
  encodePdu,
  sglInCapsule,
  sglTransport,
  type Cqe,
  type IcRespPdu,
  type Pdu,
  type PduFraming,
  type ReaderFatal,
} from '../../protocol/index.js';

export interface RawPeerOptions {
  host?: string;
  port: number;
  /** Default wait for nextPdu/closed (ms). */
  timeoutMs?: number;
}

export interface CommandResult {
  /** The completion, or undefined when the last C2HData carried SUCCESS. */
  cqe: Cqe | undefined;
  /** C2H data, concatenated (copied). */
  data: Buffer;
  /** Every PDU received for the command, in order. */
  pdus: Pdu[];
}

export interface ConnectOptions {
  subnqn: string;
  hostnqn: string;
  hostid?: Buffer;
  qid?: number;
  cntlid?: number;
  sqsize?: number;
  cattr?: number;
  kato?: number;
  cid?: number;
  digests?: { hdgst?: boolean; ddgst?: boolean };
}

/** A transport SGL for `n` bytes (data moved by R2T/C2HData). */
export { sglTransport, sglInCapsule };

type Waiter = { resolve: (p: Pdu) => void; reject: (e: Error) => void; timer: NodeJS.Timeout };

export class RawPeer {
  readonly socket: net.Socket;
  #framing: PduFraming = { hdgst: false, ddgst: false, pda: 0 };
  #queue: Pdu[] = [];
  #waiters: Waiter[] = [];
  #closed = false;
  #closeWaiters: Array<() => void> = [];
  #fatal: ReaderFatal | undefined;
  #icSeen = false;
  #stray: Cqe[] = [];
  #reader: PduReader;
  readonly #timeoutMs: number;

  private constructor(socket: net.Socket, timeoutMs: number) {
    this.socket = socket;
    this.#timeoutMs = timeoutMs;
    this.#reader = new PduReader({
      role: 'host',
      onPdu: (pdu) => {
        if (pdu.type === PduType.IC_RESP) {
          this.#icSeen = true;
          this.#reader.setFraming((pdu.dgst & 1) !== 0, (pdu.dgst & 2) !== 0, 0);
        }
        this.#deliver(pdu);
      },
      onFatal: (f) => {
        this.#fatal = f;
        this.#failWaiters(new Error(`raw peer: controller sent a malformed PDU: ${f.reason}`));
      },
      onDataDigestError: (pdu) => {
        this.#failWaiters(new Error(`raw peer: data digest error on ${pdu.type}`));
      },
    });
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.#reader.push(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.#closed = true;
      this.#failWaiters(new Error('raw peer: connection closed'));
      for (const w of this.#closeWaiters.splice(0)) w();
    });
  }

  static connect(opts: RawPeerOptions): Promise<RawPeer> {
    return new Promise((resolve, reject) => {
      const s = net.connect({ host: opts.host ?? '127.0.0.1', port: opts.port });
      s.once('connect', () => {
        s.off('error', reject);
        resolve(new RawPeer(s, opts.timeoutMs ?? 2000));
      });
      s.once('error', reject);
    });
  }

  get isClosed(): boolean {
    return this.#closed;
  }

  /** A fatal finding the host-role reader had on the controller's bytes, if any. */
  get readerFatal(): ReaderFatal | undefined {
    return this.#fatal;
  }

  get framing(): PduFraming {
    return this.#framing;
  }

  /** Digests used for PDUs sent with send(); ic() sets them from the ICResp. */
  setFraming(f: Partial<PduFraming>): void {
    this.#framing = { ...this.#framing, ...f };
  }

  sendRaw(bytes: Buffer | readonly Buffer[]): void {
    if (Buffer.isBuffer(bytes)) this.socket.write(bytes);
    else this.socket.write(Buffer.concat(bytes as Buffer[]));
  }

  /** Encode with the current framing and send. */
  send(pdu: Pdu): void {
    this.sendRaw(encodePdu(pdu, this.#framing));
  }

  /** ICReq → ICResp, then switch framing to what the controller granted. */
  async ic(opts: { hdgst?: boolean; ddgst?: boolean; hpda?: number } = {}): Promise<IcRespPdu> {
    const dgst = (opts.hdgst === true ? 1 : 0) | (opts.ddgst === true ? 2 : 0);
    this.send({ type: PduType.IC_REQ, pfv: 0, hpda: opts.hpda ?? 0, dgst, maxr2t: 0 });
    const resp = await this.nextPdu();
    if (resp.type !== PduType.IC_RESP) throw new Error(`raw peer: expected ICResp, got PDU type ${resp.type}`);
    this.#framing = { hdgst: (resp.dgst & 1) !== 0, ddgst: (resp.dgst & 2) !== 0, pda: resp.cpda };
    return resp;
  }

  /** Next PDU from the controller (in order), or rejects on timeout/close. */
  nextPdu(timeoutMs = this.#timeoutMs): Promise<Pdu> {
    const q = this.#queue.shift();
    if (q !== undefined) return Promise.resolve(q);
    if (this.#closed) return Promise.reject(new Error('raw peer: connection closed'));
    if (this.#fatal !== undefined) return Promise.reject(new Error(`raw peer: malformed PDU: ${this.#fatal.reason}`));
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        resolve,
        reject,
        timer: setTimeout(() => {
          this.#waiters = this.#waiters.filter((x) => x !== w);
          reject(new Error(`raw peer: no PDU within ${timeoutMs} ms`));
        }, timeoutMs),
      };
      this.#waiters.push(w);
    });
  }

  /** Resolves when the controller closes the connection; rejects after the timeout. */
  closed(timeoutMs = this.#timeoutMs): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`raw peer: still open after ${timeoutMs} ms`)), timeoutMs);
      this.#closeWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  close(): void {
    this.socket.destroy();
  }

  /**
   * Run one command to completion (one outstanding at a time): CapsuleCmd (+in-capsule data), answer R2Ts with
   * H2CData chunks of at most `maxh2cdata`, gather C2HData, return the CQE (undefined when C2H SUCCESS ended it).
   */
  async command(sqe: Buffer, opts: { data?: Buffer; inCapsule?: boolean; maxh2cdata?: number } = {}): Promise<CommandResult> {
    const data = opts.data;
    const cid = sqe.readUInt16LE(2);
    this.send({ type: PduType.CAPSULE_CMD, sqe, data: opts.inCapsule === true && data !== undefined ? [data] : [] });
    const pdus: Pdu[] = [];
    const read: Buffer[] = [];
    for (;;) {
      const p = await this.nextPdu();
      pdus.push(p);
      if (p.type === PduType.R2T) {
        if (data === undefined || p.cccid !== cid) throw new Error(`raw peer: unexpected R2T for cid ${p.cccid}`);
        const max = opts.maxh2cdata ?? 131072;
        for (let off = p.r2to; off < p.r2to + p.r2tl; off += max) {
          const n = Math.min(max, p.r2to + p.r2tl - off);
          this.send({ type: PduType.H2C_DATA, cccid: cid, ttag: p.ttag, datao: off, last: off + n === p.r2to + p.r2tl, data: [data.subarray(off, off + n)] });
        }
      } else if (p.type === PduType.C2H_DATA) {
        read.push(...p.data.map((b) => Buffer.from(b)));
        if (p.success) return { cqe: undefined, data: Buffer.concat(read), pdus };
      } else if (p.type === PduType.CAPSULE_RESP) {
        const cqe = decodeCqe(p.cqe);
        // Completions of other outstanding commands (e.g. an AER) are kept for stray().
        if (cqe.cid !== cid) {
          pdus.pop();
          this.#stray.push(cqe);
          continue;
        }
        return { cqe, data: Buffer.concat(read), pdus };
      } else {
        throw new Error(`raw peer: unexpected PDU type ${p.type} during command`);
      }
    }
  }

  /** Completions for other CIDs that arrived while command() waited (oldest first); clears the list. */
  stray(): Cqe[] {
    return this.#stray.splice(0);
  }

  /** ICReq + Fabrics Connect as the Linux host sends it (1024 bytes in-capsule). */
  async connect(c: ConnectOptions): Promise<CommandResult> {
    if (this.#framing.hdgst === false && !this.#icDone) await this.ic(c.digests ?? {});
    const sqe = encodeConnectCmd({ cid: c.cid ?? 0, qid: c.qid ?? 0, sqsize: c.sqsize ?? 31, cattr: c.cattr ?? 0, kato: c.kato ?? 0, sgl: sglInCapsule(1024) });
    const data = encodeConnectData({ hostid: c.hostid ?? Buffer.alloc(16, 0x11), cntlid: c.cntlid ?? 0xffff, subnqn: c.subnqn, hostnqn: c.hostnqn });
    return this.command(sqe, { data, inCapsule: true });
  }

  get #icDone(): boolean {
    return this.#icSeen;
  }

  #deliver(pdu: Pdu): void {
    const w = this.#waiters.shift();
    if (w === undefined) {
      this.#queue.push(pdu);
      return;
    }
    clearTimeout(w.timer);
    w.resolve(pdu);
  }

  #failWaiters(e: Error): void {
    for (const w of this.#waiters.splice(0)) {
      clearTimeout(w.timer);
      w.reject(e);
    }
  }
}
