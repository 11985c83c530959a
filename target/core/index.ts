// Public face of target/core: the controller model the transport and service drive.
export { TargetCore, WELL_KNOWN_DISCOVERY_NQN, type CoreChange, type CoreMirror } from './core.js';
export { Subsystem, SUBSYS_DEFAULTS, CNTLID_MIN, CNTLID_MAX, type ControllerEntry, type ResvForward } from './subsystem.js';
export { runResvCommand } from './cmd/reservation.js';
export type { ResvReplica } from './reservation.js';
export { TargetController, CONTROLLER_TRANSITIONS } from './controller.js';
export { Request, NO_ERROR_LOCATION, REQUEST_TRANSITIONS, REQ_STATE_NAMES, ReqStateId, type RequestQueue } from './request.js';
export { LatencyHistogram, LATENCY_BOUNDS_US } from './stats.js';
export { HostLogLimiter, HOST_REFUSAL_REASONS, HOST_LOG_LIMIT, newHostRefusalCounts, type HostRefusalCounts, type HostRefusalReason } from './host-log.js';
export type { CoreStats, QueueState, ControllerState, QueueCounters, QueueInfoView, QueueHandle, ReqDir, ReqState, AenKind, Transitions } from './types.js';
export type { QueueModel, QueueTransportOps, TlsPskInfo } from './queue-model.js';
export { CorePort, PORT_DEFAULTS, FABRICS_IN_CAPSULE_MAX, ANA_STATE_CODE } from './port.js';
export { TargetNamespace, formatUuid, type NamespaceCounters } from './namespace.js';
export { CoreQueue, QUEUE_TRANSITIONS } from './queue.js';
export { FaultEngine, type FaultRuleView, type IcReqFault } from './fault-engine.js';
export { AuthRegistry, QueueAuth, redactHostAuth, HASH_NAMES, DH_GROUP_BY_NAME, type HostAuth, type HostAuthView, type AuthStats, type QueueAuthView } from './auth.js';
/** How long a read's buffers stay as they are, for the transports (NamespaceBackend.read). */
export { ReadLent } from '../backend/index.js';
