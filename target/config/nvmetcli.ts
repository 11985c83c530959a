// Import of the kernel target's saved configuration (`nvmetcli save` → /etc/nvmet/config.json) into a
// TargetConfig. The file mirrors configfs: ports/<id>/addr_*, param_*, subsystems/, referrals/, ana_groups/;
// subsystems/<nqn>/attr_*, allowed_hosts/, namespaces/<nsid>/device_*; hosts/<nqn>.
import { readFile, stat } from 'node:fs/promises';
import { z } from 'zod';
import { ANA_STATE_NAMES } from '../../protocol/index.js';
import { NVME_VS } from '../core/controller.js';
import { errnoText } from './load.js';
import { ConfigError, parseTargetConfig, parseWith } from './schema.js';
import type { AnaStateName, HostConfig, NamespaceConfig, PortConfig, ReferralConfig, SubsystemConfig, TargetConfig } from '../model/config.js';

// nvmetcli writes attribute values as the strings configfs returns; numbers appear for ids and enable.
const attrValue = z.union([z.string(), z.number(), z.boolean(), z.null()]);
const attrs = z.record(z.string(), attrValue);

const addrSchema = z.looseObject({
  adrfam: z.string().optional(),
  traddr: z.string().optional(),
  treq: z.string().optional(),
  tsas: z.string().optional(),
  trsvcid: z.union([z.string(), z.number()]).optional(),
  trtype: z.string().optional(),
  portid: z.union([z.string(), z.number()]).optional(),
});

const nvmetcliSchema = z.looseObject({
  // configfs hosts/<nqn>/dhchap_{key,ctrl_key,hash,dhgroup}: flat as the attribute files are named, or grouped
  // ("dhchap": {"key": ...}) as CFSNode.dump() writes an attribute group.
  hosts: z
    .array(
      z.looseObject({
        nqn: z.string(),
        dhchap: attrs.optional(),
        dhchap_key: attrValue.optional(),
        dhchap_ctrl_key: attrValue.optional(),
        dhchap_hash: attrValue.optional(),
        dhchap_dhgroup: attrValue.optional(),
      }),
    )
    .optional(),
  ports: z
    .array(
      z.looseObject({
        portid: z.union([z.number().int(), z.string().regex(/^\d+$/)]),
        addr: addrSchema,
        param: attrs.optional(),
        subsystems: z.array(z.string()).optional(),
        referrals: z.array(z.looseObject({ name: z.string().optional(), addr: addrSchema, enable: attrValue.optional() })).optional(),
        ana_groups: z.array(z.looseObject({ grpid: z.union([z.number().int(), z.string()]), ana: attrs.optional() })).optional(),
      }),
    )
    .optional(),
  subsystems: z
    .array(
      z.looseObject({
        nqn: z.string(),
        attr: attrs.optional(),
        allowed_hosts: z.array(z.string()).optional(),
        namespaces: z
          .array(
            z.looseObject({
              nsid: z.union([z.number().int(), z.string().regex(/^\d+$/)]),
              enable: attrValue.optional(),
              device: attrs.optional(),
              ana_grpid: z.union([z.number().int(), z.string()]).optional(),
            }),
          )
          .optional(),
        passthru: z.array(attrs.or(z.looseObject({}))).optional(),
      }),
    )
    .optional(),
});

export interface NvmetcliImport {
  config: TargetConfig;
  /** Things the import left out or changed (non-tcp ports, unsupported attributes). */
  warnings: string[];
}

/** What importNvmetcli needs to know about a device path; injectable so tests need no block device. */
export type PathKind = 'file' | 'block' | 'missing' | 'other';

export interface NvmetcliImportOptions {
  pathKind?: (path: string) => Promise<PathKind>;
}

async function statPathKind(path: string): Promise<PathKind> {
  try {
    const st = await stat(path);
    if (st.isFile()) return 'file';
    if (st.isBlockDevice()) return 'block';
    return 'other';
  } catch (err) {
    if (err && typeof err === 'object' && 'code' in err && (err.code === 'ENOENT' || err.code === 'ENOTDIR')) return 'missing';
    throw new ConfigError(`nvmetcli: cannot stat ${path} (${errnoText(err)})`, '', { cause: err });
  }
}

/** The version VS reports (NVME_VS: MJR bits 31:16, MNR 15:8) as nvmet's attr_version writes it, e.g. "1.4". */
const REPORTED_VERSION = `${NVME_VS >>> 16}.${(NVME_VS >>> 8) & 0xff}`;

function text(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined;
  return String(v).trim();
}

function isZeroId(v: string): boolean {
  return /^[0-]*$/.test(v);
}

/** Reads an nvmetcli config.json and converts it (see importNvmetcli). */
export async function loadNvmetcliConfig(path: string, opts: NvmetcliImportOptions = {}): Promise<NvmetcliImport> {
  let raw: string;
  try {
    raw = await readFile(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`nvmetcli: cannot read ${path} (${errnoText(err)}); check the path`, '', { cause: err });
  }
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (err) {
    throw new ConfigError(`nvmetcli: ${path} is not valid JSON (${err instanceof Error ? err.message : String(err)})`, '', { cause: err });
  }
  return importNvmetcli(json, opts);
}

type NvmetcliConfig = z.infer<typeof nvmetcliSchema>;
type NvmetcliPort = NonNullable<NvmetcliConfig['ports']>[number];
type NvmetcliSubsystem = NonNullable<NvmetcliConfig['subsystems']>[number];
type NvmetcliNamespace = NonNullable<NvmetcliSubsystem['namespaces']>[number];
type NvmetcliHost = NonNullable<NvmetcliConfig['hosts']>[number];

/**
 * Converts the JSON `nvmetcli save` writes into a TargetConfig.
 * - tcp ports only (rdma/fc/loop are skipped with a warning); ANA group states and tcp referrals carry over;
 * - a namespace whose device path is a regular file becomes a file namespace; a block device is an error
 *   (this target serves files, not block devices); a disabled namespace stays, with enabled: false;
 * - subsystem attributes serial/model/firmware/qid_max/cntlid_min/cntlid_max/allow_any_host and allowed_hosts carry over.
 * The result is validated with the config schema; errors are one-line ConfigErrors prefixed "nvmetcli:".
 */
export async function importNvmetcli(json: unknown, opts: NvmetcliImportOptions = {}): Promise<NvmetcliImport> {
  const pathKind = opts.pathKind ?? statPathKind;
  const src = parseWith(nvmetcliSchema, json, 'nvmetcli');
  const warnings: string[] = [];
  const ports: PortConfig[] = [];
  /** subsystem NQN -> ids of the tcp ports it is linked to */
  const exportedOn = new Map<string, number[]>();
  for (const [i, p] of (src.ports ?? []).entries()) {
    const port = importPort(p, i, warnings);
    if (port === undefined) continue;
    ports.push(port);
    for (const nqn of p.subsystems ?? []) exportedOn.set(nqn, [...(exportedOn.get(nqn) ?? []), port.id]);
  }
  const subsystems: SubsystemConfig[] = [];
  for (const [i, s] of (src.subsystems ?? []).entries()) {
    const sub = await importSubsystem(s, i, { tcpPorts: ports.length, exportedOn: exportedOn.get(s.nqn) ?? [], pathKind, warnings });
    if (sub !== undefined) subsystems.push(sub);
  }
  const hosts = (src.hosts ?? []).map(importHost);
  const config: TargetConfig = { ports, subsystems };
  if (hosts.length > 0) config.hosts = hosts;
  return { config: parseTargetConfig(config, 'nvmetcli (converted)'), warnings };
}

/** ports/<id>: a tcp port with its TLS mode, inline data size, ANA states and referrals; undefined (warned) for others. */
function importPort(p: NvmetcliPort, i: number, warnings: string[]): PortConfig | undefined {
  const id = Number(p.portid);
  const where = `ports[${i}] (portid ${id})`;
  const trtype = text(p.addr.trtype) ?? '';
  if (trtype !== 'tcp') {
    warnings.push(`${where}: trtype "${trtype}" skipped; only tcp is served`);
    return undefined;
  }
  const adrfam = text(p.addr.adrfam) ?? '';
  if (adrfam !== 'ipv4' && adrfam !== 'ipv6') {
    warnings.push(`${where}: adrfam "${adrfam}" skipped; use ipv4 or ipv6`);
    return undefined;
  }
  const traddr = text(p.addr.traddr) ?? '';
  const trsvcid = Number(text(p.addr.trsvcid) ?? '');
  if (!traddr) throw new ConfigError(`nvmetcli: ${where}.addr.traddr: is empty; set the listen address`, `ports[${i}].addr.traddr`);
  if (!Number.isInteger(trsvcid) || trsvcid < 0 || trsvcid > 65535) {
    throw new ConfigError(`nvmetcli: ${where}.addr.trsvcid: ${JSON.stringify(p.addr.trsvcid)} is not a TCP port; use 0..65535`, `ports[${i}].addr.trsvcid`);
  }
  const port: PortConfig = { id, addr: traddr, port: trsvcid, family: adrfam };
  // nvmet addr_tsas "tls1.3" with addr_treq "required" or "not required" (TP 8011): our tls 'required' / 'allowed'.
  // nvmet takes the PSKs from the kernel keyring, which nvmetcli does not save: hosts need tlsKey (--tls-key).
  const tsas = text(p.addr.tsas);
  if (tsas === 'tls1.3') {
    port.tls = text(p.addr.treq) === 'not required' ? 'allowed' : 'required';
    warnings.push(`${where}: tsas tls1.3 → tls "${port.tls}"; nvmet's PSKs live in the kernel keyring, not in this file: give each host's key with --tls-key HOSTNQN=KEY (or hosts[].tlsKey)`);
  } else if (text(p.addr.treq) === 'required') {
    warnings.push(`${where}: treq "required" without tsas tls1.3 ignored`);
  }
  const inline = Number(text(p.param?.['inline_data_size']) ?? '-1');
  // nvmet reports -1 until the port is enabled with its default; only an explicit size carries over.
  if (Number.isInteger(inline) && inline >= 0) {
    const rounded = inline - (inline % 16);
    if (rounded !== inline) warnings.push(`${where}: param inline_data_size ${inline} rounded down to ${rounded} (IOCCSZ counts 16-byte units)`);
    port.inlineDataSize = rounded;
  }
  if (text(p.param?.['pi_enable']) === '1') warnings.push(`${where}: param pi_enable=1 ignored; protection information is not supported`);
  const ana: Record<string, AnaStateName> = {};
  for (const g of p.ana_groups ?? []) {
    const state = text(g.ana?.['state']);
    if (state && (ANA_STATE_NAMES as readonly string[]).includes(state)) ana[String(Number(g.grpid))] = state as AnaStateName;
    else if (state) warnings.push(`${where}: ANA group ${String(g.grpid)} state "${state}" ignored`);
  }
  // Groups not listed are optimized; keep the map only when it says something.
  if (Object.values(ana).some((st) => st !== 'optimized')) port.anaStates = ana;
  const referrals = (p.referrals ?? []).map((r) => importReferral(r, where, warnings)).filter((r): r is ReferralConfig => r !== undefined);
  if (referrals.length > 0) port.referrals = referrals;
  return port;
}

/** ports/<id>/referrals/<name>: an enabled tcp referral; undefined (warned) otherwise. */
function importReferral(r: NonNullable<NvmetcliPort['referrals']>[number], where: string, warnings: string[]): ReferralConfig | undefined {
  const name = r.name ?? '?';
  if (r.enable !== undefined && text(r.enable) === '0') {
    warnings.push(`${where}: referral "${name}" is disabled; skipped`);
    return undefined;
  }
  if ((text(r.addr.trtype) ?? 'tcp') !== 'tcp') {
    warnings.push(`${where}: referral "${name}" trtype "${text(r.addr.trtype) ?? ''}" skipped; only tcp is served`);
    return undefined;
  }
  const ref: ReferralConfig = { addr: text(r.addr.traddr) ?? '', port: Number(text(r.addr.trsvcid) ?? '') };
  const fam = text(r.addr.adrfam);
  if (fam === 'ipv4' || fam === 'ipv6') ref.family = fam;
  const pid = text(r.addr.portid);
  if (pid !== undefined && pid !== '') ref.portId = Number(pid);
  return ref;
}

interface SubsystemImport {
  /** How many tcp ports were imported. */
  tcpPorts: number;
  /** Ids of the tcp ports this subsystem is linked to. */
  exportedOn: number[];
  pathKind: (path: string) => Promise<PathKind>;
  warnings: string[];
}

/** subsystems/<nqn>: attributes, allowed hosts, port links and namespaces; undefined (warned) for passthru. */
async function importSubsystem(s: NvmetcliSubsystem, i: number, o: SubsystemImport): Promise<SubsystemConfig | undefined> {
  const where = `subsystems[${i}] (${s.nqn})`;
  if ((s.passthru ?? []).length > 0) {
    o.warnings.push(`${where}: passthru subsystem skipped; NVMe passthrough is not supported`);
    return undefined;
  }
  const attr = s.attr ?? {};
  const sub: SubsystemConfig = { nqn: s.nqn };
  const anyHost = text(attr['allow_any_host']);
  const hosts = s.allowed_hosts ?? [];
  sub.allowAnyHost = anyHost === undefined ? hosts.length === 0 : anyHost === '1';
  if (hosts.length > 0) sub.hosts = [...hosts];
  // Omitting `ports` means every port; a subsystem linked to no tcp port must stay unexported.
  if (o.exportedOn.length < o.tcpPorts) sub.ports = o.exportedOn;
  if (o.exportedOn.length === 0) o.warnings.push(`${where}: not linked to any tcp port; it will not be reachable`);
  const serial = text(attr['serial']);
  if (serial) sub.serial = serial;
  const model = text(attr['model']);
  if (model) sub.model = model;
  const firmware = text(attr['firmware']);
  if (firmware) sub.firmware = firmware;
  const qidMax = Number(text(attr['qid_max']) ?? 'NaN');
  if (Number.isInteger(qidMax) && qidMax >= 1) sub.maxIoQueues = qidMax;
  const cntlidMin = Number(text(attr['cntlid_min']) ?? 'NaN');
  if (Number.isInteger(cntlidMin) && cntlidMin !== 1) sub.cntlidMin = cntlidMin;
  const cntlidMax = Number(text(attr['cntlid_max']) ?? 'NaN');
  if (Number.isInteger(cntlidMax) && cntlidMax !== 0xffef) sub.cntlidMax = cntlidMax;
  if (text(attr['pi_enable']) === '1') o.warnings.push(`${where}: attr pi_enable=1 ignored; protection information is not supported`);
  const version = text(attr['version']);
  if (version && version !== REPORTED_VERSION) o.warnings.push(`${where}: attr version ${version} ignored; this target reports NVMe ${REPORTED_VERSION}`);
  const namespaces: NamespaceConfig[] = [];
  for (const [j, n] of (s.namespaces ?? []).entries()) namespaces.push(await importNamespace(n, `subsystems[${i}].namespaces[${j}]`, o.pathKind));
  if (namespaces.length > 0) sub.namespaces = namespaces;
  return sub;
}

/** subsystems/<nqn>/namespaces/<nsid>: a file or block-device namespace; a missing or odd path is an error. */
async function importNamespace(n: NvmetcliNamespace, where: string, pathKind: (path: string) => Promise<PathKind>): Promise<NamespaceConfig> {
  const nsid = Number(n.nsid);
  const dev = n.device ?? {};
  const path = text(dev['path']) ?? '';
  if (!path) throw new ConfigError(`nvmetcli: ${where}.device.path: is empty; give the path of a regular file`, `${where}.device.path`);
  const kind = await pathKind(path);
  if (kind === 'missing') throw new ConfigError(`nvmetcli: ${where}.device.path: ${path} does not exist; create the file or fix the path`, `${where}.device.path`);
  if (kind === 'other') throw new ConfigError(`nvmetcli: ${where}.device.path: ${path} is not a regular file; use a regular file`, `${where}.device.path`);
  const ns: NamespaceConfig = { nsid, backend: { type: 'file', path } };
  // configfs shows an unset NGUID/UUID as all zeros; nvmetcli prints the NGUID in UUID layout.
  const nguid = (text(dev['nguid']) ?? '').replace(/-/g, '');
  if (nguid && !isZeroId(nguid)) ns.nguid = nguid.toLowerCase();
  const uuid = text(dev['uuid']) ?? '';
  if (uuid && !isZeroId(uuid)) ns.uuid = uuid.toLowerCase();
  const grp = Number(n.ana_grpid ?? 1);
  if (Number.isInteger(grp) && grp > 1) ns.anaGroup = grp;
  // namespaces/<nsid>/enable = 0: configured but detached, as in nvmet.
  if (n.enable !== undefined && text(n.enable) === '0') ns.enabled = false;
  return ns;
}

/** hosts/<nqn>: its DH-HMAC-CHAP attributes. */
function importHost(h: NvmetcliHost): HostConfig {
  const host: HostConfig = { nqn: h.nqn };
  const attr = (name: 'key' | 'ctrl_key' | 'hash' | 'dhgroup'): string | undefined => text(h[`dhchap_${name}`] ?? h.dhchap?.[name]) || undefined;
  const key = attr('key');
  if (key !== undefined) host.dhchapKey = key;
  const ctrlKey = attr('ctrl_key');
  if (ctrlKey !== undefined) host.dhchapCtrlKey = ctrlKey;
  // configfs holds one hash and one group per host, and nvmet negotiates only those: a one-element preference list.
  const hash = attr('hash');
  if (hash !== undefined) host.dhchapHash = [hash];
  const dhgroup = attr('dhgroup');
  if (dhgroup !== undefined) host.dhchapDhgroup = [dhgroup];
  return host;
}
