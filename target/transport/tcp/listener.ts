// TCP listener for one port (IPv4 or IPv6): accepts connections and gives each its own TargetTcpQueue.
import { Buffer } from 'node:buffer';
import net from 'node:net';
import type { CorePort, TargetCore } from '../../core/index.js';
import { TargetTcpQueue, type TcpQueueOptions } from './queue.js';
import { acceptTls, type TlsAccepted, type TlsKeyStore } from './tls.js';

/** One read's maximum: a 128 KiB write with its headers fits, several 4 KiB capsules per read at depth. */
const RX_BUFFER = 256 * 1024;

export interface BoundAddress {
  addr: string;
  port: number;
}

/** TLS of one port (TP 8011): its mode, the host keys, the handshake timeout. */
export interface TcpListenerTls {
  mode: 'allowed' | 'required';
  keys: TlsKeyStore;
  handshakeTimeoutMs: number;
  /** Secure channel concatenation (TP 8018) offered on this port. */
  concat?: boolean;
  /** OpenSSL's trace of each handshake on stderr (TlsAcceptOptions.trace). */
  trace?: boolean;
}

export class TcpListener {
  readonly #server: net.Server;
  readonly queues = new Set<TargetTcpQueue>();
  #bound: BoundAddress | undefined;
  #dropsLogged = 0;
  /** Receive buffer of all this port's connections (reads run one at a time on the event loop). */
  readonly #rx = Buffer.allocUnsafeSlow(RX_BUFFER);

  constructor(
    readonly target: TargetCore,
    readonly port: CorePort,
    readonly opts: TcpQueueOptions,
    readonly tls?: TcpListenerTls,
  ) {
    // Paused on accept: the connection core moves the handle to a Socket that reads into the shared #rx
    // (connection/user-buffer-socket.ts).
    this.#server = net.createServer({ noDelay: true, pauseOnConnect: true }, (socket) => this.#accept(socket));
    // An error before the socket is bound (EADDRINUSE, EACCES, EADDRNOTAVAIL) rejects listen(), and the caller reports
    // it (the CLI in one stderr line); later ones are logged by code and message: a stack says nothing about a socket.
    this.#server.on('error', (err: NodeJS.ErrnoException) => {
      if (this.#bound === undefined) return;
      target.logger.error({ port: port.id, code: err.code, error: err.message }, 'listener error');
    });
    // Connection cap per port: Node closes the accepted handle before any JS socket exists (cheap under a flood)
    // and reports it with 'drop'; the count includes connections still before ICReq/Connect.
    const cap = port.maxConnections;
    this.#server.maxConnections = cap;
    this.#server.on('drop', (d?: net.DropArgument) => {
      target.stats.connectionsRejected++;
      this.#dropsLogged++;
      // One line per drop would let a flood fill the log: the port's host-log limit (target/core/host-log.ts).
      if (target.portHostLog(port).allow('connection_limit')) {
        target.logger.warn(
          { port: port.id, maxConnections: cap, remote: d === undefined ? undefined : `${d.remoteAddress ?? '?'}:${d.remotePort ?? 0}`, dropped: this.#dropsLogged },
          `port ${port.id}: connection limit ${cap} reached, closing new connection`,
        );
      }
    });
  }

  get bound(): BoundAddress | undefined {
    return this.#bound;
  }

  listen(): Promise<BoundAddress> {
    const cfg = this.port.config;
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(err);
      this.#server.once('error', onError);
      const opts: net.ListenOptions = { host: cfg.addr, port: cfg.port };
      if (cfg.addr === '::') opts.ipv6Only = cfg.family === 'ipv6';
      this.#server.listen(opts, () => {
        this.#server.off('error', onError);
        const a = this.#server.address() as net.AddressInfo;
        this.#bound = { addr: a.address, port: a.port };
        this.target.logger.info({ port: this.port.id, addr: a.address, tcpPort: a.port }, 'listening');
        resolve(this.#bound);
      });
    });
  }

  #accept(socket: net.Socket): void {
    this.target.stats.connectionsAccepted++;
    this.target.stats.connectionsActive++;
    const t = this.tls;
    if (t !== undefined) {
      acceptTls(
        socket,
        { ...t, portId: this.port.id, logger: this.target.logger, hostLog: this.target.portHostLog(this.port) },
        (a) => this.#startQueue(a),
        () => this.target.stats.connectionsActive--,
      );
      return;
    }
    this.#startQueue({ socket, tls: false }, true);
  }

  /** `fresh`: nothing was read from the socket yet, so libuv can read into the shared buffer (#rx). */
  #startQueue(a: TlsAccepted, fresh = false): void {
    const opts: TcpQueueOptions = fresh
      ? { ...this.opts, rxBuffer: this.#rx }
      : { ...this.opts, tls: a.tls, ...(a.tlsPsk !== undefined ? { tlsPsk: a.tlsPsk } : {}), ...(a.concatOnly === true ? { concatOnly: true } : {}) };
    const q = new TargetTcpQueue(this.target, this.port, a.socket, opts, (closed) => {
      this.target.stats.connectionsActive--;
      this.queues.delete(closed);
    });
    this.queues.add(q);
    if (!fresh) a.socket.resume();
  }

  /** Stop accepting; with `closeConnections` also drop every connection of this port. */
  async close(closeConnections: boolean): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    if (closeConnections) for (const q of [...this.queues]) q.close('port removed');
    await closed;
  }
}
