// The Linux 6.1 kernel host (qemu lab, harness/lab) against the target container of docker/compose.yaml: the
// container runs under podman-compose with its NVMe/TCP port published on the host's 127.0.0.1, and the guest
// reaches that port as 10.0.2.100:4420 through qemu's guestfwd (the same path a VM on a laptop takes to a
// `docker compose up` target). guest/container-host.sh: discover, connect, fio verify (4k, 128k), disconnect.
// The images come from test/containers/images.sh (installs podman, builds the base and project images; ~1 s
// when cached).
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkLabReady, freePort, labDir, parseSteps, runLabScript, stopLab, type StepResult } from '../../harness/lab.js';
import { DOCKER, HERE, compose, ctr, podman, run, teardown, waitHealthy } from '../containers/podman.js';

const GUEST_SCRIPT = path.join(path.dirname(HERE), 'interop', 'guest', 'container-host.sh');
const FILE = path.join(DOCKER, 'compose.yaml');
const GUEST_ADDR = '10.0.2.100';
const STEPS = ['discover', 'connect', 'fio-4k', 'fio-128k', 'disconnect'] as const;

describe('Linux kernel host against the target container (podman-compose, published port)', () => {
  const project = `nvmelabvm${process.pid}`;
  const env: NodeJS.ProcessEnv = {};
  let labChild: ChildProcess | undefined;
  let lab: { code: number | null; out: string } | undefined;
  let steps = new Map<string, StepResult>();
  let setupError: unknown;

  beforeAll(async () => {
    try {
      const labPath = labDir();
      checkLabReady(labPath);
      const images = await run('bash', [path.join(HERE, 'images.sh')], {}, 600_000);
      if (images.code !== 0) throw new Error(`test/containers/images.sh failed:\n${images.out}${images.err}`);
      const [nvme, disc, api] = [await freePort(), await freePort(), await freePort()];
      Object.assign(env, { NVME_LAB_PORT: String(nvme), NVME_LAB_DISCOVERY_PORT: String(disc), NVME_LAB_API_PORT: String(api) });
      const up = await compose(project, FILE, ['up', '-d', '--no-build', 'target'], env);
      if (up.code !== 0) throw new Error(`compose up failed:\n${up.out}${up.err}`);
      await waitHealthy(ctr(project, 'target'));
      const args = [path.join(labPath, 'run.sh'), '--timeout', '300', '--hostfwd', 'none', '--guestfwd', `${GUEST_ADDR}:4420:${nvme}`, GUEST_SCRIPT];
      const vm = runLabScript(args);
      labChild = vm.child;
      lab = await vm.done;
      steps = parseSteps(lab.out);
    } catch (err) {
      setupError = err;
    }
  });

  afterAll(async () => {
    await stopLab(labChild, undefined, undefined);
    await teardown(project, FILE, env);
  });

  it('the lab boots and the guest script runs to its end', () => {
    if (setupError !== undefined) throw setupError;
    const tail = lab?.out.split('\n').slice(-40).join('\n') ?? '';
    expect(lab?.out, `no END marker (lab failure or timeout); last output:\n${tail}`).toMatch(/===LAB-SCRIPT-END rc=\d+/);
  });

  it.each(STEPS)('%s', (name) => {
    if (setupError !== undefined) throw setupError;
    const r = steps.get(name);
    if (r === undefined) throw new Error(`step ${name} did not run`);
    expect(r.status, `${name} failed in the guest:\n${r.output}`).toBe('PASS');
  });
});

// The HA gateway pair (docker/compose.ha.yaml) with the Linux host's native multipath over both gateways: fio
// writes while the test kills gateway 1 (the guest asks for it with "@@HOST KILL-GW1" once fio is running), fio's
// verify then reads everything back through gateway 2; gateway 1 is restarted ("@@HOST RESTART-GW1"), its path
// comes back live and optimized, and a second verify reads through it.
const HA_FILE = path.join(DOCKER, 'compose.ha.yaml');
const HA_SCRIPT = path.join(path.dirname(HERE), 'interop', 'guest', 'container-ha.sh');
const HA_STEPS = ['ha-connect', 'ha-fio-kill', 'ha-failback', 'ha-verify-after-failback', 'ha-disconnect'] as const;

describe('Linux kernel host with native multipath over the HA gateway pair, gateway 1 killed mid-fio', () => {
  const project = `nvmehavm${process.pid}`;
  const env: NodeJS.ProcessEnv = {};
  let labChild: ChildProcess | undefined;
  let lab: { code: number | null; out: string } | undefined;
  let steps = new Map<string, StepResult>();
  let setupError: unknown;
  const hostActions: string[] = [];

  beforeAll(async () => {
    try {
      const labPath = labDir();
      checkLabReady(labPath);
      const images = await run('bash', [path.join(HERE, 'images.sh')], {}, 600_000);
      if (images.code !== 0) throw new Error(`test/containers/images.sh failed:\n${images.out}${images.err}`);
      const [p1, a1, p2, a2] = [await freePort(), await freePort(), await freePort(), await freePort()];
      Object.assign(env, { NVME_HA_GW1_PORT: String(p1), NVME_HA_GW1_API_PORT: String(a1), NVME_HA_GW2_PORT: String(p2), NVME_HA_GW2_API_PORT: String(a2) });
      const up = await compose(project, HA_FILE, ['up', '-d', '--no-build'], env);
      if (up.code !== 0) throw new Error(`compose up failed:\n${up.out}${up.err}`);
      const gw1 = ctr(project, 'gw1');
      await waitHealthy(gw1);
      await waitHealthy(ctr(project, 'gw2'));
      const args = [path.join(labPath, 'run.sh'), '--timeout', '300', '--hostfwd', 'none', '--guestfwd', `10.0.2.100:4420:${p1}`, '--guestfwd', `10.0.2.101:4420:${p2}`, HA_SCRIPT];
      let pending = Promise.resolve();
      const act = (what: string, argv: string[]): void => {
        pending = pending.then(async () => {
          const r = await podman(argv);
          hostActions.push(`${what}: podman ${argv.join(' ')} -> ${r.code}${r.code === 0 ? '' : ` ${r.err}`}`);
          if (what === 'restart') await waitHealthy(gw1).catch((e: unknown) => hostActions.push(String(e)));
        });
      };
      const vm = runLabScript(args, (chunk) => {
        if (/^@@HOST KILL-GW1/m.test(chunk)) act('kill', ['kill', '--signal', 'KILL', gw1]);
        if (/^@@HOST RESTART-GW1/m.test(chunk)) act('restart', ['start', gw1]);
      });
      labChild = vm.child;
      const done = await vm.done;
      await pending;
      lab = done;
      steps = parseSteps(done.out);
    } catch (err) {
      setupError = err;
    }
  });

  afterAll(async () => {
    await stopLab(labChild, undefined, undefined);
    await teardown(project, HA_FILE, env);
  });

  it('the lab boots, the guest script runs to its end, and the host killed and restarted gateway 1 when asked', () => {
    if (setupError !== undefined) throw setupError;
    const tail = lab?.out.split('\n').slice(-40).join('\n') ?? '';
    expect(lab?.out, `no END marker (lab failure or timeout); last output:\n${tail}`).toMatch(/===LAB-SCRIPT-END rc=\d+/);
    for (const n of ['ha-connect', 'ha-fio-kill', 'ha-failback']) console.log(`--- ${n}\n${steps.get(n)?.output ?? '(did not run)'}`);
    console.log(hostActions.join('\n'));
    expect(hostActions.map((a) => a.split(':')[0])).toEqual(['kill', 'restart']);
    expect(hostActions.every((a) => / -> 0$/.test(a)), hostActions.join('\n')).toBe(true);
  });

  it.each(HA_STEPS)('%s', (name) => {
    if (setupError !== undefined) throw setupError;
    const r = steps.get(name);
    if (r === undefined) throw new Error(`step ${name} did not run`);
    expect(r.status, `${name} failed in the guest:\n${r.output}`).toBe('PASS');
  });
});
