// Host topology for match_hw_queues and check-host: which interface routes to the target, how many rx/tx queues it
// has, CPUs, NIC IRQ affinity, RPS/XPS. Everything is read asynchronously (child_process.execFile, fs.promises).
import os from 'node:os';
import { execFile } from 'node:child_process';
import { readFile, readdir } from 'node:fs/promises';
import type { Logger } from 'pino';

export interface NicQueues {
  iface: string;
  rx: number;
  tx: number;
  /** `ethtool -l` maxima / current, when ethtool is installed and the driver answers. */
  ethtool?: { maxRx?: number; maxTx?: number; maxCombined?: number; curRx?: number; curTx?: number; curCombined?: number };
}

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: 5000 }, (err, stdout) => (err !== null ? reject(err) : resolve(stdout)));
  });
}

/** The interface (and source address) the kernel routes `addr` through: `ip -j route get`, else /proc/net/route. */
export async function routeInterface(addr: string): Promise<{ iface: string; src?: string } | undefined> {
  try {
    const out = JSON.parse(await run('ip', ['-j', 'route', 'get', addr])) as Array<{ dev?: string; prefsrc?: string }>;
    const r = out[0];
    if (r?.dev !== undefined) return { iface: r.dev, ...(r.prefsrc !== undefined ? { src: r.prefsrc } : {}) };
  } catch {
    // fall through to /proc/net/route
  }
  try {
    const text = await readFile('/proc/net/route', 'utf8');
    const target = ipv4ToLe(addr);
    if (target === undefined) return undefined;
    let best: { iface: string; bits: number } | undefined;
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 8) continue;
      const dest = Number.parseInt(f[1] as string, 16) >>> 0;
      const mask = Number.parseInt(f[7] as string, 16) >>> 0;
      if (((target & mask) >>> 0) !== dest) continue;
      const bits = popcount(mask);
      if (best === undefined || bits > best.bits) best = { iface: f[0] as string, bits };
    }
    return best === undefined ? undefined : { iface: best.iface };
  } catch {
    return undefined;
  }
}

function ipv4ToLe(addr: string): number | undefined {
  const p = addr.split('.').map(Number);
  if (p.length !== 4 || p.some((x) => !Number.isInteger(x) || x < 0 || x > 255)) return undefined;
  return (((p[3] as number) << 24) | ((p[2] as number) << 16) | ((p[1] as number) << 8) | (p[0] as number)) >>> 0;
}

function popcount(n: number): number {
  let c = 0;
  for (let x = n >>> 0; x !== 0; x >>>= 1) c += x & 1;
  return c;
}

/** rx/tx queue counts from /sys/class/net/IF/queues, plus `ethtool -l IF` when available. */
export async function nicQueueCounts(iface: string, sysRoot = '/sys/class/net'): Promise<NicQueues> {
  const names = await readdir(`${sysRoot}/${iface}/queues`);
  const rx = names.filter((n) => n.startsWith('rx-')).length;
  const tx = names.filter((n) => n.startsWith('tx-')).length;
  const out: NicQueues = { iface, rx, tx };
  try {
    const text = await run('ethtool', ['-l', iface]);
    const [maxPart, curPart] = text.split(/Current hardware settings:/i);
    const pick = (part: string | undefined, key: string): number | undefined => {
      const m = new RegExp(`^${key}:\\s*(\\d+)`, 'im').exec(part ?? '');
      return m === null ? undefined : Number(m[1]);
    };
    const e: NonNullable<NicQueues['ethtool']> = {};
    const set = (k: keyof NonNullable<NicQueues['ethtool']>, v: number | undefined): void => {
      if (v !== undefined) e[k] = v;
    };
    set('maxRx', pick(maxPart, 'RX'));
    set('maxTx', pick(maxPart, 'TX'));
    set('maxCombined', pick(maxPart, 'Combined'));
    set('curRx', pick(curPart, 'RX'));
    set('curTx', pick(curPart, 'TX'));
    set('curCombined', pick(curPart, 'Combined'));
    out.ethtool = e;
  } catch {
    // ethtool missing or the driver does not support -l: sysfs counts stand.
  }
  return out;
}

/**
 * match_hw_queues: min(CPUs, min(rx, tx)) of the interface that routes to the target (or host_iface). Returns
 * undefined (no limit) when the interface or its queues cannot be read, e.g. loopback without a queues directory.
 */
export async function limitQueuesToHardware(traddr: string, hostIface: string | undefined, log?: Logger, cpus = os.availableParallelism()): Promise<number | undefined> {
  const iface = hostIface ?? (await routeInterface(traddr))?.iface;
  if (iface === undefined) {
    log?.warn({ traddr }, 'match_hw_queues: no route to target; not limiting I/O queues');
    return undefined;
  }
  let q: NicQueues;
  try {
    q = await nicQueueCounts(iface);
  } catch {
    log?.warn({ iface }, 'match_hw_queues: cannot read NIC queues; not limiting I/O queues');
    return undefined;
  }
  const nic = Math.min(q.rx, q.tx);
  const n = Math.max(1, Math.min(cpus, nic));
  log?.info({ iface, nic, cpus, n }, `limiting I/O queues to ${n} (NIC queues ${nic}, CPUs ${cpus})`);
  return n;
}

export interface IrqInfo {
  irq: number;
  name: string;
  affinity?: string;
}

export interface HostReport {
  traddr?: string;
  iface?: string;
  src?: string;
  cpus: number;
  queues?: NicQueues;
  irqs: IrqInfo[];
  rps: Record<string, string>;
  xps: Record<string, string>;
  warnings: string[];
  /** What could not be read, and why. */
  unreadable: string[];
}

/** Gather what check-host prints. Advice only: nothing is changed on the host. */
export async function checkHost(traddr?: string, iface?: string): Promise<HostReport> {
  const cpus = os.availableParallelism();
  const rep: HostReport = { cpus, irqs: [], rps: {}, xps: {}, warnings: [], unreadable: [] };
  if (traddr !== undefined) rep.traddr = traddr;
  let dev = iface;
  if (dev === undefined && traddr !== undefined) {
    const r = await routeInterface(traddr);
    if (r === undefined) rep.unreadable.push(`route to ${traddr}: neither "ip -j route get" nor /proc/net/route answered`);
    else {
      dev = r.iface;
      if (r.src !== undefined) rep.src = r.src;
    }
  }
  if (dev === undefined) return rep;
  rep.iface = dev;
  try {
    await reportNicQueues(rep, dev, await nicQueueCounts(dev));
  } catch {
    rep.unreadable.push(`/sys/class/net/${dev}/queues`);
  }
  await reportIrqs(rep, dev);
  return rep;
}

/** NIC queue pairs against CPUs, unused combined channels, and the RPS/XPS masks of every queue. */
async function reportNicQueues(rep: HostReport, dev: string, queues: NicQueues): Promise<void> {
  rep.queues = queues;
  const nic = Math.min(queues.rx, queues.tx);
  if (nic < rep.cpus) rep.warnings.push(`${dev} has ${nic} rx/tx queue pairs for ${rep.cpus} CPUs: queues beyond ${nic} share NIC queues`);
  const e = queues.ethtool;
  if (e === undefined) rep.unreadable.push(`ethtool -l ${dev}: not available`);
  else if (e.maxCombined !== undefined && e.curCombined !== undefined && e.curCombined < e.maxCombined) {
    rep.warnings.push(`${dev} uses ${e.curCombined} of ${e.maxCombined} combined channels (ethtool -L ${dev} combined ${e.maxCombined})`);
  }
  await readSteering(rep, rep.rps, dev, 'rx', 'rps_cpus', queues.rx);
  await readSteering(rep, rep.xps, dev, 'tx', 'xps_cpus', queues.tx);
}

async function readSteering(rep: HostReport, into: Record<string, string>, dev: string, dir: 'rx' | 'tx', file: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const path = `/sys/class/net/${dev}/queues/${dir}-${i}/${file}`;
    try {
      into[`${dir}-${i}`] = (await readFile(path, 'utf8')).trim();
    } catch {
      rep.unreadable.push(path);
    }
  }
}

/** The IRQs named after the device in /proc/interrupts, with their CPU affinity. */
async function reportIrqs(rep: HostReport, dev: string): Promise<void> {
  let text: string;
  try {
    text = await readFile('/proc/interrupts', 'utf8');
  } catch {
    rep.unreadable.push('/proc/interrupts');
    return;
  }
  for (const line of text.split('\n')) {
    const m = /^\s*(\d+):.*\s(\S+)\s*$/.exec(line);
    if (m === null || !(m[2] as string).includes(dev)) continue;
    const irq = Number(m[1]);
    const info: IrqInfo = { irq, name: m[2] as string };
    try {
      info.affinity = (await readFile(`/proc/irq/${irq}/smp_affinity_list`, 'utf8')).trim();
    } catch {
      rep.unreadable.push(`/proc/irq/${irq}/smp_affinity_list`);
    }
    rep.irqs.push(info);
  }
  if (rep.irqs.length === 0) rep.unreadable.push(`no IRQs named after ${dev} in /proc/interrupts (virtual NIC or different naming)`);
}
