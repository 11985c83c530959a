// connect(), discover() and connectAll(): the entry points that turn options into live controllers.
import { DISCOVERY_NQN, DiscSubtype, Treq } from '../protocol/index.js';
import { Controller } from './controller.js';
import type { DiscoveryEntry } from './fabrics-cmds.js';
import { resolveOptions, type ConnectOptions } from './options.js';
import { limitQueuesToHardware } from './topology.js';

/**
 * Connect to an NVM subsystem: admin queue, enable, identify, I/O queues, namespace scan. Options are validated (and
 * the duplicate-connect / hostnqn↔hostid rules checked) before any socket opens.
 */
export async function connect(options: ConnectOptions): Promise<Controller> {
  const opts = resolveOptions(options, 'connect');
  const ctrl = new Controller(opts);
  if (opts.matchHwQueues && !opts.nrIoQueuesExplicit) ctrl.setQueueLimit(await limitQueuesToHardware(opts.traddr, opts.hostIface, ctrl.log));
  await ctrl.start();
  return ctrl;
}

/** Connect to a discovery controller (admin queue only, KATO 0 unless given) and return the discovery log entries. */
export async function discover(options: Omit<ConnectOptions, 'nqn'> & { nqn?: string }): Promise<DiscoveryEntry[]> {
  const opts = resolveOptions(options, 'discover');
  const ctrl = new Controller(opts);
  await ctrl.start();
  try {
    return (await ctrl.discoveryLog()).entries;
  } finally {
    await ctrl.disconnect();
  }
}

/**
 * nvme connect-all: read the discovery log (NVMe-oF 1.1 §5.3), connect to every NVM subsystem entry (SUBTYPE 2) and
 * follow referrals (SUBTYPE 1) recursively; the current discovery subsystem's own entry (SUBTYPE 3, or a referral back
 * to where we are)
 * is skipped. Entries already connected are skipped rather than failing (nvme-cli prints "already connected").
 */
export async function connectAll(
  options: Omit<ConnectOptions, 'nqn'> & { nqn?: string },
  depth = 4,
): Promise<{ controllers: Controller[]; errors: Array<{ entry: DiscoveryEntry; error: Error }> }> {
  const controllers: Controller[] = [];
  const errors: Array<{ entry: DiscoveryEntry; error: Error }> = [];
  const visited = new Set<string>();
  const walk = async (addr: string, port: number | undefined, left: number): Promise<void> => {
    const key = `${addr}:${port ?? 8009}`;
    if (visited.has(key) || left < 0) return;
    visited.add(key);
    const entries = await discover({ ...options, traddr: addr, ...(port !== undefined ? { trsvcid: port } : {}) });
    for (const e of entries) {
      if (e.subtype === DiscSubtype.CURRENT) continue;
      const eport = Number.parseInt(e.trsvcid, 10);
      if (e.subtype === DiscSubtype.REFERRAL) {
        if (`${e.traddr}:${eport}` === key) continue;
        await walk(e.traddr, eport, left - 1).catch((err: unknown) => errors.push({ entry: e, error: err instanceof Error ? err : new Error(String(err)) }));
        continue;
      }
      if (e.subtype !== DiscSubtype.NVME || e.subnqn === DISCOVERY_NQN) continue;
      try {
        // TREQ: the target supports disabling SQ flow control; nvme-cli then adds disable_sqflow.
        const { nqn: _ignored, trsvcid: _p, traddr: _a, ...rest } = options;
        controllers.push(await connect({ ...rest, traddr: e.traddr, trsvcid: eport, nqn: e.subnqn, ...((e.treq & Treq.DISABLE_SQFLOW) !== 0 ? { disable_sqflow: true } : {}) }));
      } catch (err) {
        errors.push({ entry: e, error: err instanceof Error ? err : new Error(String(err)) });
      }
    }
  };
  await walk(options.traddr, options.trsvcid, depth);
  return { controllers, errors };
}
