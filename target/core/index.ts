// Public face of target/core: the controller model the transport and service drive.
export { TargetCore, WELL_KNOWN_DISCOVERY_NQN, Subsystem, SUBSYS_DEFAULTS, Controller, Request, LatencyHistogram, LATENCY_BOUNDS_US, type CoreStats, type QueueState, type QueueModel, type QueueTransportOps, type QueueCounters, type QueueInfoView } from './model.js';
export { CorePort, PORT_DEFAULTS, FABRICS_IN_CAPSULE_MAX, ANA_STATE_CODE } from './port.js';
export { Namespace, formatUuid } from './namespace.js';
export { CoreQueue } from './queue.js';
export { AuthRegistry, QueueAuth, redactHostAuth, HASH_NAMES, DH_GROUP_BY_NAME, type HostAuth, type HostAuthView, type AuthStats, type QueueAuthView } from './auth.js';
