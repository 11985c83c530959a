// Secure channel concatenation (TP 8018) end to end over 127.0.0.1: our initiator (concat + dhchap_secret) against our
// target (port tlsConcat, per-host DH-HMAC-CHAP key, no TLS key). The admin queue authenticates in cleartext with
// SC_C NEWTLSPSK, both sides derive the generated PSK, and every queue then runs inside TLS with it; I/O is verified.
// Then every refusal: no secret, a TLS key as well, a wrong secret, a port without TLS or without concatenation, a host
// the target has no DH-HMAC-CHAP key for, an unknown generated identity, a plain cleartext host on a 'required' port.
import { Buffer } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import tls from 'node:tls';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { AuthenticationRequiredError, ConcatNotOfferedError, DhchapAuthError, InvalidArgumentError, connect, type Controller } from '../../initiator/index.js';
import { FailureExplanation, generateDhchapKey } from '../../protocol/auth/index.js';
import { formatTlsKey } from '../../protocol/tls/index.js';
import { TargetService, type PortConfig } from '../../target/index.js';
import { until } from '../../harness/until.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const SUBNQN = 'nqn.2024-01.io.test:concat-e2e';
const HOST = 'nqn.2014-08.org.nvmexpress:uuid:3c3c3c3c-0000-4000-8000-000000000003';
const OTHER = 'nqn.2014-08.org.nvmexpress:uuid:4d4d4d4d-0000-4000-8000-000000000004';
const SECRET = generateDhchapKey({ hmac: 1, hostnqn: HOST }).format();
const CTRL_SECRET = generateDhchapKey({ hmac: 1, hostnqn: SUBNQN }).format();
const OTHER_SECRET = generateDhchapKey({ hmac: 1, hostnqn: HOST }).format();
const FAIL_FAST = { reconnect_delay: 0.05, ctrl_loss_tmo: 0.2 };

const cleanups = cleanupAfterEach();

interface Tgt {
  t: TargetService;
  port: number;
  logs: Array<Record<string, unknown>>;
}

async function target(port: Partial<PortConfig>, host: { ctrl?: boolean; hosts?: Array<{ nqn: string; dhchapKey?: string }> } = {}): Promise<Tgt> {
  const logs: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => void logs.push(JSON.parse(s) as Record<string, unknown>) });
  const t = new TargetService({ logger });
  cleanups.push(() => t.stop());
  await t.apply({
    ports: [{ id: 1, addr: '127.0.0.1', port: 0, ...port }],
    subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '4M' } }] }],
    hosts: host.hosts ?? [{ nqn: HOST, dhchapKey: SECRET, ...(host.ctrl === true ? { dhchapCtrlKey: CTRL_SECRET } : {}) }],
  });
  return { t, port: (t.boundPorts()[0] as { port: number }).port, logs };
}

async function open(port: number, extra: Record<string, unknown>): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: SUBNQN, hostnqn: HOST, nr_io_queues: 2, duplicate_connect: true, ...extra });
  cleanups.push(() => c.disconnect());
  return c;
}

function pattern(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 29 + seed * 11 + 5) & 0xff;
  return b;
}

async function verify(c: Controller, seed: number): Promise<void> {
  const ns = c.namespace(1);
  for (const [lba, len, hctx] of [[0, 4096, 0], [64, 131072, 1]] as const) {
    const data = pattern(len, seed + Number(lba));
    await ns.write(lba, data, { hctx });
    expect((await ns.read(lba, len / 512, undefined, { hctx: 1 - hctx })).equals(data)).toBe(true);
  }
}

const installs = (g: Tgt): number => g.logs.filter((l) => l['msg'] === 'secure channel concatenation: generated TLS PSK installed').length;

describe('secure channel concatenation: initiator ↔ target', { timeout: 30_000 }, () => {
  for (const mode of ['allowed', 'required'] as const) {
    it(`${mode} port: DH-HMAC-CHAP NEWTLSPSK in cleartext, then every queue inside TLS on the generated PSK; verify`, async () => {
      const g = await target({ tls: mode, tlsConcat: true });
      const c = await open(g.port, { dhchap_secret: SECRET, concat: true, hdr_digest: mode === 'required', data_digest: mode === 'required' });
      await verify(c, mode === 'allowed' ? 1 : 2);
      const ctrls = g.t.listControllers().filter((x) => x.subnqn === SUBNQN);
      // The cleartext controller of the first admin queue is gone; the TLS one has admin + 2 I/O queues, all in TLS.
      expect(ctrls).toHaveLength(1);
      const qs = ctrls[0]?.queues ?? [];
      expect(qs.map((q) => q.qid)).toEqual([0, 1, 2]);
      for (const q of qs) expect(q.tls).toBe(true);
      expect(g.t.tlsStats()).toMatchObject({ handshakesOk: 3, handshakesFailed: 0 });
      expect(installs(g)).toBe(1);
      // One DH-HMAC-CHAP transaction in all: queues inside TLS on a generated PSK are not asked to authenticate.
      expect(g.t.authStats()).toMatchObject({ succeeded: 1, failed: 0 });
      expect(c.authInfo).toMatchObject({ hash: 'hmac(sha256)', dhgroup: 'ffdhe2048' });
      // The generated PSK never reaches a log line.
      expect(JSON.stringify(g.logs)).not.toMatch(/NVMe1G01 [^"]* [A-Za-z0-9+/=]{20,}/);
    });
  }

  it('bidirectional (controller key) with concatenation; a reset generates a new PSK and reconnects inside TLS', async () => {
    const g = await target({ tls: 'allowed', tlsConcat: true }, { ctrl: true });
    const c = await open(g.port, { dhchap_secret: SECRET, dhchap_ctrl_secret: CTRL_SECRET, concat: true, reconnect_delay: 0.1 });
    expect(c.authInfo).toMatchObject({ bidirectional: true });
    await verify(c, 3);
    c.reset();
    await until(() => installs(g) === 2 && c.state === 'live', 10_000).catch((e: unknown) => {
      throw new Error(`${String(e)}: state ${c.state}, installs ${installs(g)}\n${g.logs.filter((l) => (l['level'] as number) >= 40).map((l) => JSON.stringify(l)).join('\n')}`);
    });
    await verify(c, 4);
    expect(g.t.tlsStats()).toMatchObject({ handshakesOk: 6, handshakesFailed: 0 });
    for (const q of g.t.listControllers().find((x) => x.subnqn === SUBNQN)?.queues ?? []) expect(q.tls).toBe(true);
  });

  it('a host without concat still authenticates (NOSC) and stays in cleartext on an allowed concatenation port', async () => {
    const g = await target({ tls: 'allowed', tlsConcat: true });
    const c = await open(g.port, { dhchap_secret: SECRET });
    await verify(c, 5);
    expect(installs(g)).toBe(0);
    for (const q of g.t.listControllers().find((x) => x.subnqn === SUBNQN)?.queues ?? []) expect(q.tls).toBe(false);
  });
});

describe('secure channel concatenation: bad input', { timeout: 30_000 }, () => {
  it('initiator options: concat needs dhchap_secret, refuses tls_key and io_workers (one line naming the option)', async () => {
    const base = { traddr: '127.0.0.1', trsvcid: 1, nqn: SUBNQN, hostnqn: HOST };
    await expect(connect({ ...base, concat: true })).rejects.toThrow(InvalidArgumentError);
    await expect(connect({ ...base, concat: true })).rejects.toThrow(/concat.*needs dhchap_secret/);
    await expect(connect({ ...base, concat: true, dhchap_secret: SECRET, tls_key: formatTlsKey(1, randomBytes(32)) })).rejects.toThrow(/concat.*not together with tls/);
    await expect(connect({ ...base, concat: true, dhchap_secret: SECRET, io_workers: 1 })).rejects.toThrow(/io_workers/);
  });

  it('target config: tlsConcat on a port without TLS is refused naming the field', async () => {
    const t = new TargetService();
    cleanups.push(() => t.stop());
    await expect(t.apply({ ports: [{ id: 1, addr: '127.0.0.1', port: 0, tlsConcat: true }], subsystems: [] })).rejects.toThrow(/tlsConcat.*needs a TLS port/);
  });

  it('wrong secret: the controller answers AUTH_Failure1 and no PSK is generated', async () => {
    const g = await target({ tls: 'allowed', tlsConcat: true });
    const err = await open(g.port, { dhchap_secret: OTHER_SECRET, concat: true, ...FAIL_FAST }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DhchapAuthError);
    expect((err as DhchapAuthError).explanation).toBe(FailureExplanation.FAILED);
    expect(installs(g)).toBe(0);
  });

  for (const [what, port] of [
    ['a port without TLS', {}],
    ['a TLS port without tlsConcat', { tls: 'allowed' }],
  ] as const) {
    it(`${what}: NEWTLSPSK is refused with CONCAT_MISMATCH`, async () => {
      const g = await target(port as Partial<PortConfig>);
      const err = await open(g.port, { dhchap_secret: SECRET, concat: true, ...FAIL_FAST }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DhchapAuthError);
      expect((err as DhchapAuthError).explanation).toBe(FailureExplanation.CONCAT_MISMATCH);
      expect(installs(g)).toBe(0);
    });
  }

  it('a host the target has no DH-HMAC-CHAP key for: no ATR, so no PSK (ConcatNotOfferedError); on a required port the Connect is refused', async () => {
    const g = await target({ tls: 'allowed', tlsConcat: true }, { hosts: [{ nqn: OTHER, dhchapKey: generateDhchapKey({ hmac: 1, hostnqn: OTHER }).format() }] });
    await expect(open(g.port, { dhchap_secret: SECRET, concat: true, ...FAIL_FAST })).rejects.toThrow(ConcatNotOfferedError);
    const r = await target({ tls: 'required', tlsConcat: true }, { hosts: [] });
    await expect(open(r.port, { dhchap_secret: SECRET, concat: true, ...FAIL_FAST })).rejects.toThrow();
    await until(() => r.logs.some((l) => String(l['msg']).includes('secure channel concatenation needs a DH-HMAC-CHAP key for this host')));
  });

  it('required port: a cleartext host without concat is told ASCR and gives up, as Linux does; a made-up generated identity is refused', async () => {
    const g = await target({ tls: 'required', tlsConcat: true });
    const err = await open(g.port, { dhchap_secret: SECRET, ...FAIL_FAST }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuthenticationRequiredError);
    expect((err as AuthenticationRequiredError).reason).toBe('secure-concatenation');
    // No transaction ran, so no generated PSK exists for this identity.
    await new Promise<void>((resolve) => {
      const s = tls.connect({
        host: '127.0.0.1',
        port: g.port,
        minVersion: 'TLSv1.3',
        ciphers: 'TLS_AES_128_GCM_SHA256',
        checkServerIdentity: () => undefined,
        pskCallback: () => ({ psk: randomBytes(32), identity: `NVMe1G01 ${HOST} ${SUBNQN} ${randomBytes(32).toString('base64')}` }),
      } as tls.ConnectionOptions);
      s.on('error', () => resolve());
      s.on('close', () => resolve());
    });
    await until(() => g.logs.some((l) => l['code'] === 'unknown-generated-psk'));
    // A good concatenated host still gets through afterwards.
    const c = await open(g.port, { dhchap_secret: SECRET, concat: true });
    await verify(c, 6);
  });
});
