// The multi-process data plane (target/workers) end to end over 127.0.0.1: our initiator against a target with
// workers 2 under every placement policy — verified I/O from several hosts and controllers on a shared RAM namespace
// and a file namespace, where each I/O queue landed (GET /controllers' worker field) against the policy, KATO expiry
// and controller teardown reaching queues on workers, namespace and ANA AENs from the primary, I/O on a namespace
// added at runtime, a killed worker restarted while the other controller's verified I/O goes on, and a graceful stop.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type AsyncEvent, type Controller } from '../../initiator/index.js';
import { RawPeer } from '../../harness/peers/raw-peer.js';
import { TargetService, type ControllerInfo } from '../../target/index.js';
import { PLACEMENTS, type Placement } from '../../target/workers/index.js';
import { pattern } from '../fixtures/data-pattern.js';
import { generateDhchapKey } from '../../protocol/auth/index.js';
import { sleep, until } from '../../harness/until.js';

const NQN = 'nqn.2024-01.io.test:workers';
const HOST_A = 'nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-00000000000a';
const HOST_B = 'nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-00000000000b';

function waitFor<T>(what: string, register: (resolve: (v: T) => void) => void, ms = 5000): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
    register((v) => {
      clearTimeout(t);
      resolve(v);
    });
  });
}

/** FNV-1a, the host policy's hash (written out here so the test can pick hosts that land on different workers). */
function fnv(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'nvt-workers-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function startTarget(opts: { placement?: Placement; file?: string } = {}): Promise<{ t: TargetService; port: number }> {
  const t = new TargetService({ workers: 2, placement: opts.placement ?? 'queue' });
  try {
    const port = (await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 })).port;
    await t.addSubsystem({
      nqn: NQN,
      namespaces: [
        { nsid: 1, backend: { type: 'ram', size: '8M' } },
        { nsid: 2, backend: { type: 'file', path: opts.file ?? path.join(dir, `ns-${Date.now()}-${Math.random()}.img`), size: '4M' } },
      ],
    });
    return { t, port };
  } catch (err) {
    await t.stop();
    throw err;
  }
}

async function host(port: number, hostnqn: string, extra: Record<string, unknown> = {}): Promise<Controller> {
  return connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, hostnqn, nr_io_queues: 2, duplicate_connect: true, ...extra });
}

/** Each controller writes its own region of both namespaces, then every controller reads back every region. */
async function verifiedIo(cs: Controller[], round: number): Promise<void> {
  const blocks = 16;
  for (const [i, c] of cs.entries()) {
    for (const nsid of [1, 2]) {
      const ns = c.namespace(nsid);
      for (let q = 0; q < 4; q++) {
        const lba = (i * 4 + q) * blocks;
        await ns.write(lba, pattern(blocks * 512, round * 1000 + i * 10 + q + nsid), { hctx: q % 2 });
      }
    }
  }
  for (const c of cs) {
    for (const nsid of [1, 2]) {
      const ns = c.namespace(nsid);
      for (let i = 0; i < cs.length; i++) {
        for (let q = 0; q < 4; q++) {
          const got = await ns.read((i * 4 + q) * blocks, blocks, undefined, { hctx: (q + 1) % 2 });
          expect(got.equals(pattern(blocks * 512, round * 1000 + i * 10 + q + nsid)), `ns ${nsid} region ${i}/${q}`).toBe(true);
        }
      }
    }
  }
}

function ioWorkers(t: TargetService, cntlid: number): Array<number | undefined> {
  const c = t.listControllers().find((x) => x.subnqn === NQN && x.cntlid === cntlid) as ControllerInfo;
  return c.queues.filter((q) => q.qid > 0).map((q) => q.worker);
}

describe('target workers: placement, shared namespaces and controller-wide state', () => {
  let t: TargetService;
  let port: number;
  beforeAll(async () => {
    ({ t, port } = await startTarget());
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  for (const placement of PLACEMENTS) {
    it(`placement ${placement}: verified I/O from two hosts and three controllers; queues land where the policy says`, async () => {
      t.setPlacement(placement);
      expect(t.placement).toBe(placement);
      // For host placement, two hosts that hash to different workers.
      const hostB = placement === 'host' && fnv(HOST_A) % 2 === fnv(HOST_B) % 2 ? `${HOST_B}1` : HOST_B;
      const cs: Controller[] = [];
      try {
        cs.push(await host(port, HOST_A), await host(port, hostB), await host(port, HOST_A));
        await verifiedIo(cs, PLACEMENTS.indexOf(placement));
        const w = cs.map((c) => ioWorkers(t, c.cntlid));
        for (const x of w) expect(x.length).toBe(2);
        // Setup times of a worker's queue: ICReq and Connect as the primary saw them; its commands ran in the worker.
        for (const q of t.listControllers().filter((c) => c.subnqn === NQN).flatMap((c) => c.queues.filter((x) => x.qid > 0))) {
          expect(q.icReqAt).toBeLessThanOrEqual(q.connectAt as number);
          expect(q.firstCommandAt).toBeUndefined();
        }
        switch (placement) {
          case 'single':
            expect(w.flat()).toEqual([0, 0, 0, 0, 0, 0]);
            break;
          case 'controller':
            for (const x of w) expect(new Set(x).size).toBe(1);
            expect(w[0]?.[0]).not.toBe(w[1]?.[0]);
            expect(w[1]?.[0]).not.toBe(w[2]?.[0]);
            break;
          case 'queue':
            for (const x of w) expect([...new Set(x)].sort()).toEqual([0, 1]);
            break;
          case 'host':
            for (const x of w) expect(new Set(x).size).toBe(1);
            expect(w[0]?.[0]).toBe(fnv(HOST_A) % 2);
            expect(w[2]?.[0]).toBe(fnv(HOST_A) % 2);
            expect(w[1]?.[0]).toBe(fnv(hostB) % 2);
            expect(w[1]?.[0]).not.toBe(w[0]?.[0]);
            break;
        }
        // Worker reports fold back into the primary: per-queue commands and per-worker I/Os.
        await until(() => cs.every((c) => (t.listControllers().find((x) => x.cntlid === c.cntlid)?.queues ?? []).filter((q) => q.qid > 0).some((q) => q.commands > 0)), 30_000, 'queue counters from the workers');
        expect(t.workers().map((x) => x.state)).toEqual(['ready', 'ready']);
        expect(t.workers().reduce((n, x) => n + x.ios, 0)).toBeGreaterThan(0);
      } finally {
        for (const c of cs) await c.disconnect().catch(() => undefined);
      }
      await until(() => t.listControllers().filter((x) => x.subnqn === NQN).length === 0, 30_000, 'controllers gone');
    }, 60_000);
  }

  it('namespace add/remove and ANA AENs reach every controller; the added namespace is served by every worker', async () => {
    t.setPlacement('controller');
    const cs = [await host(port, HOST_A), await host(port, HOST_B)];
    try {
      expect(new Set(cs.map((c) => ioWorkers(t, c.cntlid)[0])).size).toBe(2);
      const added = cs.map((c) => waitFor<number[]>('namespacesChanged', (r) => c.once('namespacesChanged', r)));
      await t.addNamespace(NQN, { nsid: 3, backend: { type: 'ram', size: '2M' } });
      for (const a of added) expect(await a).toEqual([3]);
      const data = pattern(8192, 77);
      await cs[0]?.namespace(3).write(5, data);
      for (const c of cs) expect((await c.namespace(3).read(5, 16)).equals(data)).toBe(true);

      const ana = cs.map((c) => waitFor<AsyncEvent>('ANA AEN', (r) => c.on('aen', (e) => e.info === 0x03 && r(e))));
      t.setAnaState(1, 1, 'inaccessible');
      for (const a of ana) expect(await a).toMatchObject({ type: 2, info: 0x03, lid: 0x0c });
      // The workers apply the ANA state to I/O (nvmet_check_ana_state): reads now fail with ANA Inaccessible.
      const err = (await cs[1]?.namespace(1).read(0, 1).then(() => undefined, (e: unknown) => e)) as { status?: number } | undefined;
      expect(err?.status).toBe(0x302);
      t.setAnaState(1, 1, 'optimized');
      await sleep(100);

      const removed = cs.map((c) => waitFor<number[]>('namespacesChanged after remove', (r) => c.once('namespacesChanged', r)));
      await t.removeNamespace(NQN, 3);
      for (const r of removed) expect(await r).toEqual([3]);
    } finally {
      for (const c of cs) await c.disconnect().catch(() => undefined);
    }
    await until(() => t.listControllers().filter((x) => x.subnqn === NQN).length === 0, 30_000, 'controllers gone');
  }, 60_000);

  it('KATO expiry tears down the controller and closes its I/O queues on every worker', async () => {
    t.setPlacement('queue');
    const admin = await RawPeer.connect({ host: '127.0.0.1', port });
    const io: RawPeer[] = [];
    try {
      await admin.ic();
      const r = await admin.connect({ subnqn: NQN, hostnqn: HOST_A, qid: 0, kato: 1000 });
      const cntlid = (r.cqe?.dw0 ?? 0) & 0xffff;
      for (const qid of [1, 2]) {
        const p = await RawPeer.connect({ host: '127.0.0.1', port });
        io.push(p);
        await p.ic();
        const c = await p.connect({ subnqn: NQN, hostnqn: HOST_A, qid, cntlid });
        expect(c.cqe?.status ?? 0).toBe(0);
      }
      await until(() => ioWorkers(t, cntlid).length === 2, 30_000, 'both I/O queues on workers');
      expect([...ioWorkers(t, cntlid)].sort()).toEqual([0, 1]);
      // No command for a whole KATO: the primary's timer tears the controller down, the workers close its queues.
      await Promise.all([admin.closed(5000), ...io.map((p) => p.closed(5000))]);
      expect(t.listControllers().some((x) => x.cntlid === cntlid && x.subnqn === NQN)).toBe(false);
      expect(t.stats().katoExpiries).toBeGreaterThan(0);
      await until(() => t.workers().reduce((n, w) => n + w.queues, 0) === 0, 30_000, 'worker queues closed');
    } finally {
      admin.close();
      for (const p of io) p.close();
    }
  }, 30_000);

  it('a subsystem change that disconnects controllers (maxIoQueues) closes their queues on the workers', async () => {
    const c = await host(port, HOST_A, { reconnect_delay: 60, ctrl_loss_tmo: 120 });
    const changed = waitFor<string>('host sees the controller go', (r) => c.on('state', (_from, to) => to !== 'live' && r(to)));
    const cntlid = c.cntlid;
    expect(ioWorkers(t, cntlid).length).toBe(2);
    expect(t.workers().reduce((n, w) => n + w.queues, 0)).toBe(2);
    t.updateSubsystem(NQN, { maxIoQueues: 64 });
    await changed;
    // Each worker reported its queue closed (the primary counts a worker's queues from those reports).
    await until(() => t.workers().reduce((n, w) => n + w.queues, 0) === 0, 30_000, 'worker queues closed');
    expect(t.listControllers().some((x) => x.cntlid === cntlid && x.subnqn === NQN)).toBe(false);
    await c.disconnect().catch(() => undefined);
  }, 30_000);

  it('concurrent reads on workers each return their own blocks (the shared-RAM read buffer is reused per read)', async () => {
    // The workers' RAM backend lends every read the same buffer (transientReads): a payload the transport sent as a
    // view instead of a copy would show the bytes of a later read. Many reads per received chunk (beyond the batch's
    // copy budget), reads split over several C2HData PDUs (256 KiB > c2hDataSize) and reads held by commandLatencyUs.
    const c = await host(port, HOST_A, { nr_io_queues: 1, queue_size: 128 });
    try {
      expect(ioWorkers(t, c.cntlid)[0]).toBeDefined();
      const ns = c.namespace(1);
      const small = Array.from({ length: 96 }, (_, i) => pattern(4096, 7000 + i));
      const big = Array.from({ length: 4 }, (_, i) => pattern(256 * 1024, 8000 + i));
      await ns.write(0, Buffer.concat(small));
      for (const [i, b] of big.entries()) await ns.write(1024 + i * 512, b);
      for (let round = 0; round < 3; round++) {
        const reads = [
          ...small.map((_, i) => ns.read(i * 8, 8)),
          ...big.map((_, i) => ns.read(1024 + i * 512, 512)),
        ];
        const got = await Promise.all(reads);
        for (const [i, b] of small.entries()) expect(got[i]?.equals(b), `4 KiB block ${i}, round ${round}`).toBe(true);
        for (const [i, b] of big.entries()) expect(got[small.length + i]?.equals(b), `256 KiB region ${i}, round ${round}`).toBe(true);
      }
      t.setFaults(NQN, { commandLatencyUs: 3000 });
      try {
        const got = await Promise.all(small.slice(0, 24).map((_, i) => ns.read(i * 8, 8)));
        for (const [i, b] of got.entries()) expect(b.equals(small[i] as Buffer), `delayed block ${i}`).toBe(true);
      } finally {
        t.setFaults(NQN, {});
      }
    } finally {
      await c.disconnect();
    }
  }, 30_000);
});

describe('target workers: read caches with three workers (every pair linked, also after a restart)', () => {
  let t: TargetService;
  let port: number;
  beforeAll(async () => {
    t = new TargetService({ workers: 3, placement: 'queue' });
    await t.apply({ ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [{ nqn: NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '8M' } }] }] });
    port = (t.boundPorts()[0] as { port: number }).port;
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  /** Each round: every worker caches the block, then one writes it; every worker must read the new bytes. */
  async function rounds(c: Controller, base: number, tag: number): Promise<void> {
    const ns = c.namespace(1);
    for (let i = 0; i < 12; i++) {
      const b = base + i * 8;
      await ns.write(b, pattern(4096, tag + i), { hctx: 0 });
      for (const hctx of [0, 1, 2]) expect((await ns.read(b, 8, undefined, { hctx })).equals(pattern(4096, tag + i))).toBe(true);
      const next = pattern(4096, tag + 100 + i);
      await ns.write(b, next, { hctx: i % 3 });
      for (const hctx of [0, 1, 2]) expect((await ns.read(b, 8, undefined, { hctx })).equals(next), `round ${i}, written on hctx ${i % 3}, read on ${hctx}`).toBe(true);
    }
  }

  it('a write on any worker drops the other two copies; after worker 1 restarts, still', async () => {
    let c = await host(port, HOST_A, { nr_io_queues: 3 });
    try {
      expect(new Set(ioWorkers(t, c.cntlid)).size).toBe(3);
      await rounds(c, 0, 2000);
      await c.disconnect();
      process.kill(t.workers()[1]?.pid as number, 'SIGKILL');
      await until(() => (t.workers()[1]?.restarts ?? 0) >= 1 && t.workers()[1]?.state === 'ready', 30_000, 'worker 1 restarted');
      c = await host(port, HOST_A, { nr_io_queues: 3 });
      expect(new Set(ioWorkers(t, c.cntlid)).size).toBe(3);
      await rounds(c, 0, 3000);
      await rounds(c, 8192, 4000);
      for (const w of t.workers()) expect(w.invalidations.relayed, `worker ${w.index}: nothing relayed`).toBe(0);
    } finally {
      await c.disconnect();
    }
  }, 60_000);
});

describe.each([true, false])('target workers: read caches of a shared RAM namespace (workerCache %s)', (workerCache) => {
  // Each worker serves RAM reads from its own copy of the blocks it read (ShmBackend's ReadCache); a write on another
  // worker, or on a queue the primary kept (DH-HMAC-CHAP), must drop that copy before the write completes. Every read
  // below first fills the reading worker's cache with the old bytes, so a missed invalidation shows as stale data.
  const HOST_AUTH = 'nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000ac';
  const key = generateDhchapKey({ hmac: 1, hostnqn: HOST_AUTH }).format();
  let t: TargetService;
  let port: number;
  beforeAll(async () => {
    t = new TargetService({ workers: 2, placement: 'queue' });
    await t.apply({
      ports: [{ id: 1, addr: '127.0.0.1', port: 0 }],
      subsystems: [{ nqn: NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '8M', workerCache } }] }],
      hosts: [{ nqn: HOST_AUTH, dhchapKey: key }],
    });
    port = (t.boundPorts()[0] as { port: number }).port;
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('a write on one worker is seen by the next read on the other: partial blocks, Write Zeroes, 1 MiB piece edges', async () => {
    const c = await host(port, HOST_A, { nr_io_queues: 2 });
    try {
      const w = ioWorkers(t, c.cntlid);
      expect(new Set(w).size, `queues on both workers: ${JSON.stringify(w)}`).toBe(2);
      const ns = c.namespace(1);
      // 512-byte LBAs; the cache's 1 MiB pieces meet at LBA 2048, its 4 KiB blocks every 8 LBAs.
      const lba = 2040;
      const n = 16;
      const expectRead = async (want: Buffer, why: string): Promise<void> => {
        for (const hctx of [0, 1]) expect((await ns.read(lba, n, undefined, { hctx })).equals(want), `${why}, read on hctx ${hctx}`).toBe(true);
      };
      const want = pattern(n * 512, 1);
      await ns.write(lba, want, { hctx: 0 });
      await expectRead(want, 'whole range across the piece edge');
      // One 512-byte LBA inside a cached 4 KiB block, from either side.
      for (const [i, hctx] of [[7, 1], [8, 0], [3, 0], [12, 1]] as const) {
        const one = pattern(512, 100 + i);
        await ns.write(lba + i, one, { hctx });
        one.copy(want, i * 512);
        await expectRead(want, `partial block LBA +${i} written on hctx ${hctx}`);
      }
      await ns.writeZeroes(lba + 6, 4, {}, { hctx: 1 });
      want.fill(0, 6 * 512, 10 * 512);
      await expectRead(want, 'Write Zeroes across the piece edge');
      // Alternating sides, each read right after the other side's write completed.
      for (let i = 0; i < 40; i++) {
        const b = ((i * 37) % 1024) * 8;
        const data = pattern(4096, 500 + i);
        await ns.write(b, data, { hctx: i % 2 });
        expect((await ns.read(b, 8, undefined, { hctx: (i + 1) % 2 })).equals(data), `block ${b} round ${i}`).toBe(true);
      }
    } finally {
      await c.disconnect();
    }
  }, 30_000);

  it.runIf(workerCache)('a write to pieces no other worker holds asks no one; once the other reads them, it asks', async () => {
    // Pieces 6 and 7 of the 8 MiB namespace (LBA 12288+): no other test here reads them.
    const c1 = await host(port, HOST_A, { nr_io_queues: 1 });
    const c2 = await host(port, HOST_B, { nr_io_queues: 1 });
    const extra: Controller[] = [];
    try {
      const x = ioWorkers(t, c1.cntlid)[0] as number;
      // 'queue' placement goes round-robin: connect until a controller lands on the other worker.
      let reader = c2;
      while (ioWorkers(t, reader.cntlid)[0] === x) extra.push((reader = await host(port, HOST_B, { nr_io_queues: 1 })));
      const inv = (): { direct: number; relayed: number; unasked: number } => t.workers()[x]?.invalidations ?? { direct: -1, relayed: -1, unasked: -1 };
      await sleep(450); // two report intervals: the figures below start from this one
      const base = inv();
      const lbas = Array.from({ length: 10 }, (_, i) => 12288 + i * 200);
      for (const [i, lba] of lbas.entries()) await c1.namespace(1).write(lba, pattern(4096, 1100 + i));
      await until(() => inv().unasked >= base.unasked + 10, 30_000, 'the writer reported its unasked writes');
      expect(inv().direct, 'no batch went to the other worker').toBe(base.direct);
      expect(inv().relayed).toBe(base.relayed);
      for (const [i, lba] of lbas.entries()) expect((await reader.namespace(1).read(lba, 8)).equals(pattern(4096, 1100 + i)), `LBA ${lba}`).toBe(true);
      // The reader holds pieces 6 and 7 now: the next write there must drop its copy first.
      await c1.namespace(1).write(lbas[3] as number, pattern(4096, 1200));
      expect((await reader.namespace(1).read(lbas[3] as number, 8)).equals(pattern(4096, 1200))).toBe(true);
      await until(() => inv().direct >= base.direct + 1, 30_000, 'the writer reported a direct batch');
      expect(inv().unasked).toBe(base.unasked + 10);
    } finally {
      for (const c of [c1, c2, ...extra]) await c.disconnect();
    }
  }, 30_000);

  it('a restarted worker is linked again: writes on either side drop the other\'s cached copy', async () => {
    // Worker 1 dies; its replacement must get links to worker 0 (PeerMesh) before it serves a queue, and worker 0
    // must stop waiting for the dead one. Each round reads the block on both sides first, so both caches hold it.
    process.kill(t.workers()[1]?.pid as number, 'SIGKILL');
    await until(() => (t.workers()[1]?.restarts ?? 0) >= 1 && t.workers()[1]?.state === 'ready', 30_000, 'worker 1 restarted');
    const c = await host(port, HOST_A, { nr_io_queues: 2 });
    try {
      expect(new Set(ioWorkers(t, c.cntlid)).size).toBe(2);
      const ns = c.namespace(1);
      for (let i = 0; i < 20; i++) {
        const b = 4096 + i * 8;
        const old = pattern(4096, 700 + i);
        await ns.write(b, old, { hctx: 0 });
        for (const hctx of [0, 1]) expect((await ns.read(b, 8, undefined, { hctx })).equals(old)).toBe(true);
        const next = pattern(4096, 800 + i);
        await ns.write(b, next, { hctx: (i + 1) % 2 });
        for (const hctx of [0, 1]) expect((await ns.read(b, 8, undefined, { hctx })).equals(next), `round ${i}, written on hctx ${(i + 1) % 2}, read on ${hctx}`).toBe(true);
      }
    } finally {
      await c.disconnect();
    }
  }, 60_000);

  it('writes on a queue the primary kept (DH-HMAC-CHAP) reach the workers\' caches; theirs reach the primary', async () => {
    const a = await host(port, HOST_A, { nr_io_queues: 2 });
    const p = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, hostnqn: HOST_AUTH, nr_io_queues: 1, dhchap_secret: key });
    try {
      expect(ioWorkers(t, p.cntlid)).toEqual([undefined]);
      const nsA = a.namespace(1);
      const nsP = p.namespace(1);
      for (let i = 0; i < 6; i++) {
        const lba = 4096 + i * 64;
        const old = pattern(8192, 900 + i);
        await nsA.write(lba, old, { hctx: i % 2 });
        // Both workers cache the old bytes, then the primary overwrites them.
        for (const hctx of [0, 1]) expect((await nsA.read(lba, 16, undefined, { hctx })).equals(old)).toBe(true);
        const next = pattern(8192, 950 + i);
        await nsP.write(lba, next);
        for (const hctx of [0, 1]) expect((await nsA.read(lba, 16, undefined, { hctx })).equals(next), `after the primary's write ${i}, hctx ${hctx}`).toBe(true);
        const last = pattern(8192, 990 + i);
        await nsA.write(lba, last, { hctx: (i + 1) % 2 });
        expect((await nsP.read(lba, 16)).equals(last), `the primary reads worker write ${i}`).toBe(true);
      }
    } finally {
      await p.disconnect();
      await a.disconnect();
    }
  }, 30_000);
});

describe('target workers: faults and lifecycle', () => {
  it('a killed worker is restarted; the other controller keeps verified I/O with zero errors, the hit host reconnects', async () => {
    const { t, port } = await startTarget({ placement: 'controller' });
    const cs: Controller[] = [];
    try {
      cs.push(await host(port, HOST_A), await host(port, HOST_B, { reconnect_delay: 0.2, ctrl_loss_tmo: 30 }));
      const wa = ioWorkers(t, cs[0]?.cntlid ?? 0)[0] as number;
      const wb = ioWorkers(t, cs[1]?.cntlid ?? 0)[0] as number;
      expect(wa).not.toBe(wb);
      let errors = 0;
      let ios = 0;
      let run = true;
      const ns = cs[0]?.namespace(1);
      const loop = (async () => {
        let i = 0;
        while (run) {
          const data = pattern(4096, i);
          const lba = (i % 64) * 8;
          try {
            await ns?.write(lba, data);
            const back = await ns?.read(lba, 8);
            if (back?.equals(data) !== true) errors++;
          } catch {
            errors++;
          }
          ios++;
          i++;
        }
      })();
      await until(() => ios > 20, 30_000, 'some I/O');
      const pid = t.workers()[wb]?.pid as number;
      process.kill(pid, 'SIGKILL');
      await until(() => (t.workers()[wb]?.restarts ?? 0) === 1 && t.workers()[wb]?.state === 'ready', 30_000, 'worker restarted');
      // The hit host reconnects (new controller) and its I/O works again, served by a worker.
      await until(() => cs[1]?.state === 'live' && t.listControllers().some((x) => x.hostnqn === HOST_B && x.queues.filter((q) => q.qid > 0).length === 2), 30_000, 'host B reconnected');
      const d = pattern(4096, 4242);
      await cs[1]?.namespace(1).write(900, d);
      expect((await cs[1]?.namespace(1).read(900, 8))?.equals(d)).toBe(true);
      const before = ios;
      await until(() => ios > before + 20, 30_000, 'more I/O after the restart');
      run = false;
      await loop;
      expect(errors).toBe(0);
    } finally {
      for (const c of cs) await c.disconnect().catch(() => undefined);
      await t.stop();
    }
  }, 90_000);

  it('stop ends every worker gracefully; file namespace writes made through workers are on disk', async () => {
    const file = path.join(dir, 'durable.img');
    const { t, port } = await startTarget({ file });
    const pids = t.workers().map((w) => w.pid as number);
    const c = await host(port, HOST_A);
    const data = pattern(65536, 9);
    await c.namespace(2).write(64, data);
    await c.disconnect();
    await t.stop();
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
    const bytes = await readFile(file);
    expect(bytes.subarray(64 * 512, 64 * 512 + data.length).equals(data)).toBe(true);
  }, 60_000);

  it('bad worker settings name the field; a worker that cannot start fails start-up with its reason', async () => {
    expect(() => new TargetService({ workers: 0 })).toThrow(/workers/);
    expect(() => new TargetService({ workers: 1.5 })).toThrow(/workers/);
    expect(() => new TargetService({ placement: 'spread' as never })).toThrow(/placement.*single, controller, queue, host/);
    const entry = path.join(dir, 'bad-worker.mjs');
    await writeFile(entry, "process.on('message', () => { process.send({ t: 'init-failed', reason: 'cannot open /nonexistent' }); setTimeout(() => process.exit(1), 20); });\n");
    const t = new TargetService({ workers: 2, workerEntry: entry });
    await expect(t.addPort({ id: 1, addr: '127.0.0.1', port: 0 })).rejects.toThrow(/worker \d could not start: cannot open \/nonexistent/);
    expect(t.boundPorts()).toEqual([]);
    await t.stop();
  }, 30_000);
});
