// SPDK v26.05 against our target's I/O command sets (issue 47). spdk_nvme_identify reads the I/O command set
// structures (CNS 05h/06h with CSI 02h), ONCS and the Copy limits, and the zone report (Zone Management Receive, -z),
// checked against the zones our target holds. SPDK's spdk_nvme_perf has no zoned workload and bdevperf no copy or zone
// workload (bdev_nvme has the I/O types, no tool here sends them): docs/peers.md.
//
// nvme_fuzz (random I/O SQEs through SPDK's host, test/app/fuzz/nvme_fuzz) against a zoned RAM namespace and a
// conventional one, every command of issue 47 enabled. "Verify clean" here means what can honestly be checked after
// random commands: the target process is alive and answers Identify and I/O on the fuzzed subsystem, and a second
// subsystem the fuzzer never connects to (same process, same backend code) reads back exactly the pattern written
// before the run. The fuzzed namespaces' bytes are not compared: the fuzzer may write, copy, format or reset any LBA
// it can name. SPDK must be built with nvme_fuzz (test/interop/labs.sh); without its source the file skips.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { findNvmeFuzz, findSpdk, runSpdkTool, spdkIdentify, spdkSkipReason } from '../../harness/peers/spdk.js';
import { connect } from '../../initiator/index.js';
import { TargetService, type SubsystemConfig } from '../../target/index.js';

const FUZZ_NQN = 'nqn.2024-01.io.nvme-tcp-ts:spdk-fuzz';
const GUARD_NQN = 'nqn.2024-01.io.nvme-tcp-ts:spdk-fuzz-guard';
const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:5bd1c0de-0000-4000-8000-00000000f022';
/** Fixed so a failure can be replayed with the same command stream (nvme_fuzz -S). */
const SEED = 1234;
const SECONDS = 20;
const ZNS_NQN = 'nqn.2024-01.io.nvme-tcp-ts:spdk-zns';
/** 1 MiB zones of 512-byte blocks. */
const ZONE_LBAS = 2048;

/** SPDK identify's zone-state words (app/spdk_nvme_identify/identify.c print_zns_zone) for ours. */
const SPDK_ZS: Record<string, string> = { empty: 'Empty', 'imp-open': 'Implicit open', 'exp-open': 'Explicit open', closed: 'Closed', full: 'Full', 'read-only': 'Read only', offline: 'Offline' };

const noSpdk = spdkSkipReason();
if (noSpdk !== undefined) describe('SPDK host, I/O command sets', () => it.skip(noSpdk, () => undefined));

let target: TargetService | undefined;
afterEach(async () => {
  await target?.stop();
  target = undefined;
});

/**
 * Our target on 127.0.0.1 (port 0): `nqn` with a zoned RAM namespace 1 (1 MiB zones, MOR 4, MAR 6) and a conventional
 * RAM namespace 2, each `size`, plus `more` subsystems. Returns the bound port.
 */
async function startTarget(nqn: string, size: string, more: SubsystemConfig[] = []): Promise<number> {
  target = new TargetService();
  await target.apply({
    ports: [{ id: 1, addr: '127.0.0.1', port: 0 }],
    subsystems: [
      {
        nqn,
        namespaces: [
          { nsid: 1, backend: { type: 'ram', size }, zoned: { zoneSize: '1M', maxOpen: 4, maxActive: 6 } },
          { nsid: 2, backend: { type: 'ram', size } },
        ],
      },
      ...more,
    ],
  });
  return target.boundPorts()[0]!.port;
}

describe.skipIf(noSpdk !== undefined)('SPDK nvme_fuzz against our target', () => {
  it(`${SECONDS} s of random I/O commands (seed ${SEED}): target alive, guard subsystem unchanged`, async () => {
    const fuzz = findNvmeFuzz(findSpdk());
    const port = await startTarget(FUZZ_NQN, '16M', [{ nqn: GUARD_NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '4M' } }] }]);
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

describe.skipIf(noSpdk !== undefined)('SPDK host against a zoned namespace', () => {
  it('spdk_nvme_identify -z: ZNS data, Copy limits, and a zone report equal to the target zones', async () => {
    findSpdk();
    const port = await startTarget(ZNS_NQN, '8M');
    // Four zone states for the report: zone 1 implicitly open (a write), 2 explicitly open, 3 full, the rest empty.
    const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: ZNS_NQN, nr_io_queues: 1 });
    try {
      const ns = c.namespace(1);
      await ns.write(ZONE_LBAS, Buffer.alloc(8 * 512, 0x5a));
      await ns.zones.open(2 * ZONE_LBAS);
      await ns.zones.finish(3 * ZONE_LBAS);
    } finally {
      await c.disconnect();
    }

    const id = await spdkIdentify({ traddr: '127.0.0.1', trsvcid: port, subnqn: ZNS_NQN, hostnqn: HOSTNQN }, { args: ['-z'] });
    expect(id.code, id.out.slice(-3000)).toBe(0);
    expect(id.out).toContain('ZNS Specific Controller Data');
    expect(id.out).toContain('ZNS Specific Namespace Data');
    expect(id.out).toMatch(/Read Across Zone Boundaries:\s+Yes/);
    expect(id.out).toMatch(/Max Active Resources:\s+6\b/);
    expect(id.out).toMatch(/Max Open Resources:\s+4\b/);
    expect(id.out).toContain(`Zone Size (in LBAs): 0x${ZONE_LBAS.toString(16)} `);
    // The issue-47 NVM commands as SPDK reads ONCS and the Copy limits (MSSRL 1024, MCL 4096, MSRC 127).
    expect(id.out).toMatch(/Write Uncorrectable Command:\s+Supported/);
    expect(id.out).toMatch(/Copy:\s+Supported/);
    expect(id.out).toMatch(/Maximum Single Source Range Length:\s+1024\n/);
    expect(id.out).toMatch(/Maximum Copy Length:\s+4096\n/);
    expect(id.out).toMatch(/Maximum Source Range Count:\s+128\n/);
    const report = [...id.out.matchAll(/ZSLBA: 0x([0-9a-f]+) ZCAP: 0x([0-9a-f]+) WP: 0x([0-9a-f]+) ZS: ([A-Za-z ]+?) ZT:/g)].map((m) => ({
      zslba: parseInt(m[1]!, 16),
      zcap: parseInt(m[2]!, 16),
      wp: parseInt(m[3]!, 16),
      zs: m[4],
    }));
    const ours = target!.zones(ZNS_NQN, 1)!;
    expect(ours.map((z) => z.state).slice(0, 4)).toEqual(['empty', 'imp-open', 'exp-open', 'full']);
    expect(report).toEqual(ours.map((z) => ({ zslba: z.zslba, zcap: z.zcap, wp: z.wp, zs: SPDK_ZS[z.state] })));
  }, 60_000);
});
