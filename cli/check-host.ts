// `nvme-tcp check-host`: this machine's CPU / NIC queue / IRQ layout and kernel TLS support, with steering advice
// for the queues of a held connection (--queues-from). Advice only: nothing is changed.
import { readFile } from 'node:fs/promises';
import { checkHost, kernelTlsReport } from '../initiator/index.js';
import { UsageError, type CliIo } from './args.js';
import type { StateFile } from './held.js';

export interface CheckHostOpts {
  traddr?: string;
  hostIface?: string;
  queuesFrom?: string;
  outputFormat: 'normal' | 'json';
}

async function readQueuesFile(file: string): Promise<StateFile> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as StateFile;
  } catch (err) {
    throw new UsageError(`--queues-from ${file}: cannot read a held connection's state (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

export async function checkHostCmd(o: CheckHostOpts, io: CliIo): Promise<number> {
  let qfile: StateFile | undefined;
  if (o.queuesFrom !== undefined) qfile = await readQueuesFile(o.queuesFrom);
  const rep = await checkHost(o.traddr ?? qfile?.controller.traddr, o.hostIface);
  const out: string[] = [];
  out.push(`CPUs: ${rep.cpus}`);
  if (rep.iface !== undefined) out.push(`interface to ${rep.traddr ?? '?'}: ${rep.iface}${rep.src !== undefined ? ` (source ${rep.src})` : ''}`);
  if (rep.queues !== undefined) {
    out.push(`NIC queues: rx ${rep.queues.rx}, tx ${rep.queues.tx}`);
    const e = rep.queues.ethtool;
    if (e !== undefined) out.push(`ethtool -l: max rx ${e.maxRx ?? '-'} tx ${e.maxTx ?? '-'} combined ${e.maxCombined ?? '-'}; current rx ${e.curRx ?? '-'} tx ${e.curTx ?? '-'} combined ${e.curCombined ?? '-'}`);
  }
  for (const irq of rep.irqs) out.push(`IRQ ${irq.irq} ${irq.name}: CPUs ${irq.affinity ?? '?'}`);
  for (const [q, m] of Object.entries(rep.rps)) out.push(`RPS ${q}: ${m}`);
  for (const [q, m] of Object.entries(rep.xps)) out.push(`XPS ${q}: ${m}`);
  for (const w of rep.warnings) out.push(`warning: ${w}`);
  const t = await kernelTlsReport();
  if (o.outputFormat === 'json') {
    io.stdout(`${JSON.stringify({ ...rep, kernelTls: t }, null, 2)}\n`);
    return 0;
  }
  out.push(`kernel TLS (nvme connect --tls): tlshd ${t.tlshd ?? 'not installed'}${t.tlshd !== undefined ? (t.tlshdRunning ? ', running' : ', not running') : ''}; .nvme keyring ${t.nvmeKeyring === undefined ? 'unknown' : t.nvmeKeyring ? 'present' : 'absent'}; CONFIG_NVME_TCP_TLS ${t.kconfig ?? 'unknown'}`);
  for (const n of t.notes) out.push(`tls: ${n}`);
  if (qfile !== undefined && rep.iface !== undefined) {
    out.push(`suggested steering for ${qfile.queues.length} I/O queues (advice only, nothing is applied):`);
    const rx = Math.max(1, rep.queues?.rx ?? 1);
    const tx = Math.max(1, rep.queues?.tx ?? 1);
    for (const q of qfile.queues) {
      const [sip, sport] = splitHostPort(q.source);
      const [dip, dport] = splitHostPort(q.destination);
      const nq = (q.qid - 1) % rx;
      // Incoming packets of this flow come from the target: src = target, dst = us.
      out.push(`  qid ${q.qid}: ethtool -N ${rep.iface} flow-type tcp4 src-ip ${dip} dst-ip ${sip} src-port ${dport} dst-port ${sport} action ${nq}`);
      const cpu = (q.qid - 1) % rep.cpus;
      out.push(`  qid ${q.qid}: echo ${(1n << BigInt(cpu)).toString(16)} > /sys/class/net/${rep.iface}/queues/tx-${(q.qid - 1) % tx}/xps_cpus`);
    }
  }
  for (const u of rep.unreadable) out.push(`could not read: ${u}`);
  io.stdout(out.join('\n') + '\n');
  return 0;
}

function splitHostPort(s: string): [string, string] {
  const i = s.lastIndexOf(':');
  return [s.slice(0, i), s.slice(i + 1)];
}
