// Where the two ends run. On this kind of machine a QD1 round trip costs ~7.6 µs with both ends on one vCPU and ~90 µs
// across vCPUs, and unpinned runs are bimodal (docs/performance.md, Benchmarks; docs/harness.md), so the split scenarios
// pin the initiator (this process) and the target (a child process) to different CPUs and report what the kernel says
// each was allowed to run on.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import type { CpuSample } from '../load/engine.js';
import { parseSize } from '../../protocol/values/index.js';
import { readProcCpu, startChildTarget, type ChildTarget } from '../nvme.js';
import { startSpdkTarget } from '../peers/spdk.js';

/** Raised when the target child cannot be started or queried. */
export class PlacementError extends Error {
  readonly code = 'HARNESS_ERR_PLACEMENT';
  constructor(message: string) {
    super(message);
    this.name = 'PlacementError';
  }
}

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: 10_000 }, (err, stdout, stderr) => (err !== null ? reject(new PlacementError(`${cmd} ${args.join(' ')}: ${stderr.trim() || err.message}`)) : resolve(stdout)));
  });
}

/** "0-1" / "0,2-3" → [0, 1] / [0, 2, 3]. */
export function parseCpuList(s: string): number[] {
  const out: number[] = [];
  for (const part of s.trim().split(',')) {
    if (part === '') continue;
    const [a, b] = part.split('-').map(Number) as [number, number | undefined];
    for (let c = a; c <= (b ?? a); c++) out.push(c);
  }
  return out;
}

/** The CPUs the kernel lets `pid` run on (Cpus_allowed_list in /proc/PID/status). */
export async function allowedCpus(pid: number): Promise<string> {
  try {
    const s = await readFile(`/proc/${pid}/status`, 'utf8');
    return /^Cpus_allowed_list:\s*(\S+)/m.exec(s)?.[1] ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

export interface Placement {
  /** CPU for this process (initiator), or undefined when not pinned. */
  initiatorCpu: number | undefined;
  /** Every CPU this process was pinned to (one, or all but the target's with `spread`); empty when not pinned. */
  initiatorCpus: number[];
  /** CPU for the target child (the first of targetCpus), or undefined when not pinned. */
  targetCpu: number | undefined;
  /** Every CPU reserved for the target (`targetCores` of them: SPDK's reactor mask); empty when not pinned. */
  targetCpus: number[];
  /** Why the ends are not pinned apart (one CPU, no taskset, not Linux). */
  unpinnedReason?: string;
  /** Restores this process's original affinity (all threads). */
  restore(): Promise<void>;
}

/**
 * Pins this process (every thread: `taskset -a`, so V8's GC and libuv's threadpool move too) to the first allowed
 * CPU and reserves the next `targetCores` (default 1) for the target. With `spread` (io workers: the initiator is
 * several threads) this process gets every allowed CPU but the target's. Node has no sched_setaffinity, hence
 * taskset. With too few CPUs or no taskset nothing is pinned and the reason is returned for the report.
 */
export async function pinApart(o: { spread?: boolean; targetCores?: number } = {}): Promise<Placement> {
  const noop = async (): Promise<void> => undefined;
  const none = { initiatorCpu: undefined, initiatorCpus: [], targetCpu: undefined, targetCpus: [], restore: noop };
  const n = o.targetCores ?? 1;
  if (process.platform !== 'linux') return { ...none, unpinnedReason: 'not Linux' };
  const allowed = parseCpuList(await allowedCpus(process.pid));
  if (allowed.length < 2) return { ...none, unpinnedReason: `only ${allowed.length} CPU allowed` };
  if (allowed.length < n + 1) return { ...none, unpinnedReason: `only ${allowed.length} CPUs allowed: the target's ${n} and the initiator's one need ${n + 1}` };
  let original: string;
  try {
    // "pid N's current affinity list: 0,1"
    original = (await run('taskset', ['-cp', String(process.pid)])).trim().split(': ').pop() ?? '';
  } catch (e) {
    return { ...none, unpinnedReason: `taskset unavailable (${(e as Error).message})` };
  }
  const ini = allowed[0] as number;
  const tgt = allowed.slice(1, 1 + n);
  const mine = o.spread === true ? allowed.filter((c) => !tgt.includes(c)) : [ini];
  await run('taskset', ['-a', '-cp', mine.join(','), String(process.pid)]);
  return {
    initiatorCpu: ini,
    initiatorCpus: mine,
    targetCpu: tgt[0],
    targetCpus: tgt,
    restore: async () => {
      await run('taskset', ['-a', '-cp', original, String(process.pid)]).catch(() => undefined);
    },
  };
}

/** Which target a split scenario runs against: ours (`nvme-tcp target`) or SPDK's nvmf_tgt. */
export type TargetKind = 'ours' | 'spdk';

/** Where a target process listens: an address (default 127.0.0.1) inside a network namespace (default this one). */
export interface TargetListen {
  addr?: string;
  /** Network namespace (`ip netns exec NAME`): the target's sockets live there; its RPC socket and /proc entry do not move. */
  netns?: string;
}

const netnsPrefix = (netns: string | undefined): string[] => (netns === undefined ? [] : ['ip', 'netns', 'exec', netns]);

export interface TargetProcess {
  kind: TargetKind;
  /** The target's name for reports ("`nvme-tcp target`", "SPDK nvmf_tgt (SPDK v26.05 …)"). */
  label: string;
  pid: number;
  addr: string;
  port: number;
  nqn: string;
  /** Management API base URL (GET /controllers, /metrics); ours only. */
  api?: string;
  /**
   * Whether the target busy-polls its cores (SPDK without interrupt mode): its CPU is then 100 % of its cores by
   * design, not a measure of its load, and IOPS per core given is the comparable figure.
   */
  polls: boolean;
  /** Cumulative CPU time of the target process (/proc/PID/stat). */
  cpu(): Promise<CpuSample | undefined>;
  /** Controllers and their queues; per-queue command counts where the target keeps them (ours, not SPDK). */
  controllers(): Promise<TargetControllerInfo[]>;
  /**
   * Completed I/O per thread of execution that serves queues: SPDK's poll groups (one per core of its mask,
   * nvmf_get_stats), or ours' one event loop (namespace commands from /metrics).
   */
  groups(): Promise<TargetGroupInfo[]>;
  /** Target event-loop delay since the previous call (the API's gauge resets per scrape), in ms; ours only. */
  loopLag(): Promise<{ p99Ms: number; maxMs: number } | undefined>;
  stop(): Promise<void>;
}

export interface TargetControllerInfo {
  cntlid: number;
  subnqn: string;
  hostnqn?: string;
  /**
   * commands: what the queue processed (ours); SPDK counts per poll group, not per queue, so it is absent there.
   * group: the thread of execution serving the queue (SPDK's poll group, ours' "event loop").
   */
  queues: { qid: number; commands?: number; group?: string }[];
}

export interface TargetGroupInfo {
  name: string;
  /** Completed I/O commands since the target started. */
  commands: number;
}

/** The event loop that serves every queue of `nvme-tcp target` without workers. */
export const OUR_GROUP = 'event loop';

/**
 * `nvme-tcp target` (cli/main.ts via `node --import tsx`) as a child, optionally pinned with `taskset -c CPU`
 * (taskset execs node, so the child's pid is the target's), with the management API on a free loopback port.
 */
export async function startTargetProcess(o: { ram?: string; cpu?: number; nqn?: string; timeoutMs?: number } & TargetListen = {}): Promise<TargetProcess> {
  let target: ChildTarget;
  try {
    target = await startChildTarget({
      listen: `${o.addr ?? '127.0.0.1'}:0`,
      api: true,
      ...(o.nqn === undefined ? {} : { nqn: o.nqn }),
      ...(o.ram === undefined ? {} : { ram: o.ram }),
      ...(o.timeoutMs === undefined ? {} : { timeoutMs: o.timeoutMs }),
      // taskset execs `ip netns exec`, which execs node: the pid stays the target's.
      prefix: [...(o.cpu === undefined ? [] : ['taskset', '-c', String(o.cpu)]), ...netnsPrefix(o.netns)],
    });
  } catch (e) {
    throw new PlacementError(e instanceof Error ? e.message : String(e));
  }
  const { pid, api } = target;
  if (api === undefined) {
    await target.stop();
    throw new PlacementError('target child did not report its management API');
  }
  const get = async (p: string): Promise<Response> => {
    const r = await fetch(`${api}${p}`);
    if (!r.ok) throw new PlacementError(`GET ${p}: HTTP ${r.status}`);
    return r;
  };
  return {
    kind: 'ours',
    label: '`nvme-tcp target`',
    pid,
    addr: target.addr,
    port: target.port,
    nqn: target.nqn,
    api,
    polls: false,
    cpu: () => readProcCpu(pid),
    controllers: async () => {
      const cs = (await (await get('/controllers')).json()) as TargetControllerInfo[];
      return cs.map((c) => ({ ...c, queues: c.queues.map((q) => ({ qid: q.qid, ...(q.commands === undefined ? {} : { commands: q.commands }), group: OUR_GROUP })) }));
    },
    groups: async () => {
      // Scraping /metrics also resets the loop-lag gauge: callers read groups outside a loopLag() window.
      const text = await (await get('/metrics')).text();
      let commands = 0;
      for (const m of text.matchAll(/^nvme_tcp_namespace_commands_total\{([^}]*)\} (\S+)/gm)) if ((m[1] as string).includes(`subnqn="${target.nqn}"`)) commands += Number(m[2]);
      return [{ name: OUR_GROUP, commands }];
    },
    loopLag: async () => {
      try {
        const text = await (await get('/metrics')).text();
        const p99 = /^nvme_tcp_event_loop_lag_seconds\{quantile="0\.99"\} (\S+)/m.exec(text)?.[1];
        const max = /^nvme_tcp_event_loop_lag_max_seconds (\S+)/m.exec(text)?.[1];
        if (p99 === undefined || max === undefined) return undefined;
        // The gauge comes from monitorEventLoopDelay at 10 ms resolution; subtract it as the engine does for ours.
        const ms = (s: string): number => Math.round(Math.max(0, Number(s) * 1000 - 10) * 100) / 100;
        return { p99Ms: ms(p99), maxMs: ms(max) };
      } catch {
        return undefined;
      }
    },
    stop: () => target.stop(),
  };
}

interface SpdkQpair {
  cntlid: number;
  qid: number;
  thread: string;
  hostnqn?: string;
}

/**
 * SPDK's nvmf_tgt (harness/peers/spdk.ts) behind the same seam: reactors on `cpus` (one poll group each), busy-polling
 * unless `interrupt`, one malloc namespace of `ram` with 512-byte blocks like ours. Per-queue command counts do not
 * exist in SPDK; controllers() lists each qpair's poll group and groups() the poll groups' completed I/O instead.
 */
export async function startSpdkTargetProcess(o: { ram?: string; cpus: readonly number[]; interrupt?: boolean; nqn?: string } & TargetListen): Promise<TargetProcess> {
  const sizeMiB = Math.ceil(parseSize(o.ram ?? '256M', 'ram') / (1024 * 1024));
  const t = await startSpdkTarget({
    cpus: o.cpus,
    interrupt: o.interrupt === true,
    namespaces: [{ sizeMiB }],
    ...(o.nqn === undefined ? {} : { nqn: o.nqn }),
    ...(o.addr === undefined ? {} : { addr: o.addr }),
    ...(o.netns === undefined ? {} : { prefix: netnsPrefix(o.netns) }),
  });
  let version = '';
  try {
    version = (await t.rpc.call<{ version: string }>('spdk_get_version')).version;
  } catch (e) {
    await t.stop();
    throw e;
  }
  const mode = o.interrupt === true ? 'interrupt mode' : 'polling';
  return {
    kind: 'spdk',
    label: `SPDK nvmf_tgt (${version}, ${mode}, ${o.cpus.length} reactor core${o.cpus.length === 1 ? '' : 's'})`,
    pid: t.pid,
    addr: t.addr,
    port: t.port,
    nqn: t.nqn,
    polls: o.interrupt !== true,
    cpu: () => t.cpu(),
    controllers: async () => {
      const qps = await t.rpc.call<SpdkQpair[]>('nvmf_subsystem_get_qpairs', { nqn: t.nqn });
      const byCntlid = new Map<number, TargetControllerInfo>();
      for (const q of qps) {
        const c = byCntlid.get(q.cntlid) ?? { cntlid: q.cntlid, subnqn: t.nqn, ...(q.hostnqn === undefined ? {} : { hostnqn: q.hostnqn }), queues: [] };
        c.queues.push({ qid: q.qid, group: q.thread });
        byCntlid.set(q.cntlid, c);
      }
      for (const c of byCntlid.values()) c.queues.sort((a, b) => a.qid - b.qid);
      return [...byCntlid.values()];
    },
    groups: async () => {
      const s = await t.rpc.call<{ poll_groups: { name: string; completed_nvme_io: number }[] }>('nvmf_get_stats');
      return s.poll_groups.map((g) => ({ name: g.name, commands: g.completed_nvme_io }));
    },
    loopLag: async () => undefined,
    stop: () => t.stop(),
  };
}
