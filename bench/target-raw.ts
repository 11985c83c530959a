// Raw NVMe/TCP load against the TS target: one I/O connection, random 4 KiB reads at QD 1/32/128 and 128 KiB reads at
// QD16, with and without data digest. Target and load generator are pinned to the same CPU (docs/performance.md, Benchmarks: unpinned
// runs are bimodal). Usage: npx tsx bench/target-raw.ts [seconds-per-case]
import { Buffer } from 'node:buffer';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import {
  NvmOpcode,
  PropertyOffset,
  PduReader,
  PduType,
  decodeCqe,
  encodeConnectCmd,
  encodeCc,
  encodeConnectData,
  encodePropertySetCmd,
  encodePdu,
  encodeRwCmd,
  sglInCapsule,
  sglTransport,
  type Pdu,
  type PduFraming,
} from '../protocol/index.js';

const SUBNQN = 'nqn.2024-01.io.nvme-ts:bench';
const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-7000000000be';
const NS_BYTES = 256 * 1024 * 1024;

async function server(): Promise<void> {
  const { TargetService } = await import('../target/service/index.js');
  const svc = new TargetService();
  await svc.apply({ ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: NS_BYTES } }] }] });
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  process.stdout.write(`PORT ${svc.boundPorts()[0]?.port}\n`);
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (line: string) => {
    if (line.startsWith('reset')) h.reset();
    if (line.startsWith('lag')) process.stdout.write(`LAG ${(h.percentile(99) / 1e6).toFixed(2)}\n`);
    if (line.startsWith('quit')) void svc.stop().then(() => process.exit(0));
  });
}

class Conn {
  readonly sock: net.Socket;
  framing: PduFraming = { hdgst: false, ddgst: false, pda: 0 };
  readonly reader: PduReader;
  onPdu: (p: Pdu) => void = () => undefined;
  constructor(port: number) {
    this.sock = net.connect({ host: '127.0.0.1', port });
    this.sock.setNoDelay(true);
    this.reader = new PduReader({
      role: 'host',
      onPdu: (p) => this.onPdu(p),
      onFatal: (f) => {
        throw new Error(`bench: fatal ${f.reason}`);
      },
    });
    this.sock.on('data', (c: Buffer) => this.reader.push(c));
  }
  next(): Promise<Pdu> {
    return new Promise((r) => (this.onPdu = r));
  }
  async setup(ddgst: boolean, qid: number, cntlid: number): Promise<number> {
    await new Promise((r) => this.sock.once('connect', r));
    const w = this.next();
    this.sock.write(Buffer.concat(encodePdu({ type: PduType.IC_REQ, pfv: 0, hpda: 0, dgst: ddgst ? 2 : 0, maxr2t: 0 })));
    await w;
    this.framing = { hdgst: false, ddgst, pda: 0 };
    this.reader.setFraming(false, ddgst, 0);
    const c = this.next();
    const sqe = encodeConnectCmd({ cid: 1, qid, sqsize: qid === 0 ? 31 : 255, kato: 0, sgl: sglInCapsule(1024) });
    const data = encodeConnectData({ hostid: Buffer.alloc(16, 0xbe), cntlid, subnqn: SUBNQN, hostnqn: HOSTNQN });
    this.sock.write(Buffer.concat(encodePdu({ type: PduType.CAPSULE_CMD, sqe, data: [data] }, this.framing)));
    const r = await c;
    if (r.type !== PduType.CAPSULE_RESP) throw new Error('bench: connect');
    return decodeCqe(r.cqe).dw0 & 0xffff;
  }
  async cmd(sqe: Buffer): Promise<void> {
    const w = this.next();
    this.sock.write(Buffer.concat(encodePdu({ type: PduType.CAPSULE_CMD, sqe, data: [] }, this.framing)));
    await w;
  }
}

interface Result {
  name: string;
  iops: number;
  mbps: number;
  p50: number;
  p99: number;
  lag: string;
}

async function run(port: number, ask: (cmd: string) => Promise<string>, name: string, bs: number, qd: number, ddgst: boolean, seconds: number): Promise<Result> {
  const admin = new Conn(port);
  const cntlid = await admin.setup(false, 0, 0xffff);
  await admin.cmd(encodePropertySetCmd({ cid: 2, offset: PropertyOffset.CC, value: BigInt(encodeCc({ en: true, iosqes: 6, iocqes: 4 })) }));
  const io = new Conn(port);
  await io.setup(ddgst, 1, cntlid);
  const nlb = bs / 512;
  const maxLba = NS_BYTES / 512 - nlb;
  const sqes: Buffer[] = [];
  for (let cid = 0; cid < qd; cid++) sqes.push(encodeRwCmd({ opcode: NvmOpcode.READ, cid, nsid: 1, slba: 0n, nlb, sgl: sglTransport(bs) }));
  const lat: number[] = [];
  const start = new Array<bigint>(qd).fill(0n);
  let done = 0;
  let stop = false;
  const t0 = process.hrtime.bigint();
  const end = t0 + BigInt(seconds * 1e9);
  const submit = (cid: number): void => {
    const sqe = sqes[cid] as Buffer;
    const lba = Math.floor((Math.random() * maxLba) / nlb) * nlb;
    sqe.writeUInt32LE(lba, 40);
    start[cid] = process.hrtime.bigint();
    for (const b of encodePdu({ type: PduType.CAPSULE_CMD, sqe, data: [] }, io.framing)) io.sock.write(b);
  };
  await ask('reset');
  const finished = new Promise<void>((resolve) => {
    let outstanding = qd;
    io.onPdu = (p) => {
      let cid: number;
      if (p.type === PduType.CAPSULE_RESP) cid = p.cqe.readUInt16LE(12);
      else if (p.type === PduType.C2H_DATA && p.success) cid = p.cccid;
      else return;
      const now = process.hrtime.bigint();
      if ((done & 7) === 0) lat.push(Number(now - (start[cid] as bigint)) / 1000);
      done++;
      if (!stop && now < end) {
        io.sock.cork();
        submit(cid);
        process.nextTick(() => io.sock.uncork());
      } else {
        stop = true;
        if (--outstanding === 0) resolve();
      }
    };
  });
  io.sock.cork();
  for (let cid = 0; cid < qd; cid++) submit(cid);
  io.sock.uncork();
  await finished;
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  const lag = await ask('lag');
  io.sock.destroy();
  admin.sock.destroy();
  lat.sort((a, b) => a - b);
  const pct = (q: number): number => lat[Math.min(lat.length - 1, Math.floor(q * lat.length))] ?? 0;
  return { name, iops: done / secs, mbps: (done * bs) / secs / 1e6, p50: pct(0.5), p99: pct(0.99), lag };
}

async function main(): Promise<void> {
  if (process.argv[2] === '--server') return server();
  const seconds = Number(process.argv[2] ?? 3);
  const self = fileURLToPath(import.meta.url);
  if (process.env.NVME_BENCH_PINNED !== '1') {
    const r = spawnSync('taskset', ['-c', '0', process.execPath, ...process.execArgv, self, ...process.argv.slice(2)], { stdio: 'inherit', env: { ...process.env, NVME_BENCH_PINNED: '1' } });
    process.exit(r.status ?? 1);
  }
  const child: ChildProcess = spawn('taskset', ['-c', '0', process.execPath, ...process.execArgv, self, '--server'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines: string[] = [];
  let waiter: ((l: string) => void) | undefined;
  let buf = '';
  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (d: string) => {
    buf += d;
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const l = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (waiter !== undefined) {
        const w = waiter;
        waiter = undefined;
        w(l);
      } else lines.push(l);
    }
  });
  const nextLine = (): Promise<string> => (lines.length > 0 ? Promise.resolve(lines.shift() as string) : new Promise((r) => (waiter = r)));
  const port = Number((await nextLine()).split(' ')[1]);
  const ask = async (cmd: string): Promise<string> => {
    child.stdin?.write(`${cmd}\n`);
    if (cmd === 'lag') return (await nextLine()).split(' ')[1] ?? '?';
    return '';
  };
  const cases: Array<[string, number, number, boolean]> = [
    ['4k-qd1', 4096, 1, false],
    ['4k-qd32', 4096, 32, false],
    ['4k-qd128', 4096, 128, false],
    ['128k-qd16', 131072, 16, false],
    ['4k-qd32-ddgst', 4096, 32, true],
    ['128k-qd16-ddgst', 131072, 16, true],
  ];
  const results: Result[] = [];
  for (const [name, bs, qd, dd] of cases) results.push(await run(port, ask, name, bs, qd, dd, seconds));
  child.stdin?.write('quit\n');
  console.log('case              IOPS      MB/s   p50(us)  p99(us)  target-loop-lag-p99(ms)');
  for (const r of results) console.log(`${r.name.padEnd(17)} ${Math.round(r.iops).toString().padStart(8)} ${r.mbps.toFixed(0).padStart(8)} ${r.p50.toFixed(1).padStart(8)} ${r.p99.toFixed(1).padStart(8)}  ${r.lag}`);
  const by = (n: string): Result | undefined => results.find((r) => r.name === n);
  const ratio = (a?: Result, b?: Result): string => (a && b ? `${((1 - a.iops / b.iops) * 100).toFixed(1)}%` : '?');
  console.log(`data digest cost: 4k-qd32 ${ratio(by('4k-qd32-ddgst'), by('4k-qd32'))}, 128k-qd16 ${ratio(by('128k-qd16-ddgst'), by('128k-qd16'))}`);
}

void main();
