// Host read path of the PDU reader alone (docs/performance.md "Host path, fourth pass"): 4 KiB C2HData PDUs, each
// followed by its CapsuleResp, pushed in 256 KiB reads through one reused buffer into the direct-copy callbacks, as a
// socket with rxBuffer delivers them. Prints ns per PDU pair for this tree and, with --before DIR, for another
// checkout's reader in the same process, rounds interleaved. Not part of npm test.
//   npx tsx bench/host-reader.ts [--before DIR] [--rounds 9] [--bs 4096]
import { Buffer } from 'node:buffer';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { arg } from './args.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));

const BS = Number(arg('bs') ?? 4096);
const ROUNDS = Number(arg('rounds') ?? 9);
const RX = 256 * 1024;

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
  const r = new PduReader({
    role: 'host',
    reusesChunks: true,
    onPdu: () => undefined,
    onFatal: (f) => {
      throw new Error(f.reason);
    },
    onCapsuleResp: () => {
      done++;
    },
    onC2HDataHeader: (cccid) => dests[cccid],
    onC2HDataEnd: () => undefined,
  });
  // IC done, no digests: an ICResp as the first PDU switches the reader to its fast paths.
  const ic = Buffer.alloc(128);
  ic[0] = 0x01;
  ic[2] = 128;
  ic.writeUInt32LE(128, 4);
  ic.writeUInt32LE(131072, 12);
  r.push(ic);
  r.setFraming(false, false, 0);
  return (reads: number): number => {
    const t0 = performance.now();
    for (let i = 0; i < reads; i++) {
      const n = bytes.copy(rx, 0);
      r.push(rx.subarray(0, n));
    }
    const ns = ((performance.now() - t0) * 1e6) / (reads * pairs);
    if (done !== reads * pairs + 0 && done % pairs !== 0) throw new Error('lost responses');
    done = 0;
    return ns;
  };
}

const arms: [string, (reads: number) => number][] = [['this tree', await makeRun(path.resolve(HERE, '..'))]];
const before = arg('before');
if (before !== undefined) arms.push(['before', await makeRun(path.resolve(before))]);
for (const [, run] of arms) run(2000);
const res = new Map<string, number[]>();
for (let k = 0; k < ROUNDS; k++) for (const [name, run] of arms) res.set(name, [...(res.get(name) ?? []), run(3000)]);
const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
for (const [name, xs] of res) console.log(`${name}: ${med(xs).toFixed(1)} ns per ${BS}-byte C2HData + CapsuleResp (median of ${ROUNDS}, range ${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)})`);
