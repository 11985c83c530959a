// Re-wrap an accepted connection so libuv reads into one caller-owned buffer (docs/performance.md, fourth pass): Node
// 20 exposes `onread` only on net.connect, but the net.Socket constructor honours it together with `handle`
// (lib/net.js copies options.onread into the socket, and initSocketHandle calls handle.useUserBuffer), so a
// connection accepted with `pauseOnConnect` can be moved to a new Socket before anything was read from it.
import type { Buffer } from 'node:buffer';
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
