// Target statistics end to end with real traffic from our initiator: per-opcode latency histograms in stats() and
// as nvme_tcp_command_latency_seconds on /metrics, lastKeepAlive/lastCommand and each queue's setup times in
// GET /controllers, and failNext failures counted as namespace errors rather than reads/writes.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { connect, type Controller } from '../../initiator/index.js';
import { AdminOpcode, Status, encodeSqe } from '../../protocol/index.js';
import { TargetService, parseFaultRule, type ControllerInfo } from '../../target/index.js';
import { startApi, type ApiHandle } from '../../target/mgmt/index.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const SUBNQN = 'nqn.2024-01.io.test:stats';
const DNR = 0x4000;
const BOUNDS = [10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000];

const cleanups = cleanupAfterEach();

async function setup(before?: (t: TargetService) => void): Promise<{ t: TargetService; c: Controller; api: ApiHandle }> {
  const t = new TargetService();
  cleanups.push(() => t.stop());
  await t.apply({ ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] }] });
  before?.(t);
  const api = await startApi(t, { listen: '127.0.0.1:0' });
  cleanups.push(() => api.close());
  const port = (t.boundPorts()[0] as { port: number }).port;
  // KATO 60 s: the host's own Keep Alive (every 15 s under TBKAS, and only when idle) never fires during a test.
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: SUBNQN, nr_io_queues: 1, keep_alive_tmo: 60 });
  cleanups.push(() => c.disconnect());
  return { t, c, api };
}

/** Samples of one metric family from the Prometheus text, labels as a plain object. */
async function metric(api: ApiHandle, name: string): Promise<Array<{ labels: Record<string, string>; value: number }>> {
  const text = await (await fetch(`${api.url}/metrics`)).text();
  const out: Array<{ labels: Record<string, string>; value: number }> = [];
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] as string).matchAll(/(\w+)="([^"]*)"/g)) labels[l[1] as string] = l[2] as string;
    out.push({ labels, value: m[3] === '+Inf' ? Infinity : Number(m[3]) });
  }
  return out;
}

describe('target statistics with real traffic', () => {
  it('latency histograms count every command once, land in the right buckets, and render as Prometheus histograms', async () => {
    const { t, c, api } = await setup();
    const ns = c.namespace(1);
    for (let i = 0; i < 20; i++) await ns.write(i * 8, Buffer.alloc(4096, i));
    for (let i = 0; i < 10; i++) await ns.read(i * 8, 8);
    // 3 ms of injected latency per I/O: these writes must sit in the (2.5 ms, 5 ms] bucket or above.
    t.setFaults(SUBNQN, { commandLatencyUs: 3000 });
    for (let i = 0; i < 5; i++) await ns.write(0, Buffer.alloc(512, 9));
    t.setFaults(SUBNQN, {});

    const s = t.stats().subsystems[SUBNQN];
    const w = s?.latency.write;
    const r = s?.latency.read;
    expect(w?.boundsUs).toEqual(BOUNDS);
    expect(w?.counts).toHaveLength(BOUNDS.length + 1);
    expect(w?.count).toBe(25);
    expect(r?.count).toBe(10);
    expect(w?.counts.reduce((a, b) => a + b, 0)).toBe(25);
    expect(r?.counts.reduce((a, b) => a + b, 0)).toBe(10);
    expect(s?.opcodes.write).toBe(25);
    // the 5 slow writes: ≥ 3 ms each
    const slow = (w?.counts ?? []).slice(BOUNDS.indexOf(2500) + 1).reduce((a, b) => a + b, 0);
    expect(slow).toBeGreaterThanOrEqual(5);
    expect(w?.sumUs).toBeGreaterThanOrEqual(5 * 3000);
    expect(r?.sumUs).toBeGreaterThan(0);
    // Admin commands of the connect (Identify, Set/Get Features, ...) are timed too; AERs are held open and are not.
    expect(s?.latency['identify']?.count).toBe(s?.opcodes['identify']);
    expect(s?.latency['async-event']).toBeUndefined();
    expect(s?.opcodes['async-event']).toBeGreaterThan(0);

    const name = 'nvme_tcp_command_latency_seconds';
    const buckets = (await metric(api, `${name}_bucket`)).filter((x) => x.labels.subnqn === SUBNQN && x.labels.opcode === 'write');
    expect(buckets.map((b) => b.labels.le)).toEqual([...BOUNDS.map((b) => String(b / 1e6)), '+Inf']);
    const cum = buckets.map((b) => b.value);
    expect(cum).toEqual([...cum].sort((a, b) => a - b)); // cumulative
    expect(cum.at(-1)).toBe(25);
    expect(buckets.find((b) => b.labels.le === '0.0025')?.value).toBeLessThanOrEqual(20);
    const count = (await metric(api, `${name}_count`)).find((x) => x.labels.opcode === 'read' && x.labels.subnqn === SUBNQN);
    expect(count?.value).toBe(10);
    const sum = (await metric(api, `${name}_sum`)).find((x) => x.labels.opcode === 'write' && x.labels.subnqn === SUBNQN);
    expect(sum?.value).toBeCloseTo((w?.sumUs ?? 0) / 1e6, 6);
  });

  it('GET /controllers shows lastCommand for any command and lastKeepAlive only after a Keep Alive', async () => {
    const { c, api } = await setup();
    const get = async (): Promise<ControllerInfo> => {
      const list = (await (await fetch(`${api.url}/controllers`)).json()) as ControllerInfo[];
      const x = list.find((l) => !l.discovery);
      if (x === undefined) throw new Error('no controller');
      return x;
    };
    const first = await get();
    expect(first.lastKeepAlive).toBeNull();
    expect(typeof first.lastCommand).toBe('number');

    await new Promise((r) => setTimeout(r, 30));
    const beforeIo = Date.now();
    await c.namespace(1).read(0, 1);
    const afterIo = await get();
    expect(afterIo.lastCommand).toBeGreaterThanOrEqual(beforeIo - 1);
    expect(afterIo.lastCommand).toBeLessThanOrEqual(Date.now() + 1);
    expect(afterIo.lastKeepAlive).toBeNull();

    const beforeKa = Date.now();
    await c.adminCommand(encodeSqe({ opcode: AdminOpcode.KEEP_ALIVE, cid: 0 }));
    const afterKa = await get();
    expect(afterKa.lastKeepAlive).toBeGreaterThanOrEqual(beforeKa - 1);
    expect(afterKa.lastKeepAlive).toBeLessThanOrEqual(Date.now() + 1);
    expect(afterKa.lastCommand).toBeGreaterThanOrEqual(afterKa.lastKeepAlive as number);
  });

  it('GET /controllers shows each queue\'s ICReq, Connect and first-command times, the first command\'s kept', async () => {
    const ICRESP_DELAY_MS = 40;
    const t0 = Date.now();
    // ICResp 40 ms late on every connection: each queue's Connect comes at least that long after its ICReq.
    const { c, api } = await setup((t) => t.addFaultRule(parseFaultRule({ match: { event: 'icreq' }, action: { kind: 'icresp', delayMs: ICRESP_DELAY_MS } })));
    const queues = async (): Promise<ControllerInfo['queues']> => {
      const list = (await (await fetch(`${api.url}/controllers`)).json()) as ControllerInfo[];
      return list.find((l) => !l.discovery)?.queues ?? [];
    };
    const setupDone = Date.now();
    const [admin, io] = await queues();
    for (const q of [admin, io]) {
      expect(q?.icReqAt).toBeGreaterThanOrEqual(t0 - 1);
      expect((q?.connectAt ?? 0) - (q?.icReqAt ?? 0)).toBeGreaterThanOrEqual(ICRESP_DELAY_MS - 1);
      expect(q?.connectAt).toBeLessThanOrEqual(setupDone + 1);
    }
    // The admin queue carried the setup's Property Get/Set and Identify; the I/O queue nothing after its Connect.
    expect(admin?.firstCommandAt).toBeGreaterThanOrEqual(admin?.connectAt ?? Infinity);
    expect(io?.qid).toBe(1);
    expect(io?.firstCommandAt).toBeUndefined();

    await new Promise((r) => setTimeout(r, 20));
    const beforeIo = Date.now();
    await c.namespace(1).read(0, 1);
    const first = (await queues())[1]?.firstCommandAt;
    expect(first).toBeGreaterThanOrEqual(beforeIo - 1);
    expect(first).toBeLessThanOrEqual(Date.now() + 1);
    await new Promise((r) => setTimeout(r, 20));
    await c.namespace(1).read(0, 1);
    const again = (await queues())[1];
    expect(again?.firstCommandAt).toBe(first);
    expect(again?.commands).toBe(3);
  });

  it('commands failed by failNext are namespace errors, not reads/writes (stats and /metrics)', async () => {
    const { t, c, api } = await setup();
    const ns = c.namespace(1);
    await ns.write(0, Buffer.alloc(1024, 1));
    await ns.read(0, 2);
    t.setFaults(SUBNQN, { failNext: { count: 3, status: Status.INVALID_FIELD | DNR } });
    await expect(ns.read(0, 2)).rejects.toMatchObject({ status: Status.INVALID_FIELD | DNR });
    await expect(ns.write(0, Buffer.alloc(1024, 2))).rejects.toMatchObject({ dnr: true });
    await expect(ns.flush()).rejects.toMatchObject({ dnr: true });
    await ns.read(0, 2);
    expect(t.stats().subsystems[SUBNQN]?.namespaces[0]).toEqual({ nsid: 1, reads: 2, writes: 1, bytesRead: 2048, bytesWritten: 1024, flushes: 0, errors: 3, fenced: 0 });
    const errs = (await metric(api, 'nvme_tcp_namespace_errors_total')).find((x) => x.labels.subnqn === SUBNQN);
    expect(errs?.value).toBe(3);
    const reads = (await metric(api, 'nvme_tcp_namespace_commands_total')).find((x) => x.labels.subnqn === SUBNQN && x.labels.op === 'read');
    expect(reads?.value).toBe(2);
  });
});
