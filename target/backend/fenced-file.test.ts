// The write fence at the storage call (docs/gateway-groups.md, "Fencing at the storage call"): real files, a real
// writer thread. A write answered with success is in the file; one refused with FENCED is not; the plain pool path,
// given the same run, lets every write land (what made an older write land after the new owner's).
import { Buffer } from 'node:buffer';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { NvmOpcode, Status, encodeRwCmd, sglInCapsule } from '../../protocol/index.js';
import { TargetNamespace } from '../core/index.js';
import { HostQueue, SUBNQN, makeTarget } from '../core/testing/fake-transport.js';
import { FENCED, FileBackend, WriteFence, WriterThreadError } from './index.js';

const BLOCK = 4096;
const COUNT = 2000;
const dir = mkdtempSync(path.join(tmpdir(), 'fenced-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Block i's contents: its number in every 32-bit word (never zero). */
function blockData(i: number): Buffer {
  const b = Buffer.alloc(BLOCK);
  for (let o = 0; o < BLOCK; o += 4) b.writeUInt32LE(i + 1, o);
  return b;
}

/**
 * COUNT distinct blocks queued a few per event-loop turn; the deadline moves to the past at the first completion,
 * while most are still queued. Returns each write's outcome: 'ok', the error code, once every callback ran.
 */
async function writeAll(b: FileBackend, fence: WriteFence): Promise<string[]> {
  const outcome: string[] = new Array<string>(COUNT);
  let left = COUNT;
  let all!: () => void;
  const done = new Promise<void>((resolve) => (all = resolve));
  for (let i = 0; i < COUNT; i++) {
    if (i % 10 === 0) await new Promise((r) => setImmediate(r));
    b.write(i * BLOCK, [blockData(i)], false, (err) => {
      fence.set(Date.now() - 1);
      outcome[i] = err === null ? 'ok' : String((err as NodeJS.ErrnoException).code);
      if (--left === 0) all();
    });
  }
  await done;
  return outcome;
}

/** Which blocks of the file hold their write ('ok'), and which are still zero ('zero'); anything else is 'other'. */
function onDisk(file: string): string[] {
  const bytes = readFileSync(file);
  return Array.from({ length: COUNT }, (_, i) => {
    const got = bytes.subarray(i * BLOCK, (i + 1) * BLOCK);
    if (got.equals(blockData(i))) return 'ok';
    return got.every((x) => x === 0) ? 'zero' : 'other';
  });
}

describe('FileBackend with a write fence', () => {
  it('a write that reported success is on disk, one refused with FENCED is not, and both occur', async () => {
    const file = path.join(dir, 'fenced.img');
    const fence = new WriteFence();
    const b = await FileBackend.open({ path: file, size: COUNT * BLOCK, fence });
    const outcome = await writeAll(b, fence);
    await b.close();
    const disk = onDisk(file);
    const ok = outcome.filter((o) => o === 'ok').length;
    const refused = outcome.filter((o) => o === FENCED).length;
    expect(ok + refused).toBe(COUNT);
    expect(ok).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
    for (let i = 0; i < COUNT; i++) expect([i, disk[i]]).toEqual([i, outcome[i] === 'ok' ? 'ok' : 'zero']);
  });

  it('the same run on the plain pool path: every write lands, the moved deadline notwithstanding', async () => {
    const file = path.join(dir, 'plain.img');
    const fence = new WriteFence();
    const b = await FileBackend.open({ path: file, size: COUNT * BLOCK });
    const outcome = await writeAll(b, fence);
    await b.close();
    expect(fence.passed()).toBe(true);
    // What the fenced run asserts cannot hold here: nothing refused, so a late write is never kept out.
    expect(outcome.filter((o) => o === FENCED).length).toBe(0);
    expect(onDisk(file).every((d) => d === 'ok')).toBe(true);
  });

  it('Write Zeroes and FUA writes go through the fence too; close drains, later writes fail typed', async () => {
    const file = path.join(dir, 'zeroes.img');
    const fence = new WriteFence();
    const b = await FileBackend.open({ path: file, size: 4 * BLOCK, fence });
    expect(b.fenced).toBe(true);
    const call = (f: (cb: (err: Error | null) => void) => void): Promise<Error | null> => new Promise((r) => f(r));
    expect(await call((cb) => b.write(0, [blockData(0), blockData(1)], true, cb))).toBeNull();
    expect(await call((cb) => b.writeZeroes(BLOCK, BLOCK, false, cb))).toBeNull();
    fence.set(Date.now() - 1);
    expect(await call((cb) => b.writeZeroes(0, BLOCK, false, cb))).toMatchObject({ code: FENCED });
    expect(await call((cb) => b.write(2 * BLOCK, [blockData(2)], true, cb))).toMatchObject({ code: FENCED });
    // Reads stay on the pool and are not fenced: what they return is current.
    const read = await new Promise<Buffer[]>((r) => b.read(0, 2 * BLOCK, (_e, d) => r(d)));
    expect(Buffer.concat(read).equals(Buffer.concat([blockData(0), Buffer.alloc(BLOCK)]))).toBe(true);
    fence.set(Infinity);
    const pending = call((cb) => b.write(3 * BLOCK, [blockData(3)], false, cb));
    await b.close();
    expect(await pending).toBeNull();
    expect(await call((cb) => b.write(0, [blockData(0)], false, cb))).toBeInstanceOf(WriterThreadError);
    expect(readFileSync(file).subarray(3 * BLOCK).equals(blockData(3))).toBe(true);
  });

  it('a write the fence refused completes with ANA Inaccessible, not Write Fault, while the port itself is not fenced', async () => {
    const fence = new WriteFence();
    const b = await FileBackend.open({ path: path.join(dir, 'io.img'), size: 16 * BLOCK, fence });
    const t = makeTarget({}, {});
    t.subsys.addNamespace(new TargetNamespace(SUBNQN, { nsid: 1, blockSize: 4096, backend: { type: 'file', path: b.path } }, b));
    const admin = new HostQueue(t.target, t.port);
    const cntlid = admin.connectAndEnable();
    const io = new HostQueue(t.target, t.port);
    expect(io.connect({ qid: 1, cntlid }).status).toBe(0);
    const write = async (cid: number): Promise<number> => {
      io.submit(encodeRwCmd({ opcode: NvmOpcode.WRITE, cid, nsid: 1, slba: 2n, nlb: 1, sgl: sglInCapsule(BLOCK) }), blockData(2));
      while (io.transport.completionsFor(cid).length === 0) await new Promise((r) => setTimeout(r, 2));
      return io.transport.completionsFor(cid)[0]?.status ?? -1;
    };
    expect(await write(70)).toBe(0);
    fence.set(Date.now() - 1);
    expect(t.port.anaValidUntil).toBe(Infinity);
    expect(await write(71)).toBe(Status.ANA_INACCESSIBLE);
    expect(t.subsys.namespaces.get(1)?.counters).toMatchObject({ errors: 0, fenced: 1, writes: 1 });
    await b.close();
  });
});
