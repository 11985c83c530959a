// Public face of harness/: workload engine, reports, scenarios, peers and the target/initiator glue.
export * from './load/index.js';
export * from './report/index.js';
export { SCENARIOS, findScenario, type Scenario, type ScenarioContext } from './scenarios/index.js';
export { FaultProxy, startProxy, type DirectionFaults, type ProxyDirection, type ProxyFaults, type ProxyOptions, type ProxyConnectionInfo, type ProxyStats } from './peers/proxy.js';
export { startInProcessTarget, startChildTarget, namespaceBlockTarget, controllerBlockTarget, defaultHctxOf, readProcCpu, DEFAULT_BENCH_NQN, type InProcessTarget, type ChildTarget } from './nvme.js';
export { allowedCpus } from './scenarios/placement.js';
export { armFault } from './faults.js';
export { parseFaultRule, parseFaultRules, type FaultRule, type FaultRuleInput, type FaultRuleView } from '../target/index.js';
