// SPDK v26.05's nvme_fuzz (random admin and I/O SQEs through SPDK's host, test/app/fuzz/nvme_fuzz) against our target
// exporting a zoned RAM namespace and a conventional one, every command of issue 47 enabled. "Verify clean" here
// means what can honestly be checked after random commands: the target process is alive and answers Identify and I/O
// on the fuzzed subsystem, and a second subsystem the fuzzer never connects to (same process, same backend code) reads
// back exactly the pattern written before the run. The fuzzed namespaces' bytes are not compared: the fuzzer may write,
// copy, format or reset any LBA it can name. SPDK must be built with nvme_fuzz (test/interop/labs.sh).
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { findNvmeFuzz, findSpdk, runSpdkTool, spdkIdentify, spdkSkipReason } from '../../harness/peers/spdk.js';
import { connect } from '../../initiator/index.js';
import { TargetService } from '../../target/index.js';

const FUZZ_NQN = 'nqn.2024-01.io.nvme-tcp-ts:spdk-fuzz';
const GUARD_NQN = 'nqn.2024-01.io.nvme-tcp-ts:spdk-fuzz-guard';
const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:5bd1c0de-0000-4000-8000-00000000f022';
/** Fixed so a failure can be replayed with the same command stream (nvme_fuzz -S). */
const SEED = 1234;
const SECONDS = 20;

const noSpdk = spdkSkipReason();
if (noSpdk !== undefined) describe('SPDK nvme_fuzz', () => it.skip(noSpdk, () => undefined));

let target: TargetService | undefined;
afterAll(async () => {
  await target?.stop();
});

describe.skipIf(noSpdk !== undefined)('SPDK nvme_fuzz against our target', () => {
  it(`${SECONDS} s of random I/O commands (seed ${SEED}): target alive, guard subsystem unchanged`, async () => {
    const fuzz = findNvmeFuzz(findSpdk());
    target = new TargetService();
    await target.apply({
      ports: [{ id: 1, addr: '127.0.0.1', port: 0 }],
      subsystems: [
        {
          nqn: FUZZ_NQN,
          namespaces: [
            { nsid: 1, backend: { type: 'ram', size: '16M' }, zoned: { zoneSize: '1M', maxOpen: 4, maxActive: 8 } },
            { nsid: 2, backend: { type: 'ram', size: '16M' } },
          ],
        },
        { nqn: GUARD_NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '4M' } }] },
      ],
    });
    const port = target.boundPorts()[0]!.port;
    const pattern = randomBytes(1024 * 1024);
    const guard = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: GUARD_NQN, nr_io_queues: 1 });
    try {
      await guard.namespace(1).write(0, pattern);
    } finally {
      await guard.disconnect();
    }

    const trid = `trtype:TCP adrfam:IPv4 traddr:127.0.0.1 trsvcid:${port} subnqn:${FUZZ_NQN} hostnqn:${HOSTNQN}`;
    // -N only active NSIDs (reaches the command sets, not just Invalid Namespace), -U no IOMMU check (TCP: the
    // fuzzer's buffers are never DMA targets). No -a: with it nvme_fuzz's own admin submission fails with -ENOMEM
    // ("Unable to submit command with rc -12"), counts that unsent command as outstanding and reports an admin-queue
    // timeout while our target has nothing left to answer (docs/reliability.md).
    const run = await runSpdkTool(fuzz, ['--no-huge', '-s', '512', '-m', '0x1', '-F', trid, '-t', String(SECONDS), '-S', String(SEED), '-N', '-U'], (SECONDS + 60) * 1000);
    const totals = [...run.out.matchAll(/Total commands completed: (\d+), total successful commands: (\d+)/g)];
    console.log(`nvme_fuzz exit ${run.code}\n${run.out.split('\n').filter((l) => /NS:|Dumping|^[0-9, ]+$|timed out|Unable/.test(l)).join('\n')}`);
    expect(run.code, run.out.slice(-4000)).toBe(0);
    expect(totals.length, run.out.slice(-4000)).toBeGreaterThan(0);
    expect(totals.reduce((n, m) => n + Number(m[1]), 0)).toBeGreaterThan(0);
    expect(run.out).not.toMatch(/timed out|timeout/i);

    // Alive: SPDK's identify and our initiator's I/O still work on the fuzzed subsystem.
    const id = await spdkIdentify({ traddr: '127.0.0.1', trsvcid: port, subnqn: FUZZ_NQN, hostnqn: HOSTNQN });
    expect(id.code, id.out.slice(-2000)).toBe(0);
    expect(id.out).toContain(FUZZ_NQN);
    const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: FUZZ_NQN, nr_io_queues: 1 });
    try {
      const ns = c.namespace(2);
      const fresh = randomBytes(ns.blockSize * 8);
      await ns.write(0, fresh);
      expect((await ns.read(0, 8)).equals(fresh)).toBe(true);
    } finally {
      await c.disconnect();
    }
    // Clean: the subsystem the fuzzer never reached holds exactly what was written before the run.
    const g = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: GUARD_NQN, nr_io_queues: 1 });
    try {
      expect((await g.namespace(1).read(0, pattern.length / g.namespace(1).blockSize)).equals(pattern)).toBe(true);
    } finally {
      await g.disconnect();
    }
  }, (SECONDS + 120) * 1000);
});
