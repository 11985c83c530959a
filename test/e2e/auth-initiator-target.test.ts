// DH-HMAC-CHAP end to end: our initiator (dhchap_secret / dhchap_ctrl_secret) against our target (per-host keys), over
// 127.0.0.1. Every hash × {null, ffdhe2048} × {unidirectional, bidirectional}, larger groups, every queue authenticated,
// and the refusals: wrong host key, wrong controller key, no key when one is required — none of them retried.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { AuthenticationRequiredError, DhchapAuthError, connect, type Controller } from '../../initiator/index.js';
import { runInitiatorCli } from '../../cli/initiator.js';
import { FailureExplanation, generateDhchapKey, type KeyTransform } from '../../protocol/auth/index.js';
import { TargetService } from '../../target/index.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const SUBNQN = 'nqn.2024-01.io.test:auth-e2e';
const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-4908-8706-050403020100';

const cleanups = cleanupAfterEach();

interface Keys {
  host: string;
  ctrl: string;
}

function keys(hmac: KeyTransform = 1): Keys {
  return {
    host: generateDhchapKey({ hmac, ...(hmac !== 0 ? { hostnqn: HOSTNQN } : {}) }).format(),
    ctrl: generateDhchapKey({ hmac, ...(hmac !== 0 ? { hostnqn: SUBNQN } : {}) }).format(),
  };
}

async function target(k: Keys, opts: { ctrl?: boolean; hash?: string; dhgroup?: string } = {}): Promise<{ t: TargetService; port: number }> {
  const t = new TargetService();
  cleanups.push(() => t.stop());
  await t.apply({
    ports: [{ id: 1, addr: '127.0.0.1', port: 0 }],
    subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '4M' } }] }],
    hosts: [
      {
        nqn: HOSTNQN,
        dhchapKey: k.host,
        ...(opts.ctrl === true ? { dhchapCtrlKey: k.ctrl } : {}),
        ...(opts.hash !== undefined ? { dhchapHash: [opts.hash] } : {}),
        ...(opts.dhgroup !== undefined ? { dhchapDhgroup: [opts.dhgroup] } : {}),
      },
    ],
  });
  return { t, port: (t.boundPorts()[0] as { port: number }).port };
}

async function open(port: number, extra: Record<string, unknown>): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: SUBNQN, hostnqn: HOSTNQN, nr_io_queues: 2, duplicate_connect: true, ...extra });
  cleanups.push(() => c.disconnect());
  return c;
}

async function roundTrip(c: Controller): Promise<void> {
  const data = Buffer.alloc(8192, 0);
  for (let i = 0; i < data.length; i++) data[i] = (i * 31 + 7) & 0xff;
  const ns = c.namespace(1);
  await ns.write(8, data, { hctx: 1 });
  expect((await ns.read(8, 16, undefined, { hctx: 0 })).equals(data)).toBe(true);
}

describe('DH-HMAC-CHAP: initiator ↔ target', () => {
  for (const hash of ['sha256', 'sha384', 'sha512'] as const) {
    for (const dhgroup of ['null', 'ffdhe2048'] as const) {
      for (const bidi of [false, true]) {
        it(`hmac(${hash}) ${dhgroup} ${bidi ? 'bidirectional' : 'unidirectional'}: every queue authenticates, I/O works`, async () => {
          const k = keys(hash === 'sha256' ? 1 : hash === 'sha384' ? 2 : 3);
          const { t, port } = await target(k, { ctrl: bidi, hash: `hmac(${hash})`, dhgroup });
          const c = await open(port, { dhchap_secret: k.host, ...(bidi ? { dhchap_ctrl_secret: k.ctrl } : {}) });
          await roundTrip(c);
          const ctrls = t.listControllers();
          expect(ctrls.length).toBe(1);
          const qs = ctrls[0]?.queues ?? [];
          expect(qs.map((q) => q.qid)).toEqual([0, 1, 2]);
          for (const q of qs) expect(q.auth).toEqual({ state: 'authenticated', authenticated: true, hash, dhgroup, bidirectional: bidi });
          expect(c.authenticatedQueues).toBe(3);
          expect(c.authInfo).toEqual({ hash: `hmac(${hash})`, dhgroup, bidirectional: bidi });
          expect(t.authStats()).toEqual({ succeeded: 3, failed: 0, expired: 0 });
        });
      }
    }
  }

  it('ffdhe4096 and ffdhe8192 (bidirectional, SHA-512) with a key without transform (hh 00)', async () => {
    for (const dhgroup of ['ffdhe4096', 'ffdhe8192']) {
      const k = keys(0);
      const { t, port } = await target(k, { ctrl: true, dhgroup });
      const c = await open(port, { dhchap_secret: k.host, dhchap_ctrl_secret: k.ctrl, nr_io_queues: 1 });
      await roundTrip(c);
      expect(t.listControllers()[0]?.queues.map((q) => [q.auth?.dhgroup, q.auth?.bidirectional])).toEqual([
        [dhgroup, true],
        [dhgroup, true],
      ]);
      await c.disconnect();
    }
  });

  it('with all groups allowed the target picks its first preference (null), as nvmet does with the Linux host', async () => {
    const k = keys(1);
    const { t, port } = await target(k);
    await open(port, { dhchap_secret: k.host });
    expect(t.listControllers()[0]?.queues[0]?.auth).toMatchObject({ hash: 'sha256', dhgroup: 'null', bidirectional: false });
  });

  it('a wrong host key is refused by the controller (AUTH_Failure1, FAILED) and not retried', async () => {
    const k = keys(1);
    const { t, port } = await target(k);
    const err = await open(port, { dhchap_secret: keys(1).host, reconnect_delay: 0.05 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DhchapAuthError);
    expect(err).toMatchObject({ code: 'NVMEOF_ERR_DHCHAP_AUTH', explanation: FailureExplanation.FAILED, detectedBy: 'controller' });
    await new Promise((r) => setTimeout(r, 50));
    expect(t.listControllers()).toEqual([]);
    expect(t.authStats().failed).toBe(1);
    expect(t.stats().connects.ok).toBe(1);
  });

  it('a wrong controller key is detected by the host (R2 mismatch → AUTH_Failure2) and the target tears down', async () => {
    const k = keys(2);
    const { t, port } = await target(k, { ctrl: true });
    const err = await open(port, { dhchap_secret: k.host, dhchap_ctrl_secret: keys(2).ctrl }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DhchapAuthError);
    expect(err).toMatchObject({ explanation: FailureExplanation.FAILED, detectedBy: 'host' });
    await new Promise((r) => setTimeout(r, 50));
    expect(t.listControllers()).toEqual([]);
    expect(t.authStats().failed).toBe(1);
  });

  it('no secret when the controller requires authentication: refused before anything else is sent', async () => {
    const k = keys(1);
    const { t, port } = await target(k);
    const err = await open(port, {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuthenticationRequiredError);
    expect(err).toMatchObject({ code: 'NVMEOF_ERR_AUTH_REQUIRED', reason: 'no-key', qid: 0 });
    expect(t.authStats()).toEqual({ succeeded: 0, failed: 0, expired: 0 });
  });

  it('a secret given to a target that asks for none is not used (Linux behaviour)', async () => {
    const t = new TargetService();
    cleanups.push(() => t.stop());
    const port = (await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 })).port;
    await t.addSubsystem({ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] });
    const c = await open(port, { dhchap_secret: keys(1).host });
    expect(c.authenticatedQueues).toBe(0);
    await roundTrip(c);
  });

  it('rejects malformed secrets and a controller secret without a host secret, naming the option only', async () => {
    const k = keys(1);
    const broken = k.host.replace(/.{4}:$/, 'AAAA:');
    const e1 = await connect({ traddr: '127.0.0.1', trsvcid: 1, nqn: SUBNQN, dhchap_secret: broken }).catch((e: unknown) => e);
    expect(e1).toMatchObject({ code: 'NVMEOF_ERR_INVALID_ARG', field: 'dhchap_secret' });
    expect(String(e1)).not.toContain(broken.split(':')[2]);
    const e2 = await connect({ traddr: '127.0.0.1', trsvcid: 1, nqn: SUBNQN, dhchap_ctrl_secret: k.ctrl }).catch((e: unknown) => e);
    expect(e2).toMatchObject({ field: 'dhchap_ctrl_secret' });
  });

  it('io workers: I/O queues authenticate on their worker (bidirectional), again after a reconnect; a wrong key fails the connect', async () => {
    const k = keys(2);
    const { t, port } = await target(k, { ctrl: true });
    const c = await open(port, { dhchap_secret: k.host, dhchap_ctrl_secret: k.ctrl, io_workers: 2, reconnect_delay: 0.05 });
    expect(c.queueInfo().filter((q) => q.qid > 0).map((q) => q.owner)).toEqual(['worker 0', 'worker 1']);
    await roundTrip(c);
    const qs = t.listControllers()[0]?.queues ?? [];
    expect(qs.map((q) => [q.qid, q.auth?.authenticated, q.auth?.bidirectional])).toEqual([
      [0, true, true],
      [1, true, true],
      [2, true, true],
    ]);
    expect(c.authenticatedQueues).toBe(3);
    const again = new Promise<void>((resolve) => c.once('reconnected', () => resolve()));
    c.reset();
    await again;
    await roundTrip(c);
    expect(c.authenticatedQueues).toBe(6);
    expect(t.authStats()).toEqual({ succeeded: 6, failed: 0, expired: 0 });
    await c.disconnect();
    // The target asks the workers' queues too, so a wrong controller key cannot slip through on them.
    const bad = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: SUBNQN, hostnqn: HOSTNQN, nr_io_queues: 2, io_workers: 1, dhchap_secret: k.host, dhchap_ctrl_secret: keys(2).ctrl }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(DhchapAuthError);
  });

  it('re-authenticates every queue after a reconnect', async () => {
    const k = keys(3);
    const { t, port } = await target(k, { ctrl: true });
    const c = await open(port, { dhchap_secret: k.host, dhchap_ctrl_secret: k.ctrl, reconnect_delay: 0.05, nr_io_queues: 1 });
    const again = new Promise<void>((resolve) => c.once('reconnected', () => resolve()));
    c.reset();
    await again;
    await roundTrip(c);
    expect(c.authenticatedQueues).toBe(4);
    expect(t.authStats().succeeded).toBe(4);
  });

  it('CLI: nvme-tcp connect -S/-C authenticates; a wrong -S exits 1 naming the failure, never the secret', async () => {
    const k = keys(1);
    const { port } = await target(k, { ctrl: true });
    let out = '';
    let err = '';
    const io = { stdout: (s: string) => void (out += s), stderr: (s: string) => void (err += s) };
    // -I with -q: the machine's /etc/nvme/hostid (if any) stays out of it, and with it the shared-host-ID warning.
    const args = ['-a', '127.0.0.1', '-s', String(port), '-n', SUBNQN, '-q', HOSTNQN, '-I', HOSTNQN.slice(-36), '-i', '1', '-D'];
    expect(await runInitiatorCli('connect', [...args, '-S', k.host, '-C', k.ctrl], io)).toBe(0);
    expect(err).toBe('');
    expect(out).toContain(`subsystem ${SUBNQN}`);
    const wrong = keys(1).host;
    expect(await runInitiatorCli('connect', [...args, '--dhchap-secret', wrong], io)).toBe(1);
    expect(err).toMatch(/NVMEOF_ERR_DHCHAP_AUTH/);
    expect(err + out).not.toContain(wrong.split(':')[2]);
    expect(err + out).not.toContain(k.host.split(':')[2]);
  });
});
