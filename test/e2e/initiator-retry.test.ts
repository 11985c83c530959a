// Our initiator's Linux-style I/O retries against our target's failNext fault knob: a status without DNR is sent
// again up to max_retries (default 5, nvme_core.max_retries) times, DNR fails at once, and the target's own command
// counters show exactly the attempts the host made.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { NvmeStatusError, connect, type Controller } from '../../initiator/index.js';
import { Status } from '../../protocol/index.js';
import { TargetService } from '../../target/index.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const SUBNQN = 'nqn.2024-01.io.test:retry';
const DNR = 0x4000;

const cleanups = cleanupAfterEach();

async function setup(extra: Record<string, unknown> = {}): Promise<{ t: TargetService; c: Controller }> {
  const t = new TargetService();
  cleanups.push(() => t.stop());
  await t.apply({ ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] }] });
  const port = (t.boundPorts()[0] as { port: number }).port;
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: SUBNQN, nr_io_queues: 1, ...extra });
  cleanups.push(() => c.disconnect());
  return { t, c };
}

/** Reads, writes and namespace errors as the target counted them. */
function seen(t: TargetService): { read: number; write: number; reads: number; writes: number; errors: number } {
  const s = t.stats().subsystems[SUBNQN];
  const ns = s?.namespaces[0];
  return { read: s?.opcodes.read ?? 0, write: s?.opcodes.write ?? 0, reads: ns?.reads ?? 0, writes: ns?.writes ?? 0, errors: ns?.errors ?? 0 };
}

describe('initiator retries NVMe errors like Linux (against failNext)', () => {
  it.each([1, 3, 5])('a read failed %i time(s) without DNR succeeds on the retry, and the target saw every attempt', async (n) => {
    const { t, c } = await setup();
    const data = Buffer.alloc(4096, 0x6b);
    await c.namespace(1).write(8, data);
    t.setFaults(SUBNQN, { failNext: { count: n, status: Status.NS_NOT_READY } });
    expect((await c.namespace(1).read(8, 8)).equals(data)).toBe(true);
    expect(seen(t)).toEqual({ read: n + 1, write: 1, reads: 1, writes: 1, errors: n });
    expect(c.ioRetries).toBe(n);
    expect(t.getConfig().subsystems[0]?.faults).toBeUndefined();
  });

  it('a write failing 6 times (more than max_retries) fails with the status after 6 attempts', async () => {
    const { t, c } = await setup();
    t.setFaults(SUBNQN, { failNext: { count: 6, status: Status.NS_NOT_READY } });
    const err = await c.namespace(1).write(0, Buffer.alloc(512, 1)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NvmeStatusError);
    expect(err).toMatchObject({ status: Status.NS_NOT_READY, dnr: false });
    expect(seen(t)).toEqual({ read: 0, write: 6, reads: 0, writes: 0, errors: 6 });
  });

  it('DNR set: fails at once, one attempt, the rest of the fault left armed', async () => {
    const { t, c } = await setup();
    t.setFaults(SUBNQN, { failNext: { count: 3, status: Status.INVALID_FIELD | DNR } });
    await expect(c.namespace(1).read(0, 1)).rejects.toMatchObject({ status: Status.INVALID_FIELD | DNR, dnr: true });
    expect(seen(t)).toEqual({ read: 1, write: 0, reads: 0, writes: 0, errors: 1 });
    expect(c.ioRetries).toBe(0);
    expect(t.getConfig().subsystems[0]?.faults).toEqual({ failNext: { count: 2, status: Status.INVALID_FIELD | DNR } });
  });

  it('max_retries bounds the attempts (2 → 3 attempts; 0 → 1)', async () => {
    const { t, c } = await setup({ max_retries: 2 });
    t.setFaults(SUBNQN, { failNext: { count: 10, status: Status.NS_NOT_READY } });
    await expect(c.namespace(1).read(0, 1)).rejects.toMatchObject({ status: Status.NS_NOT_READY });
    expect(seen(t).read).toBe(3);
    const z = await setup({ max_retries: 0 });
    z.t.setFaults(SUBNQN, { failNext: { count: 1, status: Status.NS_NOT_READY } });
    await expect(z.c.namespace(1).read(0, 1)).rejects.toMatchObject({ status: Status.NS_NOT_READY });
    expect(seen(z.t).read).toBe(1);
  });
});
