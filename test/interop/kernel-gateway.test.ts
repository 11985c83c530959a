// The Linux host through a gateway group's failover and failback (issue 30, docs/gateway-groups.md): a real etcd, three
// `nvme-tcp target` gateways with one namespace on a shared file (harness/gateway-lab.ts), and the qemu lab's kernel
// with native NVMe multipath connected to all three (`nvme connect` ×3: one subsystem, one multipath head, three
// paths). The guest runs test/interop/guest/kernel-gateway.sh one subcommand at a time through the lab's command loop
// (harness/kernel-host/runner.ts), so the host acts on the gateways between the guest's looks:
//
//  1. `nvme list-subsys` and `nvme ana-log`; every path's ana_state in sysfs is what GET /group says (owner optimized,
//     the others inaccessible).
//  2. fio with verify (randwrite, crc32c, verify_backlog) on the head; SIGKILL of the gateway that owns the
//     namespace's ANA group, checked to be the owner. A survivor becomes owner; the guest sees its path optimized, the
//     third inaccessible and the dead one not live; `nvme list-subsys` / `nvme ana-log` again.
//  3. The gateway is restarted; after the failback delay it owns the group again (GET /group) and the guest sees its
//     path live and optimized again, the others inaccessible.
//  4. fio ends without an error or a verify failure; a second short fio after the failback goes through the
//     failed-back path: its I/O counters grow, in the guest (/sys/block/PATH/stat) and on the gateway
//     (nvme_tcp_namespace_commands_total).
//
// Runs on the 6.1 lab and the newest-kernel lab; a lab that is not built is skipped with the command that builds it.
// The printed transcript (the nvme-cli output and timings) is what docs/kernel-host-reports/gateway-group.md shows.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayLab, groupView, type GroupView, type LabGateway } from '../../harness/gateway-lab.js';
import { labKernel } from '../../harness/lab.js';
import { LAB_KERNELS, labPrerequisites, labRunner, type HostRunner, type LabKernel } from '../../harness/kernel-host/runner.js';
import { REPO_ROOT } from '../../harness/nvme.js';
import { etcdMissing, startEtcd, type EtcdServer } from '../fixtures/etcd.js';
import { until } from '../../harness/until.js';

const NQN = 'nqn.2024-01.io.nvme-tcp-ts:gateway-kernel';
const GUEST_SCRIPT = readFileSync(path.join(REPO_ROOT, 'test', 'interop', 'guest', 'kernel-gateway.sh'), 'utf8');
const GUEST_ADDR = '10.0.2.100';
/** Guest port of gateway k (k = 0, 1, 2): 10.0.2.100:4420+k → the gateway's port on the host. */
const guestPort = (k: number): number => 4420 + k;
const LEASE_MS = 2000;
const FAILBACK_MS = 2000;
/** fio's cap: it runs through kill and failback and is stopped (SIGINT) once the failed-back path carried I/O. */
const FIO_SECONDS = 300;

interface PathLine { port: number; ctrl: string; state: string; path: string; ana: string; reads: number; writes: number }

function parsePaths(out: string): PathLine[] {
  return [...out.matchAll(/^@@PATH port=(\d+) ctrl=(\S+) state=(\S+) path=(\S+) ana=(\S+) ios=(\S+)$/gm)].map((m) => {
    const [r, w] = (m[6] ?? '-').split(',');
    return { port: Number(m[1]), ctrl: m[2] ?? '', state: m[3] ?? '', path: m[4] ?? '', ana: m[5] ?? '', reads: Number(r ?? NaN), writes: Number(w ?? NaN) };
  });
}

/** Reads + writes the gateway completed on nsid 1 (0 when it does not answer). */
async function gatewayIos(gw: LabGateway): Promise<number> {
  try {
    const text = await (await fetch(`http://127.0.0.1:${gw.api}/metrics`, { signal: AbortSignal.timeout(2000) })).text();
    let n = 0;
    for (const m of text.matchAll(/^nvme_tcp_namespace_commands_total\{([^}]*)\} (\d+)/gm)) if (/nsid="1"/.test(m[1] ?? '') && /op="(read|write)"/.test(m[1] ?? '')) n += Number(m[2]);
    return n;
  } catch {
    return 0;
  }
}

/** [trsvcid, state] of each `nvme ana-log /dev/nvmeX   # trsvcid P` section of `show`'s output (nsid 1's group). */
function anaLogStates(show: string): Array<[number, string]> {
  return [...show.matchAll(/^\$ nvme ana-log \S+ +# trsvcid (\d+)\n(?:(?!\$ ).*\n)*?state\t:\t(\S+)/gm)].map((m) => [Number(m[1]), m[2] ?? '']);
}

interface FioResult { rc: string; gapMs: number; ios: number; errors: number; verifyErrors: string[]; out: string }

function parseFio(out: string): FioResult {
  const rc = /^@@FIO rc=(\S+)/m.exec(out)?.[1] ?? 'none';
  const gapMs = Number(/^@@GAP (\d+)/m.exec(out)?.[1] ?? NaN);
  let ios = 0;
  let errors = -1;
  try {
    const j = JSON.parse(out.slice(out.indexOf('@@JSON') + 6).replace(/^[^{]*/, '')) as { jobs: Array<{ error: number; read: { total_ios: number }; write: { total_ios: number } }> };
    errors = j.jobs.reduce((a, b) => a + b.error, 0);
    ios = j.jobs.reduce((a, b) => a + b.read.total_ios + b.write.total_ios, 0);
  } catch {
    // no JSON: fio did not finish; errors stays -1
  }
  return { rc, gapMs, ios, errors, verifyErrors: out.split('\n').filter((l) => /verify|bad magic|crc32c/i.test(l) && !l.includes('"')), out };
}

interface Scenario {
  kernel: string;
  transcript: string[];
  timings: Record<string, number>;
  before: { view: GroupView; paths: PathLine[]; show: string };
  killed: string;
  afterKill: { owner: string; paths: PathLine[]; show: string; newOwnerIosGrew: boolean };
  afterFailback: { owner: string | null; paths: PathLine[]; show: string };
  fio: FioResult;
  /** The failed-back path's guest counters and its gateway's count, from the guest seeing it optimized again until fio stops. */
  failedBack: { guestBefore: number; guestAfter: number; gatewayBefore: number; gatewayAfter: number };
}

const labs: LabKernel[] = ['6.1', 'newest'];

for (const which of labs) {
  const missing = labPrerequisites(which) ?? (await etcdMissing());
  const kernel = labKernel(LAB_KERNELS[which].out());
  describe.skipIf(missing !== undefined)(
    `Linux ${which} host (${kernel}), native multipath, through a gateway group's kill and failback${missing === undefined ? '' : ` — skipped: ${missing}`}`,
    () => {
      let etcd: EtcdServer | undefined;
      let lab: GatewayLab | undefined;
      let host: HostRunner | undefined;
      let s: Scenario | undefined;
      let setupError: unknown;

      beforeAll(async () => {
        try {
          s = await runScenario(
            which,
            kernel,
            (e) => (etcd = e),
            (l) => (lab = l),
            (h) => (host = h),
          );
        } catch (err) {
          setupError = err;
        }
      }, 600_000);

      afterAll(async () => {
        await host?.close().catch(() => undefined);
        await lab?.close().catch(() => undefined);
        await etcd?.stop();
      }, 120_000);

      const scenario = (): Scenario => {
        if (setupError !== undefined) throw setupError;
        if (s === undefined) throw new Error('the scenario did not run');
        return s;
      };

      it('three paths, one head; every path ana_state is the group ownership (owner optimized, others inaccessible)', () => {
        const { before } = scenario();
        const owner = before.view.anaGroups[0]?.owner;
        expect(before.paths).toHaveLength(3);
        expect(new Set(before.paths.map((p) => p.path.replace(/c\d+n/, 'n'))).size).toBe(1);
        expect(before.paths.map((p) => [p.port, p.state, p.ana])).toEqual(
          [0, 1, 2].map((k) => [guestPort(k), 'live', `gw${k + 1}` === owner ? 'optimized' : 'inaccessible']),
        );
        expect(before.show).toMatch(/nvme list-subsys/);
        expect(anaLogStates(before.show)).toEqual([0, 1, 2].map((k) => [guestPort(k), `gw${k + 1}` === owner ? 'optimized' : 'inaccessible']));
      });

      it('killing the owner: a survivor owns the group, the guest sees its path optimized, the dead path not live, I/O goes on', () => {
        const { before, killed, afterKill } = scenario();
        expect(killed).toBe(before.view.anaGroups[0]?.owner);
        expect(afterKill.owner).not.toBe(killed);
        const dead = afterKill.paths.find((p) => p.port === guestPort(Number(killed.slice(2)) - 1));
        expect(dead?.state).not.toBe('live');
        for (const p of afterKill.paths.filter((x) => x !== dead)) {
          expect([p.port, p.state, p.ana]).toEqual([p.port, 'live', `gw${p.port - 4419}` === afterKill.owner ? 'optimized' : 'inaccessible']);
        }
        expect(afterKill.newOwnerIosGrew).toBe(true);
        // nvme ana-log of the live controllers: what each surviving gateway reports now
        expect(anaLogStates(afterKill.show)).toEqual(
          afterKill.paths.filter((p) => p !== dead).map((p) => [p.port, `gw${p.port - 4419}` === afterKill.owner ? 'optimized' : 'inaccessible']),
        );
      });

      it('after the restart and the failback delay the gateway owns the group again and its path is optimized again', () => {
        const { killed, afterFailback } = scenario();
        expect(afterFailback.owner).toBe(killed);
        expect(afterFailback.paths.map((p) => [p.port, p.state, p.ana])).toEqual(
          [0, 1, 2].map((k) => [guestPort(k), 'live', `gw${k + 1}` === killed ? 'optimized' : 'inaccessible']),
        );
        expect(anaLogStates(afterFailback.show)).toEqual([0, 1, 2].map((k) => [guestPort(k), `gw${k + 1}` === killed ? 'optimized' : 'inaccessible']));
      });

      it('fio with verify runs through kill and failback without an error; the failed-back path carries I/O again', () => {
        const { fio, failedBack } = scenario();
        // stopped by SIGINT after the failback (0 or 128 then; 130 would be a death by the signal)
        expect(['0', '128'], fio.out).toContain(fio.rc);
        expect(fio.errors, fio.out).toBe(0);
        expect(fio.verifyErrors, fio.out).toEqual([]);
        expect(fio.ios).toBeGreaterThan(0);
        // I/O continued: no stretch without a completion longer than the lease (2 s, granted 2 s by etcd) plus the
        // kernel's reconnect and ANA log read, with room for TCG on 2 shared cores (measured 1.9 to 2.7 s)
        expect(fio.gapMs, fio.out).toBeLessThan(15_000);
        expect(failedBack.gatewayAfter).toBeGreaterThan(failedBack.gatewayBefore);
        expect(failedBack.guestAfter).toBeGreaterThan(failedBack.guestBefore);
      });
    },
  );
}

async function runScenario(
  which: LabKernel,
  kernel: string,
  setEtcd: (e: EtcdServer) => void,
  setLab: (l: GatewayLab) => void,
  setHost: (h: HostRunner) => void,
): Promise<Scenario> {
  const t0 = performance.now();
  const transcript: string[] = [];
  const timings: Record<string, number> = {};
  const mark = (k: string, since = t0): number => (timings[k] = Math.round(performance.now() - since));
  const log = (m: string): void => {
    transcript.push(m);
  };

  const etcd = await startEtcd();
  setEtcd(etcd);
  const lab = await GatewayLab.start({ etcdPort: etcd.clientPort, gateways: 3, namespaces: 1, leaseMs: LEASE_MS, failbackDelayMs: FAILBACK_MS, nqn: NQN, group: 'kernel', sizeMiB: 64 });
  setLab(lab);
  const gws = lab.gateways;
  const host = await labRunner({
    which,
    targetPort: gws[0]!.port,
    guestfwd: gws.slice(1).map((g, k) => `${GUEST_ADDR}:${guestPort(k + 1)}:${g.port}`),
    smp: 2,
    timeoutS: 540,
  });
  setHost(host);
  mark('bootMs');

  const sh = async (args: string[], timeoutMs = 120_000): Promise<string> => {
    const r = await host.exec(['sh', '/tmp/kernel-gateway.sh', ...args], timeoutMs);
    const out = `${r.stdout}${r.stderr === '' ? '' : `\n[stderr] ${r.stderr}`}`;
    // fio's JSON stays out of the transcript (the summary line says what it counted)
    const shown = out.includes('@@JSON') ? out.slice(0, out.indexOf('@@JSON')) : out;
    log(`### guest: kernel-gateway.sh ${args.join(' ')} (rc ${r.code}, ${Math.round(r.wallMs)} ms)\n${shown.trimEnd()}`);
    if (r.code !== 0) throw new Error(`guest: kernel-gateway.sh ${args.join(' ')} exited ${r.code}:\n${out}\n--- transcript:\n${transcript.join('\n')}`);
    return r.stdout;
  };
  const put = await host.exec(['sh', '-c', `cat > /tmp/kernel-gateway.sh <<'GW_EOF'\n${GUEST_SCRIPT}\nGW_EOF\n`]);
  if (put.code !== 0) throw new Error(`copying the guest script failed: ${put.stderr}`);

  const first = await groupView(gws[0]!);
  if (first === undefined) throw new Error('gw1 does not answer GET /group');
  const connectOut = await sh(['connect', NQN, GUEST_ADDR, ...gws.map((_, k) => String(guestPort(k)))]);
  if (!/@@HEAD head=nvme\d+n\d+ multipath=Y/.test(connectOut)) throw new Error(`no multipath head (native multipath off?):\n${connectOut}`);
  const beforePaths = parsePaths(await sh(['paths', NQN]));
  const beforeShow = await sh(['show', NQN]);
  const beforeView = (await groupView(gws[0]!)) as GroupView;

  // fio through the kill and the failback: writes with crc32c headers, read back and checked as it goes.
  await sh(['fio-start', NQN, 'gw', '--rw=randwrite', '--size=32M', '--iodepth=4', '--verify=crc32c', '--verify_backlog=32', '--do_verify=1', '--time_based', `--runtime=${FIO_SECONDS}`]);
  const tFio = performance.now();
  const ownerId = (await lab.owners())?.get(1);
  const owner = gws.find((g) => g.id === ownerId);
  if (owner === undefined) throw new Error(`no owner for ANA group 1 (${String(ownerId)})`);
  // The owner carries the I/O before it dies.
  await until(async () => (await gatewayIos(owner)) > 50, 60_000, `${owner.id} to serve fio's I/O`);
  mark('fioToOwnerIoMs', tFio);

  const tKill = performance.now();
  await lab.kill(owner);
  log(`### host: SIGKILL ${owner.id} (owner of ANA group 1), about ${Math.round(tKill - tFio)} ms into fio`);
  let newOwner: LabGateway | undefined;
  await until(async () => {
    const o = (await lab.owners(owner))?.get(1);
    newOwner = gws.find((g) => g !== owner && g.id === o);
    return newOwner !== undefined;
  }, 30_000, 'a survivor to own ANA group 1');
  mark('killToNewOwnerMs', tKill);
  const survivor = newOwner as LabGateway;
  await sh(['wait', NQN, String(guestPort(gws.indexOf(survivor))), 'live', 'optimized', '90']);
  mark('killToGuestOptimizedMs', tKill);
  const iosAtTakeover = await gatewayIos(survivor);
  const afterKillPaths = parsePaths(await sh(['paths', NQN]));
  const afterKillShow = await sh(['show', NQN]);
  const newOwnerIosGrew = await until(async () => (await gatewayIos(survivor)) > iosAtTakeover + 50, 30_000, `${survivor.id} to serve fio's I/O`).then(
    () => true,
    () => false,
  );

  const tRestart = performance.now();
  await lab.startGateway(owner);
  mark('restartMs', tRestart);
  log(`### host: ${owner.id} restarted, about ${Math.round(performance.now() - tFio)} ms into fio`);
  await until(async () => (await lab.owners())?.get(1) === owner.id && (await lab.settled()), 90_000, `${owner.id} to own ANA group 1 again`);
  mark('restartToFailbackMs', tRestart);
  log(`### host: GET /group: ${owner.id} owns ANA group 1 again, about ${Math.round(performance.now() - tFio)} ms into fio`);
  await sh(['wait', NQN, String(guestPort(gws.indexOf(owner))), 'live', 'optimized', '90']);
  mark('restartToGuestOptimizedMs', tRestart);
  const afterFailbackPaths = parsePaths(await sh(['paths', NQN]));
  const afterFailbackShow = await sh(['show', NQN]);
  const afterFailbackOwner = (await lab.owners())?.get(1) ?? null;

  // The same fio goes on through the failed-back path (the only optimized one): its counters grow, in the guest and
  // on the gateway; then fio is stopped (SIGINT: fio-stop fails if fio had already ended, so it ran through it all).
  const pathOf = (ps: PathLine[]): PathLine | undefined => ps.find((p) => p.port === guestPort(gws.indexOf(owner)));
  const g0 = pathOf(afterFailbackPaths);
  const gw0 = await gatewayIos(owner);
  await until(async () => (await gatewayIos(owner)) > gw0 + 100, 60_000, `${owner.id} to serve fio's I/O again`).catch(() => undefined);
  const g1 = pathOf(parsePaths(await sh(['paths', NQN])));
  const gw1 = await gatewayIos(owner);
  await sh(['fio-stop', 'gw']);
  const fio = parseFio(await sh(['fio-wait', 'gw', '120'], 150_000));
  mark('fioWallMs', tFio);
  await sh(['disconnect', NQN]);
  mark('totalMs');

  const s: Scenario = {
    kernel,
    transcript,
    timings,
    before: { view: beforeView, paths: beforePaths, show: beforeShow },
    killed: owner.id,
    afterKill: { owner: survivor.id, paths: afterKillPaths, show: afterKillShow, newOwnerIosGrew },
    afterFailback: { owner: afterFailbackOwner, paths: afterFailbackPaths, show: afterFailbackShow },
    fio,
    failedBack: { guestBefore: (g0?.reads ?? 0) + (g0?.writes ?? 0), guestAfter: (g1?.reads ?? 0) + (g1?.writes ?? 0), gatewayBefore: gw0, gatewayAfter: gw1 },
  };
  console.log(
    `kernel-gateway (${which} lab, ${kernel}, ${host.emulated ?? ''}): killed ${owner.id}, new owner ${survivor.id}; ` +
      `fio ${fio.ios} I/Os rc ${fio.rc}, longest stretch without a completion ${fio.gapMs} ms (250 ms windows); ` +
      `failed-back path I/Os guest ${s.failedBack.guestBefore}->${s.failedBack.guestAfter}, gateway ${gw0}->${gw1}; timings ${JSON.stringify(timings)}\n` +
      transcript.join('\n'),
  );
  return s;
}
