// Network faults between our initiator and our target, injected by harness/peers/proxy.ts (issue 6 item 2):
// connections dropped mid-R2T (during H2CData), mid-C2H and during Connect; a stall longer than KATO; corrupted
// payload and header bytes with digests on (always detected) and off (undetectable — a documentation test).
// After every fault the initiator resumes and the target holds exactly the live controller: no leaked
// controllers, queues, connections or requests (TargetService.debugCounts()).
import { describe, expect, it } from 'vitest';
import { FaultProxy, type ProxyFaults } from '../../harness/peers/proxy.js';
import { connect, NvmeStatusError, NvmeTcpError, type Controller } from '../../initiator/index.js';
import { Status } from '../../protocol/index.js';
import type { PortConfig } from '../../target/model/config.js';
import { TargetService, type DebugCounts } from '../../target/service/index.js';
import { pattern } from '../fixtures/data-pattern.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const NQN = 'nqn.2024-01.io.nvme-ts:faults';
const cleanups = cleanupAfterEach();

interface Rig {
  svc: TargetService;
  proxy: FaultProxy;
  ctrl: Controller;
}

async function rig(opts: { conn?: Record<string, unknown>; port?: Partial<PortConfig>; kato?: number } = {}): Promise<Rig> {
  const svc = new TargetService();
  cleanups.push(() => svc.stop());
  const bound = await svc.addPort({ id: 1, addr: '127.0.0.1', port: 0, ...opts.port });
  await svc.addSubsystem({ nqn: NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '16M' } }] });
  const proxy = await FaultProxy.start({ upstreamHost: '127.0.0.1', upstreamPort: bound.port });
  cleanups.push(() => proxy.close());
  const ctrl = await connect({ traddr: '127.0.0.1', trsvcid: proxy.port, nqn: NQN, nr_io_queues: 1, duplicate_connect: true, reconnect_delay: 0.05, ...opts.conn });
  cleanups.push(() => ctrl.disconnect());
  return { svc, proxy, ctrl };
}

/** The proxy connection carrying the initiator's I/O queue 1 (matched by the host's source port). */
function ioConn(r: Rig): { id: number; toServer: number; toClient: number } {
  const q = r.ctrl.queueInfo().find((x) => x.qid === 1);
  if (q === undefined) throw new Error('no I/O queue 1');
  const port = Number(q.source.split(':').pop());
  const c = r.proxy.connections().find((x) => x.clientPort === port && !x.closed);
  if (c === undefined) throw new Error(`no live proxy connection from port ${port}`);
  return { id: c.id, toServer: c.bytes.toServer, toClient: c.bytes.toClient };
}

const once = (c: Controller, ev: 'reconnected' | 'reconnecting'): Promise<void> => new Promise((r) => c.once(ev, () => r()));

/** Wait until the target holds exactly one controller with `queues` queues and nothing else (leak check). */
async function settledCounts(svc: TargetService, queues: number): Promise<DebugCounts> {
  const want = { controllers: 1, queues, connections: queues, unboundConnections: 0, pendingRequests: 0 };
  const end = Date.now() + 5000;
  let d = svc.debugCounts();
  while (Date.now() < end) {
    d = svc.debugCounts();
    if (d.controllers === want.controllers && d.queues === want.queues && d.connections === want.connections && d.unboundConnections === 0 && d.pendingRequests === 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(d).toMatchObject(want);
  return d;
}

function expectOneLiveController(r: Rig): void {
  const list = r.svc.listControllers().filter((c) => c.subnqn === NQN);
  expect(list.map((c) => c.cntlid)).toEqual([r.ctrl.cntlid]);
}

// Sizes on the wire (no digests): CapsuleCmd 72, H2CData/C2HData header 24; with header digest +4 each.
const CAPSULE = 72;
const DATA_HDR = 24;

describe('connection dropped', () => {
  it('mid-R2T (inside H2CData): the write is resubmitted after reconnect and lands intact; the old controller is gone', async () => {
    const r = await rig();
    const first = r.ctrl.cntlid;
    const data = pattern(256 * 1024, 1);
    const c = ioConn(r);
    // Capsule, then the R2T comes back, then H2CData: cut 50,000 bytes into its payload.
    r.proxy.setFaults({ toServer: { dropAfterBytes: c.toServer + CAPSULE + DATA_HDR + 50_000 } }, c.id);
    const reconnected = once(r.ctrl, 'reconnected');
    await r.ctrl.namespace(1).write(64, data);
    await reconnected;
    expect(r.ctrl.cntlid).not.toBe(first);
    expect((await r.ctrl.namespace(1).read(64, data.length / 512)).equals(data)).toBe(true);
    await settledCounts(r.svc, 2);
    expectOneLiveController(r);
  });

  it('mid-C2H: the read is resubmitted and returns the right data', async () => {
    const r = await rig();
    const data = pattern(256 * 1024, 2);
    await r.ctrl.namespace(1).write(0, data);
    const c = ioConn(r);
    r.proxy.setFaults({ toClient: { dropAfterBytes: c.toClient + DATA_HDR + 60_000 } }, c.id);
    const reconnected = once(r.ctrl, 'reconnected');
    const back = await r.ctrl.namespace(1).read(0, data.length / 512);
    await reconnected;
    expect(back.equals(data)).toBe(true);
    await settledCounts(r.svc, 2);
    expectOneLiveController(r);
  });

  it('during the first Connect: connect() fails with a typed error and the target keeps nothing', async () => {
    const svc = new TargetService();
    cleanups.push(() => svc.stop());
    const bound = await svc.addPort({ id: 1, addr: '127.0.0.1', port: 0 });
    await svc.addSubsystem({ nqn: NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] });
    // ICReq is 128 bytes; the Connect capsule is 72 + 1024: cut inside the Connect data.
    const proxy = await FaultProxy.start({ upstreamHost: '127.0.0.1', upstreamPort: bound.port, faults: { toServer: { dropAfterBytes: 128 + CAPSULE + 500 } } });
    cleanups.push(() => proxy.close());
    const err = await connect({ traddr: '127.0.0.1', trsvcid: proxy.port, nqn: NQN, nr_io_queues: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NvmeTcpError);
    const end = Date.now() + 3000;
    while (svc.debugCounts().connections > 0 && Date.now() < end) await new Promise((res) => setTimeout(res, 20));
    expect(svc.debugCounts()).toMatchObject({ controllers: 0, queues: 0, connections: 0, pendingRequests: 0 });
    expect(svc.stats().connects.ok).toBe(0);
  });

  it('during Connect while reconnecting: the host keeps retrying until Connect gets through, then resumes', async () => {
    const r = await rig();
    const reconnecting: number[] = [];
    r.ctrl.on('reconnecting', (n: number) => reconnecting.push(n));
    const cut: ProxyFaults = { toServer: { dropAfterBytes: 128 + CAPSULE + 300 } };
    // Existing connections get their own (empty) faults so the global ones hit only new connections.
    for (const c of r.proxy.connections()) if (!c.closed) r.proxy.setFaults({}, c.id);
    r.proxy.setFaults(cut);
    r.proxy.dropConnection(ioConn(r).id);
    while (reconnecting.length < 3) await once(r.ctrl, 'reconnecting');
    const accepted = r.proxy.stats().accepted;
    r.proxy.setFaults({});
    await once(r.ctrl, 'reconnected');
    // At least two reconnect attempts went through the proxy and were cut inside Connect.
    expect(accepted).toBeGreaterThanOrEqual(4);
    const data = pattern(8192, 3);
    await r.ctrl.namespace(1).write(8, data);
    expect((await r.ctrl.namespace(1).read(8, 16)).equals(data)).toBe(true);
    await settledCounts(r.svc, 2);
    expectOneLiveController(r);
  });
});

describe('stall longer than KATO', () => {
  it('the target expires the controller and frees it; the host reconnects and its held write completes', async () => {
    const r = await rig({ conn: { keep_alive_tmo: 1, admin_timeout: 1.5, io_timeout: 1.5 } });
    const first = r.ctrl.cntlid;
    const expiries = r.svc.stats().katoExpiries;
    r.proxy.pause();
    const data = pattern(4096, 4);
    const w = r.ctrl.namespace(1).write(32, data);
    // KATO is 1 s; the target checks every KATO (TBKAS), so it has expired the controller within ~2 s.
    const end = Date.now() + 4000;
    while (r.svc.stats().katoExpiries === expiries && Date.now() < end) await new Promise((res) => setTimeout(res, 50));
    expect(r.svc.stats().katoExpiries).toBe(expiries + 1);
    expect(r.svc.listControllers().filter((c) => c.subnqn === NQN)).toEqual([]);
    const reconnected = once(r.ctrl, 'reconnected');
    r.proxy.resume();
    await reconnected;
    await w;
    expect(r.ctrl.cntlid).not.toBe(first);
    expect((await r.ctrl.namespace(1).read(32, 8)).equals(data)).toBe(true);
    await settledCounts(r.svc, 2);
    expectOneLiveController(r);
  });
});

describe('corruption with digests on (always detected)', () => {
  const digests = { hdr_digest: true, data_digest: true };
  const HD = 4;

  // max_retries 0 shows the status a corrupted transfer gets; with Linux's default of 5 the controller retries it itself.
  it('C2H payload: the read fails with DATA_XFER_ERROR instead of returning wrong data; a retry reads the truth', async () => {
    const r = await rig({ conn: { ...digests, max_retries: 0 } });
    const data = pattern(65536, 5);
    await r.ctrl.namespace(1).write(0, data);
    const c = ioConn(r);
    r.proxy.setFaults({ toClient: { corruptAtOffset: c.toClient + DATA_HDR + HD + 1000 } }, c.id);
    const err = await r.ctrl.namespace(1).read(0, 128).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NvmeStatusError);
    expect((err as NvmeStatusError).status & 0x7ff).toBe(Status.DATA_XFER_ERROR);
    expect(r.proxy.connections()[c.id]?.corrupted.toClient).toBe(true);
    // The queue lives on (Linux nvme_tcp_ddgst_error path); the caller's retry gets the right bytes.
    expect((await r.ctrl.namespace(1).read(0, 128)).equals(data)).toBe(true);
    await settledCounts(r.svc, 2);
  });

  it('C2H payload with the default max_retries: the initiator retries the DATA_XFER_ERROR and the read returns the truth', async () => {
    const r = await rig({ conn: digests });
    const data = pattern(65536, 9);
    await r.ctrl.namespace(1).write(0, data);
    const c = ioConn(r);
    r.proxy.setFaults({ toClient: { corruptAtOffset: c.toClient + DATA_HDR + HD + 1000 } }, c.id);
    expect((await r.ctrl.namespace(1).read(0, 128)).equals(data)).toBe(true);
    expect(r.proxy.connections()[c.id]?.corrupted.toClient).toBe(true);
    expect(r.ctrl.ioRetries).toBe(1);
    await settledCounts(r.svc, 2);
  });

  it('H2C payload: the target refuses the write (TRANSIENT_TRANSPORT) and stores nothing; a retry lands', async () => {
    const r = await rig({ conn: { ...digests, max_retries: 0 } });
    const before = pattern(65536, 6);
    await r.ctrl.namespace(1).write(0, before);
    const data = pattern(65536, 7);
    const c = ioConn(r);
    // CapsuleCmd (+HDGST) → R2T → H2CData header (+HDGST) → payload.
    r.proxy.setFaults({ toServer: { corruptAtOffset: c.toServer + CAPSULE + HD + DATA_HDR + HD + 2000 } }, c.id);
    const digestErrors = r.svc.stats().dataDigestErrors;
    const err = await r.ctrl.namespace(1).write(0, data).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NvmeStatusError);
    expect((err as NvmeStatusError).status & 0x7ff).toBe(Status.TRANSIENT_TRANSPORT);
    expect(r.svc.stats().dataDigestErrors).toBe(digestErrors + 1);
    expect((await r.ctrl.namespace(1).read(0, 128)).equals(before)).toBe(true);
    await r.ctrl.namespace(1).write(0, data);
    expect((await r.ctrl.namespace(1).read(0, 128)).equals(data)).toBe(true);
    await settledCounts(r.svc, 2);
  });

  it('C2H header: a header digest error is fatal for the queue; the host reconnects and the read returns the truth', async () => {
    const r = await rig({ conn: digests });
    const data = pattern(8192, 8);
    await r.ctrl.namespace(1).write(0, data);
    const c = ioConn(r);
    r.proxy.setFaults({ toClient: { corruptAtOffset: c.toClient + 12 } }, c.id);
    const reconnected = once(r.ctrl, 'reconnected');
    const back = await r.ctrl.namespace(1).read(0, 16);
    await reconnected;
    expect(back.equals(data)).toBe(true);
    await settledCounts(r.svc, 2);
    expectOneLiveController(r);
  });
});

describe('corruption with digests off (undetectable: documentation test)', () => {
  // Off by name, whatever NVME_TCP_TEST_DIGESTS says: these show what no digest lets through.
  const noDigests = { hdr_digest: false, data_digest: false };
  it('a flipped C2H payload byte reaches the caller as wrong data, with no error', async () => {
    const r = await rig({ conn: noDigests });
    const data = pattern(65536, 9);
    await r.ctrl.namespace(1).write(0, data);
    const c = ioConn(r);
    r.proxy.setFaults({ toClient: { corruptAtOffset: c.toClient + DATA_HDR + 1000, corruptXor: 0x01 } }, c.id);
    const back = await r.ctrl.namespace(1).read(0, 128);
    const diff = [...back].flatMap((b, i) => (b !== data[i] ? [i] : []));
    // TCP checksums do not catch a flip made by a middlebox; without DDGST nothing in NVMe/TCP does.
    expect(diff).toEqual([1000]);
  });

  it('a flipped H2C payload byte is stored silently', async () => {
    const r = await rig({ conn: noDigests });
    const data = pattern(65536, 10);
    const c = ioConn(r);
    r.proxy.setFaults({ toServer: { corruptAtOffset: c.toServer + CAPSULE + DATA_HDR + 3000, corruptXor: 0x80 } }, c.id);
    await r.ctrl.namespace(1).write(0, data);
    const back = await r.ctrl.namespace(1).read(0, 128);
    const diff = [...back].flatMap((b, i) => (b !== data[i] ? [i] : []));
    expect(diff).toEqual([3000]);
    expect(r.svc.stats().dataDigestErrors).toBe(0);
  });
});
