// The initiator CLI against a scripted controller: flags, output, exit codes.
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseTimeMs } from '../harness/load/job-file.js';
import { durationArg } from './args.js';
import { runInitiatorCli, type CliIo } from './initiator.js';
import { INITIATOR_VERBS } from './verbs.js';
import { FakeController } from '../harness/peers/fake-controller.js';
import { TargetService } from '../target/index.js';
import { etcNvmeDir, identityFile } from './host-identity.js';

let f: FakeController;
let out = '';
let err = '';
const io: CliIo = { stdout: (s) => void (out += s), stderr: (s) => void (err += s) };

// The host identity these runs make up is kept under a temporary state directory, not the user's.
let stateHome = '';
const savedEnv = { XDG_STATE_HOME: process.env.XDG_STATE_HOME, NVME_TCP_ETC_NVME: process.env.NVME_TCP_ETC_NVME };
beforeAll(async () => {
  stateHome = await mkdtemp(path.join(tmpdir(), 'nvme-tcp-cli-'));
  process.env.XDG_STATE_HOME = stateHome;
  process.env.NVME_TCP_ETC_NVME = path.join(stateHome, 'etc-nvme');
});
afterAll(async () => {
  for (const [k, v] of Object.entries(savedEnv)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  await rm(stateHome, { recursive: true, force: true });
});

beforeEach(async () => {
  out = '';
  err = '';
  f = new FakeController();
  f.addNamespace(1, 8192);
  await f.listen();
});
afterEach(async () => {
  await f.close();
});

describe('nvme-tcp initiator CLI', () => {
  it('connect prints the controller and its queues, then disconnects', async () => {
    const rc = await runInitiatorCli('connect', ['-a', '127.0.0.1', '-s', String(f.port), '-n', f.subnqn, '-i', '2', '--queues-per-hctx', '2', '-Q', '32', '-D'], io);
    expect(err).toBe('');
    expect(rc).toBe(0);
    expect(out).toMatch(/controller 1 subsystem nqn\.2024-01\.io\.test:fake/);
    expect(out).toMatch(/I\/O queues 4 \(granted 4\) in 2 hctx/);
    expect(out.split('\n').filter((l) => /^\d+\s+\d\s+default/.test(l)).length).toBe(4);
    await new Promise((r) => setTimeout(r, 30));
    expect(f.conns.size).toBe(0);
  });

  it('io verify writes a stamped pattern, reads it back and reports 0 mismatches', async () => {
    const rc = await runInitiatorCli('io', ['verify', '-a', '127.0.0.1', '-s', String(f.port), '-n', f.subnqn, '--size', '1M', '--bs', '8k', '-i', '2', '-D'], io);
    expect(err).toBe('');
    expect(out).toMatch(/verified 128 × 8192 B .* 0 mismatches/);
    expect(rc).toBe(0);
  });

  it('io verify exits non-zero when the target returns wrong data', async () => {
    f.opts.onIo = (sqe) => {
      if (sqe.opcode === 0x01 && sqe.cdw10 === 16) return 0; // pretend success, drop the data
      return undefined;
    };
    const rc = await runInitiatorCli('io', ['verify', '-a', '127.0.0.1', '-s', String(f.port), '-n', f.subnqn, '--size', '64k', '--bs', '4k', '-i', '1', '-D'], io);
    expect(rc).toBe(1);
    expect(out).toMatch(/mismatch at lba 16/);
    expect(out).toMatch(/1 mismatches/);
  });

  it('a bad flag prints one line naming it and exits 2', async () => {
    const rc = await runInitiatorCli('connect', ['-a', '127.0.0.1', '--nr-io-queus', '4'], io);
    expect(rc).toBe(2);
    expect(err.trim().split('\n').length).toBe(1);
    expect(err).toMatch(/nr-io-queus/);
  });

  it('an invalid option value exits 2 naming the option', async () => {
    const rc = await runInitiatorCli('connect', ['-a', '127.0.0.1', '-s', String(f.port), '-n', f.subnqn, '-Q', '8'], io);
    expect(rc).toBe(2);
    expect(err).toMatch(/^nvme-tcp connect: -Q\/--queue-size 8 outside 16\.\.\d+$/m);
  });

  it('queues reports no held connection when none is running', async () => {
    const rc = await runInitiatorCli('queues', [], io);
    expect(rc).toBe(0);
    expect(out).toMatch(/held connection|pid \d+/);
  });

  it('check-host reports CPUs and the interface routing to an address', async () => {
    const rc = await runInitiatorCli('check-host', ['-a', '127.0.0.1'], io);
    expect(rc).toBe(0);
    expect(out).toMatch(/CPUs: \d+/);
    expect(out).toMatch(/interface to 127\.0\.0\.1: lo/);
  });

  it('check-host -a with something that is not an address: one line naming the flag, exit 2', async () => {
    expect(await runInitiatorCli('check-host', ['-a', '999.1.1.1'], io)).toBe(2);
    expect(err).toBe('nvme-tcp check-host: --traddr 999.1.1.1: not an IP address; use e.g. 127.0.0.1 or ::1\n');
    expect(out).toBe('');
  });

  it('help shows defaults as typed (io --size 64M) and discover lists only the flags a discovery controller uses', async () => {
    expect(await runInitiatorCli('io', ['--help'], io)).toBe(0);
    expect(out).toMatch(/--size <size>[^]*\(default: 64M\)/);
    expect(out).toMatch(/--bs <size>[^]*\(default: 4096\)/);
    expect(out).not.toContain('{');
    out = '';
    expect(await runInitiatorCli('discover', ['--help'], io)).toBe(0);
    const flags = [...out.matchAll(/^ {2}(?:-\w, )?(--[\w-]+)/gm)].map((m) => m[1]);
    expect(flags).toEqual(['--transport', '--traddr', '--trsvcid', '--hostnqn', '--hostid', '--host-traddr', '--host-iface', '--keep-alive-tmo', '--tos', '--hdr-digest', '--data-digest', '--admin-timeout', '--dhchap-secret', '--dhchap-ctrl-secret', '--tls', '--tls-key', '--tls-identity-version', '--tls-hkdf', '--output-format', '--help']);
    // A connect-only flag is refused there, not ignored.
    expect(await runInitiatorCli('discover', ['-a', '127.0.0.1', '--nr-io-queues', '4'], io)).toBe(2);
    expect(err).toMatch(/^nvme-tcp discover: unknown option '--nr-io-queues'/);
  });

  it('every verb answers --help and -h with its options, exit 0', async () => {
    for (const verb of Object.keys(INITIATOR_VERBS)) {
      for (const h of ['--help', '-h']) {
        out = '';
        expect(await runInitiatorCli(verb, [h], io), verb).toBe(0);
        expect(out, verb).toMatch(new RegExp(`^Usage: nvme-tcp ${verb} `));
        expect(out, verb).toMatch(/-h, --help/);
      }
    }
    expect(err).toBe('');
  });

  it('-o json carries the facts -o normal prints', async () => {
    const conn = ['-a', '127.0.0.1', '-s', String(f.port), '-n', f.subnqn, '-i', '2', '-D'];
    expect(await runInitiatorCli('connect', [...conn, '-o', 'json'], io)).toBe(0);
    const j = JSON.parse(out) as { cntlid: number; subnqn: string; ioQueues: number; hostnqn: string; queues: unknown[] };
    out = '';
    expect(await runInitiatorCli('connect', conn, io)).toBe(0);
    expect(out).toMatch(new RegExp(`^controller \\d+ subsystem ${j.subnqn} at 127\\.0\\.0\\.1:${f.port} state live`));
    expect(j.cntlid).toBeGreaterThan(0);
    expect(out).toContain(`hostnqn ${j.hostnqn} `);
    expect(out).toContain(`I/O queues ${j.ioQueues} `);
    expect(j.queues).toHaveLength(2);
    expect(err).toBe('');
  });

  it('bad input: one line, exit 2 (extra words, sizes over the namespace, missing values)', async () => {
    const conn = ['-a', '127.0.0.1', '-s', String(f.port), '-n', f.subnqn, '-D'];
    const cases: [string, string[], RegExp][] = [
      ['connect', [...conn, 'extra'], /too many arguments/],
      ['io', ['verify', ...conn, '--size', '1.5G'], /^nvme-tcp io: --size 1\.5G: larger than namespace 1 \(4194304 bytes\)/],
      ['io', ['verify', ...conn, '--bs', '1000'], /^nvme-tcp io: --bs 1000: not a multiple of the 512-byte block size/],
      ['io', ['verify', ...conn, '--size', '1X'], /--size 1X: not a size/],
      ['connect', ['-a', '127.0.0.1', '-k', '-5', '-n', 'x'], /^nvme-tcp connect: -k\/--keep-alive-tmo -5 outside 0\.\.4294967$/m],
      ['connect', ['-a', '127.0.0.1', '-s', '70000'], /--trsvcid 70000: out of range; use 1\.\.65535/],
      ['connect', ['-a', '127.0.0.1', '-k', '5x'], /^nvme-tcp connect: --keep-alive-tmo 5x: not a duration; use a number of seconds or a ms\/s\/m\/h suffix \(e\.g\. 5s\)$/m],
      ['connect', ['-a', '127.0.0.1', '-k', '500ms'], /^nvme-tcp connect: --keep-alive-tmo 500ms: not a whole number of seconds$/m],
      ['connect', ['-a', '127.0.0.1', '-s', '1e3'], /^nvme-tcp connect: --trsvcid 1e3: not an integer/m],
      ['queues', ['--set-worker', '1=2', 'more'], /too many arguments/],
      ['connect', ['-o', 'xml', '-a', '127.0.0.1'], /argument 'xml' is invalid/],
    ];
    for (const [verb, argv, re] of cases) {
      err = '';
      expect(await runInitiatorCli(verb, argv, io), argv.join(' ')).toBe(2);
      expect(err.split('\n').filter(Boolean), argv.join(' ')).toHaveLength(1);
      expect(err, argv.join(' ')).toMatch(re);
    }
  });

  it('durations: -k/-c/-l/-F/--io-timeout/--admin-timeout take seconds or a unit (as job files do)', async () => {
    const conn = ['-a', '127.0.0.1', '-s', String(f.port), '-n', f.subnqn, '-i', '1', '-D', '-o', 'json'];
    expect(await runInitiatorCli('connect', [...conn, '-k', '1m', '-l', '-1', '-c', '500ms', '--io-timeout', '1500ms', '--admin-timeout', '30'], io), err).toBe(0);
    expect(err).toBe('');
    expect([durationArg('k', '1m', 's'), durationArg('k', '60', 's'), durationArg('l', '-1', 's', -1), durationArg('t', '1.1s', 'ms'), durationArg('t', '30000', 'ms'), durationArg('c', '500ms', 's', 0, 10, false)]).toEqual([60, 60, -1, 1100, 30000, 0.5]);
    // runtime=1s in a job file is the same second.
    expect(parseTimeMs('1s')).toBe(durationArg('t', '1s', 'ms'));
  });

  it('connect to a subsystem the target lacks: the status and a hint', async () => {
    const rc = await runInitiatorCli('connect', ['-a', '127.0.0.1', '-s', String(f.port), '-n', 'nqn.2024-01.io.test:nope'], io);
    expect(rc).toBe(1);
    expect(err).toMatch(/discover -a 127\.0\.0\.1 -s \d+" lists what it serves/);
  });

  it('connect --hold is listed by list-subsys and ended by disconnect -n', async () => {
    // Its own sink: what the holder prints must not land in the list-subsys output parsed below.
    let heldOut = '';
    const heldIo: CliIo = { stdout: (x) => void (heldOut += x), stderr: (x) => void (err += x) };
    const held = runInitiatorCli('connect', ['-a', '127.0.0.1', '-s', String(f.port), '-n', f.subnqn, '-i', '1', '-D', '--hold'], heldIo);
    const mine = async (): Promise<{ pid: number; subnqn: string }[]> => {
      out = '';
      expect(await runInitiatorCli('list-subsys', ['-o', 'json'], io)).toBe(0);
      return (JSON.parse(out) as { pid: number; subnqn: string }[]).filter((x) => x.pid === process.pid);
    };
    const deadline = Date.now() + 10_000;
    while ((await mine()).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(await mine()).toEqual([expect.objectContaining({ pid: process.pid, subnqn: f.subnqn })]);
    out = '';
    expect(await runInitiatorCli('disconnect', ['-n', f.subnqn, '--pid', String(process.pid)], io)).toBe(0);
    expect(out).toMatch(/disconnected 1 controller/);
    expect(await held).toBe(0);
    expect(heldOut).toMatch(/holding the connection/);
    expect(await mine()).toEqual([]);
    err = '';
    expect(await runInitiatorCli('disconnect', [], io)).toBe(2);
    expect(err).toMatch(/say which: -n NQN or --pid PID/);
  });

  it('the bin with its stdout closed early (connect ... | head -1): exit 0, no EPIPE stack', async () => {
    const main = path.join(path.dirname(fileURLToPath(import.meta.url)), 'main.ts');
    const child = spawn(process.execPath, ['--import', 'tsx', main, 'connect', '-a', '127.0.0.1', '-s', String(f.port), '-n', f.subnqn, '-i', '1'], {
      env: { ...process.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    expect(stderr).toBe('');
    expect(code).toBe(0);
  }, 30_000);
});

describe('a host refused by the allow list of a real target', () => {
  const SUBNQN = 'nqn.2024-01.io.test:acl';
  const ALLOWED = 'nqn.2014-08.org.nvmexpress:uuid:5a1e0000-0000-4000-8000-00000000a110';
  const FROM_FILE = 'nqn.2014-08.org.nvmexpress:uuid:f11e0000-0000-4000-8000-0000000000f1';
  const FROM_FLAG = 'nqn.2014-08.org.nvmexpress:uuid:f1a90000-0000-4000-8000-0000000000f2';
  let svc: TargetService;
  let port = 0;
  beforeEach(async () => {
    svc = new TargetService();
    await svc.apply({ ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [{ nqn: SUBNQN, hosts: [ALLOWED], namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] }] });
    port = (svc.boundPorts()[0] as { port: number }).port;
  });
  afterEach(async () => {
    await svc.stop();
    await rm(etcNvmeDir(), { recursive: true, force: true });
  });

  it('is named in the error with where its NQN came from: /etc/nvme/hostnqn, or -q', async () => {
    await mkdir(etcNvmeDir(), { recursive: true });
    await writeFile(path.join(etcNvmeDir(), 'hostnqn'), `${FROM_FILE}\n`);
    expect(await runInitiatorCli('connect', ['-a', '127.0.0.1', '-s', String(port), '-n', SUBNQN], io)).toBe(1);
    expect(err).toContain(`CONNECT_INVALID_HOST`);
    expect(err).toContain(`does not allow host ${FROM_FILE} (read from ${path.join(etcNvmeDir(), 'hostnqn')}): add it on the target (--allow-host ${FROM_FILE}`);

    err = '';
    expect(await runInitiatorCli('connect', ['-a', '127.0.0.1', '-s', String(port), '-n', SUBNQN, '-q', FROM_FLAG], io)).toBe(1);
    expect(err).toContain(`does not allow host ${FROM_FLAG} (given with -q)`);
    expect(err.split('\n').filter(Boolean)).toHaveLength(1);

    // The allowed host gets in: the refusal was about the NQN named.
    err = '';
    expect(await runInitiatorCli('connect', ['-a', '127.0.0.1', '-s', String(port), '-n', SUBNQN, '-q', ALLOWED], io)).toBe(0);
    expect(err).toBe('');
  });

  it('without /etc/nvme/hostnqn: the identity kept for this user, and its file', async () => {
    expect(await runInitiatorCli('connect', ['-a', '127.0.0.1', '-s', String(port), '-n', SUBNQN], io)).toBe(1);
    const kept = JSON.parse(await readFile(identityFile(), 'utf8')) as { hostnqn: string };
    expect(err).toContain(`does not allow host ${kept.hostnqn} (this user's identity kept in ${identityFile()}, as no ${etcNvmeDir()}/hostnqn exists)`);
  });
});
