// Fake nvme-cli and fio for the local runner's tests: small shell scripts that log their argv and act on a fake
// /sys tree as the kernel would (a controller dir per connect, one subsystem per NQN), printing the real tools' JSON.
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** fio 3.33's --output-format=json for one group-reported randread job (trimmed to the fields fio always prints). */
export const FIO_JSON = `{
  "fio version" : "fio-3.33",
  "timestamp" : 1733390000,
  "time" : "Sat Dec  5 08:00:00 2026",
  "jobs" : [
    {
      "jobname" : "arm",
      "groupid" : 0,
      "error" : 0,
      "eta" : 0,
      "elapsed" : 3,
      "job options" : { "name" : "arm", "rw" : "randread", "bs" : "4k", "iodepth" : "16" },
      "read" : {
        "io_bytes" : 1228800000,
        "io_kbytes" : 1200000,
        "bw_bytes" : 409600000,
        "bw" : 400000,
        "iops" : 100000.333,
        "runtime" : 3000,
        "total_ios" : 300001,
        "short_ios" : 0,
        "drop_ios" : 0,
        "slat_ns" : { "min" : 1000, "max" : 90000, "mean" : 2000.5, "stddev" : 100.1, "N" : 300001 },
        "clat_ns" : { "min" : 50000, "max" : 900000, "mean" : 150000.2, "stddev" : 2000.3, "N" : 300001,
          "percentile" : { "1.000000" : 60000, "50.000000" : 148480, "90.000000" : 180224, "99.000000" : 254976, "99.900000" : 561152 } },
        "lat_ns" : { "min" : 52000, "max" : 901000, "mean" : 152000.9, "stddev" : 2001.0, "N" : 300001 },
        "bw_min" : 390000, "bw_max" : 410000, "bw_agg" : 100.0, "bw_mean" : 400000.0, "bw_dev" : 100.0, "bw_samples" : 6,
        "iops_min" : 97500, "iops_max" : 102500, "iops_mean" : 100000.0, "iops_stddev" : 25.0, "iops_samples" : 6
      },
      "write" : {
        "io_bytes" : 0, "io_kbytes" : 0, "bw_bytes" : 0, "bw" : 0, "iops" : 0.000000, "runtime" : 0, "total_ios" : 0,
        "short_ios" : 0, "drop_ios" : 0,
        "slat_ns" : { "min" : 0, "max" : 0, "mean" : 0.0, "stddev" : 0.0, "N" : 0 },
        "clat_ns" : { "min" : 0, "max" : 0, "mean" : 0.0, "stddev" : 0.0, "N" : 0 },
        "lat_ns" : { "min" : 0, "max" : 0, "mean" : 0.0, "stddev" : 0.0, "N" : 0 }
      },
      "usr_cpu" : 12.5, "sys_cpu" : 40.1, "ctx" : 120000, "majf" : 0, "minf" : 30
    }
  ],
  "disk_util" : [ { "name" : "nvme0n1", "read_ios" : 299000, "write_ios" : 0, "util" : 99.5 } ]
}
`;

const NVME = `#!/bin/sh
# fake nvme-cli: logs argv, creates/removes controllers under $FAKE_ROOT/sys like the kernel
echo "nvme $*" >> "$FAKE_LOG"
R=$FAKE_ROOT/sys/class
case "$1" in
connect)
  # FAKE_CONNECT_FAIL=N: the Nth connect fails as nvme-cli does when the kernel refuses the write
  n=$(($(cat "$FAKE_ROOT/connects" 2>/dev/null || echo 0) + 1)); echo $n > "$FAKE_ROOT/connects"
  if [ "$n" = "$FAKE_CONNECT_FAIL" ]; then echo "Failed to write to /dev/nvme-fabrics: Connection refused" >&2; echo "could not add new controller: failed to write to nvme-fabrics device" >&2; exit 1; fi
  nqn=; nr=2; dup=0; addr=; port=
  while [ $# -gt 0 ]; do case "$1" in -n) nqn=$2; shift;; -a) addr=$2; shift;; -s) port=$2; shift;; --nr-io-queues=*) nr=\${1#*=};; --duplicate-connect) dup=1;; --queues-per-hctx=*) [ -n "$FAKE_NO_QPH" ] && { echo "nvme connect: invalid option queues_per_hctx" >&2; exit 22; };; esac; shift; done
  # A port of the fake nvmet (configfs) at -a:-s serves only the subsystem linked to it with its namespace enabled.
  for p in "$FAKE_ROOT"/sys/kernel/config/nvmet/ports/*; do
    [ "$(cat "$p/addr_traddr" 2>/dev/null):$(cat "$p/addr_trsvcid" 2>/dev/null)" = "$addr:$port" ] || continue
    if [ ! -L "$p/subsystems/$nqn" ] || [ "$(cat "$p/subsystems/$nqn/namespaces/1/enable" 2>/dev/null)" != 1 ]; then echo "Failed to write to /dev/nvme-fabrics: Input/output error" >&2; exit 1; fi
    echo "$nqn $addr:$port" >> "$FAKE_ROOT/nvmet-connects"
  done
  i=0; while [ -e "$R/nvme/nvme$i" ]; do i=$((i+1)); done
  s=$(grep -lx "$nqn" "$R"/nvme-subsystem/*/subsysnqn 2>/dev/null | head -n 1)
  if [ -n "$s" ] && [ $dup = 0 ]; then echo "Failed to write to /dev/nvme-fabrics: Operation already in progress" >&2; exit 114; fi
  mkdir -p "$R/nvme/nvme$i"; echo $((nr + 1)) > "$R/nvme/nvme$i/queue_count"; echo "$nqn" > "$R/nvme/nvme$i/subsysnqn"
  # FAKE_IO_CPU: a per-queue io_cpu attribute, the connect-time choice spread over CPUs 0 and 1
  q=1; while [ -n "$FAKE_IO_CPU" ] && [ $q -le $nr ]; do mkdir -p "$R/nvme/nvme$i/queues/$q"; echo $(((q - 1) % 2)) > "$R/nvme/nvme$i/queues/$q/io_cpu"; q=$((q+1)); done
  if [ -z "$s" ]; then j=0; while [ -e "$R/nvme-subsystem/nvme-subsys$j" ]; do j=$((j+1)); done; d=$R/nvme-subsystem/nvme-subsys$j
    mkdir -p "$d/nvme\${j}n1"; echo "$nqn" > "$d/subsysnqn"; echo numa > "$d/iopolicy"; : > "$FAKE_ROOT/dev/nvme\${j}n1"
  else d=$(dirname "$s"); fi
  mkdir -p "$d/nvme$i"
  echo "{\\"device\\" : \\"nvme$i\\"}" ;;
disconnect)
  dev=$3; rm -rf "$R/nvme/$dev"; for d in "$R"/nvme-subsystem/*; do [ -e "$d/$dev" ] && rm -rf "$d/$dev"; ls "$d" | grep -qE '^nvme[0-9]+$' || rm -rf "$d"; done
  echo "NQN:x disconnected 1 controller(s)" ;;
*) echo "fake nvme: $1 not faked" >&2; exit 1 ;;
esac
`;

const FIO = `#!/bin/sh
# fake fio: logs argv; FAKE_FIO_FAIL makes it fail like fio does when the device goes away
echo "fio $*" >> "$FAKE_LOG"
if [ -n "$FAKE_FIO_FAIL" ]; then echo "fio: pid=123, err=5/file:io_u.c:1889, func=io_u error, error=Input/output error" >&2; exit 1; fi
cat "$FAKE_JSON"
`;

const RMDIR = `#!/bin/sh
# fake rmdir: under the fake configfs, removes a group with its attributes as configfs does, refusing one that still
# holds child items (a namespace, a linked subsystem); elsewhere the real rmdir
for d in "$@"; do
  case "$d" in
  "$FAKE_ROOT"/sys/kernel/config/*)
    for c in "$d"/*/*; do [ -e "$c" ] || [ -L "$c" ] && { echo "rmdir: $d: Directory not empty" >&2; exit 1; }; done
    echo "rmdir $d" >> "$FAKE_LOG"; rm -rf "$d" ;;
  *) /bin/rmdir "$d" || exit 1 ;;
  esac
done
`;

export interface FakeTools {
  /** Environment for localRunner: the fakes first on PATH, FAKE_* for the scripts. */
  env: NodeJS.ProcessEnv;
  /** Prefix of the fake /sys and /dev (KernelHost root). */
  root: string;
  /** Every argv the fakes were called with, in order. */
  calls(): Promise<string[]>;
  cleanup(): Promise<void>;
}

/**
 * `nvmet`: nvmet and nvmet-tcp loaded (an empty configfs nvmet tree; the fake nvme refuses a connect to one of its
 * ports unless the subsystem is linked and its namespace enabled); `fabrics`: what the fake /dev/nvme-fabrics lists; `multipath`: nvme_core's parameter; `ioCpu`: every connected
 * queue gets an io_cpu attribute (sys/class/nvme/nvmeN/queues/Q/io_cpu); `connectFail`: the Nth connect fails.
 */
export async function fakeTools(o: { fabrics?: string; multipath?: boolean; ioCpu?: boolean; connectFail?: number; nvmet?: boolean; extraEnv?: NodeJS.ProcessEnv } = {}): Promise<FakeTools> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'nvme-fake-host-'));
  const bin = path.join(dir, 'bin');
  const root = path.join(dir, 'root');
  for (const d of [bin, path.join(root, 'sys/devices/system/cpu'), path.join(root, 'dev'), path.join(root, 'sys/class/nvme'), path.join(root, 'sys/class/nvme-subsystem'), path.join(root, 'sys/module/nvme_core/parameters'), path.join(root, 'sys/module/nvme_tcp')]) await mkdir(d, { recursive: true });
  await writeFile(path.join(root, 'dev/nvme-fabrics'), `${o.fabrics ?? 'instance=-1,cntlid=-1,transport=%s,traddr=%s,trsvcid=%s,nqn=%s,queue_size=%d,nr_io_queues=%d,duplicate_connect,hostnqn=%s,hostid=%s'}\n`);
  await writeFile(path.join(root, 'sys/module/nvme_core/parameters/multipath'), o.multipath === false ? 'N\n' : 'Y\n');
  await writeFile(path.join(root, 'sys/module/nvme_core/parameters/iopolicy'), 'numa\n');
  await writeFile(path.join(root, 'sys/devices/system/cpu/online'), '0-1\n');
  // nvmet loaded: configfs's nvmet tree (its top directories) and the nvmet_tcp module.
  if (o.nvmet === true) for (const d of ['sys/kernel/config/nvmet/subsystems', 'sys/kernel/config/nvmet/ports', 'sys/module/nvmet_tcp']) await mkdir(path.join(root, d), { recursive: true });
  await writeFile(path.join(bin, 'rmdir'), RMDIR);
  await chmod(path.join(bin, 'rmdir'), 0o755);
  await writeFile(path.join(bin, 'nvme'), NVME);
  await writeFile(path.join(bin, 'fio'), FIO);
  await chmod(path.join(bin, 'nvme'), 0o755);
  await chmod(path.join(bin, 'fio'), 0o755);
  await writeFile(path.join(dir, 'fio.json'), FIO_JSON);
  const log = path.join(dir, 'calls.log');
  await writeFile(log, '');
  return {
    env: { ...process.env, PATH: `${bin}${path.delimiter}${process.env['PATH'] ?? ''}`, FAKE_LOG: log, FAKE_ROOT: root, FAKE_JSON: path.join(dir, 'fio.json'),
      ...(o.ioCpu === true ? { FAKE_IO_CPU: '1' } : {}), ...(o.connectFail === undefined ? {} : { FAKE_CONNECT_FAIL: String(o.connectFail) }), ...o.extraEnv },
    root,
    calls: async () => (await readFile(log, 'utf8')).split('\n').filter((l) => l !== ''),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}
