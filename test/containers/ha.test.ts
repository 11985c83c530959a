// docker/compose.ha.yaml: two gateway containers export one subsystem and one namespace (a file on a shared volume).
// Our initiator connects to both and runs verified writes and reads through its ANA-aware multipath head; gateway 1
// (ANA optimized) is killed with SIGKILL mid-run and restarted, 5 times. Every cycle: I/O moves to gateway 2
// (non-optimized, the only live path), comes back to gateway 1 after its restart, no read ever returns anything but
// the last acknowledged write of that block, and a full read-back at the end finds every acknowledged write. The
// longest gap between two I/O completions after each kill is the failover pause (printed, p50/max).
import { Buffer } from 'node:buffer';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../harness/lab.js';
import { connect, createMultipath, type Controller, type MultipathNamespace } from '../../initiator/index.js';
import { DOCKER, compose, counter, ctr, metrics, podman, residue, teardown, waitHealthy } from './podman.js';
import { sleep, until } from '../../harness/until.js';

const FILE = path.join(DOCKER, 'compose.ha.yaml');
const NQN = 'nqn.2024-01.io.nvme-tcp-ts:ha';
const HOSTNQN = 'nqn.2024-01.io.nvme-tcp-ts:ha-test-host';
const CYCLES = 5;
const WORKERS = 8;
const SLOTS = 256; // 4 KiB blocks per worker
const IO = 4096;

/** A 4 KiB block that names its LBA and write sequence number, so a read shows which write it returns. */
function fillBlock(buf: Buffer, lba: number, seq: number): void {
  buf.writeBigUInt64LE(BigInt(lba), 0);
  buf.writeUInt32LE(seq, 8);
  buf.fill((seq * 31 + (lba & 0xff)) & 0xff, 12);
}

function blockSeq(buf: Buffer, lba: number): number | 'corrupt' {
  const seq = buf.readUInt32LE(8);
  if (buf.readBigUInt64LE(0) !== BigInt(lba)) return 'corrupt';
  const b = (seq * 31 + (lba & 0xff)) & 0xff;
  for (let i = 12; i < buf.length; i++) if (buf[i] !== b) return 'corrupt';
  return seq;
}

interface Stats {
  writes: number;
  reads: number;
  mismatches: string[];
  lastDone: number;
  /** Longest completion gap since the last reset (ms). */
  maxGap: number;
}

function startWorkload(mp: MultipathNamespace, stats: Stats, expected: Map<number, number>, stop: { now: boolean }): Promise<void[]> {
  const blocks = IO / mp.blockSize;
  const done = (): void => {
    const now = performance.now();
    stats.maxGap = Math.max(stats.maxGap, now - stats.lastDone);
    stats.lastDone = now;
  };
  return Promise.all(
    Array.from({ length: WORKERS }, async (_, w) => {
      const wbuf = Buffer.alloc(IO);
      const rbuf = Buffer.alloc(IO);
      let seq = 0;
      while (!stop.now) {
        const slot = Math.floor(Math.random() * SLOTS);
        const lba = (w * SLOTS + slot) * blocks;
        seq++;
        fillBlock(wbuf, lba, seq);
        await mp.write(lba, wbuf);
        expected.set(lba, seq);
        stats.writes++;
        done();
        // Read back a block this worker wrote before (it alone writes its region, so the expected value is exact).
        const rslot = Math.floor(Math.random() * SLOTS);
        const rlba = (w * SLOTS + rslot) * blocks;
        const want = expected.get(rlba);
        if (want === undefined) continue;
        const got = blockSeq(await mp.read(rlba, blocks, rbuf), rlba);
        stats.reads++;
        done();
        if (got !== want) stats.mismatches.push(`lba ${rlba}: read ${got}, last acknowledged write ${want}`);
      }
    }),
  );
}

describe('docker/compose.ha.yaml: HA gateway pair with ANA failover', () => {
  const project = `nvmeha${process.pid}`;
  const env: NodeJS.ProcessEnv = {};
  const ctrls: Controller[] = [];
  afterAll(async () => {
    for (const c of ctrls) await c.disconnect().catch(() => undefined);
    await teardown(project, FILE, env);
    expect(await residue(project)).toEqual([]);
  });

  it(`fails over to gateway 2 and back, ${CYCLES} kill/restart cycles, zero mismatches, zero lost writes`, async () => {
    const [p1, a1, p2, a2] = [await freePort(), await freePort(), await freePort(), await freePort()];
    Object.assign(env, { NVME_HA_GW1_PORT: String(p1), NVME_HA_GW1_API_PORT: String(a1), NVME_HA_GW2_PORT: String(p2), NVME_HA_GW2_API_PORT: String(a2) });
    const up = await compose(project, FILE, ['up', '-d', '--no-build'], env);
    expect(up.code, up.out + up.err).toBe(0);
    const gw1 = ctr(project, 'gw1');
    await waitHealthy(gw1);
    await waitHealthy(ctr(project, 'gw2'));

    const opts = { traddr: '127.0.0.1', nqn: NQN, hostnqn: HOSTNQN, nr_io_queues: 2, reconnect_delay: 1, ctrl_loss_tmo: -1, keep_alive_tmo: 2 };
    const ca = await connect({ ...opts, trsvcid: p1 });
    ctrls.push(ca);
    const cb = await connect({ ...opts, trsvcid: p2 });
    ctrls.push(cb);
    // One subsystem as the host sees it: same serial and namespace identity, disjoint controller IDs, and the
    // per-gateway ANA state of the namespace's group.
    expect(ca.identify.sn).toBe(cb.identify.sn);
    expect(ca.namespace(1).info.nguid).toBe(cb.namespace(1).info.nguid);
    expect(ca.namespace(1).info.anagrpid).toBe(1);
    expect(cb.namespace(1).info.anagrpid).toBe(1);
    expect(ca.cntlid).toBeGreaterThanOrEqual(1);
    expect(ca.cntlid).toBeLessThanOrEqual(999);
    expect(cb.cntlid).toBeGreaterThanOrEqual(1000);
    expect(cb.cntlid).toBeLessThanOrEqual(1999);
    expect(ca.namespace(1).anaState).toBe('optimized');
    expect(cb.namespace(1).anaState).toBe('non-optimized');

    const mp = createMultipath([ca, cb], 1, { iopolicy: 'numa', noPathTimeoutMs: 60_000 });
    expect(mp.select()?.ctrl).toBe(ca);
    const stats: Stats = { writes: 0, reads: 0, mismatches: [], lastDone: performance.now(), maxGap: 0 };
    const expected = new Map<number, number>();
    const stop = { now: false };
    const workload = startWorkload(mp, stats, expected, stop);
    const cmds = async (api: number) => counter(await metrics(api), 'nvme_tcp_commands_total');
    const pauses: number[] = [];
    try {
      await sleep(1000);
      for (let cycle = 0; cycle < CYCLES; cycle++) {
        // Gateway 1 carries the I/O; gateway 2 only its keep-alives.
        const g1 = await cmds(a1);
        await sleep(300);
        expect(await cmds(a1), `cycle ${cycle}: gateway 1 carries I/O`).toBeGreaterThan(g1 + 20);

        const w0 = stats.writes;
        const kill = await podman(['kill', '--signal', 'KILL', gw1]);
        expect(kill.code, kill.err).toBe(0);
        stats.maxGap = 0;
        await until(async () => stats.writes > w0 + 200 && mp.select()?.ctrl === cb, 30_000, 'I/O on gateway 2');
        const g2 = await cmds(a2);
        await sleep(300);
        expect(await cmds(a2), `cycle ${cycle}: gateway 2 carries I/O`).toBeGreaterThan(g2 + 20);
        pauses.push(stats.maxGap);

        const start = await podman(['start', gw1]);
        expect(start.code, start.err).toBe(0);
        await waitHealthy(gw1);
        await until(() => ca.state === 'live' && mp.select()?.ctrl === ca, 30_000, 'gateway 1 live and optimized again');
      }
    } finally {
      stop.now = true;
      await workload;
    }
    expect(stats.mismatches.slice(0, 10)).toEqual([]);

    // Every acknowledged write is there, read through whichever path is preferred now (gateway 1 again).
    const lost: string[] = [];
    const blocks = IO / mp.blockSize;
    const rbuf = Buffer.alloc(IO);
    for (const [lba, seq] of expected) {
      const got = blockSeq(await mp.read(lba, blocks, rbuf), lba);
      if (got !== seq) lost.push(`lba ${lba}: ${got} instead of ${seq}`);
    }
    expect(lost.slice(0, 10)).toEqual([]);
    const sorted = [...pauses].sort((x, y) => x - y);
    const p50 = sorted[Math.floor((sorted.length - 1) / 2)] ?? NaN;
    console.log(
      `HA failover: ${CYCLES} cycles, ${stats.writes} writes + ${stats.reads} verified reads, ${expected.size} blocks read back, ` +
        `0 mismatches, 0 lost; I/O pause per failover p50 ${p50.toFixed(0)} ms, max ${(sorted.at(-1) ?? NaN).toFixed(0)} ms ` +
        `(all: ${pauses.map((p) => p.toFixed(0)).join(', ')}); multipath failovers ${mp.failovers}`,
    );
    expect(pauses).toHaveLength(CYCLES);
  });
});
