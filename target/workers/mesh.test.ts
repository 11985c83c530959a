// PeerMesh over real connected Unix sockets (a listener in a temp directory, as the primary makes them): batches go
// peer to peer and complete on the answer; a link that breaks while its peer is still a member sends what waited on
// it, and every later batch, through the relay until the primary reports the peer gone; a member without a link is
// always relayed.
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { InvRange } from './coherence.js';
import { PeerMesh } from './mesh.js';
import { until } from '../../harness/until.js';

const dir = mkdtempSync(path.join(tmpdir(), 'mesh-test-'));
const server = net.createServer({ pauseOnConnect: true });
const ready = new Promise<void>((r) => server.listen(path.join(dir, 's'), () => r()));
afterAll(() => {
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

async function pair(): Promise<[net.Socket, net.Socket]> {
  await ready;
  const accepted = new Promise<net.Socket>((r) => server.once('connection', r));
  const c = net.connect(path.join(dir, 's'));
  c.pause();
  await new Promise((r) => c.once('connect', r));
  return [c, await accepted];
}

/** A mesh whose invalidations and relayed batches are recorded; relayed batches complete when `finishRelays` runs. */
function mesh(): { m: PeerMesh; got: InvRange[][]; relayed: InvRange[][]; finishRelays: () => void } {
  const got: InvRange[][] = [];
  const relayed: InvRange[][] = [];
  let pending: (() => void)[] = [];
  const m = new PeerMesh(
    (r) => got.push(r),
    (r, done) => {
      relayed.push(r);
      pending.push(done);
    },
  );
  return {
    m,
    got,
    relayed,
    finishRelays: () => {
      const p = pending;
      pending = [];
      for (const d of p) d();
    },
  };
}

/** Time for a reply that must not come (a wait for one that must is until()). */
const tick = (ms = 20): Promise<void> => new Promise((r) => setTimeout(r, ms));
const R1: InvRange[] = [['nqn.2024-01.io.test:a', 1, 4096, 512]];
const R2: InvRange[] = [['nqn.2024-01.io.test:a', 1, 0, 1 << 20], ['nqn.2024-01.io.test:b', 3, 8192, 4096]];

describe('PeerMesh', () => {
  it('a batch reaches the peer, which drops it and answers; only then is it done (both directions)', async () => {
    const [x, y] = await pair();
    const a = mesh();
    const b = mesh();
    a.m.add(1, x);
    b.m.add(0, y);
    let done = 0;
    a.m.send(R2, () => done++);
    expect(done).toBe(0);
    await until(() => done === 1, 5000, "the peer's answer");
    expect(b.got).toEqual([R2]);
    expect(done).toBe(1);
    b.m.send(R1, () => done++);
    await until(() => done === 2, 5000, "the peer's answer");
    expect(a.got).toEqual([R1]);
    expect(done).toBe(2);
    expect(a.m.counts).toEqual({ direct: 1, relayed: 0 });
    expect(a.relayed).toEqual([]);
    a.m.close();
    b.m.close();
  });

  it('a link that breaks with answers outstanding asks for them through the relay, and relays until the peer is gone', async () => {
    const [x, y] = await pair();
    const a = mesh();
    a.m.add(1, x);
    // The far end reads the batch and never answers; then its link breaks (the peer may still be alive).
    const frames: string[] = [];
    y.setEncoding('utf8');
    y.on('data', (d: string) => frames.push(d));
    y.resume();
    let done = 0;
    a.m.send(R1, () => done++);
    await until(() => frames.join('').includes('"i":'), 5000, 'the batch at the far end');
    expect(frames.join('')).toMatch(/^\{"s":\d+,"h":\[\]\}\n\{"i":\d+,"r":/);
    y.destroy();
    await until(() => a.relayed.length > 0, 5000, 'the relay');
    expect(a.relayed).toEqual([R1]);
    expect(done).toBe(0);
    a.finishRelays();
    expect(done).toBe(1);
    // Still a member without a link: the next batch goes through the relay too.
    a.m.send(R2, () => done++);
    expect(a.relayed).toEqual([R1, R2]);
    a.finishRelays();
    expect(done).toBe(2);
    // The primary saw it exit: nothing is left to ask, so a batch completes at once.
    a.m.gone(1);
    a.m.send(R1, () => done++);
    expect(done).toBe(3);
    expect(a.m.counts).toEqual({ direct: 2, relayed: 2 });
  });

  it('a member without a link is always relayed; a peer gone with answers outstanding completes them', async () => {
    const a = mesh();
    a.m.add(1, undefined);
    let done = 0;
    a.m.send(R1, () => done++);
    expect(a.relayed).toEqual([R1]);
    a.finishRelays();
    expect(done).toBe(1);

    const [x, y] = await pair();
    const b = mesh();
    b.m.add(2, x);
    y.resume(); // reads, never answers
    b.m.send(R2, () => done++);
    await tick();
    expect(done).toBe(1);
    b.m.gone(2);
    expect(done).toBe(2);
    expect(b.relayed).toEqual([]);
    y.destroy();
  });

  it('holds: a piece is cached only once every peer recorded it; a later link learns them in its sync; gone forgets them', async () => {
    const K = 'nqn.2024-01.io.test:a\n1\n/dev/shm/x';
    const a = mesh();
    const b = mesh();
    // No peers yet: granted at once, and recorded for links made later.
    expect(a.m.hold(K, 3, () => undefined)).toBe(true);
    const [x, y] = await pair();
    let aSynced = false;
    let bSynced = false;
    a.m.add(1, x, () => (aSynced = true));
    b.m.add(0, y, () => (bSynced = true));
    expect(aSynced || bSynced).toBe(false);
    await until(() => aSynced && bSynced, 5000, 'both syncs');
    expect([aSynced, bSynced]).toEqual([true, true]);
    expect(b.m.peersHold(K, 3, 3)).toBe(true);
    expect(b.m.peersHold(K, 0, 2)).toBe(false);
    expect(b.m.peersHold('other', 3, 3)).toBe(false);
    expect(a.m.peersHold(K, 0, 100)).toBe(false);
    // With a peer: answered by it, only then granted.
    let granted: boolean | undefined;
    expect(b.m.hold(K, 7, (ok) => (granted = ok))).toBeUndefined();
    expect(granted).toBeUndefined();
    await until(() => granted !== undefined, 5000, "the peer's answer to the hold");
    expect(granted).toBe(true);
    expect(a.m.peersHold(K, 5, 9)).toBe(true);
    // The peer exits: its holds go with it.
    a.m.gone(1);
    expect(a.m.peersHold(K, 7, 7)).toBe(false);
    b.m.close();
  });

  it('holds: a link that breaks refuses holds in flight and every new one, and makes every piece count as held', async () => {
    const K = 'k';
    const [x, y] = await pair();
    const a = mesh();
    a.m.add(1, x);
    y.resume(); // reads, never answers
    let granted: boolean | undefined;
    expect(a.m.hold(K, 1, (ok) => (granted = ok))).toBeUndefined();
    await tick();
    expect(granted).toBeUndefined();
    y.destroy();
    await until(() => granted !== undefined, 5000, 'the hold refused');
    expect(granted).toBe(false);
    expect(a.m.hold(K, 2, () => undefined)).toBe(false);
    expect(a.m.peersHold(K, 9, 9)).toBe(true);
    a.m.gone(1);
    expect(a.m.peersHold(K, 9, 9)).toBe(false);
    expect(a.m.hold(K, 2, () => undefined)).toBe(true);
  });

  it('a line that is not a frame closes that link; what waited on it goes through the relay', async () => {
    const [x, y] = await pair();
    const a = mesh();
    a.m.add(1, x);
    y.resume();
    let done = 0;
    a.m.send(R1, () => done++);
    y.write('{"a":\n');
    await until(() => x.destroyed, 5000, 'the link closed');
    expect(x.destroyed).toBe(true);
    expect(a.relayed).toEqual([R1]);
    a.finishRelays();
    expect(done).toBe(1);
    y.destroy();
  });
});
