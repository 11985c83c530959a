import { Buffer } from 'node:buffer';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatDhchapSecret } from '../../protocol/auth/index.js';
import { importNvmetcli, loadNvmetcliConfig, type PathKind } from './nvmetcli.js';
import { ConfigError } from './schema.js';

let dir: string;
let img: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'nvme-tcp-nvmetcli-'));
  img = join(dir, 'ns1.img');
  await writeFile(img, Buffer.alloc(4096));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const SUB = 'nqn.2024-01.io.example:disk1';
const SUB2 = 'nqn.2024-01.io.example:rdma-only';
const HOST = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000001';

/** Hand-written in the shape `nvmetcli save` produces (attribute values as configfs strings). */
function sample(devicePath: string) {
  return {
    hosts: [{ nqn: HOST }],
    ports: [
      {
        addr: { adrfam: 'ipv4', traddr: '192.168.1.10', treq: 'not specified', trsvcid: '4420', trtype: 'tcp' },
        ana_groups: [
          { ana: { state: 'optimized' }, grpid: 1 },
          { ana: { state: 'inaccessible' }, grpid: 2 },
        ],
        param: { inline_data_size: '16384', pi_enable: '0' },
        portid: 1,
        referrals: [
          { addr: { adrfam: 'ipv4', portid: '3', traddr: '192.168.1.20', treq: 'not specified', trsvcid: '8009', trtype: 'tcp' }, enable: 1, name: 'peer' },
          { addr: { adrfam: 'ipv4', portid: '4', traddr: '192.168.1.21', treq: 'not specified', trsvcid: '4420', trtype: 'rdma' }, enable: 1, name: 'rdma-peer' },
        ],
        subsystems: [SUB],
      },
      {
        addr: { adrfam: 'ipv6', traddr: '::', treq: 'not specified', trsvcid: '4421', trtype: 'tcp' },
        ana_groups: [{ ana: { state: 'optimized' }, grpid: 1 }],
        param: { inline_data_size: '-1' },
        portid: 2,
        referrals: [],
        subsystems: [SUB],
      },
      {
        addr: { adrfam: 'ipv4', traddr: '10.0.0.1', treq: 'not specified', trsvcid: '4420', trtype: 'rdma' },
        portid: 3,
        referrals: [],
        subsystems: [SUB2],
      },
    ],
    subsystems: [
      {
        allowed_hosts: [HOST],
        attr: { allow_any_host: '0', cntlid_max: '65519', cntlid_min: '1', model: 'Linux', pi_enable: '0', serial: '9a3f1b2c4d5e6f70', version: '1.3', qid_max: '16' },
        namespaces: [
          {
            ana_grpid: 2,
            device: { nguid: '01234567-89ab-cdef-0123-456789abcdef', path: devicePath, uuid: 'd592cdf3-5d1c-44e0-8412-3fcf7d99df27' },
            enable: 1,
            nsid: 1,
          },
          {
            ana_grpid: 1,
            device: { nguid: '00000000-0000-0000-0000-000000000000', path: devicePath, uuid: '00000000-0000-0000-0000-000000000000' },
            enable: 0,
            nsid: 2,
          },
        ],
        nqn: SUB,
      },
      { allowed_hosts: [], attr: { allow_any_host: '1' }, namespaces: [], nqn: SUB2 },
    ],
  };
}

describe('importNvmetcli', () => {
  it('converts tcp ports, ANA states, referrals, hosts, attributes and file namespaces', async () => {
    const { config, warnings } = await importNvmetcli(sample(img));
    expect(config).toEqual({
      ports: [
        {
          id: 1,
          addr: '192.168.1.10',
          port: 4420,
          family: 'ipv4',
          inlineDataSize: 16384,
          anaStates: { '1': 'optimized', '2': 'inaccessible' },
          referrals: [{ addr: '192.168.1.20', port: 8009, family: 'ipv4', portId: 3 }],
        },
        { id: 2, addr: '::', port: 4421, family: 'ipv6' },
      ],
      subsystems: [
        {
          nqn: SUB,
          allowAnyHost: false,
          hosts: [HOST],
          serial: '9a3f1b2c4d5e6f70',
          model: 'Linux',
          maxIoQueues: 16,
          namespaces: [
            { nsid: 1, backend: { type: 'file', path: img }, nguid: '0123456789abcdef0123456789abcdef', uuid: 'd592cdf3-5d1c-44e0-8412-3fcf7d99df27', anaGroup: 2 },
            // enable = 0 in configfs: kept, detached (nvmet keeps the namespace too)
            { nsid: 2, backend: { type: 'file', path: img }, enabled: false },
          ],
        },
        { nqn: SUB2, allowAnyHost: true, ports: [] },
      ],
      hosts: [{ nqn: HOST }],
    });
    expect(warnings).toEqual([
      'ports[0] (portid 1): referral "rdma-peer" trtype "rdma" skipped; only tcp is served',
      'ports[2] (portid 3): trtype "rdma" skipped; only tcp is served',
      // nvmet's attr_version is what its VS reports; ours is fixed at 1.4 (CTRATT TBKAS and ANA are 1.4 features).
      `subsystems[0] (${SUB}): attr version 1.3 ignored; this target reports NVMe 1.4`,
      `subsystems[1] (${SUB2}): not linked to any tcp port; it will not be reachable`,
    ]);
  });

  it('maps addr_tsas tls1.3 with treq required / not required to tls required / allowed, and says where the keys are', async () => {
    const port = (portid: number, treq: string, tsas?: string) => ({
      addr: { adrfam: 'ipv4', traddr: '10.0.0.1', treq, trsvcid: String(4420 + portid), trtype: 'tcp', ...(tsas !== undefined ? { tsas } : {}) },
      portid,
      subsystems: [SUB],
    });
    const { config, warnings } = await importNvmetcli({
      ports: [port(1, 'required', 'tls1.3'), port(2, 'not required', 'tls1.3'), port(3, 'not specified', 'none')],
      subsystems: [{ nqn: SUB, attr: { allow_any_host: '1' }, namespaces: [] }],
    });
    expect(config.ports.map((p) => p.tls)).toEqual(['required', 'allowed', undefined]);
    expect(warnings.filter((w) => w.includes('tsas tls1.3')).length).toBe(2);
    expect(warnings.some((w) => w.includes('--tls-key'))).toBe(true);
  });

  it('reads the file from disk', async () => {
    const path = join(dir, 'config.json');
    await writeFile(path, JSON.stringify(sample(img), null, 2));
    const { config } = await loadNvmetcliConfig(path);
    expect(config.subsystems[0]?.namespaces?.[0]?.backend).toEqual({ type: 'file', path: img });
  });

  it('imports a block device as a namespace on that path (nvmet bdev namespaces)', async () => {
    const pathKind = async (p: string): Promise<PathKind> => (p === '/dev/nvme0n1' ? 'block' : 'file');
    const { config } = await importNvmetcli(sample('/dev/nvme0n1'), { pathKind });
    expect(config.subsystems[0]?.namespaces?.[0]?.backend).toEqual({ type: 'file', path: '/dev/nvme0n1' });
  });

  it('rejects a missing device path and names it', async () => {
    await expect(importNvmetcli(sample(join(dir, 'gone.img')))).rejects.toThrow(
      `nvmetcli: subsystems[0].namespaces[0].device.path: ${join(dir, 'gone.img')} does not exist; create the file or fix the path`,
    );
  });

  it('keeps a subsystem name nvmet accepts that is not an NQN (blktests-subsystem-1), and refuses one nvmet refuses', async () => {
    const s = sample(img);
    const sub = s.subsystems[0];
    if (!sub) throw new Error('sample');
    sub.nqn = 'blktests-subsystem-1';
    s.ports[0]!.subsystems = ['blktests-subsystem-1'];
    expect((await importNvmetcli(s)).config.subsystems[0]?.nqn).toBe('blktests-subsystem-1');
    sub.nqn = 'x'.repeat(224);
    await expect(importNvmetcli(s)).rejects.toThrow(`nvmetcli (converted): subsystems[0].nqn: "${'x'.repeat(224)}" cannot name a subsystem or host (too long: 224 bytes`);
  });

  it('reports structural problems with the nvmetcli field path', async () => {
    await expect(importNvmetcli({ ports: [{ portid: 'x', addr: {} }] })).rejects.toThrow(/^nvmetcli: ports\[0\]\.portid: /);
    await expect(importNvmetcli({ subsystems: [{ attr: {} }] })).rejects.toThrow('nvmetcli: subsystems[0].nqn: is missing');
  });

  it('an empty save (nvmetcli clear; nvmetcli save) gives an empty config', async () => {
    expect(await importNvmetcli({ hosts: [], ports: [], subsystems: [] })).toEqual({ config: { ports: [], subsystems: [] }, warnings: [] });
  });

  describe('host DH-HMAC-CHAP attributes', () => {
    const KEY = formatDhchapSecret(2, Buffer.alloc(48, 5));
    const CKEY = formatDhchapSecret(0, Buffer.alloc(32, 6));
    const H2 = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000002';
    const withHosts = (hosts: unknown[]) => ({ ...sample(img), hosts });

    it('maps dhchap_key, dhchap_ctrl_key, dhchap_hash and dhchap_dhgroup (flat or as a "dhchap" group) to the host entry', async () => {
      const { config } = await importNvmetcli(
        withHosts([
          { nqn: HOST, dhchap_key: KEY, dhchap_ctrl_key: CKEY, dhchap_hash: 'hmac(sha384)', dhchap_dhgroup: 'ffdhe2048' },
          { nqn: H2, dhchap: { key: `${KEY}\n`, ctrl_key: '', hash: 'hmac(sha512)', dhgroup: 'null' } },
        ]),
      );
      expect(config.hosts).toEqual([
        { nqn: HOST, dhchapKey: KEY, dhchapCtrlKey: CKEY, dhchapHash: ['hmac(sha384)'], dhchapDhgroup: ['ffdhe2048'] },
        { nqn: H2, dhchapKey: KEY, dhchapHash: ['hmac(sha512)'], dhchapDhgroup: ['null'] },
      ]);
    });

    it('rejects a corrupted key or an unknown group without printing the key', async () => {
      const bad = KEY.replace(/[A-Za-z](?=[^:]*:$)/, (c) => (c === 'A' ? 'B' : 'A'));
      const err = await importNvmetcli(withHosts([{ nqn: HOST, dhchap_key: bad }])).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toMatch(/^nvmetcli \(converted\): hosts\[0\]\.dhchapKey: is not a usable DH-HMAC-CHAP host key \(DH-HMAC-CHAP secret CRC-32 mismatch/);
      expect((err as Error).message).not.toContain(bad.slice(10, 40));
      await expect(importNvmetcli(withHosts([{ nqn: HOST, dhchap_key: KEY, dhchap_dhgroup: 'ffdhe1024' }]))).rejects.toThrow(
        'nvmetcli (converted): hosts[0].dhchapDhgroup[0]: "ffdhe1024" is not a DH-HMAC-CHAP DH group',
      );
    });
  });
});
