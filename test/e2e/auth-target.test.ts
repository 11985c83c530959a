// DH-HMAC-CHAP on the target, driven by a raw peer the way the Linux host drives nvmet: ATR in the Connect response,
// AUTH_REQUIRED before authentication on admin and I/O queues, the Authentication Send/Receive field checks, a full
// transaction per queue, teardown after a failure, idle-transaction reset, and secrets kept out of config and logs.
import { Buffer } from 'node:buffer';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { RawPeer } from '../../harness/peers/raw-peer.js';
import {
  AuthFctype,
  CONNECT_AUTHREQ_ATR,
  DhchapHost,
  FailureExplanation,
  HashId,
  decodeAuthMessage,
  generateDhchapKey,
  type DhchapKey,
} from '../../protocol/auth/index.js';
import { DNR, FabricsType, Status, encodeSqe } from '../../protocol/index.js';
import { TargetService } from '../../target/index.js';

const SUBNQN = 'nqn.2024-01.io.test:auth-raw';
const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000001';
const OTHER_HOST = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000002';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

interface Setup {
  svc: TargetService;
  port: number;
  logs: string[];
  hostKey: DhchapKey;
  ctrlKey: DhchapKey;
}

async function setup(opts: { ctrlKey?: boolean; hash?: string[]; dhgroup?: string[] } = {}): Promise<Setup> {
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs.push(chunk.toString());
      cb();
    },
  });
  const svc = new TargetService({ logger: pino({ level: 'debug' }, sink) });
  cleanups.push(() => svc.stop());
  const hostKey = generateDhchapKey({ hmac: 1, hostnqn: HOSTNQN });
  const ctrlKey = generateDhchapKey({ hmac: 2, hostnqn: SUBNQN });
  await svc.apply({
    ports: [{ id: 1, addr: '127.0.0.1', port: 0 }],
    subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] }],
    hosts: [
      {
        nqn: HOSTNQN,
        dhchapKey: hostKey.format(),
        ...(opts.ctrlKey === true ? { dhchapCtrlKey: ctrlKey.format() } : {}),
        ...(opts.hash !== undefined ? { dhchapHash: opts.hash } : {}),
        ...(opts.dhgroup !== undefined ? { dhchapDhgroup: opts.dhgroup } : {}),
      },
    ],
  });
  const port = (svc.boundPorts()[0] as { port: number }).port;
  return { svc, port, logs, hostKey, ctrlKey };
}

async function peer(port: number): Promise<RawPeer> {
  const p = await RawPeer.connect({ port });
  cleanups.push(() => p.close());
  return p;
}

let cid = 100;
function authCmd(fctype: number, length: number, inCapsule: boolean, patch: Record<number, number> = {}): Buffer {
  const sqe = encodeSqe({ opcode: 0x7f, cid: ++cid, nsid: fctype });
  sqe[41] = 0x01;
  sqe[42] = 0x01;
  sqe[43] = 0xe9;
  sqe.writeUInt32LE(length, 44);
  sqe.writeUInt32LE(length, 32);
  sqe[39] = inCapsule ? 0x01 : 0x5a;
  for (const [off, v] of Object.entries(patch)) sqe[Number(off)] = v;
  return sqe;
}

function propGet(offset: number): Buffer {
  const b = encodeSqe({ opcode: 0x7f, cid: ++cid, nsid: FabricsType.PROPERTY_GET });
  b.writeUInt32LE(offset, 44);
  return b;
}

/** Run a DhchapHost over raw Authentication Send/Receive commands; returns the final step. */
async function runHost(p: RawPeer, host: DhchapHost): Promise<ReturnType<DhchapHost['next']>> {
  let step = host.next();
  for (;;) {
    if (step.kind === 'send') {
      const r = await p.command(authCmd(AuthFctype.SEND, step.payload.length, true), { data: step.payload, inCapsule: true });
      expect(r.cqe?.status).toBe(0);
      step = host.next();
    } else if (step.kind === 'receive') {
      const r = await p.command(authCmd(AuthFctype.RECEIVE, step.allocationLength, false));
      if (r.cqe !== undefined && r.cqe.status !== 0) throw new Error(`receive status 0x${r.cqe.status.toString(16)}`);
      step = host.next(r.data);
    } else {
      return step;
    }
  }
}

describe('DH-HMAC-CHAP on the target (raw peer)', () => {
  it('sets ATR for a host with a key, refuses everything but authentication until it succeeds, then serves the queue', async () => {
    const s = await setup();
    const admin = await peer(s.port);
    const c = await admin.connect({ subnqn: SUBNQN, hostnqn: HOSTNQN, kato: 5000 });
    expect(c.cqe?.status).toBe(0);
    const dw0 = c.cqe?.dw0 ?? 0;
    expect(dw0 & CONNECT_AUTHREQ_ATR).toBe(CONNECT_AUTHREQ_ATR);
    const cntlid = dw0 & 0xffff;

    // nvmet_check_auth_status: Property Get and admin commands are refused before authentication.
    expect((await admin.command(propGet(0))).cqe?.status).toBe(Status.AUTH_REQUIRED | DNR);
    const ident = encodeSqe({ opcode: 0x06, cid: ++cid, cdw10: 1 });
    expect((await admin.command(ident)).cqe?.status).toBe(Status.AUTH_REQUIRED | DNR);
    expect(s.svc.listControllers()[0]?.queues[0]?.auth).toMatchObject({ authenticated: false, state: 'await-negotiate' });

    const host = new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, hostKey: s.hostKey, transactionId: 0 });
    const end = await runHost(admin, host);
    expect(end.kind).toBe('done');
    expect((await admin.command(propGet(0))).cqe?.status).toBe(0);

    // An I/O queue gets ATR too and must authenticate separately (Linux does per queue).
    const io = await peer(s.port);
    const ioc = await io.connect({ subnqn: SUBNQN, hostnqn: HOSTNQN, qid: 1, cntlid, sqsize: 31 });
    expect((ioc.cqe?.dw0 ?? 0) & CONNECT_AUTHREQ_ATR).toBe(CONNECT_AUTHREQ_ATR);
    const flush = encodeSqe({ opcode: 0x00, cid: ++cid, nsid: 1 });
    expect((await io.command(flush)).cqe?.status).toBe(Status.AUTH_REQUIRED | DNR);
    const ioHost = new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, hostKey: s.hostKey, transactionId: 1 });
    expect((await runHost(io, ioHost)).kind).toBe('done');
    // Flush needs CSTS.RDY; AUTH_REQUIRED is gone, the queue is now judged on its own merits.
    expect((await io.command(encodeSqe({ opcode: 0x00, cid: ++cid, nsid: 1 }))).cqe?.status).not.toBe(Status.AUTH_REQUIRED | DNR);

    const q = s.svc.listControllers()[0]?.queues ?? [];
    expect(q.map((x) => [x.qid, x.auth?.authenticated, x.auth?.hash, x.auth?.dhgroup])).toEqual([
      [0, true, 'sha256', 'null'],
      [1, true, 'sha256', 'null'],
    ]);
    expect(s.svc.authStats()).toEqual({ succeeded: 2, failed: 0, expired: 0 });
  });

  it('hosts without a key, and discovery controllers, are not asked to authenticate', async () => {
    const s = await setup();
    const a = await peer(s.port);
    const c = await a.connect({ subnqn: SUBNQN, hostnqn: OTHER_HOST });
    expect((c.cqe?.dw0 ?? 0) & CONNECT_AUTHREQ_ATR).toBe(0);
    expect((await a.command(propGet(0))).cqe?.status).toBe(0);
    // Authentication commands on a queue that needs none: no authentication is offered there.
    expect((await a.command(authCmd(AuthFctype.RECEIVE, 4096, false))).cqe?.status).toBe(Status.INVALID_OPCODE | DNR);
    const d = await peer(s.port);
    const dc = await d.connect({ subnqn: 'nqn.2014-08.org.nvmexpress.discovery', hostnqn: HOSTNQN });
    expect((dc.cqe?.dw0 ?? 0) & CONNECT_AUTHREQ_ATR).toBe(0);
  });

  it('checks SECP, SPSP0/1, TL/AL and the SGL length like nvmet', async () => {
    const s = await setup();
    const a = await peer(s.port);
    await a.connect({ subnqn: SUBNQN, hostnqn: HOSTNQN });
    const inv = Status.INVALID_FIELD | DNR;
    expect((await a.command(authCmd(AuthFctype.RECEIVE, 4096, false, { 43: 0xea }))).cqe?.status).toBe(inv);
    expect((await a.command(authCmd(AuthFctype.RECEIVE, 4096, false, { 41: 0x02 }))).cqe?.status).toBe(inv);
    expect((await a.command(authCmd(AuthFctype.RECEIVE, 4096, false, { 42: 0x00 }))).cqe?.status).toBe(inv);
    expect((await a.command(authCmd(AuthFctype.RECEIVE, 0, false))).cqe?.status).toBe(inv);
    const mismatched = authCmd(AuthFctype.RECEIVE, 4096, false);
    mismatched.writeUInt32LE(2048, 32);
    expect((await a.command(mismatched)).cqe?.status).toBe(Status.SGL_INVALID_DATA | DNR);
    // TL / AL are 32 bits and the target allocates that much: past MDTS (1 MiB here) Invalid Field, no R2T.
    for (const len of [(1 << 20) + 1, 2 ** 31, 2 ** 32 - 1]) {
      for (const fctype of [AuthFctype.SEND, AuthFctype.RECEIVE]) {
        const r = await a.command(authCmd(fctype, len, false));
        expect(r.cqe?.status).toBe(inv);
        expect(r.pdus).toHaveLength(1);
      }
    }
  });

  it('a wrong host key gets AUTH_Failure1 and the whole controller is torn down', async () => {
    const s = await setup();
    const a = await peer(s.port);
    await a.connect({ subnqn: SUBNQN, hostnqn: HOSTNQN });
    const wrong = generateDhchapKey({ hmac: 1, hostnqn: HOSTNQN });
    const host = new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, hostKey: wrong, transactionId: 7 });
    const end = await runHost(a, host);
    expect(end.kind).toBe('failed');
    if (end.kind === 'failed') {
      expect(end.error.explanation).toBe(FailureExplanation.FAILED);
      expect(end.error.detectedBy).toBe('controller');
    }
    await a.closed();
    expect(s.svc.listControllers()).toEqual([]);
    expect(s.svc.authStats().failed).toBe(1);
  });

  it('offers only the configured hash and DH group (dhchap_hash / dhchap_dhgroup)', async () => {
    const s = await setup({ hash: ['hmac(sha512)'], dhgroup: ['ffdhe3072'] });
    const a = await peer(s.port);
    await a.connect({ subnqn: SUBNQN, hostnqn: HOSTNQN });
    const host = new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, hostKey: s.hostKey, transactionId: 3 });
    const end = await runHost(a, host);
    expect(end.kind === 'done' ? [end.result.hashId, end.result.dhGroupId] : end).toEqual([HashId.SHA512, 2]);
    // A host offering only SHA-256 finds no common hash: Failure1 with HASH_UNUSABLE.
    const b = await peer(s.port);
    await b.connect({ subnqn: SUBNQN, hostnqn: HOSTNQN });
    const h2 = new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, hostKey: s.hostKey, transactionId: 4, hashes: [HashId.SHA256] });
    const e2 = await runHost(b, h2);
    expect(e2.kind === 'failed' ? e2.error.explanation : e2).toBe(FailureExplanation.HASH_UNUSABLE);
  });

  it('answers a bidirectional request without a controller key with Failure1', async () => {
    const s = await setup();
    const a = await peer(s.port);
    await a.connect({ subnqn: SUBNQN, hostnqn: HOSTNQN });
    const host = new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, hostKey: s.hostKey, ctrlKey: s.ctrlKey, transactionId: 1 });
    const end = await runHost(a, host);
    expect(end.kind === 'failed' ? [end.error.explanation, end.error.detectedBy] : end).toEqual([FailureExplanation.FAILED, 'controller']);
  });

  it('resets a transaction left idle for KATO: the stale step then gets AUTH_Failure1', async () => {
    const s = await setup();
    const a = await peer(s.port);
    await a.connect({ subnqn: SUBNQN, hostnqn: HOSTNQN, kato: 1000 });
    const host = new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, hostKey: s.hostKey, transactionId: 1 });
    const neg = host.next();
    if (neg.kind !== 'send') throw new Error('expected negotiate');
    expect((await a.command(authCmd(AuthFctype.SEND, neg.payload.length, true), { data: neg.payload, inCapsule: true })).cqe?.status).toBe(0);
    await new Promise((r) => setTimeout(r, 1300));
    expect(s.svc.authStats().expired).toBe(1);
    // The old transaction is gone: its Challenge is not handed out any more (nvmet: Failure1 "unhandled step").
    const r = await a.command(authCmd(AuthFctype.RECEIVE, 4096, false));
    const m = decodeAuthMessage(r.data);
    expect(m.ok && m.message.type).toBe('failure1');
  }, 10_000);

  it('never prints secrets: config, API views and logs show <redacted>', async () => {
    const s = await setup({ ctrlKey: true });
    const secret = s.hostKey.format();
    const csecret = s.ctrlKey.format();
    const cfg = s.svc.getConfig();
    expect(cfg.hosts?.[0]).toMatchObject({ nqn: HOSTNQN, dhchapKey: '<redacted>', dhchapCtrlKey: '<redacted>' });
    expect(s.svc.getConfig({ includeSecrets: true }).hosts?.[0]?.dhchapKey).toBe(secret);
    expect(s.svc.listHostAuth()).toEqual([{ hostnqn: HOSTNQN, hostKey: '<redacted>', ctrlKey: '<redacted>' }]);
    const a = await peer(s.port);
    await a.connect({ subnqn: SUBNQN, hostnqn: HOSTNQN });
    const host = new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, hostKey: s.hostKey, ctrlKey: s.ctrlKey, transactionId: 9 });
    expect((await runHost(a, host)).kind).toBe('done');
    expect(s.svc.listControllers()[0]?.queues[0]?.auth?.bidirectional).toBe(true);
    // Invalid secrets are reported without echoing them.
    const bad = secret.replace(/.{4}:$/, 'AAAA:');
    expect(() => s.svc.setHostAuth({ nqn: OTHER_HOST, dhchapKey: bad })).toThrow(/dhchapKey/);
    try {
      s.svc.setHostAuth({ nqn: OTHER_HOST, dhchapKey: bad });
    } catch (e) {
      expect(String(e)).not.toContain(bad.slice(10, -1));
    }
    const all = s.logs.join('');
    expect(all).toContain('host authenticated');
    const b64 = (k: string): string => k.split(':')[2] as string;
    expect(all).not.toContain(b64(secret));
    expect(all).not.toContain(b64(csecret));
  });

  it('keys set and cleared at runtime apply to new controllers', async () => {
    const s = await setup();
    s.svc.clearHostAuth(HOSTNQN);
    const a = await peer(s.port);
    expect(((await a.connect({ subnqn: SUBNQN, hostnqn: HOSTNQN })).cqe?.dw0 ?? 0) & CONNECT_AUTHREQ_ATR).toBe(0);
    s.svc.setHostAuth({ nqn: HOSTNQN, dhchapKey: s.hostKey.format() });
    const b = await peer(s.port);
    expect(((await b.connect({ subnqn: SUBNQN, hostnqn: HOSTNQN })).cqe?.dw0 ?? 0) & CONNECT_AUTHREQ_ATR).toBe(CONNECT_AUTHREQ_ATR);
    expect(() => s.svc.clearHostAuth(OTHER_HOST)).toThrow(/no authentication keys/);
  });

  it('re-authentication (a new Negotiate on a live queue) picks up rotated keys; the old key then fails', async () => {
    const s = await setup();
    const a = await peer(s.port);
    await a.connect({ subnqn: SUBNQN, hostnqn: HOSTNQN });
    expect((await runHost(a, new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, hostKey: s.hostKey, transactionId: 1 }))).kind).toBe('done');
    const rotated = generateDhchapKey({ hmac: 3, hostnqn: HOSTNQN });
    s.svc.setHostAuth({ nqn: HOSTNQN, dhchapKey: rotated.format() });
    // Still authenticated between transactions (nvmet keeps sq->authenticated).
    expect((await a.command(propGet(0))).cqe?.status).toBe(0);
    expect((await runHost(a, new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, hostKey: rotated, transactionId: 2 }))).kind).toBe('done');
    expect((await a.command(propGet(0))).cqe?.status).toBe(0);
    const old = await runHost(a, new DhchapHost({ hostnqn: HOSTNQN, subsysnqn: SUBNQN, hostKey: s.hostKey, transactionId: 3 }));
    expect(old.kind === 'failed' ? old.error.explanation : old).toBe(FailureExplanation.FAILED);
    await a.closed();
    expect(s.svc.authStats()).toEqual({ succeeded: 2, failed: 1, expired: 0 });
  });
});
