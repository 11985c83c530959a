// `nvme-tcp discover|connect|io|queues|check-host`: the initiator's CLI with nvme-cli flag names. Called by cli/main.ts.
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { mkdir, readFile, readdir, unlink, writeFile } from 'node:fs/promises';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { Buffer } from 'node:buffer';
import { readFileSync } from 'node:fs';
import { checkHost, connect, discover, kernelTlsReport, type ConnectOptions, type Controller, type QueueInfo } from '../initiator/index.js';

export interface CliIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
}

const defaultIo: CliIo = { stdout: (s) => void process.stdout.write(s), stderr: (s) => void process.stderr.write(s) };

/** Where `connect --hold` records its queues and `queues` / `check-host --queues-from` read them. */
function stateDir(): string {
  return path.join(os.tmpdir(), 'nvme-tcp-ts');
}

type Opts = NonNullable<ParseArgsConfig['options']>;

const CONN: Opts = {
  traddr: { type: 'string', short: 'a' },
  trsvcid: { type: 'string', short: 's' },
  nqn: { type: 'string', short: 'n' },
  hostnqn: { type: 'string', short: 'q' },
  hostid: { type: 'string', short: 'I' },
  'host-traddr': { type: 'string', short: 'w' },
  'host-iface': { type: 'string', short: 'f' },
  'nr-io-queues': { type: 'string', short: 'i' },
  'nr-write-queues': { type: 'string', short: 'W' },
  'nr-poll-queues': { type: 'string', short: 'P' },
  'queue-size': { type: 'string', short: 'Q' },
  'keep-alive-tmo': { type: 'string', short: 'k' },
  'reconnect-delay': { type: 'string', short: 'c' },
  'ctrl-loss-tmo': { type: 'string', short: 'l' },
  'fast-io-fail-tmo': { type: 'string', short: 'F' },
  tos: { type: 'string', short: 'T' },
  'hdr-digest': { type: 'boolean', short: 'g' },
  'data-digest': { type: 'boolean', short: 'G' },
  'duplicate-connect': { type: 'boolean', short: 'D' },
  'disable-sqflow': { type: 'boolean' },
  'queues-per-hctx': { type: 'string' },
  'match-hw-queues': { type: 'boolean' },
  'connect-concurrency': { type: 'string' },
  'io-timeout': { type: 'string' },
  'admin-timeout': { type: 'string' },
  'dhchap-secret': { type: 'string', short: 'S' },
  'dhchap-ctrl-secret': { type: 'string', short: 'C' },
  tls: { type: 'boolean' },
  'tls-key': { type: 'string' },
  'tls-identity-version': { type: 'string' },
  'tls-hkdf': { type: 'string' },
  concat: { type: 'boolean' },
  'io-workers': { type: 'string' },
  'io-worker-cpus': { type: 'string' },
  'io-budget-us': { type: 'string' },
};

/** "0,1,4" → [0, 1, 4] (--io-worker-cpus). */
export function parseCpuList(flag: string, v: string): number[] {
  const out = v.split(',').map((x) => x.trim());
  if (out.some((x) => !/^\d+$/.test(x))) throw new UsageError(`--${flag}: not a list of CPU numbers: ${v}`);
  return out.map(Number);
}

class UsageError extends Error {}

function toNum(flag: string, v: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${flag}: not a number: ${v}`);
  return n;
}

function parseSize(flag: string, v: string): number {
  const m = /^(\d+)([kmgKMG])?$/.exec(v.trim());
  if (m === null) throw new UsageError(`--${flag}: not a size: ${v}`);
  const mult = { k: 1024, m: 1 << 20, g: 1 << 30 }[(m[2] ?? '').toLowerCase() as 'k' | 'm' | 'g'] ?? 1;
  return Number(m[1]) * mult;
}

/** Map nvme-cli style flags onto ConnectOptions (validation proper happens in resolveOptions). */
function connectOptions(v: Record<string, string | boolean | undefined>): ConnectOptions {
  const o: Record<string, unknown> = {};
  const s = (flag: string, key: string, num: boolean): void => {
    const x = v[flag];
    if (typeof x === 'string') o[key] = num ? toNum(flag, x) : x;
  };
  const b = (flag: string, key: string): void => {
    if (v[flag] === true) o[key] = true;
  };
  s('traddr', 'traddr', false);
  s('trsvcid', 'trsvcid', true);
  s('nqn', 'nqn', false);
  s('hostnqn', 'hostnqn', false);
  s('hostid', 'hostid', false);
  s('host-traddr', 'host_traddr', false);
  s('host-iface', 'host_iface', false);
  s('nr-io-queues', 'nr_io_queues', true);
  s('nr-write-queues', 'nr_write_queues', true);
  s('nr-poll-queues', 'nr_poll_queues', true);
  s('queue-size', 'queue_size', true);
  s('keep-alive-tmo', 'keep_alive_tmo', true);
  s('reconnect-delay', 'reconnect_delay', true);
  s('ctrl-loss-tmo', 'ctrl_loss_tmo', true);
  s('fast-io-fail-tmo', 'fast_io_fail_tmo', true);
  s('tos', 'tos', true);
  s('queues-per-hctx', 'queues_per_hctx', true);
  s('connect-concurrency', 'connect_concurrency', true);
  s('io-timeout', 'io_timeout', true);
  s('admin-timeout', 'admin_timeout', true);
  s('dhchap-secret', 'dhchap_secret', false);
  s('dhchap-ctrl-secret', 'dhchap_ctrl_secret', false);
  s('io-workers', 'io_workers', true);
  s('io-budget-us', 'io_budget_us', true);
  if (typeof v['io-worker-cpus'] === 'string') o['io_worker_cpus'] = parseCpuList('io-worker-cpus', v['io-worker-cpus']);
  b('hdr-digest', 'hdr_digest');
  b('data-digest', 'data_digest');
  b('duplicate-connect', 'duplicate_connect');
  b('disable-sqflow', 'disable_sqflow');
  b('match-hw-queues', 'match_hw_queues');
  b('tls', 'tls');
  b('concat', 'concat');
  s('tls-identity-version', 'tls_identity_version', true);
  s('tls-hkdf', 'tls_hkdf', false);
  if (typeof v['tls-key'] === 'string') o['tls_key'] = readKeyArg('tls-key', v['tls-key']);
  if (o['traddr'] === undefined) throw new UsageError('-a/--traddr is required');
  return o as unknown as ConnectOptions;
}

/** KEY, or @FILE: the file's first line (keeps the key off the command line, which other users can see). */
function readKeyArg(flag: string, value: string): string {
  if (!value.startsWith('@')) return value;
  try {
    return (readFileSync(value.slice(1), 'utf8').split('\n')[0] ?? '').trim();
  } catch (err) {
    throw new UsageError(`--${flag} @${value.slice(1)}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
}

function queueTable(qs: readonly QueueInfo[]): string {
  const head = ['qid', 'hctx', 'type', 'owner', 'cpu', 'source', 'destination', 'state', 'inflight', 'submitted', 'completed', 'bytes', 'errors'];
  const rows = qs.map((q) => [q.qid, q.hctx, q.type, q.owner, q.cpu ?? '-', q.source, q.destination, q.state, q.inFlight, q.submitted, q.completed, q.bytes, q.errors].map(String));
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]): string => r.map((c, i) => c.padEnd(w[i] ?? 0)).join('  ').trimEnd();
  return [line(head), ...rows.map(line)].join('\n') + '\n';
}

function describeController(c: Controller): string {
  const id = c.identify;
  const ns = c.namespaces.map((n) => `  nsid ${n.nsid}: ${n.blocks} × ${n.blockSize} B (${Number(n.sizeBytes) / 2 ** 20} MiB) nguid ${n.info.nguid || '-'} uuid ${n.info.uuid || '-'} ana ${n.anaState}`);
  const vs = `${c.vs >>> 16}.${(c.vs >>> 8) & 0xff}.${c.vs & 0xff}`;
  return [
    `controller ${c.cntlid} subsystem ${c.opts.nqn} at ${c.opts.traddr}:${c.opts.trsvcid} state ${c.state}`,
    `  model "${id.mn}" serial "${id.sn}" firmware "${id.fr}" NVMe ${vs} mdts ${id.mdts} maxcmd ${id.maxcmd} ioccsz ${id.ioccsz} kas ${id.kas}`,
    `  hostnqn ${c.opts.hostnqn} hostid ${c.opts.hostid}`,
    `  I/O queues ${c.ioQueueCount} (granted ${c.grantedQueues}) in ${c.hctxs().length} hctx(s)`,
    ...ns,
  ].join('\n') + '\n';
}

interface StateFile {
  pid: number;
  /** Unix socket of the holding process: `queues --set-worker` sends its request there. */
  control?: string;
  controller: { cntlid: number; subnqn: string; traddr: string; trsvcid: number };
  queues: QueueInfo[];
  updated: string;
}

async function writeState(c: Controller, file: string, control?: string): Promise<void> {
  const st: StateFile = {
    pid: process.pid,
    ...(control !== undefined ? { control } : {}),
    controller: { cntlid: c.cntlid, subnqn: c.opts.nqn, traddr: c.opts.traddr, trsvcid: c.opts.trsvcid },
    queues: c.queueInfo(),
    updated: new Date().toISOString(),
  };
  await writeFile(file, JSON.stringify(st, null, 2));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function readStates(): Promise<Array<StateFile & { file: string }>> {
  const dir = stateDir();
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  const out: Array<StateFile & { file: string }> = [];
  for (const n of names.filter((x) => x.startsWith('held-') && x.endsWith('.json'))) {
    const file = path.join(dir, n);
    try {
      const st = JSON.parse(await readFile(file, 'utf8')) as StateFile;
      if (alive(st.pid)) out.push({ ...st, file });
    } catch {
      // a half-written or foreign file: skip it
    }
  }
  return out;
}

function stamp(buf: Buffer, lba: number, blockSize: number, seed: number): void {
  for (let off = 0; off < buf.length; off += blockSize) {
    const b = BigInt(lba + off / blockSize);
    for (let i = 0; i < blockSize; i += 16) {
      buf.writeBigUInt64LE(b, off + i);
      buf.writeUInt32LE(seed >>> 0, off + i + 8);
      buf.writeUInt32LE((i ^ seed) >>> 0, off + i + 12);
    }
  }
}

async function ioVerify(v: Record<string, string | boolean | undefined>, io: CliIo): Promise<number> {
  const size = parseSize('size', typeof v['size'] === 'string' ? v['size'] : '64M');
  const bs = parseSize('bs', typeof v['bs'] === 'string' ? v['bs'] : '4k');
  const c = await connect(connectOptions(v));
  try {
    const ns = c.namespaces[0];
    if (ns === undefined) throw new UsageError('the subsystem has no namespace');
    if (bs % ns.blockSize !== 0) throw new UsageError(`--bs ${bs} is not a multiple of the ${ns.blockSize}-byte block size`);
    const total = Math.min(size, Number(ns.sizeBytes));
    const seed = (Date.now() & 0x7fffffff) >>> 0;
    const per = bs / ns.blockSize;
    const count = Math.floor(total / bs);
    const hctxs = Math.max(1, c.hctxs().length);
    const depth = 32;
    const t0 = Date.now();
    for (let i = 0; i < count; i += depth) {
      await Promise.all(
        Array.from({ length: Math.min(depth, count - i) }, (_, k) => {
          const lba = (i + k) * per;
          const buf = Buffer.allocUnsafe(bs);
          stamp(buf, lba, ns.blockSize, seed);
          return ns.write(lba, buf, { hctx: (i + k) % hctxs });
        }),
      );
    }
    const t1 = Date.now();
    let bad = 0;
    const expect = Buffer.allocUnsafe(bs);
    for (let i = 0; i < count; i += depth) {
      const reads = await Promise.all(Array.from({ length: Math.min(depth, count - i) }, (_, k) => ns.read((i + k) * per, per, undefined, { hctx: (i + k) % hctxs })));
      reads.forEach((got, k) => {
        const lba = (i + k) * per;
        stamp(expect, lba, ns.blockSize, seed);
        if (!got.equals(expect)) {
          bad++;
          if (bad <= 10) io.stdout(`mismatch at lba ${lba} (${bs} bytes)\n`);
        }
      });
    }
    const t2 = Date.now();
    const mib = (count * bs) / 2 ** 20;
    io.stdout(`verified ${count} × ${bs} B (${mib.toFixed(1)} MiB) on nsid ${ns.nsid}: write ${(mib / Math.max(0.001, (t1 - t0) / 1000)).toFixed(1)} MiB/s, read ${(mib / Math.max(0.001, (t2 - t1) / 1000)).toFixed(1)} MiB/s, ${bad} mismatches\n`);
    return bad === 0 ? 0 : 1;
  } finally {
    await c.disconnect();
  }
}

async function checkHostCmd(v: Record<string, string | boolean | undefined>, io: CliIo): Promise<number> {
  const addr = typeof v['traddr'] === 'string' ? v['traddr'] : undefined;
  let qfile: StateFile | undefined;
  if (typeof v['queues-from'] === 'string') qfile = JSON.parse(await readFile(v['queues-from'], 'utf8')) as StateFile;
  const rep = await checkHost(addr ?? qfile?.controller.traddr, typeof v['host-iface'] === 'string' ? v['host-iface'] : undefined);
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

/** A held connection's control socket: one JSON request per connection ({ op: 'set-worker', qid, worker }). */
async function serveControl(c: Controller, sockPath: string, refresh: () => Promise<void>): Promise<net.Server> {
  await unlink(sockPath).catch(() => undefined);
  const server = net.createServer((sock) => {
    let buf = '';
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      const line = buf.slice(0, nl);
      void (async () => {
        let reply: unknown;
        try {
          const req = JSON.parse(line) as { op?: unknown; qid?: unknown; worker?: unknown };
          if (req.op !== 'set-worker' || typeof req.qid !== 'number' || typeof req.worker !== 'number') throw new UsageError('bad control request');
          await c.setQueueWorker(req.qid, req.worker);
          await refresh().catch(() => undefined);
          reply = { ok: true, queues: c.queueInfo() };
        } catch (e) {
          const err = e as Error & { code?: string };
          reply = { ok: false, message: err.message, code: err.code ?? (e instanceof UsageError ? 'USAGE' : undefined) };
        }
        sock.end(JSON.stringify(reply) + '\n');
      })();
    });
    sock.on('error', () => undefined);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(sockPath, () => resolve());
  });
  server.unref();
  return server;
}

/** `queues --set-worker QID=W [--pid PID]`: ask a held connection to place queue QID on io worker W (−1: default). */
async function setWorkerCmd(v: Record<string, string | boolean | undefined>, io: CliIo): Promise<number> {
  const m = /^(\d+)=(-1|\d+)$/.exec(String(v['set-worker']).trim());
  if (m === null) throw new UsageError(`--set-worker: expected QID=W (W a worker index or -1), got ${String(v['set-worker'])}`);
  const qid = Number(m[1]);
  const worker = Number(m[2]);
  const states = (await readStates()).filter((s) => s.control !== undefined);
  const pid = typeof v['pid'] === 'string' ? toNum('pid', v['pid']) : undefined;
  const chosen = pid === undefined ? states : states.filter((s) => s.pid === pid);
  if (chosen.length === 0) throw new UsageError(pid === undefined ? 'no held connections (nvme-tcp connect ... --hold)' : `no held connection with pid ${pid}`);
  if (chosen.length > 1) throw new UsageError(`${chosen.length} held connections (pids ${chosen.map((s) => s.pid).join(', ')}): choose one with --pid`);
  const st = chosen[0] as StateFile & { file: string };
  const reply = await new Promise<{ ok: boolean; message?: string; code?: string; queues?: QueueInfo[] }>((resolve, reject) => {
    const sock = net.connect(st.control as string);
    let buf = '';
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => (buf += d));
    sock.on('end', () => {
      try {
        resolve(JSON.parse(buf) as { ok: boolean; message?: string; code?: string; queues?: QueueInfo[] });
      } catch (e) {
        reject(e instanceof Error ? e : new Error(String(e)));
      }
    });
    sock.on('error', reject);
    sock.write(JSON.stringify({ op: 'set-worker', qid, worker }) + '\n');
  });
  if (!reply.ok) {
    io.stderr(`nvme-tcp queues: ${reply.message ?? 'failed'}${reply.code !== undefined ? ` [${reply.code}]` : ''}\n`);
    return reply.code === 'NVMEOF_ERR_INVALID_ARG' || reply.code === 'USAGE' ? 2 : 1;
  }
  io.stdout(`pid ${st.pid}: queue ${qid} placed on ${worker === -1 ? 'its default worker' : `worker ${worker}`}\n`);
  io.stdout(queueTable(reply.queues ?? []));
  return 0;
}

const USAGE = `usage:
  nvme-tcp discover -a ADDR [-s PORT] [-q HOSTNQN] [-I HOSTID] [-g] [-G]
  nvme-tcp connect -a ADDR -s PORT -n NQN [-i N] [-W N] [-P N] [-Q QSIZE] [-k KATO] [-g] [-G] [-D] [-q HOSTNQN] [-I HOSTID]
                   [-S DHCHAP_SECRET [-C DHCHAP_CTRL_SECRET]] [--tls --tls-key KEY|@FILE [--tls-identity-version 0|1]
                   [--tls-hkdf rfc8446|pre-2025]] [-S DHCHAP_SECRET --concat (secure channel concatenation)]
                   [--queues-per-hctx N] [--match-hw-queues] [--connect-concurrency N] [--hold]
  nvme-tcp io verify -a ADDR -s PORT -n NQN [--size 64M] [--bs 4k] [connect flags]
  nvme-tcp queues [--set-worker QID=W [--pid PID]]
  connect/io flags: [--io-workers N] [--io-worker-cpus 0,1] [--io-budget-us US]
  nvme-tcp check-host [-a ADDR] [-f IFACE] [--queues-from FILE]
  nvme-tcp resv-register -a ADDR -s PORT -n NQN [--namespace-id N] [--crkey K] [--nrkey K] [--rrega 0|1|2] [--iekey]
                   [--cptpl 0|2|3] [connect flags]
  nvme-tcp resv-acquire  ... [--namespace-id N] [--crkey K] [--prkey K] --rtype 1..6 [--racqa 0|1|2]
  nvme-tcp resv-release  ... [--namespace-id N] [--crkey K] [--rtype T] [--rrela 0|1]
  nvme-tcp resv-report   ... [--namespace-id N] [--numd N] [--eds] [--output-format json]
`;

/** A 64-bit key or small number as nvme-cli takes it: decimal or 0x-hex. */
function bigArg(flag: string, v: string | boolean | undefined, def: bigint): bigint {
  if (v === undefined || typeof v === 'boolean') return def;
  if (!/^(0x[0-9a-fA-F]{1,16}|\d{1,20})$/.test(v.trim())) throw new UsageError(`--${flag}: not a 64-bit number: ${v}; use decimal or 0x-hex`);
  const n = BigInt(v.trim());
  if (n > 0xffff_ffff_ffff_ffffn) throw new UsageError(`--${flag}: ${v} does not fit in 64 bits`);
  return n;
}

function smallArg(flag: string, v: string | boolean | undefined, def: number, max: number): number {
  if (v === undefined || typeof v === 'boolean') return def;
  const n = Number(bigArg(flag, v, 0n));
  if (n > max) throw new UsageError(`--${flag}: ${v} is above ${max}`);
  return n;
}

const RESV: Opts = { 'namespace-id': { type: 'string' }, iekey: { type: 'boolean' }, crkey: { type: 'string' } };

/** nvme resv-register|resv-acquire|resv-release|resv-report with nvme-cli's long flag names, over one connection. */
async function resvCmd(cmd: string, v: Record<string, string | boolean | undefined>, io: CliIo): Promise<number> {
  const nsid = smallArg('namespace-id', v['namespace-id'], 1, 0xfffffffe);
  if (nsid === 0) throw new UsageError('--namespace-id: 0 is not a namespace; use 1 or more');
  const iekey = v['iekey'] === true;
  const crkey = bigArg('crkey', v['crkey'], 0n);
  const c = await connect(connectOptions(v));
  try {
    const r = c.namespace(nsid).reservation;
    switch (cmd) {
      case 'resv-register':
        await r.register({ crkey, nrkey: bigArg('nrkey', v['nrkey'], 0n), rrega: smallArg('rrega', v['rrega'], 0, 7), iekey, cptpl: smallArg('cptpl', v['cptpl'], 0, 3) });
        io.stdout(`NVME Reservation  success\n`);
        return 0;
      case 'resv-acquire':
        await r.acquire({ crkey, prkey: bigArg('prkey', v['prkey'], 0n), rtype: smallArg('rtype', v['rtype'], 0, 255), racqa: smallArg('racqa', v['racqa'], 0, 7), iekey });
        io.stdout(`NVME Reservation Acquire success\n`);
        return 0;
      case 'resv-release':
        await r.release({ crkey, rtype: smallArg('rtype', v['rtype'], 0, 255), rrela: smallArg('rrela', v['rrela'], 0, 7), iekey });
        io.stdout(`NVME Reservation Release success\n`);
        return 0;
      default: {
        const numd = smallArg('numd', v['numd'], 1023, 65535);
        const rep = await r.report({ eds: v['eds'] === true, length: (numd + 1) * 4 });
        if (v['output-format'] === 'json') {
          io.stdout(`${JSON.stringify({ gen: rep.gen, rtype: rep.rtype, regctl: rep.regctlCount, ptpls: rep.ptpls ? 1 : 0, regctlext: rep.regctls.map((x) => ({ cntlid: x.cntlid, rcsts: x.holder ? 1 : 0, rkey: `0x${x.rkey.toString(16)}`, hostid: x.hostid.toString('hex') })) }, null, 2)}\n`);
          return 0;
        }
        const lines = ['NVME Reservation status:', '', `gen       : ${rep.gen}`, `rtype     : ${rep.rtype}`, `regctl    : ${rep.regctlCount}`, `ptpls     : ${rep.ptpls ? 1 : 0}`, ''];
        rep.regctls.forEach((x, i) => lines.push(`regctlext[${i}] :`, `  cntlid  : ${x.cntlid.toString(16)}`, `  rcsts   : ${x.holder ? 1 : 0}`, `  rkey    : ${x.rkey.toString(16)}`, `  hostid  : ${x.hostid.toString('hex')}`, ''));
        io.stdout(`${lines.join('\n')}\n`);
        return 0;
      }
    }
  } finally {
    await c.disconnect();
  }
}

/** Entry point used by cli/main.ts. Returns the exit status (2 for a bad flag). */
export async function runInitiatorCli(cmd: string, argv: string[], io: CliIo = defaultIo): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  let positionals: string[];
  const spec: Record<string, Opts> = {
    discover: CONN,
    connect: { ...CONN, hold: { type: 'boolean' } },
    io: { ...CONN, size: { type: 'string' }, bs: { type: 'string' } },
    queues: { 'set-worker': { type: 'string' }, pid: { type: 'string' } },
    'check-host': { traddr: { type: 'string', short: 'a' }, 'host-iface': { type: 'string', short: 'f' }, 'queues-from': { type: 'string' } },
    'resv-register': { ...CONN, ...RESV, nrkey: { type: 'string' }, rrega: { type: 'string' }, cptpl: { type: 'string' } },
    'resv-acquire': { ...CONN, ...RESV, prkey: { type: 'string' }, rtype: { type: 'string' }, racqa: { type: 'string' } },
    'resv-release': { ...CONN, ...RESV, rtype: { type: 'string' }, rrela: { type: 'string' } },
    'resv-report': { ...CONN, 'namespace-id': { type: 'string' }, numd: { type: 'string' }, eds: { type: 'boolean' }, 'output-format': { type: 'string' } },
  };
  const options = spec[cmd];
  if (options === undefined) {
    io.stderr(`nvme-tcp: unknown command ${cmd}\n${USAGE}`);
    return 2;
  }
  try {
    const parsed = parseArgs({ args: argv, options, strict: true, allowPositionals: cmd === 'io' });
    values = parsed.values as Record<string, string | boolean | undefined>;
    positionals = parsed.positionals;
  } catch (e) {
    io.stderr(`nvme-tcp ${cmd}: ${(e as Error).message.split('\n')[0]}\n`);
    return 2;
  }
  try {
    switch (cmd) {
      case 'discover': {
        const { nqn: _n, ...o } = connectOptions(values);
        const entries = await discover(o);
        io.stdout(`Discovery Log Number of Records ${entries.length}\n`);
        entries.forEach((e, i) => {
          const sub = ({ 1: 'referral', 2: 'nvme subsystem', 3: 'current discovery subsystem' } as Record<number, string>)[e.subtype] ?? `unknown (${e.subtype})`;
          io.stdout(`=====Discovery Log Entry ${i}======\ntrtype:  ${e.trtype === 3 ? 'tcp' : e.trtype}\nadrfam:  ${e.adrfam === 1 ? 'ipv4' : e.adrfam === 2 ? 'ipv6' : e.adrfam}\nsubtype: ${sub}\ntreq:    ${e.treq}\nportid:  ${e.portid}\ntrsvcid: ${e.trsvcid}\nsubnqn:  ${e.subnqn}\ntraddr:  ${e.traddr}\n`);
        });
        return 0;
      }
      case 'connect': {
        const c = await connect(connectOptions(values));
        io.stdout(describeController(c));
        io.stdout(queueTable(c.queueInfo()));
        if (values['hold'] !== true) {
          await c.disconnect();
          return 0;
        }
        await mkdir(stateDir(), { recursive: true });
        const file = path.join(stateDir(), `held-${process.pid}.json`);
        const control = path.join(stateDir(), `held-${process.pid}.sock`);
        const server = await serveControl(c, control, () => writeState(c, file, control));
        await writeState(c, file, control);
        io.stdout(`holding the connection (state in ${file}); Ctrl-C disconnects\n`);
        const timer = setInterval(() => void writeState(c, file, control).catch(() => undefined), 1000);
        await new Promise<void>((resolve) => {
          const stop = (): void => resolve();
          process.once('SIGINT', stop);
          process.once('SIGTERM', stop);
          c.once('lost', stop);
        });
        clearInterval(timer);
        server.close();
        await c.disconnect();
        await unlink(file).catch(() => undefined);
        await unlink(control).catch(() => undefined);
        return 0;
      }
      case 'io': {
        if (positionals[0] !== 'verify') {
          io.stderr(`nvme-tcp io: unknown subcommand ${positionals[0] ?? '(none)'}; use "io verify"\n`);
          return 2;
        }
        return await ioVerify(values, io);
      }
      case 'queues': {
        if (typeof values['set-worker'] === 'string') return await setWorkerCmd(values, io);
        const states = await readStates();
        if (states.length === 0) {
          io.stdout(`no held connections (start one with "nvme-tcp connect ... --hold"; state files live in ${stateDir()})\n`);
          return 0;
        }
        for (const st of states) {
          io.stdout(`pid ${st.pid} controller ${st.controller.cntlid} ${st.controller.subnqn} at ${st.controller.traddr}:${st.controller.trsvcid} (updated ${st.updated}, ${st.file})\n`);
          io.stdout(queueTable(st.queues));
        }
        return 0;
      }
      case 'check-host':
        return await checkHostCmd(values, io);
      case 'resv-register':
      case 'resv-acquire':
      case 'resv-release':
      case 'resv-report':
        return await resvCmd(cmd, values, io);
      default:
        return 2;
    }
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr(`nvme-tcp ${cmd}: ${e.message}\n`);
      return 2;
    }
    const err = e as Error & { code?: string; field?: string };
    io.stderr(`nvme-tcp ${cmd}: ${err.message}${err.code !== undefined ? ` [${err.code}]` : ''}\n`);
    return err.code === 'NVMEOF_ERR_INVALID_ARG' ? 2 : 1;
  }
}
