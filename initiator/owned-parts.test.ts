// Unit tests for the pieces the Controller owns (keep-alive, ANA tracking), driven through their narrow host
// interfaces with fakes instead of sockets.
import { Buffer } from 'node:buffer';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AdminOpcode, AnaState, LogPageId, decodeSqe, encodeAnaLog, encodeIdentifyController, decodeIdentifyController, Cmic, Ctratt } from '../protocol/index.js';
import type { AdminChannel, AdminSpec } from './admin.js';
import { AnaTracker } from './ana.js';
import { KeepAlive, type KeepAliveHost } from './keep-alive.js';
import { Namespace, type IoExecutor, type NamespaceInfo } from './namespace.js';
import type { Completion, QueuePair, SubmitSpec } from './queue-pair.js';

const OK: Completion = { dw0: 0, dw1: 0, status: 0 };

interface FakeKaHost extends KeepAliveHost {
  keepAliveWanted: boolean;
  failed: Error[];
}

function kaHost(result: () => Promise<Completion>): { host: FakeKaHost; sent: SubmitSpec[] } {
  const sent: SubmitSpec[] = [];
  const queue = { submit: (s: SubmitSpec) => (sent.push(s), result()) } as unknown as QueuePair;
  const host: FakeKaHost = {
    keepAliveWanted: true,
    adminQueue: queue,
    failed: [] as Error[],
    keepAliveFailed(err: Error): void {
      this.failed.push(err);
    },
  };
  return { host, sent };
}

describe('KeepAlive', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('sends a Keep Alive every KATO/2 with KATO as its timeout', async () => {
    vi.useFakeTimers();
    const { host, sent } = kaHost(() => Promise.resolve(OK));
    const ka = new KeepAlive(host);
    ka.start(10, 0);
    await vi.advanceTimersByTimeAsync(4999);
    expect(sent).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(sent).toHaveLength(1);
    expect(decodeSqe(sent[0]?.sqe ?? Buffer.alloc(64)).opcode).toBe(AdminOpcode.KEEP_ALIVE);
    expect(sent[0]?.timeoutMs).toBe(10_000);
    await vi.advanceTimersByTimeAsync(5000);
    expect(sent).toHaveLength(2);
    ka.stop();
    await vi.advanceTimersByTimeAsync(20_000);
    expect(sent).toHaveLength(2);
  });

  it('with TBKAS runs every KATO/4 and skips the command when a completion was seen', async () => {
    vi.useFakeTimers();
    const { host, sent } = kaHost(() => Promise.resolve(OK));
    const ka = new KeepAlive(host);
    ka.start(8, Ctratt.TBKAS);
    ka.noteActivity();
    await vi.advanceTimersByTimeAsync(2000);
    expect(sent).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(2000);
    expect(sent).toHaveLength(1);
    ka.stop();
  });

  it('does nothing with KATO 0 or when the controller is not live, and reports a failed Keep Alive', async () => {
    vi.useFakeTimers();
    const off = kaHost(() => Promise.resolve(OK));
    new KeepAlive(off.host).start(0, 0);
    off.host.keepAliveWanted = false;
    new KeepAlive(off.host).start(2, 0);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(off.sent).toHaveLength(0);

    const bad = kaHost(() => Promise.reject(new Error('timed out')));
    new KeepAlive(bad.host).start(2, 0);
    await vi.advanceTimersByTimeAsync(1000);
    expect(bad.host.failed.map((e) => e.message)).toEqual(['timed out']);
  });

  it('keeps re-arming for as long as the host wants it (connecting or live) and stops when it no longer does', async () => {
    vi.useFakeTimers();
    const { host, sent } = kaHost(() => Promise.resolve(OK));
    const ka = new KeepAlive(host);
    ka.start(2, 0);
    await vi.advanceTimersByTimeAsync(3000);
    expect(sent).toHaveLength(3);
    expect(ka.completed).toBe(3);
    host.keepAliveWanted = false;
    await vi.advanceTimersByTimeAsync(3000);
    expect(sent).toHaveLength(3);
  });

  it('a Keep Alive completing after stop/start does not arm a second timer', async () => {
    vi.useFakeTimers();
    let release: (c: Completion) => void = () => undefined;
    const { host, sent } = kaHost(() => new Promise<Completion>((r) => (release = r)));
    const ka = new KeepAlive(host);
    ka.start(2, 0);
    await vi.advanceTimersByTimeAsync(1000);
    expect(sent).toHaveLength(1);
    const stale = release;
    ka.start(2, 0); // a reconnect re-arms while the old command is still out
    stale(OK);
    await vi.advanceTimersByTimeAsync(999);
    expect(sent).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(sent).toHaveLength(2);
    release(OK);
    await vi.advanceTimersByTimeAsync(1000);
    expect(sent).toHaveLength(3);
    ka.stop();
  });
});

describe('AnaTracker', () => {
  const exec: IoExecutor = { execIo: () => Promise.resolve(OK), submitIo: (io) => io.ioDone(undefined), maxTransferBytes: 1 << 20, ioTimeoutMs: 1000 };
  const info = (nsid: number, anagrpid: number): NamespaceInfo => ({
    nsid, blocks: 8n, blockSize: 512, nguid: '', uuid: '', eui64: '', anagrpid, shared: true, readOnly: false,
  });

  function admin(log: Buffer): AdminChannel & { specs: AdminSpec[] } {
    const specs: AdminSpec[] = [];
    return {
      specs,
      adminQueue: undefined,
      adminCmd(spec) {
        specs.push(spec);
        log.copy(spec.c2h ?? Buffer.alloc(0));
        return Promise.resolve(OK);
      },
    };
  }

  it('maps each namespace to its group state and reads unknown groups as optimized', async () => {
    const log = encodeAnaLog({
      chgcnt: 1n,
      groups: [
        { grpid: 1, chgcnt: 1n, state: AnaState.NON_OPTIMIZED, nsids: [1] },
        { grpid: 2, chgcnt: 1n, state: AnaState.INACCESSIBLE, nsids: [2] },
      ],
    });
    const a = admin(log);
    const t = new AnaTracker(a);
    t.configure(decodeIdentifyController(encodeIdentifyController({ cmic: Cmic.ANA_REPORTING, nanagrpid: 2, mnan: 4 })), 1 << 20);
    const nss = [new Namespace(exec, info(1, 1)), new Namespace(exec, info(2, 2)), new Namespace(exec, info(3, 9))];
    await t.refresh(nss);
    expect(nss.map((n) => n.anaState)).toEqual(['non-optimized', 'inaccessible', 'optimized']);
    expect([...t.states]).toEqual([[1, 'non-optimized'], [2, 'inaccessible']]);
    expect(decodeSqe(a.specs[0]?.sqe ?? Buffer.alloc(64)).cdw10 & 0xff).toBe(LogPageId.ANA);
  });

  it('reads nothing when the controller does not report ANA', async () => {
    const a = admin(Buffer.alloc(0));
    const t = new AnaTracker(a);
    t.configure(decodeIdentifyController(encodeIdentifyController({ cmic: 0 })), 1 << 20);
    await t.refresh([new Namespace(exec, info(1, 1))]);
    expect(t.reporting).toBe(false);
    expect(a.specs).toHaveLength(0);
  });
});
