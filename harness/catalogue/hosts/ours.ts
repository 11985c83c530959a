// Our initiator as a catalogue host, in this process: the workload through Controller / MultipathNamespace.
import { randomBytes } from 'node:crypto';
import { connect, createMultipath, NvmeStatusError, type Controller } from '../../../initiator/index.js';
import { CATALOGUE_NQN, CATALOGUE_PORTS } from '../cases.js';
import { emptyEvidence, HostHung, type CaseContext, type HostAdapter } from '../runner.js';
import type { CatalogueTarget } from '../target.js';
import type { CatalogueCase, HostEvidence, HostInfo } from '../types.js';
import { readChunks } from '../verdict.js';

const BLOCK = 512;
/** Bounded wait for one step: longer than any case's timeouts and retries together. */
const STEP_MS = 30_000;

function bounded<T>(step: string, p: Promise<T>, ms = STEP_MS): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_r, reject) => (t = setTimeout(() => reject(new HostHung(`${step} did not finish within ${ms / 1000} s`)), ms)))]).finally(() => clearTimeout(t));
}

const errText = (e: unknown): string => (e instanceof NvmeStatusError ? `${e.message} (status 0x${e.status.toString(16)}${e.dnr ? ', DNR' : ''})` : (e as Error).message);

export class OursHost implements HostAdapter {
  readonly id = 'ours';
  #target: CatalogueTarget | undefined;

  async open(target: CatalogueTarget): Promise<string | undefined> {
    this.#target = target;
    return undefined;
  }

  info(): HostInfo {
    return { id: this.id, describe: "this repository's initiator (initiator/), in the runner's process", notes: ['no pcap: the host runs in-process; the evidence is its own log and the rule firings'] };
  }

  cannot(c: CatalogueCase): string | undefined {
    return c.workload.reauth === true ? 'our initiator authenticates at Connect only: it has no re-authentication to fail' : undefined;
  }

  async #connect(c: CatalogueCase, port: number): Promise<Controller> {
    const k = c.workload.connect ?? {};
    return connect({
      traddr: '127.0.0.1',
      trsvcid: (this.#target as CatalogueTarget).portOf(port),
      nqn: CATALOGUE_NQN,
      nr_io_queues: k.nrIoQueues ?? 1,
      ...(k.ioTimeoutS === undefined ? {} : { io_timeout: k.ioTimeoutS }),
      ...(k.keepAliveTmoS === undefined ? {} : { keep_alive_tmo: k.keepAliveTmoS }),
      reconnect_delay: k.reconnectDelayS ?? 1,
      ctrl_loss_tmo: k.ctrlLossTmoS ?? 10,
      ...(k.digests === true ? { hdr_digest: true, data_digest: true } : {}),
    });
  }

  async run(c: CatalogueCase, ctx: CaseContext): Promise<HostEvidence> {
    const ev = emptyEvidence();
    const lines: string[] = [];
    const note = (m: string): void => void lines.push(`${new Date().toISOString()} ${m}`);
    const ctrls: Controller[] = [];
    const w = c.workload;
    try {
      if (w.armAt === 'before-connect') ctx.arm();
      const ports = w.multipath === true ? [...CATALOGUE_PORTS] : [CATALOGUE_PORTS[0]];
      for (const p of ports) {
        try {
          ctrls.push(await bounded(`connect to port ${p}`, this.#connect(c, p)));
          note(`connected to port ${p}`);
        } catch (e) {
          if (e instanceof HostHung) throw e;
          ev.connectError = errText(e);
          note(`connect to port ${p} failed: ${ev.connectError}`);
          const left = await ctx.target.settled();
          ev.facts['leftControllers'] = left.controllers;
          ev.facts['leftQueues'] = left.queues;
          ctrls.push(await bounded(`second connect to port ${p}`, this.#connect(c, p)));
          ev.retryConnected = true;
          note(`second connect to port ${p} came up`);
        }
      }
      let reconnects = 0;
      for (const k of ctrls) k.on('reconnected', () => void reconnects++);
      const first = ctrls[0] as Controller;
      ev.facts['ioQueues'] = first.ioQueueCount;
      const ns = ctrls.length > 1 ? createMultipath(ctrls, 1, { noPathTimeoutMs: 10_000 }) : first.namespace(1);
      const data = randomBytes(w.range.count * BLOCK);
      await bounded('write', ns.write(w.range.start, data));
      note(`wrote blocks ${w.range.start}..${w.range.start + w.range.count - 1}`);
      if (w.armAt === 'after-write') ctx.arm();
      if (w.idleS !== undefined) await new Promise((r) => setTimeout(r, w.idleS as number * 1000));
      for (const ch of readChunks(w.range, w.badRange)) {
        try {
          const got = await bounded(`read of blocks ${ch.start}..${ch.start + ch.count - 1}`, ns.read(ch.start, ch.count));
          const off = (ch.start - w.range.start) * BLOCK;
          if (!got.equals(data.subarray(off, off + ch.count * BLOCK))) ev.mismatchedBlocks.push(ch);
          note(`read blocks ${ch.start}..${ch.start + ch.count - 1}: ${ev.mismatchedBlocks.includes(ch) ? 'MISMATCH' : 'ok'}`);
        } catch (e) {
          if (e instanceof HostHung) throw e;
          ev.failedBlocks.push(ch);
          ev.readError ??= errText(e);
          note(`read blocks ${ch.start}..${ch.start + ch.count - 1} failed: ${errText(e)}`);
        }
      }
      ev.facts['ioRetries'] = ctrls.reduce((n, k) => n + k.ioRetries, 0);
      ev.facts['reconnects'] = reconnects;
      ev.facts['anaState'] = first.anaStates.get(1) ?? '?';
    } catch (e) {
      if (!(e instanceof HostHung)) throw e;
      ev.hung = e.message;
      note(e.message);
    } finally {
      await Promise.all(ctrls.map((k) => k.disconnect().catch(() => undefined)));
    }
    ev.log = lines.join('\n') + '\n';
    return ev;
  }

  async close(): Promise<void> {
    this.#target = undefined;
  }
}
