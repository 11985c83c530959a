// Public face of target/workers: the worker pool (primary side), placement policies and the shared RAM backend.
export { WorkerPool, TargetRemoteQueue, WorkerStartError, WorkerSyncError, WORKER_TRANSITIONS, type WorkerPoolOptions, type WorkerState, type WorkerView } from './pool.js';
export { PLACEMENT_CHOICES, PLACEMENT_LIST, PLACEMENTS, isPlacement, type Placement, type NsSpec, type NsOpen, type PortSpec, type SubsysSpec, type NsReport } from './messages.js';
export { ShmBackend, shmDir } from './shm-backend.js';
export { stderrLogStream } from './log-stream.js';
