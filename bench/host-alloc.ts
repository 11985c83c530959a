// Where the host path allocates (docs/performance.md "Host path, third pass"): runs the engine (or the bare callback
// loop) against a target for a few seconds under V8's sampling heap profiler with collected objects included, and
// prints the allocation sites by bytes, per I/O. Not part of npm test.
//   npx tsx bench/host-alloc.ts --port PORT [--arm engine|loop-cb] [--seconds 3] [--qd 32]
import { Session } from 'node:inspector/promises';
import { connect } from '../initiator/index.js';
import { controllerBlockTarget } from '../harness/nvme.js';
import { parseFioJobFile, resolveJobs, runJobs } from '../harness/load/index.js';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] as string) : dflt;
}

interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  id: number;
  children: ProfileNode[];
}

const port = Number(arg('port', '0'));
const seconds = Number(arg('seconds', '3'));
const qd = Number(arg('qd', '32'));
const armName = arg('arm', 'engine');
const depth = Number(arg('depth', '3'));
const ctrl = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: arg('nqn', 'nqn.2024-01.io.nvme-ts:bench'), nr_io_queues: 1, queue_size: 128, keep_alive_tmo: 30 });
const ns = ctrl.namespace(1);
const session = new Session();
session.connect();
let ios = 0;
// Warm up first so compilation and one-time allocations stay out of the profile.
const run = async (secs: number): Promise<number> => {
  if (armName === 'engine') {
    const bt = controllerBlockTarget(ctrl, 1);
    const r = await runJobs(bt, resolveJobs(parseFioJobFile(`[r]\nrw=randread\nbs=4k\niodepth=${qd}\nruntime=${secs}s\n`), bt));
    return r.totals.ios;
  }
  let n = 0;
  let stop = false;
  let live = qd;
  const slots = Math.floor(Number(ns.blocks) / 8) - 1;
  let x = 0x9e3779b9;
  await new Promise<void>((done) => {
    for (let i = 0; i < qd; i++) {
      const req = {
        write: false,
        lba: 0,
        blocks: 4096 / ns.blockSize,
        buf: Buffer.allocUnsafeSlow(4096),
        ioDone(err: Error | undefined): void {
          if (err !== undefined) throw err;
          n++;
          if (stop) {
            if (--live === 0) done();
            return;
          }
          x ^= x << 13;
          x ^= x >>> 17;
          x ^= x << 5;
          req.lba = ((x >>> 0) % slots) * req.blocks;
          ns.submit(req);
        },
      };
      req.ioDone(undefined);
    }
    setTimeout(() => (stop = true), secs * 1000);
  });
  return n;
};
await run(1);
await session.post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
ios = await run(seconds);
const { profile } = (await session.post('HeapProfiler.stopSampling')) as unknown as { profile: { head: ProfileNode } };
await ctrl.disconnect();
const sites = new Map<string, number>();
let total = 0;
const walk = (n: ProfileNode, stack: string[]): void => {
  const cf = n.callFrame;
  const here = `${cf.functionName || '(anon)'} ${cf.url.split('/').slice(-2).join('/')}:${cf.lineNumber + 1}`;
  const s = [...stack, here];
  if (n.selfSize > 0) {
    const key = s.slice(-depth).reverse().join(' < ');
    sites.set(key, (sites.get(key) ?? 0) + n.selfSize);
    total += n.selfSize;
  }
  for (const c of n.children) walk(c, s);
};
walk(profile.head, []);
process.stdout.write(`${armName}: ${ios} I/Os in ${seconds} s, ~${(total / ios).toFixed(1)} sampled bytes per I/O\n`);
for (const [k, b] of [...sites].sort((p, q) => q[1] - p[1]).slice(0, 25)) process.stdout.write(`${(b / ios).toFixed(1).padStart(8)} B/IO  ${k}\n`);
