// Public face of target/: the TargetService and the config types it accepts.
export { TargetService, type TargetServiceOptions, type BoundPort, type ControllerInfo, type QueueInfo, type TargetStats, type NamespaceStats, type LatencyStats } from './service.js';
export type * from './config/types.js';
export { parseSize } from './config/size.js';
export { parseFaultRule, parseFaultRules, type FaultRule, type FaultRuleInput } from './config/fault-rules.js';
export type { FaultRuleView } from './core/fault-engine.js';
