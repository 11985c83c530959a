import net from 'node:net';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { FaultProxy, type ProxyFaults } from './proxy.js';

interface Upstream {
  server: net.Server;
  port: number;
  received: Buffer[];
  sockets: net.Socket[];
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Upstream that records what it receives and optionally echoes it. */
async function startUpstream(echo: boolean): Promise<Upstream> {
  const up: Upstream = { server: net.createServer(), port: 0, received: [], sockets: [] };
  up.server.on('connection', (s) => {
    up.sockets.push(s);
    s.on('data', (b: Buffer) => {
      up.received.push(Buffer.from(b));
      if (echo) s.write(b);
    });
    s.on('error', () => undefined);
  });
  up.server.listen(0, '127.0.0.1');
  await once(up.server, 'listening');
  up.port = (up.server.address() as net.AddressInfo).port;
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const s of up.sockets) s.destroy();
        up.server.close(() => {
          resolve();
        });
      }),
  );
  return up;
}

async function startProxy(up: Upstream, faults?: ProxyFaults): Promise<FaultProxy> {
  const p = await FaultProxy.start({ upstreamHost: '127.0.0.1', upstreamPort: up.port, ...(faults === undefined ? {} : { faults }) });
  cleanups.push(() => p.close());
  return p;
}

async function connect(port: number): Promise<net.Socket> {
  const s = net.connect({ host: '127.0.0.1', port });
  s.on('error', () => undefined);
  await once(s, 'connect');
  cleanups.push(() => {
    s.destroy();
  });
  return s;
}

/** Reads until `n` bytes arrived or the socket closed. */
function readBytes(s: net.Socket, n: number): Promise<Buffer> {
  return new Promise((resolve) => {
    const parts: Buffer[] = [];
    let got = 0;
    const done = (): void => {
      s.off('data', onData);
      resolve(Buffer.concat(parts));
    };
    const onData = (b: Buffer): void => {
      parts.push(b);
      got += b.length;
      if (got >= n) done();
    };
    s.on('data', onData);
    s.once('close', done);
  });
}

function pattern(n: number, seed = 1): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
}

describe('FaultProxy', () => {
  it('relays both directions unchanged and counts bytes per direction', async () => {
    const up = await startUpstream(true);
    const proxy = await startProxy(up);
    const s = await connect(proxy.port);
    const data = pattern(100_000);
    const reply = readBytes(s, data.length);
    s.write(data);
    expect((await reply).equals(data)).toBe(true);
    expect(proxy.stats()).toMatchObject({ accepted: 1, active: 1, bytes: { toServer: 100_000, toClient: 100_000 } });
    expect(proxy.connections()[0]?.bytes).toEqual({ toServer: 100_000, toClient: 100_000 });
  });

  it('adds the configured one-way delay in each direction', async () => {
    const up = await startUpstream(true);
    const proxy = await startProxy(up, { toServer: { delayMs: 40 }, toClient: { delayMs: 40 } });
    const s = await connect(proxy.port);
    const t0 = performance.now();
    const reply = readBytes(s, 5);
    s.write('hello');
    expect((await reply).toString()).toBe('hello');
    const rtt = performance.now() - t0;
    expect(rtt).toBeGreaterThanOrEqual(78);
  });

  it('stalls from the configured offset on, once per connection, keeping the bytes before it prompt and the order intact', async () => {
    const up = await startUpstream(true);
    const proxy = await startProxy(up, { toClient: { stallAtOffset: 4, stallMs: 120 } });
    const s = await connect(proxy.port);
    const arrivals: { at: number; bytes: string }[] = [];
    const t0 = performance.now();
    s.on('data', (b: Buffer) => arrivals.push({ at: performance.now() - t0, bytes: b.toString() }));
    // One upstream chunk that straddles the offset: its first 4 bytes pass, the rest waits.
    s.write('abcdefgh');
    while (arrivals.map((a) => a.bytes).join('').length < 8) await new Promise((r) => setTimeout(r, 5));
    expect(arrivals.map((a) => a.bytes).join('')).toBe('abcdefgh');
    expect(arrivals[0]?.bytes).toBe('abcd');
    expect(arrivals[0]?.at).toBeLessThan(100);
    expect(arrivals[arrivals.length - 1]?.at).toBeGreaterThanOrEqual(115);
    // Once per connection: later bytes pass without the stall.
    const t1 = performance.now();
    const reply = readBytes(s, 2);
    s.write('ij');
    expect((await reply).toString()).toBe('ij');
    expect(performance.now() - t1).toBeLessThan(100);
  });

  it('caps bandwidth: 200 KB at 1 MB/s takes about 200 ms', async () => {
    const up = await startUpstream(false);
    const proxy = await startProxy(up, { toServer: { bytesPerSec: 1_000_000 } });
    const s = await connect(proxy.port);
    const t0 = performance.now();
    s.write(pattern(200_000));
    while (up.received.reduce((n, b) => n + b.length, 0) < 200_000) await new Promise((r) => setTimeout(r, 5));
    const ms = performance.now() - t0;
    expect(ms).toBeGreaterThanOrEqual(180);
    expect(ms).toBeLessThan(2000);
  });

  it('drops the connection after exactly N bytes in one direction', async () => {
    const up = await startUpstream(false);
    const proxy = await startProxy(up, { toServer: { dropAfterBytes: 1000 } });
    const s = await connect(proxy.port);
    const closed = once(s, 'close');
    s.write(pattern(5000));
    await closed;
    await new Promise((r) => setTimeout(r, 20));
    expect(Buffer.concat(up.received).equals(pattern(5000).subarray(0, 1000))).toBe(true);
    expect(proxy.stats().active).toBe(0);
  });

  it('corrupts exactly one byte at the configured offset of the toClient direction', async () => {
    const up = await startUpstream(true);
    const proxy = await startProxy(up, { toClient: { corruptAtOffset: 3000, corruptXor: 0x5a } });
    const s = await connect(proxy.port);
    const data = pattern(10_000);
    const reply = readBytes(s, data.length);
    // Several writes so the offset may fall inside any chunk.
    for (let off = 0; off < data.length; off += 1500) s.write(data.subarray(off, off + 1500));
    const got = await reply;
    const diffs: number[] = [];
    for (let i = 0; i < got.length; i++) if (got[i] !== data[i]) diffs.push(i);
    expect(diffs).toEqual([3000]);
    expect((got[3000] as number) ^ (data[3000] as number)).toBe(0x5a);
    expect(Buffer.concat(up.received).equals(data)).toBe(true);
    expect(proxy.connections()[0]?.corrupted).toEqual({ toServer: false, toClient: true });
  });

  it('per-connection faults override the defaults for that connection only', async () => {
    const up = await startUpstream(true);
    const proxy = await startProxy(up);
    const a = await connect(proxy.port);
    const b = await connect(proxy.port);
    await new Promise((r) => setTimeout(r, 10));
    proxy.setFaults({ toClient: { corruptAtOffset: 0 } }, 1);
    const ra = readBytes(a, 4);
    const rb = readBytes(b, 4);
    a.write('abcd');
    b.write('abcd');
    expect((await ra).toString()).toBe('abcd');
    expect((await rb).toString()).not.toBe('abcd');
  });

  it('pause holds data and resume releases it intact', async () => {
    const up = await startUpstream(false);
    const proxy = await startProxy(up);
    const s = await connect(proxy.port);
    proxy.pause();
    s.write(pattern(3000));
    await new Promise((r) => setTimeout(r, 60));
    expect(up.received.length).toBe(0);
    proxy.resume();
    while (up.received.reduce((n, x) => n + x.length, 0) < 3000) await new Promise((r) => setTimeout(r, 5));
    expect(Buffer.concat(up.received).equals(pattern(3000))).toBe(true);
  });

  it('relays a FIN after delayed data, and close() destroys live connections and stops listening', async () => {
    const up = await startUpstream(true);
    const proxy = await startProxy(up, { toClient: { delayMs: 30 } });
    const s = await connect(proxy.port);
    const reply = readBytes(s, 4);
    s.write('ping');
    expect((await reply).toString()).toBe('ping');
    const s2 = await connect(proxy.port);
    const closed = once(s2, 'close');
    const port = proxy.port;
    await proxy.close();
    await closed;
    expect(proxy.stats().active).toBe(0);
    const err = await new Promise<Error>((resolve) => {
      const c = net.connect({ host: '127.0.0.1', port });
      c.on('error', resolve);
    });
    expect((err as NodeJS.ErrnoException).code).toBe('ECONNREFUSED');
  });
});
