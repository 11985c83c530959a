// Command lines for the Linux host (nvme-cli, fio) and parsers for what they print. Pure: no I/O, so the same lines
// run on this machine (local runner) and inside the qemu guest (lab runner).
import type { ParsedJobFile, RefusedOptions } from '../load/job-file.js';

/** Options of one `nvme connect` (nvme-cli 2.x long options; NVMe-oF 1.1 §3.3 Connect, TCP transport). */
export interface KernelConnectOptions {
  traddr: string;
  trsvcid: number;
  nqn: string;
  hostnqn?: string;
  hostid?: string;
  nrIoQueues?: number;
  /** Another controller to a subsystem this host already has one to (`--duplicate-connect`). */
  duplicate?: boolean;
  /** Transport queues per hctx: only kernels with the queue-groups RFC accept it (probe `queues_per_hctx`). */
  queuesPerHctx?: number;
  /** I/O queues = min(online CPUs, the NIC's queues): only kernels with the NIC-aware RFC accept it (`match_hw_queues`). */
  matchHwQueues?: boolean;
  queueSize?: number;
  /** Seconds before a lost controller is given up; small so a failed arm cannot hang its cleanup. */
  ctrlLossTmo?: number;
  /** Keep Alive Timeout, seconds (NVMe Base 2.0 §5.25.1: KATO). */
  keepAliveTmo?: number;
  /** Seconds between reconnect attempts after the association is lost. */
  reconnectDelay?: number;
  /** DH-HMAC-CHAP host secret (NVMe Base 2.0 §8.13.5), `DHHC-1:..:...:`. */
  dhchapSecret?: string;
  /** DH-HMAC-CHAP controller secret: the host authenticates the controller too. */
  dhchapCtrlSecret?: string;
  /** Header / data digests in the ICReq (NVMe/TCP 1.0 §3.6.2.2 HDGST_ENABLE / DDGST_ENABLE; nvme-cli -g / -G). */
  hdrDigest?: boolean;
  dataDigest?: boolean;
}

export function connectArgv(o: KernelConnectOptions): string[] {
  return [
    'nvme', 'connect', '-t', 'tcp', '-a', o.traddr, '-s', String(o.trsvcid), '-n', o.nqn,
    ...(o.hostnqn === undefined ? [] : [`--hostnqn=${o.hostnqn}`]),
    ...(o.hostid === undefined ? [] : [`--hostid=${o.hostid}`]),
    ...(o.nrIoQueues === undefined ? [] : [`--nr-io-queues=${o.nrIoQueues}`]),
    ...(o.queueSize === undefined ? [] : [`--queue-size=${o.queueSize}`]),
    ...(o.duplicate === true ? ['--duplicate-connect'] : []),
    ...(o.queuesPerHctx === undefined ? [] : [`--queues-per-hctx=${o.queuesPerHctx}`]),
    ...(o.matchHwQueues === true ? ['--match-hw-queues'] : []),
    ...(o.ctrlLossTmo === undefined ? [] : [`--ctrl-loss-tmo=${o.ctrlLossTmo}`]),
    ...(o.keepAliveTmo === undefined ? [] : [`--keep-alive-tmo=${o.keepAliveTmo}`]),
    ...(o.reconnectDelay === undefined ? [] : [`--reconnect-delay=${o.reconnectDelay}`]),
    ...(o.dhchapSecret === undefined ? [] : [`--dhchap-secret=${o.dhchapSecret}`]),
    ...(o.dhchapCtrlSecret === undefined ? [] : [`--dhchap-ctrl-secret=${o.dhchapCtrlSecret}`]),
    ...(o.hdrDigest === true ? ['--hdr-digest'] : []),
    ...(o.dataDigest === true ? ['--data-digest'] : []),
    '-o', 'json',
  ];
}

/**
 * The same connect as a shell script that writes the options to /dev/nvme-fabrics itself and prints the kernel's
 * "instance=N,cntlid=M" (what nvme-cli does underneath). For the RFC kernels' options nvme-cli has no flag for
 * (queues_per_hctx, match_hw_queues), and for duplicate controllers: nvme-cli 2.3's lookup_ctrl
 * answers "already connected" before it writes, --duplicate-connect or not (nvme-cli PR #1993 narrowed that check
 * in 2.5). hostnqn/hostid default to /etc/nvme's, as nvme-cli's do, so the duplicate is the same host.
 */
export function fabricsWriteScript(o: KernelConnectOptions, root = ''): string {
  const opts = [
    `nqn=${o.nqn}`, 'transport=tcp', `traddr=${o.traddr}`, `trsvcid=${o.trsvcid}`,
    ...(o.nrIoQueues === undefined ? [] : [`nr_io_queues=${o.nrIoQueues}`]),
    ...(o.queueSize === undefined ? [] : [`queue_size=${o.queueSize}`]),
    ...(o.duplicate === true ? ['duplicate_connect'] : []),
    ...(o.queuesPerHctx === undefined ? [] : [`queues_per_hctx=${o.queuesPerHctx}`]),
    ...(o.matchHwQueues === true ? ['match_hw_queues'] : []),
    ...(o.ctrlLossTmo === undefined ? [] : [`ctrl_loss_tmo=${o.ctrlLossTmo}`]),
    ...(o.reconnectDelay === undefined ? [] : [`reconnect_delay=${o.reconnectDelay}`]),
    ...(o.hdrDigest === true ? ['hdr_digest'] : []),
    ...(o.dataDigest === true ? ['data_digest'] : []),
  ].join(',');
  const hn = o.hostnqn === undefined ? `$(cat ${root}/etc/nvme/hostnqn 2>/dev/null)` : o.hostnqn;
  const hi = o.hostid === undefined ? `$(cat ${root}/etc/nvme/hostid 2>/dev/null)` : o.hostid;
  return `hn=${hn}; hi=${hi}; o="${opts}\${hn:+,hostnqn=$hn}\${hi:+,hostid=$hi}"; exec 3<>${root}/dev/nvme-fabrics && echo "$o" >&3 && read -r r <&3 && echo "$r"`;
}

/** One line of the NIC-aware RFC's debugfs io_queue_info: an I/O queue, its io_cpu (-1: unbound) and its TCP flow. */
export interface IoQueueInfo {
  qid: number;
  cpu: number;
  srcIp: string;
  srcPort: number;
  dstIp: string;
  dstPort: number;
}

/** `qid=1 cpu=0 src_ip=10.0.2.15 src_port=40000 dst_ip=10.0.2.100 dst_port=4420` lines; others are left out. */
export function parseIoQueueInfo(text: string): IoQueueInfo[] {
  const out: IoQueueInfo[] = [];
  for (const m of text.matchAll(/^qid=(\d+) cpu=(-?\d+) src_ip=(\S+) src_port=(\d+) dst_ip=(\S+) dst_port=(\d+)$/gm)) {
    out.push({ qid: Number(m[1]), cpu: Number(m[2]), srcIp: m[3] ?? '', srcPort: Number(m[4]), dstIp: m[5] ?? '', dstPort: Number(m[6]) });
  }
  return out;
}

/** `instance=3,cntlid=2` → nvme3. */
export const parseFabricsInstance = (out: string): string | undefined => {
  const m = /instance=(\d+)/.exec(out);
  return m === null ? undefined : `nvme${m[1]}`;
};

export const disconnectArgv = (device: string): string[] => ['nvme', 'disconnect', '-d', device];

/**
 * The controller `nvme connect -o json` created: `{"device":"nvme0"}` (nvme-cli 2.x); older builds print
 * `device: nvme0` or nothing, hence the plain-text fallback (undefined when neither names one).
 */
export function parseConnectDevice(stdout: string): string | undefined {
  const i = stdout.indexOf('{');
  if (i >= 0) {
    try {
      const d = (JSON.parse(stdout.slice(i)) as { device?: unknown }).device;
      if (typeof d === 'string' && /^nvme\d+$/.test(d)) return d;
    } catch {
      // not JSON after all: fall through
    }
  }
  return /\b(nvme\d+)\b/.exec(stdout)?.[1];
}

/** One fio job on a block device; `--output-format=json` always (parseFioJson). */
export interface FioJob {
  name: string;
  filename: string;
  rw: 'randread' | 'randwrite' | 'randrw' | 'read' | 'write';
  bs: string;
  iodepth: number;
  numjobs?: number;
  runtimeS: number;
  size: string;
  /** crc32c: write then read back and check every block (fio's verify phase). */
  verify?: 'crc32c';
  /** Pin fio's jobs to this CPU (fio cpus_allowed, as taskset -c would). */
  cpusAllowed?: number;
}

export function fioArgv(j: FioJob): string[] {
  return [
    'fio', `--name=${j.name}`, `--filename=${j.filename}`, `--rw=${j.rw}`, `--bs=${j.bs}`, `--iodepth=${j.iodepth}`,
    `--numjobs=${j.numjobs ?? 1}`, '--ioengine=libaio', '--direct=1', `--size=${j.size}`,
    // fio's verify needs the write pass to finish: no time_based there, the size bounds it.
    ...(j.verify === undefined ? [`--runtime=${j.runtimeS}`, '--time_based'] : [`--verify=${j.verify}`, '--verify_fatal=1', `--runtime=${j.runtimeS}`]),
    ...(j.cpusAllowed === undefined ? [] : [`--cpus_allowed=${j.cpusAllowed}`]),
    '--group_reporting', '--output-format=json',
  ];
}

export interface FioResult {
  iops: number;
  readIops: number;
  writeIops: number;
  /** 10^6 bytes/s, read + write. */
  mbps: number;
  p50Us: number;
  p99Us: number;
  /** fio's per-job error (an errno; 0 when clean). */
  error: number;
  ios: number;
  fioVersion: string;
}

interface FioDir {
  iops?: number;
  bw_bytes?: number;
  bw?: number;
  total_ios?: number;
  clat_ns?: { percentile?: Record<string, number> };
}

/** fio 3.x JSON: the first job (group_reporting folds the clones). fio prints warnings before the JSON sometimes. */
export function parseFioJson(stdout: string): FioResult {
  const first = parseFioJsonJobs(stdout)[0];
  if (first === undefined) throw new Error('fio JSON has no jobs');
  return first;
}

/** Every job entry of fio's JSON (one per reporting group with group_reporting), with its group id. */
export function parseFioJsonJobs(stdout: string): (FioResult & { groupid: number; jobname: string })[] {
  const i = stdout.indexOf('{');
  if (i < 0) throw new Error(`fio printed no JSON: ${stdout.trim().split('\n').slice(-2).join(' / ') || '(nothing)'}`);
  const doc = JSON.parse(stdout.slice(i)) as { 'fio version'?: string; jobs?: FioJobJson[] };
  return (doc.jobs ?? []).map((job) => ({ ...fioJobResult(job), fioVersion: doc['fio version'] ?? '?', groupid: job.groupid ?? 0, jobname: job.jobname ?? '?' }));
}

interface FioJobJson {
  jobname?: string;
  groupid?: number;
  error?: number;
  read?: FioDir;
  write?: FioDir;
}

function fioJobResult(job: FioJobJson): Omit<FioResult, 'fioVersion'> {
  const dirs = [job.read ?? {}, job.write ?? {}];
  const bytesPerS = dirs.reduce((n, d) => n + (d.bw_bytes ?? (d.bw ?? 0) * 1024), 0);
  // Percentiles of the busier direction: a mixed job reports each direction apart.
  const busier = (job.read?.iops ?? 0) >= (job.write?.iops ?? 0) ? job.read : job.write;
  const pct = (p: string): number => Math.round(((busier?.clat_ns?.percentile?.[p] ?? 0) / 1000) * 10) / 10;
  return {
    iops: Math.round(dirs.reduce((n, d) => n + (d.iops ?? 0), 0)),
    readIops: Math.round(job.read?.iops ?? 0),
    writeIops: Math.round(job.write?.iops ?? 0),
    mbps: Math.round((bytesPerS / 1e6) * 10) / 10,
    p50Us: pct('50.000000'),
    p99Us: pct('99.000000'),
    error: job.error ?? 0,
    ios: dirs.reduce((n, d) => n + (d.total_ios ?? 0), 0),
  };
}

/**
 * Job-file options refused when the Linux host runs the file (`bench JOBFILE --initiator kernel`): where the I/O goes
 * is the harness's (the namespace it connected), and the submission knobs of our initiator have no fio counterpart.
 */
export const KERNEL_REFUSED: RefusedOptions = {
  filename: 'with --initiator kernel fio runs on the namespace the harness connects (it sets --filename=/dev/nvmeXnY); remove the line',
  filename_format: 'with --initiator kernel fio runs on the one namespace the harness connects; remove the line',
  directory: 'with --initiator kernel fio runs on the one namespace the harness connects; remove the line',
  ioengine: 'with --initiator kernel fio runs libaio with direct=1, as the scenarios do; remove the line',
  hctx: "our initiator's submission context; the Linux host maps submitting CPUs to its queues itself (blk-mq); remove the line",
  io_workers: "an io worker option of our initiator, not of the Linux host; remove the line",
  io_worker_cpus: "an io worker option of our initiator, not of the Linux host; remove the line",
  io_budget_us: "an io worker option of our initiator, not of the Linux host; remove the line",
};

const flagOn = (v: string | undefined): boolean => v !== undefined && ['', '1', 'true'].includes(v.trim());
const verifyOn = (v: string | undefined): boolean => v !== undefined && !['', '0', 'none', 'false'].includes(v.trim().toLowerCase());

/** One option as an fio argument: flags only when on; verify as crc32c (the one method the job-file reader takes). */
function fioOption(k: string, v: string): string[] {
  if (k === 'name') return [];
  if (k === 'time_based' || k === 'stonewall') return flagOn(v) ? [`--${k}`] : [];
  if (k === 'verify') return verifyOn(v) ? ['--verify=crc32c', '--verify_fatal=1'] : [];
  return [`--${k}=${v}`];
}

/**
 * A parsed job file as one fio command line on `filename` (options before the first --name are global, fio's
 * command-line rule). Each section starts a reporting group (--new_group with --group_reporting), so fio's JSON has
 * one entry per section, its clones folded, and groupid N is section N. Runtime alone is time based, as in our
 * engine (docs/harness.md), so fio gets --time_based where a job has runtime and neither time_based nor verify.
 */
export function fioJobFileArgv(file: ParsedJobFile, filename: string): string[] {
  const global = Object.entries(file.global).flatMap(([k, v]) => fioOption(k, v));
  const jobs = file.jobs.flatMap((j) => {
    const eff = { ...file.global, ...j.options };
    const timeBased = eff['runtime'] !== undefined && !flagOn(eff['time_based']) && !verifyOn(eff['verify']);
    return [`--name=${j.name}`, '--new_group', ...Object.entries(j.options).flatMap(([k, v]) => fioOption(k, v)), ...(timeBased ? ['--time_based'] : [])];
  });
  return ['fio', '--output-format=json', '--group_reporting', '--ioengine=libaio', '--direct=1', `--filename=${filename}`, ...global, ...jobs];
}

/** The options `cat /dev/nvme-fabrics` lists (kernels ≥ 5.19 print every token they accept: "instance=-1,cntlid=-1,transport=%s,..."). */
export function parseFabricsOptions(text: string): string[] {
  return text
    .trim()
    .split(',')
    .map((t) => t.split('=')[0]?.trim() ?? '')
    .filter((t) => t !== '');
}

/** Quotes one argument for a POSIX shell (the lab runner sends command lines to the guest's busybox sh). */
export function shQuote(a: string): string {
  return /^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`;
}
