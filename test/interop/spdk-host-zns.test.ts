// SPDK v26.05's host against our target's zoned namespace where SPDK's host tools have the commands:
// spdk_nvme_identify reads the I/O command set structures (CNS 05h/06h with CSI 02h), ONCS and the Copy limits, and
// the zone report (Zone Management Receive, -z), checked against the zones our target holds. SPDK's spdk_nvme_perf has no zoned workload
// and bdevperf no copy or zone workload (bdev_nvme has the I/O types, no tool here sends them): docs/peers.md.
// SPDK must be built ($SPDK_SRC/build.sh); without its source the file skips with one line saying how.
import { afterAll, describe, expect, it } from 'vitest';
import { findSpdk, spdkIdentify, spdkSkipReason } from '../../harness/peers/spdk.js';
import { connect } from '../../initiator/index.js';
import { TargetService } from '../../target/index.js';

const NQN = 'nqn.2024-01.io.nvme-tcp-ts:spdk-zns';
const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:5bd1c0de-0000-4000-8000-00000000f023';
/** 1 MiB zones of 512-byte blocks. */
const ZONE_LBAS = 2048;

/** SPDK identify's zone-state words (app/spdk_nvme_identify/identify.c print_zns_zone) for ours. */
const SPDK_ZS: Record<string, string> = { empty: 'Empty', 'imp-open': 'Implicit open', 'exp-open': 'Explicit open', closed: 'Closed', full: 'Full', 'read-only': 'Read only', offline: 'Offline' };

const noSpdk = spdkSkipReason();
if (noSpdk !== undefined) describe('SPDK host, zoned', () => it.skip(noSpdk, () => undefined));

let target: TargetService | undefined;
afterAll(async () => {
  await target?.stop();
});

describe.skipIf(noSpdk !== undefined)('SPDK host against a zoned namespace', () => {
  it('spdk_nvme_identify -z: ZNS data, Copy limits, and a zone report equal to the target zones', async () => {
    findSpdk();
    target = new TargetService();
    await target.apply({
      ports: [{ id: 1, addr: '127.0.0.1', port: 0 }],
      subsystems: [
        {
          nqn: NQN,
          namespaces: [
            { nsid: 1, backend: { type: 'ram', size: '8M' }, zoned: { zoneSize: '1M', maxOpen: 4, maxActive: 6 } },
            { nsid: 2, backend: { type: 'ram', size: '8M' } },
          ],
        },
      ],
    });
    const port = target.boundPorts()[0]!.port;
    // Four zone states for the report: zone 1 implicitly open (a write), 2 explicitly open, 3 full, the rest empty.
    const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, nr_io_queues: 1 });
    try {
      const ns = c.namespace(1);
      await ns.write(ZONE_LBAS, Buffer.alloc(8 * 512, 0x5a));
      await ns.zones.open(2 * ZONE_LBAS);
      await ns.zones.finish(3 * ZONE_LBAS);
    } finally {
      await c.disconnect();
    }

    const id = await spdkIdentify({ traddr: '127.0.0.1', trsvcid: port, subnqn: NQN, hostnqn: HOSTNQN }, { args: ['-z'] });
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
    const ours = target.zones(NQN, 1)!;
    expect(ours.map((z) => z.state).slice(0, 4)).toEqual(['empty', 'imp-open', 'exp-open', 'full']);
    expect(report).toEqual(ours.map((z) => ({ zslba: z.zslba, zcap: z.zcap, wp: z.wp, zs: SPDK_ZS[z.state] })));
  }, 60_000);
});
