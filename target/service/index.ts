// Public face of target/service: TargetService, the one management surface (docs/architecture.md "Management"), and
// the views it returns. Its parts (keys, reservations, namespaces, replication, reports, gateway) stay behind it.
export { TargetService, type BoundPort, type TargetServiceOptions } from './service.js';
export type { ControllerInfo, DebugCounts, GatewayStats, GroupView, LatencyStats, NamespaceStats, QueueInfo, TargetStats } from './service.js';
