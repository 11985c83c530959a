// CRC32C throughput for NVMe/TCP digests (TCP 1.0 §3.6.1.4): the native path the PDU codec uses (@node-rs/crc32),
// the pure-TypeScript slice-by-8 fallback, and any optional alternative that happens to be installed.
//
//   taskset -c 0 npm run bench:crc32c            # pin to one vCPU (docs/performance.md, Benchmarks: unpinned runs are bimodal)
//   taskset -c 0 npm run bench:crc32c -- --ms 600 --reps 3 --json
//
// Prints ns per call, GB/s and the ratio to the native path for 512 B, 4 KiB and 128 KiB, all from one run. Each cell
// is the best of --reps windows of --ms / reps, taken round-robin across implementations, so that a burst of load
// from a neighbour hits all of them alike rather than skewing one ratio.
import { Buffer } from 'node:buffer';
import { createRequire } from 'node:module';
import { argv } from 'node:process';
import { crc32 as zlibCrc32 } from 'node:zlib';
import { crc32c, crc32cSoftware } from '../protocol/tcp/index.js';

type CrcFn = (buf: Buffer) => number;
interface Impl {
  name: string;
  fn: CrcFn;
  /** false for a different polynomial, shown only as a yardstick. */
  crc32c: boolean;
}

const SIZES = [512, 4096, 128 * 1024];
const CHECK = Buffer.from('123456789');
const CHECK_VALUE = 0xe3069283;

function arg(name: string, fallback: number): number {
  const i = argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(argv[i + 1]) : fallback;
  return Number.isFinite(v) && v > 0 ? v : fallback;
}

/** Optional packages are looked up at run time so the bench needs none of them; a missing one is reported, not fatal. */
async function optionalImpls(): Promise<{ found: Impl[]; missing: string[] }> {
  const require = createRequire(import.meta.url);
  const found: Impl[] = [];
  const missing: string[] = [];
  const tryLoad = async (pkg: string, make: (mod: Record<string, unknown>) => Promise<Impl | undefined> | Impl | undefined): Promise<void> => {
    try {
      const mod = require(pkg) as Record<string, unknown>;
      const impl = await make(mod);
      if (impl !== undefined) found.push(impl);
      else missing.push(`${pkg} (unexpected API)`);
    } catch {
      missing.push(pkg);
    }
  };
  // hash-wasm ≥ 4.12: CRC32C is createCRC32(0x82F63B78) (createCRC32C was removed); WASM instantiates asynchronously.
  await tryLoad('hash-wasm', async (m) => {
    const create = m.createCRC32 as ((poly?: number) => Promise<{ init(): unknown; update(b: Uint8Array): unknown; digest(f: 'hex'): string }>) | undefined;
    if (create === undefined) return undefined;
    const h = await create(0x82f63b78);
    return {
      name: 'hash-wasm (WASM)',
      crc32c: true,
      fn: (b) => {
        h.init();
        h.update(b);
        return Number.parseInt(h.digest('hex'), 16) >>> 0;
      },
    };
  });
  await tryLoad('sse4_crc32', (m) => {
    const calc = m.calculate as ((b: Buffer, init?: number) => number) | undefined;
    return calc === undefined ? undefined : { name: 'sse4_crc32 (native addon)', crc32c: true, fn: (b) => calc(b) >>> 0 };
  });
  await tryLoad('fast-crc32c', (m) => {
    const calc = m.calculate as ((b: Buffer, init?: number) => number) | undefined;
    return calc === undefined ? undefined : { name: 'fast-crc32c', crc32c: true, fn: (b) => calc(b) >>> 0 };
  });
  await tryLoad('@aws-crypto/crc32c', (m) => {
    const calc = m.crc32c as ((b: Uint8Array) => number) | undefined;
    return calc === undefined ? undefined : { name: '@aws-crypto/crc32c (JS)', crc32c: true, fn: (b) => calc(b) >>> 0 };
  });
  return { found, missing };
}

interface Row {
  impl: string;
  size: number;
  nsPerCall: number;
  gbPerS: number;
  ratioToNative: number;
}

/** Calls per timing batch sized so one batch is ~2 ms; batches repeat until `ms` has passed. */
function measure(fn: CrcFn, buf: Buffer, ms: number): number {
  let sink = 0;
  const warmEnd = performance.now() + Math.min(50, ms / 3);
  let perBatch = 1;
  while (performance.now() < warmEnd) {
    const t0 = performance.now();
    for (let i = 0; i < perBatch; i++) sink ^= fn(buf);
    if (performance.now() - t0 < 2) perBatch *= 2;
  }
  let calls = 0;
  const start = process.hrtime.bigint();
  const end = performance.now() + ms;
  while (performance.now() < end) {
    for (let i = 0; i < perBatch; i++) sink ^= fn(buf);
    calls += perBatch;
  }
  const ns = Number(process.hrtime.bigint() - start);
  if (sink === 0.5) console.log('unreachable');
  return ns / calls;
}

async function main(): Promise<void> {
  const ms = arg('ms', 300);
  const reps = arg('reps', 3);
  const json = argv.includes('--json');
  const impls: Impl[] = [
    { name: 'native @node-rs/crc32 (protocol crc32c)', crc32c: true, fn: (b) => crc32c(b) },
    { name: 'pure TS slice-by-8 (crc32cSoftware)', crc32c: true, fn: (b) => crc32cSoftware(b) },
  ];
  const { found, missing } = await optionalImpls();
  impls.push(...found);
  impls.push({ name: 'node:zlib crc32 (IEEE CRC32, yardstick only)', crc32c: false, fn: (b) => zlibCrc32(b) });

  // An implementation that gets the check value wrong is dropped (and named), not timed.
  for (const impl of [...impls]) {
    if (impl.crc32c && impl.fn(CHECK) !== CHECK_VALUE) {
      console.error(`dropped ${impl.name}: CRC32C("123456789") = 0x${impl.fn(CHECK).toString(16)}, want 0xe3069283`);
      impls.splice(impls.indexOf(impl), 1);
    }
  }

  const rows: Row[] = [];
  for (const size of SIZES) {
    const buf = Buffer.alloc(size);
    for (let i = 0; i < size; i++) buf[i] = (i * 131 + 7) & 0xff;
    const best = impls.map(() => Number.POSITIVE_INFINITY);
    for (let r = 0; r < reps; r++) {
      impls.forEach((impl, i) => {
        best[i] = Math.min(best[i] as number, measure(impl.fn, buf, ms / reps));
      });
    }
    const nativeNs = best[0] as number;
    impls.forEach((impl, i) => {
      const ns = best[i] as number;
      rows.push({ impl: impl.name, size, nsPerCall: ns, gbPerS: size / ns, ratioToNative: ns / nativeNs });
    });
  }

  if (json) {
    console.log(JSON.stringify({ node: process.version, ms, reps, rows, notInstalled: missing }, null, 2));
    return;
  }
  console.log(`CRC32C, Node ${process.version}, best of ${reps} × ${Math.round(ms / reps)} ms per cell; ratio = time / native time (same run)\n`);
  const w = Math.max(...impls.map((i) => i.name.length));
  console.log(`${'implementation'.padEnd(w)}  ${'size'.padStart(7)}  ${'ns/call'.padStart(10)}  ${'GB/s'.padStart(7)}  ${'× native'.padStart(9)}`);
  for (const r of rows) {
    const size = r.size >= 1024 ? `${r.size / 1024} KiB` : `${r.size} B`;
    console.log(`${r.impl.padEnd(w)}  ${size.padStart(7)}  ${r.nsPerCall.toFixed(1).padStart(10)}  ${r.gbPerS.toFixed(2).padStart(7)}  ${r.ratioToNative.toFixed(2).padStart(9)}`);
  }
  const k4 = rows.filter((r) => r.size === 4096);
  console.log(`\n4 KiB: ${k4.map((r) => `${r.impl.split(' (')[0]} ${(r.nsPerCall / 1000).toFixed(2)} µs`).join(', ')}`);
  if (missing.length > 0) console.log(`not installed (optional, not dependencies): ${missing.join(', ')}`);
}

await main();
