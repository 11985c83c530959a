// Persist Through Power Loss (NVMe Base 2.0 §8.19.3) with a real target process: reservations with PTPL on survive a
// restart, with PTPL off they are gone after one, and a SIGKILL at a random moment of a stream of Register-replace
// commands leaves on disk either the key before or the key after the command in flight, never anything else.
import { Buffer } from 'node:buffer';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { connect, type Controller } from '../../initiator/index.js';
import { NvmeStatusError } from '../../protocol/errors.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const NQN = 'nqn.2024-01.io.test:resv-ptpl';
const A = { hostnqn: 'nqn.2014-08.org.nvmexpress:uuid:aaaaaaaa-1111-4000-8000-000000000001', hostid: 'aaaaaaaa-1111-4000-8000-000000000001' };
const B = { hostnqn: 'nqn.2014-08.org.nvmexpress:uuid:bbbbbbbb-1111-4000-8000-000000000002', hostid: 'bbbbbbbb-1111-4000-8000-000000000002' };

const cleanups = cleanupAfterEach();

interface Target {
  child: ChildProcess;
  port: number;
  exited: Promise<unknown>;
}

async function start(dir: string): Promise<Target> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'cli', 'main.ts'), 'target', '--config', path.join(dir, 'target.json'), '--state-dir', dir, '--log-level', 'warn'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out: string[] = [];
  child.stdout?.on('data', (d: Buffer) => out.push(d.toString()));
  child.stderr?.on('data', (d: Buffer) => out.push(d.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  const deadline = Date.now() + 60_000;
  for (;;) {
    const port = /listening on 127\.0\.0\.1:(\d+)/.exec(out.join(''))?.[1];
    if (port !== undefined) return { child, port: Number(port), exited };
    if (child.exitCode !== null) throw new Error(`target exited ${child.exitCode}: ${out.join('')}`);
    if (Date.now() > deadline) throw new Error(`target did not start: ${out.join('')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function host(t: Target, who: typeof A): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: t.port, nqn: NQN, ...who, nr_io_queues: 1, duplicate_connect: true, ctrl_loss_tmo: 0 });
  cleanups.push(() => c.disconnect());
  return c;
}

async function stop(t: Target, sig: 'SIGTERM' | 'SIGKILL'): Promise<void> {
  t.child.kill(sig);
  await t.exited;
}

async function dir(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), 'resv-ptpl-'));
  cleanups.push(() => rm(d, { recursive: true, force: true }));
  const cfg = { ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [{ nqn: NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] }] };
  await writeFile(path.join(d, 'target.json'), JSON.stringify(cfg));
  return d;
}

describe('reservations across target restarts', () => {
  it('PTPL on: registrations, the holder and the type survive; PTPL off: a restart clears them', async () => {
    const d = await dir();
    let t = await start(d);
    let a = await host(t, A);
    let b = await host(t, B);
    await a.namespace(1).reservation.register({ nrkey: 0x11n, cptpl: 3 });
    await b.namespace(1).reservation.register({ nrkey: 0x22n });
    await a.namespace(1).reservation.acquire({ crkey: 0x11n, rtype: 1 });
    const before = await b.namespace(1).reservation.report();
    expect(JSON.parse(await readFile(path.join(d, 'reservations.json'), 'utf8'))).toMatchObject({ version: 1 });
    await stop(t, 'SIGTERM');

    t = await start(d);
    a = await host(t, A);
    b = await host(t, B);
    const after = await b.namespace(1).reservation.report();
    expect(after).toEqual(before);
    expect(after.ptpls).toBe(true);
    await expect(b.namespace(1).write(0, Buffer.alloc(512))).rejects.toMatchObject({ sc: 0x83 });
    // PTPL cleared (Register with CPTPL 10b): the next restart starts with no reservation.
    await a.namespace(1).reservation.register({ nrkey: 0x11n, cptpl: 2 });
    await stop(t, 'SIGTERM');
    t = await start(d);
    b = await host(t, B);
    const cleared = await b.namespace(1).reservation.report();
    expect([cleared.rtype, cleared.regctls.length, cleared.ptpls]).toEqual([0, 0, false]);
    await b.namespace(1).write(0, Buffer.alloc(512));
  }, 90_000);

  it('SIGKILL at random moments of a replace stream leaves the old or the new key, never a torn state', async () => {
    const d = await dir();
    const seed = Date.now();
    let rnd = seed % 2147483647;
    const next = (): number => (rnd = (rnd * 48271) % 2147483647) / 2147483647;
    let t = await start(d);
    let a = await host(t, A);
    await a.namespace(1).reservation.register({ nrkey: 1n, cptpl: 3 });
    let acked = 1n;
    for (let round = 0; round < 3; round++) {
      let stopLoop = false;
      const loop = (async () => {
        for (let k = acked; !stopLoop; k++) {
          try {
            await a.namespace(1).reservation.register({ rrega: 2, crkey: k, nrkey: k + 1n });
            acked = k + 1n;
          } catch (e) {
            if (e instanceof NvmeStatusError) throw e;
            return;
          }
        }
      })();
      await new Promise((r) => setTimeout(r, 30 + Math.floor(next() * 300)));
      t.child.kill('SIGKILL');
      await t.exited;
      stopLoop = true;
      // The command in flight fails with the connection; disconnecting makes that immediate.
      await a.disconnect().catch(() => undefined);
      await loop;
      const last = acked;
      t = await start(d);
      a = await host(t, A);
      const rep = await a.namespace(1).reservation.report();
      const key = rep.regctls[0]?.rkey;
      expect([last, last + 1n], `seed ${seed} round ${round}`).toContain(key);
      acked = key as bigint;
    }
    expect(acked).toBeGreaterThan(1n);
  }, 90_000);
});
