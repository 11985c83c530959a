// Prometheus metrics for /metrics: a private prom-client Registry whose collect callbacks read one
// TargetService.stats()/listControllers() snapshot per scrape, so the data plane never touches prom-client.
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ControllerInfo, TargetService, TargetStats } from '../service.js';

/**
 * Latency histogram the data plane may attach to a subsystem's stats as `latency[opcodeName]`.
 * `counts` are per bucket (not cumulative): counts[i] is the number of commands with latency in
 * (boundsUs[i-1], boundsUs[i]]; counts has one extra final entry for the +Inf bucket.
 */
export interface LatencyHistogramStats {
  boundsUs: readonly number[];
  counts: readonly number[];
  sumUs: number;
  count: number;
}

type SubsystemStats = TargetStats['subsystems'][string] & { latency?: Record<string, LatencyHistogramStats> };

export type MetricsSource = Pick<TargetService, 'stats' | 'listControllers' | 'boundPorts'> & Partial<Pick<TargetService, 'workers'>>;

export interface TargetMetrics {
  readonly registry: Registry;
  readonly contentType: string;
  /** One scrape in Prometheus text format. */
  render(): Promise<string>;
  /** Stops the event-loop delay monitor. */
  close(): void;
}

interface Snapshot {
  stats: TargetStats;
  controllers: ControllerInfo[];
  ports: number;
}

type HistogramValue = { labels: Record<string, string | number>; value: number; metricName: string };

type HistogramLabel = 'subnqn' | 'opcode' | 'le';
type HistogramObject = Awaited<ReturnType<Histogram<HistogramLabel>['get']>>;

/** A histogram whose buckets come from stats counters rather than observe() calls. */
class StatsHistogram extends Histogram<HistogramLabel> {
  readonly #name: string;
  readonly #help: string;
  readonly #source: () => Snapshot;

  constructor(name: string, help: string, source: () => Snapshot) {
    super({ name, help, labelNames: ['subnqn', 'opcode'], registers: [] });
    this.#name = name;
    this.#help = help;
    this.#source = source;
  }

  #values(): HistogramValue[] {
    const out: HistogramValue[] = [];
    const name = this.#name;
    for (const [subnqn, s] of Object.entries(this.#source().stats.subsystems) as Array<[string, SubsystemStats]>) {
      for (const [opcode, h] of Object.entries(s.latency ?? {})) {
        let cum = 0;
        h.boundsUs.forEach((b, i) => {
          cum += h.counts[i] ?? 0;
          out.push({ labels: { subnqn, opcode, le: b / 1e6 }, value: cum, metricName: `${name}_bucket` });
        });
        out.push({ labels: { subnqn, opcode, le: '+Inf' }, value: h.count, metricName: `${name}_bucket` });
        out.push({ labels: { subnqn, opcode }, value: h.sumUs / 1e6, metricName: `${name}_sum` });
        out.push({ labels: { subnqn, opcode }, value: h.count, metricName: `${name}_count` });
      }
    }
    return out;
  }

  override async get(): Promise<HistogramObject> {
    // prom-client's typings declare `type` as a numeric enum; its text exposition prints whatever string is there.
    return { name: this.#name, help: this.#help, type: 'histogram', aggregator: 'sum', values: this.#values() } as unknown as HistogramObject;
  }

  /** prom-client's text exposition prefers this over get(). */
  async getForPromString(): Promise<HistogramObject> {
    return this.get();
  }
}

/** Builds the registry for one service; every start of the API gets its own (no global state). */
export function createMetrics(service: MetricsSource): TargetMetrics {
  const registry = new Registry();
  let snap: Snapshot | undefined;
  const current = (): Snapshot => (snap ??= { stats: service.stats(), controllers: service.listControllers(), ports: service.boundPorts().length });
  const subs = (): Array<[string, SubsystemStats]> => Object.entries(current().stats.subsystems);

  new Counter({
    name: 'nvme_tcp_commands_total',
    help: 'Commands received, by subsystem and opcode name (admin, fabrics and I/O).',
    labelNames: ['subnqn', 'opcode'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [subnqn, s] of subs()) for (const [opcode, n] of Object.entries(s.opcodes)) this.inc({ subnqn, opcode }, n);
    },
  });
  new Counter({
    name: 'nvme_tcp_namespace_commands_total',
    help: 'I/O commands completed per namespace, by operation.',
    labelNames: ['subnqn', 'nsid', 'op'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [subnqn, s] of subs()) {
        for (const ns of s.namespaces) {
          this.inc({ subnqn, nsid: ns.nsid, op: 'read' }, ns.reads);
          this.inc({ subnqn, nsid: ns.nsid, op: 'write' }, ns.writes);
          this.inc({ subnqn, nsid: ns.nsid, op: 'flush' }, ns.flushes);
        }
      }
    },
  });
  new Counter({
    name: 'nvme_tcp_namespace_bytes_total',
    help: 'Bytes read from and written to each namespace.',
    labelNames: ['subnqn', 'nsid', 'direction'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [subnqn, s] of subs()) {
        for (const ns of s.namespaces) {
          this.inc({ subnqn, nsid: ns.nsid, direction: 'read' }, ns.bytesRead);
          this.inc({ subnqn, nsid: ns.nsid, direction: 'write' }, ns.bytesWritten);
        }
      }
    },
  });
  new Counter({
    name: 'nvme_tcp_namespace_errors_total',
    help: 'I/O commands on each namespace that completed with a non-zero status.',
    labelNames: ['subnqn', 'nsid'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [subnqn, s] of subs()) for (const ns of s.namespaces) this.inc({ subnqn, nsid: ns.nsid }, ns.errors);
    },
  });
  registry.registerMetric(new StatsHistogram('nvme_tcp_command_latency_seconds', 'Command latency from capsule received to response queued, by subsystem and opcode.', current));

  new Gauge({
    name: 'nvme_tcp_controllers',
    help: 'Live controllers, by subsystem (the discovery subsystem included).',
    labelNames: ['subnqn', 'discovery'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [subnqn] of subs()) this.set({ subnqn, discovery: 'false' }, 0);
      const counts = new Map<string, { n: number; discovery: boolean }>();
      for (const c of current().controllers) {
        const e = counts.get(c.subnqn) ?? { n: 0, discovery: c.discovery };
        e.n++;
        counts.set(c.subnqn, e);
      }
      for (const [subnqn, e] of counts) this.set({ subnqn, discovery: String(e.discovery) }, e.n);
    },
  });
  new Gauge({
    name: 'nvme_tcp_queues',
    help: 'Connected queues (admin qid 0, I/O qid > 0), by subsystem.',
    labelNames: ['subnqn', 'type'],
    registers: [registry],
    collect() {
      this.reset();
      for (const c of current().controllers) {
        for (const q of c.queues) this.inc({ subnqn: c.subnqn, type: q.qid === 0 ? 'admin' : 'io' });
      }
    },
  });
  new Gauge({
    name: 'nvme_tcp_inflight_commands',
    help: 'Commands received and not yet completed, by subsystem and queue type (admin includes posted AERs).',
    labelNames: ['subnqn', 'type'],
    registers: [registry],
    collect() {
      this.reset();
      for (const c of current().controllers) {
        for (const q of c.queues) this.inc({ subnqn: c.subnqn, type: q.qid === 0 ? 'admin' : 'io' }, q.inFlight);
      }
    },
  });
  new Gauge({
    name: 'nvme_tcp_connections_active',
    help: 'Open TCP connections (queues), including ones not yet connected to a controller.',
    registers: [registry],
    collect() {
      this.set(current().stats.connections.active);
    },
  });
  new Counter({
    name: 'nvme_tcp_connections_accepted_total',
    help: 'TCP connections accepted.',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(current().stats.connections.accepted);
    },
  });
  new Counter({
    name: 'nvme_tcp_connections_rejected_total',
    help: "TCP connections closed at accept because the port's maxConnections limit was reached.",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(current().stats.connections.rejected ?? 0);
    },
  });
  new Counter({
    name: 'nvme_tcp_tls_handshakes_total',
    help: 'TLS 1.3 handshakes on TLS ports (TP 8011), by result.',
    labelNames: ['result'],
    registers: [registry],
    collect() {
      this.reset();
      const t = current().stats.tls;
      this.inc({ result: 'ok' }, t?.handshakesOk ?? 0);
      this.inc({ result: 'failed' }, t?.handshakesFailed ?? 0);
    },
  });
  new Counter({
    name: 'nvme_tcp_fabrics_connects_total',
    help: 'Fabrics Connect commands, by result.',
    labelNames: ['result'],
    registers: [registry],
    collect() {
      this.reset();
      const c = current().stats.connects;
      this.inc({ result: 'ok' }, c.ok);
      this.inc({ result: 'failed' }, c.failed);
    },
  });
  new Counter({
    name: 'nvme_tcp_pdu_errors_total',
    help: 'Fatal PDU errors (C2HTermReq sent or connection dropped), by fatal error status (NVMe/TCP 1.0 Figure 17).',
    labelNames: ['fes'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [fes, n] of Object.entries(current().stats.pduErrorsByFes)) this.inc({ fes }, n);
    },
  });
  new Counter({
    name: 'nvme_tcp_data_digest_errors_total',
    help: 'PDUs whose DDGST did not match (completed with Transient Transport Error).',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(current().stats.dataDigestErrors);
    },
  });
  new Counter({
    name: 'nvme_tcp_kato_expiries_total',
    help: 'Controllers torn down because the keep-alive timer expired.',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(current().stats.katoExpiries);
    },
  });
  new Gauge({
    name: 'nvme_tcp_ports',
    help: 'Listening NVMe/TCP ports.',
    registers: [registry],
    collect() {
      this.set(current().ports);
    },
  });

  // Loop lag is exported (the data path must never block the loop). Percentiles cover the interval since the previous scrape.
  const loop: IntervalHistogram = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  new Gauge({
    name: 'nvme_tcp_event_loop_lag_seconds',
    help: 'Event-loop delay since the previous scrape (monitorEventLoopDelay, 10 ms resolution), by quantile.',
    labelNames: ['quantile'],
    registers: [registry],
    collect() {
      for (const q of [0.5, 0.9, 0.99]) this.set({ quantile: q }, loop.count > 0 ? loop.percentile(q * 100) / 1e9 : 0);
    },
  });
  new Gauge({
    name: 'nvme_tcp_event_loop_lag_max_seconds',
    help: 'Largest event-loop delay since the previous scrape.',
    registers: [registry],
    collect() {
      this.set(loop.count > 0 ? loop.max / 1e9 : 0);
    },
  });
  new Gauge({
    name: 'nvme_tcp_event_loop_lag_mean_seconds',
    help: 'Mean event-loop delay since the previous scrape.',
    registers: [registry],
    collect() {
      this.set(loop.count > 0 ? loop.mean / 1e9 : 0);
    },
  });
  new Gauge({
    name: 'nvme_tcp_process_resident_memory_bytes',
    help: 'Resident set size of the target process.',
    registers: [registry],
    collect() {
      this.set(process.memoryUsage.rss());
    },
  });

  // Per-worker figures (target/workers), as of each worker's last report (every 200 ms).
  const workers = (): ReturnType<TargetService['workers']> => service.workers?.() ?? [];
  new Counter({
    name: 'nvme_tcp_worker_cpu_seconds_total',
    help: 'CPU time of each worker process, by mode (user, system).',
    labelNames: ['worker', 'mode'],
    registers: [registry],
    collect() {
      this.reset();
      for (const w of workers()) {
        this.inc({ worker: String(w.index), mode: 'user' }, w.cpuUserUs / 1e6);
        this.inc({ worker: String(w.index), mode: 'system' }, w.cpuSystemUs / 1e6);
      }
    },
  });
  new Counter({
    name: 'nvme_tcp_worker_commands_total',
    help: 'Commands each worker process executed on its I/O queues (since it last started).',
    labelNames: ['worker'],
    registers: [registry],
    collect() {
      this.reset();
      for (const w of workers()) this.inc({ worker: String(w.index) }, w.ios);
    },
  });
  new Counter({
    name: 'nvme_tcp_worker_bytes_total',
    help: 'Bytes each worker process received (in) and sent (out) on its I/O queues.',
    labelNames: ['worker', 'direction'],
    registers: [registry],
    collect() {
      this.reset();
      for (const w of workers()) {
        this.inc({ worker: String(w.index), direction: 'in' }, w.bytesIn);
        this.inc({ worker: String(w.index), direction: 'out' }, w.bytesOut);
      }
    },
  });
  new Counter({
    name: 'nvme_tcp_worker_cache_invalidations_total',
    help: 'Shared RAM writes of each worker by how other workers\' read caches dropped the range: batches sent over worker links (direct) or through the primary (relayed), and writes no other worker held a piece of (unasked).',
    labelNames: ['worker', 'path'],
    registers: [registry],
    collect() {
      this.reset();
      for (const w of workers()) {
        this.inc({ worker: String(w.index), path: 'direct' }, w.invalidations.direct);
        this.inc({ worker: String(w.index), path: 'relayed' }, w.invalidations.relayed);
        this.inc({ worker: String(w.index), path: 'unasked' }, w.invalidations.unasked);
      }
    },
  });
  new Gauge({
    name: 'nvme_tcp_worker_event_loop_lag_seconds',
    help: 'Event-loop delay of each worker process over its last report interval, mean and max.',
    labelNames: ['worker', 'stat'],
    registers: [registry],
    collect() {
      this.reset();
      for (const w of workers()) {
        this.set({ worker: String(w.index), stat: 'mean' }, w.lagMeanMs / 1e3);
        this.set({ worker: String(w.index), stat: 'max' }, w.lagMaxMs / 1e3);
      }
    },
  });
  new Gauge({
    name: 'nvme_tcp_worker_queues',
    help: 'I/O queues each worker process serves.',
    labelNames: ['worker'],
    registers: [registry],
    collect() {
      this.reset();
      for (const w of workers()) this.set({ worker: String(w.index) }, w.queues);
    },
  });
  new Counter({
    name: 'nvme_tcp_worker_restarts_total',
    help: 'Times each worker process died and was started again.',
    labelNames: ['worker'],
    registers: [registry],
    collect() {
      this.reset();
      for (const w of workers()) this.inc({ worker: String(w.index) }, w.restarts);
    },
  });

  let scraping: Promise<string> | undefined;
  return {
    registry,
    contentType: registry.contentType,
    render: () => {
      // Concurrent scrapes share one snapshot and one reset of the loop-delay window.
      scraping ??= (async () => {
        try {
          snap = undefined;
          current();
          return await registry.metrics();
        } finally {
          snap = undefined;
          loop.reset();
          scraping = undefined;
        }
      })();
      return scraping;
    },
    close: () => loop.disable(),
  };
}
