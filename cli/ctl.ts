// `nvme-tcp target ctl`: every management operation as a command line over the HTTP API (target/mgmt/client.ts).
// One commander command per operation (its own --help), -o normal (aligned tables, ISO times, hex keys) or json.
import { Buffer } from 'node:buffer';
import { readFile, writeFile } from 'node:fs/promises';
import { Option, type Command } from 'commander';
import { parseFaultRule, parseFaultRules, type FaultRule, type FaultRuleView } from '../target/index.js';
import type { AnaStateName, BackendConfig, FaultConfig, HostConfig, NamespaceConfig, PortConfig, ReferralConfig, SubsystemConfig } from '../target/index.js';
import { ANA_STATE_NAMES } from '../protocol/index.js';
import { jsonErrorWithoutInput, MgmtApiError, MgmtClient } from '../target/mgmt/index.js';
import { PLACEMENTS } from '../target/workers/index.js';
import { hostPortArg, integer, newCommand, outputFormatOption, parseFailure, subcommand, UsageError, type CliIo } from './args.js';
import { formatNormal } from './ctl-format.js';

export interface CtlIo extends CliIo {
  env: NodeJS.ProcessEnv;
  fetch?: typeof globalThis.fetch;
  /** Source for `--dhchap-key -` (default: process stdin). */
  readStdin?: () => Promise<string>;
}

const defaultIo: CtlIo = {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
  env: process.env,
};

/** The flags, by long name as the request builders below read them. */
interface Values {
  body?: string;
  host?: string[];
  port?: string[];
  'allow-any-host'?: boolean;
  serial?: string;
  model?: string;
  'max-io-queues'?: string;
  'max-queue-size'?: string;
  'no-ana'?: boolean;
  'cntlid-min'?: string;
  'cntlid-max'?: string;
  disabled?: boolean;
  ram?: string;
  null?: string;
  file?: string;
  size?: string;
  'block-size'?: string;
  'ana-group'?: string;
  'read-only'?: boolean;
  uuid?: string;
  nguid?: string;
  family?: string;
  'inline-data-size'?: string;
  'max-h2c-data'?: string;
  portid?: string;
  'command-latency-us'?: string;
  'connect-latency-ms'?: string;
  'fail-next'?: string;
  clear?: boolean;
  'dhchap-key'?: string;
  'dhchap-ctrl-key'?: string;
  'dhchap-hash'?: string[];
  'dhchap-dhgroup'?: string[];
  output?: string;
  to?: string;
}

/** Every flag an operation may take: commander spec and help, defined once. */
const FLAGS: Readonly<Record<keyof Values, string>> = {
  body: '--body <json>|the whole request body: JSON, or @FILE',
  host: '--host <hostnqn...>|allow this host (repeatable)',
  port: '--port <id...>|export on this port id (repeatable; default every port)',
  'allow-any-host': '--allow-any-host|any host may connect',
  serial: '--serial <s>|serial number',
  model: '--model <m>|model number',
  'max-io-queues': '--max-io-queues <n>|I/O queues a controller may have (a new value disconnects its controllers)',
  'max-queue-size': '--max-queue-size <n>|I/O queue depth limit',
  'no-ana': '--no-ana|no ANA reporting',
  'cntlid-min': '--cntlid-min <n>|lowest controller ID',
  'cntlid-max': '--cntlid-max <n>|highest controller ID',
  disabled: '--disabled|add it disabled',
  ram: '--ram <size>|a RAM backend of this size (64M, 1.5G)',
  null: '--null <size>|a null backend: reads zeroes, drops writes',
  file: '--file <path>|a file backend',
  size: '--size <size>|with --file: create or extend to this size',
  'block-size': '--block-size <n>|512 or 4096',
  'ana-group': '--ana-group <n>|ANA group',
  'read-only': '--read-only|refuse writes',
  uuid: '--uuid <u>|namespace UUID',
  nguid: '--nguid <g>|namespace NGUID',
  family: '--family <f>|ipv4 or ipv6',
  'inline-data-size': '--inline-data-size <n>|in-capsule data bytes',
  'max-h2c-data': '--max-h2c-data <n>|largest H2CData PDU',
  portid: '--portid <n>|port id (referral: the referred port; placement: that port only)',
  'command-latency-us': '--command-latency-us <n>|delay every command',
  'connect-latency-ms': '--connect-latency-ms <n>|delay every Connect',
  'fail-next': '--fail-next <count:status>|fail the next COUNT commands with STATUS',
  clear: '--clear|remove every fault',
  'dhchap-key': '--dhchap-key <secret>|host key: SECRET, @FILE or - (stdin)',
  'dhchap-ctrl-key': '--dhchap-ctrl-key <secret>|controller key: SECRET, @FILE or -',
  'dhchap-hash': '--dhchap-hash <h...>|allowed hashes',
  'dhchap-dhgroup': '--dhchap-dhgroup <g...>|allowed DH groups',
  output: '--output <file>|write the config there instead of printing it',
  to: '--to <id>|the member to move the ANA group to (default: the least loaded other member)',
};

function int(v: string | undefined, field: string): number {
  if (v === undefined) throw new UsageError(`missing ${field}`);
  return integer(field, v, Number.MIN_SAFE_INTEGER);
}

function str(v: string | undefined, field: string): string {
  if (v === undefined || v === '') throw new UsageError(`missing ${field}`);
  return v;
}

/** Numbers in size flags are bytes; strings keep their suffix for the API's size parser. */
const size = (v: string): number | string => (/^\d+$/.test(v) ? Number(v) : v);

async function bodyArg(v: string): Promise<unknown> {
  const text = v.startsWith('@') ? await readFile(v.slice(1), 'utf8') : v;
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    // Without V8's quote of the input: a host-auth body holds secrets.
    throw new UsageError(`--body is not JSON: ${jsonErrorWithoutInput(err)}`);
  }
}

/** `faults add`'s operand: JSON or @FILE, validated here so a bad rule is one line naming its field (exit 2). */
async function faultRulesArg(v: string): Promise<FaultRule[]> {
  const text = v.startsWith('@') ? await readFile(v.slice(1), 'utf8') : v;
  let json: unknown;
  try {
    json = JSON.parse(text) as unknown;
  } catch (err) {
    throw new UsageError(`rule is not JSON: ${jsonErrorWithoutInput(err)}`);
  }
  try {
    return Array.isArray(json) || (typeof json === 'object' && json !== null && 'rules' in json) ? parseFaultRules(json, 'rule') : [parseFaultRule(json, 'rule')];
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** `faults list`: the views as the API gives them; in normal output one row per rule, match and schedule as JSON. */
function faultRows(list: unknown): unknown {
  if (!Array.isArray(list)) return list;
  return (list as FaultRuleView[]).map((r) => ({
    id: r.id,
    action: JSON.stringify(r.rule.action),
    match: JSON.stringify(r.rule.match ?? {}),
    schedule: JSON.stringify(r.rule.schedule ?? {}),
    matches: r.matches,
    hits: r.hits,
  }));
}

function subsystemFromFlags(nqn: string, v: Values): SubsystemConfig {
  const s: SubsystemConfig = { nqn };
  if (v.host !== undefined) s.hosts = v.host;
  if (v.port !== undefined) s.ports = v.port.map((p) => int(p, '--port'));
  if (v['allow-any-host'] === true) s.allowAnyHost = true;
  if (v.serial !== undefined) s.serial = v.serial;
  if (v.model !== undefined) s.model = v.model;
  if (v['max-io-queues'] !== undefined) s.maxIoQueues = int(v['max-io-queues'], '--max-io-queues');
  if (v['max-queue-size'] !== undefined) s.maxQueueSize = int(v['max-queue-size'], '--max-queue-size');
  if (v['no-ana'] === true) s.ana = false;
  if (v['cntlid-min'] !== undefined) s.cntlidMin = int(v['cntlid-min'], '--cntlid-min');
  if (v['cntlid-max'] !== undefined) s.cntlidMax = int(v['cntlid-max'], '--cntlid-max');
  return s;
}

function subsystemUpdateFromFlags(v: Values): Pick<SubsystemConfig, 'maxIoQueues' | 'cntlidMin' | 'cntlidMax'> {
  const p: Pick<SubsystemConfig, 'maxIoQueues' | 'cntlidMin' | 'cntlidMax'> = {};
  if (v['max-io-queues'] !== undefined) p.maxIoQueues = int(v['max-io-queues'], '--max-io-queues');
  if (v['cntlid-min'] !== undefined) p.cntlidMin = int(v['cntlid-min'], '--cntlid-min');
  if (v['cntlid-max'] !== undefined) p.cntlidMax = int(v['cntlid-max'], '--cntlid-max');
  if (Object.keys(p).length === 0) throw new UsageError('subsystem set needs at least one of --max-io-queues N, --cntlid-min N, --cntlid-max N');
  return p;
}

/** `namespace remap` flags: a new backend and/or identifiers; at least one. */
function remapFromFlags(v: Values): Partial<NamespaceConfig> {
  const p: Partial<NamespaceConfig> = {};
  const kinds = [v.ram, v.null, v.file].filter((x) => x !== undefined);
  if (kinds.length > 1) throw new UsageError('namespace remap takes at most one of --ram SIZE, --null SIZE, --file PATH');
  if (kinds.length === 1) p.backend = namespaceFromFlags(1, v).backend;
  if (v.uuid !== undefined) p.uuid = v.uuid;
  if (v.nguid !== undefined) p.nguid = v.nguid;
  if (Object.keys(p).length === 0) throw new UsageError('namespace remap needs a new backend (--ram/--null/--file) or --uuid/--nguid');
  return p;
}

function namespaceFromFlags(nsid: number, v: Values): NamespaceConfig {
  const kinds = [v.ram, v.null, v.file].filter((x) => x !== undefined);
  if (kinds.length !== 1) throw new UsageError('namespace add needs exactly one of --ram SIZE, --null SIZE, --file PATH');
  let backend: BackendConfig;
  if (v.ram !== undefined) backend = { type: 'ram', size: size(v.ram) };
  else if (v.null !== undefined) backend = { type: 'null', size: size(v.null) };
  else {
    backend = { type: 'file', path: str(v.file, '--file') };
    if (v.size !== undefined) backend.size = size(v.size);
  }
  const ns: NamespaceConfig = { nsid, backend };
  if (v['block-size'] !== undefined) {
    const bs = int(v['block-size'], '--block-size');
    if (bs !== 512 && bs !== 4096) throw new UsageError('--block-size must be 512 or 4096');
    ns.blockSize = bs;
  }
  if (v['ana-group'] !== undefined) ns.anaGroup = int(v['ana-group'], '--ana-group');
  if (v['read-only'] === true) ns.readOnly = true;
  if (v.uuid !== undefined) ns.uuid = v.uuid;
  if (v.nguid !== undefined) ns.nguid = v.nguid;
  if (v.disabled === true) ns.enabled = false;
  return ns;
}

function family(v: string | undefined): 'ipv4' | 'ipv6' | undefined {
  if (v === undefined) return undefined;
  if (v !== 'ipv4' && v !== 'ipv6') throw new UsageError('--family must be ipv4 or ipv6');
  return v;
}

function portFromFlags(pos: string[], v: Values): PortConfig {
  const p: PortConfig = { id: int(pos[0], 'port id'), addr: str(pos[1], 'addr'), port: int(pos[2], 'tcp port') };
  const fam = family(v.family);
  if (fam !== undefined) p.family = fam;
  if (v['inline-data-size'] !== undefined) p.inlineDataSize = int(v['inline-data-size'], '--inline-data-size');
  if (v['max-h2c-data'] !== undefined) p.maxH2CData = int(v['max-h2c-data'], '--max-h2c-data');
  return p;
}

function faultsFromFlags(v: Values): FaultConfig {
  if (v.clear === true) return {};
  const f: FaultConfig = {};
  if (v['command-latency-us'] !== undefined) f.commandLatencyUs = int(v['command-latency-us'], '--command-latency-us');
  if (v['connect-latency-ms'] !== undefined) f.connectLatencyMs = int(v['connect-latency-ms'], '--connect-latency-ms');
  if (v['fail-next'] !== undefined) {
    const [count, status] = v['fail-next'].split(':');
    f.failNext = { count: int(count, '--fail-next COUNT'), status: int(status, '--fail-next STATUS') };
  }
  if (Object.keys(f).length === 0) throw new UsageError('faults set needs at least one fault flag, or --clear');
  return f;
}

/**
 * A secret flag value: the secret itself, @FILE (first line of the file), or "-" (first line of stdin), so it
 * need not sit in the shell history or the process list.
 */
async function secretArg(v: string, flag: string, io: CtlIo): Promise<string> {
  let text = v;
  if (v === '-') text = await (io.readStdin ?? readStdin)();
  else if (v.startsWith('@')) text = await readFile(v.slice(1), 'utf8');
  const line = text.split(/\r?\n/, 1)[0]?.trim() ?? '';
  if (line === '') throw new UsageError(`${flag}: empty secret`);
  return line;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function hostAuthFromFlags(hostnqn: string, v: Values, io: CtlIo): Promise<HostConfig> {
  if (v['dhchap-key'] === undefined) throw new UsageError('host-auth set needs --dhchap-key SECRET (or --body JSON)');
  const h: HostConfig = { nqn: hostnqn, dhchapKey: await secretArg(v['dhchap-key'], '--dhchap-key', io) };
  if (v['dhchap-ctrl-key'] !== undefined) h.dhchapCtrlKey = await secretArg(v['dhchap-ctrl-key'], '--dhchap-ctrl-key', io);
  if (v['dhchap-hash'] !== undefined) h.dhchapHash = v['dhchap-hash'];
  if (v['dhchap-dhgroup'] !== undefined) h.dhchapDhgroup = v['dhchap-dhgroup'];
  return h;
}


type Run = (c: MgmtClient, a: string[], v: Values, io: CtlIo) => Promise<unknown>;

/** One management operation: "noun verb", its operands, the flags it takes, what it sends. */
interface Op {
  path: string;
  args: string;
  help: string;
  flags?: (keyof Values)[];
  run: Run;
}

const body = async <T>(v: Values, fromFlags: () => T | Promise<T>): Promise<T> => (v.body !== undefined ? ((await bodyArg(v.body)) as T) : fromFlags());
const BACKEND: (keyof Values)[] = ['ram', 'null', 'file', 'size', 'uuid', 'nguid', 'body'];

const OPS: readonly Op[] = [
  { path: 'health', args: '', help: 'is the target up: ports, subsystems, controllers', run: (c) => c.health() },
  { path: 'subsystem list', args: '', help: 'every subsystem', run: (c) => c.listSubsystems() },
  { path: 'subsystem show', args: '<nqn>', help: 'one subsystem', run: (c, a) => c.getSubsystem(str(a[0], 'nqn')) },
  {
    path: 'subsystem add',
    args: '<nqn>',
    help: 'add a subsystem',
    flags: ['host', 'port', 'allow-any-host', 'serial', 'model', 'max-io-queues', 'max-queue-size', 'cntlid-min', 'cntlid-max', 'no-ana', 'body'],
    run: async (c, a, v) => c.addSubsystem(await body(v, () => subsystemFromFlags(str(a[0], 'nqn'), v))),
  },
  {
    path: 'subsystem set',
    args: '<nqn>',
    help: 'change a subsystem (a new --max-io-queues disconnects its controllers so hosts reconnect with it)',
    flags: ['max-io-queues', 'cntlid-min', 'cntlid-max', 'body'],
    run: async (c, a, v) => c.updateSubsystem(str(a[0], 'nqn'), await body(v, () => subsystemUpdateFromFlags(v))),
  },
  { path: 'subsystem remove', args: '<nqn>', help: 'remove a subsystem', run: (c, a) => c.removeSubsystem(str(a[0], 'nqn')) },
  { path: 'namespace list', args: '<subnqn>', help: "a subsystem's namespaces", run: (c, a) => c.listNamespaces(str(a[0], 'subnqn')) },
  {
    path: 'namespace add',
    args: '<subnqn> <nsid>',
    help: 'add a namespace: --ram SIZE | --null SIZE | --file PATH [--size SIZE]',
    flags: [...BACKEND, 'block-size', 'ana-group', 'read-only', 'disabled'],
    run: async (c, a, v) => c.addNamespace(str(a[0], 'subnqn'), await body(v, () => namespaceFromFlags(int(a[1], 'nsid'), v))),
  },
  { path: 'namespace enable', args: '<subnqn> <nsid>', help: 'enable a namespace', run: (c, a) => c.updateNamespace(str(a[0], 'subnqn'), int(a[1], 'nsid'), { enabled: true }) },
  { path: 'namespace disable', args: '<subnqn> <nsid>', help: 'disable a namespace', run: (c, a) => c.updateNamespace(str(a[0], 'subnqn'), int(a[1], 'nsid'), { enabled: false }) },
  {
    path: 'namespace remap',
    args: '<subnqn> <nsid>',
    help: 'new backend and/or identifiers under the same nsid',
    flags: BACKEND,
    run: async (c, a, v) => c.updateNamespace(str(a[0], 'subnqn'), int(a[1], 'nsid'), await body(v, () => remapFromFlags(v))),
  },
  { path: 'namespace remove', args: '<subnqn> <nsid>', help: 'remove a namespace', run: (c, a) => c.removeNamespace(str(a[0], 'subnqn'), int(a[1], 'nsid')) },
  {
    path: 'namespace attach',
    args: '<subnqn> <nsid> <hostnqn>',
    help: 'masking: make the namespace visible to this host (the first attach hides it from every other host)',
    run: (c, a) => c.attachNamespaceHost(str(a[0], 'subnqn'), int(a[1], 'nsid'), str(a[2], 'hostnqn')),
  },
  { path: 'namespace detach', args: '<subnqn> <nsid> <hostnqn>', help: 'hide it from this host', run: (c, a) => c.detachNamespaceHost(str(a[0], 'subnqn'), int(a[1], 'nsid'), str(a[2], 'hostnqn')) },
  { path: 'namespace hosts', args: '<subnqn> <nsid>', help: 'the hosts it is attached to (null: every allowed host)', run: (c, a) => c.namespaceHosts(str(a[0], 'subnqn'), int(a[1], 'nsid')) },
  { path: 'namespace reservation', args: '<subnqn> <nsid>', help: 'its reservation: type, holder, registrants, PTPL', run: (c, a) => c.namespaceReservation(str(a[0], 'subnqn'), int(a[1], 'nsid')) },
  { path: 'host list', args: '<subnqn>', help: "a subsystem's allowed hosts", run: (c, a) => c.listHosts(str(a[0], 'subnqn')) },
  { path: 'host add', args: '<subnqn> <hostnqn>', help: 'allow a host', run: (c, a) => c.addHost(str(a[0], 'subnqn'), str(a[1], 'hostnqn')) },
  { path: 'host remove', args: '<subnqn> <hostnqn>', help: 'disallow a host', run: (c, a) => c.removeHost(str(a[0], 'subnqn'), str(a[1], 'hostnqn')) },
  { path: 'host-auth list', args: '', help: 'hosts with DH-HMAC-CHAP keys (keys redacted)', run: (c) => c.listHostAuth() },
  {
    path: 'host-auth set',
    args: '<hostnqn>',
    help: "set a host's DH-HMAC-CHAP keys",
    flags: ['dhchap-key', 'dhchap-ctrl-key', 'dhchap-hash', 'dhchap-dhgroup', 'body'],
    run: async (c, a, v, io) => {
      const nqn = str(a[0], 'hostnqn');
      return c.setHostAuth(v.body !== undefined ? { nqn, ...((await bodyArg(v.body)) as Partial<HostConfig>) } : await hostAuthFromFlags(nqn, v, io));
    },
  },
  { path: 'host-auth clear', args: '<hostnqn>', help: "clear a host's keys", run: (c, a) => c.clearHostAuth(str(a[0], 'hostnqn')) },
  { path: 'port list', args: '', help: 'every port', run: (c) => c.listPorts() },
  {
    path: 'port add',
    args: '<id> <addr> <port>',
    help: 'add a port',
    flags: ['family', 'inline-data-size', 'max-h2c-data', 'body'],
    run: async (c, a, v) => c.addPort(await body(v, () => portFromFlags(a, v))),
  },
  { path: 'port remove', args: '<id>', help: 'remove a port', run: (c, a) => c.removePort(int(a[0], 'port id')) },
  { path: 'referral list', args: '<portid>', help: "a port's discovery referrals", run: (c, a) => c.listReferrals(int(a[0], 'port id')) },
  {
    path: 'referral add',
    args: '<portid> <addr> <port>',
    help: 'add a referral',
    flags: ['family', 'portid'],
    run: (c, a, v) => {
      const r: ReferralConfig = { addr: str(a[1], 'addr'), port: int(a[2], 'tcp port') };
      const fam = family(v.family);
      if (fam !== undefined) r.family = fam;
      if (v.portid !== undefined) r.portId = int(v.portid, '--portid');
      return c.addReferral(int(a[0], 'port id'), r);
    },
  },
  { path: 'referral remove', args: '<portid> <addr> <port>', help: 'remove a referral', run: (c, a) => c.removeReferral(int(a[0], 'port id'), str(a[1], 'addr'), int(a[2], 'tcp port')) },
  {
    path: 'ana set',
    args: '<portid> <grpid> <state>',
    help: `set an ANA group's state on a port: ${ANA_STATE_NAMES.join('|')}`,
    run: (c, a) => {
      const state = str(a[2], 'state');
      if (!(ANA_STATE_NAMES as readonly string[]).includes(state)) throw new UsageError(`state ${state}: not an ANA state; use one of ${ANA_STATE_NAMES.join(', ')}`);
      return c.setAnaState(int(a[0], 'port id'), int(a[1], 'ANA group id'), state as AnaStateName);
    },
  },
  {
    path: 'faults set',
    args: '<subnqn>',
    help: 'inject faults into a subsystem (or --clear them)',
    flags: ['command-latency-us', 'connect-latency-ms', 'fail-next', 'clear'],
    run: (c, a, v) => c.setFaults(str(a[0], 'subnqn'), faultsFromFlags(v)),
  },
  {
    path: 'faults add',
    args: '<rule>',
    help: 'arm fault rules (docs/faults.md): one rule, a list or {"rules": [...]}, as JSON or @FILE',
    run: async (c, a) => {
      const rules = await faultRulesArg(str(a[0], 'rule'));
      const added: unknown[] = [];
      for (const r of rules) added.push(await c.addFaultRule(r));
      return added;
    },
  },
  { path: 'faults list', args: '', help: 'the armed fault rules with their match and hit counts (-o json: the rules in full)', run: async (c) => faultRows(await c.listFaultRules()) },
  {
    path: 'faults clear',
    args: '[id]',
    help: 'disarm one fault rule, or every one',
    run: (c, a) => (a[0] !== undefined ? c.removeFaultRule(a[0]) : c.clearFaultRules()),
  },
  { path: 'controllers', args: '', help: 'every controller and queue; with target workers, each I/O queue\'s "worker"', run: (c) => c.controllers() },
  { path: 'workers', args: '', help: 'worker processes: placement, state, queues, CPU, I/Os, bytes, event-loop lag', run: (c) => c.workers() },
  {
    path: 'placement set',
    args: '<placement>',
    help: `placement for queues connected from now on: ${PLACEMENTS.join('|')} (with --portid: that port's, or default)`,
    flags: ['portid'],
    run: (c, a, v) => {
      const p = str(a[0], 'placement');
      if (v.portid !== undefined) return c.setPortPlacement(int(v.portid, '--portid'), p === 'default' ? null : p);
      return c.setPlacement(p);
    },
  },
  {
    path: 'config',
    args: '',
    help: "the running configuration, as a config file (always JSON)",
    flags: ['output'],
    run: async (c, _a, v, io) => {
      const cfg = await c.config();
      if (v.output === undefined) return { json: cfg };
      await writeFile(v.output, `${JSON.stringify(cfg, null, 2)}\n`);
      io.stderr(`wrote ${v.output}\n`);
      return undefined;
    },
  },
  { path: 'metrics', args: '', help: 'Prometheus metrics (text)', run: (c) => c.metrics() },
  // Gateway groups (docs/gateway-groups.md).
  { path: 'group status', args: '', help: 'the gateway group: members with their leases, ANA group owners, the last transitions', run: (c) => c.groupStatus() },
  {
    path: 'group failover',
    args: '<grpid>',
    help: 'move an ANA group to another member and keep it there until failback',
    flags: ['to'],
    run: (c, a, v) => c.groupFailover(int(a[0], 'ANA group id'), v.to),
  },
  { path: 'group failback', args: '<grpid>', help: 'let an ANA group return to its preferred gateway', run: (c, a) => c.groupFailback(int(a[0], 'ANA group id')) },
  { path: 'gateway disable', args: '[id]', help: 'drain this gateway (or member ID): hand its groups away, take none', run: (c, a) => c.gatewayDrain(true, a[0]) },
  { path: 'gateway enable', args: '[id]', help: 'undo gateway disable', run: (c, a) => c.gatewayDrain(false, a[0]) },
];

/** The commander tree: one command per operation under its noun; picks the operation and its operands. */
function ctlCommand(io: CtlIo, pick: (op: Op, args: string[], v: Values) => void): Command {
  const root = newCommand('nvme-tcp target ctl', io, 'manage a running target over its HTTP management API')
    .option('--api <url>', 'the API: ADDR:PORT or URL (default $NVME_TCP_API or 127.0.0.1:8080)')
    .option('--token <t>', 'bearer token (default $NVME_TCP_API_TOKEN)')
    .addOption(outputFormatOption());
  const nouns = new Map<string, Command>();
  for (const op of OPS) {
    const [noun = '', verb] = op.path.split(' ');
    let parent = root;
    if (verb !== undefined) {
      parent = nouns.get(noun) ?? subcommand(root, noun, `${noun} operations`, io);
      nouns.set(noun, parent);
    }
    const c = subcommand(parent, verb ?? noun, op.help, io);
    // With --body the operands may be in the body: optional for commander, checked by the operation.
    if (op.args !== '') c.arguments(op.flags?.includes('body') === true ? op.args.replace(/<([^>]+)>/g, '[$1]') : op.args);
    for (const f of op.flags ?? []) {
      const [spec = '', help = ''] = FLAGS[f].split('|');
      // "<x...>": repeatable (--host a --host b), not commander's variadic, which would swallow the words after it.
      const o = new Option(spec.replace('...>', '>'), help);
      if (spec.endsWith('...>')) o.argParser((x: string, prev: string[] | undefined) => [...(prev ?? []), x]);
      c.addOption(o);
    }
    c.action((...a: unknown[]) => {
      const cmd = a[a.length - 1] as Command;
      pick(op, cmd.args, kebab(cmd));
    });
  }
  return root;
}

/** commander's camelCase values under the long flag names the request builders read. */
function kebab(cmd: Command): Values {
  const out: Record<string, unknown> = {};
  const v = cmd.opts();
  for (const o of cmd.options) {
    const long = o.long?.replace(/^--(no-)?/, '') ?? '';
    const name = o.negate ? `no-${long}` : long;
    const val = v[o.attributeName()];
    if (o.negate) {
      if (val === false) out[name] = true;
    } else if (val !== undefined) out[name] = val;
  }
  return out as Values;
}

/** --api as `target --api` takes it (ADDR:PORT), or a URL. */
function apiBase(api: string): string {
  if (/^https?:\/\//.test(api)) return api;
  const hp = hostPortArg('api', api);
  return `http://${hp.addr.includes(':') ? `[${hp.addr}]` : hp.addr}:${hp.port}`;
}

/** Runs `ctl` with the arguments after "ctl"; resolves to the exit status (0 ok, 1 API/network error, 2 usage). */
export async function runCtlCli(argv: readonly string[], io: CtlIo = defaultIo): Promise<number> {
  let picked: { op: Op; args: string[]; v: Values } | undefined;
  const root = ctlCommand(io, (op, args, v) => (picked = { op, args, v }));
  try {
    root.parse([...argv], { from: 'user' });
    if (picked === undefined) return 0;
    const g = root.opts<{ api?: string; token?: string; outputFormat: 'normal' | 'json' }>();
    const token = g.token ?? io.env.NVME_TCP_API_TOKEN;
    const client = new MgmtClient({
      baseUrl: apiBase(g.api ?? io.env.NVME_TCP_API ?? '127.0.0.1:8080'),
      ...(token !== undefined && token !== '' ? { token } : {}),
      ...(io.fetch !== undefined ? { fetch: io.fetch } : {}),
    });
    const out = await picked.op.run(client, picked.args, picked.v, io);
    print(out, g.outputFormat, io);
    return 0;
  } catch (err) {
    return ctlFailure(err, io);
  }
}

function print(out: unknown, fmt: 'normal' | 'json', io: CtlIo): void {
  if (out === undefined) return;
  if (typeof out === 'string') io.stdout(out.endsWith('\n') ? out : `${out}\n`);
  else if (typeof out === 'object' && out !== null && 'json' in out && Object.keys(out).length === 1) io.stdout(`${JSON.stringify((out as { json: unknown }).json, null, 2)}\n`);
  else io.stdout(fmt === 'json' ? `${JSON.stringify(out, null, 2)}\n` : formatNormal(out));
}

function ctlFailure(err: unknown, io: CtlIo): number {
  if (err instanceof UsageError || (err as { name?: string }).name === 'CommanderError') return parseFailure(err, io, 'nvme-tcp target ctl');
  if (err instanceof MgmtApiError) {
    io.stderr(`nvme-tcp target ctl: ${err.message}\n`);
    return 1;
  }
  const e = err as Error & { cause?: { message?: string } };
  io.stderr(`nvme-tcp target ctl: request failed: ${e.message}${e.cause?.message !== undefined ? ` (${e.cause.message})` : ''}\n`);
  return 1;
}
