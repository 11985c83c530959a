// Keep-alive spans I/O queue setup (NVMe Base 2.0 §3.9: the controller's KATO runs from the admin Connect). A relay
// holds back every I/O queue's Connect capsule for longer than 2 × KATO, so setup outlasts KATO; the controller
// must survive it on keep-alives alone (the target records each one), keep sending them once live, and do the
// same through a forced reconnect. With keep-alive started only after the I/O queues, the target expires the
// controller during setup and connect() fails.
import { Buffer } from 'node:buffer';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { connect, type Controller } from '../../initiator/index.js';
import { ConnectCmdOffset } from '../../protocol/index.js';
import { TargetService } from '../../target/index.js';
import { HOSTNQN, SUBNQN, defaultSubsystem } from './target-dataplane/fixture.js';

const KATO_S = 1;
const IO_CONNECT_HOLD_MS = 2500;
/** ICReq PDU length (NVMe-TCP 1.0 §3.6.2.2), then the Connect capsule: 8-byte common header + 64-byte SQE. */
const ICREQ_LEN = 128;
const CAPSULE_HDR = 8;
const CONNECT_HEAD = CAPSULE_HDR + 64;

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A relay that passes the admin queue through and holds each I/O queue's Connect (and what follows) for holdMs. */
async function slowIoConnectRelay(upstreamPort: number, holdMs: number): Promise<{ port: number; held: () => number; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let held = 0;
  const server = net.createServer((client) => {
    const up = net.connect({ host: '127.0.0.1', port: upstreamPort });
    for (const s of [client, up]) {
      sockets.add(s);
      s.setNoDelay(true);
      s.on('error', () => undefined);
      s.on('close', () => {
        sockets.delete(s);
        client.destroy();
        up.destroy();
      });
    }
    up.on('data', (b: Buffer) => client.write(b));
    let state: 'head' | 'hold' | 'pass' = 'head';
    let icForwarded = 0;
    let head = Buffer.alloc(0);
    const pending: Buffer[] = [];
    client.on('data', (chunk: Buffer) => {
      if (state === 'pass') return void up.write(chunk);
      if (state === 'hold') return void pending.push(chunk);
      let b = chunk;
      if (icForwarded < ICREQ_LEN) {
        const n = Math.min(ICREQ_LEN - icForwarded, b.length);
        up.write(b.subarray(0, n));
        icForwarded += n;
        b = b.subarray(n);
      }
      head = Buffer.concat([head, b]);
      if (head.length < CONNECT_HEAD) return;
      const qid = head.readUInt16LE(CAPSULE_HDR + ConnectCmdOffset.qid);
      if (qid === 0) {
        state = 'pass';
        up.write(head);
        return;
      }
      state = 'hold';
      held++;
      pending.push(head);
      const t = setTimeout(() => {
        timers.delete(t);
        for (const p of pending.splice(0)) up.write(p);
        state = 'pass';
      }, holdMs);
      timers.add(t);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    held: () => held,
    close: async () => {
      for (const t of timers) clearTimeout(t);
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** Distinct Keep Alive arrival times the target recorded for our subsystem's controller(s), sampled until `done`. */
function sampleKeepAlives(svc: TargetService): { seen: Set<string>; stop: () => void } {
  const seen = new Set<string>();
  const t = setInterval(() => {
    for (const c of svc.listControllers()) {
      if (c.subnqn === SUBNQN && c.lastKeepAlive !== null) seen.add(`${c.cntlid}@${c.lastKeepAlive}`);
    }
  }, 50);
  return { seen, stop: () => clearInterval(t) };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('keep-alive during a slow I/O queue setup', () => {
  for (const ioWorkers of [0, 1]) {
    it(`io_workers ${ioWorkers}: survives setup longer than KATO, keeps alive after it, and again through a reconnect`, async () => {
      const svc = new TargetService();
      await svc.apply({ ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [defaultSubsystem()] });
      cleanups.push(() => svc.stop());
      const relay = await slowIoConnectRelay((svc.boundPorts()[0] as { port: number }).port, IO_CONNECT_HOLD_MS);
      cleanups.push(() => relay.close());

      const during = sampleKeepAlives(svc);
      cleanups.push(during.stop);
      const t0 = Date.now();
      const ctrl: Controller = await connect({
        traddr: '127.0.0.1',
        trsvcid: relay.port,
        nqn: SUBNQN,
        hostnqn: HOSTNQN,
        nr_io_queues: 2,
        keep_alive_tmo: KATO_S,
        io_workers: ioWorkers,
        reconnect_delay: 0.1,
        ctrl_loss_tmo: 30,
      });
      cleanups.push(async () => {
        await ctrl.disconnect().catch(() => undefined);
      });
      during.stop();
      expect(Date.now() - t0).toBeGreaterThan(IO_CONNECT_HOLD_MS);
      expect(relay.held()).toBe(2);
      expect(ctrl.state).toBe('live');
      expect(ctrl.ioQueueCount).toBe(2);
      const cntlid = ctrl.cntlid;
      // KATO 1 s with TBKAS: a Keep Alive every 250 ms once no completion arrives; 2.5 s of held Connects need several.
      expect([...during.seen].filter((s) => s.startsWith(`${cntlid}@`)).length).toBeGreaterThanOrEqual(3);

      // Live and idle for 2 × KATO: keep-alive carries on, the target expires nothing.
      const after = sampleKeepAlives(svc);
      cleanups.push(after.stop);
      await sleep(2 * KATO_S * 1000);
      after.stop();
      expect(after.seen.size).toBeGreaterThanOrEqual(2);
      expect(ctrl.state).toBe('live');
      expect(ctrl.cntlid).toBe(cntlid);
      expect(svc.stats().katoExpiries).toBe(0);

      // A forced reconnect goes through the same slow setup with a new controller.
      const reconnected = new Promise<number>((resolve) => ctrl.once('reconnected', resolve));
      const again = sampleKeepAlives(svc);
      cleanups.push(again.stop);
      ctrl.reset();
      const cntlid2 = await reconnected;
      again.stop();
      expect(relay.held()).toBe(4);
      expect(cntlid2).not.toBe(cntlid);
      expect([...again.seen].filter((s) => s.startsWith(`${cntlid2}@`)).length).toBeGreaterThanOrEqual(3);
      const afterReconnect = sampleKeepAlives(svc);
      cleanups.push(afterReconnect.stop);
      await sleep(2 * KATO_S * 1000);
      afterReconnect.stop();
      expect([...afterReconnect.seen].filter((s) => s.startsWith(`${cntlid2}@`)).length).toBeGreaterThanOrEqual(2);
      expect(ctrl.state).toBe('live');
      expect(svc.stats().katoExpiries).toBe(0);
      // I/O works on the reconnected queues.
      const buf = Buffer.alloc(512);
      await ctrl.namespace(1).read(0, 1, buf);
    }, 30_000);
  }
});
