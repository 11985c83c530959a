// The gateway lab's verify job (docker/compose.gateway.yaml's `harness` service, docs/containers.md): our initiator
// connects to every gateway given, builds one multipath head per namespace over them, and runs harness/gateway-lab.ts's
// verify workload (FUA writes naming LBA and sequence number, reads that must return the last acknowledged write) for
// --seconds or until SIGTERM/SIGINT; then it reads back every acknowledged write and prints one line. Exit 0 only when
// there were writes and 0 mismatches, 0 lost blocks and 0 stuck commands. It writes from --offset-mib on (default 32),
// so a workload of another host that starts at LBA 0 (test/containers/gateway.test.ts's) never shares a block with it.
//   node dist/harness/gateway-verify.js --nqn NQN [--seconds N] [--workers N] [--offset-mib N] HOST:PORT ...
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { connect, createMultipath, type Controller } from '../initiator/index.js';
import { setLongTimeout } from '../protocol/index.js';
import { VerifyWorkload } from './gateway-lab.js';

export interface GatewayVerifyOptions {
  nqn: string;
  hostnqn: string;
  gateways: { host: string; port: number }[];
  /** How long to run; stops earlier on `signal`. */
  seconds: number;
  workers: number;
  /** Where its blocks start in each namespace (MiB). */
  offsetMiB: number;
  signal?: AbortSignal;
  /** How long to keep trying the first connect to each gateway (they may still be starting). */
  connectWaitMs?: number;
}

export interface GatewayVerifyResult {
  ok: boolean;
  line: string;
}

async function connectRetrying(o: GatewayVerifyOptions, host: string, port: number): Promise<Controller> {
  const deadline = Date.now() + (o.connectWaitMs ?? 60_000);
  for (;;) {
    try {
      return await connect({ traddr: host, trsvcid: port, nqn: o.nqn, hostnqn: o.hostnqn, nr_io_queues: 1, reconnect_delay: 0.5, ctrl_loss_tmo: -1, keep_alive_tmo: 1, io_timeout: 3 });
    } catch (err) {
      if (Date.now() > deadline || o.signal?.aborted === true) throw new Error(`connect ${host}:${port}: ${(err as Error).message}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

export async function runGatewayVerify(o: GatewayVerifyOptions): Promise<GatewayVerifyResult> {
  const ctrls: Controller[] = [];
  try {
    for (const g of o.gateways) ctrls.push(await connectRetrying(o, g.host, g.port));
    const nsids = (ctrls[0]?.namespaces ?? []).map((ns) => ns.nsid).sort((a, b) => a - b);
    if (nsids.length === 0) throw new Error(`${o.nqn}: no namespaces`);
    const paths = nsids.map((nsid) => createMultipath(ctrls, nsid, { iopolicy: 'numa', noPathTimeoutMs: 60_000 }));
    const baseLba = (o.offsetMiB * 1024 * 1024) / (paths[0] as (typeof paths)[number]).blockSize;
    const work = new VerifyWorkload(paths, { workers: o.workers, slots: 128, baseLba });
    const t0 = Date.now();
    work.start();
    await new Promise<void>((resolve) => {
      // --seconds is a flag: any length runs in full (setTimeout turns more than 2^31−1 ms into 1 ms).
      const t = setLongTimeout(resolve, o.seconds * 1000, '--seconds');
      o.signal?.addEventListener('abort', () => (t.clear(), resolve()), { once: true });
    });
    await work.stop();
    const { blocks, lost } = await work.readBack();
    const s = work.stats;
    const failovers = paths.reduce((n, p) => n + p.failovers, 0);
    const line =
      `gateway verify: ${o.gateways.length} gateways, ${nsids.length} namespaces, ${Math.round((Date.now() - t0) / 1000)} s: ` +
      `${s.writes} FUA writes, ${s.reads} verified reads, ${s.mismatches.length} mismatches; read back ${blocks} blocks, ${lost} lost; ` +
      `${s.stuck} stuck, longest command ${Math.round(s.maxLatencyMs)} ms, multipath failovers ${failovers}`;
    const ok = s.writes > 0 && s.mismatches.length === 0 && lost === 0 && s.stuck === 0;
    return { ok, line: ok ? line : `${line}\n${s.mismatches.slice(0, 10).join('\n')}` };
  } finally {
    for (const c of ctrls) await c.disconnect().catch(() => undefined);
  }
}

function parseHostPort(s: string): { host: string; port: number } {
  const i = s.lastIndexOf(':');
  const port = Number(s.slice(i + 1));
  if (i <= 0 || !Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`${s}: expected HOST:PORT`);
  return { host: s.slice(0, i), port };
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      nqn: { type: 'string' },
      hostnqn: { type: 'string', default: 'nqn.2024-01.io.nvme-tcp-ts:gateway-verify' },
      seconds: { type: 'string', default: '60' },
      workers: { type: 'string', default: '2' },
      'offset-mib': { type: 'string', default: '32' },
    },
  });
  if (values.nqn === undefined || positionals.length === 0) {
    console.error('usage: gateway-verify --nqn NQN [--seconds N] [--workers N] [--offset-mib N] HOST:PORT ...');
    return 2;
  }
  const seconds = Number(values.seconds);
  if (!Number.isFinite(seconds) || seconds <= 0) {
    console.error(`gateway-verify: --seconds ${values.seconds}: not a duration; use a number of seconds > 0, e.g. 60`);
    return 2;
  }
  const ac = new AbortController();
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => ac.abort());
  const r = await runGatewayVerify({
    nqn: values.nqn,
    hostnqn: values.hostnqn,
    gateways: positionals.map(parseHostPort),
    seconds,
    workers: Number(values.workers),
    offsetMiB: Number(values['offset-mib']),
    signal: ac.signal,
  });
  console.log(r.line);
  return r.ok ? 0 : 1;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(`gateway verify: ${err instanceof Error ? err.message : String(err)}`);
      process.exit(1);
    },
  );
}
