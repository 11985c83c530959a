// TLS 1.3 on the accept path of a TCP port (NVMe/TCP Transport 1.0 with TP 8011 §3.6.1): per-host configured PSKs,
// identity lookup by the ClientHello's PSK identity, a handshake timeout, and the 'allowed' mode's look at the first
// byte (a TLS handshake record vs a cleartext ICReq, as nvmet's "allowed" ports do). The queue above sees a plain
// stream either way: a TLSSocket is a net.Socket.
import { Buffer } from 'node:buffer';
import type net from 'node:net';
import tls from 'node:tls';
import type { Logger } from 'pino';
import {
  DEFAULT_HKDF_ENCODING,
  SHA384_UNSUPPORTED,
  TlsIdentityError,
  deriveTlsPsk,
  parseTlsIdentity,
  type HkdfLabelEncoding,
  type TlsConfiguredKey,
} from '../../../protocol/tls/index.js';

export type TlsPortMode = 'none' | 'allowed' | 'required';
export const TLS_PORT_MODES: readonly TlsPortMode[] = ['none', 'allowed', 'required'];

/** The one suite Node 20 does TLS 1.3 external PSK with (protocol/tls SHA384_UNSUPPORTED). */
export const TLS_PSK_CIPHERS = 'TLS_AES_128_GCM_SHA256';
/** TLS record content type of a handshake record (RFC 8446 §5.1): the first byte of a ClientHello. */
const TLS_HANDSHAKE_RECORD = 0x16;
/** PDU type of an ICReq (NVMe/TCP 1.0 §3.6.2.2): the first byte of a cleartext connection. */
const ICREQ_TYPE = 0x00;

/** Handshake outcomes since start (metrics: nvme_tcp_tls_handshakes_total{result}). */
export interface TlsStats {
  handshakesOk: number;
  handshakesFailed: number;
  /** Failures by reason class ('unknown-identity', 'sha384', 'cleartext-on-required', 'timeout', 'handshake', ...). */
  failuresByReason: Record<string, number>;
}

interface HostKey {
  key: TlsConfiguredKey;
  encoding: HkdfLabelEncoding;
}

/** Configured PSKs by host NQN, and the TLS PSKs derived from them per identity (derived once, on first use). */
export class TlsKeyStore {
  readonly #keys = new Map<string, HostKey>();
  readonly #derived = new Map<string, Buffer>();
  readonly stats: TlsStats = { handshakesOk: 0, handshakesFailed: 0, failuresByReason: {} };

  set(hostnqn: string, key: TlsConfiguredKey, encoding: HkdfLabelEncoding = DEFAULT_HKDF_ENCODING): void {
    this.#keys.set(hostnqn, { key, encoding });
    this.#dropDerived(hostnqn);
  }

  delete(hostnqn: string): boolean {
    this.#dropDerived(hostnqn);
    return this.#keys.delete(hostnqn);
  }

  has(hostnqn: string): boolean {
    return this.#keys.has(hostnqn);
  }

  get size(): number {
    return this.#keys.size;
  }

  #dropDerived(hostnqn: string): void {
    for (const [id, psk] of this.#derived) {
      if (id.includes(` ${hostnqn} `)) {
        psk.fill(0);
        this.#derived.delete(id);
      }
    }
  }

  /**
   * The TLS PSK for a ClientHello identity, or why there is none. Version 1 identities must carry the digest of our
   * retained PSK: the identity is recomputed from the key and compared whole.
   */
  lookup(identity: string): { psk: Buffer; hostnqn: string } | { reason: string; code: string; hostnqn?: string } {
    let id;
    try {
      id = parseTlsIdentity(identity);
    } catch (e) {
      if (e instanceof TlsIdentityError) return { reason: `PSK identity refused: ${e.message}`, code: 'bad-identity' };
      throw e;
    }
    if (id.hash === 2) return { reason: SHA384_UNSUPPORTED, code: 'sha384', hostnqn: id.hostnqn };
    if (id.type === 'G') return { reason: 'generated PSKs (secure channel concatenation) are not supported', code: 'generated-psk', hostnqn: id.hostnqn };
    const cached = this.#derived.get(identity);
    if (cached !== undefined) return { psk: cached, hostnqn: id.hostnqn };
    const hk = this.#keys.get(id.hostnqn);
    if (hk === undefined) return { reason: `no TLS key configured for host ${id.hostnqn}`, code: 'unknown-identity', hostnqn: id.hostnqn };
    if (hk.key.hash !== id.hash) return { reason: `identity hash 0${id.hash} does not match the host's key`, code: 'unknown-identity', hostnqn: id.hostnqn };
    const d = deriveTlsPsk(hk.key, id.hostnqn, id.subnqn, id.version, hk.encoding);
    if (d.identity !== identity) {
      d.psk.fill(0);
      return { reason: 'PSK digest in the identity does not match the host\'s key', code: 'unknown-identity', hostnqn: id.hostnqn };
    }
    this.#derived.set(identity, d.psk);
    return { psk: d.psk, hostnqn: id.hostnqn };
  }

  fail(code: string): void {
    this.stats.handshakesFailed++;
    this.stats.failuresByReason[code] = (this.stats.failuresByReason[code] ?? 0) + 1;
  }
}

export interface TlsAcceptOptions {
  mode: 'allowed' | 'required';
  keys: TlsKeyStore;
  handshakeTimeoutMs: number;
  portId: number;
  logger: Logger;
}

/** What the accept path hands on: the stream to run NVMe/TCP over. */
export interface TlsAccepted {
  socket: net.Socket;
  /** The stream is a TLS session. */
  tls: boolean;
  /** Host NQN of the PSK identity (TLS only). */
  hostnqn?: string;
}

/**
 * Wait for the first byte of an accepted (paused) socket and go on in TLS or, on an 'allowed' port, in cleartext.
 * `ready` is called once with the stream; on any failure the socket is destroyed, a line names peer, port, host and
 * reason, and `ready` is never called. `closed` is called when the socket goes away before `ready`.
 */
export function acceptTls(socket: net.Socket, opts: TlsAcceptOptions, ready: (a: TlsAccepted) => void, closed: () => void): void {
  const peer = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? 0}`;
  let done = false;
  let tlsSocket: tls.TLSSocket | undefined;
  let failure: { reason: string; code: string; hostnqn?: string } | undefined;
  let hostnqn: string | undefined;

  const fail = (code: string, reason: string, host?: string): void => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    opts.keys.fail(code);
    opts.logger.warn({ peer, port: opts.portId, hostnqn: host, reason, code }, `TLS: closing connection from ${peer} on port ${opts.portId}${host !== undefined ? ` (host ${host})` : ''}: ${reason}`);
    tlsSocket?.destroy();
    socket.destroy();
    closed();
  };
  const timer = setTimeout(() => fail('timeout', `TLS handshake not completed within ${opts.handshakeTimeoutMs} ms`, hostnqn), opts.handshakeTimeoutMs);
  timer.unref();

  const onEarlyClose = (): void => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    closed();
  };
  socket.once('close', onEarlyClose);
  socket.on('error', () => undefined);

  socket.once('data', (chunk: Buffer) => {
    socket.pause();
    socket.unshift(chunk);
    const first = chunk[0];
    if (first === ICREQ_TYPE && opts.mode === 'allowed') {
      done = true;
      clearTimeout(timer);
      socket.off('close', onEarlyClose);
      ready({ socket, tls: false });
      return;
    }
    if (first === ICREQ_TYPE) {
      fail('cleartext-on-required', 'cleartext ICReq on a port that requires TLS');
      return;
    }
    if (first !== TLS_HANDSHAKE_RECORD) {
      fail('not-tls', `first byte 0x${(first ?? 0).toString(16).padStart(2, '0')} is neither a TLS handshake record nor an ICReq`);
      return;
    }
    // The unshifted ClientHello is fed to the TLS engine by the TLSSocket constructor (buffered data is "received").
    // @types/node 20 omits pskCallback from TLSSocketOptions; Node 20's TLSSocket honours it (lib/_tls_wrap.js).
    const tlsOpts: tls.TLSSocketOptions & { pskCallback: (s: tls.TLSSocket, identity: string) => Buffer | null } = {
      isServer: true,
      minVersion: 'TLSv1.3',
      maxVersion: 'TLSv1.3',
      ciphers: TLS_PSK_CIPHERS,
      pskCallback: (_s: tls.TLSSocket, identity: string) => {
        const r = opts.keys.lookup(identity);
        if ('psk' in r) {
          hostnqn = r.hostnqn;
          return r.psk;
        }
        failure = r;
        if (r.hostnqn !== undefined) hostnqn = r.hostnqn;
        return null;
      },
    };
    const t = new tls.TLSSocket(socket, tlsOpts);
    tlsSocket = t;
    if (process.env['NVME_TCP_TLS_TRACE'] === '1') t.enableTrace();
    opts.logger.debug({ peer, port: opts.portId, firstChunk: chunk.length, record: chunk.length >= 5 ? chunk.readUInt16BE(3) : -1 }, 'TLS ClientHello');
    t.on('error', (err: Error & { code?: string }) => {
      if (failure !== undefined) return fail(failure.code, failure.reason, failure.hostnqn);
      const msg = err.code ?? err.message;
      // OpenSSL reports a client without a SHA-256 suite (or without a PSK at all) as "no shared cipher".
      if (/NO_SHARED_CIPHER|no shared cipher/i.test(`${msg} ${err.message}`)) {
        return fail('sha384', `no TLS_AES_128_GCM_SHA256 in the ClientHello (${SHA384_UNSUPPORTED})`, hostnqn);
      }
      fail('handshake', `TLS handshake failed: ${err.message}`, hostnqn);
    });
    t.once('secure', () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.off('close', onEarlyClose);
      opts.keys.stats.handshakesOk++;
      opts.logger.debug({ peer, port: opts.portId, hostnqn, cipher: t.getCipher().standardName }, 'TLS handshake done');
      ready({ socket: t, tls: true, ...(hostnqn !== undefined ? { hostnqn } : {}) });
    });
  });
  socket.resume();
}
