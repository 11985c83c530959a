// `nvme-tcp bench`: run a job file (fio syntax or JSON) against a target, or a named scenario; print a Markdown
// summary and write JSON / Markdown / HTML reports.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { parseArgs } from 'node:util';
import { Command, CommanderError, Option } from 'commander';
import { intArg, nqnArg, portArg, sizeArg, UsageError, usageLine } from './args.js';
import {
  allowedCpus,
  armFromRun,
  controllerBlockTarget,
  DEFAULT_BENCH_NQN,
  findScenario,
  JobFileError,
  makeReport,
  parseJobFile,
  progressEnabled,
  progressLine,
  renderJson,
  renderMarkdown,
  resolveJobs,
  runJobs,
  SCENARIOS,
  startInProcessTarget,
  writeReport,
  type Arm,
  type EngineOptions,
  type ParsedJobFile,
  type Report,
  type ScenarioContext,
} from '../harness/index.js';
import { parseCpus } from '../harness/load/index.js';
import { CATALOGUE, CATALOGUE_HOSTS, findCase, LinuxLabHost, OursHost, runCatalogue, SpdkPerfHost, renderMatrixMarkdown, writeMatrix, type HostAdapter } from '../harness/catalogue/index.js';
import { SPDK_DEFAULT_DIR } from '../harness/peers/spdk.js';
import { splitSetupText, withSplitTarget } from '../harness/scenarios/workload.js';
import { LAB_KERNELS, labPrerequisites, localPrerequisites, type LabKernel } from '../harness/kernel-host/runner.js';
import { buildHostModules, hostPatchesKernel, HostPatchesError, resolveHostPatches } from '../harness/kernel-host/host-patches.js';
import type { KernelHostChoice } from '../harness/scenarios/types.js';
import { kernelJobFile } from '../harness/scenarios/kernel-workload.js';
import { KERNEL_REFUSED } from '../harness/kernel-host/commands.js';
import type { RefusedOptions } from '../harness/load/index.js';
import { connect, type ConnectOptions, type IoWorkerInfo } from '../initiator/index.js';

const BENCH_USAGE = `usage: nvme-tcp bench JOBFILE [-a ADDR -s PORT -n NQN | --target ours|spdk] [options]
       nvme-tcp bench --scenario NAME [--quick] [--io-workers N] [--target ours|spdk [--target-cores N]
                      [--spdk-interrupt]] [--out DIR]
       nvme-tcp bench --scenario NAME --initiator kernel (--lab 6.1|6.12|newest | --local) [--quick] [--out DIR]
                      [--host-patches stock|queues-per-hctx|nic-aware-queues|parallel-queue-setup|DIR]
       nvme-tcp bench JOBFILE --initiator kernel (--lab 6.1|6.12|newest | --local) [--nr-io-queues N]
                      [--queue-size N] [--ram SIZE] [-n NQN] [--out DIR]
       nvme-tcp bench --catalogue [--hosts ours,linux-6.1,linux-6.12,linux-newest,spdk-perf] [--cases ID,...] [--out DIR]
       nvme-tcp bench --list

JOBFILE is an fio-style job file ([global] + [job] sections: rw, rwmixread, bs, bssplit, iodepth, numjobs,
runtime, ramp_time, size, io_size, offset, rate_iops, verify=crc32c, randseed, stonewall, hctx) or the same
options as JSON ({"global": {...}, "jobs": [{"name": ..., ...}]}). Without -a an in-process target with one
RAM namespace is started (both ends then share this process and its CPU figures); with --target, a target
in its own process, pinned apart from this one, whose CPU the report reads from /proc.

  -a, --traddr ADDR        target address
  -s, --trsvcid PORT       target port (default 4420)
  -n, --nqn NQN            subsystem NQN (default ${DEFAULT_BENCH_NQN} for the in-process target)
      --nsid N             namespace (default 1)
      --nr-io-queues N     I/O queues (hctxs); default: one per submitter (sum of numjobs), at most 64
      --queues-per-hctx N  transport queues per hctx (queue groups); default 1
      --queue-size N       I/O queue depth; default 128
      --io-workers N       run the I/O queues in N io worker threads (default 0: on this thread; job-file
                           [global] io_workers=N works too, the flag wins)
      --io-worker-cpus L   pin io worker i to CPU L[i mod len] (e.g. 0,1; [global] io_worker_cpus)
      --io-budget-us US    io worker submission budget before it yields (default 1000; [global] io_budget_us)
      --hdr-digest, --data-digest
      --ram SIZE           in-process target namespace size (default 256M)
      --scenario NAME      run a scenario (see --list); --quick runs it in seconds; --io-workers N runs
                           queue-groups, duplicate-connect and match-hw-queues with N io workers, pinned
                           on every CPU but the target's
      --target ours|spdk   the target of a job file or scenario, in its own process: ours (\`nvme-tcp
                           target\`, the scenarios' default) or SPDK's nvmf_tgt (SPDK_DIR, default
                           ${SPDK_DEFAULT_DIR}), pinned on the CPU kept from the initiator; SPDK
                           busy-polls, so its CPU is 100 % of its cores by design: compare IOPS per core
      --target-cores N     SPDK: reactor cores (one poll group each), taken after the initiator's CPU
      --spdk-interrupt     SPDK: reactors sleep until work arrives instead of busy-polling
      --initiator kernel   scenarios parallel-connect, duplicate-connect, queue-groups, match-hw-queues,
                           or a job file (run by fio on the connected namespace), with the Linux host
                           (nvme-cli + fio) as the initiator, against our target in this process:
      --lab 6.1|6.12|newest     ... in the qemu lab's guest (figures labelled emulated)
      --local              ... on this machine (root, nvme-tcp loaded, nvme-cli and fio installed)
      --host-patches S     with --lab newest and parallel-connect, queue-groups or match-hw-queues: stock
                           arms, then the same arms with nvme-core/-fabrics/-tcp built from a host patch
                           series (a seed name, from HOST_PATCHES_SRC or ../shared/seed-patches, or a
                           DIR with a series file) and loaded in the guest; stock: the stock arms only
      --catalogue          run the host-behaviour catalogue (docs/faults.md): each case's fault rules on
                           our target in this process, its workload on each host; writes
                           host-behaviour.json/.md/.html and evidence/ to --out (default
                           reports/host-behaviour); --hosts picks the columns (default ours),
                           --cases the rows (default all); exit 0 once the matrix is written, whatever
                           the hosts did (a misbehaving host is a finding)
      --out DIR            write NAME.json, NAME.md and NAME.html there (scenarios default to ./reports)
  -o, --output-format F    normal (the Markdown summary, default) or json (the JSON report on stdout), as
                           fio and the other verbs spell it
      --json               the same as -o json
  -h, --help

Exit status: 0 ok, 1 when an I/O failed, verification found a mismatch or the run failed, 2 for bad usage.
`;

export interface BenchIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  /** Where progress lines go (stderr); only used on a TTY outside CI. */
  progress?: { isTTY?: boolean; write(s: string): boolean };
  /**
   * Where `--initiator kernel --local` finds its tools, /sys and uid (tests: fake nvme-cli and fio on PATH over a
   * fake /sys, harness/kernel-host/fake-tools.ts); absent: this machine's.
   */
  kernelHostLocal?: { env: NodeJS.ProcessEnv; root: string; uid: number };
}

const defaultIo: BenchIo = { stdout: (s) => process.stdout.write(s), stderr: (s) => process.stderr.write(s), progress: process.stderr };

const OPTIONS = {
  traddr: { type: 'string', short: 'a' },
  trsvcid: { type: 'string', short: 's' },
  nqn: { type: 'string', short: 'n' },
  nsid: { type: 'string' },
  'nr-io-queues': { type: 'string' },
  'queues-per-hctx': { type: 'string' },
  'queue-size': { type: 'string' },
  'io-workers': { type: 'string' },
  'io-worker-cpus': { type: 'string' },
  'io-budget-us': { type: 'string' },
  target: { type: 'string' },
  'target-cores': { type: 'string' },
  'spdk-interrupt': { type: 'boolean' },
  initiator: { type: 'string' },
  lab: { type: 'string' },
  local: { type: 'boolean' },
  'host-patches': { type: 'string' },
  'hdr-digest': { type: 'boolean' },
  'data-digest': { type: 'boolean' },
  ram: { type: 'string' },
  scenario: { type: 'string' },
  quick: { type: 'boolean' },
  out: { type: 'string' },
  json: { type: 'boolean' },
  'output-format': { type: 'string', short: 'o' },
  list: { type: 'boolean' },
  catalogue: { type: 'boolean' },
  hosts: { type: 'string' },
  cases: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;


/** An integer flag by the bin's one integer parser (cli/args.ts intArg: decimal or 0x-hex, so "1e3" is refused). */
function intFlag(v: string | undefined, name: string, min: number, max: number): number | undefined {
  return v === undefined ? undefined : intArg(name, v, min, max);
}

/**
 * -s, -n and --ram by the parsers every verb uses, before anything starts (a bad --ram is exit 2, not 1); -a takes
 * an address or a host name, as connect's does, and only an empty one is refused here.
 */
function checkValueFlags(v: BenchValues): void {
  if (v.traddr === '') throw new UsageError('-a/--traddr: empty; use e.g. -a 127.0.0.1');
  if (v.trsvcid !== undefined) portArg('trsvcid', v.trsvcid);
  if (v.nqn !== undefined) nqnArg('nqn', v.nqn);
  if (v.ram !== undefined) sizeArg('ram', v.ram);
}

/** OPTIONS through commander (typo suggestions, one error); the help stays BENCH_USAGE. */
function parseBenchArgs(argv: readonly string[]): { values: BenchValues; positionals: string[] } {
  const c = new Command('nvme-tcp bench')
    .exitOverride()
    .configureOutput({ writeOut: () => undefined, writeErr: () => undefined, outputError: () => undefined })
    .helpOption(false)
    .showSuggestionAfterError(true)
    .argument('[jobfile...]');
  for (const [name, o] of Object.entries(OPTIONS) as [string, { type: string; short?: string }][]) {
    c.addOption(new Option(`${o.short !== undefined ? `-${o.short}, ` : ''}--${name}${o.type === 'string' ? ' <value>' : ''}`));
  }
  c.parse([...argv], { from: 'user' });
  const opts = c.opts();
  const values: Record<string, unknown> = {};
  for (const o of c.options) if (opts[o.attributeName()] !== undefined) values[o.long?.slice(2) ?? ''] = opts[o.attributeName()];
  return { values: values as BenchValues, positionals: c.args };
}

/** Entry point called by cli/main.ts for `nvme-tcp bench ...`; resolves to the exit status. */
export async function runBenchCli(argv: string[], io: BenchIo = defaultIo): Promise<number> {
  let parsed: { values: BenchValues; positionals: string[] };
  try {
    parsed = parseBenchArgs(argv);
  } catch (e) {
    if (!(e instanceof CommanderError)) throw e;
    io.stderr(`nvme-tcp bench: ${usageLine(e)}; see nvme-tcp bench --help\n`);
    return 2;
  }
  const v = parsed.values;
  const pos = parsed.positionals;
  try {
    if (v.help === true) {
      io.stdout(BENCH_USAGE);
      return 0;
    }
    // fio's --output-format (normal|json; fio's terse and json+ have no counterpart here); --json is kept as its alias.
    const format = v['output-format'] ?? (v.json === true ? 'json' : 'normal');
    if (format !== 'normal' && format !== 'json') throw new UsageError(`--output-format must be normal or json, got "${format}"`);
    v.json = format === 'json';
    checkValueFlags(v);
    if (v.list === true) {
      for (const s of SCENARIOS) io.stdout(`${s.name.padEnd(18)} ${s.title}\n`);
      return 0;
    }
    const tty = progressEnabled(io.progress ?? { write: () => true });
    const log = (msg: string): void => {
      if (tty) io.stderr(`\r\x1b[2K${msg}\n`);
    };
    if (v.catalogue === true) {
      if (pos.length > 0 || v.scenario !== undefined) throw new UsageError('--catalogue takes no job file or --scenario: drop them');
      return await runCatalogueCli(v, io, log);
    }
    if (v.hosts !== undefined || v.cases !== undefined) throw new UsageError(`--${v.hosts !== undefined ? 'hosts' : 'cases'} needs --catalogue`);
    if (v.scenario !== undefined) {
      if (pos.length > 0) throw new UsageError(`--scenario takes no job file (got "${pos[0]}")`);
      const sc = findScenario(v.scenario);
      if (sc === undefined) throw new UsageError(`unknown scenario "${v.scenario}"; one of: ${SCENARIOS.map((s) => s.name).join(', ')}`);
      const ioWorkers = intFlag(v['io-workers'], 'io-workers', 0, 4096);
      if (ioWorkers !== undefined && ioWorkers > 0 && sc.ioWorkers !== true) {
        throw new UsageError(`--io-workers does not apply to scenario ${sc.name}; it does to ${SCENARIOS.filter((s) => s.ioWorkers === true).map((s) => s.name).join(', ')}`);
      }
      const target = targetFlags(v) ?? {};
      const kernelHost = await withHostPatches(kernelHostFlags(v, sc.name, ioWorkers, io.kernelHostLocal), v, sc.name, log);
      const progress = progressLine(sc.name, io.progress ?? { write: () => true });
      const report = await sc.run({ quick: v.quick === true, log, onProgress: (label, p) => progress.update({ ...p }), ...(ioWorkers === undefined ? {} : { ioWorkers }), ...target, ...(kernelHost === undefined ? {} : { kernelHost }) });
      progress.done();
      return await emit(io, report, v.out ?? 'reports', v.json === true);
    }
    if (v.quick === true) throw new UsageError('--quick applies to --scenario only');
    if (pos.length !== 1) throw new UsageError(pos.length === 0 ? 'need a job file, --scenario NAME or --list' : `one job file at a time (got ${pos.length})`);
    if (v['host-patches'] !== undefined) throw new UsageError('--host-patches applies to --scenario with --initiator kernel --lab newest');
    if (v.initiator === 'kernel') refuseKernelJobFlags(v);
    const kernelHost = kernelHostFlags(v, undefined, intFlag(v['io-workers'], 'io-workers', 0, 4096), io.kernelHostLocal);
    if (kernelHost !== undefined) return await runKernelJobFile(pos[0] as string, v, io, kernelHost, log);
    return await runJobFile(pos[0] as string, v, io);
  } catch (e) {
    return failed(io, e);
  }
}

/** `--catalogue`: hosts and cases checked before anything starts (one line, exit 2), then the run and the matrix. */
async function runCatalogueCli(v: BenchValues, io: BenchIo, log: (m: string) => void): Promise<number> {
  const hostIds = (v.hosts ?? 'ours').split(',').filter((h) => h !== '');
  for (const h of hostIds) {
    if (!(CATALOGUE_HOSTS as readonly string[]).includes(h)) throw new UsageError(`--hosts: unknown host "${h}"; use some of ${CATALOGUE_HOSTS.join(',')}`);
  }
  const caseIds = v.cases === undefined ? CATALOGUE.map((c) => c.id) : v.cases.split(',').filter((c) => c !== '');
  const cases = caseIds.map((id) => {
    const c = findCase(id);
    if (c === undefined) throw new UsageError(`--cases: unknown case "${id}"; one of ${CATALOGUE.map((k) => k.id).join(', ')}`);
    return c;
  });
  const hosts: HostAdapter[] = hostIds.map((h) => {
    if (h === 'ours') return new OursHost();
    if (h === 'spdk-perf') return new SpdkPerfHost();
    const which = h.slice('linux-'.length) as LabKernel;
    const missing = labPrerequisites(which);
    if (missing !== undefined) throw new UsageError(`--hosts ${h}: ${missing}`);
    return new LinuxLabHost(which, { log });
  });
  const out = v.out ?? path.join('reports', 'host-behaviour');
  const matrix = await runCatalogue({ hosts, cases, out, log: (m) => io.stderr(`${m}\n`) });
  const files = await writeMatrix(out, matrix);
  if (v.json === true) io.stdout(renderJson(matrix));
  else io.stdout(`${renderMatrixMarkdown(matrix)}\nwrote ${files.markdown}, ${files.html}, ${files.json}\n`);
  return 0;
}

type BenchValues = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true; strict: true }>>['values'];

/** Exit status and one line for an error: 2 for bad usage or a bad job file, 1 for a failed run. */
function failed(io: BenchIo, e: unknown): number {
  io.stderr(`nvme-tcp bench: ${(e as Error).message}\n`);
  return e instanceof UsageError || e instanceof JobFileError || e instanceof HostPatchesError ? 2 : 1;
}

/** A job file, its jobs and the connect options its flags and [global] section ask for. */
interface JobRun {
  file: string;
  jobs: ParsedJobFile;
  nsid: number;
  opts: Omit<ConnectOptions, 'traddr' | 'trsvcid' | 'nqn'>;
}

/** Where the job runs: the target's address and, for a target we started in its own process, what it adds. */
interface JobTarget {
  traddr: string;
  port: number;
  nqn: string;
  /** The arm's `target` parameter. */
  label: string;
  cpuLabel: string;
  engine?: EngineOptions;
  /** Connect options the target's placement adds (io workers pinned on this process's CPUs). */
  connect?: Pick<ConnectOptions, 'io_workers' | 'io_worker_cpus'>;
  finish?: (arms: Arm[]) => Arm[];
  notes: string[];
  setup?: string;
}

/** Reads and parses a job file; a file that cannot be read or parsed is a UsageError naming it (exit 2). */
async function readJobFile(file: string, refused?: RefusedOptions): Promise<ParsedJobFile> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  try {
    return parseJobFile(text, refused);
  } catch (e) {
    if (e instanceof JobFileError) throw new UsageError(`${file}: ${e.message}`);
    throw e;
  }
}

/** Reads and checks a job file and the flags that shape its controller; flags first, so a bad flag is reported before any file or network work. */
async function loadJobRun(file: string, v: BenchValues): Promise<JobRun> {
  const nrIoFlag = intFlag(v['nr-io-queues'], 'nr-io-queues', 1, 1024);
  const qph = intFlag(v['queues-per-hctx'], 'queues-per-hctx', 1, 16) ?? 1;
  const queueSize = intFlag(v['queue-size'], 'queue-size', 16, 1024) ?? 128;
  const nsid = intFlag(v.nsid, 'nsid', 1, 0xfffffffe) ?? 1;
  const jobs = await readJobFile(file);
  const submitters = jobs.jobs.reduce((s, j) => s + Number(j.options['numjobs'] ?? jobs.global['numjobs'] ?? '1'), 0);
  // io workers: flags, else the job file's [global] keys (validated again, naming the option, by connect()).
  const g = jobs.global;
  const ioWorkers = intFlag(v['io-workers'] ?? g['io_workers'], 'io-workers', 0, 4096);
  const ioBudget = intFlag(v['io-budget-us'] ?? g['io_budget_us'], 'io-budget-us', 1, 1_000_000);
  const cpuList = v['io-worker-cpus'] ?? g['io_worker_cpus'];
  const opts = {
    nr_io_queues: nrIoFlag ?? Math.min(64, Math.max(1, submitters)),
    queues_per_hctx: qph,
    queue_size: queueSize,
    // A flag not given is an option not given (connect()'s default, off), as for the io-worker keys below.
    ...(v['hdr-digest'] === true ? { hdr_digest: true } : {}),
    ...(v['data-digest'] === true ? { data_digest: true } : {}),
    ...(ioWorkers !== undefined ? { io_workers: ioWorkers } : {}),
    ...(ioBudget !== undefined ? { io_budget_us: ioBudget } : {}),
    ...(cpuList !== undefined ? { io_worker_cpus: cpuListFlag(cpuList) } : {}),
  };
  return { file, jobs, nsid, opts };
}

/**
 * `nvme-tcp bench JOBFILE`: against the target at -a, against a target started for the job in its own process pinned
 * apart (--target ours|spdk, as the split scenarios do), or against one in this process.
 */
async function runJobFile(file: string, v: BenchValues, io: BenchIo): Promise<number> {
  const split = targetFlags(v);
  const port = intFlag(v.trsvcid, 'trsvcid', 1, 65535);
  if (v.traddr === undefined && v.trsvcid !== undefined) throw new UsageError('-s needs -a');
  if (v.traddr !== undefined && v.nqn === undefined) throw new UsageError('-a needs -n NQN');
  if (v.traddr !== undefined && split !== undefined) throw new UsageError('-a names a running target and --target starts one: use one of them');
  const job = await loadJobRun(file, v);
  if (v.traddr !== undefined) {
    const where = `${v.traddr}:${port ?? 4420}`;
    return runJobOn(io, job, v, { traddr: v.traddr, port: port ?? 4420, nqn: v.nqn as string, label: where, cpuLabel: 'initiator', notes: [], setup: `initiator on this host, target at ${where}` });
  }
  const ram = v.ram ?? '256M';
  if (split !== undefined) {
    const ioWorkers = job.opts.io_workers;
    return withSplitTarget(
      { ram, ...(v.nqn === undefined ? {} : { nqn: v.nqn }) },
      async (s) =>
        runJobOn(io, job, v, {
          traddr: s.target.addr,
          port: s.target.port,
          nqn: s.target.nqn,
          label: s.target.label,
          cpuLabel: 'initiator',
          engine: s.engine,
          // Explicit io worker CPUs win over the placement's.
          connect: job.opts.io_worker_cpus === undefined ? s.connect : {},
          finish: s.finish,
          notes: [await s.describe()],
          setup: splitSetupText(split),
        }),
      { ...split, ...(ioWorkers === undefined ? {} : { ioWorkers }) },
    );
  }
  const inproc = await startInProcessTarget({ size: ram, nqn: v.nqn ?? DEFAULT_BENCH_NQN });
  try {
    return await runJobOn(io, job, v, {
      traddr: inproc.addr,
      port: inproc.port,
      nqn: inproc.nqn,
      label: 'in-process RAM',
      cpuLabel: 'initiator+target (same process)',
      // Unpinned runs on a few vCPUs are bimodal (docs/performance.md, Benchmarks): say where this one was allowed to run.
      notes: [`This process (pid ${process.pid}, initiator and target) was allowed on CPUs ${await allowedCpus(process.pid)}; pin it with taskset -c, or use --target ours, for repeatable figures.`],
    });
  } finally {
    await inproc.stop();
  }
}

/** Connects, runs the jobs, disconnects, and prints (and with --out writes) the report. */
async function runJobOn(io: BenchIo, job: JobRun, v: BenchValues, t: JobTarget): Promise<number> {
  const started = new Date();
  const ctrl = await connect({ ...job.opts, ...t.connect, traddr: t.traddr, trsvcid: t.port, nqn: t.nqn });
  try {
    const target = controllerBlockTarget(ctrl, job.nsid);
    const jobs = resolveJobs(job.jobs, target);
    const progress = progressLine(path.basename(job.file), io.progress ?? { write: () => true });
    const run = await runJobs(target, jobs, { ...t.engine, cpuLabel: t.cpuLabel, onProgress: progress.update });
    progress.done();
    const workers = ctrl.ioWorkerInfo();
    const params = { target: t.label, nqn: t.nqn, nsid: job.nsid, nr_io_queues: job.opts.nr_io_queues ?? 1, queues_per_hctx: job.opts.queues_per_hctx ?? 1, io_workers: workers.length };
    const arms = [armFromRun('workload', params, run, { ioQueues: ctrl.ioQueueCount })];
    const report = makeReport({
      kind: 'workload',
      name: path.basename(job.file).replace(/\.[^.]*$/, ''),
      title: `Workload ${path.basename(job.file)}`,
      hypothesis: '',
      quick: false,
      createdAt: started,
      arms: t.finish === undefined ? arms : t.finish(arms),
      comparisons: [],
      verdict: '',
      notes: [...(job.jobs.ignored.length > 0 ? [`fio options without effect here: ${job.jobs.ignored.join(', ')}`] : []), ...workerNotes(workers, run.durationMs), ...t.notes],
      ...(t.setup === undefined ? {} : { setup: t.setup }),
    });
    return await emit(io, report, v.out, v.json === true);
  } finally {
    await ctrl.disconnect().catch(() => undefined);
  }
}

const KERNEL_SCENARIOS = ['parallel-connect', 'duplicate-connect', 'queue-groups', 'match-hw-queues'];

/**
 * `bench JOBFILE --initiator kernel`: the flags that name another target or shape our initiator's controller, refused
 * before anything is read or connected (the harness starts our target; nvme connect takes --nr-io-queues and
 * --queue-size only).
 */
function refuseKernelJobFlags(v: BenchValues): void {
  const ours: [string, unknown][] = [
    ['-a', v.traddr], ['-s', v.trsvcid], ['--target', v.target], ['--nsid', v.nsid], ['--queues-per-hctx', v['queues-per-hctx']], ['--io-worker-cpus', v['io-worker-cpus']],
    ['--io-budget-us', v['io-budget-us']], ['--hdr-digest', v['hdr-digest']], ['--data-digest', v['data-digest']],
  ];
  const set = ours.find(([, x]) => x !== undefined && x !== false);
  if (set === undefined) return;
  const why = ['-a', '-s', '--target'].includes(set[0]) ? 'the harness starts our target for the Linux host' : set[0] === '--queues-per-hctx' ? 'use --scenario queue-groups --initiator kernel' : "it is our initiator's";
  throw new UsageError(`${set[0]} does not apply to a job file with --initiator kernel (${why}): drop it`);
}

/** The job file through fio on the Linux host (harness/scenarios/kernel-workload.ts); prints and writes the report. */
async function runKernelJobFile(file: string, v: BenchValues, io: BenchIo, kernelHost: KernelHostChoice, log: (m: string) => void): Promise<number> {
  const nrIoQueues = intFlag(v['nr-io-queues'], 'nr-io-queues', 1, 1024);
  const queueSize = intFlag(v['queue-size'], 'queue-size', 16, 1024);
  const jobs = await readJobFile(file, KERNEL_REFUSED);
  const report = await kernelJobFile(
    { quick: false, log, kernelHost },
    { name: path.basename(file).replace(/\.[^.]*$/, ''), file: path.basename(file), jobs, ram: v.ram ?? '256M', ...(v.nqn === undefined ? {} : { nqn: v.nqn }), ...(nrIoQueues === undefined ? {} : { nrIoQueues }), ...(queueSize === undefined ? {} : { queueSize }) },
  );
  return await emit(io, report, v.out, v.json === true);
}

/**
 * --initiator kernel with --lab 6.1|6.12|newest or --local; undefined for our initiator. Checks, before anything connects,
 * that the host can run it: root, nvme-tcp, nvme-cli and fio for --local; the lab kernel built for --lab.
 */
function kernelHostFlags(v: { initiator?: string; lab?: string; local?: boolean; target?: string }, scenario: string | undefined, ioWorkers: number | undefined, local?: BenchIo['kernelHostLocal']): KernelHostChoice | undefined {
  if (v.initiator === undefined || v.initiator === 'ours') {
    if (v.lab !== undefined || v.local === true) throw new UsageError(`--${v.lab !== undefined ? 'lab' : 'local'} needs --initiator kernel`);
    return undefined;
  }
  if (v.initiator !== 'kernel') throw new UsageError(`--initiator must be ours or kernel, got "${v.initiator}"`);
  if (scenario !== undefined && !KERNEL_SCENARIOS.includes(scenario)) throw new UsageError(`--initiator kernel runs ${KERNEL_SCENARIOS.join(', ')}; not ${scenario}`);
  if (v.target !== undefined && v.target !== 'ours') throw new UsageError('--initiator kernel runs against our target only: drop --target');
  if (ioWorkers !== undefined && ioWorkers > 0) throw new UsageError('--io-workers is our initiator\'s: drop it with --initiator kernel');
  if ((v.lab === undefined) === (v.local !== true)) throw new UsageError('--initiator kernel needs --lab 6.1|6.12|newest or --local (one of them)');
  if (v.local === true) {
    const missing = localPrerequisites(local === undefined ? {} : { env: local.env, uid: local.uid, sysRoot: local.root });
    if (missing !== undefined) throw new UsageError(missing);
    return local === undefined ? { where: 'local' } : { where: 'local', ...local };
  }
  if (!Object.hasOwn(LAB_KERNELS, v.lab as string)) throw new UsageError(`--lab must be ${Object.keys(LAB_KERNELS).join(' or ')}, got "${v.lab}"`);
  const missing = labPrerequisites(v.lab as LabKernel);
  if (missing !== undefined) throw new UsageError(missing);
  return { where: 'lab', lab: v.lab as LabKernel };
}

/** The scenarios whose arms a host patch series changes (harness/scenarios/kernel-initiator.ts kernelPasses). */
const HOST_PATCH_SCENARIOS = ['parallel-connect', 'queue-groups', 'match-hw-queues'];

/**
 * --host-patches: checked against the other flags and the lab's kernel (the series are built for the pinned kernel of
 * build-host-patches.sh), then built or found in the cache; `stock` or absent leaves the choice as it is.
 */
async function withHostPatches(choice: KernelHostChoice | undefined, v: { 'host-patches'?: string }, scenario: string, log: (m: string) => void): Promise<KernelHostChoice | undefined> {
  const value = v['host-patches'];
  if (value === undefined) return choice;
  if (choice?.where !== 'lab' || choice.lab !== 'newest') throw new UsageError('--host-patches needs --initiator kernel --lab newest (the series are built for the newest lab kernel)');
  if (!HOST_PATCH_SCENARIOS.includes(scenario)) throw new UsageError(`--host-patches runs ${HOST_PATCH_SCENARIOS.join(', ')}; not ${scenario}`);
  const dir = resolveHostPatches(value);
  if (dir === undefined) return choice;
  const labKver = /^KVER=(.*)$/m.exec(await readFile(path.join(LAB_KERNELS.newest.out(), 'lab.env'), 'utf8').catch(() => ''))?.[1];
  const pinned = await hostPatchesKernel();
  if (labKver !== pinned) throw new HostPatchesError(`host-patches: the newest lab runs kernel ${labKver ?? '?'}, the series are built for ${pinned} (step: load): bump the pin in harness/lab/build-host-patches.sh and rebase what no longer applies`);
  return { ...choice, hostModules: await buildHostModules(dir, log) };
}

/** --target, --target-cores and --spdk-interrupt; undefined without --target. */
function targetFlags(v: { target?: string; 'target-cores'?: string; 'spdk-interrupt'?: boolean }): Pick<ScenarioContext, 'target' | 'targetCores' | 'spdkInterrupt'> | undefined {
  const cores = intFlag(v['target-cores'], 'target-cores', 1, 1024);
  if (v.target !== 'spdk' && (cores !== undefined || v['spdk-interrupt'] === true)) throw new UsageError(`--${cores !== undefined ? 'target-cores' : 'spdk-interrupt'} needs --target spdk`);
  if (v.target === undefined) return undefined;
  if (v.target !== 'ours' && v.target !== 'spdk') throw new UsageError(`--target must be ours or spdk, got "${v.target}"`);
  return { target: v.target, ...(cores === undefined ? {} : { targetCores: cores }), ...(v['spdk-interrupt'] === true ? { spdkInterrupt: true } : {}) };
}


/** --io-worker-cpus / io_worker_cpus: "0,1" or "0-3". */
function cpuListFlag(v: string): number[] {
  try {
    return parseCpus(v);
  } catch (e) {
    throw new UsageError(`--io-worker-cpus: ${(e as Error).message}`);
  }
}

/** Per io worker: thread CPU (share of the measured window), I/Os, batches, busy time, relinquish events. */
function workerNotes(ws: readonly IoWorkerInfo[], durationMs: number): string[] {
  return ws.map((w) => {
    const cpu = w.cpuMs === undefined ? 'cpu ?' : `cpu ${w.cpuMs.toFixed(0)} ms${durationMs > 0 ? ` (${((100 * w.cpuMs) / durationMs).toFixed(0)} % of the run, whole connection)` : ''}`;
    return `io worker ${w.worker} (tid ${w.tid}${w.cpu !== undefined ? `, pinned to CPU ${w.cpu}` : ''}, ${w.queues} queues): ${cpu}, ${w.ios} I/Os in ${w.batches} batches (${w.batches > 0 ? (w.ios / w.batches).toFixed(1) : '0'}/batch), ${w.cqBatches} completion publishes, busy ${w.busyMs.toFixed(0)} ms, ${w.relinquish} relinquish${w.starts > 1 ? `, restarted ${w.starts - 1}×` : ''}`;
  });
}

async function emit(io: BenchIo, report: Report, out: string | undefined, json: boolean): Promise<number> {
  io.stdout(json ? renderJson(report) : renderMarkdown(report));
  if (out !== undefined) {
    const files = await writeReport(out, report);
    io.stderr(`reports: ${files.json} ${files.markdown} ${files.html}\n`);
  }
  return report.ok ? 0 : 1;
}
