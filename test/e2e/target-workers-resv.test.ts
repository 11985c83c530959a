// Reservations and namespace masking with target workers. The primary owns each namespace's reservation state;
// Register / Acquire / Release arriving on a worker's queue are run there, and a change completes only once every
// worker applied it, so the very next I/O on any worker is decided on the new state. Report is answered from the
// worker's copy. Placement queue puts one host's two I/O queues on two workers; placement controller puts two hosts
// on two workers. Namespace host masks reach the workers before the affected host's AEN.
import { afterEach, describe, expect, it } from 'vitest';
import { statusOf } from '../fixtures/status-of.js';
import { connect, type Controller } from '../../initiator/index.js';
import { FeatureId, NvmOpcode, ONCS_RESERVATIONS, RESV_PERSIST_PTPL, RESV_REPORT_EDS, Status, decodeResvStatus, encodeSetFeaturesCmd, encodeResvAcquireCdw10, encodeResvCmd, encodeResvKeys, encodeResvRegisterCdw10, encodeResvReleaseCdw10, encodeResvReleaseData } from '../../protocol/index.js';
import { TargetService } from '../../target/index.js';
import type { Placement } from '../../target/workers/index.js';

const NQN = 'nqn.2024-01.io.test:workers-resv';
const HOST_A = 'nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000a1';
const HOST_B = 'nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000b1';
const CONFLICT = Status.RESERVATION_CONFLICT;
const PREEMPT_ABORTED = 0x1b; // Command Aborted due to Preempt and Abort
const KEY_A = 0xa1n;
const KEY_B = 0xb2n;
const block = Buffer.alloc(512, 0x3c);
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function start(workers: number, placement: Placement): Promise<{ t: TargetService; port: number }> {
  const t = new TargetService({ workers, placement });
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

async function host(port: number, hostnqn: string, queues: number): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, hostnqn, nr_io_queues: queues, reconnect_delay: 0.05 });
  cleanups.push(() => c.disconnect());
  return c;
}

const sc = statusOf;

/** A reservation command on one chosen hctx (the library's ns.reservation always uses hctx 0). */
function resv(c: Controller, hctx: number, opcode: number, cdw10: number, data: Buffer): Promise<unknown> {
  const sqe = encodeResvCmd({ opcode, cid: 0, nsid: 1, cdw10 });
  return c.execIo(() => ({ sqe, h2c: data, timeoutMs: 5000 }), { write: true, hctx });
}
const register = (c: Controller, hctx: number, nrkey: bigint): Promise<unknown> => resv(c, hctx, NvmOpcode.RESV_REGISTER, encodeResvRegisterCdw10({ rrega: 0, iekey: false, cptpl: 0 }), encodeResvKeys(0n, nrkey));
const acquire = (c: Controller, hctx: number, crkey: bigint, rtype: number, racqa = 0, prkey = 0n): Promise<unknown> =>
  resv(c, hctx, NvmOpcode.RESV_ACQUIRE, encodeResvAcquireCdw10({ racqa, iekey: false, rtype }), encodeResvKeys(crkey, prkey));
const release = (c: Controller, hctx: number, crkey: bigint, rtype: number, rrela = 0): Promise<unknown> =>
  resv(c, hctx, NvmOpcode.RESV_RELEASE, encodeResvReleaseCdw10({ rrela, iekey: false, rtype }), encodeResvReleaseData(crkey));
/** Reservation Report (extended data structure) on one chosen hctx. */
async function reportOn(c: Controller, hctx: number): Promise<ReturnType<typeof decodeResvStatus>> {
  const buf = Buffer.alloc(4096);
  const sqe = encodeResvCmd({ opcode: NvmOpcode.RESV_REPORT, cid: 0, nsid: 1, cdw10: buf.length / 4 - 1, cdw11: RESV_REPORT_EDS });
  await c.execIo(() => ({ sqe, c2h: buf, timeoutMs: 5000 }), { write: false, hctx });
  return decodeResvStatus(buf, true);
}
const write = (c: Controller, hctx: number): Promise<unknown> => c.namespace(1).write(0, block, { hctx });
const read = (c: Controller, hctx: number): Promise<unknown> => c.namespace(1).read(0, 1, undefined, { hctx });

function workersOf(t: TargetService, hostnqn: string): Array<number | undefined> {
  return t.listControllers().filter((c) => c.hostnqn === hostnqn).flatMap((c) => c.queues.filter((q) => q.qid > 0).map((q) => q.worker));
}

describe('target workers: reservations', () => {
  it('placement queue: commands on either worker change the one state, and every I/O on every worker meets it at once', async () => {
    const { t, port } = await start(2, 'queue');
    const a = await host(port, HOST_A, 2);
    const b = await host(port, HOST_B, 2);
    expect(workersOf(t, HOST_A)).toEqual([0, 1]);
    expect(workersOf(t, HOST_B)).toEqual([0, 1]);
    expect(a.identify.oncs & ONCS_RESERVATIONS).toBe(ONCS_RESERVATIONS);

    // A registers on worker 0 and acquires Write Exclusive on worker 1; B registers on worker 1.
    expect(await sc(register(a, 0, KEY_A))).toBe(0);
    expect(await sc(register(b, 1, KEY_B))).toBe(0);
    expect(await sc(register(b, 0, 0xbbn))).toBe(CONFLICT); // the registration made on worker 1 is known on worker 0
    expect(await sc(acquire(a, 1, KEY_A, 1))).toBe(0);
    // No wait: the acquire completed only after both workers had the new state.
    expect([await sc(write(b, 0)), await sc(write(b, 1))]).toEqual([CONFLICT, CONFLICT]);
    expect([await sc(write(a, 0)), await sc(write(a, 1))]).toEqual([0, 0]);
    expect([await sc(read(b, 0)), await sc(read(b, 1))]).toEqual([0, 0]);
    expect(await sc(acquire(b, 0, KEY_B, 1))).toBe(CONFLICT);
    // Report from each worker's copy and the primary's state agree.
    const r = await b.namespace(1).reservation.report();
    expect({ gen: r.gen, rtype: r.rtype, regs: r.regctls.map((x) => [x.rkey, x.holder]) }).toEqual({ gen: 2, rtype: 1, regs: [[KEY_A, true], [KEY_B, false]] });
    expect(t.reservationStatus(NQN, 1)).toMatchObject({ rtype: 1, gen: 2 });

    // Exclusive Access after a release on the other worker: B's reads now conflict on both.
    expect(await sc(release(a, 0, KEY_A, 1))).toBe(0);
    expect(await sc(write(b, 1))).toBe(0);
    expect(await sc(acquire(a, 0, KEY_A, 2))).toBe(0);
    expect([await sc(read(b, 0)), await sc(read(b, 1))]).toEqual([CONFLICT, CONFLICT]);
    // B preempts on worker 1: A is no longer a registrant anywhere.
    expect(await sc(acquire(b, 1, KEY_B, 2, 1, KEY_A))).toBe(0);
    expect([await sc(read(a, 0)), await sc(read(a, 1))]).toEqual([CONFLICT, CONFLICT]);
    expect([await sc(read(b, 0)), await sc(write(b, 1))]).toEqual([0, 0]);
    // Clear on worker 0 ends it for both workers.
    expect(await sc(release(b, 0, KEY_B, 0, 1))).toBe(0);
    expect([await sc(write(a, 0)), await sc(write(a, 1))]).toEqual([0, 0]);
    expect((await a.namespace(1).reservation.report()).regctls).toEqual([]);
  }, 60_000);

  it('placement controller: two hosts on two workers; preempt-and-abort from one aborts the commands the other has queued', async () => {
    const { t, port } = await start(2, 'controller');
    const a = await host(port, HOST_A, 1);
    const b = await host(port, HOST_B, 1);
    const wa = workersOf(t, HOST_A);
    const wb = workersOf(t, HOST_B);
    expect(wa).toHaveLength(1);
    expect(wb).toHaveLength(1);
    expect(wa[0]).not.toBe(wb[0]);

    expect(await sc(a.namespace(1).reservation.register({ nrkey: KEY_A }))).toBe(0);
    expect(await sc(b.namespace(1).reservation.register({ nrkey: KEY_B }))).toBe(0);
    expect(await sc(a.namespace(1).reservation.acquire({ crkey: KEY_A, rtype: 2 }))).toBe(0);
    expect(await sc(read(b, 0))).toBe(CONFLICT);
    // A's commands sit on A's worker (held by the fault latency); B preempts with abort from the other worker.
    t.setFaults(NQN, { commandLatencyUs: 400_000 });
    try {
      await new Promise((r) => setTimeout(r, 200)); // the faults reach the workers
      const queued = [0, 1, 2, 3].map((i) => sc(a.namespace(1).write(i, block)));
      await new Promise((r) => setTimeout(r, 50));
      expect(await sc(b.namespace(1).reservation.acquire({ crkey: KEY_B, rtype: 2, racqa: 2, prkey: KEY_A }))).toBe(0);
      expect(await Promise.all(queued)).toEqual([PREEMPT_ABORTED, PREEMPT_ABORTED, PREEMPT_ABORTED, PREEMPT_ABORTED]);
    } finally {
      t.setFaults(NQN, {});
    }
    expect(await sc(read(a, 0))).toBe(CONFLICT);
    expect(await sc(read(b, 0))).toBe(0);
    // The preempted host got its notification (log page 80h through the AEN) from the primary, as in one process.
    const r = await a.namespace(1).reservation.report();
    expect({ rtype: r.rtype, regs: r.regctls.map((x) => [x.rkey, x.holder]) }).toEqual({ rtype: 2, regs: [[KEY_B, true]] });
  }, 60_000);

  it('a change completes only after every worker applied it: with worker 1 stopped, an acquire on worker 0 waits for it', async () => {
    const { t, port } = await start(2, 'queue');
    const a = await host(port, HOST_A, 2);
    const b = await host(port, HOST_B, 2);
    expect(await sc(register(a, 0, KEY_A))).toBe(0);
    const pid = t.workers()[1]?.pid as number;
    process.kill(pid, 'SIGSTOP');
    let done = false;
    let acq: Promise<number | string>;
    try {
      acq = sc(acquire(a, 0, KEY_A, 1)).then((s) => ((done = true), s));
      await new Promise((r) => setTimeout(r, 400));
      expect(done, 'the acquire completed while worker 1 had not applied it').toBe(false);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    expect(await acq).toBe(0);
    expect(await sc(write(b, 1))).toBe(CONFLICT);
  }, 60_000);

  it('Set Features Reservation Persistence completes only after every worker applied it; a Report on either worker then shows PTPLS', async () => {
    const { t, port } = await start(2, 'queue');
    const a = await host(port, HOST_A, 2);
    expect(await sc(register(a, 0, KEY_A))).toBe(0);
    expect(new Set(workersOf(t, HOST_A))).toEqual(new Set([0, 1]));
    const pid = t.workers()[1]?.pid as number;
    process.kill(pid, 'SIGSTOP');
    let done = false;
    let set: Promise<number | string>;
    try {
      set = sc(a.adminCommand(encodeSetFeaturesCmd({ cid: 0, fid: FeatureId.RESV_PERSIST, nsid: 1, cdw11: RESV_PERSIST_PTPL }))).then((s) => ((done = true), s));
      await new Promise((r) => setTimeout(r, 400));
      expect(done, 'Set Features 83h completed while worker 1 had not applied it').toBe(false);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    expect(await set).toBe(0);
    for (const hctx of [0, 1]) expect((await reportOn(a, hctx)).ptpls, `PTPLS on hctx ${hctx}`).toBe(true);
  }, 60_000);

  it('a restarted worker starts from the primary state (the holder is still enforced on it)', async () => {
    const { t, port } = await start(2, 'queue');
    const a = await host(port, HOST_A, 2);
    expect(await sc(a.namespace(1).reservation.register({ nrkey: KEY_A }))).toBe(0);
    expect(await sc(a.namespace(1).reservation.acquire({ crkey: KEY_A, rtype: 1 }))).toBe(0);
    const pid = t.workers()[1]?.pid;
    expect(pid).toBeTypeOf('number');
    process.kill(pid as number, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 300));
    const deadline = Date.now() + 30_000;
    while (t.workers()[1]?.state !== 'ready' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(t.workers()[1]?.state).toBe('ready');
    // B's two queues: one lands on the restarted worker.
    const b = await host(port, HOST_B, 2);
    expect(workersOf(t, HOST_B).sort()).toEqual([0, 1]);
    expect([await sc(write(b, 0)), await sc(write(b, 1))]).toEqual([CONFLICT, CONFLICT]);
    expect(await sc(b.namespace(1).reservation.report())).toBe(0);
  }, 60_000);
});

describe('target workers: masking', () => {
  it('a host mask change reaches the workers: a detached namespace is absent for I/O on worker queues, the other host keeps it', async () => {
    const { t, port } = await start(2, 'queue');
    const a = await host(port, HOST_A, 2);
    const b = await host(port, HOST_B, 2);
    const data = Buffer.alloc(4096, 0x5c);
    // Held from before the detach: the host's rescan drops namespace 2, but this handle still sends commands, which is
    // what a host that ignores the notice would do.
    const ns2 = a.namespace(2);
    await ns2.write(0, data);
    const changed = new Promise<void>((resolve) => a.once('namespacesChanged', () => resolve()));
    t.detachNamespaceHost(NQN, 2, HOST_A);
    await changed;
    expect(await sc(ns2.read(0, 8, undefined, { hctx: 0 }))).toBe(Status.INVALID_NS);
    expect(await sc(ns2.read(0, 8, undefined, { hctx: 1 }))).toBe(Status.INVALID_NS);
    expect((await b.namespace(2).read(0, 8)).equals(data)).toBe(true);
  }, 60_000);
});
