// Public face of target/: the TargetService and the config types it accepts.
export { TargetService, type TargetServiceOptions, type BoundPort, type ControllerInfo, type QueueInfo, type TargetStats, type NamespaceStats, type LatencyStats } from './service/index.js';
export type * from './model/config.js';
export { parseSize } from '../protocol/values/index.js';
