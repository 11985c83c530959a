// SIGKILL durability check (issue 6 item 3): a file namespace served by `nvme-tcp target` in a child process, a
// writer doing stamped 4 KiB writes (FUA, or plain writes made durable by a later Flush), the target killed with
// SIGKILL at a random moment and restarted on the same port, then every block read back: each one whose write was
// acknowledged durable must hold that generation (or a newer one that was in flight), with a valid checksum.
// What it proves: the target acknowledges FUA writes and Flush only after the data reached the kernel
// (fdatasync/fsync), and a crash at any point loses nothing acknowledged. A SIGKILL does not drop the page cache,
// so it does not emulate power loss; that would need the lab VM.
import { Buffer } from 'node:buffer';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, open as openFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { connect, type Controller } from '../../initiator/index.js';
import { crc32c } from '../../protocol/index.js';
import { Rng } from './mutate.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const NQN = 'nqn.2024-01.io.nvme-ts:durability';
const BS = 4096;
const MAGIC = 0x42525544; // "DURB"

export interface DurabilityOptions {
  cycles: number;
  /** Blocks of the namespace the writer uses (4 KiB each). */
  blocks?: number;
  /** Writer runs this long (random in the range, ms) before the SIGKILL. */
  runMs?: [number, number];
  /** Concurrent writers. */
  qd?: number;
  /** Fraction of writes sent with FUA (the rest become durable through Flush). */
  fuaRatio?: number;
  seed?: number;
  /** Negative control: after each kill, zero this many acknowledged-durable blocks in the file (a lost write). */
  sabotageBlocks?: number;
  onCycle?: (c: CycleReport) => void;
}

export interface CycleReport {
  cycle: number;
  killAfterMs: number;
  writesAcked: number;
  durableWrites: number;
  inFlightAtKill: number;
  verified: number;
  failures: number;
  restartMs: number;
}

export interface DurabilityFailure {
  cycle: number;
  lba: number;
  durableGen: number;
  allowed: number[];
  found: string;
}

export interface DurabilityResult {
  seed: number;
  cycles: number;
  writesAcked: number;
  durableWrites: number;
  /** Blocks checked after a restart that had an acknowledged-durable generation. */
  blocksVerified: number;
  failures: DurabilityFailure[];
  /** LBAs zeroed by the negative control (sabotageBlocks), per cycle. */
  sabotaged: Array<{ cycle: number; lba: number }>;
  restartMsAvg: number;
  reports: CycleReport[];
}

function makeBlock(lba: number, gen: number): Buffer {
  const b = Buffer.allocUnsafe(BS);
  b.writeUInt32LE(MAGIC, 0);
  b.writeUInt32LE(lba, 4);
  b.writeUInt32LE(gen, 8);
  let x = (Math.imul(lba + 1, 0x9e3779b1) ^ Math.imul(gen, 0x85ebca6b)) >>> 0 || 1;
  for (let i = 16; i < BS; i += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b.writeUInt32LE(x >>> 0, i);
  }
  b.writeUInt32LE(crc32c(b.subarray(16)), 12);
  return b;
}

/** The generation a block holds: 0 for never written (all zero), -1 for anything invalid (torn, wrong LBA, bad CRC). */
function readStamp(b: Buffer, lba: number): { gen: number; why: string } {
  if (b.every((x) => x === 0)) return { gen: 0, why: 'zeros' };
  if (b.readUInt32LE(0) !== MAGIC) return { gen: -1, why: 'no magic' };
  if (b.readUInt32LE(4) !== lba) return { gen: -1, why: `stamp for LBA ${b.readUInt32LE(4)}` };
  if (crc32c(b.subarray(16)) !== b.readUInt32LE(12)) return { gen: -1, why: `bad crc (gen ${b.readUInt32LE(8)})` };
  return { gen: b.readUInt32LE(8), why: `gen ${b.readUInt32LE(8)}` };
}

interface RunningTarget {
  child: ChildProcess;
  port: number;
  exited: Promise<void>;
}

/** `nvme-tcp target` on a file namespace; resolves once it prints its listening address. */
async function startTarget(file: string, port: number): Promise<RunningTarget> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO, 'cli', 'main.ts'), 'target', '--file', `${file}:64M`, '--block-size', '4096', '--nqn', NQN, '--listen', `127.0.0.1:${port}`, '--log-level', 'warn'], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  let out = '';
  const bound = await new Promise<number>((resolve, reject) => {
    const onData = (s: Buffer): void => {
      out += s.toString();
      const m = /listening on 127\.0\.0\.1:(\d+)/.exec(out);
      if (m !== null) resolve(Number(m[1]));
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    void exited.then(() => reject(new Error(`target exited before listening: ${out}`)));
    setTimeout(() => reject(new Error(`target did not start within 20 s: ${out}`)), 20_000).unref();
  });
  return { child, port: bound, exited };
}

export async function runDurability(opts: DurabilityOptions): Promise<DurabilityResult> {
  const seed = opts.seed ?? (Date.now() & 0x7fffffff);
  const rng = new Rng(seed);
  const blocks = opts.blocks ?? 4096;
  const [minRun, maxRun] = opts.runMs ?? [150, 600];
  const qd = opts.qd ?? 8;
  const fuaRatio = opts.fuaRatio ?? 0.5;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'nvme-durability-'));
  const file = path.join(dir, 'ns.img');
  /** Highest generation acknowledged durable per LBA (FUA completion, or a Flush completed after the write). */
  const durable = new Uint32Array(blocks);
  /** Generations written after it that may or may not have reached the file (acked-unflushed or in flight). */
  const maybe = new Map<number, number[]>();
  let nextGen = 1;
  const failures: DurabilityFailure[] = [];
  const sabotaged: Array<{ cycle: number; lba: number }> = [];
  const reports: CycleReport[] = [];
  let writesAcked = 0;
  let durableWrites = 0;
  let blocksVerified = 0;
  let restartMsTotal = 0;
  let port = 0;
  let target: RunningTarget | undefined;
  let ctrl: Controller | undefined;
  const open = async (): Promise<Controller> =>
    connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, nr_io_queues: 2, duplicate_connect: true, reconnect_delay: 0.1, ctrl_loss_tmo: 5, io_timeout: 5 });
  const markDurable = (lba: number, gen: number): void => {
    if (gen <= (durable[lba] as number)) return;
    durable[lba] = gen;
    durableWrites++;
    const m = maybe.get(lba);
    if (m !== undefined) {
      const rest = m.filter((g) => g > gen);
      if (rest.length === 0) maybe.delete(lba);
      else maybe.set(lba, rest);
    }
  };
  try {
    // Start 0 is the first boot; start N verifies what kill N left behind.
    for (let cycle = 0; cycle <= opts.cycles; cycle++) {
      const t0 = performance.now();
      target = await startTarget(file, port);
      port = target.port;
      ctrl = await open();
      const restartMs = performance.now() - t0;
      if (cycle > 0) restartMsTotal += restartMs;
      const ns = ctrl.namespace(1);

      // Verify every block that has an acknowledged-durable generation or a possible newer one.
      let verified = 0;
      let cycleFailures = 0;
      const toCheck = [...new Set([...durable.keys()].filter((l) => (durable[l] as number) > 0).concat([...maybe.keys()]))].sort((a, b) => a - b);
      for (let i = 0; i < toCheck.length; i += 64) {
        const lbas = toCheck.slice(i, i + 64);
        await Promise.all(
          lbas.map(async (lba) => {
            const d = durable[lba] as number;
            const allowed = [d, ...(maybe.get(lba) ?? [])];
            const got = readStamp(await ns.read(BigInt(lba), 1), lba);
            if (d > 0) verified++;
            if (!allowed.includes(got.gen)) {
              cycleFailures++;
              failures.push({ cycle, lba, durableGen: d, allowed, found: got.why });
            } else if (got.gen > 0) {
              durable[lba] = got.gen;
            }
            maybe.delete(lba);
          }),
        );
      }
      blocksVerified += verified;
      await ns.flush();
      if (cycle > 0) {
        const r = reports[cycle - 1] as CycleReport;
        r.verified = verified;
        r.failures = cycleFailures;
        r.restartMs = restartMs;
        opts.onCycle?.(r);
      }
      if (cycle === opts.cycles) break;

      // Write until the kill.
      const killAfterMs = minRun + rng.int(Math.max(1, maxRun - minRun));
      let killed = false;
      let acked = 0;
      const durableBefore = durableWrites;
      const inFlight = new Set<number>();
      let unflushed: Array<{ lba: number; gen: number }> = [];
      const writer = async (): Promise<void> => {
        while (!killed) {
          let lba = rng.int(blocks);
          while (inFlight.has(lba)) lba = rng.int(blocks);
          const gen = nextGen++;
          const fua = rng.chance(fuaRatio);
          inFlight.add(lba);
          const m = maybe.get(lba);
          if (m === undefined) maybe.set(lba, [gen]);
          else m.push(gen);
          try {
            await ns.write(BigInt(lba), makeBlock(lba, gen), { fua, hctx: rng.int(2) });
            if (killed) break;
            acked++;
            if (fua) markDurable(lba, gen);
            else unflushed.push({ lba, gen });
          } catch {
            break;
          } finally {
            inFlight.delete(lba);
          }
        }
      };
      const flusher = async (): Promise<void> => {
        while (!killed) {
          await new Promise((r) => setTimeout(r, 2 + rng.int(15)));
          const batch = unflushed;
          unflushed = [];
          try {
            await ns.flush();
            if (killed) break;
            for (const w of batch) markDurable(w.lba, w.gen);
          } catch {
            break;
          }
        }
      };
      const workers = [...Array.from({ length: qd }, () => writer()), flusher()];
      await new Promise((r) => setTimeout(r, killAfterMs));
      // SIGKILL first, then stop counting: anything that completes after this point is not counted as acknowledged.
      target.child.kill('SIGKILL');
      killed = true;
      const inFlightAtKill = inFlight.size;
      await target.exited;
      const c = ctrl;
      ctrl = undefined;
      await c.disconnect().catch(() => undefined);
      await Promise.all(workers);
      if ((opts.sabotageBlocks ?? 0) > 0) {
        const candidates = [...durable.keys()].filter((l) => (durable[l] as number) > 0 && !maybe.has(l));
        const fh = await openFile(file, 'r+');
        try {
          for (let i = 0; i < (opts.sabotageBlocks ?? 0) && candidates.length > 0; i++) {
            const lba = candidates.splice(rng.int(candidates.length), 1)[0] as number;
            await fh.write(Buffer.alloc(BS), 0, BS, lba * BS);
            sabotaged.push({ cycle: cycle + 1, lba });
          }
        } finally {
          await fh.close();
        }
      }
      writesAcked += acked;
      reports.push({ cycle: cycle + 1, killAfterMs, writesAcked: acked, durableWrites: durableWrites - durableBefore, inFlightAtKill, verified: 0, failures: 0, restartMs: 0 });
    }
  } finally {
    if (ctrl !== undefined) await ctrl.disconnect().catch(() => undefined);
    if (target !== undefined) {
      target.child.kill('SIGKILL');
      await target.exited;
    }
    await rm(dir, { recursive: true, force: true });
  }
  return {
    seed,
    cycles: reports.length,
    writesAcked,
    durableWrites,
    blocksVerified,
    failures,
    sabotaged,
    restartMsAvg: reports.length > 0 ? restartMsTotal / reports.length : 0,
    reports,
  };
}
