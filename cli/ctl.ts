// `nvme-tcp target ctl`: every management operation as a command line over the HTTP API (target/mgmt/client.ts).
import { Buffer } from 'node:buffer';
import { readFile, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import type { AnaStateName, BackendConfig, FaultConfig, HostConfig, NamespaceConfig, PortConfig, ReferralConfig, SubsystemConfig } from '../target/index.js';
import { ANA_STATE_NAMES } from '../protocol/index.js';
import { jsonErrorWithoutInput, MgmtApiError, MgmtClient } from '../target/mgmt/index.js';

const CTL_USAGE = `usage: nvme-tcp target ctl [--api URL] [--token T] <command>

  --api URL      management API base URL (default $NVME_TCP_API or http://127.0.0.1:8080)
  --token T      bearer token (default $NVME_TCP_API_TOKEN)

commands:
  health
  subsystem list
  subsystem show <nqn>
  subsystem add <nqn> [--host NQN]... [--port ID]... [--allow-any-host] [--serial S] [--model M]
                      [--max-io-queues N] [--max-queue-size N] [--cntlid-min N] [--cntlid-max N] [--no-ana]
                      | --body JSON|@FILE
  subsystem set <nqn> [--max-io-queues N] [--cntlid-min N] [--cntlid-max N]
                      (a new --max-io-queues disconnects the subsystem's controllers so hosts reconnect with it)
  subsystem remove <nqn>
  namespace list <subnqn>
  namespace add <subnqn> <nsid> (--ram SIZE | --null SIZE | --file PATH [--size SIZE])
                      [--block-size 512|4096] [--ana-group N] [--read-only] [--uuid U] [--nguid G] [--disabled]
                      | --body JSON|@FILE
  namespace enable <subnqn> <nsid>
  namespace disable <subnqn> <nsid>
  namespace remap <subnqn> <nsid> [--ram SIZE | --null SIZE | --file PATH [--size SIZE]] [--uuid U] [--nguid G]
                      | --body JSON|@FILE      (new backend and/or identifiers under the same nsid)
  namespace remove <subnqn> <nsid>
  namespace attach <subnqn> <nsid> <hostnqn>     masking: make the namespace visible to this host (the first
                                                 attach hides it from every other host)
  namespace detach <subnqn> <nsid> <hostnqn>     hide it from this host
  namespace hosts <subnqn> <nsid>                the hosts it is attached to (null: every allowed host)
  namespace reservation <subnqn> <nsid>          its reservation: type, holder, registrants, PTPL
  host list <subnqn>
  host add <subnqn> <hostnqn>
  host remove <subnqn> <hostnqn>
  host-auth list
  host-auth set <hostnqn> (--dhchap-key SECRET|@FILE|- [--dhchap-ctrl-key SECRET|@FILE]
                      [--dhchap-hash H]... [--dhchap-dhgroup G]... | --body JSON|@FILE)
  host-auth clear <hostnqn>
  port list
  port add <id> <addr> <port> [--family ipv4|ipv6] [--inline-data-size N] [--max-h2c-data N] | --body JSON|@FILE
  port remove <id>
  referral list <portid>
  referral add <portid> <addr> <port> [--family ipv4|ipv6] [--portid N]
  referral remove <portid> <addr> <port>
  ana set <portid> <grpid> <${ANA_STATE_NAMES.join('|')}>
  faults set <subnqn> [--command-latency-us N] [--connect-latency-ms N] [--fail-next COUNT:STATUS] | --clear
  controllers          every controller and queue; with target workers, each I/O queue's "worker"
  workers              worker processes: placement, state, queues, CPU, I/Os, bytes, event-loop lag, cache invalidations
  placement set <single|controller|queue|host>   placement for queues connected from now on
  placement set <single|controller|queue|host|default> --portid N
                       that port's own placement for its new queues (default: back to the target-wide one)
  config [--output FILE]
  metrics
  group status         the gateway group: members with their leases, ANA group owners, the last transitions
  group failover <grpid> [--to ID]   move an ANA group to member ID (default: the least loaded other member)
                       and keep it there until failback
  group failback <grpid>             let it return to its preferred gateway
  gateway disable|enable [ID]        drain this gateway (or member ID): hand its groups away, take none; enable undoes
`;

/** A command line that cannot be turned into a request; exit status 2. */
class UsageError extends Error {
  readonly code = 'NVMEOF_ERR_USAGE';
}

export interface CtlIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
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

const OPTIONS = {
  api: { type: 'string' },
  token: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  body: { type: 'string' },
  host: { type: 'string', multiple: true },
  port: { type: 'string', multiple: true },
  'allow-any-host': { type: 'boolean' },
  serial: { type: 'string' },
  model: { type: 'string' },
  'max-io-queues': { type: 'string' },
  'max-queue-size': { type: 'string' },
  'no-ana': { type: 'boolean' },
  'cntlid-min': { type: 'string' },
  'cntlid-max': { type: 'string' },
  disabled: { type: 'boolean' },
  ram: { type: 'string' },
  null: { type: 'string' },
  file: { type: 'string' },
  size: { type: 'string' },
  'block-size': { type: 'string' },
  'ana-group': { type: 'string' },
  'read-only': { type: 'boolean' },
  uuid: { type: 'string' },
  nguid: { type: 'string' },
  family: { type: 'string' },
  'inline-data-size': { type: 'string' },
  'max-h2c-data': { type: 'string' },
  portid: { type: 'string' },
  'command-latency-us': { type: 'string' },
  'connect-latency-ms': { type: 'string' },
  'fail-next': { type: 'string' },
  clear: { type: 'boolean' },
  'dhchap-key': { type: 'string' },
  'dhchap-ctrl-key': { type: 'string' },
  'dhchap-hash': { type: 'string', multiple: true },
  'dhchap-dhgroup': { type: 'string', multiple: true },
  output: { type: 'string', short: 'o' },
  to: { type: 'string' },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

function int(v: string | undefined, field: string): number {
  if (v === undefined) throw new UsageError(`missing ${field}`);
  const n = v.startsWith('0x') ? Number.parseInt(v.slice(2), 16) : Number(v);
  if (!Number.isInteger(n)) throw new UsageError(`${field}: "${v}" is not an integer`);
  return n;
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

async function dispatch(c: MgmtClient, pos: string[], v: Values, io: CtlIo): Promise<unknown> {
  const [noun, verb, ...rest] = pos;
  const key = verb !== undefined && ['subsystem', 'namespace', 'host', 'host-auth', 'port', 'referral', 'ana', 'faults', 'placement', 'group', 'gateway'].includes(noun ?? '') ? `${noun} ${verb}` : (noun ?? '');
  const args = key.includes(' ') ? rest : pos.slice(1);
  switch (key) {
    case 'health':
      return c.health();
    case 'subsystem list':
      return c.listSubsystems();
    case 'subsystem show':
      return c.getSubsystem(str(args[0], 'nqn'));
    case 'subsystem add':
      return c.addSubsystem(v.body !== undefined ? ((await bodyArg(v.body)) as SubsystemConfig) : subsystemFromFlags(str(args[0], 'nqn'), v));
    case 'subsystem set':
      return c.updateSubsystem(str(args[0], 'nqn'), v.body !== undefined ? ((await bodyArg(v.body)) as SubsystemConfig) : subsystemUpdateFromFlags(v));
    case 'subsystem remove':
      return c.removeSubsystem(str(args[0], 'nqn'));
    case 'namespace list':
      return c.listNamespaces(str(args[0], 'subnqn'));
    case 'namespace add':
      return c.addNamespace(
        str(args[0], 'subnqn'),
        v.body !== undefined ? ((await bodyArg(v.body)) as NamespaceConfig) : namespaceFromFlags(int(args[1], 'nsid'), v),
      );
    case 'namespace enable':
    case 'namespace disable':
      return c.updateNamespace(str(args[0], 'subnqn'), int(args[1], 'nsid'), { enabled: key === 'namespace enable' });
    case 'namespace remap':
      return c.updateNamespace(
        str(args[0], 'subnqn'),
        int(args[1], 'nsid'),
        v.body !== undefined ? ((await bodyArg(v.body)) as Partial<NamespaceConfig>) : remapFromFlags(v),
      );
    case 'namespace remove':
      return c.removeNamespace(str(args[0], 'subnqn'), int(args[1], 'nsid'));
    case 'namespace attach':
      return c.attachNamespaceHost(str(args[0], 'subnqn'), int(args[1], 'nsid'), str(args[2], 'hostnqn'));
    case 'namespace detach':
      return c.detachNamespaceHost(str(args[0], 'subnqn'), int(args[1], 'nsid'), str(args[2], 'hostnqn'));
    case 'namespace hosts':
      return c.namespaceHosts(str(args[0], 'subnqn'), int(args[1], 'nsid'));
    case 'namespace reservation':
      return c.namespaceReservation(str(args[0], 'subnqn'), int(args[1], 'nsid'));
    case 'host list':
      return c.listHosts(str(args[0], 'subnqn'));
    case 'host add':
      return c.addHost(str(args[0], 'subnqn'), str(args[1], 'hostnqn'));
    case 'host remove':
      return c.removeHost(str(args[0], 'subnqn'), str(args[1], 'hostnqn'));
    case 'host-auth list':
      return c.listHostAuth();
    case 'host-auth set': {
      const nqn = str(args[0], 'hostnqn');
      const h = v.body !== undefined ? { nqn, ...((await bodyArg(v.body)) as Partial<HostConfig>) } : await hostAuthFromFlags(nqn, v, io);
      return c.setHostAuth(h);
    }
    case 'host-auth clear':
      return c.clearHostAuth(str(args[0], 'hostnqn'));
    case 'port list':
      return c.listPorts();
    case 'port add':
      return c.addPort(v.body !== undefined ? ((await bodyArg(v.body)) as PortConfig) : portFromFlags(args, v));
    case 'port remove':
      return c.removePort(int(args[0], 'port id'));
    case 'referral list':
      return c.listReferrals(int(args[0], 'port id'));
    case 'referral add': {
      const r: ReferralConfig = { addr: str(args[1], 'addr'), port: int(args[2], 'tcp port') };
      const fam = family(v.family);
      if (fam !== undefined) r.family = fam;
      if (v.portid !== undefined) r.portId = int(v.portid, '--portid');
      return c.addReferral(int(args[0], 'port id'), r);
    }
    case 'referral remove':
      return c.removeReferral(int(args[0], 'port id'), str(args[1], 'addr'), int(args[2], 'tcp port'));
    case 'ana set': {
      const state = str(args[2], 'state');
      if (!(ANA_STATE_NAMES as readonly string[]).includes(state)) throw new UsageError(`state must be one of ${ANA_STATE_NAMES.join(', ')}`);
      return c.setAnaState(int(args[0], 'port id'), int(args[1], 'ANA group id'), state as AnaStateName);
    }
    case 'faults set':
      return c.setFaults(str(args[0], 'subnqn'), faultsFromFlags(v));
    case 'controllers':
      return c.controllers();
    case 'workers':
      return c.workers();
    case 'placement set': {
      const p = str(args[0], 'placement');
      if (v.portid !== undefined) return c.setPortPlacement(int(v.portid, '--portid'), p === 'default' ? null : p);
      return c.setPlacement(p);
    }
    case 'config': {
      const cfg = await c.config();
      if (v.output === undefined) return cfg;
      await writeFile(v.output, `${JSON.stringify(cfg, null, 2)}\n`);
      io.stderr(`wrote ${v.output}\n`);
      return undefined;
    }
    case 'metrics':
      return c.metrics();
    case 'group status':
    case 'group failover':
    case 'group failback':
    case 'gateway disable':
    case 'gateway enable':
      return groupCommand(c, key, args, v);
    case '':
      throw new UsageError('missing command');
    default:
      throw new UsageError(`unknown command "${pos.join(' ')}"`);
  }
}

/** Runs `ctl` with the arguments after "ctl"; resolves to the exit status (0 ok, 1 API/network error, 2 usage). */
export async function runCtlCli(argv: readonly string[], io: CtlIo = defaultIo): Promise<number> {
  let values: Values;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true }));
  } catch (err) {
    io.stderr(`${(err as Error).message}\n\n${CTL_USAGE}`);
    return 2;
  }
  if (values.help === true) {
    io.stdout(CTL_USAGE);
    return 0;
  }
  const token = values.token ?? io.env.NVME_TCP_API_TOKEN;
  const client = new MgmtClient({
    baseUrl: values.api ?? io.env.NVME_TCP_API ?? 'http://127.0.0.1:8080',
    ...(token !== undefined && token !== '' ? { token } : {}),
    ...(io.fetch !== undefined ? { fetch: io.fetch } : {}),
  });
  try {
    const out = await dispatch(client, positionals, values, io);
    if (typeof out === 'string') io.stdout(out.endsWith('\n') ? out : `${out}\n`);
    else if (out !== undefined) io.stdout(`${JSON.stringify(out, null, 2)}\n`);
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr(`${err.message}\n\n${CTL_USAGE}`);
      return 2;
    }
    if (err instanceof MgmtApiError) {
      io.stderr(`${err.message}\n`);
      return 1;
    }
    const e = err as Error & { cause?: { message?: string } };
    io.stderr(`request failed: ${e.message}${e.cause?.message !== undefined ? ` (${e.cause.message})` : ''}\n`);
    return 1;
  }
}

/** `ctl group ...` and `ctl gateway disable|enable` (docs/gateway-groups.md). */
function groupCommand(c: MgmtClient, key: string, args: string[], v: Values): Promise<unknown> {
  if (key === 'group status') return c.groupStatus();
  if (key === 'group failover') return c.groupFailover(int(args[0], 'ANA group id'), v.to);
  if (key === 'group failback') return c.groupFailback(int(args[0], 'ANA group id'));
  return c.gatewayDrain(key === 'gateway disable', args[0]);
}
