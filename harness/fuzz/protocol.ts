// IPC messages between a fuzz/fault parent and harness/fuzz/target-child.ts.
import type { ControllerInfo, DebugCounts, TargetStats } from '../../target/service/index.js';
import type { WorkerView } from '../../target/workers/index.js';

export interface ChildSample {
  rss: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  debug: DebugCounts;
  stats: TargetStats;
  /** GET /controllers and GET /workers of the target (empty workers with workers 1). */
  controllers: ControllerInfo[];
  workers: WorkerView[];
}

export type ParentToChild = { cmd: 'sample'; id: number; gc?: boolean } | { cmd: 'stop' };

export type ChildToParent = { type: 'ready'; ports: number[]; pid: number } | { type: 'sample'; id: number; sample: ChildSample };
