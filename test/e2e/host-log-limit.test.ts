// A host decides nothing about how much the target logs: N refused Set Features on one controller, and N refused
// Connects on N connections of one port, each write at most the limit's lines (then a summary), while
// nvme_tcp_host_refusals_total counts exactly N of each (target/core/host-log.ts).
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { connect } from '../../initiator/index.js';
import { AdminOpcode, encodeSqe } from '../../protocol/index.js';
import { TargetService } from '../../target/index.js';
import { HOST_LOG_LIMIT } from '../../target/core/index.js';
import { startApi } from '../../target/mgmt/index.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const NQN = 'nqn.2024-01.io.test:host-log';
const cleanups = cleanupAfterEach();

interface Line {
  level: number;
  msg: string;
  suppressed?: Record<string, number>;
}

async function setup(): Promise<{ lines: Line[]; port: number; metric: (reason: string) => Promise<number> }> {
  const lines: Line[] = [];
  const sink = new Writable({ write: (c: Buffer, _e, cb) => (lines.push(JSON.parse(c.toString()) as Line), cb()) });
  const t = new TargetService({ logger: pino({ level: 'info' }, sink) });
  cleanups.push(() => t.stop());
  const { port } = await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 });
  await t.addSubsystem({ nqn: NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] });
  const api = await startApi(t, { listen: '127.0.0.1:0' });
  cleanups.push(() => api.close());
  const metric = async (reason: string): Promise<number> => {
    const text = await (await fetch(`${api.url}/metrics`)).text();
    const m = new RegExp(`^nvme_tcp_host_refusals_total\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(text);
    if (m === null) throw new Error(`no nvme_tcp_host_refusals_total{reason="${reason}"} in /metrics`);
    return Number(m[1]);
  };
  return { lines, port, metric };
}

describe('host-caused log lines are rate-limited and counted', () => {
  it('N refused Set Features on one controller: at most the limit logged, a summary of the rest at teardown, /metrics counts N', async () => {
    const { lines, port, metric } = await setup();
    const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, nr_io_queues: 1, max_retries: 0 });
    const N = 60;
    let refused = 0;
    for (let i = 0; i < N; i++) {
      // FID 0xEE is no feature: Invalid Field in Command (NVMe Base 2.0 §5.27.1).
      const sqe = encodeSqe({ opcode: AdminOpcode.SET_FEATURES, cid: 0, cdw10: 0xee, cdw11: i });
      await c.adminCommand(sqe).catch(() => refused++);
    }
    expect(refused).toBe(N);
    const logged = lines.filter((l) => l.msg.startsWith('Set Features refused'));
    expect(logged).toHaveLength(HOST_LOG_LIMIT.burst);
    expect(await metric('set_features')).toBe(N);
    await c.disconnect();
    // Teardown (the admin queue closing) writes the count of what was left out.
    await vi.waitFor(() => expect(lines.filter((l) => l.suppressed !== undefined).map((l) => l.suppressed)).toEqual([{ set_features: N - HOST_LOG_LIMIT.burst }]), { timeout: 3000 });
  }, 20_000);

  it('N refused Connects on N connections of one port: the port limits the lines, /metrics counts N', async () => {
    const { lines, port, metric } = await setup();
    const N = 25;
    for (let i = 0; i < N; i++) {
      await expect(connect({ traddr: '127.0.0.1', trsvcid: port, nqn: 'nqn.2024-01.io.test:nobody', max_retries: 0, ctrl_loss_tmo: 0 })).rejects.toThrow();
    }
    expect(lines.filter((l) => l.msg.startsWith('connect refused'))).toHaveLength(HOST_LOG_LIMIT.burst);
    expect(await metric('connect')).toBe(N);
    expect(await metric('set_features')).toBe(0);
  }, 30_000);
});
