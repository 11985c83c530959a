// The first host-behaviour catalogue cases (docs/faults.md) against our initiator in this process: the target's
// fault rules make the failure, and the test checks what the host did about it.
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { NvmeStatusError, connect, type Controller } from '../../initiator/index.js';
import { DNR, NvmOpcode, Status } from '../../protocol/index.js';
import { armFault } from '../../harness/faults.js';
import { TargetService } from '../../target/index.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const SUBNQN = 'nqn.2024-01.io.test:fault-catalogue';
const cleanups = cleanupAfterEach();

async function target(): Promise<{ t: TargetService; port: number }> {
  const t = new TargetService();
  cleanups.push(() => t.stop());
  await t.apply({ ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] }] });
  return { t, port: (t.boundPorts()[0] as { port: number }).port };
}

async function host(port: number, extra: Record<string, unknown> = {}): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: SUBNQN, nr_io_queues: 1, ...extra });
  cleanups.push(() => c.disconnect());
  return c;
}

const hits = (t: TargetService, id: string): number | undefined => t.listFaultRules().find((r) => r.id === id)?.hits;

describe('catalogue: our initiator', () => {
  it('fewer queues granted than asked: the host runs with what it got', async () => {
    const { t, port } = await target();
    armFault(t, { id: 'few', action: { kind: 'grant-queues', count: 2 } });
    const c = await host(port, { nr_io_queues: 4 });
    expect(c.grantedQueues).toBe(2);
    expect(c.ioQueueCount).toBe(2);
    await c.namespace(1).write(0, Buffer.alloc(512, 3));
    expect((await c.namespace(1).read(0, 1)).equals(Buffer.alloc(512, 3))).toBe(true);
    expect(hits(t, 'few')).toBe(1);
  });

  it('the 2nd I/O-queue Connect refused with DNR: the connect fails with that status', async () => {
    const { t, port } = await target();
    armFault(t, { id: 'refuse', match: { event: 'connect', qid: 'io' }, schedule: { nth: 2 }, action: { kind: 'status', status: 'CONNECT_INVALID_PARAM', dnr: true } });
    const err = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: SUBNQN, nr_io_queues: 3, ctrl_loss_tmo: 0 }).then(
      (c) => {
        cleanups.push(() => c.disconnect());
        return c;
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(NvmeStatusError);
    expect(err).toMatchObject({ status: Status.CONNECT_INVALID_PARAM | DNR });
    expect(hits(t, 'refuse')).toBe(1);
  });

  it('a media error: exactly the bad range fails, without retries, until it is rewritten', async () => {
    const { t, port } = await target();
    const c = await host(port);
    const ns = c.namespace(1);
    await ns.write(0, Buffer.alloc(32 * 512, 5));
    armFault(t, { id: 'ure', match: { nsid: 1, lba: { start: 16, count: 4 } }, action: { kind: 'media-error' } });
    expect((await ns.read(0, 16)).equals(Buffer.alloc(16 * 512, 5))).toBe(true);
    expect((await ns.read(20, 12)).equals(Buffer.alloc(12 * 512, 5))).toBe(true);
    await expect(ns.read(19, 1)).rejects.toMatchObject({ status: Status.READ_ERROR | DNR, dnr: true });
    await expect(ns.read(8, 16)).rejects.toMatchObject({ status: Status.READ_ERROR | DNR });
    expect(c.ioRetries).toBe(0);
    await ns.write(16, Buffer.alloc(4 * 512, 9));
    expect((await ns.read(16, 4)).equals(Buffer.alloc(4 * 512, 9))).toBe(true);
    expect(hits(t, 'ure')).toBe(2);
  });

  it('a status without DNR on one read: the host retries it and the data comes back', async () => {
    const { t, port } = await target();
    const c = await host(port);
    await c.namespace(1).write(0, Buffer.alloc(512, 7));
    armFault(t, { id: 'nr', match: { opcode: NvmOpcode.READ }, schedule: { nth: 1 }, action: { kind: 'status', status: 'NS_NOT_READY' } });
    expect((await c.namespace(1).read(0, 1)).equals(Buffer.alloc(512, 7))).toBe(true);
    expect(c.ioRetries).toBe(1);
    expect(hits(t, 'nr')).toBe(1);
  });

  it('a read that never completes: the I/O timeout starts error recovery, and the read is retried on the new association', async () => {
    const { t, port } = await target();
    const c = await host(port, { io_timeout: 0.5, reconnect_delay: 0.1 });
    await c.namespace(1).write(0, Buffer.alloc(512, 4));
    armFault(t, { id: 'lost', match: { opcode: NvmOpcode.READ }, schedule: { nth: 1 }, action: { kind: 'drop' } });
    const reconnected = new Promise<void>((r) => c.once('reconnected', () => r()));
    const t0 = performance.now();
    const data = await c.namespace(1).read(0, 1);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(450);
    await reconnected;
    expect(data.equals(Buffer.alloc(512, 4))).toBe(true);
    expect(hits(t, 'lost')).toBe(1);
  });

  it('keep-alive silence while TCP stays up: the host keep-alive times out and it reconnects', async () => {
    const { t, port } = await target();
    const c = await host(port, { keep_alive_tmo: 1, reconnect_delay: 0.1 });
    armFault(t, { id: 'silent', match: { event: 'keep-alive' }, schedule: { times: 1 }, action: { kind: 'drop' } });
    await new Promise<void>((r) => c.once('reconnected', () => r()));
    expect(hits(t, 'silent')).toBe(1);
    await c.namespace(1).write(0, Buffer.alloc(512, 2));
    expect((await c.namespace(1).read(0, 1)).equals(Buffer.alloc(512, 2))).toBe(true);
  });

  it('ANA inaccessible with the AEN: the host learns the state from the ANA log before any I/O fails', async () => {
    const { t, port } = await target();
    const c = await host(port);
    const changed = new Promise<void>((r) => c.once('anaChange', () => r()));
    armFault(t, { id: 'ana', match: { opcode: NvmOpcode.FLUSH }, schedule: { nth: 1 }, action: { kind: 'ana', group: 1, state: 'inaccessible' } });
    await c.namespace(1).flush();
    await changed;
    expect(c.anaStates.get(1)).toBe('inaccessible');
  });

  it('ANA inaccessible without the AEN: without multipath the host retries the path error max_retries times, then fails', async () => {
    const { t, port } = await target();
    const c = await host(port);
    armFault(t, { id: 'ana', match: { opcode: NvmOpcode.FLUSH }, schedule: { nth: 1 }, action: { kind: 'ana', group: 1, state: 'inaccessible', aen: false } });
    await c.namespace(1).flush();
    expect(c.anaStates.get(1)).toBe('optimized');
    await expect(c.namespace(1).read(0, 1)).rejects.toMatchObject({ status: Status.ANA_INACCESSIBLE, dnr: false });
    expect(c.ioRetries).toBe(5);
    expect(t.stats().subsystems[SUBNQN]?.opcodes.read).toBe(6);
  });
});
