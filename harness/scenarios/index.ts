// The scenario registry: `nvme-tcp bench --scenario NAME`.
import { duplicateConnect } from './duplicate-connect.js';
import { kernelInterop } from './kernel-interop.js';
import { matchHwQueues } from './match-hw-queues.js';
import { parallelConnect } from './parallel-connect.js';
import { queueGroups } from './queue-groups.js';
import type { Scenario } from './types.js';

export type { Scenario, ScenarioContext } from './types.js';

export const SCENARIOS: readonly Scenario[] = [queueGroups, duplicateConnect, parallelConnect, matchHwQueues, kernelInterop];

export function findScenario(name: string): Scenario | undefined {
  return SCENARIOS.find((s) => s.name === name);
}
