// TLS 1.3 (TP 8011) end to end over 127.0.0.1: our initiator (tls_key) against our target (per-port tls mode, per-host
// tlsKey). I/O with verify, digests on and off, 'allowed' ports carrying a cleartext and a TLS host at once, reconnect
// after a target restart re-handshaking every queue, and the refusals — unknown identity, wrong key, SHA-384-only
// client, cleartext ICReq on a 'required' port, stalled handshake — each closing only its own connection with a log
// line naming host, port and reason.
import { Buffer } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { connect, discover, type Controller } from '../../initiator/index.js';
import { formatTlsKey } from '../../protocol/tls/index.js';
import { TargetService, type PortConfig } from '../../target/index.js';
import { until } from '../../harness/until.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const SUBNQN = 'nqn.2024-01.io.test:tls-e2e';
const HOST_A = 'nqn.2014-08.org.nvmexpress:uuid:1a1a1a1a-0000-4000-8000-000000000001';
const HOST_B = 'nqn.2014-08.org.nvmexpress:uuid:2b2b2b2b-0000-4000-8000-000000000002';
const KEY_A = formatTlsKey(1, randomBytes(32));
const KEY_B = formatTlsKey(1, randomBytes(32));

const cleanups = cleanupAfterEach();

interface Tgt {
  t: TargetService;
  port: number;
  logs: Array<Record<string, unknown>>;
}

async function target(mode: 'allowed' | 'required', port = 0, extra: Partial<PortConfig> = {}): Promise<Tgt> {
  const logs: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => void logs.push(JSON.parse(s) as Record<string, unknown>) });
  const t = new TargetService({ logger });
  cleanups.push(() => t.stop());
  await t.apply({
    ports: [{ id: 1, addr: '127.0.0.1', port, tls: mode, ...extra }],
    subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '4M' } }] }],
    hosts: [{ nqn: HOST_A, tlsKey: KEY_A }],
  });
  return { t, port: (t.boundPorts()[0] as { port: number }).port, logs };
}

async function open(port: number, hostnqn: string, extra: Record<string, unknown>): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: SUBNQN, hostnqn, nr_io_queues: 2, duplicate_connect: true, ...extra });
  cleanups.push(() => c.disconnect());
  return c;
}

function pattern(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed * 7 + 3) & 0xff;
  return b;
}

/** 4 KiB and 128 KiB writes on both I/O queues, read back and compared. */
async function verify(c: Controller, seed: number): Promise<void> {
  const ns = c.namespace(1);
  // Each seed writes its own 1 MiB region: two hosts verifying at once must not overwrite each other's blocks.
  const base = (seed % 4) * 2048;
  for (const [lba, len, hctx] of [[base, 4096, 0], [base + 64, 131072, 1]] as const) {
    const data = pattern(len, seed + Number(lba));
    await ns.write(lba, data, { hctx });
    expect((await ns.read(lba, len / 512, undefined, { hctx: 1 - hctx })).equals(data)).toBe(true);
  }
}

function tlsWarnings(g: Tgt): Array<Record<string, unknown>> {
  return g.logs.filter((l) => typeof l['msg'] === 'string' && (l['msg'] as string).startsWith('TLS: closing connection'));
}

describe('TLS: initiator ↔ target', { timeout: 20_000 }, () => {
  for (const digests of [false, true]) {
    it(`required port, every queue over TLS 1.3, verify with digests ${digests ? 'on' : 'off'}`, async () => {
      const g = await target('required');
      const c = await open(g.port, HOST_A, { tls_key: KEY_A, hdr_digest: digests, data_digest: digests });
      await verify(c, digests ? 1 : 2);
      const qs = g.t.listControllers().find((x) => x.subnqn === SUBNQN)?.queues ?? [];
      expect(qs.map((q) => q.qid)).toEqual([0, 1, 2]);
      for (const q of qs) expect(q.tls).toBe(true);
      expect(g.t.tlsStats()).toMatchObject({ handshakesOk: 3, handshakesFailed: 0 });
      expect(g.t.stats().tls).toEqual({ handshakesOk: 3, handshakesFailed: 0 });
    });
  }

  it('allowed port: a cleartext host and a TLS host at once', async () => {
    const g = await target('allowed');
    const a = await open(g.port, HOST_A, { tls_key: KEY_A });
    const b = await open(g.port, HOST_B, {});
    await Promise.all([verify(a, 3), verify(b, 4)]);
    const ctrls = g.t.listControllers().filter((x) => x.subnqn === SUBNQN);
    const byHost = (h: string) => ctrls.find((x) => x.hostnqn === h)?.queues.map((q) => q.tls);
    expect(byHost(HOST_A)).toEqual([true, true, true]);
    expect(byHost(HOST_B)).toEqual([false, false, false]);
  });

  it('discovery log reports TREQ secure channel required / not required', async () => {
    for (const [mode, treqBits] of [['required', 1], ['allowed', 2]] as const) {
      const g = await target(mode);
      const entries = await discover({ traddr: '127.0.0.1', trsvcid: g.port, hostnqn: HOST_A, tls_key: KEY_A });
      const e = entries.find((x) => x.subnqn === SUBNQN);
      expect(e === undefined ? undefined : e.treq & 3).toBe(treqBits);
    }
  });

  it('reconnect after a target restart re-handshakes every queue', async () => {
    const g = await target('required');
    const c = await open(g.port, HOST_A, { tls_key: KEY_A, reconnect_delay: 0.1, ctrl_loss_tmo: 10 });
    await verify(c, 5);
    const reconnecting = new Promise<void>((r) => c.once('reconnecting', () => r()));
    await g.t.stop();
    await reconnecting;
    const g2 = await target('required', g.port);
    await until(() => c.state === 'live');
    await verify(c, 6);
    expect(g2.t.tlsStats().handshakesOk).toBe(3);
  });

  it('config and API views redact the TLS key; a malformed key or a wrong CRC is refused naming the field', async () => {
    const g = await target('required');
    const cfg = JSON.stringify(g.t.getConfig());
    expect(cfg).toContain('"tlsKey":"<redacted>"');
    expect(cfg).not.toContain(KEY_A.slice(16, 40));
    expect(JSON.stringify(g.logs)).not.toContain(KEY_A.slice(16, 40));
    const badCrc = KEY_A.replace(/.(=*:)$/, (m, tail: string) => `${m[0] === 'A' ? 'B' : 'A'}${tail}`);
    expect(() => g.t.setHostTlsKey({ nqn: HOST_B, tlsKey: badCrc })).toThrow(/hosts\.tlsKey.*CRC-32/);
    expect(() => g.t.setHostTlsKey({ nqn: HOST_B, tlsKey: 'NVMeTLSkey-1:01:abc' })).toThrow(/hosts\.tlsKey/);
    await expect(connect({ traddr: '127.0.0.1', trsvcid: g.port, nqn: SUBNQN, tls_key: badCrc })).rejects.toMatchObject({ code: 'NVMEOF_ERR_INVALID_ARG' });
    await expect(connect({ traddr: '127.0.0.1', trsvcid: g.port, nqn: SUBNQN, tls_key: formatTlsKey(2, randomBytes(48)) })).rejects.toThrow(/SHA-384/);
  });
});

describe('TLS with target workers (multi-process)', { timeout: 30_000 }, () => {
  it('TLS queues stay in the primary (a TLS session cannot move to another process); cleartext ones move', async () => {
    const t = new TargetService({ workers: 2, placement: 'queue' });
    cleanups.push(() => t.stop());
    await t.apply({
      ports: [{ id: 1, addr: '127.0.0.1', port: 0, tls: 'allowed' }],
      subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '4M' } }] }],
      hosts: [{ nqn: HOST_A, tlsKey: KEY_A }],
    });
    const port = (t.boundPorts()[0] as { port: number }).port;
    const a = await open(port, HOST_A, { tls_key: KEY_A });
    const b = await open(port, HOST_B, {});
    await verify(a, 9);
    await verify(b, 10);
    const ctrls = t.listControllers().filter((x) => x.subnqn === SUBNQN);
    const io = (h: string) => ctrls.find((x) => x.hostnqn === h)?.queues.filter((q) => q.qid > 0) ?? [];
    expect(io(HOST_A).map((q) => [q.tls, q.worker])).toEqual([[true, undefined], [true, undefined]]);
    expect(io(HOST_B).every((q) => q.worker !== undefined)).toBe(true);
  });
});

describe('TLS: bad input closes only that connection, with a log line naming host, port and reason', { timeout: 20_000 }, () => {
  it('unknown identity, wrong key, SHA-384-only client, cleartext ICReq, stalled handshake', async () => {
    const g = await target('required', 0, { tlsHandshakeTimeoutS: 1 });
    const good = await open(g.port, HOST_A, { tls_key: KEY_A });
    await verify(good, 7);
    const failOpts = { reconnect_delay: 0.05, ctrl_loss_tmo: 0.2 };

    // A host the target has no key for.
    await expect(open(g.port, HOST_B, { tls_key: KEY_B, ...failOpts })).rejects.toThrow();
    await until(() => tlsWarnings(g).some((l) => l['code'] === 'unknown-identity'));
    const unknown = tlsWarnings(g).find((l) => l['code'] === 'unknown-identity') as Record<string, unknown>;
    expect(unknown).toMatchObject({ hostnqn: HOST_B, port: 1 });
    expect(String(unknown['msg'])).toContain(`host ${HOST_B}`);
    expect(String(unknown['reason'])).toMatch(/no TLS key configured/);

    // The right host with the wrong key: the PSK binder does not verify.
    await expect(open(g.port, HOST_A, { tls_key: KEY_B, ...failOpts })).rejects.toThrow();
    await until(() => tlsWarnings(g).some((l) => l['code'] === 'handshake' && l['hostnqn'] === HOST_A));

    // A client offering only TLS_AES_256_GCM_SHA384 with a "02" identity.
    await new Promise<void>((resolve) => {
      const s = tls.connect({
        host: '127.0.0.1',
        port: g.port,
        minVersion: 'TLSv1.3',
        ciphersuites: 'TLS_AES_256_GCM_SHA384',
        ciphers: 'TLS_AES_256_GCM_SHA384',
        checkServerIdentity: () => undefined,
        pskCallback: () => ({ psk: randomBytes(48), identity: `NVMe0R02 ${HOST_A} ${SUBNQN}` }),
      } as tls.ConnectionOptions);
      s.on('error', () => resolve());
      s.on('close', () => resolve());
    });
    await until(() => tlsWarnings(g).some((l) => l['code'] === 'sha384'));
    expect(String(tlsWarnings(g).find((l) => l['code'] === 'sha384')?.['reason'])).toMatch(/SHA-384.*Node 20/);

    // Cleartext ICReq on a required port (our initiator without tls_key).
    await expect(open(g.port, HOST_A, failOpts)).rejects.toThrow();
    await until(() => tlsWarnings(g).some((l) => l['code'] === 'cleartext-on-required'));

    // A ClientHello that never comes: one handshake-record byte, then silence, closed after tlsHandshakeTimeoutS.
    const stalled = net.connect({ host: '127.0.0.1', port: g.port });
    const closed = new Promise<void>((r) => stalled.on('close', () => r()));
    stalled.on('error', () => undefined);
    stalled.write(Buffer.from([0x16]));
    await closed;
    const timeout = tlsWarnings(g).find((l) => l['code'] === 'timeout');
    expect(timeout).toMatchObject({ port: 1 });
    expect(String(timeout?.['reason'])).toMatch(/not completed within 1000 ms/);

    // The good controller never noticed.
    await verify(good, 8);
    expect(good.state).toBe('live');
    expect(g.t.tlsStats().handshakesOk).toBe(3);
    expect(g.t.tlsStats().handshakesFailed).toBeGreaterThanOrEqual(5);
    expect(g.t.debugCounts().unboundConnections).toBe(0);
    // Only the good controller's three connections are left open.
    expect(g.t.stats().connections.active).toBe(3);
  });
});
