// `nvme-tcp discover|connect|connect-all|disconnect|disconnect-all|list-subsys|io|queues|check-host|resv-*`: the
// initiator's CLI with nvme-cli's flag names and short letters. Called by cli/main.ts.
import { Buffer } from 'node:buffer';
import { readFileSync } from 'node:fs';
import { mkdir, unlink } from 'node:fs/promises';
import path from 'node:path';
import { Option, type Command } from 'commander';
import { connect, connectAll, discover, type ConnectOptions, type Controller, type DiscoveryEntry } from '../initiator/index.js';
import { DiscSubtype } from '../protocol/index.js';
import { addrArg, defaultIo, durationArg, intArg, table, newCommand, nqnArg, outputFormatOption, parseFailure, portArg, sizeArg, UsageError, type CliIo } from './args.js';
import { checkHostCmd, type CheckHostOpts } from './check-host.js';
import { controlRequest, queueTable, readStates, serveControl, stateDir, writeState, type StateFile } from './held.js';
import { etcNvmeDir, identityFile, resolveHostIdentity, sharedHostIdWarning, type HostIdentity } from './host-identity.js';
import { addResvOptions, RESV_SHORT, runResv, type ResvOpts, type ResvVerb } from './resv.js';
import { INITIATOR_VERBS } from './verbs.js';

export type { CliIo } from './args.js';

type Kind = 'str' | 'int' | 'port' | 'nqn' | 'bool' | 'cpus' | 'key' | 'secs' | 'whole-secs';

/** One row per connect flag: commander flags, ConnectOptions key, kind, help. Short letters follow nvme-cli. */
const CONN_FLAGS: readonly (readonly [string, string, Kind, string])[] = [
  ['-a, --traddr <addr>', 'traddr', 'str', 'target address'],
  ['-s, --trsvcid <port>', 'trsvcid', 'port', 'target port (default 4420; 8009 for discovery)'],
  ['-n, --nqn <nqn>', 'nqn', 'nqn', 'subsystem NQN'],
  ['-q, --hostnqn <nqn>', 'hostnqn', 'nqn', 'host NQN (default /etc/nvme/hostnqn, else one kept per user)'],
  ['-I, --hostid <uuid>', 'hostid', 'str', 'host ID (default /etc/nvme/hostid, else one kept per user)'],
  ['-w, --host-traddr <addr>', 'host_traddr', 'str', 'source address'],
  ['-f, --host-iface <iface>', 'host_iface', 'str', 'source interface'],
  ['-i, --nr-io-queues <n>', 'nr_io_queues', 'int', 'I/O queues (default: one per CPU)'],
  ['-W, --nr-write-queues <n>', 'nr_write_queues', 'int', 'extra queues for writes'],
  ['-P, --nr-poll-queues <n>', 'nr_poll_queues', 'int', 'polled queues'],
  ['-Q, --queue-size <n>', 'queue_size', 'int', 'I/O queue depth (default 128)'],
  ['-k, --keep-alive-tmo <s>', 'keep_alive_tmo', 'whole-secs', 'keep-alive timeout, seconds (or 5s, 2m)'],
  ['-c, --reconnect-delay <s>', 'reconnect_delay', 'secs', 'seconds between reconnect attempts (or 500ms, 2s)'],
  ['-l, --ctrl-loss-tmo <s>', 'ctrl_loss_tmo', 'secs', 'seconds before giving up reconnecting (-1: never)'],
  ['-F, --fast-io-fail-tmo <s>', 'fast_io_fail_tmo', 'secs', 'seconds before failing I/O while reconnecting'],
  ['-T, --tos <tos>', 'tos', 'int', 'IP type of service'],
  ['-g, --hdr-digest', 'hdr_digest', 'bool', 'header digest'],
  ['-G, --data-digest', 'data_digest', 'bool', 'data digest'],
  ['-D, --duplicate-connect', 'duplicate_connect', 'bool', 'allow a second controller to the same subsystem'],
  ['--disable-sqflow', 'disable_sqflow', 'bool', 'ask for SQ flow control to be off'],
  ['--queues-per-hctx <n>', 'queues_per_hctx', 'int', 'transport queues per hctx'],
  ['--match-hw-queues', 'match_hw_queues', 'bool', "one hctx per NIC queue of the route's interface"],
  ['--connect-concurrency <n>', 'connect_concurrency', 'int', 'I/O queues connected at once'],
  ['--io-timeout <s>', 'io_timeout', 'secs', 'I/O command timeout, seconds (or 500ms)'],
  ['--admin-timeout <s>', 'admin_timeout', 'secs', 'admin command timeout, seconds (or 2m)'],
  ['-S, --dhchap-secret <secret>', 'dhchap_secret', 'str', 'DH-HMAC-CHAP host key'],
  ['-C, --dhchap-ctrl-secret <secret>', 'dhchap_ctrl_secret', 'str', 'DH-HMAC-CHAP controller key (bidirectional)'],
  ['--tls', 'tls', 'bool', 'TLS 1.3 with a PSK'],
  ['--tls-key <key>', 'tls_key', 'key', 'configured PSK, or @FILE'],
  ['--tls-identity-version <n>', 'tls_identity_version', 'int', 'PSK identity version 0|1'],
  ['--tls-hkdf <kind>', 'tls_hkdf', 'str', 'rfc8446|pre-2025'],
  ['--concat', 'concat', 'bool', 'secure channel concatenation (with -S)'],
  ['--io-workers <n>', 'io_workers', 'int', 'run I/O queues in N worker threads'],
  ['--io-worker-cpus <list>', 'io_worker_cpus', 'cpus', 'pin io worker i to CPU list[i mod len], e.g. 0,1'],
  ['--io-budget-us <us>', 'io_budget_us', 'int', 'io worker submission budget'],
];

/**
 * The connect flags a discovery controller uses (admin queue only, one log read: NVMe-oF 1.1 §5.3): where, who, the
 * admin queue's digests, keep-alive and timeout, authentication and TLS. Queue counts, reconnect timers and io workers
 * have nothing to act on there, so `discover` does not offer them.
 */
const DISCOVER_KEYS: readonly string[] = ['traddr', 'trsvcid', 'hostnqn', 'hostid', 'host_traddr', 'host_iface', 'keep_alive_tmo', 'tos', 'hdr_digest', 'data_digest', 'admin_timeout', 'dhchap_secret', 'dhchap_ctrl_secret', 'tls', 'tls_key', 'tls_identity_version', 'tls_hkdf'];

/** "0,1,4" → [0, 1, 4] (--io-worker-cpus). */
export function parseCpuList(flag: string, v: string): number[] {
  const out = v.split(',').map((x) => x.trim());
  if (out.some((x) => !/^\d+$/.test(x))) throw new UsageError(`--${flag} ${v}: not a list of CPU numbers; use e.g. 0,1`);
  return out.map(Number);
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

function parserFor(kind: Kind, flag: string): ((v: string) => unknown) | undefined {
  switch (kind) {
    case 'int':
      // Ranges are resolveOptions' (its message names the option); here only "is it an integer".
      return (v) => intArg(flag, v, -(2 ** 31), 2 ** 31);
    case 'secs':
    case 'whole-secs':
      // Seconds, as the library takes them (fractions where it allows them: all but KATO); the range is
      // resolveOptions'. "5s", "500ms", "2m" as well as a plain number.
      return (v) => durationArg(flag, v, 's', -(2 ** 31), 2 ** 31, kind === 'whole-secs');
    case 'port':
      return (v) => portArg(flag, v);
    case 'nqn':
      return (v) => nqnArg(flag, v);
    case 'cpus':
      return (v) => parseCpuList(flag, v);
    case 'key':
      return (v) => readKeyArg(flag, v);
    default:
      return undefined;
  }
}

/** "-a, --traddr <addr>" without its short letter when `longOnly` has it. */
function flagsWithout(flags: string, longOnly: readonly string[]): string {
  const m = /^-(\w), (.*)$/.exec(flags);
  return m !== null && longOnly.includes(m[1] ?? '') ? (m[2] ?? flags) : flags;
}

/** Adds the connect flags (all but `skip`; those lettered in `longOnly` by their long name only) and -t/-o to `c`. */
function addConnOptions(c: Command, skip: readonly string[] = [], longOnly: readonly string[] = []): Command {
  c.addOption(new Option(flagsWithout('-t, --transport <trtype>', longOnly), 'transport').choices(['tcp']).default('tcp'));
  for (const [flags, key, kind, help] of CONN_FLAGS) {
    if (skip.includes(key)) continue;
    const o = new Option(flagsWithout(flags, longOnly), help);
    const p = parserFor(kind, o.long?.slice(2) ?? key);
    if (p !== undefined) o.argParser(p);
    c.addOption(o);
  }
  return c.addOption(outputFormatOption());
}

/** The flag of a ConnectOptions key as the user typed it ("keep_alive_tmo" → "-k/--keep-alive-tmo"); the library's
 * range checks name the key. */
function flagOf(key: string, longOnly: readonly string[]): string | undefined {
  const row = CONN_FLAGS.find((r) => r[1] === key);
  return row === undefined ? undefined : flagsWithout(row[0], longOnly).replace(/\s*<.*$/, '').replace(', ', '/');
}

/**
 * commander's values → ConnectOptions, with the host identity nvme-cli would use; warns on stderr when -q shares the
 * hostid file's host ID (sharedHostIdWarning).
 */
function hostConnect(verb: string, v: Record<string, unknown>, io: CliIo): { opts: ConnectOptions; id: HostIdentity } {
  const o: Record<string, unknown> = {};
  for (const [flags, key] of CONN_FLAGS) {
    const attr = new Option(flags).attributeName();
    if (v[attr] !== undefined) o[key] = v[attr];
  }
  if (o['traddr'] === undefined) throw new UsageError(`${verb.startsWith('resv-') ? '--traddr' : '-a/--traddr'} is required; use e.g. ${verb.startsWith('resv-') ? '--traddr' : '-a'} 127.0.0.1`);
  const flags = { hostnqn: o['hostnqn'] as string | undefined, hostid: o['hostid'] as string | undefined };
  const id = resolveHostIdentity(flags);
  const warning = sharedHostIdWarning(flags, id);
  if (warning !== undefined) io.stderr(`nvme-tcp ${verb}: ${warning}\n`);
  o['hostnqn'] = id.hostnqn;
  o['hostid'] = id.hostid;
  return { opts: o as unknown as ConnectOptions, id };
}

function connectOptions(verb: string, v: Record<string, unknown>, io: CliIo): ConnectOptions {
  return hostConnect(verb, v, io).opts;
}

type Fmt = { outputFormat: 'normal' | 'json' };

function controllerFacts(c: Controller) {
  const id = c.identify;
  return {
    cntlid: c.cntlid,
    subnqn: c.opts.nqn,
    traddr: c.opts.traddr,
    trsvcid: c.opts.trsvcid,
    state: c.state,
    model: id.mn,
    serial: id.sn,
    firmware: id.fr,
    version: `${c.vs >>> 16}.${(c.vs >>> 8) & 0xff}.${c.vs & 0xff}`,
    mdts: id.mdts,
    maxcmd: id.maxcmd,
    ioccsz: id.ioccsz,
    kas: id.kas,
    hostnqn: c.opts.hostnqn,
    hostid: c.opts.hostid,
    ioQueues: c.ioQueueCount,
    grantedQueues: c.grantedQueues,
    hctxs: c.hctxs().length,
    namespaces: c.namespaces.map((n) => ({ nsid: n.nsid, blocks: Number(n.blocks), blockSize: n.blockSize, sizeBytes: Number(n.sizeBytes), nguid: n.info.nguid, uuid: n.info.uuid, anaState: n.anaState })),
    queues: c.queueInfo(),
  };
}

function describeController(c: Controller): string {
  const f = controllerFacts(c);
  const ns = f.namespaces.map((n) => `  nsid ${n.nsid}: ${n.blocks} × ${n.blockSize} B (${n.sizeBytes / 2 ** 20} MiB) nguid ${n.nguid || '-'} uuid ${n.uuid || '-'} ana ${n.anaState}`);
  return [
    `controller ${f.cntlid} subsystem ${f.subnqn} at ${f.traddr}:${f.trsvcid} state ${f.state}`,
    `  model "${f.model}" serial "${f.serial}" firmware "${f.firmware}" NVMe ${f.version} mdts ${f.mdts} maxcmd ${f.maxcmd} ioccsz ${f.ioccsz} kas ${f.kas}`,
    `  hostnqn ${f.hostnqn} hostid ${f.hostid}`,
    `  I/O queues ${f.ioQueues} (granted ${f.grantedQueues}) in ${f.hctxs} hctx(s)`,
    ...ns,
  ].join('\n') + '\n' + queueTable(f.queues);
}

function printController(c: Controller, o: Fmt, io: CliIo): void {
  io.stdout(o.outputFormat === 'json' ? `${JSON.stringify(controllerFacts(c), null, 2)}\n` : describeController(c));
}

// ---------------------------------------------------------------------------------------------- discover

const SUBTYPES: Record<number, string> = { 1: 'referral', 2: 'nvme subsystem', 3: 'current discovery subsystem' };

function printDiscovery(entries: readonly DiscoveryEntry[], o: Fmt, io: CliIo): void {
  const rows = entries.map((e) => ({
    trtype: e.trtype === 3 ? 'tcp' : String(e.trtype),
    adrfam: e.adrfam === 1 ? 'ipv4' : e.adrfam === 2 ? 'ipv6' : String(e.adrfam),
    subtype: SUBTYPES[e.subtype] ?? `unknown (${e.subtype})`,
    treq: e.treq,
    portid: e.portid,
    trsvcid: e.trsvcid,
    subnqn: e.subnqn,
    traddr: e.traddr,
  }));
  if (o.outputFormat === 'json') {
    io.stdout(`${JSON.stringify({ records: rows }, null, 2)}\n`);
    return;
  }
  io.stdout(`Discovery Log Number of Records ${rows.length}\n`);
  rows.forEach((e, i) => {
    io.stdout(`=====Discovery Log Entry ${i}======\ntrtype:  ${e.trtype}\nadrfam:  ${e.adrfam}\nsubtype: ${e.subtype}\ntreq:    ${e.treq}\nportid:  ${e.portid}\ntrsvcid: ${e.trsvcid}\nsubnqn:  ${e.subnqn}\ntraddr:  ${e.traddr}\n`);
  });
}

async function discoverCmd(v: Record<string, unknown> & Fmt, io: CliIo): Promise<number> {
  printDiscovery(await discover(connectOptions('discover', v, io)), v, io);
  return 0;
}

/**
 * `connect-all`: every NVM subsystem entry of the log, each at the address the entry gives, and the referrals'
 * entries (the library's connectAll, NVMe-oF 1.1 §5.3). A referral or entry that fails is one line on stderr and exit
 * 1, as nvme-cli's connect-all returns non-zero when a connect fails. With --hold the controllers stay connected, as
 * nvme-cli's connect-all keeps its controllers, each with its own state file and control socket, so `list` shows them
 * and `disconnect`/`disconnect-all` end them.
 */
async function connectAllCmd(v: Record<string, unknown> & Fmt & { hold?: boolean }, io: CliIo): Promise<number> {
  const { controllers, errors } = await connectAll(connectOptions('connect-all', v, io));
  const results: unknown[] = [];
  const held: Held[] = [];
  for (const c of controllers) {
    if (v.outputFormat === 'json') results.push(controllerFacts(c));
    else io.stdout(describeController(c));
    if (v.hold === true) held.push(await holdController(c, `held-${process.pid}-${held.length + 1}`));
    else await c.disconnect();
  }
  for (const { entry: e, error } of errors) {
    const code = (error as Error & { code?: string }).code;
    const what = e.subtype === DiscSubtype.REFERRAL ? 'referral to discovery controller' : e.subnqn;
    if (v.outputFormat === 'json') results.push({ subtype: e.subtype === DiscSubtype.REFERRAL ? 'referral' : 'nvme subsystem', subnqn: e.subnqn, traddr: e.traddr, trsvcid: e.trsvcid, error: error.message, code });
    else io.stderr(`nvme-tcp connect-all: ${what} at ${e.traddr}:${e.trsvcid}: ${error.message}${code !== undefined ? ` [${code}]` : ''}\n`);
  }
  if (v.outputFormat === 'json') io.stdout(`${JSON.stringify(results, null, 2)}\n`);
  else if (controllers.length === 0 && errors.length === 0) io.stdout('no NVM subsystems in the discovery log\n');
  if (held.length > 0) {
    if (v.outputFormat !== 'json') io.stdout(`holding ${held.length} connection(s) (state in ${stateDir()}); Ctrl-C or "nvme-tcp disconnect-all" disconnects\n`);
    await holdUntilDone(held);
  }
  return errors.length === 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------- connect --hold

/** A held controller: its state file, and what ends the hold (`done` resolves once it is disconnected and cleaned up). */
interface Held {
  file: string;
  stop: () => void;
  done: Promise<void>;
}

/**
 * Holds `c` with a state file and a control socket named `name` in stateDir(): until a "disconnect" request arrives
 * there, stop() is called or the controller is lost.
 */
async function holdController(c: Controller, name: string): Promise<Held> {
  await mkdir(stateDir(), { recursive: true });
  const file = path.join(stateDir(), `${name}.json`);
  const control = path.join(stateDir(), `${name}.sock`);
  let stop: () => void = () => undefined;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  const server = await serveControl(c, control, () => writeState(c, file, control), () => stop());
  await writeState(c, file, control);
  const timer = setInterval(() => void writeState(c, file, control).catch(() => undefined), 1000);
  c.once('lost', stop);
  const done = stopped.then(async () => {
    clearInterval(timer);
    server.close();
    // A file gone first: `list` never shows a controller that is already disconnecting.
    for (const f of [file, control]) await unlink(f).catch(() => undefined);
    await c.disconnect();
  });
  return { file, stop, done };
}

/** Waits until every held controller is disconnected; SIGINT/SIGTERM end them all. */
async function holdUntilDone(held: readonly Held[]): Promise<void> {
  const stopAll = (): void => {
    for (const h of held) h.stop();
  };
  process.once('SIGINT', stopAll);
  process.once('SIGTERM', stopAll);
  try {
    await Promise.all(held.map((h) => h.done));
  } finally {
    process.off('SIGINT', stopAll);
    process.off('SIGTERM', stopAll);
  }
}

async function connectCmd(v: Record<string, unknown> & Fmt & { hold?: boolean }, io: CliIo): Promise<number> {
  const c = await connect(connectOptions('connect', v, io));
  printController(c, v, io);
  if (v.hold !== true) {
    await c.disconnect();
    return 0;
  }
  const held = await holdController(c, `held-${process.pid}`);
  if (v.outputFormat !== 'json') io.stdout(`holding the connection (state in ${held.file}); Ctrl-C or "nvme-tcp disconnect" disconnects\n`);
  await holdUntilDone([held]);
  return 0;
}

function heldFacts(st: StateFile) {
  return { pid: st.pid, ...st.controller, queues: st.queues.length, updated: st.updated, stateFile: (st as StateFile & { file?: string }).file };
}

async function listSubsysCmd(v: Fmt, io: CliIo): Promise<number> {
  const states = await readStates();
  if (v.outputFormat === 'json') {
    io.stdout(`${JSON.stringify(states.map(heldFacts), null, 2)}\n`);
    return 0;
  }
  if (states.length === 0) {
    io.stdout('no held connections (start one with "nvme-tcp connect ... --hold")\n');
    return 0;
  }
  const rows = states.map((s) => [String(s.pid), s.controller.subnqn, `tcp traddr=${s.controller.traddr},trsvcid=${s.controller.trsvcid}`, String(s.controller.cntlid), s.controller.hostnqn ?? '-', String(s.queues.length)]);
  io.stdout(table(['pid', 'subnqn', 'address', 'cntlid', 'hostnqn', 'queues'], rows));
  return 0;
}

async function disconnectCmd(v: Fmt & { nqn?: string; pid?: number; all?: boolean }, io: CliIo): Promise<number> {
  const states = (await readStates()).filter((s) => s.control !== undefined);
  const chosen = v.all === true ? states : states.filter((s) => (v.nqn === undefined || s.controller.subnqn === v.nqn) && (v.pid === undefined || s.pid === v.pid));
  if (v.all !== true && v.nqn === undefined && v.pid === undefined) throw new UsageError('say which: -n NQN or --pid PID (or use disconnect-all)');
  const done: number[] = [];
  const failed: string[] = [];
  for (const st of chosen) {
    const r = await controlRequest(st, { op: 'disconnect' });
    if (r.ok) done.push(st.pid);
    else failed.push(`pid ${st.pid}: ${r.message ?? 'no answer on its control socket'}`);
  }
  if (v.outputFormat === 'json') io.stdout(`${JSON.stringify({ disconnected: done.length, pids: done })}\n`);
  else io.stdout(`disconnected ${done.length} controller(s)${done.length > 0 ? ` (pids ${done.join(', ')})` : ''}\n`);
  if (v.all === true || done.length > 0) return 0;
  // As nvme-cli says which NQN or device it found nothing for.
  const which = [v.nqn !== undefined ? `-n ${v.nqn}` : '', v.pid !== undefined ? `--pid ${v.pid}` : ''].filter(Boolean).join(' ');
  io.stderr(`nvme-tcp disconnect: ${failed.length > 0 ? failed.join('; ') : `no held connection matches ${which} (${states.length} held; "nvme-tcp list" shows them)`}\n`);
  return 1;
}

async function queuesCmd(v: Fmt & { setWorker?: string; pid?: number }, io: CliIo): Promise<number> {
  if (v.setWorker !== undefined) return setWorkerCmd(v.setWorker, v.pid, v, io);
  const states = await readStates();
  if (v.outputFormat === 'json') {
    io.stdout(`${JSON.stringify(states.map((s) => ({ pid: s.pid, controller: s.controller, updated: s.updated, queues: s.queues })), null, 2)}\n`);
    return 0;
  }
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

/** `queues --set-worker QID=W [--pid PID]`: ask a held connection to place queue QID on io worker W (−1: default). */
async function setWorkerCmd(spec: string, pid: number | undefined, o: Fmt, io: CliIo): Promise<number> {
  const m = /^(\d+)=(-1|\d+)$/.exec(spec.trim());
  if (m === null) throw new UsageError(`--set-worker ${spec}: expected QID=W (W a worker index or -1)`);
  const qid = Number(m[1]);
  const worker = Number(m[2]);
  const states = (await readStates()).filter((s) => s.control !== undefined);
  const chosen = pid === undefined ? states : states.filter((s) => s.pid === pid);
  if (chosen.length === 0) throw new UsageError(pid === undefined ? 'no held connections (nvme-tcp connect ... --hold)' : `no held connection with pid ${pid}`);
  if (chosen.length > 1) throw new UsageError(`${chosen.length} held connections (pids ${chosen.map((s) => s.pid).join(', ')}): choose one with --pid`);
  const st = chosen[0] as StateFile;
  const reply = await controlRequest(st, { op: 'set-worker', qid, worker });
  if (!reply.ok) {
    io.stderr(`nvme-tcp queues: ${reply.message ?? 'failed'}${reply.code !== undefined ? ` [${reply.code}]` : ''}\n`);
    return reply.code === 'NVMEOF_ERR_INVALID_ARG' || reply.code === 'USAGE' ? 2 : 1;
  }
  if (o.outputFormat === 'json') {
    io.stdout(`${JSON.stringify({ pid: st.pid, qid, worker, queues: reply.queues ?? [] }, null, 2)}\n`);
    return 0;
  }
  io.stdout(`pid ${st.pid}: queue ${qid} placed on ${worker === -1 ? 'its default worker' : `worker ${worker}`}\n`);
  io.stdout(queueTable(reply.queues ?? []));
  return 0;
}

// ---------------------------------------------------------------------------------------------- io verify

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

/** Writes `count` stamped blocks of `bs` bytes, 32 at a time, spread over the hctxs; resolves to the milliseconds. */
async function writePass(c: Controller, count: number, bs: number, seed: number): Promise<number> {
  const ns = c.namespaces[0] as Controller['namespaces'][number];
  const per = bs / ns.blockSize;
  const hctxs = Math.max(1, c.hctxs().length);
  const t0 = Date.now();
  for (let i = 0; i < count; i += 32) {
    await Promise.all(
      Array.from({ length: Math.min(32, count - i) }, (_, k) => {
        const buf = Buffer.allocUnsafe(bs);
        stamp(buf, (i + k) * per, ns.blockSize, seed);
        return ns.write((i + k) * per, buf, { hctx: (i + k) % hctxs });
      }),
    );
  }
  return Date.now() - t0;
}

/** Reads them back and compares; resolves to the mismatching LBAs. */
async function readPass(c: Controller, count: number, bs: number, seed: number): Promise<number[]> {
  const ns = c.namespaces[0] as Controller['namespaces'][number];
  const per = bs / ns.blockSize;
  const hctxs = Math.max(1, c.hctxs().length);
  const bad: number[] = [];
  const expect = Buffer.allocUnsafe(bs);
  for (let i = 0; i < count; i += 32) {
    const reads = await Promise.all(Array.from({ length: Math.min(32, count - i) }, (_, k) => ns.read((i + k) * per, per, undefined, { hctx: (i + k) % hctxs })));
    reads.forEach((got, k) => {
      stamp(expect, (i + k) * per, ns.blockSize, seed);
      if (!got.equals(expect)) bad.push((i + k) * per);
    });
  }
  return bad;
}

/** A size flag's bytes with the text given, so a message quotes what the user typed. */
type SizeValue = { text: string; bytes: number };

/** --NAME <size> with default `text`, which --help shows as written (not the parsed object). */
function sizeOption(name: string, help: string, text: string): Option {
  const parse = (x: string): SizeValue => ({ text: x, bytes: sizeArg(name, x) });
  return new Option(`--${name} <size>`, help).argParser(parse).default(parse(text), text);
}

async function ioVerify(opts: Record<string, unknown> & Fmt & { size: SizeValue; bs: SizeValue }, io: CliIo): Promise<number> {
  const v = { ...opts, size: opts.size.bytes, bs: opts.bs.bytes };
  const c = await connect(connectOptions('io', v, io));
  try {
    const ns = c.namespaces[0];
    if (ns === undefined) throw new UsageError('the subsystem has no namespace');
    if (v.bs % ns.blockSize !== 0) throw new UsageError(`--bs ${opts.bs.text}: not a multiple of the ${ns.blockSize}-byte block size`);
    if (v.size > Number(ns.sizeBytes)) throw new UsageError(`--size ${opts.size.text}: larger than namespace ${ns.nsid} (${Number(ns.sizeBytes)} bytes); use at most that`);
    const seed = (Date.now() & 0x7fffffff) >>> 0;
    const count = Math.floor(v.size / v.bs);
    const wMs = await writePass(c, count, v.bs, seed);
    const t1 = Date.now();
    const bad = await readPass(c, count, v.bs, seed);
    const rMs = Date.now() - t1;
    const mib = (count * v.bs) / 2 ** 20;
    const rate = (ms: number): number => mib / Math.max(0.001, ms / 1000);
    if (v.outputFormat === 'json') {
      io.stdout(`${JSON.stringify({ nsid: ns.nsid, blocks: count, bs: v.bs, bytes: count * v.bs, writeMiBps: rate(wMs), readMiBps: rate(rMs), mismatches: bad.length, mismatchLbas: bad.slice(0, 10) }, null, 2)}\n`);
    } else {
      for (const lba of bad.slice(0, 10)) io.stdout(`mismatch at lba ${lba} (${v.bs} bytes)\n`);
      io.stdout(`verified ${count} × ${v.bs} B (${mib.toFixed(1)} MiB) on nsid ${ns.nsid}: write ${rate(wMs).toFixed(1)} MiB/s, read ${rate(rMs).toFixed(1)} MiB/s, ${bad.length} mismatches\n`);
    }
    return bad.length === 0 ? 0 : 1;
  } finally {
    await c.disconnect();
  }
}

// ---------------------------------------------------------------------------------------------- the verbs

type Run = (v: Record<string, unknown>, args: string[], io: CliIo) => Promise<number>;

/** Builds the verb's command: its flags, and what runs it. */
function defineVerb(verb: string, io: CliIo): { cmd: Command; run: Run } {
  const cmd = newCommand(`nvme-tcp ${verb}`, io, INITIATOR_VERBS[verb]);
  const fmt = (): Command => cmd.addOption(outputFormatOption());
  switch (verb) {
    case 'discover':
      addConnOptions(cmd, CONN_FLAGS.map((r) => r[1]).filter((k) => !DISCOVER_KEYS.includes(k)));
      return { cmd, run: (v) => discoverCmd(v as Record<string, unknown> & Fmt, io) };
    case 'connect-all':
      addConnOptions(cmd, ['nqn']).option('--hold', 'keep the controllers until Ctrl-C or "nvme-tcp disconnect-all"');
      return { cmd, run: (v) => connectAllCmd(v as Record<string, unknown> & Fmt, io) };
    case 'connect':
      addConnOptions(cmd).option('--hold', 'keep the connection until Ctrl-C or "nvme-tcp disconnect"');
      return { cmd, run: (v) => connectCmd(v as Record<string, unknown> & Fmt, io) };
    case 'disconnect':
      fmt()
        .option('-n, --nqn <nqn>', 'the subsystem whose held connections to disconnect', (x) => nqnArg('nqn', x))
        .option('--pid <pid>', 'the holding process', (x) => intArg('pid', x, 1));
      return { cmd, run: (v) => disconnectCmd(v as Fmt, io) };
    case 'disconnect-all':
      fmt();
      return { cmd, run: (v) => disconnectCmd({ ...(v as Fmt), all: true }, io) };
    case 'list-subsys':
      fmt();
      return { cmd, run: (v) => listSubsysCmd(v as Fmt, io) };
    case 'io':
      addConnOptions(cmd)
        .argument('<action>', 'verify: write a stamped pattern, read it back, compare')
        .addOption(sizeOption('size', 'bytes to write and verify (64M, 1.5G; at most the namespace)', '64M'))
        .addOption(sizeOption('bs', 'block size per I/O', '4096'));
      return {
        cmd,
        run: (v, args) => {
          if (args[0] !== 'verify') throw new UsageError(`unknown action ${JSON.stringify(args[0])}; use "io verify"`);
          return ioVerify(v as Record<string, unknown> & Fmt & { size: SizeValue; bs: SizeValue }, io);
        },
      };
    case 'queues':
      fmt()
        .option('--set-worker <qid=w>', 'place queue QID on io worker W (-1: its default)')
        .option('--pid <pid>', 'the holding process, when several hold connections', (x) => intArg('pid', x, 1));
      return { cmd, run: (v) => queuesCmd(v as Fmt, io) };
    case 'check-host':
      fmt()
        .option('-a, --traddr <addr>', 'the target address whose route to check', (x) => addrArg('traddr', x))
        .option('-f, --host-iface <iface>', 'the interface to check')
        .option('--queues-from <file>', 'a held connection state file: print steering advice for its queues');
      return { cmd, run: (v) => checkHostCmd(v as unknown as CheckHostOpts, io) };
    default: {
      const rv = verb as ResvVerb;
      addConnOptions(cmd, [], RESV_SHORT);
      addResvOptions(cmd, rv);
      return {
        cmd,
        run: async (v) => {
          const { opts, id } = hostConnect(rv, v, io);
          const c = await connect(opts);
          try {
            return await runResv(rv, c, v as unknown as ResvOpts, io, id);
          } finally {
            await c.disconnect();
          }
        },
      };
    }
  }
}

/** Where the host NQN came from (HostIdentity.source): -q, a file read, the kept identity, or made from the host ID. */
function hostnqnSource(id: HostIdentity): string {
  const from = id.source.hostnqn;
  if (from === 'flag') return 'given with -q';
  if (from === 'generated') return `made from host ID ${id.hostid}, as no ${etcNvmeDir()}/hostnqn exists`;
  if (from === identityFile()) return `this user's identity kept in ${from}, as no ${etcNvmeDir()}/hostnqn exists`;
  return `read from ${from}`;
}

/** Why a Connect failed, with the fix where the status says what it is (NVMe-oF 1.1 §3.3 Connect response). */
function failureLine(verb: string, err: Error & { code?: string }, v: Record<string, unknown>): string {
  let hint = '';
  if (/CONNECT_INVALID_PARAM/.test(err.message)) {
    const where = `-a ${String(v['traddr'] ?? 'ADDR')}${v['trsvcid'] !== undefined ? ` -s ${String(v['trsvcid'])}` : ''}`;
    hint = `; the target has no subsystem ${JSON.stringify(v['nqn'] ?? '')} (or this host may not use it): "nvme-tcp discover ${where}" lists what it serves`;
  } else if (/CONNECT_INVALID_HOST/.test(err.message)) {
    // The NQN the Connect carried, resolved as connectOptions() did: the one string the target's allow list needs.
    const id = resolveHostIdentity({ hostnqn: v['hostnqn'] as string | undefined, hostid: v['hostid'] as string | undefined });
    hint = `; the subsystem does not allow host ${id.hostnqn} (${hostnqnSource(id)}): add it on the target (--allow-host ${id.hostnqn}, or "target ctl host add"), or connect as an allowed host with -q`;
  }
  return `nvme-tcp ${verb}: ${err.message}${err.code !== undefined ? ` [${err.code}]` : ''}${hint}\n`;
}

/** Entry point used by cli/main.ts. Returns the exit status (2 for bad input). */
export async function runInitiatorCli(verb: string, argv: readonly string[], io: CliIo = defaultIo): Promise<number> {
  const name = verb === 'list' ? 'list-subsys' : verb;
  if (!(name in INITIATOR_VERBS)) {
    io.stderr(`nvme-tcp: unknown command ${JSON.stringify(verb)}\n`);
    return 2;
  }
  const { cmd, run } = defineVerb(name, io);
  let opts: Record<string, unknown> = {};
  try {
    cmd.parse([...argv], { from: 'user' });
    opts = cmd.opts();
    return await run(opts, cmd.args, io);
  } catch (e) {
    if (e instanceof UsageError || (e as { name?: string }).name === 'CommanderError') return parseFailure(e, io, `nvme-tcp ${name}`);
    const err = e as Error & { code?: string; field?: string };
    const flag = err.code === 'NVMEOF_ERR_INVALID_ARG' && err.field !== undefined ? flagOf(err.field, name.startsWith('resv-') ? RESV_SHORT : []) : undefined;
    if (flag !== undefined) return parseFailure(new UsageError(`${flag} ${err.message.slice(`${err.field ?? ''}: `.length)}`), io, `nvme-tcp ${name}`);
    io.stderr(failureLine(name, err, opts));
    return err.code === 'NVMEOF_ERR_INVALID_ARG' ? 2 : 1;
  }
}

