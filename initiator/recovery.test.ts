// Error recovery (reconnect, fast_io_fail_tmo, ctrl_loss_tmo), discovery, AENs and multipath against scripted peers.
import { Buffer } from 'node:buffer';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { AenDw0, NvmOpcode, PduType, encodePdu } from '../protocol/index.js';
import type { DiscLogEntry } from '../protocol/index.js';
import { connect, connectAll, createMultipath, discover, type Controller } from './index.js';
import { ConnectionClosedError, TransportFatalError } from './errors.js';
import { FakeController, type FakeOptions } from '../harness/peers/fake-controller.js';
import { cleanupAfterEach } from '../test/fixtures/cleanups.js';

const cleanups = cleanupAfterEach();

async function fake(opts: FakeOptions = {}, nsid = 1): Promise<FakeController> {
  const f = new FakeController(opts);
  f.addNamespace(nsid, 4096);
  await f.listen();
  cleanups.push(() => f.close());
  return f;
}

async function open(f: FakeController, extra: Record<string, unknown> = {}): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: f.port, nqn: f.subnqn, nr_io_queues: 2, duplicate_connect: true, reconnect_delay: 0.05, ...extra });
  cleanups.push(() => c.disconnect());
  return c;
}

const until = (c: Controller, ev: 'reconnected' | 'lost' | 'reconnecting'): Promise<void> => new Promise((r) => c.once(ev, () => r()));

describe('error recovery', () => {
  it('requeues in-flight I/O across a reconnect (new cntlid) and completes it once', async () => {
    let hold = true;
    const f = await fake({ onIo: (sqe) => (sqe.opcode === NvmOpcode.WRITE && hold ? 'drop' : undefined) });
    const c = await open(f);
    const first = c.cntlid;
    const data = Buffer.alloc(4096, 0xab);
    const w = c.namespace(1).write(16, data);
    await new Promise((r) => setTimeout(r, 30));
    hold = false;
    const reconnected = until(c, 'reconnected');
    f.dropAll();
    await reconnected;
    await w;
    expect(c.cntlid).not.toBe(first);
    expect(f.namespaces[0]?.data.subarray(16 * 512, 16 * 512 + 4096).equals(data)).toBe(true);
    expect(c.state).toBe('live');
  });

  it('fails queued I/O after fast_io_fail_tmo while still reconnecting', async () => {
    const f = await fake();
    const c = await open(f, { fast_io_fail_tmo: 0.1, reconnect_delay: 0.05, ctrl_loss_tmo: 30 });
    const port = f.port;
    await f.close();
    const r = c.namespace(1).read(0, 1);
    const err = await r.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectionClosedError);
    expect(String((err as Error).message)).toMatch(/fast_io_fail_tmo|reconnect/);
    // A target coming back on the same port lets the controller recover.
    const back = new FakeController();
    back.addNamespace(1, 4096);
    await new Promise<void>((res) => back.server.listen(port, '127.0.0.1', res));
    back.port = port;
    cleanups.push(() => back.close());
    if (c.state !== 'live') await until(c, 'reconnected');
    expect((await c.namespace(1).read(0, 1)).length).toBe(512);
  });

  // fast_io_fail_tmo is seconds up to 10^9: past setTimeout's 2^31−1 ms, which would fire after 1 ms.
  it.each([(2 ** 31 - 1) / 1000, 2 ** 31 / 1000, (2 ** 32 - 1) / 1000])('a fast_io_fail_tmo of %d s does not fail queued I/O early', async (tmo) => {
    const f = await fake();
    const c = await open(f, { fast_io_fail_tmo: tmo, reconnect_delay: 0.05, ctrl_loss_tmo: 30 });
    const port = f.port;
    await f.close();
    let settled = false;
    const r = c.namespace(1).read(0, 1);
    r.then(
      () => (settled = true),
      () => (settled = true),
    );
    await new Promise((res) => setTimeout(res, 300));
    expect(settled).toBe(false);
    const back = new FakeController();
    back.addNamespace(1, 4096);
    await new Promise<void>((res) => back.server.listen(port, '127.0.0.1', res));
    back.port = port;
    cleanups.push(() => back.close());
    expect((await r).length).toBe(512);
  });

  it('gives up after ctrl_loss_tmo and emits lost', async () => {
    const f = await fake();
    const c = await open(f, { reconnect_delay: 0.05, ctrl_loss_tmo: 0.2 });
    const lost = until(c, 'lost');
    await f.close();
    await lost;
    expect(c.state).toBe('dead');
    await expect(c.namespace(1).read(0, 1)).rejects.toBeInstanceOf(ConnectionClosedError);
  });

  it('answers a target that breaks the protocol with an H2CTermReq and a typed error, not a hang', async () => {
    const srv = net.createServer((s) => {
      s.once('data', () => {
        // ICResp with maxh2cdata 100 (< 4096): the host must refuse it.
        s.write(encodePdu({ type: PduType.IC_RESP, pfv: 0, cpda: 0, dgst: 0, maxh2cdata: 100 })[0] as Buffer);
        s.on('data', (d: Buffer) => {
          if (d[0] === PduType.H2C_TERM_REQ) srv.emit('termreq', d.readUInt16LE(8));
        });
      });
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise<void>((r) => srv.close(() => r())));
    const port = (srv.address() as net.AddressInfo).port;
    const term = new Promise<number>((r) => srv.once('termreq', r));
    const err = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: 'nqn.2024-01.io.test:bad', nr_io_queues: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransportFatalError);
    expect(await term).toBe(1);
  });

  it('treats a C2HTermReq as fatal and recovers', async () => {
    let once = true;
    const f = await fake({
      onIo: (sqe) => {
        if (sqe.opcode === NvmOpcode.READ && once) {
          once = false;
          return 'close';
        }
        return undefined;
      },
    });
    const c = await open(f);
    const rec = until(c, 'reconnected');
    const r = await c.namespace(1).read(0, 1);
    await rec;
    expect(r.length).toBe(512);
  });
});

describe('discovery', () => {
  const entry = (port: number, subtype: number, subnqn: string): DiscLogEntry => ({
    trtype: 3,
    adrfam: 1,
    subtype,
    treq: 4,
    portid: 1,
    cntlid: 0xffff,
    asqsz: 32,
    eflags: 0,
    trsvcid: String(port),
    subnqn,
    traddr: '127.0.0.1',
    tsas: { sectype: 0 },
  });

  it('reads header then entries and re-reads when GENCTR changes', async () => {
    const f = await fake({ genctrBumps: 2 });
    f.opts.discoveryEntries = [entry(f.port, 3, 'nqn.2014-08.org.nvmexpress.discovery'), entry(f.port, 2, f.subnqn), entry(f.port, 2, 'nqn.2024-01.io.test:other')];
    const entries = await discover({ traddr: '127.0.0.1', trsvcid: f.port });
    expect(entries.map((e) => e.subnqn)).toEqual(['nqn.2014-08.org.nvmexpress.discovery', f.subnqn, 'nqn.2024-01.io.test:other']);
    // 3 full passes: 2 invalidated by GENCTR bumps, then a clean one.
    const logReads = f.commands.filter((x) => x.opcode === 0x02).length;
    expect(logReads).toBe(9);
  });

  it('connectAll connects NVM entries, follows referrals and skips the current discovery entry', async () => {
    const sub = await fake();
    const ref = await fake();
    ref.opts.discoveryEntries = [entry(ref.port, 3, 'nqn.2014-08.org.nvmexpress.discovery'), entry(sub.port, 2, sub.subnqn)];
    const top = await fake();
    top.opts.discoveryEntries = [entry(top.port, 3, 'nqn.2014-08.org.nvmexpress.discovery'), entry(ref.port, 1, 'nqn.2014-08.org.nvmexpress.discovery'), entry(top.port, 1, 'nqn.2014-08.org.nvmexpress.discovery')];
    const res = await connectAll({ traddr: '127.0.0.1', trsvcid: top.port, nr_io_queues: 1 });
    for (const c of res.controllers) cleanups.push(() => c.disconnect());
    expect(res.errors).toEqual([]);
    expect(res.controllers.map((c) => c.opts.nqn)).toEqual([sub.subnqn]);
    expect(res.controllers[0]?.opts.disableSqflow).toBe(true);
  });
});

describe('asynchronous events', () => {
  it('keeps an AER posted, rescans on namespace change and re-reads ANA on ANA change', async () => {
    const f = await fake({ ana: true, anaStates: new Map([[1, 1]]) });
    const c = await open(f);
    expect(c.namespace(1).anaState).toBe('optimized');
    f.addNamespace(2, 128);
    const changed = new Promise<number[]>((r) => c.once('namespacesChanged', r));
    f.sendAen(AenDw0.NS_CHANGED);
    expect(await changed).toEqual([2]);
    expect(c.namespaces.map((n) => n.nsid)).toEqual([1, 2]);
    f.opts.anaStates?.set(1, 2);
    const ana = new Promise<Map<number, string>>((r) => c.once('anaChange', r));
    f.sendAen(AenDw0.ANA_CHANGE);
    expect((await ana).get(1)).toBe('non-optimized');
    expect(c.namespace(1).anaState).toBe('non-optimized');
  });
});

describe('multipath', () => {
  async function twoPaths(policy: 'numa' | 'round-robin' | 'queue-depth', states: [number, number] = [1, 1]): Promise<{ a: FakeController; b: FakeController; ca: Controller; cb: Controller }> {
    const a = await fake({ ana: true, subnqn: 'nqn.2024-01.io.test:mp', anaStates: new Map([[1, states[0]]]) });
    const b = await fake({ ana: true, subnqn: 'nqn.2024-01.io.test:mp', anaStates: new Map([[1, states[1]]]) });
    b.namespaces[0] = a.namespaces[0] as (typeof a.namespaces)[0];
    const ca = await open(a, { hostnqn: `nqn.2024-01.io.test:mp-host-${policy}` });
    const cb = await open(b, { hostnqn: `nqn.2024-01.io.test:mp-host-${policy}` });
    return { a, b, ca, cb };
  }

  it('numa uses the first optimized path, round-robin alternates, queue-depth picks the idler path', async () => {
    const { a, b, ca, cb } = await twoPaths('round-robin');
    const rr = createMultipath([ca, cb], 1, { iopolicy: 'round-robin' });
    for (let i = 0; i < 10; i++) await rr.read(0, 1);
    const reads = (f: FakeController): number => f.commands.filter((x) => x.opcode === NvmOpcode.READ && x.qid > 0).length;
    expect([reads(a), reads(b)]).toEqual([5, 5]);
    const numa = createMultipath([ca, cb], 1, { iopolicy: 'numa' });
    for (let i = 0; i < 4; i++) await numa.read(0, 1);
    expect([reads(a), reads(b)]).toEqual([9, 5]);
    const qd = createMultipath([ca, cb], 1, { iopolicy: 'queue-depth' });
    expect(qd.select()?.ctrl).toBe(ca);
  });

  it('prefers optimized over non-optimized and never uses inaccessible paths', async () => {
    const { a, b, ca, cb } = await twoPaths('round-robin', [2, 1]);
    const mp = createMultipath([ca, cb], 1, { iopolicy: 'round-robin' });
    for (let i = 0; i < 6; i++) await mp.read(0, 1);
    expect(a.commands.filter((x) => x.opcode === NvmOpcode.READ && x.qid > 0).length).toBe(0);
    expect(b.commands.filter((x) => x.opcode === NvmOpcode.READ && x.qid > 0).length).toBe(6);
    b.opts.anaStates?.set(1, 3);
    await cb.refreshAna();
    for (let i = 0; i < 3; i++) await mp.read(0, 1);
    expect(a.commands.filter((x) => x.opcode === NvmOpcode.READ && x.qid > 0).length).toBe(3);
  });

  it('fails I/O over to the other path when a path dies mid-I/O, completing each request exactly once', async () => {
    const { a, b, ca, cb } = await twoPaths('round-robin');
    let killed = false;
    a.opts.onIo = (sqe) => {
      if (sqe.opcode === NvmOpcode.WRITE && !killed) {
        killed = true;
        setTimeout(() => a.dropAll(), 5);
        return 'drop';
      }
      return undefined;
    };
    const mp = createMultipath([ca, cb], 1, { iopolicy: 'round-robin' });
    let completions = 0;
    const writes = Array.from({ length: 32 }, (_, i) =>
      mp.write(i * 8, Buffer.alloc(4096, i + 1)).then(() => {
        completions++;
      }),
    );
    await Promise.all(writes);
    expect(completions).toBe(32);
    expect(mp.failovers).toBeGreaterThan(0);
    const data = a.namespaces[0]?.data as Buffer;
    for (let i = 0; i < 32; i++) expect(data.subarray(i * 4096, i * 4096 + 4096).every((x) => x === i + 1)).toBe(true);
    void cb;
  });

  it('retries a path-status error (SCT 3) on another path', async () => {
    const { a, ca, cb } = await twoPaths('numa');
    a.opts.onIo = (sqe) => (sqe.opcode === NvmOpcode.READ ? 0x302 : undefined);
    const mp = createMultipath([ca, cb], 1, { iopolicy: 'numa' });
    expect((await mp.read(0, 1)).length).toBe(512);
    expect(mp.failovers).toBe(1);
  });
});
