// Issue 17 against the Linux 6.1 kernel host (nvme-cli, fio under qemu, harness/lab): subsystems named "testnqn"
// and "blktests-subsystem-1" as nvmet allows, namespace disable/enable and re-map while the host is connected (fio
// verify on the other namespace keeps running), maxIoQueues changed at runtime (the host reconnects with the new
// count) and a cntlid range across three hosts. The target runs as the CLI (`nvme-tcp target --config ... --api`);
// the guest reaches it and its management API through two guestfwd forwards and drives each change itself over HTTP
// (guest/mgmt-parity.sh), so every change lands at a known point of the host's view.
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkLabReady, labDir, parseSteps, runLabScript, startCliTarget, stopLab, type CliTarget, type StepResult } from '../../harness/lab.js';
import { PEER_DIGESTS } from '../fixtures/peer-digests.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const GUEST_SCRIPT = path.join(repoRoot, 'test', 'interop', 'guest', 'mgmt-parity.sh');
const GUEST_ADDR = '10.0.2.100';
const LAB_TIMEOUT_S = 420;
const STEPS = ['connect-testnqn', 'disable-enable', 'remap-disabled', 'remap-live', 'qid-max', 'cntlid-range'] as const;


async function startTarget(dir: string): Promise<CliTarget> {
  const cfgPath = path.join(dir, 'target.json');
  await writeFile(
    cfgPath,
    JSON.stringify({
      ports: [{ id: 1, addr: '127.0.0.1', port: 0, advertiseAddr: GUEST_ADDR, advertisePort: 4420 }],
      subsystems: [
        { nqn: 'testnqn', namespaces: [{ nsid: 1, backend: { type: 'ram', size: '64M' } }, { nsid: 2, backend: { type: 'ram', size: '64M' } }] },
        { nqn: 'blktests-subsystem-1', cntlidMin: 5, cntlidMax: 6, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '16M' } }] },
      ],
    }),
  );
  return startCliTarget(['--config', cfgPath, '--api', '127.0.0.1:0', '--log-level', 'info']);
}

describe('Linux kernel host: nvmet-parity management (issue 17)', () => {
  let dir: string | undefined;
  let target: CliTarget | undefined;
  let labChild: ChildProcess | undefined;
  let lab: { code: number | null; out: string } | undefined;
  let steps = new Map<string, StepResult>();
  let setupError: unknown;

  beforeAll(async () => {
    try {
      const labPath = labDir();
      checkLabReady(labPath);
      dir = await mkdtemp(path.join(tmpdir(), 'nvme-tcp-parity-'));
      target = await startTarget(dir);
      const args = [path.join(labPath, 'run.sh'), '--timeout', String(LAB_TIMEOUT_S), '--hostfwd', 'none', ...(PEER_DIGESTS ? ['--env', 'DIGESTS=1'] : [])];
      args.push('--guestfwd', `${GUEST_ADDR}:4420:${target.port}`, '--guestfwd', `${GUEST_ADDR}:8080:${String(target.apiPort)}`, GUEST_SCRIPT);
      const run = runLabScript(args);
      labChild = run.child;
      lab = await run.done;
      steps = parseSteps(lab.out);
    } catch (err) {
      setupError = err;
    }
  });

  afterAll(async () => {
    await stopLab(labChild, target, dir);
  });

  it('the lab boots and the guest script runs to its end', () => {
    if (setupError !== undefined) throw setupError;
    expect(lab?.out, `no END marker; last output:\n${lab?.out.split('\n').slice(-40).join('\n') ?? ''}`).toMatch(/===LAB-SCRIPT-END rc=\d+/);
  });

  it('the target warned once per name that is not an NQN', () => {
    if (setupError !== undefined) throw setupError;
    for (const n of ['testnqn', 'blktests-subsystem-1']) expect(target?.log.filter((l) => l.includes(`subsystem name \\"${n}\\" is not a well-formed NQN`))).toHaveLength(1);
  });

  it.each(STEPS)('%s', (name) => {
    if (setupError !== undefined) throw setupError;
    const r = steps.get(name);
    if (r === undefined) throw new Error(`step ${name} did not run; output tail:\n${lab?.out.split('\n').slice(-30).join('\n') ?? ''}`);
    expect(r.status, `${name} failed in the guest:\n${r.output}\n--- target log tail\n${target?.log.slice(-15).join('\n') ?? ''}`).toBe('PASS');
  });

  it('the target is still running and exits 0 on SIGTERM', async () => {
    if (setupError !== undefined) throw setupError;
    if (!target) throw new Error('target not started');
    expect(target.child.exitCode).toBeNull();
    target.child.kill('SIGTERM');
    expect(await Promise.race([target.exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 20_000))])).toBe(0);
  });
});
