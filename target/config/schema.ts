// The one schema for the target's configuration: the JSON config file, nvmetcli imports and HTTP API
// bodies all pass through it. It validates unknown input into the types of ./types.ts without adding
// defaults (a saved config round-trips unchanged); TargetService applies the defaults.
import { z } from 'zod';
import { DH_GROUP_NAMES, DhchapKeyError, HASH_INFO, parseDhchapSecret } from '../../protocol/auth/index.js';
import { TlsKeyError, parseTlsKey } from '../../protocol/tls/index.js';
import { ANA_STATE_NAMES, DISCOVERY_NQN, NvmeTcpError, validateNqn, validateNvmetName } from '../../protocol/index.js';
import { PLACEMENT_CHOICES, PLACEMENT_LIST, PLACEMENTS } from '../model/placement.js';
import { ipFamily, parseHostPort, parseSize } from '../../protocol/values/index.js';
import { zoneGeometry, zonedBytes } from '../core/zoned.js';
import type {
  AnaStateName,
  BackendConfig,
  FaultConfig,
  HostConfig,
  NamespaceConfig,
  PortConfig,
  ReferralConfig,
  SubsystemConfig,
  TargetConfig,
} from '../model/config.js';

/** A config (file, flag or API body) that cannot be used; `message` is one line naming the field and the fix. */
export class ConfigError extends NvmeTcpError {
  readonly code = 'NVMEOF_ERR_CONFIG';
  constructor(
    message: string,
    /** Dotted path of the offending field ("subsystems[0].nqn"), or "" for the whole document. */
    readonly path = '',
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

// ---------------------------------------------------------------------------------------------- value rules

export const WELL_KNOWN_DISCOVERY_NQN = DISCOVERY_NQN;

/** Why `nqn` is not a usable NQN (NVMe base 2.0 §4.5, via protocol's validateNqn), or undefined when it is. */
export function nqnProblem(nqn: string): string | undefined {
  const r = validateNqn(nqn);
  if (r.ok) return undefined;
  return `is not a valid NQN (${r.reason}); use nqn.YYYY-MM.reverse.domain:name (e.g. nqn.2024-01.io.example:disk1)`;
}

/**
 * Why `name` cannot name a subsystem or host, by nvmet's rules (protocol's validateNvmetName: empty, over 223 bytes,
 * NUL), or undefined when it can. A name that is not a well-formed NQN is usable, as in nvmet: see nqnWarning.
 */
export function nameProblem(name: string): string | undefined {
  const r = validateNvmetName(name);
  if (r.ok) return undefined;
  return `cannot name a subsystem or host (${r.reason}); use 1..223 bytes, e.g. nqn.2024-01.io.example:disk1`;
}

/**
 * The one warning line for a subsystem/host name nvmet accepts but that is not a well-formed NQN (NVMe Base 2.0
 * §4.5), naming the rule it breaks; undefined for a proper NQN.
 */
export function nqnWarning(kind: 'subsystem' | 'host', name: string): string | undefined {
  const r = validateNqn(name);
  if (r.ok) return undefined;
  return `${kind} name ${JSON.stringify(name)} is not a well-formed NQN (${r.reason}; NVMe Base 2.0 §4.5); accepted as nvmet accepts it, but prefer nqn.YYYY-MM.reverse.domain:name`;
}

/** Bytes for a size spec (number or "64M", "1G", "1.5T", "512KiB"), or undefined when it is not one. */
export function sizeToBytes(spec: number | string): number | undefined {
  try {
    return parseSize(spec);
  } catch {
    return undefined;
  }
}

export const SIZE_FIX = 'use bytes or a K/M/G/T suffix (e.g. 1G)';

export { ipFamily, parseHostPort } from '../../protocol/values/index.js';

// ---------------------------------------------------------------------------------------------- helpers

export function show(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'an object';
  return String(v);
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0] ?? 0;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cur = row[j] ?? 0;
      row[j] = Math.min(cur + 1, (row[j - 1] ?? 0) + 1, prev + (a[i - 1]?.toLowerCase() === b[j - 1]?.toLowerCase() ? 0 : 1));
      prev = cur;
    }
  }
  return row[b.length] ?? 0;
}

/** A strict object whose unknown-key error names the closest allowed key, so typos are caught and explained. */
export function obj<T extends z.core.$ZodLooseShape>(shape: T) {
  const allowed = Object.keys(shape);
  return z.strictObject(shape, {
    error: (iss) => {
      if (iss.code !== 'unrecognized_keys') return undefined;
      const key = iss.keys[0] ?? '';
      const best = allowed
        .map((k) => ({ k, d: editDistance(key, k) }))
        .sort((x, y) => x.d - y.d)[0];
      const hint = best && best.d <= Math.max(2, Math.floor(key.length / 3)) ? `did you mean "${best.k}"?` : `allowed: ${allowed.join(', ')}`;
      return `unknown key ${JSON.stringify(key)}${iss.keys.length > 1 ? ` (and ${iss.keys.length - 1} more)` : ''}; ${hint}`;
    },
  });
}

/** Wording for a value of the wrong type, or a missing required key. */
export function wrongType(what: string, fix?: string) {
  return (iss: { input?: unknown }) =>
    iss.input === undefined ? `is missing; add ${what}${fix ? ` (${fix})` : ''}` : `expected ${what}, got ${show(iss.input)}${fix ? `; ${fix}` : ''}`;
}

export function int(min: number, max: number, what = 'an integer') {
  const fix = `use ${what} in ${min}..${max}`;
  return z
    .number({ error: wrongType('a number', fix) })
    .int({ error: (iss) => `${show(iss.input)} is not an integer; ${fix}` })
    .min(min, { error: (iss) => `${show(iss.input)} is too small; ${fix}` })
    .max(max, { error: (iss) => `${show(iss.input)} is too large; ${fix}` });
}

export const bool = z.boolean({ error: wrongType('true or false') });

export function str(what: string) {
  return z.string({ error: wrongType(what) });
}

export function list<T extends z.ZodType>(item: T) {
  return z.array(item, { error: wrongType('a list') });
}

export const opt = <T extends z.ZodType>(t: T) => t.exactOptional();

// ---------------------------------------------------------------------------------------------- leaf schemas

export const nqnSchema = str('an NQN string').check(
  z.superRefine((v, ctx) => {
    const p = nqnProblem(v);
    if (p) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(v)} ${p}`, input: v });
  }),
);

/** A subsystem or host name: what nvmet accepts (nameProblem), well-formed NQN or not. */
export const nvmetNameSchema = str('a subsystem or host name (an NQN)').check(
  z.superRefine((v, ctx) => {
    const p = nameProblem(v);
    if (p) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(v)} ${p}`, input: v });
  }),
);

const sizeSchema = z
  .union([z.number(), z.string()], { error: wrongType('a size', SIZE_FIX) })
  .check(
    z.superRefine((v, ctx) => {
      if (sizeToBytes(v) === undefined) ctx.addIssue({ code: 'custom', message: `${show(v)} is not a size; ${SIZE_FIX}`, input: v });
    }),
  );

const ipAddrSchema = str('an IP address').check(
  z.superRefine((v, ctx) => {
    if (!ipFamily(v)) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(v)} is not an IP address; use e.g. 127.0.0.1, 0.0.0.0, ::1 or ::`, input: v });
  }),
);

const familySchema = z.enum(['ipv4', 'ipv6'], { error: (iss) => `${show(iss.input)} is not an address family; use ipv4 or ipv6` });
const tcpPort = int(0, 65535, 'a TCP port');
const tcpPortNonZero = int(1, 65535, 'a TCP port');
/** PORTID is 16 bits in the discovery log entry (NVMe-oF 1.1 Figure 38). */
const portId = int(0, 65535, 'a port id');
const anaGroupId = int(1, 128, 'an ANA group id');

export const anaStateSchema: z.ZodType<AnaStateName> = z.enum(ANA_STATE_NAMES, {
  error: (iss) => `${show(iss.input)} is not an ANA state; use ${ANA_STATE_NAMES.join(', ')}`,
});

function checkFamily(addr: string, family: 'ipv4' | 'ipv6' | undefined, ctx: z.core.$RefinementCtx, path: string): void {
  const actual = ipFamily(addr);
  if (family && actual && family !== actual) {
    ctx.addIssue({ code: 'custom', path: ['family'], message: `"${family}" does not match ${path} ${JSON.stringify(addr)} (${actual}); drop family or fix it` });
  }
}

// ---------------------------------------------------------------------------------------------- resources

export const referralSchema = obj({
  addr: ipAddrSchema,
  port: tcpPortNonZero,
  family: opt(familySchema),
  portId: opt(portId),
}).check(z.superRefine((r, ctx) => checkFamily(r.addr, r.family, ctx, 'addr')));

export const portSchema = obj({
  id: portId,
  addr: ipAddrSchema,
  port: tcpPort,
  family: opt(familySchema),
  advertiseAddr: opt(ipAddrSchema),
  advertisePort: opt(tcpPortNonZero),
  // IOCCSZ = (64 + inline)/16 must be a whole number (NVMe-oF 1.1 §4.1 / Identify Controller IOCCSZ).
  inlineDataSize: opt(int(0, 1 << 20, 'a byte count').multipleOf(16, { error: (iss) => `${show(iss.input)} is not a multiple of 16; IOCCSZ counts 16-byte units` })),
  // NVMe/TCP 1.0 §3.6.2.3: MAXH2CDATA is at least 4096 and a multiple of 4 (Linux refuses the queue otherwise).
  maxH2CData: opt(int(4096, 0xfffffffc, 'bytes').multipleOf(4, { error: (iss) => `${show(iss.input)} is not a multiple of 4; MAXH2CDATA must be a multiple of 4 and >= 4096` })),
  c2hDataSize: opt(int(512, 1 << 24, 'bytes')),
  anaStates: opt(
    z.record(
      z.string().regex(/^[1-9]\d*$/),
      anaStateSchema,
      { error: (iss) => (iss.code === 'invalid_key' ? 'is not an ANA group id; use "1".."128"' : wrongType('an object of group id -> ANA state')(iss)) },
    ),
  ),
  referrals: opt(list(referralSchema)),
  sqFlowDisable: opt(bool),
  maxConnections: opt(int(1, 1 << 20, 'connections')),
  maxInFlightBytes: opt(int(4096, 1 << 30, 'bytes')),
  tls: opt(z.enum(['none', 'allowed', 'required'], { error: (iss) => `${show(iss.input)} is not a TLS mode; use none, allowed or required` })),
  tlsHandshakeTimeoutS: opt(int(1, 3600, 'seconds')),
  placement: opt(z.enum(PLACEMENTS, { error: (iss) => `${show(iss.input)} is not a placement; use ${PLACEMENT_CHOICES} (or omit it for the target-wide one)` })),
  tlsConcat: opt(bool),
}).check(
  z.superRefine((p, ctx) => {
    checkFamily(p.addr, p.family, ctx, 'addr');
    if (p.tlsConcat === true && (p.tls ?? 'none') === 'none') {
      ctx.addIssue({ code: 'custom', path: ['tlsConcat'], message: 'needs a TLS port; set tls to "allowed" or "required" (the generated PSK is used inside TLS)' });
    }
    for (const g of Object.keys(p.anaStates ?? {})) {
      if (Number(g) > 128) ctx.addIssue({ code: 'custom', path: ['anaStates', g], message: `ANA group ${g} is out of range; use 1..128` });
    }
  }),
);

const backendMsg = (iss: { input?: unknown }) => {
  const t = iss.input !== null && typeof iss.input === 'object' && !Array.isArray(iss.input) ? (iss.input as { type?: unknown }).type : iss.input;
  return t === undefined ? 'is missing; add "ram", "file" or "null"' : `${show(t)} is not a backend type; use ram, file or null`;
};
const backendSchema = z.discriminatedUnion(
  'type',
  [
    obj({ type: z.literal('ram', { error: backendMsg }), size: sizeSchema, workerCache: opt(bool) }),
    obj({
      type: z.literal('file', { error: backendMsg }),
      path: str('a file path').min(1, { error: 'is empty; give the path of a regular file' }),
      size: opt(sizeSchema),
    }),
    obj({ type: z.literal('null', { error: backendMsg }), size: sizeSchema }),
  ],
  { error: (iss) => (iss.code === 'invalid_union' ? backendMsg(iss) : wrongType('a backend object like {"type":"ram","size":"1G"}')(iss)) },
);

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const NGUID_RE = /^[0-9a-f]{32}$/i;

export const namespaceSchema = obj({
  // NSID 0 and FFFFFFFFh (broadcast) are not namespace ids (NVMe base 2.0 §3.2.1.2); TargetService also
  // keeps FFFFFFFEh free.
  nsid: int(1, 0xfffffffd, 'a namespace id'),
  backend: backendSchema,
  blockSize: opt(z.union([z.literal(512), z.literal(4096)], { error: (iss) => `${show(iss.input)} is not a supported block size; use 512 or 4096` })),
  uuid: opt(str('a UUID').regex(UUID_RE, { error: (iss) => `${show(iss.input)} is not a UUID; use 8-4-4-4-12 hex digits` })),
  nguid: opt(str('an NGUID').regex(NGUID_RE, { error: (iss) => `${show(iss.input)} is not an NGUID; use 32 hex digits` })),
  anaGroup: opt(anaGroupId),
  readOnly: opt(bool),
  enabled: opt(bool),
  hosts: opt(list(nvmetNameSchema)),
  zoned: opt(
    obj({
      zoneSize: opt(sizeSchema),
      zoneCapacity: opt(sizeSchema),
      // MOR / MAR are 32-bit and 0's based (ZNS 1.1 Figure 48); 0 here means no limit.
      maxOpen: opt(int(0, 0xffff_ffff, 'a zone count')),
      maxActive: opt(int(0, 0xffff_ffff, 'a zone count')),
    }),
  ),
}).check(
  z.superRefine((ns, ctx) => {
    if (!('size' in ns.backend) || ns.backend.size === undefined) return;
    const bytes = sizeToBytes(ns.backend.size);
    const bs = ns.blockSize ?? 512;
    if (bytes === undefined) return;
    if (bytes < bs || bytes % bs !== 0) {
      ctx.addIssue({ code: 'custom', path: ['backend', 'size'], message: `${show(ns.backend.size)} (${bytes} bytes) is not a positive multiple of the block size ${bs}` });
    } else if (ns.zoned !== undefined) {
      const g = zoneGeometry(zonedBytes(ns.zoned), bs, bytes);
      if ('problem' in g) ctx.addIssue({ code: 'custom', path: g.field.split('.'), message: g.problem });
    }
  }),
);

export const faultSchema = obj({
  commandLatencyUs: opt(int(0, 60_000_000, 'microseconds')),
  connectLatencyMs: opt(int(0, 600_000, 'milliseconds')),
  failNext: opt(obj({ count: int(0, 0x7fffffff, 'a count'), status: int(0, 0x7fff, 'a 15-bit NVMe status') })),
});

/** Identify Controller SN/MN/FR are space-padded ASCII of 20/40/8 bytes (NVMe base 2.0 Figure 275). */
function asciiField(name: string, max: number) {
  return str(`a ${name} string`).check(
    z.superRefine((v, ctx) => {
      if (!/^[\x20-\x7e]*$/.test(v)) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(v)} has non-printable or non-ASCII characters; use printable ASCII`, input: v });
      else if (v.length > max) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(v)} is longer than ${max} characters (the Identify field size)`, input: v });
    }),
  );
}

export const subsystemSchema = obj({
  nqn: nvmetNameSchema,
  allowAnyHost: opt(bool),
  hosts: opt(list(nvmetNameSchema)),
  ports: opt(list(portId)),
  serial: opt(asciiField('serial number', 20)),
  model: opt(asciiField('model', 40)),
  firmware: opt(asciiField('firmware revision', 8)),
  maxIoQueues: opt(int(1, 65535, 'a queue count')),
  maxControllers: opt(int(1, 0xffef, 'a controller count')),
  // nvmet attr_cntlid_min/max: dynamic controller IDs come from this range (NVMe-oF 1.1 §4.2: FFF0h..FFFFh are not IDs).
  cntlidMin: opt(int(1, 0xffef, 'a controller ID')),
  cntlidMax: opt(int(1, 0xffef, 'a controller ID')),
  // MQES is 16 bits and 0's based (CAP.MQES, NVMe base 2.0 §3.1.4.1), and a queue needs 2 entries.
  maxQueueSize: opt(int(2, 65536, 'a queue size')),
  mdts: opt(int(0, 16, 'a log2 of 4 KiB units')),
  ana: opt(bool),
  namespaces: opt(list(namespaceSchema)),
  faults: opt(faultSchema),
}).check(
  z.superRefine((s, ctx) => {
    if (s.nqn === WELL_KNOWN_DISCOVERY_NQN) {
      ctx.addIssue({ code: 'custom', path: ['nqn'], message: `${JSON.stringify(s.nqn)} is the discovery NQN; the discovery subsystem is built in, pick another NQN` });
    }
    if ((s.cntlidMin ?? 1) > (s.cntlidMax ?? 0xffef)) {
      ctx.addIssue({ code: 'custom', path: ['cntlidMin'], message: `${s.cntlidMin ?? 1} is above cntlidMax ${s.cntlidMax ?? 0xffef}; make cntlidMin <= cntlidMax` });
    }
    dupes(s.namespaces ?? [], (n) => n.nsid, (i, nsid) => ctx.addIssue({ code: 'custom', path: ['namespaces', i, 'nsid'], message: `nsid ${nsid} is used twice; give each namespace its own nsid` }));
    dupes(s.hosts ?? [], (h) => h, (i, h) => ctx.addIssue({ code: 'custom', path: ['hosts', i], message: `${JSON.stringify(h)} is listed twice; remove one` }));
    dupes(s.ports ?? [], (p) => p, (i, p) => ctx.addIssue({ code: 'custom', path: ['ports', i], message: `port id ${p} is listed twice; remove one` }));
    // Namespace masking: a namespace may only be attached to hosts the subsystem lets in.
    const allowList = s.allowAnyHost !== true && (s.hosts ?? []).length > 0 ? new Set(s.hosts) : undefined;
    (s.namespaces ?? []).forEach((n, ni) =>
      (n.hosts ?? []).forEach((h, hi) => {
        if (allowList !== undefined && !allowList.has(h)) {
          ctx.addIssue({ code: 'custom', path: ['namespaces', ni, 'hosts', hi], message: `${JSON.stringify(h)} is not a host of this subsystem; add it to the subsystem's hosts or remove it here` });
        }
      }),
    );
  }),
);

/** Body of PUT /subsystems/<nqn>: the attributes that change at runtime (nvmet attr_qid_max, attr_cntlid_min/max). */
export const subsystemUpdateSchema = obj({
  maxIoQueues: opt(int(1, 65535, 'a queue count')),
  cntlidMin: opt(int(1, 0xffef, 'a controller ID')),
  cntlidMax: opt(int(1, 0xffef, 'a controller ID')),
});

/** nvmet's dhchap_hash spellings (NVMe Base 2.0 Figure 171 hash ids as crypto API names). */
export const DHCHAP_HASH_NAMES: readonly string[] = Object.values(HASH_INFO).map((h) => `hmac(${h.name})`);
/** nvmet's dhchap_dhgroup spellings (NVMe Base 2.0 Figure 172). */
export const DHCHAP_DHGROUP_NAMES: readonly string[] = Object.values(DH_GROUP_NAMES);

/**
 * A TP 8006 secret "DHHC-1:<hh>:<base64 key+crc>:" checked by the same parser the target uses (key length,
 * transform, CRC-32). The message never contains the value, and the issue carries no `input`, so neither the
 * ConfigError nor its ZodError cause can leak the secret into a log line or an API reply.
 */
function dhchapSecret(what: string) {
  return z.custom<string>(() => true).check(
    z.superRefine((v, ctx) => {
      const fix = 'use the "DHHC-1:<hh>:<base64>:" form that nvme gen-dhchap-key prints';
      if (typeof v !== 'string') {
        ctx.addIssue({ code: 'custom', message: `expected a ${what} string, got ${v === null ? 'null' : Array.isArray(v) ? 'a list' : typeof v}; ${fix}` });
        return;
      }
      try {
        parseDhchapSecret(v);
      } catch (e) {
        if (!(e instanceof DhchapKeyError)) throw e;
        // DhchapKeyError messages describe the problem without quoting the secret.
        ctx.addIssue({ code: 'custom', message: `is not a usable ${what} (${e.message}); ${fix}` });
      }
    }),
  );
}

/** A TP 8011 configured PSK "NVMeTLSkey-1:<hh>:<base64 key+crc>:", checked like dhchapSecret (no value in the issue). */
function tlsKeySchema() {
  return z.custom<string>(() => true).check(
    z.superRefine((v, ctx) => {
      const fix = 'use the "NVMeTLSkey-1:<hh>:<base64>:" form that nvme gen-tls-key prints';
      if (typeof v !== 'string') {
        ctx.addIssue({ code: 'custom', message: `expected a TLS key string, got ${v === null ? 'null' : Array.isArray(v) ? 'a list' : typeof v}; ${fix}` });
        return;
      }
      try {
        parseTlsKey(v);
      } catch (e) {
        if (!(e instanceof TlsKeyError)) throw e;
        ctx.addIssue({ code: 'custom', message: `is not a usable TLS key (${e.message}); ${fix}` });
      }
    }),
  );
}

function nameList(what: string, names: readonly string[]) {
  return list(
    str(what).check(
      z.superRefine((v, ctx) => {
        if (!names.includes(v)) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(v)} is not ${what}; use ${names.join(', ')}`, input: v });
      }),
    ),
  ).check(
    z.superRefine((l, ctx) => {
      if (l.length === 0) ctx.addIssue({ code: 'custom', message: `is empty; list at least one of ${names.join(', ')} (or omit it for all)` });
      dupes(l, (x) => x, (i, x) => ctx.addIssue({ code: 'custom', path: [i], message: `${JSON.stringify(x)} is listed twice; remove one` }));
    }),
  );
}

export const hostSchema = obj({
  nqn: nvmetNameSchema,
  dhchapKey: opt(dhchapSecret('DH-HMAC-CHAP host key')),
  dhchapCtrlKey: opt(dhchapSecret('DH-HMAC-CHAP controller key')),
  dhchapHash: opt(nameList('a DH-HMAC-CHAP hash', DHCHAP_HASH_NAMES)),
  dhchapDhgroup: opt(nameList('a DH-HMAC-CHAP DH group', DHCHAP_DHGROUP_NAMES)),
  tlsKey: opt(tlsKeySchema()),
  tlsHkdf: opt(z.enum(['rfc8446', 'pre-2025'], { error: (iss) => `${show(iss.input)} is not an HkdfLabel encoding; use rfc8446 or pre-2025` })),
}).check(
  z.superRefine((h, ctx) => {
    // The controller key only adds the reverse direction (nvmet needs dhchap_key for any authentication).
    if (h.dhchapCtrlKey !== undefined && h.dhchapKey === undefined) {
      ctx.addIssue({ code: 'custom', path: ['dhchapKey'], message: 'is missing; a controller key (dhchapCtrlKey) needs the host key (dhchapKey) too' });
    }
  }),
);

const apiSchema = obj({
  listen: str('"ADDR:PORT"').check(
    z.superRefine((v, ctx) => {
      if (!parseHostPort(v)) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(v)} is not ADDR:PORT; use e.g. 127.0.0.1:8080 or [::1]:8080`, input: v });
    }),
  ),
  token: opt(str('a token string').min(1, { error: 'is empty; omit token or give a non-empty one' })),
});

const gatewaySchema = obj({
  group: str('a group name').regex(/^[A-Za-z0-9._-]{1,64}$/, { error: (iss) => `${show(iss.input)} is not a group name; use 1..64 of A-Z a-z 0-9 . _ -` }),
  etcd: list(
    str('an etcd URL').check(
      z.superRefine((v, ctx) => {
        if (!/^https?:\/\/[^/\s]+(:\d+)?\/?$/.test(v)) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(v)} is not an etcd client URL; use e.g. http://127.0.0.1:2379`, input: v });
      }),
    ),
  ).min(1, { error: 'is empty; give at least one etcd URL, e.g. ["http://127.0.0.1:2379"]' }),
  id: opt(str('a gateway id').regex(/^[A-Za-z0-9._-]{1,64}$/, { error: (iss) => `${show(iss.input)} is not a gateway id; use 1..64 of A-Z a-z 0-9 . _ -` })),
  leaseTtlMs: opt(
    int(1000, 600_000, 'ms').refine((v) => v % 1000 === 0, { error: (iss) => `${show(iss.input)} is not whole seconds (etcd leases count seconds); use e.g. 3000` }),
  ),
  failbackDelayMs: opt(int(0, 3_600_000, 'ms')),
  notOwned: opt(z.enum(['inaccessible', 'non-optimized'], { error: 'must be "inaccessible" or "non-optimized"' })),
  preferred: opt(list(int(1, 128, 'an ANA group id'))),
  cntlidRangeSize: opt(int(1, 0xffef, 'a controller-ID count')),
});

export const targetConfigSchema = obj({
  ports: list(portSchema),
  subsystems: list(subsystemSchema),
  hosts: opt(list(hostSchema)),
  discoveryNqn: opt(nqnSchema),
  icReqTimeoutS: opt(z.number({ error: wrongType('seconds') }).positive({ error: 'must be > 0 seconds' }).max(3600, { error: 'is more than an hour; use 1..3600 seconds' })),
  api: opt(apiSchema),
  workers: opt(
    z.union([z.literal('auto'), z.number().int().min(1)], { error: 'must be an integer >= 1 or "auto" (one worker per CPU); e.g. "workers": 2' }),
  ),
  placement: opt(z.enum(PLACEMENTS, { error: `must be one of ${PLACEMENT_LIST}` })),
  gateway: opt(gatewaySchema),
}).check(
  z.superRefine((c, ctx) => {
    dupes(c.ports, (p) => p.id, (i, id) => ctx.addIssue({ code: 'custom', path: ['ports', i, 'id'], message: `port id ${id} is used twice; give each port its own id` }));
    dupes(c.subsystems, (s) => s.nqn, (i, nqn) => ctx.addIssue({ code: 'custom', path: ['subsystems', i, 'nqn'], message: `${JSON.stringify(nqn)} is defined twice; merge the two subsystems` }));
    dupes(c.hosts ?? [], (h) => h.nqn, (i, nqn) => ctx.addIssue({ code: 'custom', path: ['hosts', i, 'nqn'], message: `${JSON.stringify(nqn)} is defined twice; merge the two entries` }));
    const ids = new Set(c.ports.map((p) => p.id));
    const idList = [...ids].join(', ') || 'none defined';
    c.subsystems.forEach((s, si) => {
      s.ports?.forEach((p, pi) => {
        if (!ids.has(p)) ctx.addIssue({ code: 'custom', path: ['subsystems', si, 'ports', pi], message: `port id ${p} does not exist; use one of the ids in ports (${idList})` });
      });
    });
    // Linux drops namespaces whose NGUID/UUID repeats (nvme_global_check_duplicate_ids; NVMe Base 2.0 requires NGUID/UUID to be globally unique): explicit ids must be unique target-wide.
    const flat = c.subsystems.flatMap((s, si) => (s.namespaces ?? []).map((n, ni) => ({ n, path: ['subsystems', si, 'namespaces', ni] })));
    for (const key of ['uuid', 'nguid'] as const) {
      dupes(flat, (e) => e.n[key]?.toLowerCase(), (i, v) => {
        const e = flat[i];
        if (e) ctx.addIssue({ code: 'custom', path: [...e.path, key], message: `${key} ${v} is used by another namespace; hosts drop namespaces with duplicate ids` });
      });
    }
    if (c.discoveryNqn !== undefined && c.subsystems.some((s) => s.nqn === c.discoveryNqn)) {
      ctx.addIssue({ code: 'custom', path: ['discoveryNqn'], message: `${JSON.stringify(c.discoveryNqn)} is also a subsystem NQN; pick a distinct discovery NQN` });
    }
  }),
);

/** Calls `report(index, key)` for every element whose key (when defined) already appeared earlier. */
function dupes<T, K>(items: readonly T[], key: (t: T) => K | undefined, report: (i: number, k: K) => void): void {
  const seen = new Set<K>();
  items.forEach((t, i) => {
    const k = key(t);
    if (k === undefined) return;
    if (seen.has(k)) report(i, k);
    seen.add(k);
  });
}

// ---------------------------------------------------------------------------------------------- type checks

type Assignable<From, To> = [From] extends [To] ? true : false;
type Expect<T extends true> = T;
// Compile-time proof that what the schemas accept is exactly assignable to the config model.
export type SchemaMatchesTypes = [
  Expect<Assignable<z.infer<typeof targetConfigSchema>, TargetConfig>>,
  Expect<Assignable<TargetConfig, z.infer<typeof targetConfigSchema>>>,
  Expect<Assignable<z.infer<typeof portSchema>, PortConfig>>,
  Expect<Assignable<z.infer<typeof subsystemSchema>, SubsystemConfig>>,
  Expect<Assignable<z.infer<typeof namespaceSchema>, NamespaceConfig>>,
  Expect<Assignable<z.infer<typeof backendSchema>, BackendConfig>>,
  Expect<Assignable<z.infer<typeof faultSchema>, FaultConfig>>,
  Expect<Assignable<z.infer<typeof hostSchema>, HostConfig>>,
  Expect<Assignable<z.infer<typeof referralSchema>, ReferralConfig>>,
];

// ---------------------------------------------------------------------------------------------- errors

function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else if (typeof seg === 'string' && /^[A-Za-z_$][\w$]*$/.test(seg)) out += out ? `.${seg}` : seg;
    else out += `[${JSON.stringify(String(seg))}]`;
  }
  return out;
}

/** Error map for the issues no schema above words itself (missing keys, wrong types). */
const fallbackMessages: z.core.$ZodErrorMap = (iss) => {
  switch (iss.code) {
    case 'invalid_type':
      return iss.input === undefined ? `is missing; add it (${iss.expected})` : `expected ${iss.expected}, got ${show(iss.input)}`;
    case 'invalid_value':
      return `${show(iss.input)} is not one of ${iss.values.map((v) => JSON.stringify(v)).join(', ')}`;
    default:
      return undefined;
  }
};

function issueLine(iss: z.core.$ZodIssue): string {
  const path = formatPath(iss.path);
  return path ? `${path}: ${iss.message}` : iss.message;
}

/**
 * Validates `input` against `schema` and returns the typed value, or throws a ConfigError whose message
 * is one line: "<where>: <field path>: <problem>; <fix>". `where` is "config", "nvmetcli", "body", ...
 */
export function parseWith<T extends z.ZodType>(schema: T, input: unknown, where = 'config'): z.output<T> {
  const r = schema.safeParse(input, { reportInput: true, error: fallbackMessages });
  if (r.success) return r.data;
  throw zodToConfigError(r.error, where);
}

function zodToConfigError(err: z.ZodError, where: string): ConfigError {
  // An unknown key usually explains the "missing" one next to it (a typo): report it first.
  const first = err.issues.find((i) => i.code === 'unrecognized_keys') ?? err.issues[0];
  if (!first) return new ConfigError(`${where}: invalid`);
  const more = err.issues.length > 1 ? ` (+${err.issues.length - 1} more problem${err.issues.length > 2 ? 's' : ''})` : '';
  const message = `${where}: ${issueLine(first)}${more}`;
  // reportInput put each offending value on its issue, and an issue on a host entry (unknown key, missing key)
  // carries the whole entry, DH-HMAC-CHAP secrets included: the cause keeps the issues without their inputs, so
  // logging the error (pino serialises `cause`) cannot leak a secret.
  for (const iss of err.issues) delete (iss as { input?: unknown }).input;
  return new ConfigError(message, formatPath(first.path), { cause: err });
}

/** Validates a whole target config (file, import, or API body). */
export function parseTargetConfig(input: unknown, where = 'config'): TargetConfig {
  return parseWith(targetConfigSchema, input, where);
}

/** One line for any config failure: a ConfigError as is, a ZodError worded like parseWith, anything else prefixed. */
export function formatConfigError(err: unknown, where = 'config'): string {
  if (err instanceof ConfigError) return err.message;
  if (err instanceof z.ZodError) return zodToConfigError(err, where).message;
  const msg = err instanceof Error ? err.message : String(err);
  return `${where}: ${msg.split('\n')[0] ?? ''}`;
}
