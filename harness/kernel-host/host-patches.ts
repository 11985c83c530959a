// The Linux host with a patch series (`--host-patches`): nvme-core, nvme-fabrics and nvme-tcp built from Debian's
// source of the lab's newest kernel with the series applied (harness/lab/build-host-patches.sh, cached by the hash of
// the patches), then loaded in the lab guest over the stock modules (guest/bin/lab-host-modules).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { labDir } from '../lab.js';
import { REPO_ROOT } from '../nvme.js';
import type { HostRunner } from './runner.js';

/** The three seed series (../shared/seed-patches/NAME, or HOST_PATCHES_SRC/NAME). */
export const HOST_PATCH_SERIES = ['queues-per-hctx', 'nic-aware-queues', 'parallel-queue-setup'] as const;

/**
 * A series that does not apply, does not build or whose modules the guest refuses: the message is one line naming the
 * patch (or module) and the step (apply, build, load), as build-host-patches.sh and lab-host-modules print it.
 */
export class HostPatchesError extends Error {
  readonly code = 'KERNEL_HOST_ERR_PATCHES';
}

/** A built series: its cache entry and what build.env says about it. */
export interface HostModules {
  /** The series' name (its directory's). */
  series: string;
  /** The cache entry holding nvme-core.ko, nvme-fabrics.ko, nvme-tcp.ko. */
  dir: string;
  patches: string[];
  /** The kernel the modules were built for (uname -r). */
  kver: string;
  /** Debian source package and version the series was applied to. */
  base: string;
}

/** Where the seed series live: HOST_PATCHES_SRC, else ../shared/seed-patches beside the repository (as CI lays it out). */
export function seedPatchesDir(env: NodeJS.ProcessEnv = process.env): string {
  return env['HOST_PATCHES_SRC'] ?? path.join(REPO_ROOT, '..', 'shared', 'seed-patches');
}

/**
 * `--host-patches VALUE`: undefined for stock; the series directory for a seed name or a directory holding a
 * `series` file. Throws HostPatchesError with the fix otherwise.
 */
export function resolveHostPatches(value: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (value === 'stock') return undefined;
  const dir = (HOST_PATCH_SERIES as readonly string[]).includes(value) ? path.join(seedPatchesDir(env), value) : path.resolve(value);
  if (!existsSync(path.join(dir, 'series'))) {
    const named = (HOST_PATCH_SERIES as readonly string[]).includes(value);
    throw new HostPatchesError(
      named
        ? `--host-patches ${value}: no ${path.join(dir, 'series')}; set HOST_PATCHES_SRC to the directory holding the seed series (${HOST_PATCH_SERIES.join(', ')})`
        : `--host-patches must be stock, ${HOST_PATCH_SERIES.join(', ')} or a directory of patches with a series file; ${dir} has no series file`,
    );
  }
  return dir;
}

/** The kernel the series are built for, from the pin in build-host-patches.sh. */
export async function hostPatchesKernel(): Promise<string> {
  return (await runScript(['--kver'])).stdout.trim();
}

/**
 * Builds (or finds in the cache) the modules of the series in `dir`. A patch that does not apply or a build that
 * fails is a HostPatchesError with the script's one line.
 */
export async function buildHostModules(dir: string, log?: (m: string) => void): Promise<HostModules> {
  const r = await runScript([dir], log);
  const entry = /^HOST_MODULES=(.+)$/m.exec(r.stdout)?.[1];
  if (r.code !== 0 || entry === undefined) {
    const line = r.stderr.split('\n').reverse().find((l) => l.startsWith('host-patches: ')) ?? `host-patches: build-host-patches.sh exited ${String(r.code)}: ${r.stderr.trim().split('\n').pop() ?? ''}`;
    throw new HostPatchesError(line);
  }
  const env = Object.fromEntries((await readFile(path.join(entry, 'build.env'), 'utf8')).split('\n').filter((l) => l.includes('=')).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
  return { series: env['series'] ?? path.basename(dir), dir: entry, patches: (env['patches'] ?? '').split(' ').filter((p) => p !== ''), kver: env['kver'] ?? '?', base: env['base'] ?? '?' };
}

function runScript(args: string[], log?: (m: string) => void): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', [path.join(labDir(), 'build-host-patches.sh'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
      for (const l of d.toString().split('\n')) if (l.startsWith('[host-patches')) log?.(l);
    });
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * Swaps the guest's stock host modules for `mods` (shipped to /lab/files/<entry> by the runner): the fabrics options
 * the new nvme-fabrics lists, or a HostPatchesError naming the module and the step the guest refused it at.
 */
export async function loadHostModules(runner: HostRunner, mods: HostModules): Promise<string> {
  const r = await runner.exec(['lab-host-modules', `/lab/files/${path.basename(mods.dir)}`], 120_000);
  const failed = /^HOST-MODULES-FAILED (\S+) (\S+) (.*)$/m.exec(r.stdout);
  if (failed !== null) throw new HostPatchesError(`host-patches: ${mods.series}: ${failed[1] ?? '?'}.ko refused by the guest's kernel (step: load, ${failed[2] ?? '?'}): ${failed[3] ?? ''}`);
  if (r.code !== 0 || !r.stdout.includes('HOST-MODULES-LOADED')) throw new HostPatchesError(`host-patches: ${mods.series}: the guest did not load the modules (step: load): exit ${r.code}: ${(r.stderr || r.stdout).trim().split('\n').pop() ?? ''}`);
  return r.stdout.trim().split('\n').pop() ?? '';
}
