// Re-wrap an accepted connection so libuv reads into one caller-owned buffer (docs/performance.md, fourth pass): Node
// 20 exposes `onread` only on net.connect, but the net.Socket constructor honours it together with `handle`
// (lib/net.js copies options.onread into the socket, and initSocketHandle calls handle.useUserBuffer), so a
// connection accepted with `pauseOnConnect` can be moved to a new Socket before anything was read from it.
import { Buffer } from 'node:buffer';
import net from 'node:net';

/** Socket constructor options as lib/net.js reads them; @types/node omits `handle` and `onread` here. */
interface HandleSocketOpts extends net.SocketConstructorOpts {
  handle: unknown;
  onread: net.OnReadOpts;
}

interface NetInternals {
  _handle: unknown;
  server: net.Server | null;
  _server: net.Server | null;
}

/**
 * The accepted (paused, never read) `accepted` socket's handle inside a new Socket reading into `buffer`; `callback`
 * gets each read (`n` bytes at the start of `buffer`) and must not keep views of it. The old Socket object is left
 * without a handle: it has no listeners and is never destroyed, so the server's connection count
 * (`_connections`, decremented by the new socket's destroy through `_server`) stays exact.
 */
export function adoptWithUserBuffer(accepted: net.Socket, buffer: Buffer, callback: (n: number, buf: Buffer) => boolean): net.Socket {
  const old = accepted as unknown as NetInternals;
  const handle = old._handle;
  const opts: HandleSocketOpts = {
    handle,
    readable: true,
    writable: true,
    onread: { buffer, callback: (n: number, buf: Uint8Array) => callback(n, buf as Buffer) },
  };
  const s = new net.Socket(opts);
  const si = s as unknown as NetInternals;
  si.server = old.server;
  si._server = old._server;
  old._handle = null;
  old._server = null;
  old.server = null;
  return s;
}

interface ReadingHandle {
  reading?: boolean;
  readStop?(): number;
}

function stopReading(s: net.Socket): void {
  const handle = (s as unknown as NetInternals)._handle as ReadingHandle | null;
  if (handle !== null && handle.reading === true) {
    handle.readStop?.();
    handle.reading = false;
  }
}

/**
 * adoptWithUserBuffer for a socket Node made from a handle received over IPC: such a socket starts reading at once
 * (lib/net.js calls read(0)), so the handle is stopped first and anything the old Socket already buffered is handed
 * back as `buffered`, to be handled before the first read into `buffer`.
 */
export function adoptReceivedWithUserBuffer(received: net.Socket, buffer: Buffer, callback: (n: number, buf: Buffer) => boolean): { socket: net.Socket; buffered: Buffer | undefined } {
  stopReading(received);
  const parts: Buffer[] = [];
  if (received.readableLength > 0) {
    // read() may start the handle again (Socket._read): stop it once more after draining.
    for (let b = received.read() as Buffer | null; b !== null; b = received.read() as Buffer | null) parts.push(b);
    stopReading(received);
  }
  received.removeAllListeners();
  const socket = adoptWithUserBuffer(received, buffer, callback);
  return { socket, buffered: parts.length === 0 ? undefined : Buffer.concat(parts) };
}

interface ServerInternals {
  _connections: number;
}

/**
 * Before a socket's handle is sent to another process (child_process send): take it out of its server's connection
 * count now, since no close event will ever reach this process for it, and clear its server link so Node does not
 * track it per worker (a server.close() would then wait for the worker to report its sockets closed).
 */
export function releaseFromServer(socket: net.Socket): void {
  const si = socket as unknown as NetInternals;
  const server = si._server as (net.Server & ServerInternals) | null;
  if (server !== null && server._connections > 0) server._connections--;
  si.server = null;
  si._server = null;
}
