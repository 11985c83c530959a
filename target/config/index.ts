// Public face of target/config: the one schema for the JSON config and the HTTP API, and its loaders.
export { DEFAULT_SUBSYSTEM_NQN, defaultConfig, errnoText, loadConfig } from './load.js';
export { loadNvmetcliConfig } from './nvmetcli.js';
export { ConfigError, formatConfigError, ipFamily, nameProblem, nqnProblem, nqnWarning, parseHostPort, parseTargetConfig, SIZE_FIX, sizeToBytes } from './schema.js';
export { parseSize } from '../../protocol/values/index.js';
export type * from '../model/config.js';
// The placement policies (target/model), so a caller that reads config needs no import from the worker pool.
export { PLACEMENT_CHOICES, PLACEMENT_LIST, PLACEMENTS, isPlacement, type Placement } from '../model/placement.js';
export { FAULT_EVENTS, FAULT_WIRE_ACTIONS, faultRuleSchema, loadFaultRules, parseFaultRule, parseFaultRules, type FaultAction, type FaultMatch, type FaultRule, type FaultRuleInput, type FaultSchedule, type FaultWireAction } from './fault-rules.js';
