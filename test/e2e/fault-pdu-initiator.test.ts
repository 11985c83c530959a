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
import type { TargetService } from '../../target/index.js';
import { startInProcessTarget } from '../../harness/nvme.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const cleanups = cleanupAfterEach();

/** Our target in this process (1 MiB RAM namespace) and our initiator connected to it with one I/O queue. */
async function setup(hostOpts: Record<string, unknown> = {}): Promise<{ t: TargetService; c: Controller }> {
  const tgt = await startInProcessTarget({ size: '1M' });
  cleanups.push(() => tgt.stop());
  const c = await connect({ traddr: tgt.addr, trsvcid: tgt.port, nqn: tgt.nqn, nr_io_queues: 1, reconnect_delay: 0.1, ...hostOpts });
  cleanups.push(() => c.disconnect());
  return { t: tgt.service, c };
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
  it.each([
    ['c2h-split at every byte', { kind: 'c2h-split' }],
    ['success-flag without SQ flow control disabled (the SUCCESS completes the read)', { kind: 'success-flag' }],
  ] as const)('%s: the read completes with its data, no recovery', async (_name, action) => {
    const { t, c } = await setup();
    await c.namespace(1).write(0, DATA);
    armFault(t, once(action));
    expect((await c.namespace(1).read(0, 8)).equals(DATA)).toBe(true);
    expect([hits(t, 'f'), c.ioRetries, c.state]).toEqual([1, 0, 'live']);
  });

  it('r2t-past-maxr2t: two R2Ts in order are both answered and the write lands (MAXR2T is not enforced)', async () => {
    const { t, c } = await setup();
    armFault(t, once({ kind: 'r2t-past-maxr2t', count: 4 }, NvmOpcode.WRITE));
    await c.namespace(1).write(0, BIG);
    expect((await c.namespace(1).read(0, 128)).equals(BIG)).toBe(true);
    expect([hits(t, 'f'), c.ioRetries]).toEqual([1, 0]);
  });

  it('stall for 300 ms mid-PDU: the read completes, late', async () => {
    const { t, c } = await setup();
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
    const { t, c } = await setup();
    await c.namespace(1).write(0, DATA);
    armFault(t, once(action));
    const r = recovery(c);
    expect((await c.namespace(1).read(0, 8)).equals(DATA)).toBe(true);
    expect(await r.err).toMatchObject({ fes, fei });
    await r.reconnected;
    expect(hits(t, 'f')).toBe(1);
  });

  it('r2t-past-transfer: H2CTermReq Data Transfer Out of Range; the write is retried and lands', async () => {
    const { t, c } = await setup();
    armFault(t, once({ kind: 'r2t-past-transfer' }, NvmOpcode.WRITE));
    const r = recovery(c);
    await c.namespace(1).write(0, BIG);
    expect(await r.err).toMatchObject({ fes: Fes.DATA_OUT_OF_RANGE, fei: DataPduOffset.r2tl });
    await r.reconnected;
    expect((await c.namespace(1).read(0, 128)).equals(BIG)).toBe(true);
    expect(hits(t, 'f')).toBe(1);
  });

  it('header-digest-error: H2CTermReq Header Digest Error, then the read is retried', async () => {
    const { t, c } = await setup({ hdr_digest: true });
    await c.namespace(1).write(0, DATA);
    armFault(t, once({ kind: 'header-digest-error' }));
    const r = recovery(c);
    expect((await c.namespace(1).read(0, 8)).equals(DATA)).toBe(true);
    expect(await r.err).toMatchObject({ fes: Fes.HEADER_DIGEST_ERROR });
    await r.reconnected;
  });

  it('c2h-term-req mid-stream: the host tears the association down and retries the read', async () => {
    const { t, c } = await setup();
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
    const { t, c } = await setup({ data_digest: true });
    await c.namespace(1).write(0, DATA);
    armFault(t, once({ kind: 'data-digest-error' }));
    expect((await c.namespace(1).read(0, 8)).equals(DATA)).toBe(true);
    expect([hits(t, 'f'), c.ioRetries, c.state]).toEqual([1, 1, 'live']);
  });
});
