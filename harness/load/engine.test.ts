import { describe, expect, it } from 'vitest';
import { runJobs } from './engine.js';
import { parseFioJobFile, resolveJobs } from './job-file.js';
import { MemoryBlockTarget } from './memory-target.js';
import type { BlockTarget, JobSpec, SubmitContext } from './types.js';

function jobs(text: string, t: BlockTarget): JobSpec[] {
  return resolveJobs(parseFioJobFile(text), t);
}

describe('runJobs against an in-memory target', () => {
  it('time-based random reads: IOPS, ordered percentiles, time series, per-clone and per-queue spread', async () => {
    const t = new MemoryBlockTarget({ capacityBlocks: 65536, queues: 2 });
    const r = await runJobs(t, jobs('[rr]\nrw=randread\nbs=4k\niodepth=8\nnumjobs=2\nruntime=400ms\n', t), { intervalMs: 50 });
    expect(r.totals.ios).toBeGreaterThan(100);
    expect(r.totals.readIos).toBe(r.totals.ios);
    expect(r.totals.writeIos).toBe(0);
    expect(r.totals.bytes).toBe(r.totals.ios * 4096);
    expect(r.durationMs).toBeGreaterThanOrEqual(390);
    expect(Math.abs(r.totals.iops - (r.totals.ios / r.durationMs) * 1000)).toBeLessThan(r.totals.iops * 0.001 + 1);
    const l = r.totals.latencyUs;
    expect(l.count).toBe(r.totals.ios);
    expect(l.min).toBeLessThanOrEqual(l.p50);
    expect(l.p50).toBeLessThanOrEqual(l.p90);
    expect(l.p90).toBeLessThanOrEqual(l.p99);
    expect(l.p99).toBeLessThanOrEqual(l.p99_9);
    expect(l.p99_9).toBeLessThanOrEqual(l.max);
    expect(r.timeSeries.points.length).toBeGreaterThanOrEqual(5);
    expect(r.timeSeries.points.some((p) => p.iops > 0)).toBe(true);
    expect(r.latencyCdf.at(-1)?.[1]).toBe(1);
    expect(r.jobs[0]?.clones.map((c) => c.hctx)).toEqual(['rr.0', 'rr.1']);
    expect(r.jobs[0]?.clones.every((c) => c.ios > 0)).toBe(true);
    expect(r.queues.map((q) => q.queue)).toEqual(['q1', 'q2']);
    expect(r.queues.every((q) => q.commands > 0 && q.share > 0.3)).toBe(true);
    expect(r.cpu.label).toBe('initiator');
    expect(r.cpu.userMs + r.cpu.systemMs).toBeGreaterThan(0);
    expect(r.eventLoop.maxMs).toBeGreaterThanOrEqual(0);
  });

  it('size-based sequential writes cover the region exactly once, in order', async () => {
    const t = new MemoryBlockTarget({ capacityBlocks: 8192 });
    t.logEnabled = true;
    const r = await runJobs(t, jobs('[w]\nrw=write\nbs=8k\niodepth=4\noffset=1m\nsize=512k\n', t));
    expect(r.totals.writeIos).toBe(64);
    expect(r.totals.writeBytes).toBe(512 * 1024);
    expect(t.log.map((e) => e.lba)).toEqual(Array.from({ length: 64 }, (_, i) => 2048 + i * 16));
  });

  it('size-based random writes touch every block of the region exactly once (random map)', async () => {
    const t = new MemoryBlockTarget({ capacityBlocks: 8192 });
    t.logEnabled = true;
    await runJobs(t, jobs('[w]\nrw=randwrite\nbs=4k\niodepth=4\nsize=3000k\n', t));
    const lbas = t.log.map((e) => e.lba);
    expect(lbas).toHaveLength(750);
    expect(new Set(lbas).size).toBe(750);
    expect(lbas).not.toEqual([...lbas].sort((a, b) => a - b));
  });

  it('randrw honours rwmixread and bssplit weights; random offsets stay aligned inside the region', async () => {
    const t = new MemoryBlockTarget({ capacityBlocks: 65536 });
    t.logEnabled = true;
    const r = await runJobs(t, jobs('[m]\nrw=randrw\nrwmixread=75\nbssplit=4k/80:64k/20\niodepth=4\noffset=4m\nsize=8m\nio_size=6m\n', t));
    const frac = r.totals.readIos / r.totals.ios;
    expect(frac).toBeGreaterThan(0.6);
    expect(frac).toBeLessThan(0.9);
    const small = t.log.filter((e) => e.blocks === 8).length / t.log.length;
    expect(small).toBeGreaterThan(0.65);
    expect(small).toBeLessThan(0.92);
    for (const e of t.log) {
      expect(e.lba).toBeGreaterThanOrEqual(8192);
      expect(e.lba + e.blocks).toBeLessThanOrEqual(8192 + 16384);
      expect((e.lba * 512) % (e.blocks * 512)).toBe(0);
    }
    expect(r.totals.bytes).toBeGreaterThanOrEqual(6 * 1024 * 1024);
  });

  it('rate_iops caps the rate per clone', async () => {
    const t = new MemoryBlockTarget({ capacityBlocks: 65536 });
    const r = await runJobs(t, jobs('[r]\nrw=randread\niodepth=4\nrate_iops=200\nruntime=500ms\n', t));
    expect(r.totals.iops).toBeGreaterThan(120);
    expect(r.totals.iops).toBeLessThan(260);
  });

  it('ramp_time excludes warm-up I/O from the measurements but not from the time series', async () => {
    const t = new MemoryBlockTarget({ capacityBlocks: 65536, latencyUs: 1000 });
    const r = await runJobs(t, jobs('[r]\nrw=randread\niodepth=2\nramp_time=200ms\nruntime=200ms\n', t), { intervalMs: 40 });
    expect(r.durationMs).toBeGreaterThanOrEqual(195);
    expect(r.durationMs).toBeLessThan(350);
    expect(r.timeSeries.points.some((p) => p.ramp)).toBe(true);
    expect(r.timeSeries.points.some((p) => !p.ramp)).toBe(true);
    expect(r.wallMs).toBeGreaterThanOrEqual(395);
    const all = t.queueCounters()[0]?.commands ?? 0;
    expect(r.totals.ios).toBeLessThan(all * 0.75);
  });

  it('verify: write + read-back is clean; a corrupted block is reported with its LBA', async () => {
    const t = new MemoryBlockTarget({ capacityBlocks: 4096 });
    const spec = '[w]\nrw=randwrite\nbs=4k\niodepth=8\nsize=1m\nio_size=2m\nverify=crc32c\n[r]\nstonewall\nrw=read\nbs=4k\niodepth=8\nsize=1m\nverify=crc32c\n';
    const clean = await runJobs(t, jobs(spec, t));
    expect(clean.verify.enabled).toBe(true);
    expect(clean.verify.checkedBlocks).toBeGreaterThan(2048);
    expect(clean.verify.mismatchCount).toBe(0);

    // Everything written carries a header; flip one byte in the middle of the region.
    const written: number[] = [];
    for (let l = 0; l < 2048; l++) if (t.data.readUInt32LE(l * 512) !== 0) written.push(l);
    const victim = written[Math.floor(written.length / 2)] as number;
    t.corrupt(victim, 300);
    const bad = await runJobs(t, jobs('[r]\nrw=read\nbs=4k\niodepth=4\nsize=1m\nverify=crc32c\n', t));
    expect(bad.verify.mismatchCount).toBe(1);
    expect(bad.verify.mismatches[0]).toMatchObject({ lba: victim, reason: 'crc', job: 'r' });
  });

  it('verify during randrw never sees its own writes race (no false mismatches)', async () => {
    const t = new MemoryBlockTarget({ capacityBlocks: 256 });
    const r = await runJobs(t, jobs('[m]\nrw=randrw\nbs=4k\niodepth=16\nnumjobs=2\nsize=128k\nruntime=300ms\nverify=crc32c\n', t));
    expect(r.totals.writeIos).toBeGreaterThan(50);
    expect(r.verify.checkedBlocks).toBeGreaterThan(0);
    expect(r.verify.mismatches).toEqual([]);
  });

  it('an I/O error stops the job and is reported', async () => {
    const inner = new MemoryBlockTarget({ capacityBlocks: 4096 });
    let n = 0;
    const failing: BlockTarget = {
      blockSize: inner.blockSize,
      capacityBlocks: inner.capacityBlocks,
      read: (lba: number, blocks: number, ctx: SubmitContext) => (++n === 20 ? Promise.reject(new Error('boom')) : inner.read(lba, blocks, ctx)),
      write: (lba, d, ctx) => inner.write(lba, d, ctx),
    };
    const r = await runJobs(failing, jobs('[r]\nrw=randread\niodepth=1\nruntime=2s\n', failing));
    expect(r.totals.errors).toBe(1);
    expect(r.totals.ios).toBe(19);
    expect(r.errorMessages[0]).toMatch(/^r: read lba \d+ \+8: boom$/);
    expect(r.wallMs).toBeLessThan(1000);
  });

  it('stonewall runs groups one after another; progress is reported', async () => {
    const t = new MemoryBlockTarget({ capacityBlocks: 4096, latencyUs: 500 });
    t.logEnabled = true;
    const progress: number[] = [];
    await runJobs(t, jobs('[a]\nrw=write\nsize=256k\nbs=4k\niodepth=2\n[b]\nstonewall\nrw=read\nsize=256k\nbs=4k\niodepth=2\n', t), {
      intervalMs: 20,
      onProgress: (p) => progress.push(p.elapsedMs),
    });
    const firstRead = t.log.findIndex((e) => e.op === 'read');
    expect(firstRead).toBe(64);
    expect(t.log.slice(firstRead).every((e) => e.op === 'read')).toBe(true);
    expect(progress.length).toBeGreaterThan(1);
  });
});

describe('runJobs buffers and process measurements', () => {
  it('reads land in one reused buffer per in-flight slot (no allocation per I/O), and the data is what the target holds', async () => {
    const t = new MemoryBlockTarget({ capacityBlocks: 8192 });
    for (let i = 0; i < t.data.length; i += 4) t.data.writeUInt32LE(i, i);
    const seen = new Set<ArrayBufferLike>();
    let wrong = 0;
    const spy: BlockTarget = {
      blockSize: t.blockSize,
      capacityBlocks: t.capacityBlocks,
      read: async (lba, blocks, ctx, into) => {
        if (into !== undefined) seen.add(into.buffer);
        const got = await t.read(lba, blocks, ctx, into);
        if (!Buffer.from(got.buffer, got.byteOffset, got.byteLength).equals(t.data.subarray(lba * 512, (lba + blocks) * 512))) wrong++;
        return got;
      },
      write: (lba, data, ctx) => t.write(lba, data, ctx),
    };
    const r = await runJobs(spy, jobs('[rr]\nrw=randread\nbs=4k\niodepth=4\nsize=4m\n', spy));
    expect(r.totals.ios).toBe(1024);
    expect(wrong).toBe(0);
    // iodepth 4 → 4 slots → 4 backing buffers for 1024 reads.
    expect(seen.size).toBe(4);
  });

  it('reports this process\'s GC pauses and, on Linux, the machine-wide CPU next to ours', async () => {
    const t = new MemoryBlockTarget({ capacityBlocks: 65536 });
    const r = await runJobs(t, jobs('[w]\nrw=randwrite\nbs=4k\niodepth=8\nruntime=300ms\nverify=crc32c\n', t), {
      targetCpu: async () => ({ userMs: 0, systemMs: 0 }),
      targetCpuSource: 'test',
    });
    expect(r.gc).toBeDefined();
    expect(r.gc?.count).toBeGreaterThanOrEqual(r.gc?.majorCount ?? 0);
    expect(r.gc?.maxMs).toBeLessThanOrEqual(r.gc?.totalMs ?? 0);
    expect(r.cpu.target?.source).toBe('test');
    if (process.platform === 'linux') {
      expect(r.cpu.machine?.cores).toBeGreaterThan(0);
      // The machine was at least as busy as this process (within tick rounding: /proc/stat counts in 10 ms ticks).
      expect(r.cpu.machine?.busyPercentOfCore ?? 0).toBeGreaterThanOrEqual(r.cpu.percentOfCore - 15);
    }
  });
});
