// The harness's way to arm the target's fault rules (docs/faults.md): validated as the API validates them.
import { parseFaultRule, type FaultRuleInput, type FaultRuleView, type TargetService } from '../target/index.js';

/** Arms `rule` on an in-process target (InProcessTarget.service); throws a ConfigError naming a bad field. */
export function armFault(service: Pick<TargetService, 'addFaultRule'>, rule: FaultRuleInput): FaultRuleView {
  return service.addFaultRule(parseFaultRule(rule));
}
