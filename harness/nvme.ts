// Where target and initiator meet (harness/ is the only place): an in-process RAM target, a target
// in a child process, and the BlockTarget adapter over an initiator namespace (or multipath head).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Namespace, type Controller, type MultipathNamespace } from '../initiator/index.js';
import { TargetService, type FaultConfig, type PortConfig } from '../target/index.js';
import type { CpuSample } from './load/engine.js';
import type { BlockTarget, QueueCounter, SubmitContext } from './load/types.js';

export const DEFAULT_BENCH_NQN = 'nqn.2024-01.io.nvme-tcp-ts:bench';

const HERE = path.dirname(fileURLToPath(import.meta.url));
/** This module runs compiled (dist/harness/nvme.js, the installed package) rather than from its source through tsx. */
const COMPILED = import.meta.url.endsWith('.js');
/** The repository (or installed package) root: dist/ sits one level below it. */
export const REPO_ROOT = path.resolve(HERE, COMPILED ? '../..' : '..');
/**
 * Node arguments that start `nvme-tcp`: the compiled CLI next to this module, or cli/main.ts through tsx (`node
 * --import tsx` rather than the tsx CLI: the CLI runs the script in a grandchild, whose CPU we could not read).
 */
export const CLI_NODE_ARGS: readonly string[] = COMPILED ? [path.join(HERE, '..', 'cli', 'main.js')] : ['--import', 'tsx', path.join(REPO_ROOT, 'cli', 'main.ts')];

export interface InProcessTargetOptions {
  nqn?: string;
  /** RAM namespace size (bytes or "64M"); default 256M. */
  size?: number | string;
  blockSize?: 512 | 4096;
  faults?: FaultConfig;
  port?: Partial<Omit<PortConfig, 'id' | 'addr' | 'port'>>;
  maxIoQueues?: number;
}

export interface InProcessTarget {
  service: TargetService;
  addr: string;
  port: number;
  nqn: string;
  stop(): Promise<void>;
}

/** A TargetService on 127.0.0.1:0 with one RAM namespace (nsid 1), in this process. */
export async function startInProcessTarget(o: InProcessTargetOptions = {}): Promise<InProcessTarget> {
  const service = new TargetService();
  const nqn = o.nqn ?? DEFAULT_BENCH_NQN;
  try {
    const bound = await service.addPort({ id: 1, addr: '127.0.0.1', port: 0, ...(o.port ?? {}) });
    await service.addSubsystem({
      nqn,
      ...(o.maxIoQueues === undefined ? {} : { maxIoQueues: o.maxIoQueues }),
      ...(o.faults === undefined ? {} : { faults: o.faults }),
      namespaces: [{ nsid: 1, backend: { type: 'ram', size: o.size ?? '256M' }, blockSize: o.blockSize ?? 512 }],
    });
    return { service, addr: bound.addr, port: bound.port, nqn, stop: () => service.stop() };
  } catch (e) {
    await service.stop();
    throw e;
  }
}

export interface NamespaceTargetOptions {
  /** Controllers whose queueInfo() feeds the per-queue distribution (default: none). */
  controllers?: readonly Controller[];
  /** Map a submitter to the initiator's hctx index. Default: a numeric `hctx` job option pins it, else the submitter index. */
  hctxOf?: (ctx: SubmitContext) => number;
}

/** The hctx a submitter uses by default: `hctx=N` in the job pins it, otherwise submitters spread one per hctx. */
export function defaultHctxOf(ctx: SubmitContext): number {
  const n = Number(ctx.hctx);
  return Number.isInteger(n) && n >= 0 ? n : ctx.index;
}

/** BlockTarget over an initiator Namespace or MultipathNamespace. */
export function namespaceBlockTarget(ns: Namespace | MultipathNamespace, capacityBlocks: number, blockSize: number, o: NamespaceTargetOptions = {}): BlockTarget {
  const hctxOf = o.hctxOf ?? defaultHctxOf;
  const ctrls = o.controllers ?? [];
  const toBuf = (d: Uint8Array): Buffer => (Buffer.isBuffer(d) ? d : Buffer.from(d.buffer, d.byteOffset, d.byteLength));
  const t: BlockTarget = {
    blockSize,
    capacityBlocks,
    read: (lba, blocks, ctx, into) => ns.read(lba, blocks, into, { hctx: hctxOf(ctx) }),
    write: (lba, data, ctx) => ns.write(lba, toBuf(data), { hctx: hctxOf(ctx) }),
  };
  // A single controller's namespace has the callback API: the engine then allocates nothing per I/O (the BlockIo is an
  // initiator IoRequest as is). A multipath head keeps the promise path.
  if (ns instanceof Namespace) {
    // The hctx of the last context, remembered: mapping a context per I/O (a string to number conversion by default)
    // was ~2 % of the host's CPU (docs/performance.md, "Host path, third pass"); a submitter's context never changes.
    let lastCtx: SubmitContext | undefined;
    let lastHctx = 0;
    t.submit = (io) => {
      if (io.ctx !== lastCtx) {
        lastCtx = io.ctx;
        lastHctx = hctxOf(io.ctx);
      }
      ns.submit(io, lastHctx);
    };
  }
  // With io workers, engine buffers from the controller's shared pool are used by the workers in place (no copy).
  const only = ctrls.length === 1 ? ctrls[0] : undefined;
  if (only !== undefined) t.allocBuffer = (bytes) => only.allocIoBuffer(bytes);
  if (ctrls.length > 0) {
    t.queueCounters = (): QueueCounter[] =>
      ctrls.flatMap((c, i) => c.queueInfo().map((q) => ({ queue: ctrls.length > 1 ? `c${i}q${q.qid}` : `q${q.qid}`, commands: q.completed, bytes: q.bytes })));
  }
  return t;
}

/** BlockTarget over namespace `nsid` of one controller, with its queues in the report. */
export function controllerBlockTarget(ctrl: Controller, nsid = 1, hctxOf?: (ctx: SubmitContext) => number): BlockTarget {
  const ns = ctrl.namespace(nsid);
  return namespaceBlockTarget(ns, Number(ns.blocks), ns.blockSize, { controllers: [ctrl], ...(hctxOf === undefined ? {} : { hctxOf }) });
}

/** CPU time of another process from /proc/PID/stat (utime, stime in clock ticks; USER_HZ is 100 on Linux). */
export async function readProcCpu(pid: number): Promise<CpuSample | undefined> {
  try {
    const s = await readFile(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15 (1-based).
    const rest = s.slice(s.lastIndexOf(')') + 2).split(' ');
    const utime = Number(rest[11]);
    const stime = Number(rest[12]);
    if (!Number.isFinite(utime) || !Number.isFinite(stime)) return undefined;
    return { userMs: utime * 10, systemMs: stime * 10 };
  } catch {
    return undefined;
  }
}

export interface ChildTarget {
  child: ChildProcess;
  /** PID of the process that runs the target (node, not a wrapper). */
  pid: number;
  addr: string;
  port: number;
  nqn: string;
  /** Management API base URL, when started with `api: true`. */
  api?: string;
  stop(): Promise<void>;
}

/**
 * Runs `nvme-tcp target` (CLI_NODE_ARGS) as a child, optionally behind a command prefix
 * (e.g. `ip netns exec NS`), and resolves once it prints its listening line.
 */
export async function startChildTarget(o: { listen: string; nqn?: string; ram?: string; prefix?: string[]; timeoutMs?: number; /** also serve the management API on a free loopback port */ api?: boolean; /** more `nvme-tcp target` flags (e.g. --config) */ extraArgs?: string[] }): Promise<ChildTarget> {
  const nqn = o.nqn ?? DEFAULT_BENCH_NQN;
  const args = [process.execPath, ...CLI_NODE_ARGS, 'target', '--listen', o.listen, '--nqn', nqn, '--ram', o.ram ?? '256M', '--log-level', 'warn', ...(o.api === true ? ['--api', '127.0.0.1:0'] : []), ...(o.extraArgs ?? [])];
  const [cmd, ...rest] = [...(o.prefix ?? []), ...args] as [string, ...string[]];
  const child = spawn(cmd, rest, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(t);
  };
  try {
    const { addr, port, api } = await new Promise<{ addr: string; port: number; api: string | undefined }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`target child did not start in time; stderr: ${err.slice(-500)}`)), o.timeoutMs ?? 30_000);
      child.stdout?.on('data', (b: Buffer) => {
        out += b.toString();
        const m = /listening on \[?([^\]\s]+?)\]?:(\d+)/.exec(out);
        const a = o.api === true ? /management API on (http:\/\/\S+)/.exec(out) : undefined;
        if (m !== null && a !== null) {
          clearTimeout(timer);
          resolve({ addr: m[1] as string, port: Number(m[2]), api: a?.[1]?.replace(/[),]+$/, '') });
        }
      });
      child.stderr?.on('data', (b: Buffer) => {
        err += b.toString();
      });
      child.once('exit', (code, sig) => {
        clearTimeout(timer);
        reject(new Error(`target child exited (${code ?? sig}) before listening: ${(err || out).trim().split('\n').slice(-3).join(' / ')}`));
      });
    });
    // The node process is a descendant when a prefix (ip netns exec) execs it; the prefix execs, so the pid is the same.
    return { child, pid: child.pid ?? -1, addr, port, nqn, ...(api === undefined ? {} : { api }), stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
