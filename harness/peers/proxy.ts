// Fault-injecting TCP proxy: listens on 127.0.0.1:0 and relays to an upstream,
// with per-direction delay, bandwidth cap, drop-after-N-bytes, one corrupted byte, and pause/resume.
import net from 'node:net';
import { performance } from 'node:perf_hooks';

/** Faults applied to one direction of every relayed connection. Offsets count bytes of that direction from the connection's start. */
export interface DirectionFaults {
  /** Added one-way latency per chunk (ms). Order is preserved. */
  delayMs?: number;
  /** Bandwidth cap (bytes per second); chunks are released when their last byte would have left the link. */
  bytesPerSec?: number;
  /** Forward exactly this many bytes, then tear the connection down (both sockets destroyed). */
  dropAfterBytes?: number;
  /** XOR the byte at this stream offset with `corruptXor` (one byte, once per connection). */
  corruptAtOffset?: number;
  /** Mask XORed into the corrupted byte (default 0xff; never 0, which would be no corruption). */
  corruptXor?: number;
  /**
   * Hold the byte at this stream offset, and so everything after it, `stallMs` longer than the rest (once per
   * connection): e.g. offset 128 of an NVMe/TCP target's stream is the first PDU after the 128-byte ICResp, the Fabrics
   * Connect response (NVMe-TCP 1.0 §3.6.2.3), so a stall there is Connect latency at a target that has no such knob.
   */
  stallAtOffset?: number;
  stallMs?: number;
}

/** `toServer`: client → upstream (for an NVMe/TCP target upstream, the h2c direction). `toClient`: upstream → client (c2h). */
export type ProxyDirection = 'toServer' | 'toClient';

export interface ProxyFaults {
  toServer?: DirectionFaults;
  toClient?: DirectionFaults;
}

export interface ProxyOptions {
  upstreamHost: string;
  upstreamPort: number;
  /** Listen address (default 127.0.0.1). */
  host?: string;
  /** Listen port (default 0: a free one). */
  port?: number;
  /** Faults for connections accepted from now on (change later with setFaults). */
  faults?: ProxyFaults;
}

export interface ProxyConnectionInfo {
  /** 0-based, in accept order. */
  id: number;
  /** The client's source port: how a test finds the connection of one NVMe/TCP queue (QueueInfo.source). */
  clientPort: number;
  /** Bytes forwarded so far, per direction. */
  bytes: Record<ProxyDirection, number>;
  /** Whether the configured corruption has been applied, per direction. */
  corrupted: Record<ProxyDirection, boolean>;
  closed: boolean;
}

export interface ProxyStats {
  accepted: number;
  active: number;
  bytes: Record<ProxyDirection, number>;
}

const MAX_QUEUED_BYTES = 4 * 1024 * 1024;
/** Bandwidth-capped chunks are split so the link releases data smoothly rather than in 64 KiB bursts. */
const SHAPED_SLICE = 16 * 1024;

interface Queued {
  buf: Buffer;
  readyAt: number;
  /** The source sent FIN: relay it once everything before it has been written. */
  end?: true;
}

/** One direction of one relayed connection: corrupt/drop on arrival, delay/shape in a release queue. */
class Pipe {
  received = 0;
  forwarded = 0;
  corrupted = false;
  stalled = false;
  #queue: Queued[] = [];
  #queuedBytes = 0;
  #linkFreeAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #dropping = false;

  constructor(
    private readonly src: net.Socket,
    private readonly dst: net.Socket,
    private readonly faults: () => DirectionFaults,
    private readonly isPaused: () => boolean,
    private readonly onForward: (n: number) => void,
    private readonly teardown: () => void,
  ) {
    dst.on('drain', () => {
      this.pump();
    });
  }

  push(chunk: Buffer): void {
    if (this.#dropping) return;
    const f = this.faults();
    let buf = chunk;
    const start = this.received;
    this.received += buf.length;
    const at = f.corruptAtOffset;
    if (at !== undefined && !this.corrupted && at >= start && at < this.received) {
      // Copy before mutating: the chunk may be a view into a pooled buffer owned by the socket.
      buf = Buffer.from(buf);
      const i = at - start;
      const mask = f.corruptXor === undefined || (f.corruptXor & 0xff) === 0 ? 0xff : f.corruptXor & 0xff;
      buf[i] = (buf[i] as number) ^ mask;
      this.corrupted = true;
    }
    const dropAt = f.dropAfterBytes;
    if (dropAt !== undefined && this.received >= dropAt) {
      buf = buf.subarray(0, Math.max(0, dropAt - start));
      this.#dropping = true;
    }
    const now = performance.now();
    const delay = f.delayMs ?? 0;
    const stallAt = f.stallAtOffset;
    if (stallAt !== undefined && !this.stalled && stallAt >= start && stallAt < start + buf.length) {
      this.stalled = true;
      const i = stallAt - start;
      this.#send(buf.subarray(0, i), now + delay, f.bytesPerSec);
      this.#send(buf.subarray(i), now + delay + (f.stallMs ?? 0), f.bytesPerSec);
    } else {
      this.#send(buf, now + delay, f.bytesPerSec);
    }
    if (this.#dropping && buf.length === 0) this.#enqueue(buf, now + delay);
    this.pump();
  }

  /** Queues `buf` for release at `at`, or, under a bandwidth cap, in slices as the link frees up from `at` on. */
  #send(buf: Buffer, at: number, bps: number | undefined): void {
    if (buf.length === 0) return;
    if (bps === undefined || bps <= 0) {
      this.#enqueue(buf, at);
      return;
    }
    for (let off = 0; off < buf.length; off += SHAPED_SLICE) {
      const slice = buf.subarray(off, Math.min(buf.length, off + SHAPED_SLICE));
      const startTx = Math.max(at, this.#linkFreeAt);
      this.#linkFreeAt = startTx + (slice.length * 1000) / bps;
      this.#enqueue(slice, this.#linkFreeAt);
    }
  }

  /** The source half-closed: relay the FIN in order, after the queued bytes. */
  end(): void {
    if (this.#dropping) return;
    this.#queue.push({ buf: Buffer.alloc(0), readyAt: Math.max(performance.now() + (this.faults().delayMs ?? 0), this.#linkFreeAt), end: true });
    this.pump();
  }

  #enqueue(buf: Buffer, readyAt: number): void {
    this.#queue.push({ buf, readyAt });
    this.#queuedBytes += buf.length;
    if (this.#queuedBytes > MAX_QUEUED_BYTES && !this.src.isPaused()) this.src.pause();
  }

  pump(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    if (this.isPaused() || this.dst.destroyed) return;
    const now = performance.now();
    while (this.#queue.length > 0) {
      const head = this.#queue[0] as Queued;
      if (head.readyAt > now + 0.05) {
        this.#timer = setTimeout(() => {
          this.#timer = undefined;
          this.pump();
        }, Math.max(0, Math.ceil(head.readyAt - now)));
        return;
      }
      this.#queue.shift();
      this.#queuedBytes -= head.buf.length;
      if (head.end === true) {
        this.dst.end();
        continue;
      }
      if (head.buf.length > 0) {
        this.forwarded += head.buf.length;
        this.onForward(head.buf.length);
        const ok = this.dst.write(head.buf);
        if (this.#dropping && this.#queue.length === 0) {
          this.dst.end(() => {
            this.teardown();
          });
          return;
        }
        if (!ok) return;
      } else if (this.#dropping && this.#queue.length === 0) {
        this.teardown();
        return;
      }
    }
    if (this.#queuedBytes <= MAX_QUEUED_BYTES / 2 && this.src.isPaused() && !this.#dropping) this.src.resume();
  }

  dispose(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#queue = [];
    this.#queuedBytes = 0;
  }
}

interface Conn {
  id: number;
  client: net.Socket;
  upstream: net.Socket;
  pipes: Record<ProxyDirection, Pipe>;
  faults: ProxyFaults | undefined;
  paused: boolean;
  closed: boolean;
}

/** A running proxy. Always `close()` it (tests: in afterEach). */
export class FaultProxy {
  readonly #server: net.Server;
  readonly #opts: ProxyOptions;
  #faults: ProxyFaults;
  #paused = false;
  #conns: Conn[] = [];
  #bytes: Record<ProxyDirection, number> = { toServer: 0, toClient: 0 };
  #closed = false;

  private constructor(server: net.Server, opts: ProxyOptions) {
    this.#server = server;
    this.#opts = opts;
    this.#faults = opts.faults ?? {};
  }

  /** Starts listening; resolves once the port is bound. */
  static async start(opts: ProxyOptions): Promise<FaultProxy> {
    // Half-open sockets let a FIN travel through the delay queue behind the data sent before it.
    const server = net.createServer({ allowHalfOpen: true });
    const proxy = new FaultProxy(server, opts);
    server.on('connection', (s) => {
      proxy.#accept(s);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    return proxy;
  }

  get address(): { host: string; port: number } {
    const a = this.#server.address();
    if (a === null || typeof a === 'string') throw new Error('proxy is not listening');
    return { host: a.address, port: a.port };
  }

  get port(): number {
    return this.address.port;
  }

  /** Replace the faults of new connections, or (with `connectionId`) of one live connection. */
  setFaults(faults: ProxyFaults, connectionId?: number): void {
    if (connectionId === undefined) {
      this.#faults = faults;
      return;
    }
    const c = this.#conns[connectionId];
    if (c === undefined) throw new Error(`proxy: no connection ${connectionId}`);
    c.faults = faults;
  }

  /** Hold every byte (or one connection's) until resume(); nothing is lost. */
  pause(connectionId?: number): void {
    if (connectionId === undefined) this.#paused = true;
    else this.#conn(connectionId).paused = true;
  }

  resume(connectionId?: number): void {
    if (connectionId === undefined) this.#paused = false;
    else this.#conn(connectionId).paused = false;
    for (const c of this.#conns) {
      c.pipes.toServer.pump();
      c.pipes.toClient.pump();
    }
  }

  /** Destroy one live connection (both sockets), as a network failure would. */
  dropConnection(connectionId: number): void {
    this.#teardown(this.#conn(connectionId));
  }

  connections(): ProxyConnectionInfo[] {
    return this.#conns.map((c) => ({
      id: c.id,
      clientPort: c.client.remotePort ?? 0,
      bytes: { toServer: c.pipes.toServer.forwarded, toClient: c.pipes.toClient.forwarded },
      corrupted: { toServer: c.pipes.toServer.corrupted, toClient: c.pipes.toClient.corrupted },
      closed: c.closed,
    }));
  }

  stats(): ProxyStats {
    return { accepted: this.#conns.length, active: this.#conns.filter((c) => !c.closed).length, bytes: { ...this.#bytes } };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const c of this.#conns) this.#teardown(c);
    await new Promise<void>((resolve) => {
      this.#server.close(() => {
        resolve();
      });
    });
  }

  #conn(id: number): Conn {
    const c = this.#conns[id];
    if (c === undefined) throw new Error(`proxy: no connection ${id}`);
    return c;
  }

  #accept(client: net.Socket): void {
    if (this.#closed) {
      client.destroy();
      return;
    }
    client.setNoDelay(true);
    client.pause();
    const upstream = net.connect({ host: this.#opts.upstreamHost, port: this.#opts.upstreamPort, allowHalfOpen: true });
    upstream.setNoDelay(true);
    const id = this.#conns.length;
    const conn = {
      id,
      client,
      upstream,
      faults: undefined,
      paused: false,
      closed: false,
    } as Omit<Conn, 'pipes'> as Conn;
    const faultsOf = (d: ProxyDirection) => (): DirectionFaults => (conn.faults ?? this.#faults)[d] ?? {};
    const paused = (): boolean => this.#paused || conn.paused;
    const teardown = (): void => {
      this.#teardown(conn);
    };
    conn.pipes = {
      toServer: new Pipe(client, upstream, faultsOf('toServer'), paused, (n) => (this.#bytes.toServer += n), teardown),
      toClient: new Pipe(upstream, client, faultsOf('toClient'), paused, (n) => (this.#bytes.toClient += n), teardown),
    };
    this.#conns.push(conn);
    client.on('data', (b: Buffer) => {
      conn.pipes.toServer.push(b);
    });
    upstream.on('data', (b: Buffer) => {
      conn.pipes.toClient.push(b);
    });
    upstream.once('connect', () => {
      client.resume();
    });
    // A FIN on one side is relayed as a FIN after the data queued before it; an error (RST) tears both down.
    client.on('end', () => {
      conn.pipes.toServer.end();
    });
    upstream.on('end', () => {
      conn.pipes.toClient.end();
    });
    let closedSockets = 0;
    for (const s of [client, upstream]) {
      s.on('error', teardown);
      s.on('close', () => {
        if (++closedSockets === 2) teardown();
      });
    }
  }

  #teardown(c: Conn): void {
    if (c.closed) return;
    c.closed = true;
    c.pipes.toServer.dispose();
    c.pipes.toClient.dispose();
    c.client.destroy();
    c.upstream.destroy();
  }
}

/** Convenience: `await startProxy({ upstreamHost, upstreamPort, faults })`. */
export function startProxy(opts: ProxyOptions): Promise<FaultProxy> {
  return FaultProxy.start(opts);
}
