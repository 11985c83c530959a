// Option validation: every option's type/range, unknown options, duplicate-connect and hostnqn↔hostid rules, all
// rejected with InvalidArgumentError naming the option before any socket opens.
import net from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { connect, type Controller } from './index.js';
import { InvalidArgumentError } from './errors.js';
import { resolveOptions, tosRefusal } from './options.js';
import { FakeController } from '../harness/peers/fake-controller.js';

const base = { traddr: '127.0.0.1', trsvcid: 4420, nqn: 'nqn.2024-01.io.test:x' };

function field(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    if (e instanceof InvalidArgumentError) return e.field;
    throw e;
  }
  return undefined;
}

describe('resolveOptions', () => {
  it('takes every keep_alive_tmo the 32-bit KATO holds (NVMe-oF 1.1 §3.3)', () => {
    for (const k of [0, 65_535, 65_536, 2_147_483, 2_147_484, 4_294_967]) expect(resolveOptions({ ...base, keep_alive_tmo: k }).keepAliveTmo).toBe(k);
  });

  it('applies Linux defaults', () => {
    const o = resolveOptions(base);
    expect(o.queueSize).toBe(128);
    expect(o.keepAliveTmo).toBe(5);
    expect(o.reconnectDelay).toBe(10);
    expect(o.ctrlLossTmo).toBe(600);
    expect(o.fastIoFailTmo).toBe(-1);
    expect(o.ioTimeoutMs).toBe(30_000);
    expect(o.adminTimeoutMs).toBe(60_000);
    expect(o.queuesPerHctx).toBe(1);
    expect(o.nrIoQueues).toBeGreaterThanOrEqual(1);
    expect(o.hostnqn).toBe(`nqn.2014-08.org.nvmexpress:uuid:${o.hostid}`);
    const d = resolveOptions({ traddr: '127.0.0.1' }, 'discover');
    expect(d.trsvcid).toBe(8009);
    expect(d.keepAliveTmo).toBe(0);
    expect(d.nqn).toBe('nqn.2014-08.org.nvmexpress.discovery');
  });

  const bad: Array<[string, unknown]> = [
    ['queue_size', 15],
    ['queue_size', 1025],
    ['queue_size', 64.5],
    ['nr_io_queues', 0],
    ['nr_io_queues', '4'],
    ['nr_write_queues', -1],
    ['nr_poll_queues', -1],
    ['keep_alive_tmo', -1],
    // KATO is 32 bits of ms: 4294968 s does not fit.
    ['keep_alive_tmo', 4_294_968],
    ['reconnect_delay', 0],
    // Timer lengths at 2^31−1, 2^31 and 2^32−1 ms, past these options' 10^6 s (fast_io_fail_tmo, up to 10^9 s, runs them
    // in full instead: initiator/recovery.test.ts).
    ...['reconnect_delay', 'io_timeout', 'admin_timeout'].flatMap((k) => [2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1].map((ms): [string, unknown] => [k, ms / 1000])),
    ['fast_io_fail_tmo', -2],
    ['tos', 256],
    ['tos', -2],
    ['tos', 0],
    ['tos', 0xb8],
    ['max_retries', -1],
    ['max_retries', 256],
    ['max_retries', 1.5],
    ['queues_per_hctx', 0],
    ['queues_per_hctx', 17],
    ['connect_concurrency', 0],
    ['io_timeout', 0],
    ['admin_timeout', -5],
    ['hdr_digest', 'yes'],
    ['data_digest', 1],
    ['duplicate_connect', 'true'],
    ['disable_sqflow', 0],
    ['match_hw_queues', 'no'],
    ['trsvcid', 70000],
    ['hostid', 'not-a-uuid'],
    // The target's rule (nvmet): names it would refuse, not names that are merely not well-formed NQNs (issue #32)
    ['hostnqn', 'h'.repeat(224)],
    ['nqn', ''],
    ['host_traddr', 'not-an-ip'],
    ['host_iface', 'no-such-if0'],
    ['traddr', ''],
    ['logger', 42],
  ];
  for (const [k, v] of bad) {
    it(`rejects ${k}=${JSON.stringify(v)} naming the option`, () => {
      expect(field(() => resolveOptions({ ...base, [k]: v }))).toBe(k);
    });
  }

  it('refuses a TOS with the reason true for the running Node.js instead of ignoring it', () => {
    const has = typeof (net.Socket.prototype as { setTypeOfService?: unknown }).setTypeOfService === 'function';
    const why = has ? `this initiator does not set IP_TOS yet \\(Node\\.js ${process.versions.node.replace(/\./g, '\\.')} has socket\\.setTypeOfService` : `Node\\.js ${process.versions.node.replace(/\./g, '\\.')} cannot set IP_TOS on a TCP socket \\(its net\\.Socket has no setTypeOfService\\)`;
    expect(() => resolveOptions({ ...base, tos: 0x10 })).toThrow(new RegExp(`^tos: 16: ${why}.*; leave it at -1`));
    expect(tosRefusal(16, '22.23.5', false)).toMatch(/^16: Node\.js 22\.23\.5 cannot set IP_TOS on a TCP socket \(its net\.Socket has no setTypeOfService\); leave it at -1/);
    expect(tosRefusal(16, '24.22.3', true)).toMatch(/^16: this initiator does not set IP_TOS yet \(Node\.js 24\.22\.3 has socket\.setTypeOfService, but its queues do not call it\); leave it at -1/);
    expect(resolveOptions({ ...base, tos: -1 }).tos).toBe(-1);
    expect(resolveOptions(base).tos).toBe(-1);
  });

  it('rejects unknown options and missing required ones', () => {
    expect(field(() => resolveOptions({ ...base, nr_io_queue: 4 }))).toBe('nr_io_queue');
    expect(field(() => resolveOptions({ traddr: '127.0.0.1' }))).toBe('nqn');
    expect(field(() => resolveOptions({ nqn: base.nqn }))).toBe('traddr');
  });

  it('accepts the edges of each range', () => {
    const o = resolveOptions({ ...base, queue_size: 16, tos: -1, queues_per_hctx: 16, fast_io_fail_tmo: 0, ctrl_loss_tmo: -1, max_retries: 255 });
    expect([o.queueSize, o.tos, o.queuesPerHctx, o.fastIoFailTmo, o.ctrlLossTmo, o.maxRetries]).toEqual([16, -1, 16, 0, -1, 255]);
    expect(resolveOptions({ ...base, max_retries: 0 }).maxRetries).toBe(0);
    expect(resolveOptions(base).maxRetries).toBe(5);
    expect(resolveOptions({ ...base, queue_size: 1024 }).queueSize).toBe(1024);
  });

  it('accepts every name the target accepts (nvmet rules), refuses what it refuses', () => {
    for (const n of ['testnqn', 'nqn.x:host-a', 'bad nqn with spaces']) {
      expect(resolveOptions({ ...base, nqn: n }).nqn).toBe(n);
      expect(resolveOptions({ ...base, hostnqn: n }).hostnqn).toBe(n);
    }
    expect(field(() => resolveOptions({ ...base, nqn: 'x'.repeat(224) }))).toBe('nqn');
    expect(field(() => resolveOptions({ ...base, hostnqn: 'a\0b' }))).toBe('hostnqn');
  });

  it('derives hostid from a UUID hostnqn and hostnqn from hostid', () => {
    const id = '11111111-2222-3333-4444-555555555555';
    expect(resolveOptions({ ...base, hostnqn: `nqn.2014-08.org.nvmexpress:uuid:${id}` }).hostid).toBe(id);
    expect(resolveOptions({ ...base, hostid: id }).hostnqn).toBe(`nqn.2014-08.org.nvmexpress:uuid:${id}`);
  });
});

describe('connect-time identity rules (before any socket opens)', () => {
  let f: FakeController;
  let accepted = 0;
  const ctrls: Controller[] = [];
  beforeEach(async () => {
    f = new FakeController();
    f.addNamespace(1, 64);
    await f.listen();
    accepted = 0;
    f.server.on('connection', () => accepted++);
  });
  afterEach(async () => {
    for (const c of ctrls.splice(0)) await c.disconnect();
    await f.close();
  });

  const opts = (extra: Record<string, unknown> = {}): Parameters<typeof connect>[0] => ({ traddr: '127.0.0.1', trsvcid: f.port, nqn: f.subnqn, nr_io_queues: 1, ...extra });

  it('refuses a duplicate controller (EALREADY) unless duplicate_connect is set', async () => {
    const hostnqn = 'nqn.2024-01.io.test:host-dup';
    ctrls.push(await connect(opts({ hostnqn })));
    const before = accepted;
    const err = await connect(opts({ hostnqn })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgumentError);
    expect((err as InvalidArgumentError).field).toBe('duplicate_connect');
    expect(accepted).toBe(before);
    const second = await connect(opts({ hostnqn, duplicate_connect: true }));
    ctrls.push(second);
    expect(second.cntlid).not.toBe(ctrls[0]?.cntlid);
  });

  it('a TOS other than -1 fails before any socket opens', async () => {
    const err = await connect(opts({ tos: 0x10 })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgumentError);
    expect((err as InvalidArgumentError).field).toBe('tos');
    await new Promise((r) => setTimeout(r, 20));
    expect(accepted).toBe(0);
  });

  it('a different host NQN or source address is not a duplicate', async () => {
    ctrls.push(await connect(opts({ hostnqn: 'nqn.2024-01.io.test:host-a' })));
    ctrls.push(await connect(opts({ hostnqn: 'nqn.2024-01.io.test:host-b' })));
    ctrls.push(await connect(opts({ hostnqn: 'nqn.2024-01.io.test:host-a', host_traddr: '127.0.0.1' })));
    expect(ctrls.length).toBe(3);
  });

  it('allows connecting again after disconnect', async () => {
    const hostnqn = 'nqn.2024-01.io.test:host-again';
    const c = await connect(opts({ hostnqn }));
    await c.disconnect();
    ctrls.push(await connect(opts({ hostnqn })));
  });

  it('rejects a hostid already used with another hostnqn, and vice versa', async () => {
    const id = 'aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee';
    ctrls.push(await connect(opts({ hostnqn: 'nqn.2024-01.io.test:host-1', hostid: id })));
    const before = accepted;
    const e1 = await connect(opts({ hostnqn: 'nqn.2024-01.io.test:host-2', hostid: id })).catch((e: unknown) => e);
    expect((e1 as InvalidArgumentError).field).toBe('hostnqn');
    const e2 = await connect(opts({ hostnqn: 'nqn.2024-01.io.test:host-1', hostid: 'aaaaaaaa-bbbb-cccc-dddd-ffffffffffff', duplicate_connect: true })).catch((e: unknown) => e);
    expect((e2 as InvalidArgumentError).field).toBe('hostid');
    expect(accepted).toBe(before);
  });

  it('opens no socket for invalid options', async () => {
    await expect(connect(opts({ queue_size: 2 }))).rejects.toBeInstanceOf(InvalidArgumentError);
    await new Promise((r) => setTimeout(r, 20));
    expect(accepted).toBe(0);
  });

  it('binds the source address with host_traddr', async () => {
    const c = await connect(opts({ host_traddr: '127.0.0.1', hostnqn: 'nqn.2024-01.io.test:host-src' }));
    ctrls.push(c);
    expect(c.queueInfo()[0]?.source.startsWith('127.0.0.1:')).toBe(true);
    expect(net.isIP(c.adminInfo()?.source.split(':')[0] ?? '')).toBe(4);
  });
});

describe('io worker options', () => {
  it('defaults to no io workers, a 1 ms budget and no pinning', () => {
    const o = resolveOptions(base);
    expect(o.ioWorkers).toBe(0);
    expect(o.ioBudgetUs).toBe(1000);
    expect(o.ioWorkerCpus).toEqual([]);
  });

  it('refuses negative, above CPUs x 4 and impossible pinning, naming the option', async () => {
    const os = await import('node:os');
    const n = os.availableParallelism();
    expect(field(() => resolveOptions({ ...base, io_workers: -1 }))).toBe('io_workers');
    expect(field(() => resolveOptions({ ...base, io_workers: n * 4 + 1 }))).toBe('io_workers');
    expect(resolveOptions({ ...base, io_workers: n * 4 }).ioWorkers).toBe(n * 4);
    expect(field(() => resolveOptions({ ...base, io_workers: 1, io_worker_cpus: [4096] }))).toBe('io_worker_cpus');
    expect(field(() => resolveOptions({ ...base, io_workers: 1, io_worker_cpus: [] }))).toBe('io_worker_cpus');
    expect(field(() => resolveOptions({ ...base, io_worker_cpus: [0] }))).toBe('io_worker_cpus');
    expect(field(() => resolveOptions({ ...base, io_budget_us: 0 }))).toBe('io_budget_us');
  });

  it('accepts pinning to an allowed CPU', async () => {
    const { allowedCpus } = await import('./options.js');
    const allowed = allowedCpus();
    if (allowed === undefined) return;
    const cpu = [...allowed][0] as number;
    expect(resolveOptions({ ...base, io_workers: 2, io_worker_cpus: [cpu] }).ioWorkerCpus).toEqual([cpu]);
  });

  it('a refused io_workers option opens no socket', async () => {
    let accepted = 0;
    const srv = net.createServer((s) => {
      accepted++;
      s.destroy();
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as net.AddressInfo).port;
    await expect(connect({ ...base, trsvcid: port, io_workers: -3 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(connect({ ...base, trsvcid: port, io_workers: 1, io_worker_cpus: [100000] })).rejects.toThrow(/io_worker_cpus/);
    await new Promise<void>((r) => srv.close(() => r()));
    expect(accepted).toBe(0);
  });
});
