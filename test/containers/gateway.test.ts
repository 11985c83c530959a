// docker/compose.gateway.yaml under podman-compose: etcd and three gateway containers serving one subsystem (three
// namespaces on files of a shared volume, one ANA group each, each gateway the preferred owner of one), our initiator's
// multipath over all three from the host, and the compose file's harness service running its own verify job from
// inside the compose network at the same time. While both verify workloads run (FUA writes naming LBA and sequence,
// reads that must return the last acknowledged write: harness/gateway-lab.ts's VerifyWorkload), events hit the
// gateways in turn: SIGKILL (`podman kill`, then the README's `compose start gw1`), a stall past the lease
// (`podman pause`: the cgroup freezer, every process of the container stopped) and a partition from etcd alone
// (`podman network disconnect` from the etcd network, which only the gateways and etcd share). After each
// event the gateway's group must have moved to a survivor and come back (failback). GET /group is sampled on every
// gateway throughout: no two gateways may report one ANA group optimized at one instant. At the end every
// acknowledged write is read back, by the host and by the harness. The README's gateway-lab commands are the ones run.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { GroupSampler, VerifyWorkload, type GroupView } from '../../harness/gateway-lab.js';
import { freePort } from '../../harness/lab.js';
import { connect, createMultipath, type Controller, type MultipathNamespace } from '../../initiator/index.js';
import { sleep, until } from '../../harness/until.js';
import { DOCKER, REPO, TOKEN, compose, ctr, logs, podman, residue, teardown, waitHealthy } from './podman.js';

const FILE = path.join(DOCKER, 'compose.gateway.yaml');
const NQN = 'nqn.2024-01.io.nvme-tcp-ts:gateway';
const HOSTNQN = 'nqn.2024-01.io.nvme-tcp-ts:gateway-lab-test-host';
const GWS = ['gw1', 'gw2', 'gw3'] as const;
/** gateway.json's leaseTtlMs: a stall or partition is held this long past the takeover. */
const LEASE_MS = (JSON.parse(readFileSync(path.join(DOCKER, 'gateway.json'), 'utf8')) as { gateway: { leaseTtlMs: number } }).gateway.leaseTtlMs;
type Kind = 'kill' | 'stop' | 'partition';
// The default loop kills each gateway (SIGKILL, then the README's `compose start`), stalls it past the lease
// (`podman pause`, then `unpause`) and partitions it from etcd (`podman network disconnect`: its etcd connection dies
// rather than stalls, as the process lab's fault proxy does; the gateway rejoins on a new client,
// target/gateway/group.ts). Stalls were opt-in while a write already queued in the file backend's thread pool when the
// container froze landed after the thaw, over the new owner's newer write (stale reads in every stall run); the write
// fence at the storage call closed that (docs/gateway-groups.md, "Fencing at the storage call").
// GATEWAY_LAB_STALL=0 leaves stalls out, GATEWAY_LAB_PARTITION=0 partitions; GATEWAY_LAB_EVENTS=N sets the loop's
// length (default 3 per kind).
const STALL = process.env.GATEWAY_LAB_STALL !== '0';
const PARTITION = process.env.GATEWAY_LAB_PARTITION !== '0';
const KINDS: Kind[] = ['kill', ...(STALL ? (['stop'] as const) : []), ...(PARTITION ? (['partition'] as const) : [])];
const EVENTS = Number(process.env.GATEWAY_LAB_EVENTS ?? 3 * KINDS.length);

/** The README's "gateway group in containers" block: the compose commands it shows, and the ports it connects to. */
function readmeBlock(): { compose: string[]; connectPorts: number[] } {
  const readme = readFileSync(path.join(REPO, 'README.md'), 'utf8');
  const block = /```sh\n((?:.*\n)*?)```/g;
  for (const m of readme.matchAll(block)) {
    const text = m[1] ?? '';
    if (!text.includes('docker/compose.gateway.yaml')) continue;
    const compose = [...text.matchAll(/^docker compose -f docker\/compose\.gateway\.yaml ([^#\n]+?)\s*(?:#.*)?$/gm)].map((x) => (x[1] ?? '').trim());
    const connectPorts = [...text.matchAll(/nvme connect -t tcp -a 127\.0\.0\.1 -s (\d+)/g)].map((x) => Number(x[1]));
    const loop = /for p in ([\d ]+); do nvme connect -t tcp -a 127\.0\.0\.1 -s \$p/.exec(text);
    if (loop !== null) connectPorts.push(...(loop[1] ?? '').trim().split(/\s+/).map(Number));
    return { compose, connectPorts };
  }
  throw new Error('README.md has no sh block using docker/compose.gateway.yaml');
}

describe('docker/compose.gateway.yaml: three gateways and etcd in containers, failover and failback', () => {
  const project = `nvmegw${process.pid}`;
  const env: NodeJS.ProcessEnv = {};
  const ctrls: Controller[] = [];
  const api = new Map<string, number>();
  afterAll(async () => {
    for (const c of ctrls) await c.disconnect().catch(() => undefined);
    // A paused container cannot be removed cleanly; a disconnected one is removed either way.
    for (const gw of GWS) await podman(['unpause', ctr(project, gw)]);
    await teardown(project, FILE, env);
    expect(await residue(project)).toEqual([]);
  });

  const view = async (gw: string): Promise<GroupView | undefined> => {
    try {
      const r = await fetch(`http://127.0.0.1:${api.get(gw)}/group`, { headers: { authorization: `Bearer ${TOKEN}` }, signal: AbortSignal.timeout(500) });
      return r.ok ? ((await r.json()) as GroupView) : undefined;
    } catch {
      return undefined;
    }
  };
  const views = (): Promise<(GroupView | undefined)[]> => Promise.all(GWS.map(view));
  /** Every gateway a member, none fenced, every group on its preferred gateway and optimized there only. */
  const settled = async (): Promise<boolean> =>
    (await views()).every(
      (v) =>
        v !== undefined &&
        !v.fenced &&
        v.members.length === GWS.length &&
        v.anaGroups.every((a) => a.owner !== null && a.owner === a.preferred && a.state === (v.self === a.owner ? 'optimized' : 'inaccessible')),
    );

  it(`keeps every acknowledged write through ${EVENTS} events (${KINDS.join(', ')}), one optimized gateway per group`, async () => {
    const readme = readmeBlock();
    // The README's sequence: up, kill gw1, start gw1 (podman-compose 1.0.3 has no `kill`: `podman kill` sends the same
    // SIGKILL that `docker compose kill` does; it ignores profiles, so `up` names the services the profile leaves out).
    expect(readme.compose.map((c) => c.split(/\s+/)[0])).toEqual(['up', 'kill', 'start']);
    expect(readme.compose.slice(1)).toEqual(['kill gw1', 'start gw1']);
    const yaml = readFileSync(FILE, 'utf8');
    const defaults = GWS.map((_, k) => Number(new RegExp(`\\$\\{NVME_GW${k + 1}_PORT:-(\\d+)\\}`).exec(yaml)?.[1]));
    expect(readme.connectPorts.sort()).toEqual(defaults.sort());

    const ports = new Map<string, number>();
    for (const [k, gw] of GWS.entries()) {
      ports.set(gw, await freePort());
      api.set(gw, await freePort());
      env[`NVME_GW${k + 1}_PORT`] = String(ports.get(gw));
      env[`NVME_GW${k + 1}_API_PORT`] = String(api.get(gw));
    }
    // The harness runs until the test stops it (SIGTERM), then reads back and exits.
    env.NVME_GW_VERIFY_SECONDS = '900';
    const tUp = Date.now();
    // etcd healthy first: podman-compose ignores `condition: service_healthy`, and a gateway without etcd exits.
    const upE = await compose(project, FILE, ['up', '-d', '--no-build', 'etcd'], env);
    expect(upE.code, upE.out + upE.err).toBe(0);
    await waitHealthy(ctr(project, 'etcd'));
    const up = await compose(project, FILE, ['up', '-d', '--no-build', '--no-deps', ...GWS], env);
    expect(up.code, up.out + up.err).toBe(0);
    for (const gw of GWS) await waitHealthy(ctr(project, gw));
    await until(settled, 60_000, 'the group to settle (each gateway owning its preferred ANA group)');
    const upMs = Date.now() - tUp;
    const first = (await view('gw1')) as GroupView;
    expect(first.members.map((m) => m.id).sort()).toEqual([...GWS]);
    expect(first.anaGroups.map((a) => a.grpid)).toEqual([1, 2, 3]);
    expect(new Set(first.anaGroups.map((a) => a.preferred)).size).toBe(3);
    for (const gw of GWS) {
      const bound = (await podman(['port', ctr(project, gw)])).out.trim().split('\n').sort();
      expect(bound).toEqual([`4420/tcp -> 127.0.0.1:${ports.get(gw)}`, `8080/tcp -> 127.0.0.1:${api.get(gw)}`]);
    }

    const opts = { traddr: '127.0.0.1', nqn: NQN, hostnqn: HOSTNQN, nr_io_queues: 1, reconnect_delay: 0.5, ctrl_loss_tmo: -1, keep_alive_tmo: 1, io_timeout: 3 };
    for (const gw of GWS) ctrls.push(await connect({ ...opts, trsvcid: ports.get(gw) as number }));
    // One subsystem through three gateways: same serial and namespace identities, disjoint controller-ID ranges, and
    // each namespace optimized exactly on the gateway that owns its ANA group.
    expect(new Set(ctrls.map((c) => c.identify.sn)).size).toBe(1);
    for (const nsid of [1, 2, 3]) expect(new Set(ctrls.map((c) => c.namespace(nsid).info.nguid)).size).toBe(1);
    expect(new Set(ctrls.map((c) => Math.floor((c.cntlid - 1) / 1000))).size).toBe(3);
    for (const a of first.anaGroups) {
      expect(ctrls.map((c) => c.namespace(a.grpid).anaState)).toEqual(GWS.map((gw) => (gw === a.owner ? 'optimized' : 'inaccessible')));
    }
    const paths: MultipathNamespace[] = [1, 2, 3].map((nsid) => createMultipath(ctrls, nsid, { iopolicy: 'numa', noPathTimeoutMs: 60_000 }));
    const work = new VerifyWorkload(paths, { workers: 2 });
    const sampler = new GroupSampler({ views });
    const upH = await compose(project, FILE, ['up', '-d', '--no-build', '--no-deps', 'harness'], env);
    expect(upH.code, upH.out + upH.err).toBe(0);
    const harness = ctr(project, 'harness');
    work.start();
    console.log(`up + settled ${upMs} ms, connected and harness up ${Date.now() - tUp - upMs} ms later`);

    const kinds = KINDS;
    const results: { kind: Kind; gw: string; newOwnerMs: number; failbackMs: number; pauseMs: number }[] = [];
    const tLoop = Date.now();
    let workloadError: string | undefined;
    try {
      await sleep(1000);
      for (let i = 0; i < EVENTS; i++) {
        const kind = kinds[i % kinds.length] as Kind;
        const gw = GWS[kinds.length === 3 ? (i + Math.floor(i / 3)) % 3 : i % 3] as string;
        const name = ctr(project, gw);
        const what = `event ${i} (${kind} ${gw})`;
        const others = GWS.filter((g) => g !== gw);
        await until(settled, 45_000, `${what}: the group settled before it`);
        const owned = (await view(others[0] as string))?.anaGroups.filter((a) => a.owner === gw).map((a) => a.grpid) ?? [];
        expect(owned, `${what}: ${gw} owns its group before`).toHaveLength(1);
        const w0 = work.writes;
        const t0 = performance.now();
        const inject = kind === 'kill' ? await podman(['kill', '--signal', 'KILL', name]) : kind === 'stop' ? await podman(['pause', name]) : await podman(['network', 'disconnect', `${project}_etcd`, name]);
        expect(inject.code, `${what}: ${inject.err}`).toBe(0);
        // A survivor owns the group, and every survivor sees the gateway gone from the members (lease expired).
        await until(async () => {
          const vs = await Promise.all(others.map(view));
          return vs.every((v) => v !== undefined && !v.members.some((m) => m.id === gw) && v.anaGroups.every((a) => !owned.includes(a.grpid) || (a.owner !== null && a.owner !== gw)));
        }, 30_000, `${what}: its group to move to a survivor`);
        const newOwnerMs = performance.now() - t0;
        if (kind !== 'kill') await sleep(LEASE_MS); // held past the lease: it must find itself fenced when it runs again
        const back = kind === 'kill' ? await compose(project, FILE, ['start', gw], env) : kind === 'stop' ? await podman(['unpause', name]) : await podman(['network', 'connect', `${project}_etcd`, name]);
        expect(back.code, `${what}: ${back.out}${back.err}`).toBe(0);
        // A restarted gateway counts from when it serves GET /group again (its container and node started).
        if (kind === 'kill') await until(async () => (await view(gw)) !== undefined, 60_000, `${what}: ${gw} to serve GET /group again`);
        const tBack = performance.now();
        await until(settled, 45_000, `${what}: rejoin and failback`);
        const tSettled = performance.now();
        // The host follows through ANA (change AENs, then the ANA log): each namespace optimized on its owner only.
        const hostView = (): string => ctrls.map((c, k) => `${GWS[k]} ${c.state} ${[1, 2, 3].map((n) => `${n}:${c.namespace(n).anaState}`).join(' ')}`).join('; ');
        const want = (await view(gw))?.anaGroups ?? [];
        await until(
          () => want.every((a) => ctrls.every((c, k) => c.state === 'live' && c.namespace(a.grpid).anaState === (GWS[k] === a.owner ? 'optimized' : 'inaccessible'))),
          10_000,
          `${what}: the host to see each namespace optimized on its owner only (host: ${hostView()})`,
        ).catch((err: Error) => {
          throw new Error(`${err.message}; now: ${hostView()}`);
        });
        await until(() => work.writes > w0 + 50, 30_000, `${what}: I/O to continue`);
        results.push({ kind, gw, newOwnerMs, failbackMs: tSettled - tBack, pauseMs: work.longestGap(t0, tSettled) });
        console.log(`${what}: new owner ${Math.round(newOwnerMs)} ms, failback ${Math.round(tSettled - tBack)} ms, pause ${Math.round(work.longestGap(t0, tSettled))} ms`);
      }
    } finally {
      // A workload error (a namespace with no usable path for a minute) is reported below, not over the loop's own.
      await work.stop().catch((err: unknown) => void (workloadError = err instanceof Error ? err.message : String(err)));
      await sampler.stop();
    }
    const loopMs = Date.now() - tLoop;
    const stopped = await podman(['stop', '-t', '120', harness], 180_000);
    expect(stopped.code, stopped.err).toBe(0);
    const harnessLog = await logs(harness);
    const exit = (await podman(['inspect', '--format', '{{.State.ExitCode}}', harness])).out.trim();
    const { blocks, lost, lostBlocks } = await work.readBack();
    const overlaps = sampler.overlaps();
    const transitions = (await view('gw1'))?.transitions ?? [];

    const fmt = (k: Kind, f: 'newOwnerMs' | 'failbackMs' | 'pauseMs'): string => {
      const xs = results.filter((r) => r.kind === k).map((r) => r[f]).sort((a, b) => a - b);
      return xs.length === 0 ? '-' : `${Math.round(xs[Math.floor((xs.length - 1) / 2)] as number)}/${Math.round(xs.at(-1) as number)}`;
    };
    console.log(
      `gateway lab (containers): up + settled in ${upMs} ms; ${EVENTS} events in ${loopMs} ms; ` +
        kinds.map((k) => `${k}: new owner p50/max ${fmt(k, 'newOwnerMs')} ms, failback ${fmt(k, 'failbackMs')} ms, I/O pause ${fmt(k, 'pauseMs')} ms`).join('; ') +
        `; host: ${work.stats.writes} FUA writes, ${work.stats.reads} verified reads, ${work.stats.mismatches.length} mismatches, ${blocks} blocks read back, ${lost} lost, ` +
        `${work.stats.stuck} stuck, longest command ${Math.round(work.stats.maxLatencyMs)} ms, multipath failovers ${paths.reduce((n, p) => n + p.failovers, 0)}; ` +
        `${sampler.samples.length} GET /group samples, ${overlaps.length} overlaps; harness: ${harnessLog.trim().split('\n').at(-1)}`,
    );
    expect(workloadError).toBeUndefined();
    expect(work.stats.mismatches.slice(0, 10)).toEqual([]);
    expect(lostBlocks).toEqual([]);
    expect(lost).toBe(0);
    expect(work.stats.stuck).toBe(0);
    expect(overlaps.slice(0, 10)).toEqual([]);
    expect(sampler.samples.length).toBeGreaterThan(100);
    expect(results).toHaveLength(EVENTS);
    expect(transitions.some((t) => t.cause === 'failover')).toBe(true);
    expect(transitions.some((t) => t.cause === 'failback')).toBe(true);
    expect(exit, harnessLog.slice(-2000)).toBe('0');
    expect(harnessLog).toMatch(/gateway verify: 3 gateways, 3 namespaces, \d+ s: [1-9]\d* FUA writes, \d+ verified reads, 0 mismatches; read back [1-9]\d* blocks, 0 lost; 0 stuck/);
  });
});
