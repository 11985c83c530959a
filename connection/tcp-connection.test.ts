// TcpConnection over real 127.0.0.1:0 sockets, both roles: one write per batch, fatal → TermReq → close (TCP 1.0
// §3.6.2.4/5), the error boundary, the bounded linger, the shared receive buffer, backpressure, and every state edge.
// Peer bytes come from the independent test builder (protocol/testing/pdu-builder.ts).
import { Buffer } from 'node:buffer';
import net from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import * as B from '../protocol/testing/pdu-builder.js';
import { CH_SIZE, Fes, Lent, PduType, decodePduHeader, type DataSink, type Pdu } from '../protocol/index.js';
import { CONNECTION_TRANSITIONS, TcpConnection, type Completion, type ConnectionFatal, type ConnectionHandler, type ConnectionState, type ReceivedHandlers, type TcpConnectionOptions } from './index.js';

/**
 * A handler that records everything (an entry for every PDU kind; header views and their data are laid out again as
 * PDU objects); `pduHook` may be set per test.
 */
class Recorder implements ConnectionHandler {
  readonly received: ReceivedHandlers = {
    [PduType.IC_REQ]: (pdu) => this.#onPdu(pdu),
    [PduType.IC_RESP]: (pdu) => this.#onPdu(pdu),
    [PduType.H2C_TERM_REQ]: (pdu) => this.#onPdu(pdu),
    [PduType.C2H_TERM_REQ]: (pdu) => this.#onPdu(pdu),
    [PduType.CAPSULE_CMD]: (psh, datal, flags) => this.#header(PduType.CAPSULE_CMD, psh, datal, flags),
    [PduType.CAPSULE_RESP]: (psh, datal, flags) => this.#header(PduType.CAPSULE_RESP, psh, datal, flags),
    [PduType.H2C_DATA]: (psh, datal, flags) => this.#header(PduType.H2C_DATA, psh, datal, flags),
    [PduType.C2H_DATA]: (psh, datal, flags) => this.#header(PduType.C2H_DATA, psh, datal, flags),
    [PduType.R2T]: (psh, datal, flags) => this.#header(PduType.R2T, psh, datal, flags),
  };
  pdus: Pdu[] = [];
  /** PDUs whose data digest did not match (dataEnd with digestOk false). */
  digestErrors: Pdu[] = [];
  #head = Buffer.alloc(0);
  fatals: ConnectionFatal[] = [];
  internal: unknown[] = [];
  edges: string[] = [];
  flushes: Array<[number, number]> = [];
  chunks = 0;
  connected = 0;
  closeErr: Error | undefined | null = null;
  readonly closed: Promise<void>;
  #resolveClosed!: () => void;
  pduHook: ((pdu: Pdu) => void) | undefined;
  constructor() {
    this.closed = new Promise((r) => (this.#resolveClosed = r));
  }
  #onPdu(pdu: Pdu): void {
    this.pdus.push(pdu);
    this.pduHook?.(pdu);
  }
  #header(type: PduType, psh: Buffer, datal: number, flags: number): DataSink | undefined {
    const head = Buffer.alloc(CH_SIZE + psh.length);
    head[0] = type;
    head[1] = flags;
    head[2] = head.length;
    psh.copy(head, CH_SIZE);
    if (datal === 0) {
      this.#onPdu(decodePduHeader(head, [], 0));
      return undefined;
    }
    this.#head = head;
    return { buf: Buffer.alloc(datal), at: 0 };
  }
  dataEnd(sink: DataSink, digestOk: boolean): void {
    const pdu = decodePduHeader(this.#head, [sink.buf], sink.buf.length);
    if (digestOk) this.#onPdu(pdu);
    else this.digestErrors.push(pdu);
  }
  onFatal(f: ConnectionFatal): void {
    this.fatals.push(f);
  }
  onInternalError(err: unknown): void {
    this.internal.push(err);
  }
  onChunkEnd(): void {
    this.chunks++;
  }
  onFlushed(bytes: number, unsent: number): void {
    this.flushes.push([bytes, unsent]);
  }
  onClose(err: Error | undefined): void {
    if (this.closeErr !== null) throw new Error('onClose twice');
    this.closeErr = err;
    this.#resolveClosed();
  }
  onStateChange(from: ConnectionState, to: ConnectionState): void {
    if (from === 'connecting' && to === 'open') this.connected++;
    this.edges.push(`${from}->${to}`);
  }
}

/** A completion without data: CID and SQHD (status and Dwords 0). */
const cqeOnly = (cid: number, sqhd: number): Completion => ({ cid, status: 0, dw0: 0, dw1: 0, sqhd, out: undefined, outLent: Lent.STABLE, outCrc: undefined });

/** Bytes a raw peer socket received, with a wait for a given count. */
class Collector {
  // Chunks kept apart and joined on read: concatenating on every chunk is quadratic, and tens of MiB of it missed the
  // waits' deadline on a loaded machine.
  #chunks: Buffer[] = [];
  #length = 0;
  ended = false;
  closed = false;
  get bytes(): Buffer {
    if (this.#chunks.length !== 1) this.#chunks = [Buffer.concat(this.#chunks, this.#length)];
    return this.#chunks[0] as Buffer;
  }
  constructor(readonly socket: net.Socket) {
    socket.on('data', (d: Buffer) => {
      this.#chunks.push(d);
      this.#length += d.length;
    });
    socket.on('end', () => (this.ended = true));
    socket.on('close', () => (this.closed = true));
    socket.on('error', () => undefined);
  }
  async waitFor(pred: () => boolean, ms = 3000): Promise<void> {
    const end = Date.now() + ms;
    while (!pred()) {
      if (Date.now() > end) throw new Error('timed out waiting');
      await new Promise((r) => setTimeout(r, 5));
    }
  }
  async bytesAtLeast(n: number): Promise<Buffer> {
    await this.waitFor(() => this.#length >= n);
    return this.bytes;
  }
}

const cleanup: Array<() => void> = [];
afterEach(() => {
  for (const f of cleanup.splice(0)) f();
  vi.restoreAllMocks();
});

function listen(server: net.Server): Promise<number> {
  cleanup.push(() => server.close());
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)));
}

/** Controller side: a TcpConnection over the accepted socket, a raw client as the host. */
async function controllerPair(h: ConnectionHandler, extra: Partial<TcpConnectionOptions> = {}, clientOpts: { allowHalfOpen?: boolean } = {}) {
  let accepted: net.Socket | undefined;
  let conn: TcpConnection | undefined;
  const server = net.createServer({ pauseOnConnect: extra.rxBuffer !== undefined }, (s) => {
    accepted = s;
    conn = TcpConnection.accept(s, { role: 'controller', handler: h, ...extra });
  });
  const port = await listen(server);
  const client = net.connect({ ...clientOpts, host: '127.0.0.1', port });
  cleanup.push(() => client.destroy());
  const peer = new Collector(client);
  await new Promise<void>((r) => client.once('connect', () => r()));
  await peer.waitFor(() => conn !== undefined);
  return { conn: conn as TcpConnection, accepted: accepted as net.Socket, peer, client };
}

/** Host side: a raw server as the controller, TcpConnection.connect to it. */
async function hostPair(h: ConnectionHandler, extra: Partial<TcpConnectionOptions> = {}, serverOpts: net.ServerOpts = {}) {
  let peer: Collector | undefined;
  const server = net.createServer(serverOpts, (s) => {
    peer = new Collector(s);
    cleanup.push(() => s.destroy());
  });
  const port = await listen(server);
  const conn = TcpConnection.connect({ host: '127.0.0.1', port }, { role: 'host', handler: h, ...extra });
  cleanup.push(() => conn.destroy());
  await new Promise<void>((r) => {
    const t = setInterval(() => {
      if (peer !== undefined && conn.state === 'open') {
        clearInterval(t);
        r();
      }
    }, 2);
  });
  return { conn, peer: peer as Collector };
}

const SQE = B.sqe({ opcode: 0x02, cid: 5, nsid: 1 });
const ICREQ = B.icReq();
const ICRESP = B.icResp();
const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('state table', () => {
  it('has exactly the documented edges', () => {
    expect(CONNECTION_TRANSITIONS).toEqual({
      connecting: ['open', 'terminating', 'closed'],
      open: ['terminating', 'closed'],
      terminating: ['closed'],
      closed: [],
    });
  });

  it('connecting -> open on TCP connect (host), then open -> closed when the peer goes away', async () => {
    const h = new Recorder();
    const { conn, peer } = await hostPair(h);
    expect(h.connected).toBe(1);
    peer.socket.destroy();
    await h.closed;
    expect(h.edges).toEqual(['connecting->open', 'open->closed']);
    expect(conn.state).toBe('closed');
  });

  it('connecting -> terminating -> closed when closed before TCP connects', async () => {
    const server = net.createServer((s) => s.destroy());
    const port = await listen(server);
    const h = new Recorder();
    const conn = TcpConnection.connect({ host: '127.0.0.1', port }, { role: 'host', handler: h });
    conn.close();
    conn.destroy();
    await h.closed;
    expect(h.edges).toEqual(['connecting->terminating', 'terminating->closed']);
    expect(h.connected).toBe(0);
  });

  it('connecting -> closed when the connect fails, with the socket error', async () => {
    const server = net.createServer();
    const port = await listen(server);
    await new Promise<void>((r) => server.close(() => r()));
    const h = new Recorder();
    TcpConnection.connect({ host: '127.0.0.1', port }, { role: 'host', handler: h });
    await h.closed;
    expect(h.edges).toEqual(['connecting->closed']);
    expect((h.closeErr as NodeJS.ErrnoException | undefined)?.code).toBe('ECONNREFUSED');
  });

  it('accepted connections start open; open -> terminating -> closed on close(); nothing leaves closed', async () => {
    const h = new Recorder();
    const { conn, peer } = await controllerPair(h);
    expect(conn.state).toBe('open');
    conn.close();
    expect(conn.state).toBe('terminating');
    await peer.waitFor(() => peer.ended);
    peer.socket.end();
    await h.closed;
    expect(h.edges).toEqual(['open->terminating', 'terminating->closed']);
    expect(conn.fatal({ fes: Fes.PDU_SEQUENCE_ERROR, fei: 0, reason: 'late' })).toBe(false);
    conn.close();
    conn.destroy();
    expect(conn.send({ type: PduType.R2T, cccid: 1, ttag: 1, r2to: 0, r2tl: 8 })).toBe(false);
    expect(h.edges).toHaveLength(2);
    expect(h.fatals).toEqual([]);
  });

  it('destroy(): open -> terminating -> closed without waiting for the peer', async () => {
    const h = new Recorder();
    const { conn, peer } = await controllerPair(h);
    conn.destroy();
    await h.closed;
    await peer.waitFor(() => peer.closed);
    expect(h.edges).toEqual(['open->terminating', 'terminating->closed']);
  });
});

describe('batch flush', () => {
  it('PDUs queued in one tick leave in one write (controller)', async () => {
    const h = new Recorder();
    const { conn, accepted, peer } = await controllerPair(h);
    const write = vi.spyOn(accepted, 'write');
    conn.send({ type: PduType.R2T, cccid: 1, ttag: 1, r2to: 0, r2tl: 4096 });
    conn.sendCompletion(cqeOnly(7, 1), 1, false);
    conn.send({ type: PduType.R2T, cccid: 2, ttag: 2, r2to: 0, r2tl: 512 });
    expect(write).not.toHaveBeenCalled();
    expect(conn.batchBytes).toBe(72);
    await tick();
    expect(write).toHaveBeenCalledTimes(1);
    expect(h.flushes.map((f) => f[0])).toEqual([72]);
    expect(conn.bytesOut).toBe(72);
    const got = await peer.bytesAtLeast(72);
    const expected = Buffer.concat([
      B.r2t({ cccid: 1, ttag: 1, r2to: 0, r2tl: 4096 }),
      B.capsuleResp({ cqe: B.cqe({ cid: 7, sqhd: 1, sqid: 1 }) }),
      B.r2t({ cccid: 2, ttag: 2, r2to: 0, r2tl: 512 }),
    ]);
    expect(got.toString('hex')).toBe(expected.toString('hex'));
  });

  it('replies made while handling a received chunk leave in one write at the end of that chunk', async () => {
    const h = new Recorder();
    const { conn, accepted, peer, client } = await controllerPair(h);
    const write = vi.spyOn(accepted, 'write');
    let writesSeenAtChunkEnd = -1;
    h.onChunkEnd = (): void => {
      h.chunks++;
      writesSeenAtChunkEnd = write.mock.calls.length;
    };
    h.pduHook = (pdu): void => {
      if (pdu.type === PduType.IC_REQ) conn.send({ type: PduType.IC_RESP, pfv: 0, cpda: 0, dgst: 0, maxh2cdata: 131072 });
      if (pdu.type === PduType.CAPSULE_CMD) conn.sendCompletion(cqeOnly(5, 0), 0, false);
    };
    client.write(Buffer.concat([ICREQ, B.capsuleCmd({ sqe: SQE }), B.capsuleCmd({ sqe: SQE })]));
    const got = await peer.bytesAtLeast(128 + 48);
    expect(h.chunks).toBe(1);
    expect(writesSeenAtChunkEnd).toBe(0);
    expect(write).toHaveBeenCalledTimes(1);
    expect(got.subarray(0, 128).toString('hex')).toBe(B.icResp({ maxh2cdata: 131072 }).toString('hex'));
  });

  it('a batch with payload views is one corked writev (host: H2CData)', async () => {
    const write = vi.spyOn(net.Socket.prototype, 'write');
    const cork = vi.spyOn(net.Socket.prototype, 'cork');
    const h = new Recorder();
    const { conn, peer } = await hostPair(h);
    const mine = (s: unknown): boolean => s !== peer.socket;
    write.mockClear();
    cork.mockClear();
    const a = B.pattern(1000, 1);
    const b = B.pattern(1000, 2);
    conn.send({ type: PduType.H2C_DATA, cccid: 1, ttag: 1, datao: 0, last: false, data: [a] });
    conn.send({ type: PduType.H2C_DATA, cccid: 1, ttag: 1, datao: 1000, last: true, data: [b] });
    await tick();
    expect(cork.mock.contexts.filter(mine)).toHaveLength(1);
    const got = await peer.bytesAtLeast(2048);
    const expected = Buffer.concat([B.h2cData({ cccid: 1, ttag: 1, datao: 0, data: a }), B.h2cData({ cccid: 1, ttag: 1, datao: 1000, last: true, data: b })]);
    expect(got.toString('hex')).toBe(expected.toString('hex'));
  });
});

describe('fatal', () => {
  it('a reader finding (controller) sends a C2HTermReq with FES/FEI and the offending header, then closes', async () => {
    const h = new Recorder();
    const { conn, peer, client } = await controllerPair(h);
    const bad = B.capsuleCmd({ sqe: SQE });
    client.write(bad);
    await peer.waitFor(() => peer.ended);
    expect(peer.bytes.toString('hex')).toBe(B.termReq(B.T.C2H_TERM_REQ, { fes: Fes.PDU_SEQUENCE_ERROR, fei: 0, errorData: bad.subarray(0, 8) }).toString('hex'));
    expect(h.fatals).toHaveLength(1);
    expect(h.fatals[0]).toMatchObject({ fes: Fes.PDU_SEQUENCE_ERROR, fei: 0 });
    expect(conn.send({ type: PduType.R2T, cccid: 1, ttag: 1, r2to: 0, r2tl: 8 })).toBe(false);
    await h.closed;
    expect(h.edges).toEqual(['open->terminating', 'terminating->closed']);
  });

  it('a transport finding (host) sends an H2CTermReq after what was batched; the rest of the chunk is not acted on', async () => {
    const h = new Recorder();
    const { conn, peer } = await hostPair(h);
    h.pduHook = (pdu): void => {
      if (pdu.type === PduType.IC_RESP) conn.setFraming(false, false, pdu.cpda);
      if (pdu.type === PduType.R2T) {
        conn.send({ type: PduType.H2C_DATA, cccid: pdu.cccid, ttag: pdu.ttag, datao: 0, last: true, data: [B.pattern(8)] });
        conn.fatal({ fes: Fes.DATA_OUT_OF_RANGE, fei: 16, reason: 'test finding' });
      }
    };
    peer.socket.write(Buffer.concat([ICRESP, B.r2t({ cccid: 3, ttag: 4, r2to: 0, r2tl: 8 }), B.r2t({ cccid: 9, ttag: 9, r2to: 0, r2tl: 8 })]));
    await peer.waitFor(() => peer.ended);
    const h2c = B.h2cData({ cccid: 3, ttag: 4, datao: 0, last: true, data: B.pattern(8) });
    const term = B.termReq(B.T.H2C_TERM_REQ, { fes: Fes.DATA_OUT_OF_RANGE, fei: 16, errorData: Buffer.alloc(0) });
    expect(peer.bytes.toString('hex')).toBe(Buffer.concat([h2c, term]).toString('hex'));
    expect(h.pdus.map((p) => p.type)).toEqual([PduType.IC_RESP, PduType.R2T]);
    expect(h.fatals).toEqual([{ fes: Fes.DATA_OUT_OF_RANGE, fei: 16, reason: 'test finding' }]);
    peer.socket.end();
    await h.closed;
    expect(h.edges).toEqual(['connecting->open', 'open->terminating', 'terminating->closed']);
  });

  it('a reader finding (host) sends an H2CTermReq', async () => {
    const h = new Recorder();
    const { peer } = await hostPair(h);
    const bad = B.capsuleResp({ cqe: B.cqe({ cid: 1 }) });
    peer.socket.write(bad);
    await peer.waitFor(() => peer.ended);
    expect(peer.bytes.toString('hex')).toBe(B.termReq(B.T.H2C_TERM_REQ, { fes: Fes.PDU_SEQUENCE_ERROR, fei: 0, errorData: bad.subarray(0, 8) }).toString('hex'));
    await h.closed;
  });

  it('a received kind without an entry in `received` is a sequence error: C2HTermReq naming its type, and no call', async () => {
    const h = new Recorder();
    // A controller that takes ICReq only: the CapsuleCmd after it has no handler.
    const handler: ConnectionHandler = Object.assign(h, { received: { [PduType.IC_REQ]: (pdu: Pdu) => h.pdus.push(pdu) } });
    const { peer, client } = await controllerPair(handler);
    client.write(Buffer.concat([ICREQ, B.capsuleCmd({ sqe: SQE })]));
    await peer.waitFor(() => peer.ended);
    expect(peer.bytes.toString('hex')).toBe(B.termReq(B.T.C2H_TERM_REQ, { fes: Fes.PDU_SEQUENCE_ERROR, fei: 0, errorData: Buffer.from([B.T.CAPSULE_CMD]) }).toString('hex'));
    expect(h.pdus.map((p) => p.type)).toEqual([PduType.IC_REQ]);
    expect(h.fatals).toMatchObject([{ fes: Fes.PDU_SEQUENCE_ERROR, reason: 'unexpected PDU type 4' }]);
    await h.closed;
  });

  it('the linger is bounded: a peer that neither reads nor closes is destroyed after lingerMs', async () => {
    const h = new Recorder();
    const { conn, peer } = await controllerPair(h, { lingerMs: 80 }, { allowHalfOpen: true });
    peer.socket.pause();
    const t0 = Date.now();
    expect(conn.fatal({ fes: Fes.INVALID_HEADER_FIELD, fei: 2, reason: 'test' })).toBe(true);
    await h.closed;
    const took = Date.now() - t0;
    expect(took).toBeGreaterThanOrEqual(70);
    expect(took).toBeLessThan(1000);
    expect(h.edges).toEqual(['open->terminating', 'terminating->closed']);
  });
});

describe('error boundary', () => {
  it('a handler that throws closes only its own connection', async () => {
    const bad = new Recorder();
    const good = new Recorder();
    bad.pduHook = (): void => {
      throw new Error('handler bug');
    };
    const one = await controllerPair(bad);
    const two = await controllerPair(good);
    one.client.write(ICREQ);
    two.client.write(ICREQ);
    await bad.closed;
    expect(bad.internal).toHaveLength(1);
    expect((bad.internal[0] as Error).message).toBe('handler bug');
    expect(bad.fatals).toEqual([]);
    await one.peer.waitFor(() => one.peer.closed);
    await two.peer.waitFor(() => good.pdus.length === 1);
    expect(two.conn.state).toBe('open');
    two.conn.send({ type: PduType.IC_RESP, pfv: 0, cpda: 0, dgst: 0, maxh2cdata: 4096 });
    await two.peer.bytesAtLeast(128);
    expect(good.closeErr).toBe(null);
  });

  it('a throwing onChunkEnd is caught too', async () => {
    const h = new Recorder();
    h.onChunkEnd = (): void => {
      throw new Error('chunk end bug');
    };
    const { client } = await controllerPair(h);
    client.write(ICREQ);
    await h.closed;
    expect(h.internal).toHaveLength(1);
  });
});

describe('shared receive buffer and reading control', () => {
  it('two accepted connections read through one rxBuffer; PDUs split across reads are reassembled', async () => {
    const rx = Buffer.allocUnsafeSlow(64 * 1024);
    const a = new Recorder();
    const b = new Recorder();
    const one = await controllerPair(a, { rxBuffer: rx });
    const two = await controllerPair(b, { rxBuffer: rx });
    expect(one.conn.reusesChunks).toBe(true);
    const data = B.pattern(3000, 5);
    const wire = Buffer.concat([ICREQ, B.capsuleCmd({ sqe: SQE, data })]);
    const kept: string[] = [];
    const keep = (pdu: Pdu): void => {
      if (pdu.type === PduType.CAPSULE_CMD) kept.push(Buffer.concat(pdu.data).toString('hex'));
    };
    a.pduHook = keep;
    b.pduHook = keep;
    for (let i = 0; i < wire.length; i += 700) {
      one.client.write(wire.subarray(i, i + 700));
      two.client.write(wire.subarray(i, i + 700));
      await new Promise((r) => setTimeout(r, 2));
    }
    await one.peer.waitFor(() => kept.length === 2);
    expect(kept).toEqual([data.toString('hex'), data.toString('hex')]);
    expect(one.conn.bytesIn).toBe(wire.length);
  });

  it('host connect with its own rxBuffer receives the ICResp', async () => {
    const h = new Recorder();
    const { peer } = await hostPair(h, { rxBuffer: Buffer.allocUnsafeSlow(16 * 1024) });
    peer.socket.write(ICRESP);
    await peer.waitFor(() => h.pdus.length === 1);
    expect(h.pdus[0]).toMatchObject({ type: PduType.IC_RESP, maxh2cdata: 0x400000 });
  });

  it('pauseReading holds input back until resumeReading', async () => {
    const h = new Recorder();
    const { conn, client } = await controllerPair(h, { rxBuffer: Buffer.allocUnsafeSlow(16 * 1024) });
    conn.pauseReading();
    expect(conn.readingPaused).toBe(true);
    client.write(ICREQ);
    await new Promise((r) => setTimeout(r, 60));
    expect(h.pdus).toHaveLength(0);
    conn.resumeReading();
    const peer = new Collector(client);
    await peer.waitFor(() => h.pdus.length === 1);
    expect(conn.readingPaused).toBe(false);
  });

  it('a data digest mismatch reaches dataEnd with digestOk false; the connection stays', async () => {
    const h = new Recorder();
    const digestErrors = h.digestErrors;
    const { conn, client, peer } = await controllerPair(h);
    h.pduHook = (pdu): void => {
      if (pdu.type === PduType.IC_REQ) conn.setFraming(false, true);
    };
    const good = B.capsuleCmd({ sqe: SQE, data: B.pattern(64) }, { ddgst: true });
    good.writeUInt8((good.at(-1) as number) ^ 0xff, good.length - 1);
    client.write(Buffer.concat([B.icReq({ dgst: 2 }), good]));
    await peer.waitFor(() => digestErrors.length === 1);
    expect(h.fatals).toEqual([]);
    expect(conn.state).toBe('open');
  });
});

describe('direct writes (rxBuffer connections write batches to the descriptor)', () => {
  const c2h = (cccid: number, data: Buffer): Pdu => ({ type: PduType.C2H_DATA, cccid, datao: 0, last: true, success: false, data: [data] });

  it('a batch leaves without a stream write when the stream holds nothing; the peer gets exactly the encoded bytes', async () => {
    const h = new Recorder();
    const { conn, accepted, peer } = await controllerPair(h, { rxBuffer: Buffer.allocUnsafeSlow(16 * 1024) });
    // adoptWithUserBuffer moved the handle to a new Socket; spy on every socket's write.
    const write = vi.spyOn(net.Socket.prototype, 'write');
    const a = B.pattern(5000, 3);
    conn.send(c2h(1, a));
    conn.sendCompletion(cqeOnly(1, 1), 1, false);
    await tick();
    expect(write.mock.contexts.filter((s) => s !== peer.socket && s !== accepted)).toHaveLength(0);
    expect(h.flushes).toEqual([[5000 + 24 + 24, 0]]);
    const expected = Buffer.concat([B.c2hData({ cccid: 1, datao: 0, last: true, data: a }), B.capsuleResp({ cqe: B.cqe({ cid: 1, sqhd: 1, sqid: 1 }) })]);
    const got = await peer.bytesAtLeast(expected.length);
    expect(got.toString('hex')).toBe(expected.toString('hex'));
  });

  it('what the kernel does not take goes through the stream, and later batches queue behind it in order', async () => {
    const h = new Recorder();
    const { conn, peer, client } = await controllerPair(h, { rxBuffer: Buffer.allocUnsafeSlow(16 * 1024) });
    client.pause(); // the peer stops reading: the socket buffers fill up
    const write = vi.spyOn(net.Socket.prototype, 'write');
    const expected: Buffer[] = [];
    const piece = 1024 * 1024;
    let n = 0;
    // Batches of 1 MiB (header + a payload view: a writev) until one is left partly unsent, then three more.
    for (let after = -1; after < 3 && n < 256; n++) {
      const data = B.pattern(piece, n);
      conn.send(c2h(n, data));
      expected.push(B.c2hData({ cccid: n, datao: 0, last: true, data }));
      await tick();
      if (after >= 0) after++;
      else if ((h.flushes.at(-1) as [number, number])[1] > 0) after = 0;
    }
    expect(n).toBeLessThan(256);
    // Direct while the stream was empty; the stream once the kernel stopped taking everything.
    expect(h.flushes[0]).toEqual([piece + 24, 0]);
    expect(h.flushes.filter((f) => f[1] > 0).length).toBeGreaterThanOrEqual(4);
    expect(write.mock.calls.length).toBeGreaterThan(0);
    client.resume();
    const want = Buffer.concat(expected);
    const got = await peer.bytesAtLeast(want.length);
    expect(got.length).toBe(want.length);
    expect(got.equals(want)).toBe(true);
    expect(conn.bytesOut).toBe(want.length);
    // Drained: the next batch is direct again.
    await peer.waitFor(() => conn.writableLength === 0);
    write.mockClear();
    conn.sendCompletion(cqeOnly(9, 2), 1, false);
    await tick();
    expect(write.mock.calls.length).toBe(0);
    const last = await peer.bytesAtLeast(want.length + 24);
    expect(last.subarray(want.length).toString('hex')).toBe(B.capsuleResp({ cqe: B.cqe({ cid: 9, sqhd: 2, sqid: 1 }) }).toString('hex'));
  });

  it('a peer that reset: the failed direct write falls back to the stream, which reports the error and closes', async () => {
    const h = new Recorder();
    const { conn, client } = await controllerPair(h, { rxBuffer: Buffer.allocUnsafeSlow(16 * 1024) });
    client.resetAndDestroy();
    await new Promise((r) => setTimeout(r, 20));
    for (let i = 0; i < 3 && conn.state === 'open'; i++) {
      conn.sendCompletion(cqeOnly(i, 1), 1, false);
      await tick();
    }
    await h.closed;
    expect(conn.state).toBe('closed');
    expect(h.internal).toEqual([]);
  });
});
