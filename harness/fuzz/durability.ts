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
import { connect, type Controller, type Namespace } from '../../initiator/index.js';
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

/**
 * The host's connect to the target just started. Linux answered one such connect on 127.0.0.1 with EHOSTUNREACH on a
 * loaded CI machine (the target was listening); the check is about what the file holds, so a connect refused at the
 * socket is tried again, a few times, before it counts.
 */
async function connectOnLoopback(port: number): Promise<Controller> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, nr_io_queues: 2, duplicate_connect: true, reconnect_delay: 0.1, ctrl_loss_tmo: 5, io_timeout: 5 });
    } catch (e) {
      const code = ((e as Error).cause as { code?: unknown } | undefined)?.code;
      if (attempt >= 5 || (code !== 'EHOSTUNREACH' && code !== 'ECONNREFUSED')) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** What the target acknowledged: per LBA the durable generation and the newer ones that may have reached the file. */
class Ledger {
  /** Highest generation acknowledged durable per LBA (FUA completion, or a Flush completed after the write). */
  readonly durable: Uint32Array;
  /** Generations written after it that may or may not have reached the file (acked-unflushed or in flight). */
  readonly maybe = new Map<number, number[]>();
  nextGen = 1;
  durableWrites = 0;

  constructor(blocks: number) {
    this.durable = new Uint32Array(blocks);
  }

  /** A write of `gen` to `lba` is about to be submitted. */
  issued(lba: number, gen: number): void {
    const m = this.maybe.get(lba);
    if (m === undefined) this.maybe.set(lba, [gen]);
    else m.push(gen);
  }

  markDurable(lba: number, gen: number): void {
    if (gen <= (this.durable[lba] as number)) return;
    this.durable[lba] = gen;
    this.durableWrites++;
    const m = this.maybe.get(lba);
    if (m !== undefined) {
      const rest = m.filter((g) => g > gen);
      if (rest.length === 0) this.maybe.delete(lba);
      else this.maybe.set(lba, rest);
    }
  }

  /** Every block that has an acknowledged-durable generation or a possible newer one, in LBA order. */
  toCheck(): number[] {
    const durable = this.durable;
    return [...new Set([...durable.keys()].filter((l) => (durable[l] as number) > 0).concat([...this.maybe.keys()]))].sort((a, b) => a - b);
  }
}

/** After a restart: reads back every block the ledger knows and checks it holds an allowed generation. */
async function verifyCycle(ledger: Ledger, ns: Namespace, cycle: number, failures: DurabilityFailure[]): Promise<{ verified: number; failures: number }> {
  let verified = 0;
  let cycleFailures = 0;
  const toCheck = ledger.toCheck();
  for (let i = 0; i < toCheck.length; i += 64) {
    const lbas = toCheck.slice(i, i + 64);
    await Promise.all(
      lbas.map(async (lba) => {
        const d = ledger.durable[lba] as number;
        const allowed = [d, ...(ledger.maybe.get(lba) ?? [])];
        const got = readStamp(await ns.read(lba, 1), lba);
        if (d > 0) verified++;
        if (!allowed.includes(got.gen)) {
          cycleFailures++;
          failures.push({ cycle, lba, durableGen: d, allowed, found: got.why });
        } else if (got.gen > 0) {
          ledger.durable[lba] = got.gen;
        }
        ledger.maybe.delete(lba);
      }),
    );
  }
  return { verified, failures: cycleFailures };
}

interface WriteLoad {
  blocks: number;
  qd: number;
  fuaRatio: number;
  killAfterMs: number;
}

/**
 * qd writers (FUA or not) and a flusher until `kill` runs after killAfterMs. `kill` sends SIGKILL before its first
 * await and counting stops right after: anything that completes after that point is not counted as acknowledged. The
 * writers are awaited only once `kill` resolved (target gone, controller disconnected), which fails what is in flight.
 */
async function writeUntilKill(ledger: Ledger, ns: Namespace, rng: Rng, load: WriteLoad, kill: () => Promise<void>): Promise<{ acked: number; inFlightAtKill: number }> {
  let killed = false;
  let acked = 0;
  const inFlight = new Set<number>();
  let unflushed: Array<{ lba: number; gen: number }> = [];
  const writer = async (): Promise<void> => {
    while (!killed) {
      let lba = rng.int(load.blocks);
      while (inFlight.has(lba)) lba = rng.int(load.blocks);
      const gen = ledger.nextGen++;
      const fua = rng.chance(load.fuaRatio);
      inFlight.add(lba);
      ledger.issued(lba, gen);
      try {
        await ns.write(lba, makeBlock(lba, gen), { fua, hctx: rng.int(2) });
        if (killed) break;
        acked++;
        if (fua) ledger.markDurable(lba, gen);
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
        for (const w of batch) ledger.markDurable(w.lba, w.gen);
      } catch {
        break;
      }
    }
  };
  const workers = [...Array.from({ length: load.qd }, () => writer()), flusher()];
  await new Promise((r) => setTimeout(r, load.killAfterMs));
  const done = kill();
  killed = true;
  const inFlightAtKill = inFlight.size;
  await done;
  await Promise.all(workers);
  return { acked, inFlightAtKill };
}

/** Zeroes up to n durable blocks in the file behind the target's back (the check must then report them). */
async function sabotage(file: string, ledger: Ledger, rng: Rng, n: number, cycle: number, sabotaged: Array<{ cycle: number; lba: number }>): Promise<void> {
  const durable = ledger.durable;
  const candidates = [...durable.keys()].filter((l) => (durable[l] as number) > 0 && !ledger.maybe.has(l));
  const fh = await openFile(file, 'r+');
  try {
    for (let i = 0; i < n && candidates.length > 0; i++) {
      const lba = candidates.splice(rng.int(candidates.length), 1)[0] as number;
      await fh.write(Buffer.alloc(BS), 0, BS, lba * BS);
      sabotaged.push({ cycle, lba });
    }
  } finally {
    await fh.close();
  }
}

export async function runDurability(opts: DurabilityOptions): Promise<DurabilityResult> {
  const seed = opts.seed ?? (Date.now() & 0x7fffffff);
  const rng = new Rng(seed);
  const blocks = opts.blocks ?? 4096;
  const [minRun, maxRun] = opts.runMs ?? [150, 600];
  const dir = await mkdtemp(path.join(os.tmpdir(), 'nvme-durability-'));
  const file = path.join(dir, 'ns.img');
  const ledger = new Ledger(blocks);
  const failures: DurabilityFailure[] = [];
  const sabotaged: Array<{ cycle: number; lba: number }> = [];
  const reports: CycleReport[] = [];
  let writesAcked = 0;
  let blocksVerified = 0;
  let restartMsTotal = 0;
  let port = 0;
  let target: RunningTarget | undefined;
  let ctrl: Controller | undefined;
  try {
    // Start 0 is the first boot; start N verifies what kill N left behind.
    for (let cycle = 0; cycle <= opts.cycles; cycle++) {
      const t0 = performance.now();
      target = await startTarget(file, port);
      port = target.port;
      ctrl = await connectOnLoopback(port);
      const restartMs = performance.now() - t0;
      if (cycle > 0) restartMsTotal += restartMs;
      const ns = ctrl.namespace(1);

      const v = await verifyCycle(ledger, ns, cycle, failures);
      blocksVerified += v.verified;
      await ns.flush();
      if (cycle > 0) {
        const r = reports[cycle - 1] as CycleReport;
        r.verified = v.verified;
        r.failures = v.failures;
        r.restartMs = restartMs;
        opts.onCycle?.(r);
      }
      if (cycle === opts.cycles) break;

      const killAfterMs = minRun + rng.int(Math.max(1, maxRun - minRun));
      const durableBefore = ledger.durableWrites;
      const running = target;
      const c = ctrl;
      const { acked, inFlightAtKill } = await writeUntilKill(ledger, ns, rng, { blocks, qd: opts.qd ?? 8, fuaRatio: opts.fuaRatio ?? 0.5, killAfterMs }, async () => {
        running.child.kill('SIGKILL');
        await running.exited;
        ctrl = undefined;
        await c.disconnect().catch(() => undefined);
      });
      if ((opts.sabotageBlocks ?? 0) > 0) await sabotage(file, ledger, rng, opts.sabotageBlocks ?? 0, cycle + 1, sabotaged);
      writesAcked += acked;
      reports.push({ cycle: cycle + 1, killAfterMs, writesAcked: acked, durableWrites: ledger.durableWrites - durableBefore, inFlightAtKill, verified: 0, failures: 0, restartMs: 0 });
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
    durableWrites: ledger.durableWrites,
    blocksVerified,
    failures,
    sabotaged,
    restartMsAvg: reports.length > 0 ? restartMsTotal / reports.length : 0,
    reports,
  };
}
