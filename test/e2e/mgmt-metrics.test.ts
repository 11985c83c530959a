// /metrics after a known workload from our initiator: the Prometheus text parses, every sample is well formed,
// and the counters equal what the workload did (commands, bytes, queues, connections).
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { connect, type Controller } from '../../initiator/index.js';
import { TargetService, type TargetStats } from '../../target/index.js';
import { createMetrics, startApi, type ApiHandle, type LatencyHistogramStats } from '../../target/mgmt/index.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const NQN = 'nqn.2024-01.io.test:mgmt-metrics';
const cleanups = cleanupAfterEach();

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses Prometheus text format 0.0.4; throws on any line that is not a comment, blank or a valid sample. */
function parseProm(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const t = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (t) {
      types.set(t[1] as string, t[2] as string);
      continue;
    }
    if (line.startsWith('# HELP ')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`bad exposition line: ${line}`);
    const labels: Record<string, string> = {};
    const body = m[3] ?? '';
    const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)/gy;
    let pos = 0;
    while (pos < body.length) {
      re.lastIndex = pos;
      const l = re.exec(body);
      if (!l) throw new Error(`bad labels: ${line}`);
      labels[l[1] as string] = (l[2] as string).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
      pos = re.lastIndex;
    }
    const raw = m[4] as string;
    const value = raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw);
    if (Number.isNaN(value) && raw !== 'NaN') throw new Error(`bad value: ${line}`);
    samples.push({ name: m[1] as string, labels, value });
  }
  return { samples, types };
}

function pick(samples: Sample[], name: string, labels: Record<string, string> = {}): number[] {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).map((s) => s.value);
}

function one(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const v = pick(samples, name, labels);
  if (v.length !== 1) throw new Error(`${name}${JSON.stringify(labels)}: ${v.length} samples`);
  return v[0] as number;
}

async function setup(): Promise<{ t: TargetService; api: ApiHandle; port: number }> {
  const t = new TargetService();
  cleanups.push(() => t.stop());
  const { port } = await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 });
  await t.addSubsystem({
    nqn: NQN,
    namespaces: [
      { nsid: 1, backend: { type: 'ram', size: '4M' } },
      { nsid: 2, backend: { type: 'null', size: '4M' } },
    ],
  });
  const api = await startApi(t, { listen: '127.0.0.1:0' });
  cleanups.push(() => api.close());
  return { t, api, port };
}

async function scrape(api: ApiHandle): Promise<{ samples: Sample[]; types: Map<string, string>; contentType: string }> {
  const res = await fetch(`${api.url}/metrics`);
  expect(res.status).toBe(200);
  return { ...parseProm(await res.text()), contentType: res.headers.get('content-type') ?? '' };
}

describe('/metrics', () => {
  it('counts exactly what a workload did, per subsystem, namespace and opcode', async () => {
    const { api, port } = await setup();
    const c: Controller = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, nr_io_queues: 2, keep_alive_tmo: 5 });
    cleanups.push(() => c.disconnect());
    const ns1 = c.namespace(1);
    const ns2 = c.namespace(2);
    const W = 37;
    const R = 23;
    const F = 3;
    await Promise.all(Array.from({ length: W }, (_, i) => ns1.write(i * 8, Buffer.alloc(4096, i))));
    await Promise.all(Array.from({ length: R }, (_, i) => ns1.read(i * 2, 2)));
    for (let i = 0; i < F; i++) await ns1.flush();
    await ns2.write(0, Buffer.alloc(65536));
    await ns2.read(0, 16);

    const { samples, types, contentType } = await scrape(api);
    expect(contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    const sub = { subnqn: NQN };
    expect(one(samples, 'nvme_tcp_namespace_commands_total', { ...sub, nsid: '1', op: 'write' })).toBe(W);
    expect(one(samples, 'nvme_tcp_namespace_commands_total', { ...sub, nsid: '1', op: 'read' })).toBe(R);
    expect(one(samples, 'nvme_tcp_namespace_commands_total', { ...sub, nsid: '1', op: 'flush' })).toBe(F);
    expect(one(samples, 'nvme_tcp_namespace_bytes_total', { ...sub, nsid: '1', direction: 'write' })).toBe(W * 4096);
    expect(one(samples, 'nvme_tcp_namespace_bytes_total', { ...sub, nsid: '1', direction: 'read' })).toBe(R * 1024);
    expect(one(samples, 'nvme_tcp_namespace_bytes_total', { ...sub, nsid: '2', direction: 'write' })).toBe(65536);
    expect(one(samples, 'nvme_tcp_namespace_bytes_total', { ...sub, nsid: '2', direction: 'read' })).toBe(8192);
    expect(one(samples, 'nvme_tcp_namespace_errors_total', { ...sub, nsid: '1' })).toBe(0);
    expect(one(samples, 'nvme_tcp_namespace_fenced_writes_total', { ...sub, nsid: '1' })).toBe(0);
    expect(one(samples, 'nvme_tcp_commands_total', { ...sub, opcode: 'write' })).toBe(W + 1);
    expect(one(samples, 'nvme_tcp_commands_total', { ...sub, opcode: 'read' })).toBe(R + 1);
    expect(one(samples, 'nvme_tcp_commands_total', { ...sub, opcode: 'flush' })).toBe(F);
    expect(types.get('nvme_tcp_commands_total')).toBe('counter');
    // One label scheme for both sets: spec mnemonics, admin-0xNN / io-0xNN for an opcode without one.
    const opLabels = samples.filter((x) => x.name === 'nvme_tcp_commands_total' && x.labels.subnqn === NQN).map((x) => x.labels.opcode ?? '');
    expect(opLabels).toEqual(expect.arrayContaining(['identify', 'set-features', 'async-event', 'write', 'read', 'flush']));
    for (const l of opLabels) expect(l).toMatch(/^(?:[a-z]+(?:-[a-z]+)*|(?:admin|io)-0x[0-9a-f]{2})$/);

    expect(one(samples, 'nvme_tcp_controllers', sub)).toBe(1);
    expect(one(samples, 'nvme_tcp_queues', { ...sub, type: 'admin' })).toBe(1);
    expect(one(samples, 'nvme_tcp_queues', { ...sub, type: 'io' })).toBe(2);
    expect(one(samples, 'nvme_tcp_inflight_commands', { ...sub, type: 'io' })).toBe(0);
    // The host keeps one Asynchronous Event Request outstanding on the admin queue (NVMe Base 2.0 §5.2).
    expect(one(samples, 'nvme_tcp_inflight_commands', { ...sub, type: 'admin' })).toBe(1);
    expect(one(samples, 'nvme_tcp_connections_active')).toBe(3);
    expect(one(samples, 'nvme_tcp_connections_accepted_total')).toBe(3);
    expect(one(samples, 'nvme_tcp_fabrics_connects_total', { result: 'ok' })).toBe(3);
    expect(one(samples, 'nvme_tcp_fabrics_connects_total', { result: 'failed' })).toBe(0);
    expect(one(samples, 'nvme_tcp_data_digest_errors_total')).toBe(0);
    expect(one(samples, 'nvme_tcp_kato_expiries_total')).toBe(0);
    expect(pick(samples, 'nvme_tcp_pdu_errors_total')).toEqual([]);
    expect(one(samples, 'nvme_tcp_ports')).toBe(1);
    for (const q of ['0.5', '0.9', '0.99']) expect(one(samples, 'nvme_tcp_event_loop_lag_seconds', { quantile: q })).toBeGreaterThanOrEqual(0);
    expect(one(samples, 'nvme_tcp_event_loop_lag_max_seconds')).toBeGreaterThanOrEqual(0);

    // A second workload adds to the same counters; a disconnect drops the gauges.
    await ns1.write(0, Buffer.alloc(512));
    await c.disconnect();
    await new Promise((r) => setTimeout(r, 50));
    const after = (await scrape(api)).samples;
    expect(one(after, 'nvme_tcp_namespace_commands_total', { ...sub, nsid: '1', op: 'write' })).toBe(W + 1);
    expect(one(after, 'nvme_tcp_namespace_bytes_total', { ...sub, nsid: '1', direction: 'write' })).toBe(W * 4096 + 512);
    expect(pick(after, 'nvme_tcp_queues', sub)).toEqual([]);
    expect(one(after, 'nvme_tcp_connections_active')).toBe(0);
    expect(one(after, 'nvme_tcp_connections_accepted_total')).toBe(3);
  });

  it('counts fatal PDU errors by FES after a peer sends garbage', async () => {
    const { api, port } = await setup();
    const net = await import('node:net');
    await new Promise<void>((resolve, reject) => {
      const s = net.connect({ host: '127.0.0.1', port }, () => {
        // A CH with an undefined PDU type 0x7f: Invalid Header Field (FES 0x02, NVMe/TCP 1.0 §3.6.2.2).
        const icreq = Buffer.alloc(128);
        icreq.writeUInt8(0x7f, 0);
        icreq.writeUInt8(128, 2);
        icreq.writeUInt32LE(128, 4);
        s.write(icreq);
      });
      s.on('error', () => undefined);
      // Read the C2HTermReq so the target's FIN is seen and the socket closes.
      s.resume();
      s.on('close', () => resolve());
      setTimeout(() => reject(new Error('target did not close the connection')), 5000).unref();
    });
    const { samples } = await scrape(api);
    const errs = samples.filter((s) => s.name === 'nvme_tcp_pdu_errors_total');
    expect(errs.reduce((a, s) => a + s.value, 0)).toBe(1);
    expect(errs[0]?.labels.fes).toMatch(/^0x0[0-9a-f]$/);
    expect(one(samples, 'nvme_tcp_connections_accepted_total')).toBe(1);
  });

  it('renders latency histograms from stats as cumulative Prometheus buckets', async () => {
    const h: LatencyHistogramStats = { boundsUs: [50, 100, 1000], counts: [5, 3, 1, 2], sumUs: 4200, count: 11 };
    const stats: TargetStats & { subsystems: Record<string, { latency: Record<string, LatencyHistogramStats> }> } = {
      subsystems: { [NQN]: { controllers: 0, opcodes: { read: 11 }, namespaces: [], latency: { read: h } } },
      pduErrorsByFes: {},
      dataDigestErrors: 0,
      katoExpiries: 0,
      connections: { accepted: 0, active: 0, rejected: 0 },
      connects: { ok: 0, failed: 0 },
      hostRefusals: { byReason: {}, suppressed: 0 },
    };
    const m = createMetrics({ stats: () => stats, listControllers: () => [], boundPorts: () => [] });
    cleanups.push(async () => m.close());
    const { samples, types } = parseProm(await m.render());
    const name = 'nvme_tcp_command_latency_seconds';
    expect(types.get(name)).toBe('histogram');
    const l = { subnqn: NQN, opcode: 'read' };
    expect(one(samples, `${name}_bucket`, { ...l, le: '0.00005' })).toBe(5);
    expect(one(samples, `${name}_bucket`, { ...l, le: '0.0001' })).toBe(8);
    expect(one(samples, `${name}_bucket`, { ...l, le: '0.001' })).toBe(9);
    expect(one(samples, `${name}_bucket`, { ...l, le: '+Inf' })).toBe(11);
    expect(one(samples, `${name}_count`, l)).toBe(11);
    expect(one(samples, `${name}_sum`, l)).toBeCloseTo(0.0042, 9);
  });

  it('per worker (workers 2, placement queue): commands, bytes, CPU, lag, queues, restarts and cache invalidations', async () => {
    const t = new TargetService({ workers: 2, placement: 'queue' });
    cleanups.push(() => t.stop());
    await t.apply({ ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [{ nqn: NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '4M' } }] }] });
    const port = (t.boundPorts()[0] as { port: number }).port;
    const api = await startApi(t, { listen: '127.0.0.1:0' });
    cleanups.push(() => api.close());
    const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, nr_io_queues: 2 });
    cleanups.push(() => c.disconnect());
    const ns = c.namespace(1);
    // Per I/O queue (one per worker): W writes of 4 KiB, each block then read on the other queue, so every write
    // after the first round finds the block held by the other worker's cache and sends it an invalidation.
    const W = 12;
    for (let i = 0; i < W; i++) {
      for (const hctx of [0, 1]) await ns.write((i * 2 + hctx) * 8, Buffer.alloc(4096, i + 1), { hctx });
      for (const hctx of [0, 1]) await ns.read((i * 2 + hctx) * 8, 8, undefined, { hctx: 1 - hctx });
    }
    for (const hctx of [0, 1]) for (let i = 0; i < W; i++) await ns.write((i * 2 + hctx) * 8, Buffer.alloc(4096, 99), { hctx });
    const perWorker = 3 * W;
    let samples: Sample[] = [];
    const deadline = Date.now() + 5000;
    for (;;) {
      samples = (await scrape(api)).samples;
      const n = pick(samples, 'nvme_tcp_worker_commands_total');
      if ((n.length === 2 && n.every((v) => v === perWorker)) || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    for (const w of ['0', '1']) {
      expect(one(samples, 'nvme_tcp_worker_commands_total', { worker: w }), `worker ${w} commands`).toBe(perWorker);
      // Received: at least the written data; sent: at least the read data (PDU headers come on top).
      expect(one(samples, 'nvme_tcp_worker_bytes_total', { worker: w, direction: 'in' })).toBeGreaterThanOrEqual(2 * W * 4096);
      expect(one(samples, 'nvme_tcp_worker_bytes_total', { worker: w, direction: 'out' })).toBeGreaterThanOrEqual(W * 4096);
      expect(one(samples, 'nvme_tcp_worker_cpu_seconds_total', { worker: w, mode: 'user' })).toBeGreaterThan(0);
      for (const stat of ['mean', 'max']) expect(one(samples, 'nvme_tcp_worker_event_loop_lag_seconds', { worker: w, stat })).toBeGreaterThanOrEqual(0);
      expect(one(samples, 'nvme_tcp_worker_queues', { worker: w })).toBe(1);
      expect(one(samples, 'nvme_tcp_worker_restarts_total', { worker: w })).toBe(0);
      // One write at a time, so one batch per write or none: the last W writes of each worker hit a piece the other
      // worker holds (it read there), so they went over the link; nothing went through the primary.
      const direct = one(samples, 'nvme_tcp_worker_cache_invalidations_total', { worker: w, path: 'direct' });
      expect(direct).toBeGreaterThanOrEqual(W);
      expect(direct + one(samples, 'nvme_tcp_worker_cache_invalidations_total', { worker: w, path: 'unasked' })).toBe(2 * W);
      expect(one(samples, 'nvme_tcp_worker_cache_invalidations_total', { worker: w, path: 'relayed' })).toBe(0);
    }
  }, 30_000);
});
