// IPC messages between a fuzz/fault parent and harness/fuzz/target-child.ts.
import type { DebugCounts, TargetStats } from '../../target/service.js';

export interface ChildSample {
  rss: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  debug: DebugCounts;
  stats: TargetStats;
}

export type ParentToChild = { cmd: 'sample'; id: number; gc?: boolean } | { cmd: 'stop' };

export type ChildToParent = { type: 'ready'; ports: number[]; pid: number } | { type: 'sample'; id: number; sample: ChildSample };
