// Shared pieces of the SPDK-host interop suite (spdk-host.test.ts): our target as a child process (`nvme-tcp target`,
// one process or --workers N) or in this process (TargetService), what each counted, and SPDK's bdev layer
// (bdevperf -z) as an RPC-driven NVMe/TCP host.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { startCliTarget, type CliTarget } from '../../harness/lab.js';
import { addKeyringKey, attachControllerParams, findSpdk, startSpdkApp, type BdevNvmeController, type SpdkApp } from '../../harness/peers/spdk.js';
import { withPeerDigests } from '../fixtures/peer-digests.js';
import { TargetService, type ControllerInfo, type TargetConfig } from '../../target/index.js';
import { REPORT_INTERVAL_MS } from '../../target/workers/worker.js';

/** The host NQN every case gives SPDK (trid `hostnqn:` / attach `hostnqn`), except the empty-HOSTNQN one. */
export const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:5bd1c0de-0000-4000-8000-00000000a001';
export const SUBNQN = 'nqn.2024-01.io.nvme-tcp-ts:spdk-host';
export const SERIAL = 'SPDKHOST0123456789';
export const MODEL = 'nvme-tcp-ts spdk-host suite';

/** What a case reads back from our target, whichever way it runs. */
export interface OurTarget {
  addr: string;
  /** Listening ports in port-id order (the first is the one cases use unless they say otherwise). */
  ports: number[];
  /** Live controllers and their queues (GET /controllers, or listControllers in process). */
  controllers(): Promise<ControllerInfo[]>;
  /** Commands the target executed on a namespace, workers' included (nvme_tcp_namespace_commands_total). */
  nsCommands(subnqn: string, nsid: number): Promise<{ reads: number; writes: number }>;
  /**
   * nsCommands once nothing is left to report: workers send their counts every REPORT_INTERVAL_MS, so with workers
   * the value is read until two samples a report interval apart agree.
   */
  settledNsCommands(subnqn: string, nsid: number): Promise<{ reads: number; writes: number }>;
  /** Its log: JSON lines (child) or objects (in process) as text. */
  log: string[];
  stop(): Promise<void>;
}

/** One namespace of `size` on SUBNQN, with our serial and model so identify has something to name. */
export function baseConfig(o: { size?: string; file?: string; ports?: number } = {}): TargetConfig {
  return {
    ports: Array.from({ length: o.ports ?? 1 }, (_, i) => ({ id: i + 1, addr: '127.0.0.1', port: 0 })),
    subsystems: [
      {
        nqn: SUBNQN,
        serial: SERIAL,
        model: MODEL,
        namespaces: [{ nsid: 1, backend: o.file !== undefined ? { type: 'file', path: o.file, size: o.size ?? '64M' } : { type: 'ram', size: o.size ?? '64M' } }],
      },
    ],
  };
}

const cleanupDirs: string[] = [];

/** A fresh temporary folder, removed by removeTempDirs(). */
export async function tempDir(prefix: string): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), prefix));
  cleanupDirs.push(d);
  return d;
}

export async function removeTempDirs(): Promise<void> {
  for (const d of cleanupDirs.splice(0)) await rm(d, { recursive: true, force: true });
}

async function getJson(base: string, p: string): Promise<unknown> {
  const r = await fetch(`${base}${p}`, { signal: AbortSignal.timeout(10_000) });
  if (!r.ok) throw new Error(`GET ${p}: HTTP ${r.status} ${await r.text()}`);
  return (p === '/metrics' ? r.text() : r.json()) as Promise<unknown>;
}

/** One sample of nvme_tcp_namespace_commands_total{subnqn,nsid,op} from Prometheus text. */
function metricValue(text: string, subnqn: string, nsid: number, op: string): number {
  const esc = subnqn.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const m = new RegExp(`^nvme_tcp_namespace_commands_total\\{subnqn="${esc}",nsid="${nsid}",op="${op}"\\} (\\d+)`, 'm').exec(text);
  return m === null ? 0 : Number(m[1]);
}

export interface CliTargetOptions {
  config: TargetConfig;
  /** More `nvme-tcp target` flags (--workers 2, --dhchap-key, --tls, …). */
  args?: readonly string[];
  /** Kept across restarts of the same target. */
  log?: string[];
  /** The listen addresses (default one 127.0.0.1:0 per config port); a restart passes the ports it had. */
  listen?: readonly string[];
}

/** `nvme-tcp target --config FILE --api 127.0.0.1:0 ARGS` as a child, at log level info. */
export async function startOurCliTarget(o: CliTargetOptions): Promise<OurTarget & { cli: CliTarget; restartArgs: CliTargetOptions }> {
  const dir = await tempDir('spdk-host-target-');
  const conf = path.join(dir, 'target.json');
  await writeFile(conf, JSON.stringify(o.config));
  const listen = o.listen ?? o.config.ports.map(() => '127.0.0.1:0');
  const log = o.log ?? [];
  const from = log.length;
  const cli = await startCliTarget(['--config', conf, ...listen.flatMap((l) => ['--listen', l]), '--api', '127.0.0.1:0', '--log-level', 'info', ...(o.args ?? [])], { log });
  const base = `http://127.0.0.1:${String(cli.apiPort)}`;
  const workers = (o.args ?? []).includes('--workers');
  const nsCommands = async (subnqn: string, nsid: number): Promise<{ reads: number; writes: number }> => {
    const text = (await getJson(base, '/metrics')) as string;
    return { reads: metricValue(text, subnqn, nsid, 'read'), writes: metricValue(text, subnqn, nsid, 'write') };
  };
  const ports = log.slice(from).flatMap((l) => {
    const m = /^nvme-tcp target: listening on 127\.0\.0\.1:(\d+)/.exec(l);
    return m === null ? [] : [Number(m[1])];
  });
  return {
    cli,
    addr: '127.0.0.1',
    ports,
    log,
    restartArgs: { ...o, log, listen: ports.map((p) => `127.0.0.1:${p}`) },
    controllers: async () => (await getJson(base, '/controllers')) as ControllerInfo[],
    nsCommands,
    settledNsCommands: async (subnqn, nsid) => {
      let prev = await nsCommands(subnqn, nsid);
      if (!workers) return prev;
      for (let i = 0; i < 20; i++) {
        await new Promise((r) => setTimeout(r, REPORT_INTERVAL_MS + 50));
        const next = await nsCommands(subnqn, nsid);
        if (next.reads === prev.reads && next.writes === prev.writes) return next;
        prev = next;
      }
      throw new Error(`namespace ${nsid} of ${subnqn}: the workers' counts did not settle`);
    },
    stop: async () => {
      if (cli.child.exitCode !== null || cli.child.signalCode !== null) return;
      cli.child.kill('SIGTERM');
      const t = setTimeout(() => cli.child.kill('SIGKILL'), 10_000);
      await cli.exited;
      clearTimeout(t);
    },
  };
}

/** A TargetService in this process (for cases that change ANA, namespaces or subsystems while SPDK is attached). */
export async function startOurServiceTarget(config: TargetConfig): Promise<OurTarget & { service: TargetService }> {
  const log: string[] = [];
  const service = new TargetService({ logger: pino({ level: 'info' }, { write: (s: string) => void log.push(s.trimEnd()) }) });
  try {
    await service.apply(config);
  } catch (e) {
    await service.stop();
    throw e;
  }
  const bound = service.boundPorts().sort((a, b) => a.id - b.id);
  const nsCommands = (subnqn: string, nsid: number): Promise<{ reads: number; writes: number }> => {
    const ns = service.stats().subsystems[subnqn]?.namespaces.find((n) => n.nsid === nsid);
    return Promise.resolve({ reads: ns?.reads ?? 0, writes: ns?.writes ?? 0 });
  };
  return {
    service,
    addr: '127.0.0.1',
    ports: bound.map((b) => b.port),
    log,
    controllers: () => Promise.resolve(service.listControllers()),
    nsCommands,
    settledNsCommands: nsCommands,
    stop: () => service.stop(),
  };
}

/** Polls `cond` every 100 ms until it returns a value other than undefined/false; throws naming `what` after `ms`. */
export async function waitFor<T>(what: string, cond: () => Promise<T | undefined | false> | T | undefined | false, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await cond();
      if (v !== undefined && v !== false) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms${last === undefined ? '' : ` (last error: ${(last as Error).message})`}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** An I/O queue's counters at one instant (GET /controllers: commands, and bytes on the wire each way). */
export interface QueueSample {
  commands: number;
  bytesIn: number;
  bytesOut: number;
}

/** What one I/O queue carried while sampled: its first sample, its latest one, and its worker. */
export interface SampledQueue extends QueueSample {
  first: QueueSample;
  worker: number | undefined;
}

/**
 * Reads the I/O queues of SUBNQN's controllers every 100 ms while `during` runs (a controller is gone once the SPDK
 * tool exits, so its queues are read while it works), keyed cntlid/qid: the first and the latest sample of each.
 */
export async function sampleIoQueues<T>(t: OurTarget, subnqn: string, during: Promise<T>): Promise<{ result: T; queues: Map<string, SampledQueue> }> {
  const queues = new Map<string, SampledQueue>();
  let done = false;
  const settled = during.finally(() => (done = true));
  const sample = async (): Promise<void> => {
    for (const c of await t.controllers()) {
      if (c.subnqn !== subnqn || c.discovery) continue;
      for (const q of c.queues) {
        if (q.qid === 0) continue;
        const k = `${c.cntlid}/${q.qid}`;
        const now = { commands: q.commands, bytesIn: q.bytesIn, bytesOut: q.bytesOut };
        const prev = queues.get(k);
        if (prev === undefined) queues.set(k, { ...now, first: now, worker: q.worker });
        else if (q.commands > prev.commands) queues.set(k, { ...now, first: prev.first, worker: q.worker });
      }
    }
  };
  while (!done) {
    await sample().catch(() => undefined);
    await Promise.race([settled.catch(() => undefined), new Promise((r) => setTimeout(r, 100))]);
  }
  return { result: await settled, queues };
}

// -------------------------------------------------------------------------------------------------------------
// SPDK tool output.

/**
 * spdk_nvme_perf logs "CQ transport error -6 (No such device or address)" for an I/O qpair it has itself just
 * disconnected at the end of a run (perf_disconnect_cb polls the group after spdk_nvme_ctrlr_disconnect_io_qpair:
 * nvme_qpair.c only hushes -ENXIO while the qpair is DISCONNECTING, not DISCONNECTED). It prints the same line
 * against SPDK's own nvmf_tgt, so it says nothing about the target.
 */
const PERF_TEARDOWN = /nvme_qpair\.c:.*qid:[1-9]\d*,.*DISCONNECTED\] CQ transport error -6 \(No such device or address\)/;

/** SPDK's error lines (`*ERROR*`, "failed") in a tool's output, perf's own teardown line left out. */
export function spdkErrorLines(out: string): string[] {
  return out.split('\n').filter((l) => (/\*ERROR\*/.test(l) || /\bfail(ed|s)\b/i.test(l)) && !PERF_TEARDOWN.test(l));
}

// -------------------------------------------------------------------------------------------------------------
// bdevperf -z: SPDK's bdev_nvme host, driven over RPC.

export interface PerformResult {
  results: Array<{ job: string; status: string; workload: string; iops: number; io_failed: number; io_timeout: number; io_size: number; queue_depth: number; runtime: number }>;
  core_count: number;
}

export interface IoPath {
  bdev_name: string;
  cntlid: number;
  current: boolean;
  connected: boolean;
  accessible: boolean;
  transport: { trsvcid: string; traddr: string };
  ana_state?: string;
}

export interface BdevHost {
  app: SpdkApp;
  call<T = unknown>(method: string, params?: Record<string, unknown>): Promise<T>;
  /** bdev_nvme_attach_controller; the bdev names it created. */
  attach(c: BdevNvmeController): Promise<string[]>;
  bdevs(): Promise<Array<{ name: string; num_blocks: number; block_size: number; driver_specific?: { nvme?: Array<{ trid: { trsvcid: string }; ns_data: { id: number; ana_state?: string } }> } }>>;
  controllers(): Promise<Array<{ name: string; ctrlrs: Array<{ state: string; cntlid: number; trid: { trsvcid: string; subnqn: string }; host: { nqn: string } }> }>>;
  ioPaths(): Promise<IoPath[]>;
  /** perform_tests: runs the configured workload on every bdev; rejects when a job failed (bdevperf answers an error). */
  perform(p?: { seconds?: number; workload?: string; qd?: number; ioSize?: number }): Promise<PerformResult>;
  /** A key file (mode 0600, as SPDK's keyring_file requires) registered as `name` with keyring_file_add_key. */
  addKey(name: string, secret: string): Promise<void>;
  stop(): Promise<void>;
}

/**
 * bdevperf -z on `cpus` (default core 0), polling: bdev_nvme refuses to create a controller under --interrupt-mode
 * unless it is PCIe (v26.05 spdk_bdev_nvme_create: "Interrupt mode is only supported with PCIe transport").
 */
export async function startBdevHost(o: { cpus?: readonly number[]; qd?: number; ioSize?: number; workload?: string; seconds?: number } = {}): Promise<BdevHost> {
  const app = await startSpdkApp(findSpdk().bdevperf, {
    cpus: o.cpus ?? [0],
    memMiB: 512,
    args: ['-z', '-q', String(o.qd ?? 16), '-o', String(o.ioSize ?? 4096), '-w', o.workload ?? 'verify', '-t', String(o.seconds ?? 2)],
  });
  const keyDir = await tempDir('spdk-host-keys-');
  const call = <T>(method: string, params?: Record<string, unknown>): Promise<T> => app.rpc.call<T>(method, params);
  return {
    app,
    call,
    attach: (c) => call<string[]>('bdev_nvme_attach_controller', attachControllerParams(withPeerDigests(c))),
    bdevs: () => call('bdev_get_bdevs'),
    controllers: () => call('bdev_nvme_get_controllers'),
    ioPaths: async () => {
      const r = await call<{ poll_groups: Array<{ io_paths: IoPath[] }> }>('bdev_nvme_get_io_paths');
      return r.poll_groups.flatMap((g) => g.io_paths);
    },
    perform: (p = {}) =>
      call<PerformResult>('perform_tests', {
        ...(p.seconds === undefined ? {} : { time_in_sec: p.seconds }),
        ...(p.workload === undefined ? {} : { workload_type: p.workload }),
        ...(p.qd === undefined ? {} : { queue_depth: p.qd }),
        ...(p.ioSize === undefined ? {} : { io_size: String(p.ioSize) }),
      }),
    addKey: async (name, secret) => {
      await addKeyringKey(app.rpc, keyDir, name, secret);
    },
    stop: () => app.stop(),
  };
}
