// Prometheus metrics for /metrics: a private prom-client Registry whose collect callbacks read one
// TargetService.stats()/listControllers() snapshot per scrape, so the data plane never touches prom-client.
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ControllerInfo, GatewayStats, TargetService, TargetStats } from '../service/index.js';

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

export type MetricsSource = Pick<TargetService, 'stats' | 'listControllers' | 'boundPorts'> & Partial<Pick<TargetService, 'workers' | 'gatewayStats' | 'listFaultRules'>>;

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
  /** Undefined unless this target is a gateway of a group (the gateway metrics then have no samples). */
  gateway: GatewayStats | undefined;
  /** Fault rules with their counts (docs/faults.md); empty when none is armed. */
  faults: ReturnType<TargetService['listFaultRules']>;
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

type WorkerReport = ReturnType<TargetService['workers']>[number];
type Labels = Record<string, string | number>;
type Sample = readonly [Labels, number];

/** What one scrape reads: the service snapshot, the workers' last reports, and the loop-delay window. */
interface ScrapeView {
  snap: Snapshot;
  subs: Array<[string, SubsystemStats]>;
  workers: readonly WorkerReport[];
  loop: IntervalHistogram;
}

/** One exported metric: prom-client type, labels, and the samples a scrape reads (same labels summed). */
interface MetricDef {
  name: string;
  help: string;
  type: 'counter' | 'gauge';
  labels?: readonly string[];
  samples(v: ScrapeView): Iterable<Sample>;
}

function* perNamespace(v: ScrapeView, f: (ns: SubsystemStats['namespaces'][number]) => Iterable<[Labels, number]>): Iterable<Sample> {
  for (const [subnqn, s] of v.subs) for (const ns of s.namespaces) for (const [l, n] of f(ns)) yield [{ subnqn, nsid: ns.nsid, ...l }, n];
}

function* perQueue(v: ScrapeView, value: (q: ControllerInfo['queues'][number]) => number): Iterable<Sample> {
  for (const c of v.snap.controllers) for (const q of c.queues) yield [{ subnqn: c.subnqn, type: q.qid === 0 ? 'admin' : 'io' }, value(q)];
}

function* perWorker(v: ScrapeView, f: (w: WorkerReport) => Iterable<[Labels, number]>): Iterable<Sample> {
  for (const w of v.workers) for (const [l, n] of f(w)) yield [{ worker: String(w.index), ...l }, n];
}

const lag = (v: ScrapeView, f: (h: IntervalHistogram) => number): number => (v.loop.count > 0 ? f(v.loop) / 1e9 : 0);

/** The metrics /metrics exports, in exposition order (the latency histogram follows the namespace counters). */
const METRICS: readonly MetricDef[] = [
  {
    name: 'nvme_tcp_commands_total',
    help: 'Commands received, by subsystem and opcode name (admin, fabrics and I/O).',
    type: 'counter',
    labels: ['subnqn', 'opcode'],
    *samples(v) {
      for (const [subnqn, s] of v.subs) for (const [opcode, n] of Object.entries(s.opcodes)) yield [{ subnqn, opcode }, n];
    },
  },
  {
    name: 'nvme_tcp_namespace_commands_total',
    help: 'I/O commands completed per namespace, by operation.',
    type: 'counter',
    labels: ['subnqn', 'nsid', 'op'],
    samples: (v) => perNamespace(v, (ns) => [[{ op: 'read' }, ns.reads], [{ op: 'write' }, ns.writes], [{ op: 'flush' }, ns.flushes]]),
  },
  {
    name: 'nvme_tcp_namespace_bytes_total',
    help: 'Bytes read from and written to each namespace.',
    type: 'counter',
    labels: ['subnqn', 'nsid', 'direction'],
    samples: (v) => perNamespace(v, (ns) => [[{ direction: 'read' }, ns.bytesRead], [{ direction: 'write' }, ns.bytesWritten]]),
  },
  {
    name: 'nvme_tcp_namespace_errors_total',
    help: 'I/O commands on each namespace that completed with a non-zero status.',
    type: 'counter',
    labels: ['subnqn', 'nsid'],
    samples: (v) => perNamespace(v, (ns) => [[{}, ns.errors]]),
  },
  {
    name: 'nvme_tcp_namespace_fenced_writes_total',
    help: "Writes refused with ANA Inaccessible because this gateway's lease had passed (before the backend or at the storage call).",
    type: 'counter',
    labels: ['subnqn', 'nsid'],
    samples: (v) => perNamespace(v, (ns) => [[{}, ns.fenced]]),
  },
  {
    name: 'nvme_tcp_controllers',
    help: 'Live controllers, by subsystem (the discovery subsystem included).',
    type: 'gauge',
    labels: ['subnqn', 'discovery'],
    *samples(v) {
      // Every subsystem shows, 0 without controllers.
      for (const [subnqn] of v.subs) yield [{ subnqn, discovery: 'false' }, 0];
      for (const c of v.snap.controllers) yield [{ subnqn: c.subnqn, discovery: String(c.discovery) }, 1];
    },
  },
  { name: 'nvme_tcp_queues', help: 'Connected queues (admin qid 0, I/O qid > 0), by subsystem.', type: 'gauge', labels: ['subnqn', 'type'], samples: (v) => perQueue(v, () => 1) },
  {
    name: 'nvme_tcp_inflight_commands',
    help: 'Commands received and not yet completed, by subsystem and queue type (admin includes posted AERs).',
    type: 'gauge',
    labels: ['subnqn', 'type'],
    samples: (v) => perQueue(v, (q) => q.inFlight),
  },
  { name: 'nvme_tcp_connections_active', help: 'Open TCP connections (queues), including ones not yet connected to a controller.', type: 'gauge', samples: (v) => [[{}, v.snap.stats.connections.active]] },
  { name: 'nvme_tcp_connections_accepted_total', help: 'TCP connections accepted.', type: 'counter', samples: (v) => [[{}, v.snap.stats.connections.accepted]] },
  {
    name: 'nvme_tcp_connections_rejected_total',
    help: "TCP connections closed at accept because the port's maxConnections limit was reached.",
    type: 'counter',
    samples: (v) => [[{}, v.snap.stats.connections.rejected ?? 0]],
  },
  {
    name: 'nvme_tcp_tls_handshakes_total',
    help: 'TLS 1.3 handshakes on TLS ports (TP 8011), by result.',
    type: 'counter',
    labels: ['result'],
    samples: (v) => [
      [{ result: 'ok' }, v.snap.stats.tls?.handshakesOk ?? 0],
      [{ result: 'failed' }, v.snap.stats.tls?.handshakesFailed ?? 0],
    ],
  },
  {
    name: 'nvme_tcp_fabrics_connects_total',
    help: 'Fabrics Connect commands, by result.',
    type: 'counter',
    labels: ['result'],
    samples: (v) => [
      [{ result: 'ok' }, v.snap.stats.connects.ok],
      [{ result: 'failed' }, v.snap.stats.connects.failed],
    ],
  },
  {
    name: 'nvme_tcp_pdu_errors_total',
    help: 'Fatal PDU errors (C2HTermReq sent or connection dropped), by fatal error status (NVMe/TCP 1.0 Figure 17).',
    type: 'counter',
    labels: ['fes'],
    samples: (v) => Object.entries(v.snap.stats.pduErrorsByFes).map(([fes, n]): Sample => [{ fes }, n]),
  },
  { name: 'nvme_tcp_data_digest_errors_total', help: 'PDUs whose DDGST did not match (completed with Transient Transport Error).', type: 'counter', samples: (v) => [[{}, v.snap.stats.dataDigestErrors]] },
  {
    name: 'nvme_tcp_host_refusals_total',
    help: 'Host-caused refusals and errors the target logs (refused Connect or Set Features, transport errors, TLS, authentication, ...), by reason; counted whether the rate-limited line was written or not.',
    type: 'counter',
    labels: ['reason'],
    samples: (v) => Object.entries(v.snap.stats.hostRefusals.byReason).map(([reason, n]): Sample => [{ reason }, n]),
  },
  {
    name: 'nvme_tcp_log_lines_suppressed_total',
    help: 'Host-caused log lines left out by the per-controller (or per-port) rate limit, each interval summed in one line instead.',
    type: 'counter',
    samples: (v) => [[{}, v.snap.stats.hostRefusals.suppressed]],
  },
  {
    name: 'nvme_tcp_fault_firings_total',
    help: 'Firings of each armed fault rule (docs/faults.md), by rule id and action.',
    type: 'counter',
    labels: ['rule', 'action'],
    samples: (v) => v.snap.faults.map((r): Sample => [{ rule: r.id, action: r.rule.action.kind }, r.hits]),
  },
  { name: 'nvme_tcp_kato_expiries_total', help: 'Controllers torn down because the keep-alive timer expired.', type: 'counter', samples: (v) => [[{}, v.snap.stats.katoExpiries]] },
  { name: 'nvme_tcp_ports', help: 'Listening NVMe/TCP ports.', type: 'gauge', samples: (v) => [[{}, v.snap.ports]] },
  // Loop lag is exported (the data path must never block the loop). Percentiles cover the interval since the previous scrape.
  {
    name: 'nvme_tcp_event_loop_lag_seconds',
    help: 'Event-loop delay since the previous scrape (monitorEventLoopDelay, 10 ms resolution), by quantile.',
    type: 'gauge',
    labels: ['quantile'],
    samples: (v) => [0.5, 0.9, 0.99].map((q): Sample => [{ quantile: q }, lag(v, (h) => h.percentile(q * 100))]),
  },
  { name: 'nvme_tcp_event_loop_lag_max_seconds', help: 'Largest event-loop delay since the previous scrape.', type: 'gauge', samples: (v) => [[{}, lag(v, (h) => h.max)]] },
  { name: 'nvme_tcp_event_loop_lag_mean_seconds', help: 'Mean event-loop delay since the previous scrape.', type: 'gauge', samples: (v) => [[{}, lag(v, (h) => h.mean)]] },
  { name: 'nvme_tcp_process_resident_memory_bytes', help: 'Resident set size of the target process.', type: 'gauge', samples: () => [[{}, process.memoryUsage.rss()]] },
  // Per-worker figures (target/workers), as of each worker's last report (every 200 ms).
  {
    name: 'nvme_tcp_worker_cpu_seconds_total',
    help: 'CPU time of each worker process, by mode (user, system).',
    type: 'counter',
    labels: ['worker', 'mode'],
    samples: (v) => perWorker(v, (w) => [[{ mode: 'user' }, w.cpuUserUs / 1e6], [{ mode: 'system' }, w.cpuSystemUs / 1e6]]),
  },
  { name: 'nvme_tcp_worker_commands_total', help: 'Commands each worker process executed on its I/O queues (since it last started).', type: 'counter', labels: ['worker'], samples: (v) => perWorker(v, (w) => [[{}, w.ios]]) },
  {
    name: 'nvme_tcp_worker_bytes_total',
    help: 'Bytes each worker process received (in) and sent (out) on its I/O queues.',
    type: 'counter',
    labels: ['worker', 'direction'],
    samples: (v) => perWorker(v, (w) => [[{ direction: 'in' }, w.bytesIn], [{ direction: 'out' }, w.bytesOut]]),
  },
  {
    name: 'nvme_tcp_worker_cache_invalidations_total',
    help: "Shared RAM writes of each worker by how other workers' read caches dropped the range: batches sent over worker links (direct) or through the primary (relayed), and writes no other worker held a piece of (unasked).",
    type: 'counter',
    labels: ['worker', 'path'],
    samples: (v) => perWorker(v, (w) => [[{ path: 'direct' }, w.invalidations.direct], [{ path: 'relayed' }, w.invalidations.relayed], [{ path: 'unasked' }, w.invalidations.unasked]]),
  },
  {
    name: 'nvme_tcp_worker_event_loop_lag_seconds',
    help: 'Event-loop delay of each worker process over its last report interval, mean and max.',
    type: 'gauge',
    labels: ['worker', 'stat'],
    samples: (v) => perWorker(v, (w) => [[{ stat: 'mean' }, w.lagMeanMs / 1e3], [{ stat: 'max' }, w.lagMaxMs / 1e3]]),
  },
  { name: 'nvme_tcp_worker_queues', help: 'I/O queues each worker process serves.', type: 'gauge', labels: ['worker'], samples: (v) => perWorker(v, (w) => [[{}, w.queues]]) },
  { name: 'nvme_tcp_worker_restarts_total', help: 'Times each worker process died and was started again.', type: 'counter', labels: ['worker'], samples: (v) => perWorker(v, (w) => [[{}, w.restarts]]) },
  // Gateway groups (docs/gateway-groups.md): fencing and ANA group moves as this gateway saw them in the group record.
  { name: 'nvme_tcp_gateway_fenced', help: 'Whether this gateway is fenced (lost its etcd lease; reports no ANA group optimized).', type: 'gauge', samples: (v) => gw(v, (g) => [[{}, g.fenced ? 1 : 0]]) },
  { name: 'nvme_tcp_gateway_fences_total', help: 'Times this gateway fenced itself.', type: 'counter', samples: (v) => gw(v, (g) => [[{}, g.fences]]) },
  { name: 'nvme_tcp_gateway_owned_groups', help: 'ANA groups this gateway reports optimized.', type: 'gauge', samples: (v) => gw(v, (g) => [[{}, g.owned]]) },
  {
    name: 'nvme_tcp_gateway_transitions_total',
    help: 'ANA group owner changes in the group record since this gateway started, by cause (initial, failover, failback, manual, drain).',
    type: 'counter',
    labels: ['cause'],
    samples: (v) => gw(v, (g) => Object.entries(g.transitions).map(([cause, t]): Sample => [{ cause }, t.count])),
  },
  {
    name: 'nvme_tcp_gateway_transition_seconds_total',
    help: 'Summed durations of those owner changes (failover: member loss seen to new owner; handoffs: request to release), by cause.',
    type: 'counter',
    labels: ['cause'],
    samples: (v) => gw(v, (g) => Object.entries(g.transitions).map(([cause, t]): Sample => [{ cause }, t.seconds])),
  },
];

function gw(v: ScrapeView, f: (g: GatewayStats) => Sample[]): Sample[] {
  return v.snap.gateway === undefined ? [] : f(v.snap.gateway);
}

/** Where the latency histogram goes in the exposition: after the per-namespace counters, as it always has. */
const HISTOGRAM_AFTER = 'nvme_tcp_namespace_fenced_writes_total';

/** Registers `m` in `registry`; its collect() re-reads the scrape's samples (a counter is reset and re-summed: the source counters only grow). */
function register(registry: Registry, m: MetricDef, view: () => ScrapeView): void {
  const config = { name: m.name, help: m.help, labelNames: [...(m.labels ?? [])], registers: [registry] };
  if (m.type === 'counter') {
    new Counter({
      ...config,
      collect() {
        this.reset();
        for (const [l, n] of m.samples(view())) this.inc(l, n);
      },
    });
  } else {
    new Gauge({
      ...config,
      collect() {
        this.reset();
        for (const [l, n] of m.samples(view())) this.inc(l, n);
      },
    });
  }
}

/** Builds the registry for one service; every start of the API gets its own (no global state). */
export function createMetrics(service: MetricsSource): TargetMetrics {
  const registry = new Registry();
  let snap: Snapshot | undefined;
  const current = (): Snapshot => (snap ??= { stats: service.stats(), controllers: service.listControllers(), ports: service.boundPorts().length, gateway: service.gatewayStats?.(), faults: service.listFaultRules?.() ?? [] });
  const loop: IntervalHistogram = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const view = (): ScrapeView => ({ snap: current(), subs: Object.entries(current().stats.subsystems), workers: service.workers?.() ?? [], loop });
  for (const m of METRICS) {
    register(registry, m, view);
    if (m.name === HISTOGRAM_AFTER) registry.registerMetric(new StatsHistogram('nvme_tcp_command_latency_seconds', 'Command latency from capsule received to response queued, by subsystem and opcode.', current));
  }

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
