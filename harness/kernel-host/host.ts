// The Linux host driver: probes what the running kernel offers, connects controllers with nvme-cli, runs fio, and
// disconnects every controller it connected. An arm the kernel cannot run is a `skip: <reason>`, never a fallback.
import { connectArgv, disconnectArgv, fabricsWriteScript, fioArgv, parseConnectDevice, parseFabricsInstance, parseFabricsOptions, parseFioJsonJobs, parseIoQueueInfo, type FioJob, type FioResult, type IoQueueInfo, type KernelConnectOptions } from './commands.js';
import type { KernelOffersInfo } from '../report/types.js';
import type { ExecResult, HostRunner } from './runner.js';

/** A failed nvme-cli or fio command: the arm fails with the tool's own message. */
export class KernelHostCommandError extends Error {
  readonly code = 'KERNEL_HOST_ERR_COMMAND';
}

/** What the kernel offers, read before the arms (each arm names the fact it needs). */
export interface KernelOffers {
  kernel: string;
  /** Tokens `cat /dev/nvme-fabrics` lists; undefined when the kernel does not list them (before 5.19). */
  fabricsOptions: string[] | undefined;
  /** nvme_core's multipath parameter: native multipath puts duplicate controllers under one head. */
  multipath: boolean;
  /** nvme_core's default iopolicy (numa on every kernel so far). */
  iopolicy: string | undefined;
}

export interface KernelController {
  device: string;
  /** Wall time of `nvme connect` where it ran. */
  connectMs: number;
}

/** `skip: <reason>` for an arm, or undefined when the kernel can run it. */
export type ArmCheck = string | undefined;

/** Kernel log lines that are the kernel's own failure, whatever the driver (see kernelLog). */
const KERNEL_TROUBLE = /WARNING:|\bBUG[: ]|Oops|hung task|blocked for more than|general protection|KASAN|refcount_t|list_(add|del) corruption|use-after-free/;

export class KernelHost {
  readonly runner: HostRunner;
  /** Prefix for /sys and /dev paths (tests point it at a fake tree; '' on a real host). */
  readonly root: string;
  readonly #connected: string[] = [];
  #offers: KernelOffers | undefined;
  /** iopolicy values written to a subsystem: true when read back, false when refused. */
  readonly #iopolicies = new Map<string, boolean>();
  #perQueue: KernelOffersInfo['perQueue'];

  /** Every connect that names neither digest asks for both (the caller's choice, e.g. a digests-on test run). */
  readonly digests: boolean;

  constructor(runner: HostRunner, o: { root?: string; digests?: boolean } = {}) {
    this.runner = runner;
    this.root = o.root ?? '';
    this.digests = o.digests ?? false;
  }

  /** Every controller connected and not yet disconnected, oldest first. */
  get connected(): readonly string[] {
    return this.#connected;
  }

  async #sh(script: string): Promise<ExecResult> {
    return this.runner.exec(['sh', '-c', script]);
  }

  async #read(p: string): Promise<string | undefined> {
    const r = await this.runner.exec(['cat', this.root + p]);
    return r.code === 0 ? r.stdout.trim() : undefined;
  }

  async offers(): Promise<KernelOffers> {
    if (this.#offers !== undefined) return this.#offers;
    const kernel = (await this.runner.exec(['uname', '-r'])).stdout.trim() || '?';
    const fab = await this.#read('/dev/nvme-fabrics');
    const mp = await this.#read('/sys/module/nvme_core/parameters/multipath');
    const pol = await this.#read('/sys/module/nvme_core/parameters/iopolicy');
    this.#offers = { kernel, fabricsOptions: fab === undefined || !fab.includes(',') ? undefined : parseFabricsOptions(fab), multipath: mp === 'Y', iopolicy: pol };
    return this.#offers;
  }

  /** Whether nvme-fabrics accepts `option` (e.g. queues_per_hctx, nr_io_queues); the reason when it does not. */
  async needsOption(option: string): Promise<ArmCheck> {
    const o = await this.offers();
    if (o.fabricsOptions === undefined) return `kernel ${o.kernel} does not list its nvme-fabrics options (cat /dev/nvme-fabrics), so ${option} cannot be checked`;
    return o.fabricsOptions.includes(option) ? undefined : `kernel ${o.kernel}: nvme-fabrics does not accept ${option} (cat /dev/nvme-fabrics lists ${o.fabricsOptions.length} options without it)`;
  }

  async needsMultipath(): Promise<ArmCheck> {
    const o = await this.offers();
    return o.multipath ? undefined : `kernel ${o.kernel}: native multipath is off (nvme_core multipath=N), so duplicate controllers get no shared head`;
  }

  /** Things the driver did differently from a plain nvme-cli run, once each, for the report's notes. */
  readonly notes = new Set<string>();

  /**
   * nvme connect; throws KernelHostCommandError with nvme-cli's message. A duplicate that nvme-cli refuses as
   * "already connected" (2.3's userspace check) is written to /dev/nvme-fabrics directly, and a note says so.
   */
  async connect(asked: KernelConnectOptions): Promise<KernelController> {
    const o = this.digests && asked.hdrDigest === undefined && asked.dataDigest === undefined ? { ...asked, hdrDigest: true, dataDigest: true } : asked;
    const before = await this.#controllers();
    let r = await this.runner.exec(connectArgv(o));
    let device = parseConnectDevice(r.stdout);
    // Options nvme-cli cannot pass go to /dev/nvme-fabrics as nvme-cli writes them underneath.
    const out = r.stderr + r.stdout;
    const fallback =
      r.code !== 0 && (o.queuesPerHctx !== undefined || o.matchHwQueues === true) && /queues-per-hctx|match-hw-queues|unrecognized|Dump JSON configuration/.test(out)
        ? `nvme-cli has no --${o.matchHwQueues === true ? 'match-hw-queues' : 'queues-per-hctx'} (the option is an RFC kernel's), so those arms wrote their connect options, ${o.matchHwQueues === true ? 'match_hw_queues' : 'queues_per_hctx'} included, to /dev/nvme-fabrics directly, as nvme-cli does underneath.`
        : r.code !== 0 && o.duplicate === true && /already connected/.test(out)
          ? 'nvme-cli answered "already connected" to --duplicate-connect (its userspace lookup_ctrl check, nvme-cli < 2.5), so duplicate controllers were created by writing the same options, duplicate_connect included, to /dev/nvme-fabrics, as nvme-cli does underneath.'
          : undefined;
    if (fallback !== undefined) {
      this.notes.add(fallback);
      r = await this.runner.exec(['sh', '-c', fabricsWriteScript(o, this.root)]);
      device = r.code === 0 ? parseFabricsInstance(r.stdout) : undefined;
    }
    if (device === undefined && r.code === 0) device = (await this.#controllers()).find((c) => !before.includes(c));
    // A controller that came up despite a failing exit status is still ours to disconnect.
    if (device !== undefined) this.#connected.push(device);
    if (r.code !== 0) throw new KernelHostCommandError(`nvme connect failed (exit ${r.code}): ${(r.stderr || r.stdout).trim().split('\n').slice(-2).join(' / ')}`);
    if (device === undefined) throw new KernelHostCommandError(`nvme connect printed no device: ${r.stdout.trim()}`);
    this.#perQueue ??= await this.#probePerQueue(device);
    return { device, connectMs: r.wallMs };
  }

  /**
   * What the report says the kernel offers: offers() plus what the arms learned (iopolicy values written, the
   * per-queue attributes of the first controller). offers() must have run.
   */
  offersReport(): KernelOffersInfo {
    const o = this.#offers;
    if (o === undefined) throw new Error('offersReport before offers()');
    const pols = [...this.#iopolicies];
    return {
      ...(o.fabricsOptions === undefined ? {} : { fabricsOptions: o.fabricsOptions }),
      multipath: o.multipath,
      ...(o.iopolicy === undefined ? {} : { iopolicy: o.iopolicy }),
      ...(pols.length === 0 ? {} : { iopolicies: { accepted: pols.filter(([, ok]) => ok).map(([p]) => p), refused: pols.filter(([, ok]) => !ok).map(([p]) => p) } }),
      ...(this.#perQueue === undefined ? {} : { perQueue: this.#perQueue }),
    };
  }

  /**
   * The per-queue io_cpu attribute (ioCpuAttributes) and a per-queue info directory (sysfs queues/, or debugfs
   * nvme/nvmeN/queues), looked for once, on the first controller; paths with the controller written nvmeN.
   */
  async #probePerQueue(device: string): Promise<NonNullable<KernelOffersInfo['perQueue']>> {
    const attr = await this.ioCpuAttributes(device);
    const r = await this.#sh(`ls -d ${this.root}/sys/class/nvme/${device}/queues ${this.root}/sys/kernel/debug/nvme/${device}/queues 2>/dev/null | head -n 1`);
    const generic = (p: string): string => p.slice(this.root.length).replaceAll(`/${device}/`, '/nvmeN/');
    const info = r.stdout.trim();
    return { ...('paths' in attr ? { ioCpu: generic(attr.paths[0] as string) } : {}), ...(info === '' ? {} : { queueInfo: generic(info) }) };
  }

  async #controllers(): Promise<string[]> {
    const r = await this.runner.exec(['ls', `${this.root}/sys/class/nvme`]);
    return r.code === 0 ? r.stdout.split(/\s+/).filter((n) => /^nvme\d+$/.test(n)) : [];
  }

  async disconnect(device: string): Promise<void> {
    const i = this.#connected.indexOf(device);
    if (i >= 0) this.#connected.splice(i, 1);
    const r = await this.runner.exec(disconnectArgv(device));
    if (r.code !== 0) throw new KernelHostCommandError(`nvme disconnect -d ${device} failed (exit ${r.code}): ${r.stderr.trim()}`);
  }

  /** Disconnects every controller this host connected (newest first); the first error after trying them all. */
  async disconnectAll(): Promise<void> {
    let first: Error | undefined;
    for (const d of [...this.#connected].reverse()) {
      try {
        await this.disconnect(d);
      } catch (e) {
        first ??= e as Error;
      }
    }
    if (first !== undefined) throw first;
  }

  /** I/O queues the controller set up: sysfs queue_count counts the admin queue too. */
  /**
   * The NIC-aware RFC's per-queue info of controller `device`: debugfs block/<disk>/io_queue_info of its namespace
   * (the path disk nvmeXcYnZ under native multipath), debugfs mounted first where it is not. Undefined when the
   * kernel has no such file.
   */
  async ioQueueInfo(device: string): Promise<IoQueueInfo[] | undefined> {
    const d = `${this.root}/sys/kernel/debug`;
    const r = await this.#sh(`[ -d ${d}/block ] || mount -t debugfs debugfs ${d} 2>/dev/null; cat ${d}/block/${device}c*n*/io_queue_info ${d}/block/${device}n*/io_queue_info 2>/dev/null`);
    const lines = parseIoQueueInfo(r.stdout);
    return lines.length === 0 ? undefined : lines;
  }

  /** The controllers (nvmeN) the host has to subsystem `nqn`, whoever connected them. */
  async controllersOf(nqn: string): Promise<string[]> {
    const r = await this.#sh(`for c in ${this.root}/sys/class/nvme/nvme*; do [ "$(cat "$c/subsysnqn" 2>/dev/null)" = '${nqn}' ] && basename "$c"; done; true`);
    return r.stdout.split(/\s+/).filter((n) => /^nvme\d+$/.test(n));
  }

  /** A controller's state (sysfs state: live, resetting, connecting, deleting, ...), or undefined once it is gone. */
  async controllerState(device: string): Promise<string | undefined> {
    return this.#read(`/sys/class/nvme/${device}/state`);
  }

  /** Where the kernel log is now: kernelTrouble(mark) reads what came after. */
  async dmesgMark(): Promise<number> {
    return Number((await this.#sh('dmesg | wc -l')).stdout.trim()) || 0;
  }

  /**
   * Kernel log lines since `mark` that say the kernel itself went wrong (WARNING, BUG, Oops, a hung task, a leaked
   * or freed-twice object) and the nvme lines beside them (`nvme`), for an error path's evidence.
   */
  async kernelLog(mark: number): Promise<{ trouble: string[]; nvme: string[] }> {
    const lines = (await this.#sh(`dmesg | tail -n +${mark + 1}`)).stdout.split('\n').filter((l) => l.trim() !== '');
    return { trouble: lines.filter((l) => KERNEL_TROUBLE.test(l)), nvme: lines.filter((l) => /\bnvme/.test(l)) };
  }

  /** The I/O timeout (seconds) of controllers created from now on: nvme_core's io_timeout parameter. */
  async ioTimeout(seconds?: number): Promise<number | undefined> {
    const p = `${this.root}/sys/module/nvme_core/parameters/io_timeout`;
    if (seconds !== undefined) await this.#sh(`echo ${seconds} > ${p}`);
    const v = Number(await this.#read('/sys/module/nvme_core/parameters/io_timeout'));
    return Number.isFinite(v) && v > 0 ? v : undefined;
  }

  async ioQueues(device: string): Promise<number | undefined> {
    const n = Number(await this.#read(`/sys/class/nvme/${device}/queue_count`));
    return Number.isFinite(n) && n > 0 ? n - 1 : undefined;
  }

  /**
   * The subsystem the controller belongs to (native multipath: one per NQN, every duplicate controller a path): its
   * sysfs name, its namespace head's block device and the controllers under it.
   */
  async subsystem(device: string): Promise<{ name: string; blockDevice: string; paths: string[] } | undefined> {
    const r = await this.#sh(`for s in ${this.root}/sys/class/nvme-subsystem/nvme-subsys*; do [ -e "$s/${device}" ] && echo "$s" && ls "$s"; done`);
    const lines = r.stdout.split(/\s+/).filter((l) => l !== '');
    const dir = lines[0];
    if (dir === undefined) return undefined;
    const entries = lines.slice(1);
    const ns = entries.find((e) => /^nvme\d+n\d+$/.test(e));
    const paths = entries.filter((e) => /^nvme\d+$/.test(e));
    return { name: dir.split('/').pop() as string, blockDevice: `/dev/${ns ?? `${device}n1`}`, paths };
  }

  /** Sets the subsystem's iopolicy and reads it back: undefined, or why the kernel refused it (an arm to skip). */
  async setIopolicy(subsys: string, policy: string): Promise<ArmCheck> {
    const file = `${this.root}/sys/class/nvme-subsystem/${subsys}/iopolicy`;
    const w = await this.#sh(`echo ${policy} > ${file}`);
    const got = await this.#read(`/sys/class/nvme-subsystem/${subsys}/iopolicy`);
    const took = w.code === 0 && got === policy;
    // A subsystem file that does not exist says nothing about the value: only a refusal counts against it.
    if (got !== undefined) this.#iopolicies.set(policy, took);
    if (took) return undefined;
    const o = await this.offers();
    return got === undefined ? `kernel ${o.kernel}: no ${file} (no native multipath subsystem)` : `kernel ${o.kernel} refuses iopolicy ${policy} (${file} stays ${got})`;
  }

  /**
   * The per-queue CPU attribute (the CPU a queue's io_work runs on, nvme_tcp_set_queue_io_cpu's choice), every
   * queue's path; no released kernel exposes one, so the arms that write it are skipped with the paths looked at.
   */
  async ioCpuAttributes(device: string): Promise<{ paths: string[] } | { skip: string }> {
    const r = await this.#sh(`ls -d ${this.root}/sys/class/nvme/${device}/queues/*/io_cpu ${this.root}/sys/kernel/debug/nvme/${device}/queues/*/io_cpu 2>/dev/null`);
    const paths = r.stdout.split('\n').filter((p) => p !== '');
    if (paths.length > 0) return { paths };
    return { skip: `kernel ${(await this.offers()).kernel}: no per-queue io_cpu attribute (looked in /sys/class/nvme/${device}/queues/*/io_cpu and debugfs nvme/${device}/queues/*/io_cpu)` };
  }

  /**
   * Writes `cpu` to every io_cpu attribute and reads them back: undefined, or why the kernel refused (an arm to skip).
   * Paths come from ioCpuAttributes (ls output: no spaces to quote).
   */
  async setIoCpu(paths: readonly string[], cpu: number): Promise<ArmCheck> {
    const w = await this.#sh(paths.map((p) => `echo ${cpu} > ${p}`).join(' && '));
    const got = await this.ioCpus(paths);
    const off = got.findIndex((v) => v !== cpu);
    if (w.code === 0 && off < 0) return undefined;
    const p = (paths[off < 0 ? 0 : off] as string).slice(this.root.length);
    return `kernel ${(await this.offers()).kernel} refuses io_cpu ${cpu} (${p}${off < 0 ? `: ${w.stderr.trim()}` : ` stays ${String(got[off])}`})`;
  }

  /** The CPU in each io_cpu attribute (NaN where unreadable). */
  async ioCpus(paths: readonly string[]): Promise<number[]> {
    const r = await this.runner.exec(['cat', ...paths]);
    const vals = r.stdout.split('\n').filter((l) => l.trim() !== '').map(Number);
    return paths.map((_, i) => vals[i] ?? Number.NaN);
  }

  /** fio with JSON output; throws KernelHostCommandError with fio's message when fio fails or reports an error. */
  async fio(job: FioJob): Promise<FioResult> {
    return (await this.fioRun(fioArgv(job), (job.runtimeS + 120) * 1000))[0] as FioResult;
  }

  /** Any fio command line with JSON output: every job entry, or KernelHostCommandError with fio's message. */
  async fioRun(argv: readonly string[], timeoutMs: number): Promise<ReturnType<typeof parseFioJsonJobs>> {
    const r = await this.runner.exec(argv, timeoutMs);
    if (r.code !== 0) throw new KernelHostCommandError(`fio failed (exit ${r.code}): ${(r.stderr || r.stdout).trim().split('\n').slice(-3).join(' / ')}`);
    const res = parseFioJsonJobs(r.stdout);
    if (res.length === 0) throw new KernelHostCommandError('fio JSON has no jobs');
    const bad = res.find((j) => j.error !== 0);
    if (bad !== undefined) throw new KernelHostCommandError(`fio reported error ${bad.error}: ${r.stderr.trim().split('\n').slice(-2).join(' / ')}`);
    return res;
  }

  /** Waits (up to 5 s) for a block device to appear after connect (udev-less guests: devtmpfs). */
  async waitBlock(dev: string): Promise<boolean> {
    const r = await this.#sh(`i=0; while [ ! -b ${this.root}${dev} ] && [ ! -f ${this.root}${dev} ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; [ -b ${this.root}${dev} ] || [ -f ${this.root}${dev} ]`);
    return r.code === 0;
  }
}
