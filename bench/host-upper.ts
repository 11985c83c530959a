// The upper half of the host path without a socket (docs/performance.md "Host path, fourth pass"): `nvme-tcp bench`'s
// engine (harness/load) over a real Namespace, Hctx and QueuePair whose HostTcpQueue is a stand-in that answers every
// command of a tick in the next one (4 KiB copied into the read buffer, then the CQE), like a socket read carrying one
// batch of responses. No kernel, no target and no other process share the measurement, so trees can be compared in
// one process: with --before DIR both trees' modules are loaded and their runs alternate. Prints host CPU per I/O.
// Not part of npm test.
//   npx tsx bench/host-upper.ts [--before DIR] [--rounds 7] [--seconds 1] [--qd 32] [--alloc]
// --alloc: one run of this tree under V8's sampling heap profiler instead, allocation sites by bytes per I/O.
import { Buffer } from 'node:buffer';
import { Session } from 'node:inspector/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { arg } from './args.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));

const ROUNDS = Number(arg('rounds') ?? 7);
const SECONDS = Number(arg('seconds') ?? 1);
const QD = Number(arg('qd') ?? 32);
const BS = 4096;
const BLOCKS = 1 << 19;

interface TcpHandlers {
  command(cid: number): { c2h: Buffer | undefined; c2hReceived: number } | undefined;
  onResponse(buf: Buffer | undefined, at: number, cmd: unknown, cid: number): void;
  onClose(err: Error): void;
}

/** HostTcpQueue's surface as QueuePair uses it; every command sent in a tick is answered in the next. */
class AnsweringTcp {
  #h: TcpHandlers | undefined;
  /** CIDs sent since the last answer, and a second array to swap in while answering (nothing allocated per tick). */
  #pending = new Int32Array(4096);
  #spare = new Int32Array(4096);
  #count = 0;
  #scheduled = false;
  readonly #cqe = Buffer.alloc(16);
  readonly #data = Buffer.alloc(BS, 0x5a);
  readonly closed = false;
  readonly closeError = undefined;
  readonly localAddress = '127.0.0.1';
  readonly localPort = 1;
  readonly remoteAddress = '127.0.0.1';
  readonly remotePort = 4420;
  readonly #tick = (): void => this.#answer();

  setHandlers(h: TcpHandlers): void {
    this.#h = h;
  }

  sendCapsule(sqe: Buffer): void {
    this.#pending[this.#count++] = (sqe[2] as number) | ((sqe[3] as number) << 8);
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(this.#tick);
    }
  }

  close(): void {}

  #answer(): void {
    this.#scheduled = false;
    const batch = this.#pending;
    const n = this.#count;
    this.#pending = this.#spare;
    this.#count = 0;
    const h = this.#h as TcpHandlers;
    for (let i = 0; i < n; i++) {
      const cid = batch[i] as number;
      const cmd = h.command(cid);
      if (cmd === undefined || cmd.c2h === undefined) throw new Error(`no read command for cid ${cid}`);
      cmd.c2h.set(this.#data);
      cmd.c2hReceived = BS;
      this.#cqe.writeUInt16LE(cid, 12);
      h.onResponse(this.#cqe, 0, cmd, cid);
    }
    this.#spare = batch;
  }
}

type Run = () => Promise<{ ios: number; cpuUs: number }>;

async function makeRun(root: string): Promise<Run> {
  const imp = async <T>(p: string): Promise<T> => (await import(path.join(root, p))) as T;
  const { Namespace } = await imp<typeof import('../initiator/namespace.js')>('initiator/namespace.js');
  const { QueuePair, TagSet } = await imp<typeof import('../initiator/queue-pair.js')>('initiator/queue-pair.js');
  const { Hctx } = await imp<typeof import('../initiator/dispatch/hctx.js')>('initiator/dispatch/hctx.js');
  const { namespaceBlockTarget } = await imp<typeof import('../harness/nvme.js')>('harness/nvme.js');
  const load = await imp<typeof import('../harness/load/index.js')>('harness/load/index.js');
  const tags = new TagSet(128);
  const qp = new QueuePair({ qid: 1, tcp: new AnsweringTcp() as never, tags, inlineLimit: 8192, onError: (_q, e) => { throw e; } });
  qp.setLive();
  const hctx = new Hctx(0, 'default', [qp], tags);
  // Controller's callback path on a live controller (Controller.submitIo and its IoSink), without the controller. The
  // request is the one record down the seams; trees before it (68d3667 and older, for --before) passed its builder,
  // sink, hctx, retries and timeout one by one, and their sink heard (io, builder, hctx, retries, err).
  type Io = { ioDone(e: Error | undefined): void; sink?: unknown; rqTimeoutMs?: number };
  const oneRecord = hctx.submitIo.length === 1;
  const sink = { ioCompleted: (io: Io, ...rest: unknown[]) => io.ioDone((oneRecord ? rest[0] : rest[3]) as Error | undefined) };
  const submitOld = hctx.submitIo as unknown as (io: Io, builder: unknown, sink: unknown, retries: number, timeoutMs: number) => void;
  const exec = {
    maxTransferBytes: 1 << 20,
    ioTimeoutMs: 30_000,
    execIo: () => Promise.reject(new Error('promise path not benchmarked')),
    submitIo: (io: Io, builder?: unknown, _h?: number, retries?: number): void => {
      if (!oneRecord) return submitOld.call(hctx, io, builder, sink, retries ?? 0, 30_000);
      io.sink = sink;
      io.rqTimeoutMs = 30_000;
      hctx.submitIo(io as never);
    },
  };
  const info = { nsid: 1, blocks: BigInt(BLOCKS), blockSize: 512, nguid: '', uuid: '', eui64: '', anagrpid: 0, shared: false, readOnly: false };
  const ns = new Namespace(exec as never, info);
  const bt = namespaceBlockTarget(ns, BLOCKS, 512);
  const job = `[r]\nrw=randread\nbs=${BS}\niodepth=${QD}\nruntime=${SECONDS}s\n`;
  return async () => {
    const c0 = process.cpuUsage();
    const r = await load.runJobs(bt, load.resolveJobs(load.parseFioJobFile(job), bt));
    const c = process.cpuUsage(c0);
    if (r.totals.errors > 0) throw new Error(r.errorMessages.join('; '));
    return { ios: r.totals.ios, cpuUs: c.user + c.system };
  };
}

interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: HeapNode[];
}

if (process.argv.includes('--alloc')) {
  const run = await makeRun(path.resolve(HERE, '..'));
  await run();
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.startSampling', { samplingInterval: 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  const { ios } = await run();
  const { profile } = (await session.post('HeapProfiler.stopSampling')) as unknown as { profile: { head: HeapNode } };
  const sites = new Map<string, number>();
  const walk = (n: HeapNode, stack: string[]): void => {
    const cf = n.callFrame;
    const s = [...stack, `${cf.functionName || '(anon)'} ${cf.url.split('/').slice(-2).join('/')}:${cf.lineNumber + 1}`];
    if (n.selfSize > 0) sites.set(s.slice(-3).reverse().join(' < '), (sites.get(s.slice(-3).reverse().join(' < ')) ?? 0) + n.selfSize);
    for (const c of n.children) walk(c, s);
  };
  walk(profile.head, []);
  for (const [k, b] of [...sites].sort((p, q) => q[1] - p[1]).slice(0, 15)) console.log(`${(b / ios).toFixed(1).padStart(8)} B/IO  ${k}`);
  process.exit(0);
}

const arms: [string, Run][] = [['this tree', await makeRun(path.resolve(HERE, '..'))]];
const before = arg('before');
if (before !== undefined) arms.push(['before', await makeRun(path.resolve(before))]);
for (const [, run] of arms) await run();
const res = new Map<string, number[]>();
for (let k = 0; k < ROUNDS; k++) {
  for (const [name, run] of k % 2 === 0 ? arms : [...arms].reverse()) {
    const r = await run();
    res.set(name, [...(res.get(name) ?? []), r.cpuUs / r.ios]);
  }
}
const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
for (const [name, xs] of res) console.log(`${name}: ${med(xs).toFixed(3)} µs host CPU per I/O (median of ${ROUNDS}, range ${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)})`);
const t = res.get('this tree') as number[];
const b = res.get('before');
if (b !== undefined) console.log(`this tree ÷ before, paired by round: ${med(t.map((x, i) => x / (b[i] as number))).toFixed(3)}`);
