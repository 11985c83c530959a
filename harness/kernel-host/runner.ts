// Where the Linux host's command lines run: on this machine (local, as root) or in the qemu lab's guest (lab). One
// interface, so the driver (host.ts) builds the same nvme-cli and fio lines for both.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { killLabGroup, labDir, runLabScript } from '../lab.js';
import { shQuote } from './commands.js';

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
  /** Wall time of the command where it ran (lab: measured in the guest from /proc/timer_list). */
  wallMs: number;
}

/**
 * How the lab guest reaches this machine: a tap NIC with `queues` queues (run.sh --tap; host side `hostIp`, the guest's
 * eth1 `guestIp`), or qemu's user-mode network with guestfwd + socat, with why no tap where one was asked for.
 */
export type LabNet = { kind: 'tap'; dev: string; hostIp: string; guestIp: string; queues: number } | { kind: 'user'; why?: string };

/** run.sh's "run.sh: net=..." line (see its header), or undefined when it printed none. */
export function parseLabNet(stderr: string): LabNet | undefined {
  const tap = /^run\.sh: net=tap dev=(\S+) host=(\S+) guest=(\S+) queues=(\d+)$/m.exec(stderr);
  if (tap !== null) return { kind: 'tap', dev: tap[1] as string, hostIp: tap[2] as string, guestIp: tap[3] as string, queues: Number(tap[4]) };
  const user = /^run\.sh: net=user(?: \((.*)\))?$/m.exec(stderr);
  return user === null ? undefined : { kind: 'user', ...(user[1] === undefined ? {} : { why: user[1] }) };
}

export interface HostRunner {
  readonly kind: 'local' | 'lab';
  /** The lab's network (absent for the local runner). */
  readonly net?: LabNet;
  /** How the host reaches our target's port (lab: the guestfwd address). */
  targetAddress(hostPort: number): { traddr: string; trsvcid: number };
  exec(argv: readonly string[], timeoutMs?: number): Promise<ExecResult>;
  /** `emulated (TCG)` / `emulated (KVM)` for the lab; undefined on real hardware. */
  readonly emulated: string | undefined;
  /** The lab guest's console so far (kernel messages included); undefined for the local runner. */
  console?(): string;
  close(): Promise<void>;
}

/** Thrown before anything connects when the host cannot run the experiments; the message is one line with the fix. */
export class KernelHostUnavailable extends Error {
  readonly code = 'KERNEL_HOST_ERR_UNAVAILABLE';
}

const onPath = (tool: string, env: NodeJS.ProcessEnv): boolean =>
  (env['PATH'] ?? '').split(path.delimiter).some((d) => d !== '' && existsSync(path.join(d, tool)));

/**
 * What `--initiator kernel --local` needs, checked before anything connects: root (nvme connect writes
 * /dev/nvme-fabrics), the nvme-tcp module (/sys/module/nvme_tcp), nvme-cli and fio on PATH. Undefined when all are there.
 */
export function localPrerequisites(o: { uid?: number; env?: NodeJS.ProcessEnv; sysRoot?: string } = {}): string | undefined {
  const env = o.env ?? process.env;
  const uid = o.uid ?? process.getuid?.() ?? 0;
  if (uid !== 0) return '--initiator kernel --local needs root (nvme connect writes /dev/nvme-fabrics): run it with sudo';
  if (!existsSync(path.join(o.sysRoot ?? '/', 'sys', 'module', 'nvme_tcp'))) return '--initiator kernel --local needs the nvme-tcp module: load it with "modprobe nvme-tcp" (package linux-modules-extra on Ubuntu)';
  const missing = ['nvme', 'fio'].filter((t) => !onPath(t, env));
  if (missing.length > 0) return `--initiator kernel --local needs ${missing.join(' and ')} on PATH: install ${missing.map((t) => (t === 'nvme' ? 'nvme-cli' : t)).join(' and ')} (apt-get install nvme-cli fio)`;
  return undefined;
}

/** Runs argv on this machine (execFile, no shell), with `env` (tests put fake nvme/fio first on PATH). */
export function localRunner(o: { env?: NodeJS.ProcessEnv } = {}): HostRunner {
  return {
    kind: 'local',
    emulated: undefined,
    targetAddress: (port) => ({ traddr: '127.0.0.1', trsvcid: port }),
    exec: (argv, timeoutMs = 120_000) =>
      new Promise((resolve) => {
        const t0 = performance.now();
        execFile(argv[0] as string, argv.slice(1), { env: o.env ?? process.env, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
          const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 127;
          resolve({ code, stdout, stderr: err !== null && stderr === '' ? err.message : stderr, wallMs: performance.now() - t0 });
        });
      }),
    close: async () => undefined,
  };
}

/**
 * The lab kernels: `6.1` (build.sh, LAB_OUT or /var/tmp/nvme-lab), `6.12` and `newest` (build-newest-kernel.sh, LAB7_OUT or
 * /var/tmp/nvme-lab-7).
 */
export const LAB_KERNELS = {
  '6.1': { out: () => process.env['LAB_OUT'] ?? '/var/tmp/nvme-lab', script: 'build.sh' },
  /** Debian's 6.12 kernel with NVMe auth (test/interop/auth-lab.sh, LAB_AUTH_OUT or /var/tmp/nvme-lab-bpo). */
  '6.12': { out: () => process.env['LAB_AUTH_OUT'] ?? '/var/tmp/nvme-lab-bpo', script: '../../test/interop/auth-lab.sh' },
  newest: { out: () => process.env['LAB7_OUT'] ?? '/var/tmp/nvme-lab-7', script: 'build-newest-kernel.sh' },
} as const;
export type LabKernel = keyof typeof LAB_KERNELS;

/** Undefined when the lab for `which` is built; else one line naming the build script. */
export function labPrerequisites(which: LabKernel): string | undefined {
  const { script } = LAB_KERNELS[which];
  const out = LAB_KERNELS[which].out();
  let lab: string;
  try {
    lab = labDir();
  } catch (e) {
    return (e as Error).message;
  }
  for (const f of ['vmlinuz', 'initramfs.cpio.gz']) {
    if (!existsSync(path.join(out, f))) return `the ${which} lab kernel is not built (${path.join(out, f)} missing): run "bash ${path.join(lab, script)}"`;
  }
  if (!onPath('qemu-system-x86_64', process.env)) return `qemu-system-x86_64 is not installed: run "bash ${path.join(lab, 'build.sh')}" (it installs qemu)`;
  return undefined;
}

/** Guest IP:port of the command server's guestfwd, and of the target's. */
const CMD_GUEST = '10.0.2.101:8080';
const TARGET_GUEST = { traddr: '10.0.2.100', trsvcid: 4420 };

/**
 * The guest's side of the lab runner: a loop that fetches the next command line over HTTP (busybox wget, through a
 * guestfwd to this process), runs it with sh, and posts stderr, then stdout with the exit status and wall time.
 */
const GUEST_LOOP = `#!/bin/sh
C=http://${CMD_GUEST}
echo 5 > /sys/module/nvme_core/parameters/admin_timeout
# ns since boot: /proc/timer_list's "now at N nsecs" (root), else /proc/uptime (10 ms steps); the host subtracts.
ns() { n=$(sed -n '/^now at /{s/^now at \\([0-9]*\\) nsecs.*/\\1/p;q}' /proc/timer_list 2>/dev/null); [ -n "$n" ] && echo "$n" || { read -r a _ < /proc/uptime; echo "$(echo "$a" | tr -d .)0000000"; }; }
echo ===KERNEL-HOST-LOOP===
while :; do
  rm -f /tmp/cmd; wget -q -O /tmp/cmd "$C/next" 2>/dev/null || { sleep 0.2; continue; }
  [ -s /tmp/cmd ] || continue
  [ "$(cat /tmp/cmd)" = EXIT ] && break
  t0=$(ns); sh /tmp/cmd > /tmp/out 2> /tmp/err; rc=$?; t1=$(ns)
  wget -q -O /dev/null --post-file=/tmp/err "$C/stderr" 2>/dev/null
  wget -q -O /dev/null --post-file=/tmp/out "$C/result?rc=$rc&t0=$t0&t1=$t1" 2>/dev/null
done
echo ===KERNEL-HOST-LOOP-END===
`;

interface Pending {
  line: string;
  stderr: string;
  resolve: (r: ExecResult) => void;
}

/**
 * The host side of the guest loop: hands queued command lines to the guest's long-polling GET /next one at a time,
 * and resolves each with the stderr (POST /stderr) and stdout, exit status and guest times (POST /result) it posts.
 */
class GuestCommandServer {
  readonly #queue: Pending[] = [];
  #current: Pending | undefined;
  #waiting: http.ServerResponse | undefined;
  #asked: () => void = () => undefined;
  /** Resolves when the guest first asks for a command (its loop runs). */
  readonly firstAsk = new Promise<void>((r) => (this.#asked = r));
  readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => this.#request(new URL(req.url ?? '/', 'http://guest'), Buffer.concat(chunks).toString(), res));
  });

  push(p: Pending): void {
    this.#queue.push(p);
    this.#hand();
  }

  /** Fails the command in hand and every queued one with `why` (the guest died). */
  failAll(why: string): void {
    for (const p of [this.#current, ...this.#queue.splice(0)]) p?.resolve({ code: 255, stdout: '', stderr: why, wallMs: 0 });
    this.#current = undefined;
  }

  #hand(): void {
    if (this.#waiting === undefined || this.#current !== undefined) return;
    const next = this.#queue.shift();
    if (next === undefined) return;
    this.#current = next;
    this.#waiting.end(next.line);
    this.#waiting = undefined;
  }

  #request(url: URL, body: string, res: http.ServerResponse): void {
    if (url.pathname === '/next') {
      this.#asked();
      this.#waiting = res;
      // busybox wget gives up after a while: answer empty now and then, the guest asks again.
      const t = setTimeout(() => {
        if (this.#waiting === res) {
          this.#waiting = undefined;
          res.end('');
        }
      }, 30_000);
      res.once('close', () => clearTimeout(t));
      this.#hand();
      return;
    }
    const cur = this.#current;
    if (url.pathname === '/stderr' && cur !== undefined) cur.stderr = body;
    if (url.pathname === '/result' && cur !== undefined) {
      this.#current = undefined;
      const ns = (k: string): number => Number(url.searchParams.get(k) ?? 0);
      cur.resolve({ code: Number(url.searchParams.get('rc') ?? 1), stdout: body, stderr: cur.stderr, wallMs: (ns('t1') - ns('t0')) / 1e6 });
    }
    res.end('');
    this.#hand();
  }
}

/**
 * Boots the lab guest (run.sh, `which` kernel) with the guest loop above, a guestfwd 10.0.2.100:4420 to
 * `targetPort` (our target), one to the command server and any `guestfwd` given; resolves once the guest asks for its
 * first command.
 */
export async function labRunner(o: {
  which: LabKernel;
  targetPort: number;
  /** More guest-to-host forwards, each `GIP:GPORT:HPORT` (run.sh --guestfwd): e.g. the other gateways of a group. */
  guestfwd?: readonly string[];
  smp?: number;
  timeoutS?: number;
  log?: (m: string) => void;
  /** Files or directories copied to /lab/files/ in the guest (run.sh --file), e.g. a patch series' modules. */
  files?: readonly string[];
  /** A tap NIC with this many queues beside the user-mode one (run.sh --tap), where the machine allows it. */
  tap?: number;
}): Promise<HostRunner> {
  const missing = labPrerequisites(o.which);
  if (missing !== undefined) throw new KernelHostUnavailable(missing);
  const out = LAB_KERNELS[o.which].out();
  const cmds = new GuestCommandServer();
  const server = cmds.server;
  const cmdPort = await new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
  const dir = await mkdtemp(path.join(os.tmpdir(), 'nvme-kernel-host-'));
  const script = path.join(dir, 'loop.sh');
  await writeFile(script, GUEST_LOOP, { mode: 0o755 });
  const accel = (await readFile(path.join(out, 'accel'), 'utf8').catch(() => 'tcg')).trim().toUpperCase();
  const timeoutS = o.timeoutS ?? 900;
  let runErr = '';
  let consoleOut = '';
  const { child, done } = runLabScript(
    [path.join(labDir(), 'run.sh'), '--timeout', String(timeoutS), '--smp', String(o.smp ?? 2), '--mem', '1024', '--hostfwd', 'none',
      '--guestfwd', `${TARGET_GUEST.traddr}:${TARGET_GUEST.trsvcid}:${o.targetPort}`, '--guestfwd', `${CMD_GUEST}:${cmdPort}`, ...(o.guestfwd ?? []).flatMap((g) => ['--guestfwd', g]),
      ...(o.files ?? []).flatMap((f) => ['--file', f]), ...(o.tap === undefined ? [] : ['--tap', String(o.tap)]), script],
    (_chunk, all) => (consoleOut = all),
    { LAB_OUT: out },
    (chunk) => (runErr += chunk),
  );
  let ended = false;
  const exited = done.then((r) => {
    ended = true;
    // A guest that died leaves its pending command unanswered: fail it with the lab's last lines.
    const why = `the lab guest ended (run.sh exit ${String(r.code)}): ${r.out.trim().split('\n').slice(-3).join(' / ')}`;
    cmds.failAll(why);
    return r;
  });
  o.log?.(`booting the ${o.which} lab guest (${accel})`);
  const booted = await Promise.race([cmds.firstAsk.then(() => true), exited.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(false), 300_000))]);
  const close = async (): Promise<void> => {
    if (!ended) {
      cmds.push({ line: 'EXIT', stderr: '', resolve: () => undefined });
      const t = setTimeout(() => killLabGroup(child), 60_000);
      await exited;
      clearTimeout(t);
    }
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await rm(dir, { recursive: true, force: true });
  };
  if (!booted) {
    killLabGroup(child);
    const r = await exited;
    await close();
    throw new Error(`the ${o.which} lab guest did not start its command loop: ${r.out.trim().split('\n').slice(-5).join(' / ')}`);
  }
  const net = parseLabNet(runErr) ?? { kind: 'user' };
  return {
    kind: 'lab',
    net,
    emulated: `emulated (${accel})`,
    targetAddress: () => ({ ...TARGET_GUEST }),
    console: () => consoleOut,
    exec: (argv, timeoutMs = 300_000) =>
      new Promise<ExecResult>((resolve) => {
        if (ended) return resolve({ code: 255, stdout: '', stderr: 'the lab guest has ended', wallMs: 0 });
        // The guest's sh gets the line as a script; busybox timeout bounds a command that hangs.
        const line = `timeout ${Math.ceil(timeoutMs / 1000)} ${argv.map(shQuote).join(' ')}\n`;
        cmds.push({ line, stderr: '', resolve });
      }),
    close,
  };
}

