// Gateway group failover benchmark (issue 30, "How it is proven"; docs/gateway-groups.md):
//   npx tsx bench/gateway-failover.ts [--events 12] [--lease-ms 1000] [--failback-ms 500] [--gateways 3]
//                                     [--namespaces 3] [--workers 2] [--json FILE]
// A throwaway etcd, N gateway processes (harness/gateway-lab.ts) serving one subsystem with one namespace per ANA
// group (gateway k prefers group k, so every event hits an owner and the others keep serving theirs), our multipath
// initiator on every gateway, a verify workload (FUA writes, read-backs of the last acknowledged write) on every
// namespace, and a loop of events in rounds over the gateways: SIGKILL + restart, SIGSTOP past the lease + SIGCONT,
// partition from etcd + heal. Reports per event type the I/O pause (longest gap between completions of one namespace,
// from injection until the group settled back), time to the new owner, time to failback (from the gateway's return),
// and overall lost / mismatched blocks, stuck commands and instants with two gateways optimized for one group. Goals:
// 0 lost, 0 mismatches, 0 stuck, 0 overlaps, pause p99 <= lease TTL + 2 s for kills and partitions. Exit 1 if one
// is missed. A benchmark, not a test: on a busy machine the pauses grow.
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { GatewayLab, GroupSampler, VerifyWorkload, injectEvent, type LabEvent, type LabEventKind } from '../harness/gateway-lab.js';
import { startEtcd } from '../test/fixtures/etcd.js';
import { sleep } from '../harness/until.js';

const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '12' },
    'lease-ms': { type: 'string', default: '1000' },
    'failback-ms': { type: 'string', default: '500' },
    gateways: { type: 'string', default: '3' },
    namespaces: { type: 'string', default: '3' },
    workers: { type: 'string', default: '2' },
    json: { type: 'string' },
  },
});

const num = (name: string, v: string | undefined, min: number, max: number): number => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) {
    process.stderr.write(`--${name} ${v}: must be an integer ${min}..${max}\n`);
    process.exit(2);
  }
  return n;
};

const EVENTS = num('events', values.events, 1, 100_000);
const LEASE_MS = num('lease-ms', values['lease-ms'], 1000, 60_000);
if (LEASE_MS % 1000 !== 0) {
  process.stderr.write(`--lease-ms ${LEASE_MS}: etcd leases count whole seconds; give a multiple of 1000\n`);
  process.exit(2);
}
const FAILBACK_MS = num('failback-ms', values['failback-ms'], 0, 600_000);
const GATEWAYS = num('gateways', values.gateways, 2, 9);
const NAMESPACES = num('namespaces', values.namespaces, 1, 9);
const WORKERS = num('workers', values.workers, 1, 64);
const KINDS: LabEventKind[] = ['kill', 'stop', 'partition'];

/** Nearest-rank percentile of `xs` (p in 0..100). */
function pct(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] as number;
}
const ms = (x: number | undefined): string => (x === undefined || Number.isNaN(x) ? '-' : `${Math.round(x)}`);

interface Row {
  kind: LabEventKind;
  gw: string;
  t0: number;
  pauseMs: number;
  toNewOwnerMs: number | undefined;
  failbackMs: number;
  /** Mismatching reads from this event's injection until the next one's. */
  mismatches: number;
}

async function run(): Promise<{ rows: Row[]; lost: number; blocks: number; work: VerifyWorkload; overlaps: string[]; samples: number; elapsedMs: number }> {
  const etcd = await startEtcd();
  let lab: GatewayLab | undefined;
  try {
    lab = await GatewayLab.start({ etcdPort: etcd.clientPort, gateways: GATEWAYS, namespaces: NAMESPACES, leaseMs: LEASE_MS, failbackDelayMs: FAILBACK_MS, group: 'bench' });
    await lab.connect('nqn.2024-01.io.nvme-tcp-ts:gwbench-host');
    const work = new VerifyWorkload(Array.from({ length: NAMESPACES }, (_, k) => lab!.multipath(k + 1)), { workers: WORKERS });
    work.start();
    const sampler = new GroupSampler(lab);
    const rows: Row[] = [];
    const t0 = performance.now();
    try {
      await sleep(1000);
      for (let i = 0; i < EVENTS; i++) {
        const kind = KINDS[i % KINDS.length] as LabEventKind;
        const gw = lab.gateways[Math.floor(i / KINDS.length) % lab.gateways.length]!;
        const ev: LabEvent = await injectEvent(lab, kind, gw, `event ${i} (${kind} ${gw.id})`);
        const row = { kind, gw: gw.id, t0: ev.t0, pauseMs: work.longestGap(ev.t0, ev.tSettled), toNewOwnerMs: ev.toNewOwnerMs, failbackMs: ev.failbackMs, mismatches: 0 };
        rows.push(row);
        process.stderr.write(`event ${i + 1}/${EVENTS}: ${kind} ${gw.id} (owned ${ev.owned.join(',') || 'none'}): pause ${ms(row.pauseMs)} ms, new owner ${ms(row.toNewOwnerMs)} ms, failback ${ms(row.failbackMs)} ms\n`);
        await sleep(500);
      }
    } finally {
      await work.stop();
      await sampler.stop();
    }
    const elapsedMs = performance.now() - t0;
    for (const t of work.stats.mismatchAt) {
      const row = rows.findLast((x) => x.t0 <= t);
      if (row !== undefined) row.mismatches++;
    }
    const { blocks, lost } = await work.readBack();
    return { rows, lost, blocks, work, overlaps: sampler.overlaps(), samples: sampler.samples.length, elapsedMs };
  } finally {
    await lab?.close();
    await etcd.stop();
  }
}

const r = await run();
const limit = LEASE_MS + 2000;
const lines = [
  `gateway failover: ${EVENTS} events, ${GATEWAYS} gateways, ${NAMESPACES} namespaces/ANA groups, lease ${LEASE_MS} ms, failback delay ${FAILBACK_MS} ms, ${WORKERS} verify workers per namespace, ${Math.round(r.elapsedMs / 1000)} s`,
  '',
  'event      n   pause p50   p99   max (ms)   new owner p50   max (ms)   failback p50   max (ms)   mismatches',
];
const goals: [string, boolean][] = [];
for (const kind of KINDS) {
  const rs = r.rows.filter((x) => x.kind === kind);
  if (rs.length === 0) continue;
  const pause = rs.map((x) => x.pauseMs);
  const owner = rs.flatMap((x) => (x.toNewOwnerMs !== undefined ? [x.toNewOwnerMs] : []));
  const fb = rs.map((x) => x.failbackMs);
  lines.push(
    `${kind.padEnd(9)} ${String(rs.length).padStart(2)}   ${ms(pct(pause, 50)).padStart(9)} ${ms(pct(pause, 99)).padStart(5)} ${ms(pct(pause, 100)).padStart(5)}` +
      `   ${ms(pct(owner, 50)).padStart(13)} ${ms(pct(owner, 100)).padStart(6)}   ${ms(pct(fb, 50)).padStart(12)} ${ms(pct(fb, 100)).padStart(6)}` +
      `   ${String(rs.reduce((a, x) => a + x.mismatches, 0)).padStart(10)}`,
  );
  if (kind !== 'stop') goals.push([`${kind} pause p99 ${ms(pct(pause, 99))} ms <= lease + 2 s (${limit} ms)`, pct(pause, 99) <= limit]);
}
const s = r.work.stats;
goals.unshift(
  [`lost blocks ${r.lost} of ${r.blocks} read back = 0`, r.lost === 0],
  [`mismatched reads ${s.mismatches.length} of ${s.reads} = 0`, s.mismatches.length === 0],
  [`stuck commands ${s.stuck} = 0 (longest command ${ms(s.maxLatencyMs)} ms)`, s.stuck === 0],
  [`instants with two gateways optimized for one group ${r.overlaps.length} = 0 (${r.samples} GET /group samples)`, r.overlaps.length === 0],
);
lines.push('', `${s.writes} FUA writes, ${s.reads} verified reads`, '', 'goals:');
for (const [what, ok] of goals) lines.push(`  ${ok ? 'met    ' : 'MISSED '} ${what}`);
for (const m of [...s.mismatches.slice(0, 5), ...r.overlaps.slice(0, 5)]) lines.push(`  ${m}`);
process.stdout.write(`${lines.join('\n')}\n`);
if (values.json !== undefined) writeFileSync(values.json, JSON.stringify({ events: r.rows, lost: r.lost, blocks: r.blocks, stats: s, overlaps: r.overlaps, goals }, null, 2));
process.exit(goals.every(([, ok]) => ok) ? 0 : 1);
