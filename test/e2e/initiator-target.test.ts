// Our initiator against our target in one process over 127.0.0.1: connect sequence, data integrity on both write paths,
// digests, queue groups, duplicate connect, connect parallelism, multipath failover and reconnect after restart.
import { describe, expect, it } from 'vitest';
import { connect, createMultipath, discover, type Controller } from '../../initiator/index.js';
import { InvalidArgumentError } from '../../initiator/index.js';
import { TargetService, type SubsystemConfig } from '../../target/index.js';
import { pattern } from '../fixtures/data-pattern.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const NQN = 'nqn.2024-01.io.test:e2e-init';
const cleanups = cleanupAfterEach();

async function target(sub: Partial<SubsystemConfig> = {}, ports: Array<{ id: number; port?: number; inlineDataSize?: number; maxH2CData?: number; c2hDataSize?: number }> = [{ id: 1 }]): Promise<{ t: TargetService; ports: number[] }> {
  const t = new TargetService();
  cleanups.push(() => t.stop());
  const bound: number[] = [];
  for (const p of ports) bound.push((await t.addPort({ addr: '127.0.0.1', port: 0, ...p })).port);
  await t.addSubsystem({ nqn: NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '16M' } }], ...sub });
  return { t, ports: bound };
}

async function open(port: number, extra: Record<string, unknown> = {}): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, nr_io_queues: 2, duplicate_connect: true, ...extra });
  cleanups.push(() => c.disconnect());
  return c;
}

describe('initiator ↔ TypeScript target', () => {
  // The suite-wide digest switch (test/fixtures/digests.ts): a connection that names no digests asks for both, and the
  // host refuses an ICResp whose digests differ from its ICReq (TCP 1.0 §3.6.2.3), so the data path ran with CRC32C.
  it.runIf(process.env['NVME_TCP_TEST_DIGESTS'] === '1')('NVME_TCP_TEST_DIGESTS=1: a connect that names no digests gets both', async () => {
    const { ports } = await target();
    const c = await open(ports[0] as number);
    expect([c.opts.hdrDigest, c.opts.dataDigest]).toEqual([true, true]);
    const data = pattern(8192, 3);
    await c.namespace(1).write(0, data);
    expect((await c.namespace(1).read(0, 16)).equals(data)).toBe(true);
    const off = await open(ports[0] as number, { hdr_digest: false, data_digest: false });
    expect([off.opts.hdrDigest, off.opts.dataDigest]).toEqual([false, false]);
  });

  it('discovers, connects (admin + I/O queues seen by the target) and disconnects cleanly', async () => {
    const { t, ports } = await target();
    const port = ports[0] as number;
    const entries = await discover({ traddr: '127.0.0.1', trsvcid: port });
    expect(entries.map((e) => e.subtype)).toEqual([3, 2]);
    expect(entries[1]?.subnqn).toBe(NQN);
    const c = await open(port, { nr_io_queues: 3 });
    const seen = t.listControllers().filter((x) => x.subnqn === NQN);
    expect(seen.length).toBe(1);
    expect(seen[0]?.cntlid).toBe(c.cntlid);
    expect(seen[0]?.queues.map((q) => q.qid)).toEqual([0, 1, 2, 3]);
    expect(seen[0]?.kato).toBe(5000);
    await c.disconnect();
    await new Promise((r) => setTimeout(r, 50));
    expect(t.listControllers().filter((x) => x.subnqn === NQN).length).toBe(0);
  });

  for (const [label, port, extra] of [
    ['in-capsule writes, one C2H per read', { id: 1, inlineDataSize: 1 << 20 }, {}],
    ['R2T writes (no inline), 4 KiB H2C/C2H PDUs', { id: 1, inlineDataSize: 0, maxH2CData: 4096, c2hDataSize: 4096 }, {}],
    ['header + data digests', { id: 1 }, { hdr_digest: true, data_digest: true }],
  ] as const) {
    it(`keeps data intact from 512 B to 1 MiB: ${label}`, async () => {
      const { ports } = await target({}, [port]);
      const c = await open(ports[0] as number, extra);
      const ns = c.namespace(1);
      let lba = 0;
      for (const size of [512, 1024, 4096, 8192, 65536, 131072, 262144, 1 << 20]) {
        const data = pattern(size, size + 1);
        await ns.write(lba, data, { hctx: lba % 2 });
        expect((await ns.read(lba, size / 512)).equals(data), `${size}`).toBe(true);
        lba += size / 512;
      }
      await ns.writeZeroes(0, 2);
      expect((await ns.read(0, 2)).every((b) => b === 0)).toBe(true);
      await ns.flush();
    });
  }

  it('spreads a queue group by rotor and falls back to whole groups when maxIoQueues is small', async () => {
    const { t, ports } = await target({ maxIoQueues: 5 });
    const c = await open(ports[0] as number, { nr_io_queues: 4, queues_per_hctx: 2 });
    expect(c.grantedQueues).toBe(5);
    expect(c.hctxs().map((h) => h.queues.map((q) => q.qid))).toEqual([
      [1, 2],
      [3, 4],
    ]);
    const ns = c.namespace(1);
    await Promise.all(Array.from({ length: 40 }, (_, i) => ns.read(i, 1, undefined, { hctx: 1 })));
    const info = c.queueInfo();
    expect(info.find((q) => q.qid === 3)?.completed).toBeGreaterThanOrEqual(21);
    expect(info.find((q) => q.qid === 4)?.completed).toBeGreaterThanOrEqual(21);
    const tq = t.listControllers().find((x) => x.cntlid === c.cntlid)?.queues ?? [];
    expect(tq.map((q) => q.qid)).toEqual([0, 1, 2, 3, 4]);
  });

  it('refuses a duplicate connect unless duplicate_connect, then gets a second controller', async () => {
    const { t, ports } = await target();
    const hostnqn = 'nqn.2024-01.io.test:dup-host';
    const base = { traddr: '127.0.0.1', trsvcid: ports[0] as number, nqn: NQN, nr_io_queues: 1, hostnqn };
    const a = await connect(base);
    cleanups.push(() => a.disconnect());
    const before = t.stats().connections.accepted;
    await expect(connect(base)).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(t.stats().connections.accepted).toBe(before);
    const b = await connect({ ...base, duplicate_connect: true });
    cleanups.push(() => b.disconnect());
    expect(b.cntlid).not.toBe(a.cntlid);
    expect(t.listControllers().filter((x) => x.hostnqn === hostnqn).length).toBe(2);
  });

  it('connects I/O queues in parallel by default and serially with connect_concurrency 1 (connectLatencyMs 40)', async () => {
    const { t, ports } = await target({ faults: { connectLatencyMs: 40 } });
    const port = ports[0] as number;
    let peak = 0;
    const poll = setInterval(() => {
      const n = t.stats().connections.active;
      if (n > peak) peak = n;
    }, 5);
    cleanups.push(async () => clearInterval(poll));
    const t0 = Date.now();
    const par = await open(port, { nr_io_queues: 8 });
    const parMs = Date.now() - t0;
    await par.disconnect();
    const t1 = Date.now();
    await open(port, { nr_io_queues: 8, connect_concurrency: 1 });
    const serMs = Date.now() - t1;
    // Serial: ≥ 9 connects × 40 ms; parallel: admin + one round of 8.
    expect(serMs).toBeGreaterThan(9 * 40);
    expect(parMs).toBeLessThan(serMs / 2);
    expect(peak).toBeGreaterThanOrEqual(9);
  });

  it('multipath over two ports: ANA-aware, fails over when a path is killed mid-I/O', async () => {
    const { t, ports } = await target({}, [{ id: 1 }, { id: 2 }]);
    const hostnqn = 'nqn.2024-01.io.test:mp-host';
    const a = await open(ports[0] as number, { hostnqn, reconnect_delay: 0.05, ctrl_loss_tmo: 0.3 });
    const b = await open(ports[1] as number, { hostnqn });
    t.setAnaState(2, 1, 'non-optimized');
    await b.refreshAna();
    expect(b.namespace(1).anaState).toBe('non-optimized');
    const mp = createMultipath([a, b], 1, { iopolicy: 'round-robin' });
    expect(mp.select()?.ctrl).toBe(a);
    let done = 0;
    const writes = Array.from({ length: 64 }, (_, i) =>
      mp.write(i * 8, pattern(4096, i)).then(() => {
        done++;
      }),
    );
    setTimeout(() => void t.removePort(1), 2);
    await Promise.all(writes);
    expect(done).toBe(64);
    for (let i = 0; i < 64; i++) expect((await mp.read(i * 8, 8)).equals(pattern(4096, i)), `block ${i}`).toBe(true);
  });

  it('reconnects after the target restarts (new cntlid) and resumes queued I/O', async () => {
    const first = await target();
    const port = first.ports[0] as number;
    const c = await open(port, { reconnect_delay: 0.1, ctrl_loss_tmo: 10 });
    const oldId = c.cntlid;
    await c.namespace(1).write(0, pattern(4096, 9));
    const reconnecting = new Promise<void>((r) => c.once('reconnecting', () => r()));
    await first.t.stop();
    await reconnecting;
    const pending = c.namespace(1).read(0, 8);
    const t2 = new TargetService();
    cleanups.push(() => t2.stop());
    await t2.addPort({ id: 1, addr: '127.0.0.1', port });
    await t2.addSubsystem({ nqn: NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '16M' } }] });
    const back = await pending;
    expect(back.length).toBe(4096);
    expect(c.state).toBe('live');
    expect(t2.listControllers().find((x) => x.subnqn === NQN)?.cntlid).toBe(c.cntlid);
    void oldId;
  });
});
