// `nvme-tcp target`: flags and config files → one validated TargetConfig → TargetService; prints the
// nvme-cli lines to reach it, logs with pino, and shuts down cleanly on SIGINT/SIGTERM.
import path from 'node:path';
import { existsSync, readFileSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { availableParallelism, networkInterfaces } from 'node:os';
import { Command, CommanderError, Option } from 'commander';
import { pino, type Logger, type LevelWithSilent } from 'pino';
import { DhchapKeyError, parseDhchapSecret } from '../protocol/auth/index.js';
import { SHA384_UNSUPPORTED, TlsKeyError, parseTlsKey } from '../protocol/tls/index.js';
import { TargetService, type BoundPort, type FaultRule, type HostConfig, type NamespaceConfig, type PortConfig, type SubsystemConfig, type TargetConfig } from '../target/index.js';
import {
  ConfigError,
  defaultConfig,
  errnoText,
  formatConfigError,
  loadFaultRules,
  ipFamily,
  loadConfig,
  loadNvmetcliConfig,
  nameProblem,
  parseHostPort,
  parseTargetConfig,
  sizeToBytes,
} from '../target/config/index.js';
import { ApiConfigError, startTargetApi, type ApiHandle } from '../target/mgmt/index.js';
import { gatewayId } from '../target/service/gateway.js';
import { PLACEMENTS, isPlacement, stderrLogStream, type Placement } from '../target/workers/index.js';
import { hostPortArg, nqnArg, sizeArg, UsageError, usageLine } from './args.js';
import { runCtlCli } from './ctl.js';
import { hasOpensslConfig, needsOpensslReexec, reexecWithNoTickets, REEXEC_ENV } from './openssl-reexec.js';

const TARGET_USAGE = `usage: nvme-tcp target [options]
       nvme-tcp target ctl ...          (manage a running target over its HTTP API; see ctl --help)

Serves NVMe over TCP. With no options: 127.0.0.1:4420, subsystem ${defaultConfig().subsystems[0]?.nqn ?? ''},
one 1 GiB RAM namespace, any host.

  --config FILE            start from this JSON config (the flags below extend or override it)
  --import-nvmetcli FILE   start from a kernel target config saved by \`nvmetcli save\` (tcp ports, file namespaces)
  --listen ADDR:PORT       listen address, repeatable; IPv6 as [::1]:4420, port 0 picks a free port.
                           The Nth --listen replaces the address of the config's Nth port; extra ones add ports,
                           config ports beyond the last --listen are dropped
  --nqn NQN                the subsystem the namespace/host flags apply to (created if the config lacks it;
                           without a config it renames the default subsystem)
  --ram SIZE               add a RAM namespace (repeatable)
  --file PATH[:SIZE]       add a file namespace (repeatable); SIZE creates or extends the file
  --null SIZE              add a null namespace: reads return zeroes, writes are dropped (repeatable)
                           Namespace flags get nsids 1, 2, ... in command-line order (after the config's own);
                           without a config they replace the default RAM namespace
  --block-size 512|4096    LBA size of the namespaces given by flags (default 512)
  --zoned [ZONE-SIZE]      make the namespaces given by flags zoned (ZNS), zones of ZONE-SIZE (a power of two,
                           default 16M; the namespace size must be a multiple)
  --allow-host NQN         allow only these hosts on that subsystem (repeatable; default: any host)
  --dhchap-key HOSTNQN=SECRET
                           require DH-HMAC-CHAP from that host with this host key ("DHHC-1:..:..:", as printed
                           by nvme gen-dhchap-key; repeatable, one per host). Adds or updates the host entry;
                           the host joins the subsystem's allow list only when --allow-host is used too
  --dhchap-ctrl-key HOSTNQN=SECRET
                           controller key for that host (bidirectional authentication; needs its host key)
  --tls none|allowed|required
                           TLS 1.3 with PSKs (TP 8011) on the ports given with --listen (all ports without
                           --listen): allowed also takes cleartext hosts, required refuses them
  --concat                 secure channel concatenation (TP 8018, nvme connect --concat) on the ports given with
                           --listen (all ports without --listen): a host with a --dhchap-key authenticates its
                           cleartext admin queue, then reconnects inside TLS with the PSK that generated. Needs
                           --tls allowed or required
  --tls-key HOSTNQN=KEY|@FILE
                           that host's configured TLS PSK ("NVMeTLSkey-1:01:..:", as nvme gen-tls-key prints
                           it; @FILE reads it from a file); repeatable, one per host. SHA-256 keys only
  --advertise ADDR[:PORT]  address (and port) put in discovery log entries, e.g. behind NAT or qemu guestfwd
  --api ADDR:PORT          serve the HTTP management API + /metrics there (overrides the config's api.listen;
                           token from api.token or $NVME_TCP_API_TOKEN, required unless ADDR is loopback)
  --write-back             save every change made through the API back to the --config file
  --workers N|auto         worker processes serving I/O queues (default 1: everything in one process; auto: one
                           per CPU). The primary keeps accept, Connect, admin queues and controller state
  --placement POLICY       which worker gets a new I/O queue: single (all on worker 0), controller (round-robin
                           per controller), queue (round-robin per queue; default), host (by host NQN)
  --port-placement ID=POLICY
                           that port's own placement for queues arriving on it (repeatable, one per port; ID as
                           in "listening on ..., port id ID": the Nth --listen is port N without a config)
  --state-dir DIR          keep reservations of namespaces with PTPL on in DIR/reservations.json (default: beside
                           --config as FILE.reservations.json; without either nothing persists across a restart).
                           A gateway (--gateway-group) uses DIR/reservations.ID.json or FILE.ID.reservations.json
  --gateway-group NAME     serve as one gateway of the named gateway group (docs/gateway-groups.md); needs --etcd
  --etcd URL[,URL...]      etcd client URLs the gateway group is coordinated through, e.g. http://10.0.0.5:2379
  --gateway-id ID          this gateway's id in the group (default: the host name); unique per group
  --faults FILE            arm the fault rules of this JSON file at start (docs/faults.md); a bad rule is one line
                           naming its field, exit 2. Rules act in the primary process (not on I/O queues of workers)
  --log-level LEVEL        trace|debug|info|warn|error|fatal|silent (default info). Logs are JSON lines on stderr,
                           pretty-printed when stderr is a terminal; stdout has only the start-up lines
  -h, --help               this text

SIZE is bytes or a K/M/G/T suffix (powers of 1024), e.g. 64M, 1G.
Exit status: 0 after SIGINT/SIGTERM, 2 for a bad flag or config, 1 for a runtime failure.
`;

const LOG_LEVELS: readonly LevelWithSilent[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/** The flags: commander spec, and whether it repeats. Help is TARGET_USAGE (one hand-laid text for all of them). */
const FLAGS: readonly (readonly [string, boolean])[] = [
  ['--config <file>', false],
  ['--state-dir <dir>', false],
  ['--import-nvmetcli <file>', false],
  ['--listen <addr:port>', true],
  ['--nqn <nqn>', false],
  ['--ram <size>', true],
  ['--file <path[:size]>', true],
  ['--null <size>', true],
  ['--block-size <n>', false],
  ['--zoned [zone-size]', false],
  ['--allow-host <nqn>', true],
  ['--dhchap-key <hostnqn=secret>', true],
  ['--dhchap-ctrl-key <hostnqn=secret>', true],
  ['--tls <mode>', false],
  ['--tls-key <hostnqn=key>', true],
  ['--concat', false],
  ['--advertise <addr[:port]>', false],
  ['--api <addr:port>', false],
  ['--write-back', false],
  ['--faults <file>', false],
  ['--log-level <level>', false],
  ['--workers <n|auto>', false],
  ['--placement <policy>', false],
  ['--port-placement <id=policy>', true],
  ['--gateway-group <name>', false],
  ['--etcd <urls>', false],
  ['--gateway-id <id>', false],
  ['-h, --help', false],
];

interface TargetFlags {
  config?: string;
  faults?: string;
  'state-dir'?: string;
  'import-nvmetcli'?: string;
  listen?: string[];
  nqn?: string;
  'block-size'?: string;
  zoned?: string | boolean;
  'allow-host'?: string[];
  'dhchap-key'?: string[];
  'dhchap-ctrl-key'?: string[];
  tls?: string;
  'tls-key'?: string[];
  concat?: boolean;
  advertise?: string;
  api?: string;
  'write-back'?: boolean;
  'log-level'?: string;
  workers?: string;
  placement?: string;
  'port-placement'?: string[];
  'gateway-group'?: string;
  etcd?: string;
  'gateway-id'?: string;
  help?: boolean;
}

/** "single, controller, queue or host". */
const placementList = (): string => `${PLACEMENTS.slice(0, -1).join(', ')} or ${PLACEMENTS[PLACEMENTS.length - 1] ?? ''}`;

/** DH-HMAC-CHAP keys for one host from --dhchap-key / --dhchap-ctrl-key. */
export interface DhchapFlag {
  hostnqn: string;
  key?: string;
  ctrlKey?: string;
}

/** A namespace requested on the command line, in the order given. */
export type NamespaceFlag = { kind: 'ram' | 'null'; size: string } | { kind: 'file'; path: string; size?: string };

export interface TargetArgs {
  help: boolean;
  config?: string;
  /** --faults FILE */
  faults?: string;
  importNvmetcli?: string;
  listen: { addr: string; port: number; family: 'ipv4' | 'ipv6' }[];
  nqn?: string;
  namespaces: NamespaceFlag[];
  blockSize?: 512 | 4096;
  /** --zoned: the zone size given, or '' for the default. */
  zoned?: string;
  allowHosts: string[];
  /** --dhchap-key / --dhchap-ctrl-key, merged per host NQN (secrets as given; never printed). */
  dhchapKeys: DhchapFlag[];
  advertise?: { addr: string; port?: number };
  /** --api ADDR:PORT */
  api?: string;
  /** --tls MODE */
  tls?: 'none' | 'allowed' | 'required';
  /** --concat */
  concat?: boolean;
  /** --tls-key HOSTNQN=KEY|@FILE (keys as read; never printed). */
  tlsKeys?: { hostnqn: string; key: string }[];
  writeBack: boolean;
  logLevel: LevelWithSilent;
  /** --workers N|auto */
  workers?: number | 'auto';
  /** --placement */
  placement?: Placement;
  /** --port-placement ID=POLICY */
  portPlacements?: { portId: number; placement: Placement }[];
  /** --state-dir DIR */
  stateDir?: string;
  /** --gateway-group NAME --etcd URL[,URL...] [--gateway-id ID] */
  gateway?: { group?: string; etcd?: string[]; id?: string };
}

function usageError(msg: string): ConfigError {
  return new ConfigError(`${msg}; see nvme-tcp target --help`);
}

/** A value by the bin's one parser for its kind (cli/args.ts); its UsageError as the ConfigError the target exits 2 on. */
function flagValue<T>(parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    if (err instanceof UsageError) throw new ConfigError(err.message);
    throw err;
  }
}

/** The flags by long name, and the namespace flags in command-line order (their nsids follow it). */
function parseFlags(argv: readonly string[]): { v: TargetFlags; order: { name: 'ram' | 'null' | 'file'; value: string }[] } {
  const order: { name: 'ram' | 'null' | 'file'; value: string }[] = [];
  const silent = { writeOut: () => undefined, writeErr: () => undefined, outputError: () => undefined };
  const c = new Command('nvme-tcp target').exitOverride().configureOutput(silent).helpOption(false).allowExcessArguments(false).showSuggestionAfterError(true);
  for (const [spec, repeat] of FLAGS) {
    const o = new Option(spec);
    const name = o.long?.slice(2) ?? '';
    if (name === 'ram' || name === 'null' || name === 'file') o.argParser((x: string) => void order.push({ name, value: x }));
    else if (repeat) o.argParser((x: string, prev: string[] | undefined) => [...(prev ?? []), x]);
    c.addOption(o);
  }
  try {
    c.parse([...argv], { from: 'user' });
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    const name = /'(-[^' ]+)/.exec(err.message)?.[1];
    if (err.code === 'commander.unknownOption') throw usageError(`unknown option ${name ?? ''}${/Did you mean (.*)\?/.exec(err.message)?.[1] !== undefined ? ` (did you mean ${/Did you mean (.*)\?/.exec(err.message)?.[1] ?? ''}?)` : ''}`);
    if (err.code === 'commander.excessArguments') throw usageError(`unexpected argument ${JSON.stringify(c.args[0] ?? '')}; every value needs its flag`);
    if (err.code === 'commander.optionMissingArgument') throw usageError(`${/--[a-z-]+/.exec(err.message)?.[0] ?? 'option'}: missing value`);
    throw usageError(usageLine(err));
  }
  const v: Record<string, unknown> = {};
  const opts = c.opts();
  for (const o of c.options) if (opts[o.attributeName()] !== undefined) v[o.long?.slice(2) ?? ''] = opts[o.attributeName()];
  return { v: v as TargetFlags, order };
}

/** Parses the flags; throws a ConfigError with a one-line message naming the flag and the fix. */
export function parseTargetArgs(argv: readonly string[]): TargetArgs {
  const { v, order } = parseFlags(argv);
  const args: TargetArgs = { help: v.help === true, listen: [], namespaces: [], allowHosts: [], dhchapKeys: [], writeBack: v['write-back'] === true, logLevel: 'info' };
  if (v.config !== undefined) args.config = v.config;
  if (v.faults !== undefined) {
    if (v.faults === '') throw new ConfigError('--faults: empty; give a rules file');
    args.faults = v.faults;
  }
  if (v['state-dir'] !== undefined) {
    if (v['state-dir'] === '') throw new ConfigError('--state-dir: empty; give a directory');
    args.stateDir = v['state-dir'];
  }
  if (v['import-nvmetcli'] !== undefined) args.importNvmetcli = v['import-nvmetcli'];
  if (args.config !== undefined && args.importNvmetcli !== undefined) {
    throw usageError('--config and --import-nvmetcli: give only one of them (convert once, then save as a config)');
  }
  for (const l of v.listen ?? []) args.listen.push(flagValue(() => hostPortArg('listen', l, '127.0.0.1:4420, 0.0.0.0:4420 or [::1]:4420')));
  if (v.nqn !== undefined) args.nqn = flagValue(() => nqnArg('nqn', v.nqn ?? ''));
  for (const h of v['allow-host'] ?? []) {
    flagValue(() => nqnArg('allow-host', h));
    if (!args.allowHosts.includes(h)) args.allowHosts.push(h);
  }
  parseSecretFlags(v, args);
  parseNamespaceFlags(v, order, args);
  parseNetworkFlags(v, args);
  parseRuntimeFlags(v, args);
  return args;
}

/** --dhchap-key / --dhchap-ctrl-key, merged per host. */
function parseSecretFlags(v: TargetFlags, args: TargetArgs): void {
  for (const [flag, field] of [
    ['dhchap-key', 'key'],
    ['dhchap-ctrl-key', 'ctrlKey'],
  ] as const) {
    for (const spec of v[flag] ?? []) {
      const { hostnqn, secret } = parseDhchapFlag(flag, spec);
      let entry = args.dhchapKeys.find((d) => d.hostnqn === hostnqn);
      if (entry === undefined) args.dhchapKeys.push((entry = { hostnqn }));
      if (entry[field] !== undefined) throw new ConfigError(`--${flag} ${hostnqn}=<secret>: given twice for this host; give one key per host`);
      entry[field] = secret;
    }
  }
}

/** --block-size and --ram/--file/--null, in command-line order. */
function parseNamespaceFlags(v: TargetFlags, order: readonly { name: 'ram' | 'null' | 'file'; value: string }[], args: TargetArgs): void {
  if (v['block-size'] !== undefined) {
    const bs = v['block-size'];
    if (bs !== '512' && bs !== '4096') throw new ConfigError(`--block-size ${bs}: not supported; use 512 or 4096`);
    args.blockSize = bs === '512' ? 512 : 4096;
  }
  if (v.zoned !== undefined) {
    if (typeof v.zoned === 'string') flagValue(() => sizeArg('zoned', v.zoned as string));
    args.zoned = typeof v.zoned === 'string' ? v.zoned : '';
    if (order.length === 0) throw new ConfigError('--zoned: applies to namespaces given with --ram/--file/--null, and there are none; add one or set "zoned" in the config');
  }
  // Namespace flags keep their command-line order across --ram/--file/--null.
  for (const t of order) {
    if (t.name === 'ram' || t.name === 'null') {
      flagValue(() => sizeArg(t.name, t.value));
      args.namespaces.push({ kind: t.name, size: t.value });
    } else if (t.name === 'file') {
      args.namespaces.push(parseFileFlag(t.value));
    }
  }
}

/** --advertise, --api, --tls, --concat, --tls-key. */
function parseNetworkFlags(v: TargetFlags, args: TargetArgs): void {
  if (v.advertise !== undefined) {
    const a = v.advertise;
    const hp = parseHostPort(a);
    if (hp) args.advertise = { addr: hp.addr, port: hp.port };
    else if (ipFamily(a)) args.advertise = { addr: a };
    else throw new ConfigError(`--advertise ${a}: not an IP address; use ADDR or ADDR:PORT (e.g. 10.0.2.100 or 10.0.2.100:4420)`);
    if (args.advertise.port === 0) throw new ConfigError(`--advertise ${a}: port 0 cannot be advertised; use the port hosts connect to`);
  }
  if (v.api !== undefined) {
    flagValue(() => hostPortArg('api', v.api ?? ''));
    args.api = v.api;
  }
  if (v.tls !== undefined) {
    const m = v.tls;
    if (m !== 'none' && m !== 'allowed' && m !== 'required') throw new ConfigError(`--tls ${m}: unknown mode; use none, allowed or required`);
    args.tls = m;
  }
  if (v.concat === true) args.concat = true;
  for (const spec of v['tls-key'] ?? []) {
    const k = parseTlsKeyFlag(spec);
    args.tlsKeys ??= [];
    if (args.tlsKeys.some((x) => x.hostnqn === k.hostnqn)) throw new ConfigError(`--tls-key ${k.hostnqn}=<key>: given twice for this host; give one key per host`);
    args.tlsKeys.push(k);
  }
}

/** A worker count: N >= 1 or auto. `what` names where it came from (the flag or the environment variable). */
function workerCount(what: string, w: string): number | 'auto' {
  if (w === 'auto') return 'auto';
  if (/^[0-9]+$/.test(w) && Number(w) >= 1) return Number(w);
  throw new ConfigError(`${what}: not a worker count; use an integer >= 1 or auto`);
}

function placementValue(what: string, p: string): Placement {
  if (!isPlacement(p)) throw new ConfigError(`${what}: unknown policy; use ${placementList()}`);
  return p;
}

/**
 * What the environment adds to the target's options. The bin is the one place that reads it: the library takes
 * options. NVME_TCP_TARGET_WORKERS and NVME_TCP_TARGET_PLACEMENT apply when neither a flag nor the config sets workers
 * or placement (a whole suite that starts targets through the bin can then run against workers unchanged);
 * NVME_TCP_WORKER_NODE_ARGS are Node flags for the worker processes only (NODE_OPTIONS refuses --cpu-prof);
 * NVME_TCP_TLS_TRACE=1 traces every TLS handshake on stderr; NVME_TCP_API_TOKEN is the API token when the config has none.
 */
export interface TargetEnv {
  workers?: number | 'auto';
  placement?: Placement;
  workerNodeArgs: string[];
  tlsTrace: boolean;
  apiToken?: string;
}

/** Reads TargetEnv; throws a ConfigError naming the variable when one holds a bad value. */
export function targetEnv(env: NodeJS.ProcessEnv): TargetEnv {
  const out: TargetEnv = {
    workerNodeArgs: (env.NVME_TCP_WORKER_NODE_ARGS ?? '').split(/\s+/).filter((a) => a !== ''),
    tlsTrace: env.NVME_TCP_TLS_TRACE === '1',
  };
  const w = env.NVME_TCP_TARGET_WORKERS;
  if (w !== undefined && w !== '') out.workers = workerCount(`NVME_TCP_TARGET_WORKERS=${w}`, w);
  const p = env.NVME_TCP_TARGET_PLACEMENT;
  if (p !== undefined && p !== '') out.placement = placementValue(`NVME_TCP_TARGET_PLACEMENT=${p}`, p);
  if (env.NVME_TCP_API_TOKEN !== undefined) out.apiToken = env.NVME_TCP_API_TOKEN;
  return out;
}

/** --write-back, --workers, --placement, --port-placement, --log-level. */
function parseRuntimeFlags(v: TargetFlags, args: TargetArgs): void {
  if (args.writeBack && args.config === undefined) throw new ConfigError('--write-back: needs --config FILE (the file API changes are saved to)');
  if (v.workers !== undefined) args.workers = workerCount(`--workers ${v.workers}`, v.workers);
  if (v.placement !== undefined) args.placement = placementValue(`--placement ${v.placement}`, v.placement);
  for (const spec of v['port-placement'] ?? []) {
    const m = /^(\d+)=(.*)$/.exec(spec);
    if (!m) throw new ConfigError(`--port-placement ${spec}: not ID=POLICY; use e.g. 2=single`);
    const portId = Number(m[1]);
    const p = m[2] ?? '';
    if (!isPlacement(p)) throw new ConfigError(`--port-placement ${spec}: unknown policy ${JSON.stringify(p)}; use ${placementList()}`);
    args.portPlacements ??= [];
    if (args.portPlacements.some((x) => x.portId === portId)) throw new ConfigError(`--port-placement ${spec}: port ${portId} given twice; give one policy per port`);
    args.portPlacements.push({ portId, placement: p });
  }
  const gw = parseGatewayFlags(v['gateway-group'], v.etcd, v['gateway-id']);
  if (gw !== undefined) args.gateway = gw;
  if (v['log-level'] !== undefined) {
    const lvl = v['log-level'];
    if (!(LOG_LEVELS as readonly string[]).includes(lvl)) throw new ConfigError(`--log-level ${lvl}: unknown level; use ${LOG_LEVELS.join(', ')}`);
    args.logLevel = lvl as LevelWithSilent;
  }
}

/**
 * HOSTNQN=SECRET, split at the first "=" (base64 secrets end in "=", NQNs have none). Errors name the host
 * but show the secret only as <secret>: command lines end up in shell history and CI logs already.
 */
function parseDhchapFlag(flag: 'dhchap-key' | 'dhchap-ctrl-key', spec: string): { hostnqn: string; secret: string } {
  const i = spec.indexOf('=');
  // A bare secret ("DHHC-1:02:...==:") has an "=" in its padding: never echo what may be key material.
  if (i <= 0 || spec.startsWith('DHHC-')) throw new ConfigError(`--${flag}: expected HOSTNQN=SECRET (e.g. --${flag} nqn.2014-08.org.nvmexpress:uuid:...=DHHC-1:01:...:)`);
  const hostnqn = spec.slice(0, i);
  const secret = spec.slice(i + 1);
  const p = nameProblem(hostnqn);
  if (p) throw new ConfigError(`--${flag}: ${JSON.stringify(hostnqn)} ${p}`);
  try {
    parseDhchapSecret(secret);
  } catch (err) {
    if (!(err instanceof DhchapKeyError)) throw err;
    // DhchapKeyError messages never quote the secret.
    throw new ConfigError(`--${flag} ${hostnqn}=<secret>: ${err.message}; use the "DHHC-1:<hh>:<base64>:" form that nvme gen-dhchap-key prints`);
  }
  return { hostnqn, secret };
}

/** HOSTNQN=KEY or HOSTNQN=@FILE (the file's first line); errors show the key only as <key>. */
function parseTlsKeyFlag(spec: string): { hostnqn: string; key: string } {
  const i = spec.indexOf('=');
  if (i <= 0 || spec.startsWith('NVMeTLSkey-')) throw new ConfigError('--tls-key: expected HOSTNQN=KEY or HOSTNQN=@FILE (e.g. --tls-key nqn.2014-08.org.nvmexpress:uuid:...=NVMeTLSkey-1:01:...:)');
  const hostnqn = spec.slice(0, i);
  const p = nameProblem(hostnqn);
  if (p) throw new ConfigError(`--tls-key: ${JSON.stringify(hostnqn)} ${p}`);
  let key = spec.slice(i + 1);
  if (key.startsWith('@')) {
    const file = key.slice(1);
    try {
      key = (readFileSync(file, 'utf8').split('\n')[0] ?? '').trim();
    } catch (err) {
      throw new ConfigError(`--tls-key ${hostnqn}=@${file}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
    }
  }
  try {
    const k = parseTlsKey(key);
    if (k.hash === 2) throw new ConfigError(`--tls-key ${hostnqn}=<key>: ${SHA384_UNSUPPORTED}`);
  } catch (err) {
    if (!(err instanceof TlsKeyError)) throw err;
    throw new ConfigError(`--tls-key ${hostnqn}=<key>: ${err.message}; use the "NVMeTLSkey-1:<hh>:<base64>:" form that nvme gen-tls-key prints`);
  }
  return { hostnqn, key };
}

/** PATH[:SIZE]: the part after the last ":" is a size only when it parses as one (paths may contain ":"). */
function parseFileFlag(spec: string): NamespaceFlag {
  const i = spec.lastIndexOf(':');
  if (i > 0) {
    const size = spec.slice(i + 1);
    if (sizeToBytes(size) !== undefined) return { kind: 'file', path: spec.slice(0, i), size };
  }
  if (spec === '') throw new ConfigError('--file: empty path; use --file PATH[:SIZE]');
  return { kind: 'file', path: spec };
}

export interface BuiltConfig {
  config: TargetConfig;
  /** The --faults file's rules, validated. */
  faultRules: FaultRule[];
  /** Notes for the log (nvmetcli import leftovers, dropped ports). */
  warnings: string[];
}

/** --listen: the Nth replaces the config's Nth port, extra ones add ports, the rest are dropped (with a warning). */
function applyListen(config: TargetConfig, listen: TargetArgs['listen'], warnings: string[]): void {
  const old = config.ports;
  let nextId = Math.max(0, ...old.map((p) => p.id)) + 1;
  config.ports = listen.map((l, i): PortConfig => {
    const prev = old[i];
    const { family: _f, ...keep } = prev ?? { id: nextId++ };
    return { ...keep, addr: l.addr, port: l.port, family: l.family };
  });
  const kept = new Set(config.ports.map((p) => p.id));
  const dropped = old.filter((p) => !kept.has(p.id));
  if (dropped.length > 0) {
    warnings.push(`--listen: config ports ${dropped.map((p) => `${p.id} (${p.addr}:${p.port})`).join(', ')} dropped`);
    for (const s of config.subsystems) {
      if (!s.ports) continue;
      s.ports = s.ports.filter((id) => kept.has(id));
      if (s.ports.length === 0) {
        delete s.ports;
        warnings.push(`--listen: subsystem ${s.nqn} lost all its ports; it is now exported on every port`);
      }
    }
  }
}

/** The port fields --advertise sets. */
function advertised(a: TargetArgs['advertise']): Pick<PortConfig, 'advertiseAddr' | 'advertisePort'> {
  return a === undefined ? {} : { advertiseAddr: a.addr, ...(a.port !== undefined ? { advertisePort: a.port } : {}) };
}

/** Starts from --config / --import-nvmetcli / the default and applies the flags (documented in TARGET_USAGE). */
export async function buildTargetConfig(args: TargetArgs): Promise<BuiltConfig> {
  const warnings: string[] = [];
  let config: TargetConfig;
  const fromFile = args.config !== undefined || args.importNvmetcli !== undefined;
  if (args.config !== undefined) config = await loadConfig(args.config);
  else if (args.importNvmetcli !== undefined) {
    const imp = await loadNvmetcliConfig(args.importNvmetcli);
    config = imp.config;
    warnings.push(...imp.warnings.map((w) => `nvmetcli: ${w}`));
  } else config = defaultConfig();

  if (args.listen.length > 0) applyListen(config, args.listen, warnings);
  for (const p of args.advertise ? config.ports : []) Object.assign(p, advertised(args.advertise));

  const wantsSubsystem = args.nqn !== undefined || args.namespaces.length > 0 || args.allowHosts.length > 0 || args.blockSize !== undefined;
  if (wantsSubsystem) {
    let sub: SubsystemConfig | undefined;
    if (!fromFile) {
      // Without a config file the flags describe the one subsystem: rename the default rather than add one.
      sub = config.subsystems[0];
      if (sub && args.nqn !== undefined) sub.nqn = args.nqn;
      if (sub && args.namespaces.length > 0) sub.namespaces = [];
    } else {
      sub = args.nqn !== undefined ? config.subsystems.find((s) => s.nqn === args.nqn) : config.subsystems[0];
    }
    if (!sub) {
      sub = { nqn: args.nqn ?? defaultConfig().subsystems[0]?.nqn ?? '', allowAnyHost: true };
      config.subsystems.push(sub);
    }
    if (fromFile && args.blockSize !== undefined && args.namespaces.length === 0) {
      throw new ConfigError('--block-size: applies to namespaces given with --ram/--file/--null, and there are none; set blockSize in the config instead');
    }
    const namespaces: NamespaceConfig[] = sub.namespaces ?? [];
    if (!fromFile && args.blockSize !== undefined) for (const ns of namespaces) ns.blockSize = args.blockSize;
    let nsid = Math.max(0, ...namespaces.map((n) => n.nsid)) + 1;
    const bs = args.blockSize ?? 512;
    for (const f of args.namespaces) {
      const ns: NamespaceConfig = { nsid: nsid++, backend: await backendFor(f, bs) };
      if (args.blockSize !== undefined) ns.blockSize = args.blockSize;
      if (args.zoned !== undefined) ns.zoned = args.zoned === '' ? {} : { zoneSize: args.zoned };
      namespaces.push(ns);
    }
    sub.namespaces = namespaces;
    if (args.allowHosts.length > 0) {
      sub.allowAnyHost = false;
      // A host given keys must still pass the allow list; with --allow-host in use, keying a host allows it too.
      sub.hosts = [...new Set([...(sub.hosts ?? []), ...args.allowHosts, ...args.dhchapKeys.map((d) => d.hostnqn)])];
    }
  }
  if (args.dhchapKeys.length > 0) config.hosts = mergeDhchapFlags(config.hosts ?? [], args.dhchapKeys);
  if (args.tls !== undefined) {
    // --listen replaced the first ports with its own, in order: those are the ones --tls applies to.
    const n = args.listen.length > 0 ? args.listen.length : config.ports.length;
    for (const p of config.ports.slice(0, n)) p.tls = args.tls;
  }
  if (args.concat === true) {
    const n = args.listen.length > 0 ? args.listen.length : config.ports.length;
    for (const p of config.ports.slice(0, n)) {
      if ((p.tls ?? 'none') === 'none') throw new ConfigError(`--concat: port ${p.id} has no TLS; add --tls allowed (or required): the generated PSK is used inside TLS`);
      p.tlsConcat = true;
    }
  }
  for (const k of args.tlsKeys ?? []) {
    const hosts = (config.hosts ??= []);
    let h = hosts.find((x) => x.nqn === k.hostnqn);
    if (h === undefined) hosts.push((h = { nqn: k.hostnqn }));
    h.tlsKey = k.key;
  }
  if (args.workers !== undefined) config.workers = args.workers;
  if (args.placement !== undefined) config.placement = args.placement;
  for (const pp of args.portPlacements ?? []) {
    const port = config.ports.find((p) => p.id === pp.portId);
    if (port === undefined) throw new ConfigError(`--port-placement ${pp.portId}=${pp.placement}: no port ${pp.portId}; the ports are ${config.ports.map((p) => p.id).join(', ') || 'none'}`);
    port.placement = pp.placement;
  }
  if (args.gateway !== undefined) config.gateway = gatewayConfig(config.gateway, args.gateway);
  return { config: parseTargetConfig(config), faultRules: args.faults !== undefined ? await loadFaultRules(args.faults) : [], warnings };
}

/** Adds the flags' keys to the config's host entries (the flags win), creating entries for new hosts. */
function mergeDhchapFlags(hosts: HostConfig[], flags: readonly DhchapFlag[]): HostConfig[] {
  const out = hosts.map((h) => ({ ...h }));
  for (const f of flags) {
    let h = out.find((x) => x.nqn === f.hostnqn);
    if (h === undefined) out.push((h = { nqn: f.hostnqn }));
    if (f.key !== undefined) h.dhchapKey = f.key;
    if (f.ctrlKey !== undefined) h.dhchapCtrlKey = f.ctrlKey;
    if (h.dhchapKey === undefined) {
      throw new ConfigError(`--dhchap-ctrl-key ${f.hostnqn}=<secret>: needs the host key too; add --dhchap-key ${f.hostnqn}=SECRET (or dhchapKey in the config)`);
    }
  }
  return out;
}

async function backendFor(f: NamespaceFlag, blockSize: number): Promise<NamespaceConfig['backend']> {
  const flag = f.kind === 'file' ? `--file ${f.path}${f.size !== undefined ? `:${f.size}` : ''}` : `--${f.kind} ${f.size}`;
  if (f.size !== undefined) {
    const bytes = sizeToBytes(f.size) ?? 0;
    if (bytes < blockSize || bytes % blockSize !== 0) {
      throw new ConfigError(`${flag}: ${bytes} bytes is not a positive multiple of the block size ${blockSize}; use e.g. 1G`);
    }
  }
  if (f.kind !== 'file') return { type: f.kind, size: f.size };
  let kind: 'file' | 'block' | 'other' | 'missing';
  try {
    const st = await stat(f.path);
    kind = st.isFile() ? 'file' : st.isBlockDevice() ? 'block' : 'other';
  } catch (err) {
    if ((err as { code?: string }).code !== 'ENOENT') throw new ConfigError(`${flag}: cannot stat ${f.path} (${errnoText(err)})`);
    kind = 'missing';
  }
  if (kind === 'other') throw new ConfigError(`${flag}: ${f.path} is not a regular file; use a regular file`);
  if (kind === 'missing' && !existsSync(path.dirname(f.path))) throw new ConfigError(`${flag}: ${missingPathReason(f.path)}`);
  if (kind === 'missing' && f.size === undefined) throw new ConfigError(`${flag}: ${f.path} does not exist; add a size to create it (--file ${f.path}:1G)`);
  return f.size !== undefined ? { type: 'file', path: f.path, size: f.size } : { type: 'file', path: f.path };
}

// ---------------------------------------------------------------------------------------------- start-up lines

/** An address a host can type: the advertised one, else the listen address, else (wildcard) this machine's first external IP. */
function reachableAddr(addr: string): string {
  if (addr !== '0.0.0.0' && addr !== '::') return addr;
  for (const list of Object.values(networkInterfaces())) {
    for (const ni of list ?? []) {
      if (!ni.internal && (addr === '::' || ni.family === 'IPv4')) return ni.address;
    }
  }
  return addr === '::' ? '::1' : '127.0.0.1';
}

/** The plain lines printed on start: where we listen, what we serve, and the nvme-cli commands to reach it. */
export function startupLines(config: TargetConfig, bound: readonly BoundPort[]): string[] {
  const lines: string[] = [];
  for (const b of bound) {
    const p = config.ports.find((x) => x.id === b.id);
    const adv = p?.advertiseAddr !== undefined ? ` (advertised as ${p.advertiseAddr}:${p.advertisePort ?? b.port})` : '';
    lines.push(`nvme-tcp target: listening on ${b.addr.includes(':') ? `[${b.addr}]` : b.addr}:${b.port}, port id ${b.id}${adv}`);
  }
  for (const s of config.subsystems) {
    const nss = (s.namespaces ?? []).map((n) => `nsid ${n.nsid} ${describeBackend(n)}`).join(', ') || 'no namespaces';
    const acl = s.allowAnyHost === false || (s.hosts?.length ?? 0) > 0 ? `hosts ${(s.hosts ?? []).join(' ') || 'none'}` : 'any host';
    lines.push(`nvme-tcp target: subsystem ${s.nqn}: ${nss}; ${acl}`);
  }
  for (const h of config.hosts ?? []) {
    if (h.dhchapKey !== undefined) lines.push(`nvme-tcp target: host ${h.nqn} must authenticate (DH-HMAC-CHAP${h.dhchapCtrlKey !== undefined ? ', bidirectional' : ''})`);
    if (h.tlsKey !== undefined) lines.push(`nvme-tcp target: host ${h.nqn} has a TLS key`);
  }
  for (const p of config.ports) if (p.tls !== undefined && p.tls !== 'none') lines.push(`nvme-tcp target: port ${p.id}: TLS ${p.tls}`);
  for (const p of config.ports) if (p.tlsConcat === true) lines.push(`nvme-tcp target: port ${p.id}: secure channel concatenation`);
  // OpenSSL's num_tickets is read from its configuration at process start only (docs/tls.md, NewSessionTicket).
  // The CLI entry restarts itself with it (cli/openssl-reexec.ts) unless NVME_TCP_OPENSSL_REEXEC is set.
  if (!hasOpensslConfig() && config.ports.some((p) => p.tls !== undefined && p.tls !== 'none')) {
    lines.push(`nvme-tcp target: warning: TLS sessions send a NewSessionTicket, which the Linux host refuses; start with OPENSSL_CONF=target/transport/tcp/openssl-no-tickets.cnf (or unset ${REEXEC_ENV})`);
  }
  const hosts = bound.map((b) => {
    const p = config.ports.find((x) => x.id === b.id);
    return { id: b.id, addr: p?.advertiseAddr ?? reachableAddr(b.addr), port: p?.advertisePort ?? b.port };
  });
  for (const h of hosts) lines.push(`nvme discover -t tcp -a ${h.addr} -s ${h.port}`);
  for (const s of config.subsystems) {
    for (const h of hosts) {
      if (s.ports && !s.ports.includes(h.id)) continue;
      lines.push(`nvme connect -t tcp -a ${h.addr} -s ${h.port} -n ${s.nqn}`);
    }
  }
  return lines;
}

function describeBackend(n: NamespaceConfig): string {
  const bs = `${n.blockSize ?? 512}-byte blocks`;
  switch (n.backend.type) {
    case 'ram':
      return `ram ${String(n.backend.size)} (${bs})`;
    case 'null':
      return `null ${String(n.backend.size)} (${bs})`;
    case 'file':
      return `file ${n.backend.path}${n.backend.size !== undefined ? ` ${String(n.backend.size)}` : ''} (${bs})`;
  }
}

// ---------------------------------------------------------------------------------------------- the command

export interface TargetCliIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  /** Logger to use instead of building one from --log-level (tests). */
  logger?: Logger;
  /** Install SIGINT/SIGTERM and uncaught-error handlers (default true; in-process tests pass false). */
  processHandlers?: boolean;
  /** Stops the target like SIGTERM does (tests). */
  signal?: AbortSignal;
  /** Called once the target listens, with the bound ports. */
  onReady?: (bound: BoundPort[]) => void;
  /**
   * The process's own script and arguments (process.argv.slice(1)) when runTargetCli is the process entry: with a TLS
   * port and no OpenSSL configuration it then restarts itself with openssl-no-tickets.cnf (cli/openssl-reexec.ts).
   */
  reexec?: readonly string[];
  /** The environment the NVME_TCP_* variables are read from (targetEnv); default process.env. */
  env: NodeJS.ProcessEnv;
}

const defaultIo: TargetCliIo = {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
  env: process.env,
};

/** How long a graceful stop may take before the process gives up on it. */
const STOP_TIMEOUT_MS = 15_000;

/**
 * Log fields that may hold DH-HMAC-CHAP secrets: target host entries (config, API bodies) and initiator
 * connect options. The code logs none of them on purpose; redaction is the net for an object logged whole.
 */
const LOG_REDACT_PATHS: readonly string[] = [
  'dhchapKey',
  'dhchapCtrlKey',
  'hosts[*].dhchapKey',
  'hosts[*].dhchapCtrlKey',
  '*.dhchapKey',
  '*.dhchapCtrlKey',
  '*.hosts[*].dhchapKey',
  '*.hosts[*].dhchapCtrlKey',
  'dhchap_secret',
  'dhchap_ctrl_secret',
  '*.dhchap_secret',
  '*.dhchap_ctrl_secret',
  'tlsKey',
  'hosts[*].tlsKey',
  '*.tlsKey',
  '*.hosts[*].tlsKey',
  'tls_key',
  '*.tls_key',
];

/** pino options shared by every target logger: level, pid, and the secret redaction. */
export function targetLoggerOptions(level: LevelWithSilent): { level: LevelWithSilent; base: { pid: number }; redact: { paths: string[]; censor: string } } {
  return { level, base: { pid: process.pid }, redact: { paths: [...LOG_REDACT_PATHS], censor: '<redacted>' } };
}

/** The target's log: on stderr (pretty on a terminal), so stdout carries only the start-up lines. */
function createLogger(level: LevelWithSilent): Logger {
  return pino(targetLoggerOptions(level), stderrLogStream());
}

/** The service for a built config and the environment: its workers, placement and where PTPL reservations persist. */
function createService(config: TargetConfig, args: TargetArgs, env: TargetEnv, log: Logger): TargetService {
  const w = config.workers ?? env.workers;
  const workers = w === 'auto' ? availableParallelism() : w;
  const placement = config.placement ?? env.placement;
  const resvStatePath = resvStateFile(args, config);
  return new TargetService({
    logger: log,
    ...(config.icReqTimeoutS !== undefined ? { icReqTimeoutS: config.icReqTimeoutS } : {}),
    ...(workers !== undefined ? { workers } : {}),
    ...(placement !== undefined ? { placement } : {}),
    ...(resvStatePath !== undefined ? { resvStatePath } : {}),
    ...(env.workerNodeArgs.length > 0 ? { workerNodeArgs: env.workerNodeArgs } : {}),
    ...(env.tlsTrace ? { tlsTrace: true } : {}),
  });
}

/** A graceful stop (close the API, then the service) given STOP_TIMEOUT_MS; resolves to the exit status. */
async function stopWithin(log: Logger, why: string, code: number, closeAll: () => Promise<void>): Promise<number> {
  log.info({ reason: why }, 'stopping');
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), STOP_TIMEOUT_MS)));
  try {
    const r = await Promise.race([closeAll().then(() => 'ok' as const), timedOut]);
    if (r === 'timeout') {
      log.error({ timeoutMs: STOP_TIMEOUT_MS }, 'stop timed out');
      return 1;
    }
    return code;
  } catch (err) {
    log.error({ err }, 'stop failed');
    return 1;
  } finally {
    clearTimeout(timer);
  }
}

/** The flags and the config they build, or the exit status (--help: 0; bad flag or config: 2). */
async function loadTarget(argv: readonly string[], io: TargetCliIo): Promise<{ args: TargetArgs; built: BuiltConfig } | number> {
  try {
    const args = parseTargetArgs(argv);
    if (args.help) {
      io.stdout(TARGET_USAGE);
      return 0;
    }
    return { args, built: await buildTargetConfig(args) };
  } catch (err) {
    io.stderr(`${formatConfigError(err)}\n`);
    return err instanceof ConfigError ? 2 : 1;
  }
}

/** SIGINT/SIGTERM and uncaught errors go to the handlers; returns what removes them. */
function installProcessHandlers(onSignal: (sig: NodeJS.Signals) => void, onFatal: (err: unknown) => void): () => void {
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, onSignal);
  process.on('uncaughtException', onFatal);
  process.on('unhandledRejection', onFatal);
  return () => {
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.off(sig, onSignal);
    process.off('uncaughtException', onFatal);
    process.off('unhandledRejection', onFatal);
  };
}

/** Applies the config and starts the API; on failure one stderr line and the exit status (the caller stops). */
async function startAll(service: TargetService, { config, faultRules }: BuiltConfig, args: TargetArgs, env: TargetEnv, io: TargetCliIo, log: Logger): Promise<{ api: ApiHandle | undefined } | number> {
  try {
    await service.apply(config);
    for (const rule of faultRules) service.addFaultRule(rule);
  } catch (err) {
    io.stderr(`${startError(err)}\n`);
    // The stderr line says it all; the log gets the code, not a stack (issue #32: two JSON stack traces).
    log.error({ code: (err as { code?: string }).code, reason: startError(err) }, 'start failed');
    return err instanceof ConfigError || isStartInputError(err) ? 2 : 1;
  }
  try {
    const api = await startTargetApi(service, {
      config,
      logger: log,
      writeBack: args.writeBack,
      ...(args.api !== undefined ? { listen: args.api } : {}),
      ...(args.config !== undefined ? { configPath: args.config } : {}),
      ...(env.apiToken !== undefined ? { token: env.apiToken } : {}),
    });
    return { api };
  } catch (err) {
    const line = apiStartError(err, args.api ?? config.api?.listen ?? '');
    io.stderr(`${line}\n`);
    log.error({ code: (err as { code?: string }).code, reason: line }, 'management API failed to start');
    return err instanceof ApiConfigError ? 2 : 1;
  }
}

/**
 * The io with its defaults. What the target writes on stderr is its error lines: each names the program, like its
 * start-up lines on stdout and the other verbs' errors.
 */
function prefixedIo(ioIn: Partial<TargetCliIo>): TargetCliIo {
  const io: TargetCliIo = { ...defaultIo, ...ioIn };
  const stderr = io.stderr;
  return { ...io, stderr: (s) => stderr(s.replace(/^(?=.)/gm, 'nvme-tcp target: ')) };
}

/** `nvme-tcp target [options]` (and `nvme-tcp target ctl ...`); resolves to the exit status. */
export async function runTargetCli(argv: readonly string[], ioIn: Partial<TargetCliIo> = {}): Promise<number> {
  if (argv[0] === 'ctl') return runCtlCli(argv.slice(1), { stdout: ioIn.stdout ?? defaultIo.stdout, stderr: ioIn.stderr ?? defaultIo.stderr, env: ioIn.env ?? defaultIo.env });
  const io = prefixedIo(ioIn);

  const loaded = await loadTarget(argv, io);
  if (typeof loaded === 'number') return loaded;
  const { args, built } = loaded;

  if (io.reexec !== undefined && needsOpensslReexec(built.config)) return reexecWithNoTickets(io.reexec);

  const log = io.logger ?? createLogger(args.logLevel);
  for (const w of built.warnings) log.warn(w);
  let service: TargetService;
  let env: TargetEnv;
  try {
    env = targetEnv(io.env);
    service = createService(built.config, args, env, log);
  } catch (err) {
    io.stderr(`${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  }

  let api: ApiHandle | undefined;
  let stopping: Promise<number> | undefined;
  let resolveDone: (code: number) => void = () => undefined;
  const done = new Promise<number>((r) => (resolveDone = r));
  const stop = (why: string, code: number): Promise<number> => {
    stopping ??= stopWithin(log, why, code, async () => {
      await api?.close();
      await service.stop();
    });
    void stopping.then(resolveDone);
    return stopping;
  };

  const removers: (() => void)[] = [];
  // A signal during start-up is acted on once apply() is done, so no listener opens after the stop.
  let started = false;
  let earlyStop: string | undefined;
  const onSignal = (sig: NodeJS.Signals): void => {
    if (stopping || earlyStop !== undefined) {
      // A second signal means "now": skip the graceful path.
      log.warn({ signal: sig }, 'second signal, exiting immediately');
      process.exit(sig === 'SIGINT' ? 130 : 143);
    }
    if (started) void stop(sig, 0);
    else earlyStop = sig;
  };
  const onFatal = (err: unknown): void => {
    log.fatal({ err }, 'uncaught error');
    void stop('uncaught error', 1);
  };
  if (io.processHandlers !== false) removers.push(installProcessHandlers(onSignal, onFatal));
  const onAbort = (): void => {
    if (started) void stop('abort', 0);
    else earlyStop = 'abort';
  };
  io.signal?.addEventListener('abort', onAbort, { once: true });

  try {
    const up = await startAll(service, built, args, env, io, log);
    if (typeof up === 'number') {
      await stop('start failed', 1);
      return up;
    }
    api = up.api;
    const bound = service.boundPorts();
    log.info({ ports: bound, subsystems: built.config.subsystems.map((s) => s.nqn), api: api?.url }, 'target started');
    const lines = startupLines(built.config, bound);
    if (api) lines.splice(bound.length, 0, `nvme-tcp target: management API on ${api.url} (nvme-tcp target ctl --api ${api.url} ...)`);
    io.stdout(`${lines.join('\n')}\n`);
    started = true;
    io.onReady?.(bound);
    if (earlyStop !== undefined || io.signal?.aborted === true) void stop(earlyStop ?? 'abort', 0);
    return await done;
  } finally {
    io.signal?.removeEventListener('abort', onAbort);
    for (const remove of removers) remove();
  }
}

/**
 * Where PTPL reservation state lives: --state-dir, or beside the --config file. A gateway's file carries its id
 * (FILE.ID.reservations.json, DIR/reservations.ID.json): the gateways of a group start from one shared config (often on
 * one shared filesystem) and each keeps its own reservation view until reservations are shared through etcd
 * (docs/gateway-groups.md); one file for all would have each overwrite the others' PTPL state (NVMe Base 2.0 §8.19.3).
 * Ids are unique in a group (a duplicate is refused at join), so the files are distinct.
 */
function resvStateFile(args: TargetArgs, config: TargetConfig): string | undefined {
  const id = config.gateway !== undefined ? encodeURIComponent(gatewayId(config.gateway)) : undefined;
  const dir = args.stateDir;
  if (dir !== undefined) return path.join(dir, id !== undefined ? `reservations.${id}.json` : 'reservations.json');
  if (args.config !== undefined) return `${args.config.replace(/\.json$/, '')}${id !== undefined ? `.${id}` : ''}.reservations.json`;
  return undefined;
}

function apiStartError(err: unknown, listen: string): string {
  const e = err as { code?: string; message?: string };
  if (err instanceof ApiConfigError) return `--api: ${e.message ?? ''}`;
  if (e.code === 'EADDRINUSE') return `--api: ${listen} is already in use; pick another port`;
  return `--api: ${listen}: ${e.message ?? String(err)}`;
}

function startError(err: unknown): string {
  const e = err as { code?: string; address?: string; port?: number; message?: string; path?: string; syscall?: string };
  if (e.code === 'NVMEOF_ERR_ETCD_UNREACHABLE') return `--etcd: ${e.message ?? ''}; start etcd there or give its client URL`;
  if (e.code?.startsWith('NVMEOF_ERR_GATEWAY_') === true) return `--gateway-group: ${e.message ?? ''}`;
  // A namespace file the target cannot open (an unwritable volume in a container) is not a --listen problem.
  if (e.syscall === 'open' && typeof e.path === 'string') {
    if (e.code === 'ENOENT') return `namespace backend ${e.path}: ${missingPathReason(e.path)}`;
    return `namespace backend ${e.path}: ${e.code ?? 'open failed'}; make its directory writable by the target's user (uid ${process.getuid?.() ?? '?'}) or set the namespace "readOnly": true`;
  }
  if (e.code === 'EADDRINUSE') return `--listen: ${e.address ?? ''}:${e.port ?? ''} is already in use; stop the other listener or pick another port`;
  if (e.code === 'EADDRNOTAVAIL') return `--listen: ${e.address ?? ''} is not an address of this machine; use one of its addresses or 0.0.0.0`;
  if (e.code === 'EACCES') return `--listen: ${e.address ?? ''}:${e.port ?? ''} needs privileges; use a port above 1023`;
  return formatConfigError(err, 'start');
}

// ---------------------------------------------------------------------------------------------- gateway groups

/** Why a namespace file that does not exist cannot be opened: its directory is missing, or it is and the file is not. */
function missingPathReason(file: string): string {
  const dir = path.dirname(file);
  return existsSync(dir) ? 'no such file; give a size (PATH:SIZE) to create it, or the path of an existing file' : `directory ${dir} does not exist; create it (mkdir -p ${dir}) or put the file in an existing directory`;
}

/**
 * Bad input, exit 2: an invalid argument, a namespace file path that does not exist, or a gateway group that refused
 * this gateway or could not be reached.
 */
function isStartInputError(err: unknown): boolean {
  const code = (err as { code?: string }).code ?? '';
  if (code === 'ENOENT' && (err as { syscall?: string }).syscall === 'open') return true;
  return code === 'NVMEOF_ERR_INVALID_ARG' || code === 'NVMEOF_ERR_ETCD_UNREACHABLE' || code.startsWith('NVMEOF_ERR_GATEWAY_');
}

function parseGatewayFlags(group: string | undefined, etcd: string | undefined, id: string | undefined): TargetArgs['gateway'] {
  if (group === undefined && etcd === undefined && id === undefined) return undefined;
  const out: NonNullable<TargetArgs['gateway']> = {};
  if (group !== undefined) out.group = group;
  if (etcd !== undefined) {
    const urls = etcd.split(',').filter((u) => u !== '');
    if (urls.length === 0) throw new ConfigError('--etcd: empty; give URL[,URL...], e.g. http://127.0.0.1:2379');
    out.etcd = urls;
  }
  if (id !== undefined) out.id = id;
  return out;
}

/** The config's gateway block with the flags applied (the flags win); the schema then checks every field. */
function gatewayConfig(cfg: TargetConfig['gateway'], flags: NonNullable<TargetArgs['gateway']>): NonNullable<TargetConfig['gateway']> {
  const group = flags.group ?? cfg?.group;
  const etcd = flags.etcd ?? cfg?.etcd;
  if (group === undefined) throw new ConfigError('--etcd/--gateway-id: need --gateway-group NAME (or gateway.group in the config)');
  if (etcd === undefined) throw new ConfigError(`--gateway-group ${group}: needs --etcd URL[,URL...] (or gateway.etcd in the config)`);
  return { ...cfg, group, etcd, ...(flags.id !== undefined ? { id: flags.id } : {}) };
}
