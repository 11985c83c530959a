// Connect under secure channel concatenation (TP 8018): a queue inside TLS on a generated PSK must name the identity's
// host and subsystem and is not asked to authenticate (no ATR, as nvmet); a cleartext connection admitted on a TLS
// 'required' port only for concatenation takes an admin Connect from a host with a DH-HMAC-CHAP key (ATR|ASCR) and
// nothing else. The transport's view (tls, tlsPsk, concatOnly) is set on the fake transport as TargetTcpQueue would.
import { describe, expect, it } from 'vitest';
import { DNR, Status, decodeConnectResult } from '../../protocol/index.js';
import { generateDhchapKey } from '../../protocol/auth/index.js';
import { HOSTNQN, HostQueue, SUBNQN, makeTarget } from './testing/fake-transport.js';

const OTHER_HOST = 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-4908-8706-050403020199';

function setup(withKey: boolean) {
  const t = makeTarget({}, { tls: 'required', tlsConcat: true });
  if (withKey) t.target.hostAuth.set(HOSTNQN, { hostKey: generateDhchapKey({ hmac: 1, hostnqn: HOSTNQN }) });
  const queue = (view: { tls?: boolean; tlsPsk?: { type: 'R' | 'G'; hostnqn: string; subnqn: string }; concatOnly?: boolean }): HostQueue => {
    const q = new HostQueue(t.target, t.port);
    for (const [k, v] of Object.entries(view)) Object.defineProperty(q.transport, k, { value: v });
    return q;
  };
  return { ...t, queue };
}

const generated = (hostnqn = HOSTNQN, subnqn = SUBNQN) => ({ tls: true, tlsPsk: { type: 'G' as const, hostnqn, subnqn } });

describe('Connect on a generated TLS PSK', () => {
  it('admin and I/O queues connect without ATR although the host has a DH-HMAC-CHAP key', () => {
    const t = setup(true);
    const admin = t.queue(generated());
    const cntlid = admin.connectAndEnable();
    const c0 = admin.completions[0];
    expect(c0 !== undefined && decodeConnectResult(c0.dw0)).toMatchObject({ atr: false, ascr: false });
    const io = t.queue(generated());
    const c1 = io.connect({ qid: 1, cntlid });
    expect(c1.status).toBe(0);
    expect(decodeConnectResult(c1.dw0).atr).toBe(false);
  });

  it('a Connect naming another host or subsystem than the PSK identity is refused with Connect Invalid Host', () => {
    const t = setup(true);
    expect(t.queue(generated(OTHER_HOST)).connect({ qid: 0 }).status).toBe(Status.CONNECT_INVALID_HOST | DNR);
    expect(t.queue(generated(HOSTNQN, 'nqn.2024-01.io.example:other')).connect({ qid: 0 }).status).toBe(Status.CONNECT_INVALID_HOST | DNR);
  });

  it('a retained PSK (R) keeps the DH-HMAC-CHAP requirement (ATR)', () => {
    const t = setup(true);
    const c = t.queue({ tls: true, tlsPsk: { type: 'R', hostnqn: HOSTNQN, subnqn: SUBNQN } }).connect({ qid: 0 });
    expect(c.status).toBe(0);
    expect(decodeConnectResult(c.dw0).atr).toBe(true);
  });
});

describe('cleartext connection on a required port admitted for concatenation only', () => {
  it('admin Connect of a host with a key: ATR and ASCR', () => {
    const t = setup(true);
    const c = t.queue({ concatOnly: true }).connect({ qid: 0 });
    expect(c.status).toBe(0);
    expect(decodeConnectResult(c.dw0)).toMatchObject({ atr: true, ascr: true });
  });

  it('a host without a DH-HMAC-CHAP key: Connect Invalid Host', () => {
    const t = setup(false);
    expect(t.queue({ concatOnly: true }).connect({ qid: 0 }).status).toBe(Status.CONNECT_INVALID_HOST | DNR);
  });

  it('an I/O queue: Connect Invalid Parameters', () => {
    const t = setup(true);
    const admin = t.queue(generated());
    const cntlid = admin.connectAndEnable();
    expect(t.queue({ concatOnly: true }).connect({ qid: 1, cntlid }).status).toBe(Status.CONNECT_INVALID_PARAM | DNR);
  });
});
