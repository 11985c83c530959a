// The Linux 6.1 kernel host (nvme-tcp + nvme-cli + fio under qemu, harness/lab) against our target.
// The target runs as the CLI a user starts (`nvme-tcp target ...`, a child process) on 127.0.0.1:<free port>;
// the guest reaches it as 10.0.2.100:4420 through qemu's guestfwd, and the target advertises that address.
// guest/kernel-host.sh prints one PASS/FAIL marker per step; each step becomes one test here, so a failure
// names the step and shows its output, the guest's dmesg tail and the target's warnings.
//
// INTEROP_KERNEL_TARGET=1 runs the same guest script against the guest's own nvmet instead (the
// reference): a step failing against us but passing there is our bug.
//
// One suite, several target set-ups: kernel-host.test.ts runs it against the one-process target,
// kernel-host-workers.test.ts against `--workers 2 --placement queue` (docs/target.md "Target workers").
import type { ChildProcess } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkLabReady, labDir, labKernel, parseSteps, startCliTarget, type CliTarget, runLabScript, stopLab, type StepResult } from '../../harness/lab.js';
import { PEER_DIGESTS } from '../fixtures/peer-digests.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const GUEST_SCRIPT = path.join(repoRoot, 'test', 'interop', 'guest', 'kernel-host.sh');
const NQN = 'nqn.2024-01.io.nvme-tcp-ts:interop';
const GUEST_ADDR = '10.0.2.100';
const GUEST_PORT = 4420;
const REFERENCE = process.env.INTEROP_KERNEL_TARGET === '1';
const LAB_TIMEOUT_S = 420;

/** The steps of guest/kernel-host.sh, in order; one test each. */
const STEPS = [
  'discover',
  'connect',
  'id-ctrl',
  'id-ns',
  'ns-descs',
  'smart-log',
  'logs-features',
  'fio-ram-4k',
  'fio-ram-128k',
  'fio-file-4k',
  'fio-file-128k',
  'flush',
  'discard',
  'write-zeroes',
  'verify',
  'write-uncor',
  'compare',
  'copy',
  'format',
  'reset',
  'io-after-reset',
  'disconnect',
  'connect-digests',
  'fio-digests-4k',
  'fio-digests-128k',
  'digest-errors',
  'disconnect-digests',
  'no-controllers-left',
] as const;


export interface KernelHostSuiteOptions {
  /** Words after the describe title naming the target set-up. */
  label?: string;
  /** Extra `nvme-tcp target` arguments. */
  targetArgs?: readonly string[];
  /** Guest steps this set-up does not offer (they report SKIP). */
  skipSteps?: readonly string[];
  /** Checks on the target's log after the guest script ran (before SIGTERM), one test each. */
  checks?: Readonly<Record<string, (log: readonly string[]) => void>>;
}

/** `nvme-tcp target` as a user starts it: RAM nsid 1, a file nsid 2, advertising the guest-side address. */
function startTarget(dir: string, extra: readonly string[]): Promise<CliTarget> {
  const args = ['--listen', '127.0.0.1:0', '--nqn', NQN, '--ram', '64M', '--file', `${path.join(dir, 'ns2.img')}:64M`, '--advertise', `${GUEST_ADDR}:${GUEST_PORT}`, '--log-level', 'debug'];
  return startCliTarget([...args, ...extra]);
}

/** Runs the guest script in the lab; resolves with the exit code and everything it printed. */
function runLab(lab: string, env: string[], forwardPort: number | undefined): { done: Promise<{ code: number | null; out: string }>; child: ChildProcess } {
  const args = [path.join(lab, 'run.sh'), '--timeout', String(LAB_TIMEOUT_S), '--hostfwd', 'none'];
  args.push('--guestfwd', forwardPort === undefined ? 'none' : `${GUEST_ADDR}:${GUEST_PORT}:${forwardPort}`);
  for (const e of env) args.push('--env', e);
  args.push(GUEST_SCRIPT);
  return runLabScript(args);
}

function targetWarnings(t: CliTarget | undefined): string {
  if (!t) return '';
  const bad = t.log.filter((l) => {
    try {
      return ((JSON.parse(l) as { level?: number }).level ?? 0) >= 40;
    } catch {
      return !l.startsWith('nvme'); // stderr text, not a start-up line
    }
  });
  return bad.length > 0 ? `\n--- target warnings/errors (last 20 of ${bad.length})\n${bad.slice(-20).join('\n')}` : '';
}

/** The suite: boot the lab, run guest/kernel-host.sh against the target started with `opts.targetArgs`. */
export function kernelHostSuite(opts: KernelHostSuiteOptions = {}): void {
  const against = REFERENCE ? 'the kernel nvmet (reference run)' : `our target${opts.label !== undefined ? ` (${opts.label})` : ''}`;
  describe(`Linux ${labKernel()} kernel host (nvme-cli, fio) against ${against}`, () => {
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
        dir = await mkdtemp(path.join(tmpdir(), 'nvme-tcp-interop-'));
        // NVME_TCP_TEST_DIGESTS=1: the plain connect asks for digests too (test/fixtures/peer-digests.ts).
        const env = [`NQN=${NQN}`, ...(PEER_DIGESTS ? ['DIGESTS=1'] : [])];
        // nvmet's file backend zeroes with fallocate(ZERO_RANGE), which the guest's tmpfs refuses
        // nvmet has no Verify, Write Uncorrectable, Compare, Copy or Format NVM (docs/target.md, "NVM commands")
        if (REFERENCE) env.push('KERNEL_TARGET=1', 'SKIP_STEPS=write-zeroes verify write-uncor compare copy format');
        else {
          env.push(`ADVERTISED=${GUEST_ADDR}:${GUEST_PORT}`);
          if (opts.skipSteps !== undefined && opts.skipSteps.length > 0) env.push(`SKIP_STEPS=${opts.skipSteps.join(' ')}`);
          target = await startTarget(dir, opts.targetArgs ?? []);
        }
        const run = runLab(labPath, env, target?.port);
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
      expect(lab, 'lab did not run').toBeDefined();
      const tail = lab?.out.split('\n').slice(-40).join('\n') ?? '';
      expect(lab?.out, `no END marker (lab failure or timeout); last output:\n${tail}`).toMatch(/===LAB-SCRIPT-END rc=\d+/);
    });

    it.each(STEPS)('%s', (name) => {
      if (setupError !== undefined) throw setupError;
      const r = steps.get(name);
      if (r === undefined) {
        const failed = [...steps].filter(([, s]) => s.status === 'FAIL').map(([n]) => n);
        throw new Error(`step ${name} did not run${failed.length > 0 ? ` (after failed steps: ${failed.join(', ')})` : ''}`);
      }
      if (r.status === 'SKIP') return;
      expect(r.status, `${name} failed in the guest:\n${r.output}${targetWarnings(target)}`).toBe('PASS');
    });

    for (const [name, check] of Object.entries(opts.checks ?? {})) {
      it.skipIf(REFERENCE)(name, () => {
        if (setupError !== undefined) throw setupError;
        check(target?.log ?? []);
      });
    }

    it.skipIf(REFERENCE)('the target is still running after the kernel tests and exits 0 on SIGTERM', async () => {
      if (setupError !== undefined) throw setupError;
      if (!target) throw new Error('target not started');
      expect(target.child.exitCode, `target died during the run:${targetWarnings(target)}`).toBeNull();
      target.child.kill('SIGTERM');
      const code = await Promise.race([target.exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 20_000))]);
      expect(code).toBe(0);
    });
  });
}
