// Public face of target/: the TargetService and the config types it accepts.
export { TargetService, type TargetServiceOptions, type BoundPort, type ControllerInfo, type QueueInfo, type TargetStats, type NamespaceStats, type LatencyStats } from './service/index.js';
export type * from './model/config.js';
export { parseSize } from '../protocol/values/index.js';
export { parseFaultRule, parseFaultRules, type FaultRule, type FaultRuleInput } from './config/fault-rules.js';
export type { FaultRuleView } from './core/fault-engine.js';
