// docker/compose.yaml under podman-compose, as a user runs it: the target container becomes healthy, the management
// API and /metrics answer on the published loopback port, the harness job runs against the target by service name
// and exits 0 with zero verify mismatches, and `compose down` leaves nothing behind. Bad input (no token, a config
// that fails validation, an unwritable volume) stops the container with its one-line error and no restart loop.
// Images come from test/containers/images.sh (npm run test:containers runs it first).
import { mkdtemp, rm, writeFile, chmod, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../harness/lab.js';
import { DOCKER, TOKEN, compose, counter, ctr, logs, metrics, podman, residue, run, state, teardown, waitHealthy } from './podman.js';

const FILE = path.join(DOCKER, 'compose.yaml');

describe('docker/compose.yaml: target + harness job', () => {
  const project = `nvmelab${process.pid}`;
  const env: NodeJS.ProcessEnv = {};
  afterAll(async () => {
    await teardown(project, FILE, env);
  });

  it('the target becomes healthy, serves ctl and /metrics on 127.0.0.1, the harness job verifies, down leaves nothing', async () => {
    const [nvme, disc, api] = [await freePort(), await freePort(), await freePort()];
    Object.assign(env, { NVME_LAB_PORT: String(nvme), NVME_LAB_DISCOVERY_PORT: String(disc), NVME_LAB_API_PORT: String(api) });
    const up = await compose(project, FILE, ['up', '-d', '--no-build', 'target'], env);
    expect(up.code, up.out + up.err).toBe(0);
    const target = ctr(project, 'target');
    await waitHealthy(target);

    // Every published port is bound to the host's loopback only.
    const ports = await podman(['port', target]);
    const bound = ports.out.trim().split('\n');
    expect(bound.sort()).toEqual([`4420/tcp -> 127.0.0.1:${nvme}`, `8009/tcp -> 127.0.0.1:${disc}`, `8080/tcp -> 127.0.0.1:${api}`].sort());

    const ctl = (...args: string[]) => run(process.execPath, ['--import', 'tsx', 'cli/main.ts', 'target', 'ctl', '--api', `http://127.0.0.1:${api}`, '-o', 'json', ...args], { NVME_TCP_API_TOKEN: TOKEN });
    const health = await ctl('health');
    expect(health.code, health.err).toBe(0);
    expect(JSON.parse(health.out)).toMatchObject({ status: 'ok', ports: 2 });
    const noToken = await run(process.execPath, ['--import', 'tsx', 'cli/main.ts', 'target', 'ctl', '--api', `http://127.0.0.1:${api}`, 'controllers'], { NVME_TCP_API_TOKEN: '' });
    expect(noToken.code).not.toBe(0);
    const before = await ctl('controllers');
    expect(before.code, before.err).toBe(0);
    expect(JSON.parse(before.out)).toEqual([]);

    const m0 = counter(await metrics(api), 'nvme_tcp_commands_total');
    const upH = await compose(project, FILE, ['up', '-d', '--no-build', 'harness'], env);
    expect(upH.code, upH.out + upH.err).toBe(0);
    const harness = ctr(project, 'harness');
    // Sample /metrics and the controller list while the job runs: the command counter must move, not just end higher.
    const samples: number[] = [];
    let sawController = false;
    const exit = podman(['wait', harness], 300_000);
    let done = false;
    void exit.then(() => (done = true));
    while (!done) {
      samples.push(counter(await metrics(api), 'nvme_tcp_commands_total'));
      if (!sawController) {
        const c = await ctl('controllers');
        sawController = c.code === 0 && (JSON.parse(c.out) as unknown[]).length > 0;
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
    const code = Number((await exit).out.trim());
    const out = await logs(harness);
    expect(code, out).toBe(0);
    expect(out).toMatch(/Verify \(workload\): [1-9]\d* reads verified \([\d.k]+ MiB in [1-9]\d* blocks\), 0 mismatches\./);
    expect(out).toContain('Status: ok.');
    expect(sawController, 'ctl controllers listed the harness controller during the job').toBe(true);
    const moving = samples.filter((v, i) => i > 0 && v > (samples[i - 1] ?? 0) && v > m0);
    expect(moving.length, `commands_total samples ${samples.join(',')}`).toBeGreaterThanOrEqual(2);

    const down = await compose(project, FILE, ['down', '-v', '-t', '2'], env);
    expect(down.code, down.out + down.err).toBe(0);
    // Nothing runs and no volume is left; podman-compose 1.0.3 keeps the project network, which teardown removes.
    expect((await residue(project)).filter((r) => !r.startsWith('network '))).toEqual([]);
    await teardown(project, FILE, env);
    expect(await residue(project)).toEqual([]);
  });
});

describe('bad input: the container stops with its one-line error and is not restarted', () => {
  const project = `nvmebad${process.pid}`;
  let dir = '';
  let file = '';
  afterAll(async () => {
    if (file !== '') {
      await teardown(project, file);
      expect(await residue(project)).toEqual([]);
    }
    if (dir !== '') await rm(dir, { recursive: true, force: true });
  });

  it('missing token, invalid config, unwritable volume', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'nvme-bad-'));
    const good = { ports: [{ id: 1, addr: '0.0.0.0', port: 4420 }], subsystems: [{ nqn: 'nqn.2024-01.io.nvme-tcp-ts:bad', allowAnyHost: true, ports: [1], namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] }], api: { listen: '0.0.0.0:8080' } };
    await writeFile(path.join(dir, 'good.json'), JSON.stringify(good));
    await writeFile(path.join(dir, 'invalid.json'), JSON.stringify({ ...good, ports: [{ id: 1, addr: '0.0.0.0', port: 'x' }] }));
    const fileNs = { ...good, subsystems: [{ ...good.subsystems[0], namespaces: [{ nsid: 1, backend: { type: 'file', path: '/data/ns1.img', size: '1M' } }] }] };
    await writeFile(path.join(dir, 'file.json'), JSON.stringify(fileNs));
    // Owned by root, mode 755: the image's non-root user cannot create the namespace file in it.
    const ro = path.join(dir, 'ro');
    await mkdir(ro);
    await chmod(ro, 0o755);
    await chmod(dir, 0o755);
    for (const f of ['good.json', 'invalid.json', 'file.json']) await chmod(path.join(dir, f), 0o644);
    const svc = (name: string, cfg: string, token: string, extra = ''): string =>
      `  ${name}:\n    image: nvme-tcp-ts:latest\n    restart: "no"\n    environment:\n      NVME_TCP_API_TOKEN: "${token}"\n    volumes:\n      - ${path.join(dir, cfg)}:/etc/nvme-tcp/target.json:ro\n${extra}`;
    file = path.join(dir, 'compose.yaml');
    await writeFile(
      file,
      `services:\n${svc('notoken', 'good.json', '')}${svc('invalid', 'invalid.json', TOKEN)}${svc('unwritable', 'file.json', TOKEN, `      - ${ro}:/data\n`)}`,
    );
    const up = await compose(project, file, ['up', '-d', '--no-build']);
    expect(up.code, up.out + up.err).toBe(0);
    const expected: Record<string, RegExp> = {
      notoken: /^nvme-tcp target: --api: refusing to serve the management API on 0\.0\.0\.0:8080 without a token/,
      invalid: /^nvme-tcp target: config \/etc\/nvme-tcp\/target\.json: ports\[0\]\.port: expected a number/,
      unwritable: /^nvme-tcp target: namespace backend \/data\/ns1\.img: EACCES; make its directory writable/,
    };
    for (const [service, re] of Object.entries(expected)) {
      const name = ctr(project, service);
      const w = await podman(['wait', name], 60_000);
      expect(w.code, w.err).toBe(0);
      const s = await state(name);
      const log = await podman(['logs', name]);
      // stderr carries the JSON log records and the one plain line a person reads; stdout nothing (no start).
      const errLines = log.err.trim().split('\n').filter((l) => !l.startsWith('{'));
      expect(s?.exitCode, `${service}: ${log.out}${log.err}`).not.toBe(0);
      expect(s?.restarts, service).toBe(0);
      expect(errLines, `${service} prints one error line`).toHaveLength(1);
      expect(errLines[0], service).toMatch(re);
    }
    // compose reports each one as exited with its code (and nothing was restarted after a few seconds).
    await new Promise((r) => setTimeout(r, 2000));
    const ps = await compose(project, file, ['ps']);
    for (const service of Object.keys(expected)) {
      const line = ps.out.split('\n').find((l) => l.includes(ctr(project, service))) ?? '';
      expect(line, ps.out).toMatch(/Exited \([1-9]\d*\)/);
      expect((await state(ctr(project, service)))?.status).toBe('exited');
    }
  });
});
