// Reservations and namespace masking with target workers: reservation state has one owner and I/O queues on workers
// cannot consult it per command yet, so a multi-worker target offers no reservations (ONCS bit 5 clear, the four
// commands Invalid Opcode from the worker) instead of enforcing them on some queues only; namespace host masks reach
// the workers before the affected host's AEN, so I/O on a worker queue sees a detached namespace as absent.
import { afterEach, describe, expect, it } from 'vitest';
import { connect, type Controller } from '../../initiator/index.js';
import { NvmeStatusError, ONCS_RESERVATIONS, Status } from '../../protocol/index.js';
import { TargetService } from '../../target/index.js';

const NQN = 'nqn.2024-01.io.test:workers-resv';
const HOST_A = 'nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000a1';
const HOST_B = 'nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000b1';
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function start(workers: number): Promise<{ t: TargetService; port: number }> {
  const t = new TargetService({ workers, placement: 'queue' });
  cleanups.push(() => t.stop());
  const port = (await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 })).port;
  await t.addSubsystem({
    nqn: NQN,
    hosts: [HOST_A, HOST_B],
    namespaces: [
      { nsid: 1, backend: { type: 'ram', size: '4M' } },
      { nsid: 2, backend: { type: 'ram', size: '4M' }, hosts: [HOST_A, HOST_B] },
    ],
  });
  return { t, port };
}

async function host(port: number, hostnqn: string): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, hostnqn, nr_io_queues: 2, reconnect_delay: 0.05 });
  cleanups.push(() => c.disconnect());
  return c;
}

const statusOf = async (p: Promise<unknown>): Promise<number | string> => {
  try {
    await p;
    return 'ok';
  } catch (e) {
    return e instanceof NvmeStatusError ? e.status & 0x7ff : String(e);
  }
};

describe('target workers: reservations and masking', () => {
  it('one process offers reservations; with workers 2 the controller says it has none and the commands are Invalid Opcode', async () => {
    const one = await start(1);
    const c1 = await host(one.port, HOST_A);
    expect(c1.identify.oncs & ONCS_RESERVATIONS).toBe(ONCS_RESERVATIONS);
    expect(await statusOf(c1.namespace(1).reservation.register({ nrkey: 1n }))).toBe('ok');

    const two = await start(2);
    const c2 = await host(two.port, HOST_A);
    expect(c2.identify.oncs & ONCS_RESERVATIONS).toBe(0);
    expect(await statusOf(c2.namespace(1).reservation.register({ nrkey: 1n }))).toBe(Status.INVALID_OPCODE);
    expect(await statusOf(c2.namespace(1).reservation.report())).toBe(Status.INVALID_OPCODE);
    // The I/O queues really are on workers, so the refusal came from a worker.
    expect(two.t.listControllers().flatMap((c) => c.queues.filter((q) => q.qid > 0).map((q) => q.worker))).toEqual([0, 1]);
  }, 60_000);

  it('a host mask change reaches the workers: a detached namespace is absent for I/O on worker queues, the other host keeps it', async () => {
    const { t, port } = await start(2);
    const a = await host(port, HOST_A);
    const b = await host(port, HOST_B);
    const data = Buffer.alloc(4096, 0x5c);
    // Held from before the detach: the host's rescan drops namespace 2, but this handle still sends commands, which is
    // what a host that ignores the notice would do.
    const ns2 = a.namespace(2);
    await ns2.write(0n, data);
    const changed = new Promise<void>((resolve) => a.once('namespacesChanged', () => resolve()));
    t.detachNamespaceHost(NQN, 2, HOST_A);
    await changed;
    expect(await statusOf(ns2.read(0n, 8, undefined, { hctx: 0 }))).toBe(Status.INVALID_NS);
    expect(await statusOf(ns2.read(0n, 8, undefined, { hctx: 1 }))).toBe(Status.INVALID_NS);
    expect((await b.namespace(2).read(0n, 8)).equals(data)).toBe(true);
  }, 60_000);
});
