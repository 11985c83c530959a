// How our initiator meets the target's PDU-shaping fault rules (docs/faults.md, "NVMe/TCP-level actions"): which
// shapes it takes as they come, which it answers with an H2CTermReq (and which FES), and that error recovery then
// retries the command on the new association.
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { connect, type Controller } from '../../initiator/index.js';
import { DataPduOffset, Fes, NvmOpcode } from '../../protocol/index.js';
import { armFault } from '../../harness/faults.js';
import type { FaultRuleInput } from '../../target/config/index.js';
import { TargetService } from '../../target/index.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const SUBNQN = 'nqn.2024-01.io.test:fault-pdu';
const cleanups = cleanupAfterEach();

async function target(): Promise<{ t: TargetService; port: number }> {
  const t = new TargetService();
  cleanups.push(() => t.stop());
  await t.apply({ ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] }] });
  return { t, port: (t.boundPorts()[0] as { port: number }).port };
}

async function host(port: number, extra: Record<string, unknown> = {}): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: SUBNQN, nr_io_queues: 1, reconnect_delay: 0.1, ...extra });
  cleanups.push(() => c.disconnect());
  return c;
}

const DATA = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 13 + 1) & 0xff));
/** Beyond the port's in-capsule data size, so the write's data goes by R2T. */
const BIG = Buffer.from(Array.from({ length: 64 * 1024 }, (_, i) => (i * 31 + 5) & 0xff));
const hits = (t: TargetService, id: string): number | undefined => t.listFaultRules().find((r) => r.id === id)?.hits;
const once = (action: FaultRuleInput['action'], opcode: number = NvmOpcode.READ): FaultRuleInput => ({ id: 'f', match: { opcode }, schedule: { nth: 1 }, action });

/** The error the host's first error recovery started from (its 'reconnecting' event), and the reconnect. */
function recovery(c: Controller): { err: Promise<unknown>; reconnected: Promise<void> } {
  return {
    err: new Promise((r) => c.once('reconnecting', (_attempt: number, e: unknown) => r(e))),
    reconnected: new Promise((r) => c.once('reconnected', () => r())),
  };
}

describe('shapes our initiator takes as they come', () => {
  it('c2h-split at every byte: the read completes with its data, no recovery', async () => {
    const { t, port } = await target();
    const c = await host(port);
    await c.namespace(1).write(0, DATA);
    armFault(t, once({ kind: 'c2h-split' }));
    expect((await c.namespace(1).read(0, 8)).equals(DATA)).toBe(true);
    expect([hits(t, 'f'), c.ioRetries, c.state]).toEqual([1, 0, 'live']);
  });

  it('success-flag without SQ flow control disabled: the SUCCESS completes the read', async () => {
    const { t, port } = await target();
    const c = await host(port);
    await c.namespace(1).write(0, DATA);
    armFault(t, once({ kind: 'success-flag' }));
    expect((await c.namespace(1).read(0, 8)).equals(DATA)).toBe(true);
    expect([hits(t, 'f'), c.ioRetries, c.state]).toEqual([1, 0, 'live']);
  });

  it('r2t-past-maxr2t: two R2Ts in order are both answered and the write lands (MAXR2T is not enforced)', async () => {
    const { t, port } = await target();
    const c = await host(port);
    armFault(t, once({ kind: 'r2t-past-maxr2t', count: 4 }, NvmOpcode.WRITE));
    await c.namespace(1).write(0, BIG);
    expect((await c.namespace(1).read(0, 128)).equals(BIG)).toBe(true);
    expect([hits(t, 'f'), c.ioRetries]).toEqual([1, 0]);
  });

  it('stall for 300 ms mid-PDU: the read completes, late', async () => {
    const { t, port } = await target();
    const c = await host(port);
    await c.namespace(1).write(0, DATA);
    armFault(t, once({ kind: 'stall', afterBytes: 30, ms: 300 }));
    const t0 = performance.now();
    expect((await c.namespace(1).read(0, 8)).equals(DATA)).toBe(true);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(290);
    expect(c.ioRetries).toBe(0);
  });
});

describe('shapes our initiator refuses: H2CTermReq, recovery, the command retried', () => {
  it.each([
    ['c2h-reorder (in-order DATAO is required)', { kind: 'c2h-reorder' }, Fes.INVALID_HEADER_FIELD, DataPduOffset.datao],
    ['c2h-duplicate', { kind: 'c2h-duplicate' }, Fes.INVALID_HEADER_FIELD, DataPduOffset.datao],
    ['c2h-overrun', { kind: 'c2h-overrun' }, Fes.DATA_OUT_OF_RANGE, DataPduOffset.datal],
  ] as const)('%s', async (_name, action, fes, fei) => {
    const { t, port } = await target();
    const c = await host(port);
    await c.namespace(1).write(0, DATA);
    armFault(t, once(action));
    const r = recovery(c);
    expect((await c.namespace(1).read(0, 8)).equals(DATA)).toBe(true);
    expect(await r.err).toMatchObject({ fes, fei });
    await r.reconnected;
    expect(hits(t, 'f')).toBe(1);
  });

  it('r2t-past-transfer: H2CTermReq Data Transfer Out of Range; the write is retried and lands', async () => {
    const { t, port } = await target();
    const c = await host(port);
    armFault(t, once({ kind: 'r2t-past-transfer' }, NvmOpcode.WRITE));
    const r = recovery(c);
    await c.namespace(1).write(0, BIG);
    expect(await r.err).toMatchObject({ fes: Fes.DATA_OUT_OF_RANGE, fei: DataPduOffset.r2tl });
    await r.reconnected;
    expect((await c.namespace(1).read(0, 128)).equals(BIG)).toBe(true);
    expect(hits(t, 'f')).toBe(1);
  });

  it('header-digest-error: H2CTermReq Header Digest Error, then the read is retried', async () => {
    const { t, port } = await target();
    const c = await host(port, { hdr_digest: true });
    await c.namespace(1).write(0, DATA);
    armFault(t, once({ kind: 'header-digest-error' }));
    const r = recovery(c);
    expect((await c.namespace(1).read(0, 8)).equals(DATA)).toBe(true);
    expect(await r.err).toMatchObject({ fes: Fes.HEADER_DIGEST_ERROR });
    await r.reconnected;
  });

  it('c2h-term-req mid-stream: the host tears the association down and retries the read', async () => {
    const { t, port } = await target();
    const c = await host(port);
    await c.namespace(1).write(0, DATA);
    armFault(t, once({ kind: 'c2h-term-req', fes: Fes.DATA_LIMIT_EXCEEDED }));
    const r = recovery(c);
    expect((await c.namespace(1).read(0, 8)).equals(DATA)).toBe(true);
    await r.reconnected;
    expect(hits(t, 'f')).toBe(1);
  });
});

describe('data digest error', () => {
  it('the read completes with Data Transfer Error (no DNR) and is retried on the same association', async () => {
    const { t, port } = await target();
    const c = await host(port, { data_digest: true });
    await c.namespace(1).write(0, DATA);
    armFault(t, once({ kind: 'data-digest-error' }));
    expect((await c.namespace(1).read(0, 8)).equals(DATA)).toBe(true);
    expect([hits(t, 'f'), c.ioRetries, c.state]).toEqual([1, 1, 'live']);
  });
});
