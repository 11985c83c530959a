// A worker process's write fence (docs/gateway-groups.md, "Fencing at the storage call"): a forked worker cannot see
// the primary's SharedArrayBuffer, so WorkerRuntime keeps its own, set from the port specs and every 'ana-deadline'.
// A gateway's file namespace (NsOpen fenced) writes through it; any other file namespace writes as before.
import { Buffer } from 'node:buffer';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { FENCED, FileBackend } from '../backend/index.js';
import type { NsSpec } from './messages.js';
import { WorkerRuntime } from './worker.js';

const dir = mkdtempSync(path.join(tmpdir(), 'worker-fence-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function runtimeWith(fenced: boolean, until: number | null): Promise<{ rt: WorkerRuntime; backend: FileBackend }> {
  const file = path.join(dir, `ns-${String(fenced)}.img`);
  await (await FileBackend.open({ path: file, size: 1 << 20 })).close();
  const rt = new WorkerRuntime(0, pino({ level: 'silent' }), () => undefined);
  const ns: NsSpec = { config: { nsid: 1, backend: { type: 'file', path: file } }, open: { kind: 'file', path: file, readOnly: false, fenced }, enabled: true };
  const port = { config: { id: 1, addr: '127.0.0.1', port: 0 }, anaChangeCount: '0', anaValidUntil: until };
  await rt.init([port], [{ config: { nqn: 'nqn.2024-01.test:fence', allowAnyHost: true }, faults: {}, namespaces: [ns] }]);
  const backend = rt.core.subsystems.get('nqn.2024-01.test:fence')?.namespaces.get(1)?.backend as FileBackend;
  return { rt, backend };
}

const write = (b: FileBackend): Promise<Error | null> => new Promise((r) => b.write(0, [Buffer.alloc(4096, 7)], false, r));

describe('WorkerRuntime write fence', () => {
  it("a gateway's file namespace is refused once the deadline from 'ana-deadline' passed, and writes again after a renewal", async () => {
    const { rt, backend } = await runtimeWith(true, Date.now() + 60_000);
    expect(backend.fenced).toBe(true);
    expect(await write(backend)).toBeNull();
    await rt.handle({ t: 'ana-deadline', until: Date.now() - 1 }, undefined);
    expect(await write(backend)).toMatchObject({ code: FENCED });
    await rt.handle({ t: 'ana-deadline', until: null }, undefined);
    expect(await write(backend)).toBeNull();
    await rt.stop();
  });

  it('the deadline a port spec carries fences from init; a file namespace that is not fenced ignores it', async () => {
    const a = await runtimeWith(true, Date.now() - 1);
    expect(await write(a.backend)).toMatchObject({ code: FENCED });
    await a.rt.stop();
    const b = await runtimeWith(false, Date.now() - 1);
    expect(b.backend.fenced).toBe(false);
    expect(await write(b.backend)).toBeNull();
    await b.rt.stop();
  });
});
