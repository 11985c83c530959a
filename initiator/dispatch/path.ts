// What multipath needs from each controller it spreads I/O over (one path), as a types-only interface: dispatch/
// never imports the Controller (the controller builds hctxs from dispatch/, so the edge runs one way only), and a
// Controller satisfies this structurally.
import type { ControllerState } from '../controller-state.js';
import type { Namespace } from '../namespace.js';

export interface PathController {
  /** The subsystem the controller belongs to: every path of a namespace head must share it. */
  readonly opts: { readonly nqn: string };
  /** Only live controllers carry I/O; connecting/resetting ones may come back. */
  readonly state: ControllerState;
  /** The controller's namespace `nsid`; throws when it has none. */
  namespace(nsid: number): Namespace;
  /** Commands in flight on the controller's I/O queues (queue-depth policy). */
  readonly inFlight: number;
  /** Re-read the ANA log after a path error. */
  refreshAna(): Promise<void>;
}
