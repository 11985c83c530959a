// Zoned namespaces from the newest Linux host in the lab (LAB7_OUT, Linux 7.x): our target (in this process) exports
// a zoned RAM namespace and a zoned file namespace (zone capacity below the zone size); the guest
// (guest/kernel-zns.sh) checks the host revalidated both as host-managed zoned devices, runs fio --zonemode=zbd with
// crc32c verify on each, and nvme-cli's reset-zone and zone-append; every `nvme zns report-zones` it prints must
// match the zones the target holds at that moment. Skipped, saying why, when that lab is absent.
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { byLine, checkLabReady, labDir, parseSteps, runLabScript, killLabGroup, type StepResult } from '../../harness/lab.js';
import { PEER_DIGESTS } from '../fixtures/peer-digests.js';
import { REPO_ROOT } from '../../harness/nvme.js';
import { TargetService } from '../../target/index.js';

const NQN = 'nqn.2024-01.io.nvme-tcp-ts:zns';
const LAB7 = process.env.LAB7_OUT ?? '/var/tmp/nvme-lab-7';
const GUEST_SCRIPT = path.join(REPO_ROOT, 'test', 'interop', 'guest', 'kernel-zns.sh');
const ZONE = 4 * 1024 * 1024;
const SIZE = 16 * 1024 * 1024;
const STATE_WORDS: Record<string, RegExp> = { empty: /EMPTY/i, 'imp-open': /IMP/i, 'exp-open': /EXP/i, closed: /CLOSED/i, full: /FULL/i, 'read-only': /READ/i, offline: /OFFLINE/i };

interface Seen { label: string; json: string; ours: Record<number, { zslba: number; zcap: number; wp: number; state: string }[] | undefined> }

/** The zones of nvme-cli's JSON (nvme-cli 2.x: zone_list or zones), as [slba, wp, cap, state]. */
function cliZones(json: string): [number, number, number, string][] {
  const j = JSON.parse(json) as Record<string, unknown>;
  const list = (j.zone_list ?? j.zones ?? []) as Array<Record<string, unknown>>;
  return list.map((z) => [Number(z.slba), Number(z.wp), Number(z.cap), String(z.state)]);
}

describe.skipIf(!existsSync(path.join(LAB7, 'vmlinuz')))('newest Linux host: zoned RAM and file namespaces', () => {
  let svc: TargetService | undefined;
  let dir: string | undefined;
  const hold: { child?: ChildProcess } = {};
  let out = '';
  let steps = new Map<string, StepResult>();
  const seen: Seen[] = [];
  let setupError: unknown;

  beforeAll(async () => {
    try {
      checkLabReady(labDir());
      dir = await mkdtemp(path.join(tmpdir(), 'nvme-tcp-zns-interop-'));
      svc = new TargetService();
      const port = (await svc.addPort({ id: 1, addr: '127.0.0.1', port: 0 })).port;
      await svc.addSubsystem({
        nqn: NQN,
        namespaces: [
          { nsid: 1, backend: { type: 'ram', size: SIZE }, zoned: { zoneSize: ZONE } },
          { nsid: 2, backend: { type: 'file', path: path.join(dir, 'zns.img'), size: SIZE }, zoned: { zoneSize: ZONE, zoneCapacity: 3 * 1024 * 1024 } },
        ],
      });
      const args = [path.join(labDir(), 'run.sh'), '--timeout', '540', '--hostfwd', 'none', '--append', 'nvme_core.multipath=N', '--guestfwd', `10.0.2.100:4420:${port}`];
      for (const e of [`ZNS_NQN=${NQN}`, `ZONE_SECTORS=${ZONE / 512}`, `NR_ZONES=${SIZE / ZONE}`, ...(PEER_DIGESTS ? ['DIGESTS=1'] : [])]) args.push('--env', e);
      args.push(GUEST_SCRIPT);
      const run = runLabScript(
        args,
        byLine((line) => {
          const m = /^@@ZONES (\S+) (.*)$/.exec(line);
          if (m) seen.push({ label: m[1] as string, json: m[2] as string, ours: { 1: svc?.zones(NQN, 1), 2: svc?.zones(NQN, 2) } });
        }),
        { LAB_OUT: LAB7 },
      );
      hold.child = run.child;
      out = (await run.done).out;
      steps = parseSteps(out);
    } catch (err) {
      setupError = err;
    }
  });
  afterAll(async () => {
    killLabGroup(hold.child);
    await svc?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const stepOk = (name: string): void => {
    if (setupError !== undefined) throw setupError;
    const s = steps.get(name);
    expect(s, `step ${name} did not run; guest output tail:\n${out.split('\n').slice(-40).join('\n')}`).toBeDefined();
    expect(s?.status, `${name} failed in the guest:\n${s?.output ?? ''}`).toBe('PASS');
  };

  it('the host sees two host-managed zoned devices with our zone size and count, writable', () => {
    stepOk('connect');
    stepOk('zoned-devices');
  });

  it('fio --zonemode=zbd --verify=crc32c is clean on the RAM and the file namespace', () => {
    stepOk('fio-ram');
    stepOk('fio-file');
  });

  it('fio --zonemode=zbd random writes within 4 open zones, verified, on both', () => {
    stepOk('fio-rand-ram');
    stepOk('fio-rand-file');
  });

  it("nvme zns reset-zone -a and zone-append (the LBA it reports, the data read back)", () => {
    stepOk('zone-commands');
  });

  it('every nvme zns report-zones matches the zones the target held when it ran', () => {
    for (const s of ['report-before', 'report-ram', 'report-file', 'report-end']) stepOk(s);
    expect(seen.map((s) => s.label)).toEqual(['before', 'ram', 'file', 'end']);
    for (const s of seen) {
      const nsid = s.label === 'file' ? 2 : 1;
      const ours = s.ours[nsid] ?? [];
      const cli = cliZones(s.json);
      expect(cli.length, `${s.label}: ${s.json}`).toBe(ours.length);
      cli.forEach(([slba, wp, cap, state], i) => {
        const z = ours[i];
        expect([slba, cap], `${s.label} zone ${i}`).toEqual([z?.zslba, z?.zcap]);
        expect(state, `${s.label} zone ${i}: ${s.json}`).toMatch(STATE_WORDS[z?.state ?? ''] ?? /^$/);
        if (z?.state !== 'full') expect(wp, `${s.label} zone ${i} wp`).toBe(z?.wp);
      });
    }
  });
});
