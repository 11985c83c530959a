// SPDK's host as a catalogue host: spdk_nvme_perf (harness/peers/spdk.ts) against the catalogue target. perf counts
// errors but compares no data and names no block, so its cells rest on its error lines, its exit and whether it came
// back within a bounded wait.
import { CATALOGUE_NQN } from '../cases.js';
import { emptyEvidence, type CaseContext, type HostAdapter } from '../runner.js';
import type { CatalogueTarget } from '../target.js';
import type { CatalogueCase, HostEvidence, HostInfo } from '../types.js';
import { findSpdk, runSpdkTool, spdkSkipReason, transportId } from '../../peers/spdk.js';

/** Bounded wait past perf's own run time: perf sets no I/O timeout, so a lost command would keep it waiting. */
const GRACE_S = 30;

export class SpdkPerfHost implements HostAdapter {
  readonly id = 'spdk-perf';
  #target: CatalogueTarget | undefined;

  async open(target: CatalogueTarget): Promise<string | undefined> {
    this.#target = target;
    return spdkSkipReason();
  }

  info(): HostInfo {
    return {
      id: this.id,
      describe: `SPDK spdk_nvme_perf (${findSpdkDir()}), --no-huge, one core, QD 4, 4 KiB`,
      notes: [
        'perf compares no data (no data-mismatch verdict possible) and does not name failed blocks',
        'perf sets no command timeout: a command that never completes keeps it waiting until the bounded wait kills it',
        'no pcap: neither tshark, dumpcap nor tcpdump is installed on the machine that ran this',
      ],
    };
  }

  cannot(c: CatalogueCase): string | undefined {
    if (c.workload.reauth === true) return 'spdk_nvme_perf has no DH-HMAC-CHAP re-authentication to drive (bdev_nvme_set_keys would; not wired here)';
    if (c.workload.multipath === true) return 'spdk_nvme_perf drives each -r controller on its own: it has no multipath (bdev_nvme has; not wired here)';
    return undefined;
  }

  async #perf(workload: string, seconds: number, c: CatalogueCase): Promise<{ code: number | null; out: string; killed: boolean; argv: string }> {
    const t = this.#target as CatalogueTarget;
    const k = c.workload.connect ?? {};
    const args = ['--no-huge', '-s', '1024', '-c', '0x1', '-q', '4', '-o', '4096', '-w', workload, '-t', String(seconds),
      ...(k.keepAliveTmoS === undefined ? [] : ['-k', String(k.keepAliveTmoS * 1000)]),
      ...(k.nrIoQueues === undefined ? [] : ['-P', String(k.nrIoQueues)]),
      ...(k.digests === true ? ['-H', '-I'] : []),
      '-r', transportId({ traddr: '127.0.0.1', trsvcid: t.portOf(1), subnqn: CATALOGUE_NQN })];
    const t0 = performance.now();
    const r = await runSpdkTool(findSpdk().perf, args, (seconds + GRACE_S) * 1000);
    return { ...r, killed: r.code === null && performance.now() - t0 >= (seconds + GRACE_S) * 1000 - 100, argv: `spdk_nvme_perf ${args.join(' ')}` };
  }

  async run(c: CatalogueCase, ctx: CaseContext): Promise<HostEvidence> {
    const ev = emptyEvidence();
    ev.facts['blocksAttributed'] = false;
    const lines: string[] = [];
    const w = c.workload;
    if (w.armAt === 'after-write') {
      const r = await this.#perf('write', 1, c);
      lines.push(`$ ${r.argv}\n${r.out}(exit ${String(r.code)})`);
      ctx.arm();
    } else ctx.arm();
    const r = await this.#perf('read', 2 + (w.idleS ?? 0), c);
    lines.push(`$ ${r.argv}\n${r.out}(exit ${String(r.code)})`);
    if (r.killed) ev.hung = `spdk_nvme_perf did not exit within ${2 + (w.idleS ?? 0) + GRACE_S} s`;
    const errors = r.out.split('\n').filter((l) => /completed with error|\*ERROR\*|No valid NVMe controllers|failed/i.test(l));
    if (/No valid NVMe controllers|spdk_nvme_connect\(\) failed|Attaching to .* failed/i.test(r.out) || (r.code !== 0 && r.code !== null && !/^Total\s*:/m.test(r.out))) {
      ev.connectError = errors[0] ?? `exit ${String(r.code)}`;
      const left = await ctx.target.settled();
      ev.facts['leftControllers'] = left.controllers;
      ev.facts['leftQueues'] = left.queues;
      const again = await this.#perf('read', 1, c);
      lines.push(`$ ${again.argv}\n${again.out}(exit ${String(again.code)})`);
      ev.retryConnected = again.code === 0 && /^Total\s*:/m.test(again.out);
    } else if (errors.some((l) => /completed with error/.test(l))) {
      ev.ioErrors = errors.find((l) => /completed with error/.test(l)) as string;
    }
    const total = /^Total\s*:\s*([\d.]+)/m.exec(r.out);
    if (total !== null) ev.facts['iops'] = Number(total[1]);
    ev.facts['errorLines'] = errors.length;
    ev.log = lines.join('\n\n') + '\n';
    return ev;
  }

  async close(): Promise<void> {
    this.#target = undefined;
  }
}

function findSpdkDir(): string {
  try {
    return findSpdk().dir;
  } catch {
    return 'not built';
  }
}
