// Entry of a worker process (forked by WorkerPool with an IPC channel): waits for 'init', then serves the queues the
// primary sends. Exits 0 after 'stop'; exits 1 when the primary goes away (the IPC channel closes) so no worker
// outlives its target.
import type net from 'node:net';
import { pino, type LevelWithSilent } from 'pino';
import type { FromWorker, ToWorker } from './messages.js';
import { stderrLogStream } from './log-stream.js';
import { WorkerRuntime } from './worker.js';

function send(m: FromWorker): void {
  if (process.connected) process.send?.(m);
}

let rt: WorkerRuntime | undefined;
let chain: Promise<void> = Promise.resolve();

process.on('message', (m: ToWorker, socket: net.Socket | undefined) => {
  if (m.t === 'init') {
    // The inherited stderr, where the primary logs too and where a parent that counts error lines reads
    // (harness/fuzz/child.ts); stdout is the start-up lines' alone.
    const opts = { level: m.logLevel as LevelWithSilent, base: { worker: m.index, pid: process.pid } };
    const logger = pino(opts, stderrLogStream());
    const r = new WorkerRuntime(m.index, logger, send);
    rt = r;
    chain = r.init(m.ports, m.subsystems).then(
      () => {
        logger.info({ worker: m.index }, 'worker ready');
        send({ t: 'ready' });
      },
      (err: Error) => {
        send({ t: 'init-failed', reason: err.message });
        setTimeout(() => process.exit(1), 50);
      },
    );
    return;
  }
  const r = rt;
  // Cache invalidations are answered at once, not behind queued changes: a write in another process waits for it.
  // Without a runtime (still starting) nothing is cached yet, so the answer is true already.
  if (m.t === 'inv') {
    r?.invalidate(m.ranges);
    send({ t: 'inv-ack', seq: m.seq });
    return;
  }
  if (m.t === 'inv-done') {
    r?.invDone(m.seq);
    return;
  }
  // Links are taken at once too: the primary hands either worker queues only after both ends answered, each once the
  // other recorded its cache holds.
  if (m.t === 'peer') {
    if (r !== undefined) r.mesh.add(m.index, socket, () => send({ t: 'ack', seq: m.seq }));
    else {
      socket?.destroy();
      send({ t: 'ack', seq: m.seq });
    }
    return;
  }
  if (m.t === 'peer-gone') {
    r?.mesh.gone(m.index);
    return;
  }
  if (r === undefined) {
    if (m.t === 'stop') process.exit(0);
    return;
  }
  // Queues wait behind earlier changes (a subsystem the primary just added); what their sockets read meanwhile stays
  // in the socket's buffer and is handled first (TcpConnection.resume).
  socket?.on('error', () => undefined);
  chain = chain.then(() => r.handle(m, socket));
  if (m.t === 'stop') void chain.then(() => setTimeout(() => process.exit(0), 20));
});

process.on('disconnect', () => {
  const r = rt;
  if (r === undefined) process.exit(1);
  else void r.stop().finally(() => process.exit(1));
});
// SIGTERM/SIGINT go to the whole process group on Ctrl-C or from a service manager: the primary stops the workers.
process.on('SIGINT', () => undefined);
process.on('SIGTERM', () => undefined);
