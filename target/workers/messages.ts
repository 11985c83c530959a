// The message protocol between the primary and its worker processes (child_process IPC, JSON; an I/O queue's socket
// rides along with its 'queue' message). The primary owns all controller-wide state; a worker only serves the I/O
// queues handed to it and mirrors what it needs to execute their commands (docs/target.md, "Target workers").
import type { FaultConfig, NamespaceConfig, PortConfig, SubsystemConfig } from '../model/config.js';
import type { HostRefusalCounts, NamespaceCounters, ResvReplica } from '../core/index.js';
import type { HandedOffQueue } from '../transport/tcp/index.js';
import type { InvRange } from './coherence.js';

export { PLACEMENT_CHOICES, PLACEMENT_LIST, PLACEMENTS, isPlacement, type Placement } from '../model/placement.js';

/**
 * How a worker opens a namespace's blocks (the primary created them). `fenced`: a gateway's file, written through the
 * worker's own write fence (docs/gateway-groups.md, "Fencing at the storage call").
 */
export type NsOpen = { kind: 'file'; path: string; readOnly: boolean; fenced: boolean } | { kind: 'shm'; path: string; size: number; cache: boolean } | { kind: 'null'; size: number };

export interface NsSpec {
  config: NamespaceConfig;
  open: NsOpen;
  enabled: boolean;
}

export interface SubsysSpec {
  /** The subsystem's config without namespaces. */
  config: SubsystemConfig;
  faults: FaultConfig;
  namespaces: NsSpec[];
  /** Reservation state per NSID, as the primary (its owner) has it; absent: none held anywhere. */
  resv?: Array<[number, ResvReplica]>;
}

export interface PortSpec {
  config: PortConfig;
  /** ANA log change count as a decimal string (a bigint in the core). */
  anaChangeCount: string;
  /** CorePort.anaValidUntil (a gateway's lease deadline, ms since the epoch); null: none (Infinity). */
  anaValidUntil: number | null;
}

/** Primary → worker. */
export type ToWorker =
  | { t: 'init'; index: number; logLevel: string; ports: PortSpec[]; subsystems: SubsysSpec[] }
  | { t: 'queue'; id: number; q: HandedOffQueue; hostid: string; pending?: string }
  | { t: 'close'; id: number; reason: string }
  | { t: 'subsys'; seq: number; spec: SubsysSpec }
  | { t: 'subsys-remove'; seq: number; nqn: string }
  | { t: 'port'; seq: number; spec: PortSpec }
  | { t: 'port-remove'; seq: number; id: number }
  /** A gateway's lease deadline for every port (CorePort.anaValidUntil), sent on every renewal; no ack. */
  | { t: 'ana-deadline'; until: number | null }
  | { t: 'stop'; seq: number }
  /** A namespace's reservation state changed on the primary: apply it, then ack. */
  | { t: 'resv'; seq: number; nqn: string; nsid: number; replica: ResvReplica }
  /** The answer to a forwarded reservation command, sent once every worker applied its result. */
  | { t: 'resv-done'; id: number; status: number }
  /** Another process wrote these ranges of shared RAM namespaces: drop them from the read cache, then 'inv-ack'. */
  | { t: 'inv'; seq: number; ranges: InvRange[] }
  /** Every other worker dropped the ranges of this worker's 'inv' `seq`: its writes may complete. */
  | { t: 'inv-done'; seq: number }
  /**
   * Worker `index` is live: invalidations for it go over the socket that rides along (PeerMesh), or through the
   * primary's relay when none came (the link could not be made). Then 'ack'.
   */
  | { t: 'peer'; seq: number; index: number }
  /** Worker `index` exited: no invalidation waits for it any more. */
  | { t: 'peer-gone'; index: number };

/** Per-queue counters in a report. */
export interface QueueReport {
  id: number;
  commands: number;
  bytesIn: number;
  bytesOut: number;
  errors: number;
  inFlight: number;
}

/** Per-namespace counters of one worker: the commands it executed on `nqn`/`nsid`. */
export interface NsReport extends NamespaceCounters {
  nqn: string;
  nsid: number;
}

/** A worker's shared RAM writes and cache invalidations over its life. */
export interface InvReport {
  /** Batches sent to peers over their links. */
  direct: number;
  /** Batches relayed through the primary (no link to some peer). */
  relayed: number;
  /** Writes no peer held a piece of (nothing sent). */
  unasked: number;
}

export interface WorkerReport {
  t: 'report';
  /** Queue ids that ran commands since the previous report (TBKAS keep-alive, last command time). */
  active: number[];
  at: number;
  queues: QueueReport[];
  ns: NsReport[];
  /** process.cpuUsage() of the worker, µs. */
  cpuUserUs: number;
  cpuSystemUs: number;
  /** Event-loop delay over the report interval: mean and max, ms. */
  lagMeanMs: number;
  lagMaxMs: number;
  /** Commands completed, bytes received and sent, over the worker's life. */
  ios: number;
  inv: InvReport;
  bytesIn: number;
  bytesOut: number;
  /** Host-caused log events on this worker's queues, by reason (since it last started). */
  refusals: HostRefusalCounts;
}

/** Worker → primary. */
export type FromWorker =
  | { t: 'ready' }
  | { t: 'init-failed'; reason: string }
  | { t: 'ack'; seq: number; error?: string }
  | { t: 'closed'; id: number }
  /** Register / Acquire / Release from a worker queue, for the primary to run on the one state (data: base64 keys). */
  | { t: 'resv-cmd'; id: number; nqn: string; nsid: number; hostid: string; opcode: number; cdw10: number; data: string }
  /** Writes here changed these ranges of shared RAM namespaces: have the other workers drop them, then 'inv-done'. */
  | { t: 'inv'; seq: number; ranges: InvRange[] }
  | { t: 'inv-ack'; seq: number }
  | WorkerReport;
