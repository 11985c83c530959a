// Connections held by `nvme-tcp connect --hold`: a state file per holding process (its queues, refreshed each
// second) and a Unix control socket, through which `queues --set-worker`, `disconnect` and `disconnect-all` reach it.
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { readFile, readdir, unlink, writeFile } from 'node:fs/promises';
import type { Controller, QueueInfo } from '../initiator/index.js';
import { table, UsageError } from './args.js';

/** Where `connect --hold` records its queues and `queues` / `check-host --queues-from` read them. */
export function stateDir(): string {
  return path.join(os.tmpdir(), 'nvme-tcp-ts');
}

/** The queues of a controller as an aligned table. */
export function queueTable(qs: readonly QueueInfo[]): string {
  const head = ['qid', 'hctx', 'type', 'owner', 'cpu', 'source', 'destination', 'state', 'inflight', 'submitted', 'completed', 'bytes', 'errors'];
  const rows = qs.map((q) => [q.qid, q.hctx, q.type, q.owner, q.cpu ?? '-', q.source, q.destination, q.state, q.inFlight, q.submitted, q.completed, q.bytes, q.errors].map(String));
  return table(head, rows);
}

export interface StateFile {
  pid: number;
  /** Unix socket of the holding process: `queues --set-worker` sends its request there. */
  control?: string;
  controller: { cntlid: number; subnqn: string; traddr: string; trsvcid: number; hostnqn?: string };
  queues: QueueInfo[];
  updated: string;
}

export async function writeState(c: Controller, file: string, control?: string): Promise<void> {
  const st: StateFile = {
    pid: process.pid,
    ...(control !== undefined ? { control } : {}),
    controller: { cntlid: c.cntlid, subnqn: c.opts.nqn, traddr: c.opts.traddr, trsvcid: c.opts.trsvcid, hostnqn: c.opts.hostnqn },
    queues: c.queueInfo(),
    updated: new Date().toISOString(),
  };
  await writeFile(file, JSON.stringify(st, null, 2));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export async function readStates(): Promise<Array<StateFile & { file: string }>> {
  const dir = stateDir();
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  const out: Array<StateFile & { file: string }> = [];
  for (const n of names.filter((x) => x.startsWith('held-') && x.endsWith('.json'))) {
    const file = path.join(dir, n);
    try {
      const st = JSON.parse(await readFile(file, 'utf8')) as StateFile;
      if (alive(st.pid)) out.push({ ...st, file });
    } catch {
      // a half-written or foreign file: skip it
    }
  }
  return out;
}


/** A held connection's control socket: one JSON request per connection ({ op: 'set-worker', qid, worker }). */
export async function serveControl(c: Controller, sockPath: string, refresh: () => Promise<void>, onDisconnect: () => void): Promise<net.Server> {
  await unlink(sockPath).catch(() => undefined);
  const server = net.createServer((sock) => {
    let buf = '';
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      const line = buf.slice(0, nl);
      void (async () => {
        let reply: unknown;
        try {
          const req = JSON.parse(line) as { op?: unknown; qid?: unknown; worker?: unknown };
          if (req.op === 'disconnect') {
            reply = { ok: true };
            sock.end(JSON.stringify(reply) + '\n', onDisconnect);
            return;
          }
          if (req.op !== 'set-worker' || typeof req.qid !== 'number' || typeof req.worker !== 'number') throw new UsageError('bad control request');
          await c.setQueueWorker(req.qid, req.worker);
          await refresh().catch(() => undefined);
          reply = { ok: true, queues: c.queueInfo() };
        } catch (e) {
          const err = e as Error & { code?: string };
          reply = { ok: false, message: err.message, code: err.code ?? (e instanceof UsageError ? 'USAGE' : undefined) };
        }
        sock.end(JSON.stringify(reply) + '\n');
      })();
    });
    sock.on('error', () => undefined);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(sockPath, () => resolve());
  });
  server.unref();
  return server;
}

export type ControlReply = { ok: boolean; message?: string; code?: string; queues?: QueueInfo[] };

/** Sends one request to a holding process's control socket; resolves to its reply. */
export function controlRequest(st: StateFile, req: Record<string, unknown>): Promise<ControlReply> {
  if (st.control === undefined) return Promise.reject(new UsageError(`pid ${st.pid} has no control socket`));
  return new Promise<ControlReply>((resolve, reject) => {
    const sock = net.connect(st.control as string);
    let buf = '';
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => (buf += d));
    sock.on('end', () => {
      try {
        resolve(JSON.parse(buf) as ControlReply);
      } catch (e) {
        reject(e instanceof Error ? e : new Error(String(e)));
      }
    });
    sock.on('error', reject);
    sock.write(JSON.stringify(req) + '\n');
  });
}
