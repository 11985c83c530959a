// `nvme-tcp connect --hold` with io workers in a child process, then `nvme-tcp queues --set-worker QID=W` from another
// process: the held connection moves the queue, the table says so, bad placements change nothing and exit 2, and the
// holder cleans up its state files on SIGTERM. The state directory is a private TMPDIR, so runs never meet.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { startInProcessTarget } from '../../harness/nvme.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const MAIN = path.join(ROOT, 'cli', 'main.ts');
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

function cli(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['--import', 'tsx', MAIN, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.once('exit', (code) => resolve({ code, out, err }));
  });
}

/** The owner column of one qid in a queue table. */
function ownerOf(table: string, qid: number): string | undefined {
  const lines = table.split('\n');
  const head = lines.find((l) => l.startsWith('qid'));
  if (head === undefined) return undefined;
  const cols = head.split(/\s{2,}/);
  const row = lines.find((l) => l.split(/\s{2,}/)[0] === String(qid) && l !== head);
  return row?.split(/\s{2,}/)[cols.indexOf('owner')];
}

describe('nvme-tcp queues --set-worker on a held connection', () => {
  it('moves a queue between io workers; unknown queue or worker: one line, exit 2, nothing changes', async () => {
    const target = await startInProcessTarget({ size: '8M' });
    cleanups.push(() => target.stop());
    const dir = await mkdtemp(path.join(os.tmpdir(), 'set-worker-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const env = { ...process.env, TMPDIR: dir };
    const holder: ChildProcess = spawn(
      process.execPath,
      ['--import', 'tsx', MAIN, 'connect', '-a', target.addr, '-s', String(target.port), '-n', target.nqn, '--nr-io-queues', '2', '--io-workers', '2', '--hold'],
      { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const exited = new Promise<number | null>((r) => holder.once('exit', (c) => r(c)));
    cleanups.push(async () => {
      holder.kill('SIGKILL');
      await exited;
    });
    let held = '';
    await new Promise<void>((resolve, reject) => {
      holder.stdout?.on('data', (d: Buffer) => {
        held += d.toString();
        if (held.includes('holding the connection')) resolve();
      });
      holder.once('exit', (c) => reject(new Error(`holder exited ${c}: ${held}`)));
    });
    // Default placement: queue q on worker (q-1) mod 2.
    expect(ownerOf(held, 1)).toBe('worker 0');
    expect(ownerOf(held, 2)).toBe('worker 1');

    const moved = await cli(['queues', '--set-worker', '1=1'], env);
    expect(moved.err).toBe('');
    expect(moved.code).toBe(0);
    expect(moved.out).toMatch(/queue 1 placed on worker 1/);
    expect(ownerOf(moved.out, 1)).toBe('worker 1');

    for (const [arg, re] of [
      ['9=0', /queue|qid/i],
      ['1=7', /worker/i],
      ['x', /--set-worker x: expected QID=W/],
    ] as const) {
      const bad = await cli(['queues', '--set-worker', arg], env);
      expect(bad.code, arg).toBe(2);
      expect(bad.err).toMatch(re);
      expect(bad.err.trim().split('\n')).toHaveLength(1);
    }
    const back = await cli(['queues', '--set-worker', '1=-1'], env);
    expect(back.code).toBe(0);
    expect(ownerOf(back.out, 1)).toBe('worker 0');
    // Nothing else moved while the bad requests were refused.
    expect(ownerOf(back.out, 2)).toBe('worker 1');

    holder.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect((await readdir(path.join(dir, 'nvme-tcp-ts'))).filter((f) => f.startsWith('held-'))).toEqual([]);
  }, 60_000);
});
