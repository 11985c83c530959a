import { Buffer } from 'node:buffer';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, connect, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_SUBSYSTEM_NQN, defaultConfig, parseTargetConfig } from '../target/config/index.js';
import { hostPortArg, nqnArg, sizeArg } from './args.js';
import { Writable } from 'node:stream';
import { formatDhchapSecret } from '../protocol/auth/index.js';
import { buildTargetConfig, parseTargetArgs, runTargetCli, startupLines, targetEnv, targetLoggerOptions } from './target.js';

let dir: string;
const servers: Server[] = [];
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'nvme-tcp-main-'));
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
  await rm(dir, { recursive: true, force: true });
});

const build = async (argv: string[]) => (await buildTargetConfig(parseTargetArgs(argv))).config;

describe('parseTargetArgs rejects bad flags with one line naming the flag and the fix', () => {
  it.each([
    [['--bogus'], 'unknown option --bogus; see nvme-tcp target --help'],
    [['--listn', '127.0.0.1:0'], 'unknown option --listn (did you mean --listen?); see nvme-tcp target --help'],
    // parseArgs refused a value starting with "-" as "takes no value" (issue #32); it is a value, and not a size.
    [['--ram', '-1'], '--ram -1: not a size; use bytes or a K/M/G/T suffix (e.g. 1G)'],
    [['--listen'], '--listen: missing value; see nvme-tcp target --help'],
    [['extra'], 'unexpected argument "extra"; every value needs its flag; see nvme-tcp target --help'],
    [['--listen', 'localhost:4420'], '--listen localhost:4420: not ADDR:PORT; use e.g. 127.0.0.1:4420, 0.0.0.0:4420 or [::1]:4420'],
    [['--listen', '::1:4420'], '--listen ::1:4420: not ADDR:PORT; use e.g. 127.0.0.1:4420, 0.0.0.0:4420 or [::1]:4420'],
    [['--ram', '1X'], '--ram 1X: not a size; use bytes or a K/M/G/T suffix (e.g. 1G)'],
    [['--null', 'big'], '--null big: not a size; use bytes or a K/M/G/T suffix (e.g. 1G)'],
    [['--block-size', '1024'], '--block-size 1024: not supported; use 512 or 4096'],
    [['--ram', '64M', '--zoned', '16Q'], '--zoned 16Q: not a size; use bytes or a K/M/G/T suffix (e.g. 1G)'],
    [['--zoned'], '--zoned: applies to namespaces given with --ram/--file/--null, and there are none; add one or set "zoned" in the config'],
    [['--nqn', ''], '--nqn "": cannot name a subsystem or host (empty); use 1..223 bytes, e.g. nqn.2024-01.io.example:disk1'],
    [['--allow-host', 'h'.repeat(224)], `--allow-host "${'h'.repeat(224)}": cannot name a subsystem or host (too long: 224 bytes, at most 223); use 1..223 bytes, e.g. nqn.2024-01.io.example:disk1`],
    [['--advertise', 'gateway'], '--advertise gateway: not an IP address; use ADDR or ADDR:PORT (e.g. 10.0.2.100 or 10.0.2.100:4420)'],
    [['--advertise', '10.0.2.100:0'], '--advertise 10.0.2.100:0: port 0 cannot be advertised; use the port hosts connect to'],
    [['--log-level', 'loud'], '--log-level loud: unknown level; use trace, debug, info, warn, error, fatal, silent'],
    [['--api', '8080'], '--api 8080: not ADDR:PORT; use e.g. 127.0.0.1:8080 or [::1]:8080'],
    [['--write-back'], '--write-back: needs --config FILE (the file API changes are saved to)'],
    [['--config', 'a.json', '--import-nvmetcli', 'b.json'], '--config and --import-nvmetcli: give only one of them (convert once, then save as a config); see nvme-tcp target --help'],
  ])('%j', (argv, message) => {
    expect(() => parseTargetArgs(argv)).toThrow(message);
    try {
      parseTargetArgs(argv);
    } catch (err) {
      expect((err as Error).message).toBe(message);
    }
  });
});

// One parser per kind of value (issue 32): the same text means the same thing in every flag and in the config file.
describe('one parser per kind of value', () => {
  const accepted = (f: () => unknown): boolean => {
    try {
      f();
      return true;
    } catch {
      return false;
    }
  };
  it.each(['127.0.0.1:4420', '[::1]:4420', '0.0.0.0:0', '::1:4420', '1.2.3.4:70000', 'localhost:4420', '[127.0.0.1]:1', '10.0.0.1', ' 10.0.0.1:1'])(
    'ADDR:PORT %j: target --listen, target --api, ctl --api and the config api.listen agree',
    (v) => {
      const ok = accepted(() => hostPortArg('api', v));
      expect(accepted(() => parseTargetArgs(['--listen', v]))).toBe(ok);
      expect(accepted(() => parseTargetArgs(['--api', v]))).toBe(ok);
      expect(accepted(() => parseTargetConfig({ ...defaultConfig(), api: { listen: v, token: 't' } }))).toBe(ok);
      expect(ok).toBe(['127.0.0.1:4420', '[::1]:4420', '0.0.0.0:0'].includes(v));
    },
  );
  it.each(['1G', '1.5T', '512K', '4096', '1X', '-1', '1.3'])('size %j: target --ram and the initiator\'s size flags agree', (v) => {
    expect(accepted(() => parseTargetArgs(['--ram', v]))).toBe(accepted(() => sizeArg('size', v)));
  });
  it.each(['nqn.2024-01.io.example:a', 'testnqn', '', 'h'.repeat(224)])('name %j: target --nqn/--allow-host and the initiator\'s -n agree', (v) => {
    const ok = accepted(() => nqnArg('nqn', v));
    expect(accepted(() => parseTargetArgs(['--nqn', v]))).toBe(ok);
    expect(accepted(() => parseTargetArgs(['--allow-host', v]))).toBe(ok);
  });
});

describe('buildTargetConfig', () => {
  it('no flags: the embedded default', async () => {
    expect(await build([])).toEqual(defaultConfig());
  });

  it('namespace flags replace the default namespace and get nsids in command-line order', async () => {
    const img = join(dir, 'a:b.img');
    const c = await build(['--ram', '64M', '--file', `${img}:32M`, '--null', '1G', '--ram', '1M', '--block-size', '4096']);
    expect(c.subsystems).toHaveLength(1);
    expect(c.subsystems[0]?.nqn).toBe(DEFAULT_SUBSYSTEM_NQN);
    expect(c.subsystems[0]?.namespaces).toEqual([
      { nsid: 1, backend: { type: 'ram', size: '64M' }, blockSize: 4096 },
      { nsid: 2, backend: { type: 'file', path: img, size: '32M' }, blockSize: 4096 },
      { nsid: 3, backend: { type: 'null', size: '1G' }, blockSize: 4096 },
      { nsid: 4, backend: { type: 'ram', size: '1M' }, blockSize: 4096 },
    ]);
  });

  it('--zoned makes the flag namespaces zoned, with its zone size or the default', async () => {
    const c = await build(['--ram', '64M', '--zoned', '4M', '--ram', '32M']);
    expect(c.subsystems[0]?.namespaces).toEqual([
      { nsid: 1, backend: { type: 'ram', size: '64M' }, zoned: { zoneSize: '4M' } },
      { nsid: 2, backend: { type: 'ram', size: '32M' }, zoned: { zoneSize: '4M' } },
    ]);
    expect((await build(['--ram', '64M', '--zoned'])).subsystems[0]?.namespaces).toEqual([{ nsid: 1, backend: { type: 'ram', size: '64M' }, zoned: {} }]);
  });

  it('--nqn renames the default subsystem; --allow-host restricts it; --block-size alone applies to the default namespace', async () => {
    const c = await build(['--nqn', 'nqn.2024-01.io.example:x', '--allow-host', 'nqn.2024-01.io.example:h1', '--allow-host', 'nqn.2024-01.io.example:h2', '--block-size', '4096']);
    expect(c.subsystems).toEqual([
      {
        nqn: 'nqn.2024-01.io.example:x',
        allowAnyHost: false,
        hosts: ['nqn.2024-01.io.example:h1', 'nqn.2024-01.io.example:h2'],
        namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1G' }, blockSize: 4096 }],
      },
    ]);
  });

  it('--listen (repeatable, IPv6) and --advertise', async () => {
    const c = await build(['--listen', '127.0.0.1:0', '--listen', '[::1]:4421', '--advertise', '10.0.2.100:4420']);
    expect(c.ports).toEqual([
      { id: 1, addr: '127.0.0.1', port: 0, family: 'ipv4', advertiseAddr: '10.0.2.100', advertisePort: 4420 },
      { id: 2, addr: '::1', port: 4421, family: 'ipv6', advertiseAddr: '10.0.2.100', advertisePort: 4420 },
    ]);
  });

  it('extends a config file: --listen keeps port settings by position, drops the rest, namespaces append', async () => {
    const path = join(dir, 'c.json');
    await writeFile(
      path,
      JSON.stringify({
        ports: [
          { id: 7, addr: '0.0.0.0', port: 4420, maxH2CData: 65536 },
          { id: 9, addr: '0.0.0.0', port: 4421 },
        ],
        subsystems: [
          { nqn: 'nqn.2024-01.io.example:a', ports: [9], namespaces: [{ nsid: 3, backend: { type: 'null', size: '1G' } }] },
          { nqn: 'nqn.2024-01.io.example:b', ports: [7, 9] },
        ],
      }),
    );
    const built = await buildTargetConfig(parseTargetArgs(['--config', path, '--listen', '127.0.0.1:0', '--nqn', 'nqn.2024-01.io.example:b', '--ram', '1M']));
    expect(built.config.ports).toEqual([{ id: 7, addr: '127.0.0.1', port: 0, family: 'ipv4', maxH2CData: 65536 }]);
    expect(built.config.subsystems).toEqual([
      { nqn: 'nqn.2024-01.io.example:a', namespaces: [{ nsid: 3, backend: { type: 'null', size: '1G' } }] },
      { nqn: 'nqn.2024-01.io.example:b', ports: [7], namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] },
    ]);
    expect(built.warnings).toEqual([
      '--listen: config ports 9 (0.0.0.0:4421) dropped',
      '--listen: subsystem nqn.2024-01.io.example:a lost all its ports; it is now exported on every port',
    ]);
    // a --nqn the config lacks becomes a new subsystem; namespace flags on the first subsystem append after its nsids
    const more = await build(['--config', path, '--nqn', 'nqn.2024-01.io.example:new', '--null', '1M']);
    expect(more.subsystems.map((s) => s.nqn)).toEqual(['nqn.2024-01.io.example:a', 'nqn.2024-01.io.example:b', 'nqn.2024-01.io.example:new']);
    const first = await build(['--config', path, '--ram', '1M']);
    expect(first.subsystems[0]?.namespaces?.map((n) => n.nsid)).toEqual([3, 4]);
  });

  it.each([
    [['--ram', '1000'], '--ram 1000: 1000 bytes is not a positive multiple of the block size 512; use e.g. 1G'],
    [['--ram', '6K', '--block-size', '4096'], '--ram 6K: 6144 bytes is not a positive multiple of the block size 4096; use e.g. 1G'],
  ])('rejects namespace sizes that are not whole blocks: %j', async (argv, message) => {
    await expect(build(argv)).rejects.toThrow(message);
  });

  it('--file without a size needs an existing regular file', async () => {
    const missing = join(dir, 'missing.img');
    await expect(build(['--file', missing])).rejects.toThrow(`--file ${missing}: ${missing} does not exist; add a size to create it (--file ${missing}:1G)`);
    await expect(build(['--file', dir])).rejects.toThrow(`--file ${dir}: ${dir} is not a regular file; use a regular file`);
    const img = join(dir, 'ok.img');
    await writeFile(img, Buffer.alloc(8192));
    expect((await build(['--file', img])).subsystems[0]?.namespaces).toEqual([{ nsid: 1, backend: { type: 'file', path: img } }]);
  });

  it('reports config file problems with the file name', async () => {
    const path = join(dir, 'bad.json');
    await writeFile(path, JSON.stringify({ ports: [{ id: 1, addr: '127.0.0.1', port: 4420 }], subsystems: [], extra: true }));
    await expect(build(['--config', path])).rejects.toThrow(`config ${path}: unknown key "extra"; allowed: ports, subsystems, hosts, discoveryNqn, icReqTimeoutS, api`);
    await expect(build(['--block-size', '4096', '--config', path.replace('bad', 'none')])).rejects.toThrow(/^config: cannot read .*none\.json \(no such file or directory\); check the path$/);
  });
});

describe('targetEnv: the environment variables the bin turns into options', () => {
  it('reads nothing from an empty environment', () => {
    expect(targetEnv({})).toEqual({ workerNodeArgs: [], tlsTrace: false });
  });

  it('reads each documented variable', () => {
    expect(
      targetEnv({
        NVME_TCP_TARGET_WORKERS: '3',
        NVME_TCP_TARGET_PLACEMENT: 'host',
        NVME_TCP_WORKER_NODE_ARGS: '  --cpu-prof   --cpu-prof-dir=/tmp/p ',
        NVME_TCP_TLS_TRACE: '1',
        NVME_TCP_API_TOKEN: 'tok',
      }),
    ).toEqual({ workers: 3, placement: 'host', workerNodeArgs: ['--cpu-prof', '--cpu-prof-dir=/tmp/p'], tlsTrace: true, apiToken: 'tok' });
    expect(targetEnv({ NVME_TCP_TARGET_WORKERS: 'auto', NVME_TCP_TLS_TRACE: '0' })).toEqual({ workers: 'auto', workerNodeArgs: [], tlsTrace: false });
    // Empty means unset, as a shell's VAR= does.
    expect(targetEnv({ NVME_TCP_TARGET_WORKERS: '', NVME_TCP_TARGET_PLACEMENT: '' })).toEqual({ workerNodeArgs: [], tlsTrace: false });
  });

  it('names the variable and the fix for a bad value', () => {
    expect(() => targetEnv({ NVME_TCP_TARGET_WORKERS: '1.5' })).toThrow('NVME_TCP_TARGET_WORKERS=1.5: not a worker count; use an integer >= 1 or auto');
    expect(() => targetEnv({ NVME_TCP_TARGET_PLACEMENT: 'Queue' })).toThrow('NVME_TCP_TARGET_PLACEMENT=Queue: unknown policy; use single, controller, queue or host');
  });
});

describe('startupLines', () => {
  it('prints the nvme-cli lines with the bound port, or the advertised address', () => {
    const c = defaultConfig();
    expect(startupLines(c, [{ id: 1, addr: '127.0.0.1', port: 40000 }]).slice(-2)).toEqual([
      'nvme discover -t tcp -a 127.0.0.1 -s 40000',
      `nvme connect -t tcp -a 127.0.0.1 -s 40000 -n ${DEFAULT_SUBSYSTEM_NQN}`,
    ]);
    c.ports[0] = { id: 1, addr: '127.0.0.1', port: 0, advertiseAddr: '10.0.2.100', advertisePort: 4420 };
    const lines = startupLines(c, [{ id: 1, addr: '127.0.0.1', port: 40001 }]);
    expect(lines[0]).toBe('nvme-tcp target: listening on 127.0.0.1:40001, port id 1 (advertised as 10.0.2.100:4420)');
    expect(lines).toContain(`nvme connect -t tcp -a 10.0.2.100 -s 4420 -n ${DEFAULT_SUBSYSTEM_NQN}`);
  });
});

describe('runTargetCli in-process', () => {
  const silent = pino({ level: 'silent' });

  function capture() {
    const out: string[] = [];
    const err: string[] = [];
    return { out, err, io: { stdout: (s: string) => void out.push(s), stderr: (s: string) => void err.push(s), logger: silent, processHandlers: false, env: {} as NodeJS.ProcessEnv } };
  }

  it('serves on the port it prints, creates the file namespace, and stops with exit 0', async () => {
    const c = capture();
    const ac = new AbortController();
    const img = join(dir, 'ns2.img');
    let port = 0;
    const code = runTargetCli(['--listen', '127.0.0.1:0', '--ram', '1M', '--file', `${img}:2M`], {
      ...c.io,
      signal: ac.signal,
      onReady: (bound) => {
        port = bound[0]?.port ?? 0;
        const s = connect(port, '127.0.0.1');
        s.on('connect', () => {
          s.destroy();
          ac.abort();
        });
        s.on('error', () => ac.abort());
      },
    });
    expect(await code).toBe(0);
    expect(port).toBeGreaterThan(0);
    const text = c.out.join('');
    expect(text).toContain(`nvme discover -t tcp -a 127.0.0.1 -s ${port}\n`);
    expect(text).toContain(`nvme connect -t tcp -a 127.0.0.1 -s ${port} -n ${DEFAULT_SUBSYSTEM_NQN}\n`);
    expect((await stat(img)).size).toBe(2 * 1024 * 1024);
    expect(c.err).toEqual([]);
  });

  it('exit 2 naming the flag when a --file directory does not exist (a config file path: the same reason)', async () => {
    const c = capture();
    const img = join(dir, 'no-such-dir', 'x.img');
    expect(await runTargetCli(['--listen', '127.0.0.1:0', '--file', `${img}:1M`], c.io)).toBe(2);
    const reason = `directory ${join(dir, 'no-such-dir')} does not exist; create it (mkdir -p ${join(dir, 'no-such-dir')}) or put the file in an existing directory`;
    expect(c.err).toEqual([`nvme-tcp target: --file ${img}:1M: ${reason}\n`]);
    const cfg = join(dir, 'missing-dir.json');
    await writeFile(cfg, JSON.stringify({ ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [{ nqn: 'nqn.2024-01.io.example:m', allowAnyHost: true, namespaces: [{ nsid: 1, backend: { type: 'file', path: img, size: '1M' } }] }] }));
    const c2 = capture();
    expect(await runTargetCli(['--config', cfg], c2.io)).toBe(2);
    expect(c2.err).toEqual([`nvme-tcp target: namespace backend ${img}: ${reason}\n`]);
  });

  it('exit 2 and one stderr line for a bad flag', async () => {
    const c = capture();
    expect(await runTargetCli(['--ram', '12Q'], c.io)).toBe(2);
    expect(c.err).toEqual(['nvme-tcp target: --ram 12Q: not a size; use bytes or a K/M/G/T suffix (e.g. 1G)\n']);
    expect(c.out).toEqual([]);
  });

  it('exit 1 with a one-line reason when the port is taken', async () => {
    const busy = createServer();
    servers.push(busy);
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    const port = (busy.address() as { port: number }).port;
    const c = capture();
    expect(await runTargetCli(['--listen', `127.0.0.1:${port}`, '--null', '1M'], c.io)).toBe(1);
    expect(c.err).toEqual([`nvme-tcp target: --listen: 127.0.0.1:${port} is already in use; stop the other listener or pick another port\n`]);
  });

  it('--api starts the management API next to the target and stops it with the target', async () => {
    const c = capture();
    const ac = new AbortController();
    let health: number | undefined;
    const code = runTargetCli(['--listen', '127.0.0.1:0', '--null', '1M', '--api', '127.0.0.1:0'], {
      ...c.io,
      signal: ac.signal,
      onReady: () => {
        const url = /management API on (http:\/\/\S+)/.exec(c.out.join(''))?.[1];
        if (url === undefined) return ac.abort();
        fetch(`${url}/healthz`)
          .then((r) => (health = r.status))
          .finally(() => ac.abort());
      },
    });
    expect(await code).toBe(0);
    expect(c.out.join('')).toMatch(/management API on http:\/\/127\.0\.0\.1:\d+ /);
    expect(health).toBe(200);
  });

  it('refuses an API reachable from other machines without a token (exit 2)', async () => {
    const c = capture();
    expect(await runTargetCli(['--listen', '127.0.0.1:0', '--null', '1M', '--api', '0.0.0.0:0'], { ...c.io, env: { NVME_TCP_API_TOKEN: '' } })).toBe(2);
    expect(c.err).toHaveLength(1);
    expect(c.err[0]).toMatch(/^nvme-tcp target: --api: refusing to serve the management API on 0\.0\.0\.0:0 without a token/);
  });

  it('takes the API token from $NVME_TCP_API_TOKEN: the same API then starts, and asks for the token', async () => {
    const c = capture();
    const ac = new AbortController();
    let status: number | undefined;
    let authed: number | undefined;
    const code = runTargetCli(['--listen', '127.0.0.1:0', '--null', '1M', '--api', '0.0.0.0:0'], {
      ...c.io,
      env: { NVME_TCP_API_TOKEN: 'env-token' },
      signal: ac.signal,
      onReady: () => {
        const port = /management API on http:\/\/[^:]+:(\d+)/.exec(c.out.join(''))?.[1];
        if (port === undefined) return ac.abort();
        const url = `http://127.0.0.1:${port}/subsystems`;
        fetch(url)
          .then(async (r) => {
            status = r.status;
            authed = (await fetch(url, { headers: { authorization: 'Bearer env-token' } })).status;
          })
          .finally(() => ac.abort());
      },
    });
    expect(await code).toBe(0);
    expect(c.err).toEqual([]);
    expect(status).toBe(401);
    expect(authed).toBe(200);
  });

  it('a bad NVME_TCP_TARGET_WORKERS or NVME_TCP_TARGET_PLACEMENT: one line naming the variable, exit 2', async () => {
    for (const [name, value, fix] of [
      ['NVME_TCP_TARGET_WORKERS', '0', 'use an integer >= 1 or auto'],
      ['NVME_TCP_TARGET_PLACEMENT', 'nowhere', 'unknown policy; use single, controller, queue or host'],
    ] as const) {
      const c = capture();
      expect(await runTargetCli(['--listen', '127.0.0.1:0', '--null', '1M'], { ...c.io, env: { [name]: value } })).toBe(2);
      expect(c.err).toHaveLength(1);
      expect(c.err[0]).toContain(`nvme-tcp target: ${name}=${value}: `);
      expect(c.err[0]).toContain(fix);
    }
  });

  it('"ctl" goes to the management client', async () => {
    const c = capture();
    expect(await runTargetCli(['ctl', '--help'], c.io)).toBe(0);
    expect(c.out.join('')).toMatch(/^Usage: nvme-tcp target ctl /);
  });

  it('--help prints the usage and exits 0', async () => {
    const c = capture();
    expect(await runTargetCli(['--help'], c.io)).toBe(0);
    expect(c.out.join('')).toMatch(/^usage: nvme-tcp target \[options\]/);
  });
});

describe('--dhchap-key / --dhchap-ctrl-key', () => {
  const H1 = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000001';
  const H2 = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000002';
  const K1 = formatDhchapSecret(1, Buffer.alloc(32, 1));
  const C1 = formatDhchapSecret(3, Buffer.alloc(64, 2));
  const K2 = formatDhchapSecret(0, Buffer.alloc(32, 3));

  it('adds host entries; the hosts stay out of the allow list without --allow-host', async () => {
    const c = await build(['--dhchap-key', `${H1}=${K1}`, '--dhchap-ctrl-key', `${H1}=${C1}`, '--dhchap-key', `${H2}=${K2}`]);
    expect(c.hosts).toEqual([
      { nqn: H1, dhchapKey: K1, dhchapCtrlKey: C1 },
      { nqn: H2, dhchapKey: K2 },
    ]);
    expect(c.subsystems[0]?.hosts).toBeUndefined();
    expect(c.subsystems[0]?.allowAnyHost).toBe(true);
  });

  it('with --allow-host the keyed hosts join the allow list', async () => {
    const other = 'nqn.2024-01.io.example:h9';
    const c = await build(['--allow-host', other, '--dhchap-key', `${H1}=${K1}`]);
    expect(c.subsystems[0]).toMatchObject({ allowAnyHost: false, hosts: [other, H1] });
  });

  it('merges into the config file host entries (the flags win, other settings kept)', async () => {
    const path = join(dir, 'c.json');
    await writeFile(
      path,
      JSON.stringify({ ports: [], subsystems: [], hosts: [{ nqn: H1, dhchapKey: K2, dhchapHash: ['hmac(sha384)'] }] }),
    );
    const c = await build(['--config', path, '--dhchap-key', `${H1}=${K1}`, '--dhchap-ctrl-key', `${H1}=${C1}`]);
    expect(c.hosts).toEqual([{ nqn: H1, dhchapKey: K1, dhchapHash: ['hmac(sha384)'], dhchapCtrlKey: C1 }]);
    // a config key lets a lone --dhchap-ctrl-key through
    const d = await build(['--config', path, '--dhchap-ctrl-key', `${H1}=${C1}`]);
    expect(d.hosts).toEqual([{ nqn: H1, dhchapKey: K2, dhchapHash: ['hmac(sha384)'], dhchapCtrlKey: C1 }]);
  });

  it.each([
    [['--dhchap-key', K1], '--dhchap-key: expected HOSTNQN=SECRET'],
    [['--dhchap-key', formatDhchapSecret(2, Buffer.alloc(48, 4))], '--dhchap-key: expected HOSTNQN=SECRET'],
    [['--dhchap-key', `=${K1}`], '--dhchap-key: expected HOSTNQN=SECRET'],
    [['--dhchap-key', `${'h'.repeat(224)}=${K1}`], `--dhchap-key: "${'h'.repeat(224)}" cannot name a subsystem or host (too long`],
    [['--dhchap-key', `${H1}=${K1.replace('DHHC-1:01:', 'DHHC-1:09:')}`], `--dhchap-key ${H1}=<secret>: DH-HMAC-CHAP secret has invalid key transform hh=09`],
    [['--dhchap-ctrl-key', `${H1}=${C1.slice(0, -6)}AAAA:`], `--dhchap-ctrl-key ${H1}=<secret>: DH-HMAC-CHAP secret`],
    [['--dhchap-key', `${H1}=${K1}`, '--dhchap-key', `${H1}=${K2}`], `--dhchap-key ${H1}=<secret>: given twice for this host`],
  ])('rejects %j without printing the secret', (argv, start) => {
    let message = '';
    try {
      parseTargetArgs(argv);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message.startsWith(start)).toBe(true);
    for (const k of [K1, K2, C1, ...argv].filter((a) => a.includes('DHHC-1:'))) {
      const body = k.slice(k.indexOf('DHHC-1:') + 10);
      expect(message).not.toContain(body.slice(0, 20));
    }
  });

  it('a controller key without a host key is refused', async () => {
    await expect(build(['--dhchap-ctrl-key', `${H1}=${C1}`])).rejects.toThrow(`--dhchap-ctrl-key ${H1}=<secret>: needs the host key too`);
  });

  it('the start-up lines say which hosts must authenticate, without keys', () => {
    const lines = startupLines({ ports: [], subsystems: [], hosts: [{ nqn: H1, dhchapKey: K1, dhchapCtrlKey: C1 }, { nqn: H2, dhchapKey: K2 }] }, []);
    expect(lines).toEqual([`nvme-tcp target: host ${H1} must authenticate (DH-HMAC-CHAP, bidirectional)`, `nvme-tcp target: host ${H2} must authenticate (DH-HMAC-CHAP)`]);
  });

  it('the target logger redacts secrets wherever a host entry or connect option is logged whole', () => {
    const lines: string[] = [];
    const sink = new Writable({ write: (c: Buffer, _e, cb) => (lines.push(c.toString()), cb()) });
    const log = pino(targetLoggerOptions('info'), sink);
    log.info({ hosts: [{ nqn: H1, dhchapKey: K1, dhchapCtrlKey: C1 }] }, 'config');
    log.info({ config: { hosts: [{ nqn: H2, dhchapKey: K2 }] } }, 'nested config');
    log.info({ body: { nqn: H1, dhchapKey: K1 } }, 'api body');
    log.info({ dhchapKey: K1, dhchapCtrlKey: C1 }, 'host entry');
    log.info({ opts: { dhchap_secret: K1, dhchap_ctrl_secret: C1 } }, 'connect options');
    log.info({ dhchap_secret: K2, dhchap_ctrl_secret: C1 }, 'flat options');
    const text = lines.join('');
    expect(lines).toHaveLength(6);
    for (const k of [K1, K2, C1]) expect(text).not.toContain(k.slice(10, 30));
    expect(text.match(/<redacted>/g)).toHaveLength(10);
    expect(text).toContain(H1);
  });
});
