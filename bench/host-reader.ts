// Host read path of the PDU reader alone (docs/performance.md "Host path, fourth pass"): 4 KiB C2HData PDUs, each
// followed by its CapsuleResp, pushed in 256 KiB reads through one reused buffer into the reader's sink, as a
// socket with rxBuffer delivers them (the same Buffer object every read, its first n bytes new). Prints ns per PDU pair
// (CPU time of the thread) for this tree and, with --before DIR[,DIR...], for other checkouts' readers in the same
// process, rounds interleaved.
// --split pushes reads of 1 B–64 KiB from a fixed pseudo-random sequence instead (PDUs straddle reads, as a socket
// delivers them under load), and warms a second reader beside each (an admin queue's: chunks not reused, its own
// callbacks), so call sites see what they see in a host process. Not part of npm test.
//   npx tsx bench/host-reader.ts [--before DIR[,DIR...]] [--rounds 9] [--bs 4096] [--split]
import { Buffer } from 'node:buffer';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { arg } from './args.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));

const BS = Number(arg('bs') ?? 4096);
const ROUNDS = Number(arg('rounds') ?? 9);
const RX = 256 * 1024;
const SPLIT = process.argv.includes('--split');
/** This thread's CPU time in ms (user + system): time stolen by a busy machine's neighbours is not counted. */
const cpuNow = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
/** Read sizes of --split: xorshift32 from a fixed seed, 1 B–64 KiB, the same sequence for every arm. */
const SIZES = ((): Uint32Array => {
  const out = new Uint32Array(4096);
  let x = 0x9e3779b9;
  for (let i = 0; i < out.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = ((x >>> 0) % 65536) + 1;
  }
  return out;
})();

/** One read's worth of C2HData + CapsuleResp pairs (24-byte headers, no digests), cids 0..n-1. */
function stream(n: number): Buffer {
  const parts: Buffer[] = [];
  for (let cid = 0; cid < n; cid++) {
    const h = Buffer.alloc(24);
    h[0] = 0x07;
    h[2] = 24;
    h[3] = 24;
    h.writeUInt32LE(24 + BS, 4);
    h.writeUInt16LE(cid, 8);
    h.writeUInt32LE(BS, 16);
    parts.push(h, Buffer.alloc(BS, cid));
    const r = Buffer.alloc(24);
    r[0] = 0x05;
    r[2] = 24;
    r.writeUInt32LE(24, 4);
    r.writeUInt16LE(cid, 8 + 12);
    parts.push(r);
  }
  return Buffer.concat(parts);
}

async function makeRun(root: string): Promise<(reads: number) => number> {
  const { PduReader } = (await import(path.join(root, 'protocol/tcp/reader.js'))) as typeof import('../protocol/tcp/reader.js');
  const pairs = Math.floor(RX / (48 + BS));
  const bytes = stream(pairs);
  const rx = Buffer.allocUnsafeSlow(RX);
  const dests = Array.from({ length: pairs }, () => Buffer.allocUnsafeSlow(BS));
  let done = 0;
  const sink: { buf: Buffer; at: number } = { buf: rx, at: 0 };
  const make = (reuses: boolean): InstanceType<typeof PduReader> => {
    const r = new PduReader({
      role: 'host',
      reusesChunks: reuses,
      onPdu: () => undefined,
      onFatal: (f) => {
        throw new Error(f.reason);
      },
      sink: {
        header: (type, psh) => {
          if (type !== 0x07) {
            done++;
            return undefined;
          }
          sink.buf = dests[(psh[0] as number) | ((psh[1] as number) << 8)] as Buffer;
          return sink;
        },
        end: () => undefined,
      },
    });
    // IC done, no digests: an ICResp as the first PDU ends the IC exchange.
    const ic = Buffer.alloc(128);
    ic[0] = 0x01;
    ic[2] = 128;
    ic.writeUInt32LE(128, 4);
    ic.writeUInt32LE(131072, 12);
    r.push(ic);
    r.setFraming(false, false, 0);
    return r;
  };
  const r = make(true);
  const admin = SPLIT ? make(false) : undefined;
  let at = 0;
  let k = 0;
  if (SPLIT) {
    return (reads: number): number => {
      admin?.push(Buffer.from(bytes));
      done = 0;
      const t0 = cpuNow();
      for (let i = 0; i < reads; i++) {
        const want = SIZES[k++ & (SIZES.length - 1)] as number;
        const n = Math.min(want, bytes.length - at);
        bytes.copy(rx, 0, at, at + n);
        at = (at + n) % bytes.length;
        r.push(rx, n);
      }
      return ((cpuNow() - t0) * 1e6) / done;
    };
  }
  return (reads: number): number => {
    const t0 = cpuNow();
    for (let i = 0; i < reads; i++) {
      const n = bytes.copy(rx, 0);
      r.push(rx, n);
    }
    const ns = ((cpuNow() - t0) * 1e6) / (reads * pairs);
    if (done !== reads * pairs + 0 && done % pairs !== 0) throw new Error('lost responses');
    done = 0;
    return ns;
  };
}

const arms: [string, (reads: number) => number][] = [['this tree', await makeRun(path.resolve(HERE, '..'))]];
for (const [i, dir] of (arg('before')?.split(',') ?? []).entries()) arms.push([`before${i === 0 ? '' : i + 1} (${dir})`, await makeRun(path.resolve(dir))]);
for (const [, run] of arms) run(2000);
const res = new Map<string, number[]>();
for (let k = 0; k < ROUNDS; k++) for (const [name, run] of arms) res.set(name, [...(res.get(name) ?? []), run(3000)]);
const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const mine = res.get('this tree') as number[];
for (const [name, xs] of res) {
  const ratio = name === 'this tree' ? '' : `; this tree ÷ it, paired by round: ${med(mine.map((m, k) => m / (xs[k] as number))).toFixed(3)}`;
  console.log(`${name}: ${med(xs).toFixed(1)} ns CPU per ${BS}-byte C2HData + CapsuleResp (median of ${ROUNDS}, range ${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)})${ratio}`);
}
