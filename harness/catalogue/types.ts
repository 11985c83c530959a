// The host-behaviour catalogue's shapes (docs/faults.md, "The host-behaviour catalogue"): a case is fault rules, a
// workload and what a correct host does; a host adapter runs it and returns evidence; the verdict comes from that
// evidence, never from an exit status alone.
import type { FaultRuleInput } from '../../target/index.js';

/**
 * What a host did, from evidence (issue 45 item 3): it recovered (the workload's data came back), surfaced the error
 * (the right status or errno), hung (a bounded wait ran out), returned wrong data (verify), or logged a kernel warning
 * or oops. `not-run` and `pending` are cells with a reason instead of a result.
 */
export const VERDICTS = ['recovered', 'error-surfaced', 'hung', 'data-mismatch', 'kernel-warning', 'not-run', 'pending'] as const;
export type Verdict = (typeof VERDICTS)[number];

/** The LBA range a workload writes, then reads back and compares (512-byte blocks). */
export interface BlockRange {
  start: number;
  count: number;
}

/**
 * The workload, the same for every host: connect (`connect` options), write `range` with a fresh pattern, arm the
 * rules when `armAt` is `after-write` (else before the connect), wait `idleS` seconds, read `range` back and compare.
 * With `badRange` the host must fail exactly the reads that touch it and return the rest intact.
 */
export interface Workload {
  armAt: 'before-connect' | 'after-write';
  range: BlockRange;
  idleS?: number;
  badRange?: BlockRange;
  /**
   * Connect with a DH-HMAC-CHAP secret the target holds for this host; once written, give the host a new secret the
   * target does not hold, so its re-authentication fails (the target answers AUTH_Failure1).
   */
  reauth?: boolean;
  /** With reauth: bidirectional, the target also holds a controller secret and the host gets a new one too. */
  reauthCtrl?: boolean;
  /** Connect to both target ports (one multipath subsystem, two paths). */
  multipath?: boolean;
  connect?: {
    nrIoQueues?: number;
    /** Host I/O timeout, seconds (Linux: nvme_core io_timeout; ours: io_timeout). */
    ioTimeoutS?: number;
    keepAliveTmoS?: number;
    reconnectDelayS?: number;
    ctrlLossTmoS?: number;
    /** Ask for header and data digests (NVMe-TCP 1.0 §3.6.1.7): a digest-error case needs them negotiated. */
    digests?: boolean;
  };
}

export interface CatalogueCase {
  id: string;
  title: string;
  /** The spec sections that say what a correct host does. */
  spec: string;
  rules: FaultRuleInput[];
  workload: Workload;
  /** What a correct host does, in words. */
  correct: string;
  /** The verdict a correct host earns. */
  expect: Exclude<Verdict, 'not-run' | 'pending'>;
  /** Why the case cannot run yet (a cell verdict of `pending` on every host). */
  pending?: string;
}

/** One fact a verdict rests on: what was checked, whether it held, and what was seen. */
export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

/** What a host adapter saw running one case (the runner turns it into a verdict). */
export interface HostEvidence {
  /** Connect attempts: the first error if the first failed, and whether a retry came up. */
  connectError?: string;
  retryConnected?: boolean;
  /** Blocks of the read-back that failed, and the error the host gave for them. */
  failedBlocks: BlockRange[];
  readError?: string;
  /** I/O errors the host reported without saying which blocks (spdk_nvme_perf): its first error line. */
  ioErrors?: string;
  /** Blocks that read back different from what was written. */
  mismatchedBlocks: BlockRange[];
  /** A step that ran past its bounded wait: its name and the bound. */
  hung?: string;
  /** Kernel log lines with WARNING, BUG, Oops, hung task, call trace. */
  kernelWarnings: string[];
  /** Host-specific facts (queues granted, retries, ANA state seen). */
  facts: Record<string, string | number | boolean>;
  /** The host's own log (nvme-cli / dd / perf output, dmesg or console tail). */
  log: string;
  /** The adapter could not run the case on this host: the reason (verdict not-run). */
  notRun?: string;
}

/** A rule's firing record from the target: GET /faults hit counts plus the `fault fired` log lines. */
export interface RuleFirings {
  rules: { id: string; matches: number; hits: number }[];
  lines: string[];
}

export interface Cell {
  caseId: string;
  host: string;
  verdict: Verdict;
  /** The verdict is the one a correct host earns and every check held. */
  asExpected: boolean;
  /** One line: what the host did, or why the cell did not run. */
  summary: string;
  checks: Check[];
  facts: HostEvidence['facts'];
  /** Evidence files, relative to the matrix directory. */
  evidence: string[];
  wallMs: number;
}

export interface HostInfo {
  id: string;
  /** Kernel release, SPDK version, "this repository's initiator". */
  describe: string;
  /** How evidence was captured here and what was not (pcap tools absent, ...). */
  notes: string[];
}

export interface Matrix {
  schema: 1;
  name: 'host-behaviour';
  generatedAt: string;
  cases: Pick<CatalogueCase, 'id' | 'title' | 'spec' | 'correct' | 'expect' | 'pending'>[];
  hosts: HostInfo[];
  cells: Cell[];
  notes: string[];
}
