// SPDK v26.05 as a peer (built by $SPDK_SRC/build.sh, see spdkSourceDir): its NVMe-oF target (nvmf_tgt, configured over its
// JSON-RPC socket) and its userspace host tools (spdk_nvme_identify, spdk_nvme_perf, bdevperf). Every SPDK app here
// runs without hugepages and without PCI (--no-huge -s MiB, -u). Their reactors busy-poll the cores of their mask
// unless started with --interrupt-mode: a polling app's CPU is 100 % of its cores by design.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../lab.js';
import { REPO_ROOT, readProcCpu } from '../nvme.js';
import type { CpuSample } from '../load/engine.js';

/** The build's output folder when SPDK_DIR is not set (build.sh's default $SPDK_OUT/spdk). */
export const SPDK_DEFAULT_DIR = '/var/tmp/spdk-26.05/spdk';

/** Raised when SPDK is not built, an SPDK app fails to start or exits with an error, or an RPC fails. */
export class SpdkError extends Error {
  readonly code: 'HARNESS_ERR_SPDK_MISSING' | 'HARNESS_ERR_SPDK_APP' | 'HARNESS_ERR_SPDK_RPC';
  constructor(code: SpdkError['code'], message: string) {
    super(message);
    this.name = 'SpdkError';
    this.code = code;
  }
}

export interface SpdkInstall {
  dir: string;
  nvmfTgt: string;
  perf: string;
  identify: string;
  bdevperf: string;
  /** Environment for SPDK's apps: LD_LIBRARY_PATH with its shared libraries (Debian's DPDK is linked dynamically). */
  env: NodeJS.ProcessEnv;
}

/**
 * Where SPDK's source comes from, the one thing this repository does not hold: SPDK_SRC, else ../shared/spdk next to
 * the repository (how CI lays it out). It must hold build.sh beside SPDK v26.05's source snapshot and its patches.
 */
export function spdkSourceDir(): string {
  return process.env['SPDK_SRC'] ?? path.resolve(REPO_ROOT, '..', 'shared', 'spdk');
}

/** The one line saying how to get SPDK: build it from its source, or provide the source (SPDK_SRC) or a build (SPDK_DIR). */
export function spdkMissingLine(missing: string): string {
  const build = path.join(spdkSourceDir(), 'build.sh');
  return existsSync(build)
    ? `SPDK not built (${missing} is missing): run "bash ${build}" (about 5-10 minutes from scratch) or set SPDK_DIR to an SPDK build`
    : `SPDK not provided (${missing} is missing): set SPDK_SRC to a directory holding build.sh and the SPDK v26.05 source it builds (CI: ../shared/spdk next to the repository), or SPDK_DIR to an SPDK build with build/bin/nvmf_tgt`;
}

/**
 * Why the SPDK suites cannot run here: SPDK neither built nor its source provided (they skip with this line).
 * Undefined when it is built, or when the source is there to build (then a missing build fails them: CI builds it).
 */
export function spdkSkipReason(): string | undefined {
  try {
    findSpdk();
    return undefined;
  } catch (e) {
    return existsSync(path.join(spdkSourceDir(), 'build.sh')) ? undefined : (e as Error).message;
  }
}

/** The SPDK build (SPDK_DIR, else build.sh's default), or a SpdkError saying in one line how to get it. */
export function findSpdk(dir: string = process.env['SPDK_DIR'] ?? SPDK_DEFAULT_DIR): SpdkInstall {
  const bin = (p: string): string => path.join(dir, 'build', p);
  const s: SpdkInstall = {
    dir,
    nvmfTgt: bin('bin/nvmf_tgt'),
    perf: bin('bin/spdk_nvme_perf'),
    identify: bin('bin/spdk_nvme_identify'),
    bdevperf: bin('examples/bdevperf'),
    env: { ...process.env, LD_LIBRARY_PATH: [path.join(dir, 'build', 'lib'), process.env['LD_LIBRARY_PATH']].filter((x) => x !== undefined && x !== '').join(':') },
  };
  for (const f of [s.nvmfTgt, s.perf, s.identify, s.bdevperf]) {
    if (!existsSync(f)) throw new SpdkError('HARNESS_ERR_SPDK_MISSING', spdkMissingLine(f));
  }
  return s;
}

/**
 * SPDK's NVMe fuzzer (test/app/fuzz/nvme_fuzz), built by test/interop/labs.sh after build.sh (build.sh builds no test
 * apps). Separate from findSpdk so the other suites do not need it; a SpdkError saying how to build it when absent.
 */
export function findNvmeFuzz(spdk: SpdkInstall = findSpdk()): string {
  const f = path.join(spdk.dir, 'test', 'app', 'fuzz', 'nvme_fuzz', 'nvme_fuzz');
  if (!existsSync(f)) throw new SpdkError('HARNESS_ERR_SPDK_MISSING', `SPDK's nvme_fuzz is not built (${f} is missing): run test/interop/labs.sh, or make -C ${path.dirname(f)}`);
  return f;
}

/** Whether SPDK is built here (for suites that say why they cannot run). */
export function spdkAvailable(): boolean {
  try {
    findSpdk();
    return true;
  } catch {
    return false;
  }
}

/** SPDK's -m argument for a CPU list: `[0,2]`. */
export function coreList(cpus: readonly number[]): string {
  return `[${cpus.join(',')}]`;
}

// ---------------------------------------------------------------------------------------------------------------
// JSON-RPC 2.0 over the app's Unix socket (what scripts/rpc.py speaks), without Python.

/** Splits a byte stream of concatenated JSON values (SPDK writes responses back to back, no delimiter). */
export function takeJsonValues(buf: string): { values: unknown[]; rest: string } {
  const values: unknown[] = [];
  let depth = 0;
  let inStr = false;
  let esc = false;
  let start = -1;
  for (let i = 0; i < buf.length; i++) {
    const ch = buf[i];
    if (inStr) {
      if (esc) esc = false;
      else if (ch === '\\') esc = true;
      else if (ch === '"') inStr = false;
      continue;
    }
    if (ch === '"') inStr = true;
    else if (ch === '{' || ch === '[') {
      if (depth === 0) start = i;
      depth++;
    } else if (ch === '}' || ch === ']') {
      depth--;
      if (depth === 0 && start >= 0) {
        values.push(JSON.parse(buf.slice(start, i + 1)));
        start = -1;
        buf = buf.slice(i + 1);
        i = -1;
      }
    }
  }
  return { values, rest: buf };
}

export class SpdkRpc {
  readonly #sock: net.Socket;
  #buf = '';
  #nextId = 1;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; method: string }>();

  private constructor(sock: net.Socket) {
    this.#sock = sock;
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => {
      const { values, rest } = takeJsonValues(this.#buf + d);
      this.#buf = rest;
      for (const v of values) this.#answer(v as { id?: number; result?: unknown; error?: { code: number; message: string } });
    });
    const fail = (why: string): void => {
      for (const [, p] of this.#pending) p.reject(new SpdkError('HARNESS_ERR_SPDK_RPC', `${p.method}: ${why}`));
      this.#pending.clear();
    };
    sock.on('error', (e) => fail(e.message));
    sock.on('close', () => fail('RPC socket closed'));
  }

  /** Connects to the app's RPC socket, retrying until it listens (about 1-3 s after start) or `timeoutMs` passes. */
  static async connect(sockPath: string, timeoutMs = 30_000): Promise<SpdkRpc> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      try {
        const s = await new Promise<net.Socket>((resolve, reject) => {
          const c = net.connect(sockPath);
          c.once('connect', () => resolve(c));
          c.once('error', reject);
        });
        return new SpdkRpc(s);
      } catch (e) {
        if (Date.now() > until) throw new SpdkError('HARNESS_ERR_SPDK_RPC', `RPC socket ${sockPath} did not answer within ${timeoutMs} ms: ${(e as Error).message}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  #answer(v: { id?: number; result?: unknown; error?: { code: number; message: string } }): void {
    const p = v.id === undefined ? undefined : this.#pending.get(v.id);
    if (p === undefined || v.id === undefined) return;
    this.#pending.delete(v.id);
    if (v.error !== undefined) p.reject(new SpdkError('HARNESS_ERR_SPDK_RPC', `${p.method}: ${v.error.message} (JSON-RPC error ${v.error.code})`));
    else p.resolve(v.result);
  }

  /** Calls one RPC method (SPDK's names and parameters, as scripts/rpc.py sends them). */
  call<T = unknown>(method: string, params?: Record<string, unknown>): Promise<T> {
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject, method });
      this.#sock.write(JSON.stringify({ jsonrpc: '2.0', method, id, ...(params === undefined ? {} : { params }) }));
    });
  }

  close(): void {
    this.#sock.destroy();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// An SPDK app (nvmf_tgt, bdevperf -z) with its RPC socket.

export interface SpdkAppOptions {
  /** CPUs of its reactors (-m [..]). Default [0]. */
  cpus?: readonly number[];
  /** DPDK memory in MiB (-s, without hugepages). Default 1024. */
  memMiB?: number;
  /** Reactors sleep until work arrives (--interrupt-mode) instead of busy-polling their cores. */
  interrupt?: boolean;
  /** Arguments after SPDK's common ones. */
  args?: readonly string[];
  /** A command that execs the app (e.g. `ip netns exec NS`), so the pid stays the app's. */
  prefix?: readonly string[];
  /** Milliseconds to wait for the RPC socket. Default 30 000. */
  startTimeoutMs?: number;
}

export interface SpdkApp {
  readonly pid: number;
  readonly rpc: SpdkRpc;
  /** The app's stdout and stderr so far. */
  output(): string;
  /** Cumulative CPU of the app (/proc/PID/stat). */
  cpu(): Promise<CpuSample | undefined>;
  /** SIGTERM (SPDK's clean shutdown), SIGKILL after 10 s; removes its socket folder. */
  stop(): Promise<void>;
}

/** Starts an SPDK app with an RPC socket in a fresh temporary folder and waits until it answers spdk_get_version. */
export async function startSpdkApp(binary: string, o: SpdkAppOptions = {}): Promise<SpdkApp> {
  const spdk = findSpdk();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'spdk-app-'));
  const sock = path.join(dir, 'rpc.sock');
  const args = [
    '-m',
    coreList(o.cpus ?? [0]),
    '--no-huge',
    '-s',
    String(o.memMiB ?? 1024),
    '-u',
    '-r',
    sock,
    // Our tests and benches put a host tool or a second app on the same cores; SPDK's lock files would refuse it.
    '--disable-cpumask-locks',
    ...(o.interrupt === true ? ['--interrupt-mode'] : []),
    ...(o.args ?? []),
  ];
  // cwd: the temp folder, so a crashing app's core file goes where stop() removes it.
  const [cmd, ...rest] = [...(o.prefix ?? []), binary, ...args] as [string, ...string[]];
  const child: ChildProcess = spawn(cmd, rest, { cwd: dir, env: spdk.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let exitCode: number | null | undefined;
  void exited.then((c) => (exitCode = c));
  const stopChild = async (): Promise<void> => {
    if (exitCode === undefined && child.exitCode === null) {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(t);
    }
    await rm(dir, { recursive: true, force: true });
  };
  let rpc: SpdkRpc;
  try {
    rpc = await Promise.race([
      (async () => {
        const r = await SpdkRpc.connect(sock, o.startTimeoutMs ?? 30_000);
        await r.call('spdk_get_version');
        return r;
      })(),
      exited.then((code) => {
        throw new SpdkError('HARNESS_ERR_SPDK_APP', `${path.basename(binary)} exited (${code}) before answering RPCs:\n${out.trim().split('\n').slice(-15).join('\n')}`);
      }),
    ]);
  } catch (e) {
    // An app that crashes while starting closes the socket before its exit is seen: say how it ended, with its log.
    const code = await Promise.race([exited, new Promise<string>((r) => setTimeout(() => r('still running'), 2000))]);
    await stopChild();
    if (e instanceof SpdkError && e.code === 'HARNESS_ERR_SPDK_APP') throw e;
    throw new SpdkError('HARNESS_ERR_SPDK_APP', `${path.basename(binary)} did not start (${(e as Error).message}; exit ${String(code)}):\n${out.trim().split('\n').slice(-15).join('\n')}`);
  }
  const pid = child.pid as number;
  return {
    pid,
    rpc,
    output: () => out,
    cpu: () => readProcCpu(pid),
    stop: async () => {
      rpc.close();
      await stopChild();
    },
  };
}

/**
 * Registers `secret` (a TLS interchange PSK or a DHHC-1 secret) under `name` in an app's keyring: SPDK's keyring_file
 * module takes an absolute path to a file of mode 0600 (chmod too: an existing file keeps its mode). Returns `name`.
 */
export async function addKeyringKey(rpc: SpdkRpc, dir: string, name: string, secret: string): Promise<string> {
  const file = path.join(dir, name);
  await writeFile(file, secret, { mode: 0o600 });
  await chmod(file, 0o600);
  await rpc.call('keyring_file_add_key', { name, path: file });
  return name;
}

// ---------------------------------------------------------------------------------------------------------------
// SPDK's NVMe-oF target.

export interface SpdkNamespace {
  /** Malloc bdev size in MiB. */
  sizeMiB: number;
  /** 512 or 4096. Default 512. */
  blockSize?: number;
  /** ANA group of the namespace (needs the subsystem's ANA reporting). */
  anaGroup?: number;
}

export interface SpdkTargetOptions extends Omit<SpdkAppOptions, 'args'> {
  /** Default nqn.2016-06.io.spdk:cnode1. */
  nqn?: string;
  /** Listener address. Default 127.0.0.1. */
  addr?: string;
  /** Listener port; 0 (default) picks a free one. */
  port?: number;
  /** Malloc namespaces, nsid 1, 2, … Default one of 256 MiB, 512-byte blocks. */
  namespaces?: readonly SpdkNamespace[];
  /** Hosts allowed to connect; absent: any host. */
  hosts?: readonly string[];
  /** ANA reporting on the subsystem (nvmf_create_subsystem -r). */
  ana?: boolean;
  /** Also listen for discovery on the same address and port. Default true. */
  discovery?: boolean;
  /** nvmf_create_transport parameters beyond trtype (io_unit_size, in_capsule_data_size, …). */
  transport?: Record<string, unknown>;
  /** Maximum I/O queues per controller (nvmf_create_transport max_io_qpairs_per_ctrlr + 1). */
  maxIoQueues?: number;
}

export interface SpdkTarget extends SpdkApp {
  readonly addr: string;
  readonly port: number;
  readonly nqn: string;
  readonly cpus: readonly number[];
  /** Adds a TCP listener for the subsystem (and discovery) on another port of the same address; returns the port. */
  addListener(port?: number): Promise<number>;
}

export const SPDK_DEFAULT_NQN = 'nqn.2016-06.io.spdk:cnode1';

/** nvmf_tgt with a TCP transport, one subsystem of malloc namespaces and a listener (and discovery) on addr:port. */
export async function startSpdkTarget(o: SpdkTargetOptions = {}): Promise<SpdkTarget> {
  const spdk = findSpdk();
  const cpus = o.cpus ?? [0];
  const app = await startSpdkApp(spdk.nvmfTgt, { ...o, cpus });
  const nqn = o.nqn ?? SPDK_DEFAULT_NQN;
  const addr = o.addr ?? '127.0.0.1';
  const rpc = app.rpc;
  const listen = async (p: number): Promise<void> => {
    const address = { trtype: 'tcp', adrfam: addr.includes(':') ? 'ipv6' : 'ipv4', traddr: addr, trsvcid: String(p) };
    await rpc.call('nvmf_subsystem_add_listener', { nqn, listen_address: address });
    if (o.discovery ?? true) await rpc.call('nvmf_subsystem_add_listener', { nqn: 'nqn.2014-08.org.nvmexpress.discovery', listen_address: address });
  };
  try {
    await rpc.call('nvmf_create_transport', { trtype: 'TCP', ...(o.maxIoQueues === undefined ? {} : { max_io_qpairs_per_ctrlr: o.maxIoQueues }), ...(o.transport ?? {}) });
    await rpc.call('nvmf_create_subsystem', {
      nqn,
      serial_number: 'SPDK00000000000001',
      allow_any_host: o.hosts === undefined,
      ...(o.ana === true ? { ana_reporting: true } : {}),
    });
    for (const h of o.hosts ?? []) await rpc.call('nvmf_subsystem_add_host', { nqn, host: h });
    const nss = o.namespaces ?? [{ sizeMiB: 256 }];
    for (const [i, ns] of nss.entries()) {
      const bs = ns.blockSize ?? 512;
      const name = `Malloc${i}`;
      await rpc.call('bdev_malloc_create', { name, num_blocks: (ns.sizeMiB * 1024 * 1024) / bs, block_size: bs });
      await rpc.call('nvmf_subsystem_add_ns', { nqn, namespace: { bdev_name: name, nsid: i + 1, ...(ns.anaGroup === undefined ? {} : { anagrpid: ns.anaGroup }) } });
    }
    const port = o.port === undefined || o.port === 0 ? await freePort() : o.port;
    await listen(port);
    return {
      ...app,
      addr,
      port,
      nqn,
      cpus,
      addListener: async (p = 0) => {
        const chosen = p === 0 ? await freePort() : p;
        await listen(chosen);
        return chosen;
      },
    };
  } catch (e) {
    const log = app.output();
    await app.stop();
    if (e instanceof SpdkError) e.message += `\nnvmf_tgt output:\n${log.trim().split('\n').slice(-10).join('\n')}`;
    throw e;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// SPDK's host tools.

export interface TransportIdOptions {
  traddr: string;
  trsvcid: number | string;
  subnqn: string;
  /** Without it perf and identify send an empty HOSTNQN in Connect. */
  hostnqn?: string;
}

/** SPDK's transport ID string (-r): `trtype:TCP adrfam:IPv4 traddr:… trsvcid:… subnqn:… [hostnqn:…]`. */
export function transportId(t: TransportIdOptions): string {
  const fam = t.traddr.includes(':') ? 'IPv6' : 'IPv4';
  return `trtype:TCP adrfam:${fam} traddr:${t.traddr} trsvcid:${t.trsvcid} subnqn:${t.subnqn}${t.hostnqn === undefined ? '' : ` hostnqn:${t.hostnqn}`}`;
}

export interface ToolResult {
  code: number | null;
  out: string;
}

/** Runs an SPDK host tool to completion (SIGKILL after `timeoutMs`), stdout and stderr together. */
export function runSpdkTool(binary: string, args: readonly string[], timeoutMs = 120_000): Promise<ToolResult> {
  const spdk = findSpdk();
  return new Promise((resolve) => {
    const child = spawn(binary, args, { env: spdk.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const t = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    // 'close', not 'exit': the last stdout data may come after 'exit'.
    child.once('close', (code) => {
      clearTimeout(t);
      resolve({ code, out });
    });
  });
}

/** spdk_nvme_identify against one controller; the text it prints. */
export function spdkIdentify(t: TransportIdOptions, o: { timeoutMs?: number; args?: readonly string[] } = {}): Promise<ToolResult> {
  return runSpdkTool(findSpdk().identify, ['--no-huge', '-s', '256', '-r', transportId(t), ...(o.args ?? [])], o.timeoutMs);
}

export interface PerfOptions {
  /** randread, randwrite, randrw, read, write, rw. */
  workload: string;
  qd: number;
  ioSize: number;
  seconds: number;
  /** Percentage of reads for rw/randrw (-M). */
  rwmixread?: number;
  /** perf's cores (-c [..]); one I/O queue per core and namespace. Default [0]. */
  cpus?: readonly number[];
  /** Header / data digests (-H / -I). */
  hdgst?: boolean;
  ddgst?: boolean;
  /** Extra perf arguments (-P queues per namespace, …). */
  args?: readonly string[];
}

export interface PerfResult {
  iops: number;
  mibps: number;
  avgUs: number;
  minUs: number;
  maxUs: number;
  /** Latency percentiles from -L ("99.00000% : 123.4us"), microseconds. */
  percentiles: Record<string, number>;
  out: string;
}

/**
 * spdk_nvme_perf against one transport ID. Rejects with perf's own lines when it exits non-zero or connects nothing
 * (perf prints "No valid NVMe controllers" and still exits 0).
 */
export async function spdkPerf(t: TransportIdOptions, o: PerfOptions): Promise<PerfResult> {
  const args = [
    '--no-huge',
    '-s',
    '1024',
    '-c',
    coreList(o.cpus ?? [0]),
    '-q',
    String(o.qd),
    '-o',
    String(o.ioSize),
    '-w',
    o.workload,
    '-t',
    String(o.seconds),
    '-L',
    ...(o.rwmixread === undefined ? [] : ['-M', String(o.rwmixread)]),
    ...(o.hdgst === true ? ['-H'] : []),
    ...(o.ddgst === true ? ['-I'] : []),
    ...(o.args ?? []),
    '-r',
    transportId(t),
  ];
  const r = await runSpdkTool(findSpdk().perf, args, (o.seconds + 60) * 1000);
  const total = /^Total\s*:\s*([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)/m.exec(r.out);
  if (r.code !== 0 || total === null || /No valid NVMe controllers/.test(r.out)) {
    throw new SpdkError('HARNESS_ERR_SPDK_APP', `spdk_nvme_perf ${args.join(' ')} failed (exit ${r.code}):\n${r.out.trim().split('\n').slice(-20).join('\n')}`);
  }
  const percentiles: Record<string, number> = {};
  // The first summary block of -L: " 99.00000% :   123.456us"
  for (const m of r.out.matchAll(/^\s*([\d.]+)%\s*:\s*([\d.]+)us/gm)) {
    const k = `p${Number(m[1])}`;
    if (percentiles[k] === undefined) percentiles[k] = Number(m[2]);
  }
  const n = (i: number): number => Number(total[i]);
  return { iops: n(1), mibps: n(2), avgUs: n(3), minUs: n(4), maxUs: n(5), percentiles, out: r.out };
}

/** A bdev_nvme_attach_controller entry for a bdevperf / nvmf_tgt JSON config (SPDK's parameter names). */
export interface BdevNvmeController {
  name: string;
  traddr: string;
  trsvcid: number | string;
  subnqn: string;
  hostnqn?: string;
  hdgst?: boolean;
  ddgst?: boolean;
  /** Extra bdev_nvme_attach_controller parameters (multipath, ctrlr_loss_timeout_sec, reconnect_delay_sec, psk, dhchap_key, …). */
  extra?: Record<string, unknown>;
}

export function attachControllerParams(c: BdevNvmeController): Record<string, unknown> {
  return {
    name: c.name,
    trtype: 'tcp',
    adrfam: c.traddr.includes(':') ? 'ipv6' : 'ipv4',
    traddr: c.traddr,
    trsvcid: String(c.trsvcid),
    subnqn: c.subnqn,
    ...(c.hostnqn === undefined ? {} : { hostnqn: c.hostnqn }),
    ...(c.hdgst === undefined ? {} : { hdgst: c.hdgst }),
    ...(c.ddgst === undefined ? {} : { ddgst: c.ddgst }),
    ...(c.extra ?? {}),
  };
}

export interface BdevperfOptions {
  workload: string;
  qd: number;
  ioSize: number;
  seconds: number;
  cpus?: readonly number[];
  /** Controllers attached from the JSON config before the run. */
  controllers: readonly BdevNvmeController[];
  /** More bdevperf arguments. */
  args?: readonly string[];
}

/**
 * bdevperf (SPDK's bdev layer over NVMe/TCP controllers) from a JSON config: `-w verify` writes, reads back and
 * compares. Resolves with its output; rejects with its last lines when it exits non-zero.
 */
export async function runBdevperf(o: BdevperfOptions): Promise<ToolResult> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bdevperf-'));
  try {
    const conf = path.join(dir, 'bdev.json');
    await writeFile(conf, JSON.stringify({ subsystems: [{ subsystem: 'bdev', config: o.controllers.map((c) => ({ method: 'bdev_nvme_attach_controller', params: attachControllerParams(c) })) }] }));
    const args = ['--no-huge', '-s', '1024', '-u', '-m', coreList(o.cpus ?? [0]), '-r', path.join(dir, 'rpc.sock'), '--disable-cpumask-locks', '--json', conf, '-q', String(o.qd), '-o', String(o.ioSize), '-w', o.workload, '-t', String(o.seconds), ...(o.args ?? [])];
    const r = await runSpdkTool(findSpdk().bdevperf, args, (o.seconds + 90) * 1000);
    if (r.code !== 0) throw new SpdkError('HARNESS_ERR_SPDK_APP', `bdevperf ${args.join(' ')} failed (exit ${r.code}):\n${r.out.trim().split('\n').slice(-25).join('\n')}`);
    return r;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
