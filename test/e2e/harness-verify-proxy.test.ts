// Verify mode end to end: initiator -> fault proxy -> target. One byte flipped in the c2h direction (data digests
// off, so the transport cannot notice) must be reported by the engine's block check, with the LBA it hit.
import { afterEach, describe, expect, it } from 'vitest';
import { connect, type Controller } from '../../initiator/index.js';
import { runJobs } from '../../harness/load/engine.js';
import { parseFioJobFile, resolveJobs } from '../../harness/load/job-file.js';
import { controllerBlockTarget, startInProcessTarget, type InProcessTarget } from '../../harness/nvme.js';
import { FaultProxy } from '../../harness/peers/proxy.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

/** C2HData header with header digest off and CPDA 0: 24 bytes, then the data (NVMe/TCP 1.0 §3.6.2.10). */
const C2H_HEADER = 24;

async function setup(): Promise<{ target: InProcessTarget; proxy: FaultProxy; ctrl: Controller }> {
  const target = await startInProcessTarget({ size: '8M' });
  cleanups.push(() => target.stop());
  const proxy = await FaultProxy.start({ upstreamHost: target.addr, upstreamPort: target.port });
  cleanups.push(() => proxy.close());
  const ctrl = await connect({ traddr: '127.0.0.1', trsvcid: proxy.port, nqn: target.nqn, nr_io_queues: 1, data_digest: false, hdr_digest: false });
  cleanups.push(() => ctrl.disconnect());
  return { target, proxy, ctrl };
}

const WRITE = '[w]\nrw=write\nbs=4k\niodepth=4\nsize=1m\nverify=crc32c\n';
const READ = '[r]\nrw=read\nbs=4k\niodepth=1\nsize=1m\nverify=crc32c\n';

describe('verify through the fault proxy', () => {
  it('a clean path verifies every block; one corrupted c2h byte is reported with its LBA', async () => {
    const { proxy, ctrl } = await setup();
    const bt = controllerBlockTarget(ctrl, 1);
    const written = await runJobs(bt, resolveJobs(parseFioJobFile(WRITE), bt));
    expect(written.totals.writeIos).toBe(256);
    expect(written.verify.mismatchCount).toBe(0);
    expect(written.verify.checkedBlocks).toBe(2048);

    const clean = await runJobs(bt, resolveJobs(parseFioJobFile(READ), bt));
    expect(clean.verify.checkedBlocks).toBe(2048);
    expect(clean.verify.mismatchCount).toBe(0);

    // Find the I/O queue's connection by its source port and aim at byte 1000 of the next read's data:
    // LBA 0 is 512 bytes, so byte 1000 lies in LBA 1 of the first 4 KiB read.
    const ioq = ctrl.queueInfo()[0];
    const port = Number(ioq?.source.split(':').at(-1));
    const conn = proxy.connections().find((c) => c.clientPort === port && !c.closed);
    expect(conn, 'proxy connection of I/O queue 1').toBeDefined();
    const id = conn?.id as number;
    proxy.setFaults({ toClient: { corruptAtOffset: (conn?.bytes.toClient ?? 0) + C2H_HEADER + 1000 } }, id);

    const bad = await runJobs(bt, resolveJobs(parseFioJobFile(READ), bt));
    expect(proxy.connections()[id]?.corrupted.toClient).toBe(true);
    expect(bad.totals.errors).toBe(0);
    expect(bad.verify.mismatchCount).toBe(1);
    expect(bad.verify.mismatches[0]).toMatchObject({ lba: 1, reason: 'crc', job: 'r' });
  });
});
