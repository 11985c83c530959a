import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { formatDhchapSecret } from '../../protocol/auth/index.js';
import {
  ConfigError,
  DHCHAP_DHGROUP_NAMES,
  DHCHAP_HASH_NAMES,
  hostSchema,
  formatConfigError,
  namespaceSchema,
  parseHostPort,
  parseTargetConfig,
  parseWith,
  portSchema,
  sizeToBytes,
  subsystemSchema,
} from './schema.js';
import type { TargetConfig } from '../model/config.js';

function base(): TargetConfig {
  return {
    ports: [{ id: 1, addr: '127.0.0.1', port: 4420 }],
    subsystems: [{ nqn: 'nqn.2024-01.io.example:a', namespaces: [{ nsid: 1, backend: { type: 'ram', size: '64M' } }] }],
  };
}

/** A config as plain JSON, edited by dotted paths ("subsystems.0.nqn") so rows can break it in any way. */
type Doc = Record<string, unknown>;
type Mutate = (c: Doc) => void;

function walk(c: Doc, path: string): [Record<string, unknown>, string] {
  const keys = path.split('.');
  const last = keys.pop() ?? '';
  let node: unknown = c;
  for (const k of keys) node = (node as Record<string, unknown>)[k];
  return [node as Record<string, unknown>, last];
}
const set = (path: string, value: unknown): Mutate => (c) => {
  const [node, key] = walk(c, path);
  node[key] = value;
};
const del = (path: string): Mutate => (c) => {
  const [node, key] = walk(c, path);
  delete node[key];
};
const push = (path: string, value: unknown): Mutate => (c) => {
  const [node, key] = walk(c, path);
  (node[key] as unknown[]).push(value);
};
const all = (...ms: Mutate[]): Mutate => (c) => ms.forEach((m) => m(c));

function mutated(f: Mutate): unknown {
  const c = structuredClone(base()) as unknown as Doc;
  f(c);
  return c;
}

function errorOf(input: unknown): string {
  try {
    parseTargetConfig(input);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return formatConfigError(err);
  }
  throw new Error('expected the config to be rejected');
}

describe('targetConfigSchema accepts', () => {
  it('the minimal config unchanged (no defaults added)', () => {
    expect(parseTargetConfig(base())).toEqual(base());
  });

  it('every field of the model', () => {
    const full: TargetConfig = {
      ports: [
        {
          id: 1,
          addr: '0.0.0.0',
          port: 4420,
          family: 'ipv4',
          advertiseAddr: '10.0.2.100',
          advertisePort: 4420,
          inlineDataSize: 16384,
          maxH2CData: 131072,
          c2hDataSize: 65536,
          anaStates: { '1': 'optimized', '2': 'inaccessible' },
          referrals: [{ addr: '10.0.0.2', port: 8009, family: 'ipv4', portId: 7 }],
          sqFlowDisable: false,
          maxConnections: 64,
          maxInFlightBytes: 8388608,
        },
        { id: 2, addr: '::1', port: 0, family: 'ipv6' },
      ],
      subsystems: [
        {
          nqn: 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000001',
          allowAnyHost: false,
          hosts: ['nqn.2024-01.io.example:host1'],
          ports: [1],
          serial: '0123456789abcdef',
          model: 'nvme-tcp-ts',
          firmware: '0.1.0',
          maxIoQueues: 8,
          maxQueueSize: 128,
          mdts: 8,
          ana: true,
          namespaces: [
            { nsid: 1, backend: { type: 'ram', size: 1 << 20 }, blockSize: 4096, uuid: 'd592cdf3-5d1c-44e0-8412-3fcf7d99df27', nguid: '0123456789abcdef0123456789abcdef', anaGroup: 2, readOnly: true },
            { nsid: 2, backend: { type: 'file', path: '/tmp/x.img' } },
            { nsid: 3, backend: { type: 'file', path: '/tmp/y.img', size: '1G' } },
            { nsid: 0xfffffffd, backend: { type: 'null', size: '1T' } },
          ],
          faults: { commandLatencyUs: 100, connectLatencyMs: 5, failNext: { count: 2, status: 0x4002 } },
        },
      ],
      hosts: [{ nqn: 'nqn.2024-01.io.example:host1', dhchapKey: 'DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:' }],
      discoveryNqn: 'nqn.2024-01.io.example:discovery',
      icReqTimeoutS: 10,
      api: { listen: '127.0.0.1:8080', token: 'secret' },
    };
    expect(parseTargetConfig(full)).toEqual(full);
  });

  it('IPv6 listen addresses and an empty port list (ports added later through the API)', () => {
    expect(parseTargetConfig({ ports: [], subsystems: [] })).toEqual({ ports: [], subsystems: [] });
    expect(parseWith(portSchema, { id: 3, addr: '::', port: 4420 })).toEqual({ id: 3, addr: '::', port: 4420 });
  });
});

// Each row: what is wrong, the mutation, and the exact one-line message (field path + fix).
const rejections: [string, Mutate, string][] = [
  ['bad size', set('subsystems.0.namespaces.0.backend.size', '1X'), 'config: subsystems[0].namespaces[0].backend.size: "1X" is not a size; use bytes or a K/M/G/T suffix (e.g. 1G)'],
  ['typo in a key', all(set('ports.0.adr', '1.2.3.4'), del('ports.0.addr')), 'config: ports[0]: unknown key "adr"; did you mean "addr"? (+1 more problem)'],
  ['unknown top-level key', set('listen', 1), 'config: unknown key "listen"; allowed: ports, subsystems, hosts, discoveryNqn, icReqTimeoutS, api, workers, placement, gateway'],
  ['missing key', del('ports.0.port'), 'config: ports[0].port: is missing; add a number (use a TCP port in 0..65535)'],
  ['port out of range', set('ports.0.port', 65536), 'config: ports[0].port: 65536 is too large; use a TCP port in 0..65535'],
  ['negative port', set('ports.0.port', -1), 'config: ports[0].port: -1 is too small; use a TCP port in 0..65535'],
  ['port as string', set('ports.0.port', '4420'), 'config: ports[0].port: expected a number, got "4420"; use a TCP port in 0..65535'],
  ['host name as addr', set('ports.0.addr', 'localhost'), 'config: ports[0].addr: "localhost" is not an IP address; use e.g. 127.0.0.1, 0.0.0.0, ::1 or ::'],
  ['family mismatch', set('ports.0.family', 'ipv6'), 'config: ports[0].family: "ipv6" does not match addr "127.0.0.1" (ipv4); drop family or fix it'],
  ['maxH2CData not a multiple of 4', set('ports.0.maxH2CData', 8190), 'config: ports[0].maxH2CData: 8190 is not a multiple of 4; MAXH2CDATA must be a multiple of 4 and >= 4096'],
  ['maxH2CData too small', set('ports.0.maxH2CData', 1024), 'config: ports[0].maxH2CData: 1024 is too small; use bytes in 4096..4294967292'],
  ['inline size not /16', set('ports.0.inlineDataSize', 100), 'config: ports[0].inlineDataSize: 100 is not a multiple of 16; IOCCSZ counts 16-byte units'],
  ['maxControllers zero', set('subsystems.0.maxControllers', 0), 'config: subsystems[0].maxControllers: 0 is too small; use a controller count in 1..65519'],
  ['maxConnections zero', set('ports.0.maxConnections', 0), 'config: ports[0].maxConnections: 0 is too small; use connections in 1..1048576'],
  ['maxInFlightBytes tiny', set('ports.0.maxInFlightBytes', 512), 'config: ports[0].maxInFlightBytes: 512 is too small; use bytes in 4096..1073741824'],
  ['ANA state name', set('ports.0.anaStates', { '1': 'optimised' }), 'config: ports[0].anaStates["1"]: "optimised" is not an ANA state; use optimized, non-optimized, inaccessible, persistent-loss, change'],
  ['ANA group key', set('ports.0.anaStates', { grp1: 'optimized' }), 'config: ports[0].anaStates.grp1: is not an ANA group id; use "1".."128"'],
  ['duplicate port id', push('ports', { id: 1, addr: '::1', port: 4421 }), 'config: ports[1].id: port id 1 is used twice; give each port its own id'],
  ['subsystem port reference', set('subsystems.0.ports', [1, 9]), 'config: subsystems[0].ports[1]: port id 9 does not exist; use one of the ids in ports (1)'],
  ['empty NQN', set('subsystems.0.nqn', ''), 'config: subsystems[0].nqn: "" cannot name a subsystem or host (empty); use 1..223 bytes, e.g. nqn.2024-01.io.example:disk1'],
  ['NQN too long', set('subsystems.0.nqn', `nqn.2024-01.io.example:${'x'.repeat(220)}`), 'config: subsystems[0].nqn: "nqn.2024-01.io.example:' + 'x'.repeat(220) + '" cannot name a subsystem or host (too long: 243 bytes, at most 223); use 1..223 bytes, e.g. nqn.2024-01.io.example:disk1'],
  ['discovery NQN as subsystem', set('subsystems.0.nqn', 'nqn.2014-08.org.nvmexpress.discovery'), 'config: subsystems[0].nqn: "nqn.2014-08.org.nvmexpress.discovery" is the discovery NQN; the discovery subsystem is built in, pick another NQN'],
  ['host NQN with NUL', set('subsystems.0.hosts', ['host\u00001']), 'config: subsystems[0].hosts[0]: "host\\u00001" cannot name a subsystem or host (contains a NUL character); use 1..223 bytes, e.g. nqn.2024-01.io.example:disk1'],
  ['cntlid range upside down', (c) => (set('subsystems.0.cntlidMin', 9)(c), set('subsystems.0.cntlidMax', 8)(c)), 'config: subsystems[0].cntlidMin: 9 is above cntlidMax 8; make cntlidMin <= cntlidMax'],
  ['cntlidMax out of range', set('subsystems.0.cntlidMax', 0xfff0), 'config: subsystems[0].cntlidMax: 65520 is too large; use a controller ID in 1..65519'],
  ['duplicate subsystem', push('subsystems', { nqn: 'nqn.2024-01.io.example:a' }), 'config: subsystems[1].nqn: "nqn.2024-01.io.example:a" is defined twice; merge the two subsystems'],
  ['duplicate nsid', push('subsystems.0.namespaces', { nsid: 1, backend: { type: 'null', size: '1G' } }), 'config: subsystems[0].namespaces[1].nsid: nsid 1 is used twice; give each namespace its own nsid'],
  ['nsid 0', set('subsystems.0.namespaces.0.nsid', 0), 'config: subsystems[0].namespaces[0].nsid: 0 is too small; use a namespace id in 1..4294967293'],
  ['block size', set('subsystems.0.namespaces.0.blockSize', 1024), 'config: subsystems[0].namespaces[0].blockSize: 1024 is not a supported block size; use 512 or 4096'],
  ['size not a block multiple', all(set('subsystems.0.namespaces.0.blockSize', 4096), set('subsystems.0.namespaces.0.backend.size', 6144)), 'config: subsystems[0].namespaces[0].backend.size: 6144 (6144 bytes) is not a positive multiple of the block size 4096'],
  ['zero size', set('subsystems.0.namespaces.0.backend.size', 0), 'config: subsystems[0].namespaces[0].backend.size: 0 (0 bytes) is not a positive multiple of the block size 512'],
  ['zone size not a power of two', set('subsystems.0.namespaces.0.zoned', { zoneSize: '3M' }), 'config: subsystems[0].namespaces[0].zoned.zoneSize: 3145728 bytes is not a power of two of at least one 512-byte block; use e.g. 16M'],
  ['zoned size not whole zones', all(set('subsystems.0.namespaces.0.backend.size', '24M'), set('subsystems.0.namespaces.0.zoned', {})), "config: subsystems[0].namespaces[0].zoned.zoneSize: the namespace's 25165824 bytes are not a whole number of 16777216-byte zones; make the size a multiple of the zone size"],
  ['zone capacity past the zone', set('subsystems.0.namespaces.0.zoned', { zoneSize: '1M', zoneCapacity: '2M' }), 'config: subsystems[0].namespaces[0].zoned.zoneCapacity: 2097152 bytes is not a whole number of blocks between one block and the zone size 1048576'],
  ['maxOpen past 2^32-1', set('subsystems.0.namespaces.0.zoned', { maxOpen: 2 ** 32 }), 'config: subsystems[0].namespaces[0].zoned.maxOpen: 4294967296 is too large; use a zone count in 0..4294967295'],
  ['zoned unknown key', set('subsystems.0.namespaces.0.zoned', { zoneSise: '1M' }), 'config: subsystems[0].namespaces[0].zoned: unknown key "zoneSise"; did you mean "zoneSize"?'],
  ['backend type', set('subsystems.0.namespaces.0.backend', { type: 'disk', size: '1G' }), 'config: subsystems[0].namespaces[0].backend.type: "disk" is not a backend type; use ram, file or null'],
  ['workerCache not a boolean', set('subsystems.0.namespaces.0.backend', { type: 'ram', size: '1G', workerCache: 'no' }), 'config: subsystems[0].namespaces[0].backend.workerCache: expected true or false, got "no"'],
  ['workerCache on a file backend', set('subsystems.0.namespaces.0.backend', { type: 'file', path: '/x', workerCache: false }), 'config: subsystems[0].namespaces[0].backend: unknown key "workerCache"; allowed: type, path, size'],
  ['backend without type', set('subsystems.0.namespaces.0.backend', { size: '1G' }), 'config: subsystems[0].namespaces[0].backend.type: is missing; add "ram", "file" or "null"'],
  ['file without path', set('subsystems.0.namespaces.0.backend', { type: 'file' }), 'config: subsystems[0].namespaces[0].backend.path: is missing; add a file path'],
  ['ram key on file backend', set('subsystems.0.namespaces.0.backend', { type: 'file', path: '/x', sise: '1G' }), 'config: subsystems[0].namespaces[0].backend: unknown key "sise"; did you mean "size"?'],
  ['uuid', set('subsystems.0.namespaces.0.uuid', 'not-a-uuid'), 'config: subsystems[0].namespaces[0].uuid: "not-a-uuid" is not a UUID; use 8-4-4-4-12 hex digits'],
  ['nguid', set('subsystems.0.namespaces.0.nguid', 'abc'), 'config: subsystems[0].namespaces[0].nguid: "abc" is not an NGUID; use 32 hex digits'],
  [
    'duplicate nguid across subsystems',
    all(
      set('subsystems.0.namespaces.0.nguid', '0123456789abcdef0123456789abcdef'),
      push('subsystems', { nqn: 'nqn.2024-01.io.example:b', namespaces: [{ nsid: 1, backend: { type: 'null', size: '1G' }, nguid: '0123456789ABCDEF0123456789ABCDEF' }] }),
    ),
    'config: subsystems[1].namespaces[0].nguid: nguid 0123456789abcdef0123456789abcdef is used by another namespace; hosts drop namespaces with duplicate ids',
  ],
  ['serial too long', set('subsystems.0.serial', 'x'.repeat(21)), `config: subsystems[0].serial: "${'x'.repeat(21)}" is longer than 20 characters (the Identify field size)`],
  ['model not ASCII', set('subsystems.0.model', 'modèle'), 'config: subsystems[0].model: "modèle" has non-printable or non-ASCII characters; use printable ASCII'],
  ['fault status', set('subsystems.0.faults', { failNext: { count: 1, status: 0x10000 } }), 'config: subsystems[0].faults.failNext.status: 65536 is too large; use a 15-bit NVMe status in 0..32767'],
  ['api listen', set('api', { listen: '8080' }), 'config: api.listen: "8080" is not ADDR:PORT; use e.g. 127.0.0.1:8080 or [::1]:8080'],
  ['not a list', set('subsystems', {}), 'config: subsystems: expected a list, got an object'],
  ['bool as string', set('subsystems.0.allowAnyHost', 'yes'), 'config: subsystems[0].allowAnyHost: expected true or false, got "yes"'],
];

describe('targetConfigSchema rejects with one line naming the field and the fix', () => {
  it.each(rejections)('%s', (_name, mutate, message) => {
    const line = errorOf(mutated(mutate));
    expect(line).toBe(message);
    expect(line).not.toContain('\n');
  });

  it('a document that is not an object', () => {
    expect(errorOf(null)).toBe('config: expected object, got null');
    expect(errorOf([])).toBe('config: expected object, got a list');
  });

  it('reports the path of the error on the ConfigError', () => {
    try {
      parseTargetConfig(mutated(set('subsystems.0.namespaces.0.backend.size', 'big')));
      expect.unreachable();
    } catch (err) {
      expect((err as ConfigError).path).toBe('subsystems[0].namespaces[0].backend.size');
      expect((err as ConfigError).code).toBe('NVMEOF_ERR_CONFIG');
    }
  });
});

describe('per-resource schemas (HTTP API bodies)', () => {
  it('subsystemSchema checks duplicates inside one body', () => {
    expect(() =>
      parseWith(subsystemSchema, { nqn: 'nqn.2024-01.io.example:a', hosts: ['nqn.2024-01.io.example:h', 'nqn.2024-01.io.example:h'] }, 'body'),
    ).toThrow('body: hosts[1]: "nqn.2024-01.io.example:h" is listed twice; remove one');
  });

  it('namespaceSchema names the field relative to the body', () => {
    expect(() => parseWith(namespaceSchema, { nsid: 1, backend: { type: 'ram', size: '1Q' } }, 'body')).toThrow(
      'body: backend.size: "1Q" is not a size; use bytes or a K/M/G/T suffix (e.g. 1G)',
    );
  });

  it('formatConfigError words raw zod errors and other errors on one line', () => {
    const r = z.object({ a: z.string() }).safeParse({ a: 1 });
    expect(r.success).toBe(false);
    if (!r.success) expect(formatConfigError(r.error)).toMatch(/^config: a: /);
    expect(formatConfigError(new Error('boom\nsecond line'))).toBe('config: boom');
  });
});

describe('helpers', () => {
  it.each([
    ['512', 512],
    ['4K', 4096],
    ['64M', 64 * 2 ** 20],
    ['1G', 2 ** 30],
    ['1g', 2 ** 30],
    ['1GiB', 2 ** 30],
    ['1.5K', 1536],
    ['2T', 2 * 2 ** 40],
    [4096, 4096],
  ] as const)('sizeToBytes(%j) = %d', (spec, bytes) => {
    expect(sizeToBytes(spec)).toBe(bytes);
  });

  it.each(['', '1X', 'G', '-1', '1.3', '1 GB extra'])('sizeToBytes(%j) is undefined', (spec) => {
    expect(sizeToBytes(spec)).toBeUndefined();
  });

  it('parseHostPort handles IPv4, bracketed IPv6 and rejects the rest', () => {
    expect(parseHostPort('127.0.0.1:4420')).toEqual({ addr: '127.0.0.1', port: 4420, family: 'ipv4' });
    expect(parseHostPort('[::1]:0')).toEqual({ addr: '::1', port: 0, family: 'ipv6' });
    for (const bad of ['::1:4420', 'localhost:4420', '127.0.0.1', '127.0.0.1:65536', '[127.0.0.1]:1', '1.2.3.4:']) {
      expect(parseHostPort(bad), bad).toBeUndefined();
    }
  });
});

describe('host entries (DH-HMAC-CHAP)', () => {
  const HOST = 'nqn.2024-01.io.example:host1';
  const key = formatDhchapSecret(1, Buffer.alloc(32, 7));
  const ctrlKey = formatDhchapSecret(3, Buffer.alloc(64, 9));
  const parseHost = (h: unknown) => parseWith(hostSchema, h, 'body');
  /** The one-line message, and proof that neither it nor the error object (cause included) holds the secret. */
  const hostError = (h: Record<string, unknown>, secret?: string): string => {
    try {
      parseTargetConfig({ ...base(), hosts: [h] });
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      if (secret !== undefined) {
        const e = err as ConfigError;
        expect(e.message).not.toContain(secret);
        expect(JSON.stringify(e.cause, Object.getOwnPropertyNames(e.cause ?? {}))).not.toContain(secret.slice(10, 30));
        expect(String((e.cause as Error).message)).not.toContain(secret.slice(10, 30));
      }
      return (err as Error).message;
    }
    return expect.unreachable() as never;
  };

  it('accepts keys, hash and group lists in nvmet spelling', () => {
    const h = { nqn: HOST, dhchapKey: key, dhchapCtrlKey: ctrlKey, dhchapHash: ['hmac(sha512)', 'hmac(sha256)'], dhchapDhgroup: ['ffdhe8192', 'null', 'ffdhe2048'] };
    expect(parseHost(h)).toEqual(h);
    expect(DHCHAP_HASH_NAMES).toEqual(['hmac(sha256)', 'hmac(sha384)', 'hmac(sha512)']);
    expect(DHCHAP_DHGROUP_NAMES).toEqual(['null', 'ffdhe2048', 'ffdhe3072', 'ffdhe4096', 'ffdhe6144', 'ffdhe8192']);
    expect(parseHost({ nqn: HOST })).toEqual({ nqn: HOST });
  });

  it.each([
    ['unknown hash', { dhchapKey: key, dhchapHash: ['sha256'] }, 'config: hosts[0].dhchapHash[0]: "sha256" is not a DH-HMAC-CHAP hash; use hmac(sha256), hmac(sha384), hmac(sha512)'],
    ['unknown group', { dhchapKey: key, dhchapDhgroup: ['ffdhe1024'] }, 'config: hosts[0].dhchapDhgroup[0]: "ffdhe1024" is not a DH-HMAC-CHAP DH group; use null, ffdhe2048, ffdhe3072, ffdhe4096, ffdhe6144, ffdhe8192'],
    ['empty hash list', { dhchapKey: key, dhchapHash: [] }, 'config: hosts[0].dhchapHash: is empty; list at least one of hmac(sha256), hmac(sha384), hmac(sha512) (or omit it for all)'],
    ['repeated group', { dhchapKey: key, dhchapDhgroup: ['null', 'null'] }, 'config: hosts[0].dhchapDhgroup[1]: "null" is listed twice; remove one'],
    ['hash not a list', { dhchapKey: key, dhchapHash: 'hmac(sha256)' }, 'config: hosts[0].dhchapHash: expected a list, got "hmac(sha256)"'],
    ['ctrl key without host key', { dhchapCtrlKey: ctrlKey }, 'config: hosts[0].dhchapKey: is missing; a controller key (dhchapCtrlKey) needs the host key (dhchapKey) too'],
  ])('rejects %s', (_name, patch, message) => {
    expect(hostError({ nqn: HOST, ...patch })).toBe(message);
  });

  it.each([
    ['a CRC mismatch', () => key.replace(/[A-Za-z](?=[^:]*:$)/, (c) => (c === 'A' ? 'B' : 'A')), /is not a usable DH-HMAC-CHAP host key \(DH-HMAC-CHAP secret CRC-32 mismatch/],
    ['a bad transform', () => key.replace('DHHC-1:01:', 'DHHC-1:07:'), /is not a usable DH-HMAC-CHAP host key \(DH-HMAC-CHAP secret has invalid key transform hh=07/],
    ['a wrong key length', () => formatDhchapSecret(0, Buffer.alloc(32, 1)).replace(/:([^:]*):$/, (_m, b: string) => `:${Buffer.from(b, 'base64').subarray(0, 30).toString('base64')}:`), /decodes to 30 bytes/],
    ['not the DHHC-1 form', () => 'my-password-123456', /is not a usable DH-HMAC-CHAP host key \(DH-HMAC-CHAP secret is not in the form/],
  ])('rejects a host key with %s without echoing it', (_name, make, message) => {
    const bad = make();
    expect(bad).not.toBe(key);
    expect(hostError({ nqn: HOST, dhchapKey: bad }, bad)).toMatch(message);
  });

  it('an unknown key next to a secret does not leak the secret through the error cause', () => {
    const msg = hostError({ nqn: HOST, dhchapKey: key, dhchapHsh: ['hmac(sha256)'] }, key);
    expect(msg).toBe('config: hosts[0]: unknown key "dhchapHsh"; did you mean "dhchapHash"?');
  });

  it('a bad controller key names its own field', () => {
    expect(hostError({ nqn: HOST, dhchapKey: key, dhchapCtrlKey: 'DHHC-1:03:AAAA:' }, 'DHHC-1:03:AAAA:')).toMatch(/^config: hosts\[0\]\.dhchapCtrlKey: is not a usable DH-HMAC-CHAP controller key/);
  });
});

// Every duration the config sets arms a timer (issue 48): past the ranges below, Node's setTimeout would turn a value
// of 2^31 ms or more into 1 ms. The config refuses them first, with one line naming the field and its range.
describe('timer lengths at 2^31−1, 2^31 and 2^32−1 are refused', () => {
  const gw = (extra: Doc): Mutate => set('gateway', { group: 'g', etcd: ['http://127.0.0.1:2379'], ...extra });
  for (const v of [2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1]) {
    const rows: [Mutate, string][] = [
      [set('icReqTimeoutS', v), 'config: icReqTimeoutS: is more than an hour; use 1..3600 seconds'],
      [set('ports.0.tlsHandshakeTimeoutS', v), `config: ports[0].tlsHandshakeTimeoutS: ${v} is too large; use seconds in 1..3600`],
      [set('subsystems.0.faults', { commandLatencyUs: v }), `config: subsystems[0].faults.commandLatencyUs: ${v} is too large; use microseconds in 0..60000000`],
      [set('subsystems.0.faults', { connectLatencyMs: v }), `config: subsystems[0].faults.connectLatencyMs: ${v} is too large; use milliseconds in 0..600000`],
      [gw({ leaseTtlMs: v }), `config: gateway.leaseTtlMs: ${v} is too large; use ms in 1000..600000 (+1 more problem)`],
      [gw({ failbackDelayMs: v }), `config: gateway.failbackDelayMs: ${v} is too large; use ms in 0..3600000`],
    ];
    for (const [m, msg] of rows) it(msg, () => expect(errorOf(mutated(m))).toBe(msg));
  }
});
