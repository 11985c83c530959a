// The Linux host as a catalogue host: nvme-cli and busybox dd in the qemu lab guest (harness/kernel-host), the
// kernel's log streamed to the lab's output so a host that hangs still leaves its hung-task reports as evidence.
import { CATALOGUE_NQN } from '../cases.js';
import { emptyEvidence, HostHung, type CaseContext, type HostAdapter } from '../runner.js';
import type { CatalogueTarget } from '../target.js';
import type { BlockRange, CatalogueCase, HostEvidence, HostInfo } from '../types.js';
import { KERNEL_WARNING, readChunks } from '../verdict.js';
import { KernelHost, KernelHostCommandError } from '../../kernel-host/host.js';
import { labRunner, type ExecResult, type HostRunner, type LabKernel } from '../../kernel-host/runner.js';
import { shQuote } from '../../kernel-host/commands.js';
import { generateDhchapKey } from '../../../protocol/auth/index.js';

/** Guest address of the target's second port (the first is the runner's 10.0.2.100:4420). */
const PATH2 = { traddr: '10.0.2.102', trsvcid: 4420 };
/** Seconds the guest's hung-task detector waits (the default 120 s is past any bounded wait here). */
const HUNG_TASK_S = 10;

export class LinuxLabHost implements HostAdapter {
  readonly id: string;
  readonly #which: LabKernel;
  readonly #log: (m: string) => void;
  #target: CatalogueTarget | undefined;
  #runner: HostRunner | undefined;
  #host: KernelHost | undefined;
  #kernel = '?';
  #multipath: string | undefined;
  #auth: string | undefined;
  readonly #notes = new Set<string>();

  constructor(which: LabKernel, o: { log?: (m: string) => void } = {}) {
    this.#which = which;
    this.id = `linux-${which}`;
    this.#log = o.log ?? (() => undefined);
  }

  async open(target: CatalogueTarget): Promise<string | undefined> {
    this.#target = target;
    await this.#boot();
    const h = this.#host as KernelHost;
    this.#kernel = (await h.offers()).kernel;
    this.#multipath = await h.needsMultipath();
    this.#auth = await h.needsOption('dhchap_secret');
    return undefined;
  }

  async #boot(): Promise<void> {
    const t = this.#target as CatalogueTarget;
    this.#runner = await labRunner({ which: this.#which, targetPort: t.portOf(1), guestfwd: [`${PATH2.traddr}:${PATH2.trsvcid}:${t.portOf(2)}`], timeoutS: 3600, log: this.#log });
    this.#host = new KernelHost(this.#runner);
    // The kernel log goes to the lab's output as it is written: a command stuck in D state cannot run dmesg.
    await this.#runner.exec(['sh', '-c', `echo ${HUNG_TASK_S} > /proc/sys/kernel/hung_task_timeout_secs 2>/dev/null; dmesg -n 8; setsid sh -c 'cat /proc/kmsg > /dev/ttyS1' </dev/null >/dev/null 2>&1 &`], 30_000);
  }

  info(): HostInfo {
    return {
      id: this.id,
      describe: `Linux ${this.#kernel} nvme-tcp in the qemu lab (${this.#runner?.emulated ?? 'not started'}), nvme-cli + busybox dd (O_DIRECT)`,
      notes: ['no pcap: neither tshark, dumpcap nor tcpdump is installed on the machine that ran this (the target logs every rule firing instead)', `hung-task detector at ${HUNG_TASK_S} s; the kernel log is streamed from /proc/kmsg so a hang still leaves it`, ...this.#notes],
    };
  }

  cannot(c: CatalogueCase): string | undefined {
    if (c.workload.reauth === true && this.#auth !== undefined) return this.#auth;
    return c.workload.multipath === true ? this.#multipath : undefined;
  }

  /** One guest command with a bounded wait on this side too (a task in D state outlives busybox timeout). */
  async #exec(step: string, script: string, ms: number, lines: string[]): Promise<ExecResult> {
    const r = this.#runner as HostRunner;
    let t: NodeJS.Timeout | undefined;
    const res = await Promise.race([r.exec(['sh', '-c', script], ms), new Promise<undefined>((ok) => (t = setTimeout(() => ok(undefined), ms + 20_000)))]).finally(() => clearTimeout(t));
    if (res === undefined) throw new HostHung(`${step} did not return within ${Math.round(ms / 1000) + 20} s`);
    lines.push(`$ ${script}\n${res.stdout}${res.stderr}(exit ${res.code}, ${Math.round(res.wallMs)} ms)`);
    if (res.code === 124 || res.code === 143) throw new HostHung(`${step} ran past its ${Math.round(ms / 1000)} s bound (busybox timeout)`);
    return res;
  }

  async run(c: CatalogueCase, ctx: CaseContext): Promise<HostEvidence> {
    if (this.#runner === undefined) await this.#boot();
    const ev = emptyEvidence();
    const lines: string[] = [];
    const host = this.#host as KernelHost;
    const runner = this.#runner as HostRunner;
    const consoleMark = runner.console?.().length ?? 0;
    const w = c.workload;
    const k = w.connect ?? {};
    const opts = (a: { traddr: string; trsvcid: number }): Parameters<KernelHost['connect']>[0] => connectOptions(a, k, secret, ctrlSecret);
    const bound = (k.ioTimeoutS ?? 30) * 1000 * 3 + 30_000;
    let secret: string | undefined;
    let hostnqnOf = '';
    let ctrlSecret: string | undefined;
    let broken = false;
    try {
      await this.#exec('io_timeout', `echo ${k.ioTimeoutS ?? 30} > /sys/module/nvme_core/parameters/io_timeout; dmesg -c > /dev/null`, 30_000, lines);
      if (w.reauth === true) {
        hostnqnOf = (await this.#exec('hostnqn', 'cat /etc/nvme/hostnqn', 30_000, lines)).stdout.trim();
        const keys = ctx.target.requireAuth(hostnqnOf, { ctrl: w.reauthCtrl === true });
        secret = keys.key;
        ctrlSecret = keys.ctrlKey;
      }
      if (w.armAt === 'before-connect') ctx.arm();
      const devices: string[] = [];
      for (const a of w.multipath === true ? [runner.targetAddress(0), PATH2] : [runner.targetAddress(0)]) {
        const connectOnce = async (): Promise<string> => {
          let t: NodeJS.Timeout | undefined;
          const res = await Promise.race([host.connect(opts(a)), new Promise<never>((_ok, no) => (t = setTimeout(() => no(new HostHung(`nvme connect to ${a.traddr} did not return within 150 s`)), 150_000)))]).finally(() => clearTimeout(t));
          lines.push(`nvme connect ${a.traddr}: ${res.device} (${Math.round(res.connectMs)} ms)`);
          return res.device;
        };
        try {
          devices.push(await connectOnce());
        } catch (e) {
          if (!(e instanceof KernelHostCommandError)) throw e;
          if (secret !== undefined) {
            // The case is about re-authentication: a host that cannot authenticate at all never gets there.
            const why = (await this.#exec('dmesg', 'dmesg | grep -i auth | tail -n 3', 30_000, lines)).stdout.trim().split('\n').pop() ?? '';
            ev.notRun = `Linux ${this.#kernel}: the first connect with a DH-HMAC-CHAP secret failed, so there is no re-authentication to test (${why || e.message})`;
            ev.log = lines.join('\n') + '\n';
            await this.#exec('disconnect', `nvme disconnect -n ${shQuote(CATALOGUE_NQN)} 2>&1`, 60_000, lines).catch(() => undefined);
            return ev;
          }
          ev.connectError = e.message;
          lines.push(e.message);
          const left = await ctx.target.settled(15_000);
          ev.facts['leftControllers'] = left.controllers;
          ev.facts['leftQueues'] = left.queues;
          devices.push(await connectOnce());
          ev.retryConnected = true;
        }
      }
      const dev0 = devices[0] as string;
      ev.facts['ioQueues'] = (await host.ioQueues(dev0)) ?? -1;
      const sub = await host.subsystem(dev0);
      const blk = sub?.blockDevice ?? `/dev/${dev0}n1`;
      ev.facts['blockDevice'] = blk;
      const r = w.range;
      const wr = await this.#exec('write', `for i in $(seq 50); do [ -b ${blk} ] && break; sleep 0.2; done; head -c ${r.count * 512} /dev/urandom > /tmp/pat && dd if=/tmp/pat of=${blk} bs=512 seek=${r.start} count=${r.count} oflag=direct conv=notrunc 2>&1`, 60_000, lines);
      if (wr.code !== 0) throw new KernelHostCommandError(`the write before the fault failed (exit ${wr.code}): ${wr.stdout.trim().split('\n').slice(-1)[0] ?? ''}`);
      if (w.armAt === 'after-write') ctx.arm();
      if (w.reauth === true) {
        ev.facts['reauthWrite'] = await this.#failReauth(dev0, hostnqnOf, ctrlSecret !== undefined, lines);
        await new Promise((ok) => setTimeout(ok, ((k.ctrlLossTmoS ?? 10) + 5) * 1000));
      }
      if (w.idleS !== undefined) await new Promise((ok) => setTimeout(ok, (w.idleS as number) * 1000));
      for (const ch of readChunks(r, w.badRange)) await this.#readChunk(blk, r, ch, ev, bound, lines);
      if (sub !== undefined) ev.facts['paths'] = sub.paths.length;
    } catch (e) {
      if (e instanceof HostHung) {
        ev.hung = e.message;
        broken = true;
      } else if (e instanceof KernelHostCommandError) {
        ev.connectError ??= e.message;
      } else throw e;
      lines.push(`stopped: ${(e as Error).message}`);
    }
    return this.#wrapUp(ev, lines, broken, () => (runner.console?.() ?? '').slice(consoleMark));
  }

  /**
   * A secret the target does not hold: the re-authentication the write starts must fail (AUTH_Failure1). blktests
   * nvme/045's order: the host secret, then the controller secret (when the case has one), each write starting one.
   */
  async #failReauth(dev: string, hostnqn: string, ctrl: boolean, lines: string[]): Promise<string> {
    const other = generateDhchapKey({ hmac: 1, hostnqn }).format();
    const otherCtrl = ctrl ? generateDhchapKey({ hmac: 1, hostnqn: CATALOGUE_NQN }).format() : undefined;
    const script = `echo ${other} > /sys/class/nvme/${dev}/dhchap_secret; echo rc=$?` + (otherCtrl === undefined ? '' : `; echo ${otherCtrl} > /sys/class/nvme/${dev}/dhchap_ctrl_secret; echo rc=$?`);
    const re = await this.#exec('re-authentication', script, 60_000, lines);
    return re.stdout.trim().split('\n').pop() ?? '';
  }

  /** Disconnects (unless the guest hung), then the kernel log's warnings; a hung guest is replaced for the next case. */
  async #wrapUp(ev: HostEvidence, lines: string[], hung: boolean, kernelLogSince: () => string): Promise<HostEvidence> {
    let broken = hung;
    if (!broken) {
      try {
        await this.#exec('disconnect', `nvme disconnect -n ${shQuote(CATALOGUE_NQN)} 2>&1; sleep 1; dmesg -c`, 60_000, lines);
      } catch (e) {
        if (!(e instanceof HostHung)) throw e;
        ev.hung = `disconnect: ${e.message}`;
        broken = true;
      }
    }
    if (broken) await new Promise((ok) => setTimeout(ok, (HUNG_TASK_S + 15) * 1000));
    // Read after the wait: a hung task's report comes HUNG_TASK_S after it stuck.
    const kernelLog = kernelLogSince();
    ev.kernelWarnings = kernelLog.split('\n').filter((l) => KERNEL_WARNING.test(l)).slice(0, 20);
    ev.log = `${lines.join('\n')}\n\n--- kernel log (streamed /proc/kmsg) ---\n${kernelLog}`;
    if (broken) {
      // A guest with a task stuck in D state cannot run the next case: boot a fresh one for it.
      this.#notes.add('a case that hung left the guest unusable; the next case ran in a freshly booted guest');
      await this.close();
    }
    return ev;
  }

  async #readChunk(blk: string, r: BlockRange, ch: BlockRange, ev: HostEvidence, bound: number, lines: string[]): Promise<void> {
    const res = await this.#exec(`read of blocks ${ch.start}..${ch.start + ch.count - 1}`, `dd if=${blk} of=/tmp/got bs=512 skip=${ch.start} count=${ch.count} iflag=direct 2>&1 || { echo READ-FAILED; exit 0; }; dd if=/tmp/pat bs=512 skip=${ch.start - r.start} count=${ch.count} 2>/dev/null | cmp -s - /tmp/got && echo SAME || echo DIFFERENT`, bound, lines);
    if (/READ-FAILED/.test(res.stdout)) {
      ev.failedBlocks.push(ch);
      ev.readError ??= res.stdout.split('\n').find((l) => /error|dd:/i.test(l))?.trim() ?? 'dd failed';
    } else if (!/SAME/.test(res.stdout)) ev.mismatchedBlocks.push(ch);
  }

  async close(): Promise<void> {
    const r = this.#runner;
    this.#runner = undefined;
    this.#host = undefined;
    await r?.close();
  }
}

/** `nvme connect` options for a case's workload (timeouts, secrets, digests) to one target address. */
function connectOptions(a: { traddr: string; trsvcid: number }, k: NonNullable<CatalogueCase['workload']['connect']>, secret: string | undefined, ctrlSecret: string | undefined): Parameters<KernelHost['connect']>[0] {
  return {
    ...a,
    nqn: CATALOGUE_NQN,
    ...(k.nrIoQueues === undefined ? {} : { nrIoQueues: k.nrIoQueues }),
    ctrlLossTmo: k.ctrlLossTmoS ?? 10,
    ...(k.keepAliveTmoS === undefined ? {} : { keepAliveTmo: k.keepAliveTmoS }),
    ...(k.reconnectDelayS === undefined ? {} : { reconnectDelay: k.reconnectDelayS }),
    ...(secret === undefined ? {} : { dhchapSecret: secret }),
    ...(ctrlSecret === undefined ? {} : { dhchapCtrlSecret: ctrlSecret }),
    ...(k.digests === true ? { hdrDigest: true, dataDigest: true } : {}),
  };
}
