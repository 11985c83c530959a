// The narrow seam between the controller and the modules it owns (registers, identify, scan, ANA, AEN, keep-alive,
// discovery): they reach the controller only through these types, never through the Controller class.
import type { Completion, QueuePair, SubmitSpec } from './queue-pair.js';

/** An admin command as the owned modules submit it: the SQE (CID and SGL filled in by the queue pair) and its data. */
export type AdminSpec = Omit<SubmitSpec, 'timeoutMs'>;

/** Admin command submission on the controller's admin queue. */
export interface AdminChannel {
  /** Submit with the controller's admin timeout; rejects when there is no admin queue. */
  adminCmd(spec: AdminSpec): Promise<Completion>;
  /** The admin queue itself, for commands with a timeout of their own (Keep Alive, AER); undefined when torn down. */
  readonly adminQueue: QueuePair | undefined;
}

/** Property Get/Set (NVMe-oF 1.1 §3.4, §3.5): the register access the enable and shutdown sequences use. */
export interface PropertyAccess {
  propertyGet(offset: number, size: 4 | 8): Promise<bigint>;
  propertySet(offset: number, size: 4 | 8, value: bigint): Promise<void>;
}
