// Read views of the target for the API, metrics and leak checks: controllers with their queues, counters (a
// namespace's include what worker processes executed on it), and the live object graph.
import { formatUuid } from '../../protocol/index.js';
import { HOST_REFUSAL_REASONS, LATENCY_BOUNDS_US, type HostRefusalCounts, type TargetNamespace, type QueueCounters, type TargetCore } from '../core/index.js';
import type { NamespaceCounters } from '../core/namespace.js';
import type { TcpListener, TlsStats } from '../transport/tcp/index.js';
import type { NsReport } from '../workers/index.js';

export interface QueueInfo extends QueueCounters {
  qid: number;
  peer: string;
  state: string;
  inFlight: number;
  sqsize: number;
  /** DH-HMAC-CHAP state of the queue when its host must authenticate (no key material). */
  auth?: { state: string; authenticated: boolean; hash?: string; dhgroup?: string; bidirectional?: boolean };
  /** The queue's connection is a TLS 1.3 session (TP 8011). */
  tls?: boolean;
  /** Worker process serving this I/O queue (workers > 1); absent: this process (admin queues, authenticated hosts). */
  worker?: number;
  /** Epoch ms the queue's ICReq, its Connect and its first command after Connect arrived (QueueInfoView). */
  icReqAt?: number;
  connectAt?: number;
  firstCommandAt?: number;
}

export interface ControllerInfo {
  cntlid: number;
  subnqn: string;
  hostnqn: string;
  hostid: string;
  kato: number;
  discovery: boolean;
  portId: number;
  /** Epoch ms of the last Keep Alive command, or null if none came yet. */
  lastKeepAlive: number | null;
  /**
   * Epoch ms of the last command on any of its queues, or null. The target advertises TBKAS (CTRATT bit 6), so
   * any command also keeps the controller alive: the Linux host skips Keep Alive while I/O flows.
   */
  lastCommand: number | null;
  queues: QueueInfo[];
}

/** Latency of one opcode from capsule receipt to completion (nvme_tcp_command_latency_seconds). */
export interface LatencyStats {
  /** Upper bucket bounds in µs (log-spaced 10 µs .. 100 ms). */
  boundsUs: readonly number[];
  /** Per bucket, not cumulative: counts[i] is commands in (boundsUs[i-1], boundsUs[i]]; one extra last +Inf bucket. */
  counts: readonly number[];
  sumUs: number;
  count: number;
}

export interface NamespaceStats extends NamespaceCounters {
  nsid: number;
}

export interface TargetStats {
  subsystems: Record<string, { controllers: number; opcodes: Record<string, number>; latency: Record<string, LatencyStats>; namespaces: NamespaceStats[] }>;
  pduErrorsByFes: Record<string, number>;
  dataDigestErrors: number;
  katoExpiries: number;
  /** rejected: closed at accept because the port's maxConnections was reached. */
  connections: { accepted: number; active: number; rejected: number };
  connects: { ok: number; failed: number };
  /** TLS handshakes on TLS ports (TP 8011). */
  tls?: { handshakesOk: number; handshakesFailed: number };
  /** Host-caused log events by reason, and the lines the rate limit left out (target/core/host-log.ts); workers' included. */
  hostRefusals: { byReason: Record<string, number>; suppressed: number };
}

/** Leak-counting view of the live object graph (reliability tests compare it before and after faults). */
export interface DebugCounts {
  /** Live controllers, discovery controllers included. */
  controllers: number;
  /** Queues bound to those controllers (admin + I/O). */
  queues: number;
  /** Accepted TCP connections not yet closed, in any state (waiting for ICReq/Connect included). */
  connections: number;
  /** Connections not yet bound to a controller (no ICReq or no Connect yet). */
  unboundConnections: number;
  /** Commands received and not completed, AERs excluded (they stay posted by design). */
  pendingRequests: number;
  /** Posted Asynchronous Event Requests. */
  aersPosted: number;
  /** Node handles of this process by type (TCPSocketWrap, Timeout, FSReqCallback, ...). */
  handles: Record<string, number>;
}

export function listControllers(core: TargetCore): ControllerInfo[] {
  const out: ControllerInfo[] = [];
  for (const s of [core.discovery, ...core.subsystems.values()]) {
    for (const c of s.controllers.values()) {
      out.push({
        cntlid: c.cntlid,
        subnqn: s.kind === 'discovery' ? core.discoveryNqn : s.nqn,
        hostnqn: c.hostnqn,
        hostid: formatUuid(c.hostid),
        kato: c.katoMs,
        discovery: c.discovery,
        portId: c.port.id,
        lastKeepAlive: c.lastKeepAliveAt > 0 ? Math.round(c.lastKeepAliveAt) : null,
        lastCommand: c.lastCommandAt > 0 ? Math.round(c.lastCommandAt) : null,
        queues: [...c.queues.values()].sort((a, b) => a.qid - b.qid).map((q) => q.info()),
      });
    }
  }
  return out;
}

/** Counts for leak checks (reliability suites, fuzzer): every number must return to its baseline once connections die. */
export function debugCounts(core: TargetCore, listeners: Iterable<TcpListener>): DebugCounts {
  let controllers = 0;
  let queues = 0;
  let aersPosted = 0;
  for (const s of [core.discovery, ...core.subsystems.values()]) {
    for (const c of s.controllers.values()) {
      controllers++;
      queues += c.queues.size;
      aersPosted += c.aers.length;
    }
  }
  let connections = 0;
  let unboundConnections = 0;
  let inFlight = 0;
  for (const l of listeners) {
    for (const q of l.queues) {
      connections++;
      if (q.core.state !== 'live') unboundConnections++;
      else inFlight += q.core.inFlight;
    }
  }
  const handles: Record<string, number> = {};
  for (const h of process.getActiveResourcesInfo()) handles[h] = (handles[h] ?? 0) + 1;
  return { controllers, queues, connections, unboundConnections, pendingRequests: inFlight - aersPosted, aersPosted, handles };
}

/** `workerNs`: each worker's latest per-namespace counters (none without workers). */
export function targetStats(core: TargetCore, tls: Pick<TlsStats, 'handshakesOk' | 'handshakesFailed'>, workerNs: readonly (readonly NsReport[])[], workerRefusals: readonly HostRefusalCounts[] = []): TargetStats {
  const subsystems: TargetStats['subsystems'] = {};
  for (const s of core.subsystems.values()) {
    const latency: Record<string, LatencyStats> = {};
    for (const [op, h] of Object.entries(s.latency)) {
      if (h.count > 0) latency[op] = { boundsUs: [...LATENCY_BOUNDS_US], counts: [...h.counts], sumUs: h.sumUs, count: h.count };
    }
    subsystems[s.nqn] = {
      controllers: s.controllers.size,
      opcodes: { ...s.opcodeCounts },
      latency,
      namespaces: s.nsids.map((id) => withWorkerCounters(s.nqn, id, (s.namespaces.get(id) as TargetNamespace).counters, workerNs)),
    };
  }
  const st = core.stats;
  return {
    subsystems,
    pduErrorsByFes: { ...st.pduErrorsByFes },
    dataDigestErrors: st.dataDigestErrors,
    katoExpiries: st.katoExpiries,
    connections: { accepted: st.connectionsAccepted, active: st.connectionsActive, rejected: st.connectionsRejected },
    connects: { ok: st.connectsOk, failed: st.connectsFailed },
    tls: { handshakesOk: tls.handshakesOk, handshakesFailed: tls.handshakesFailed },
    hostRefusals: sumRefusals([st.refusals, ...workerRefusals]),
  };
}

function sumRefusals(all: readonly HostRefusalCounts[]): TargetStats['hostRefusals'] {
  const byReason: Record<string, number> = {};
  let suppressed = 0;
  for (const r of HOST_REFUSAL_REASONS) byReason[r] = 0;
  for (const c of all) {
    for (const r of HOST_REFUSAL_REASONS) byReason[r] = (byReason[r] ?? 0) + (c.byReason[r] ?? 0);
    suppressed += c.suppressed;
  }
  return { byReason, suppressed };
}

/** A namespace's counters here plus its workers' latest (each worker counts the commands it executed). */
function withWorkerCounters(subnqn: string, nsid: number, own: NamespaceCounters, workerNs: readonly (readonly NsReport[])[]): NamespaceStats {
  const out: NamespaceStats = { nsid, ...own };
  for (const list of workerNs) {
    for (const r of list) {
      if (r.nqn !== subnqn || r.nsid !== nsid) continue;
      out.reads += r.reads;
      out.writes += r.writes;
      out.bytesRead += r.bytesRead;
      out.bytesWritten += r.bytesWritten;
      out.flushes += r.flushes;
      out.errors += r.errors;
      out.fenced += r.fenced;
    }
  }
  return out;
}
