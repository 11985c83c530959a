// Host DH-HMAC-CHAP keys through the management API over real HTTP against a real TargetService: PUT/GET/DELETE
// /hosts, what our initiator can then do, write-back keeping the real secrets (not "<redacted>"), and secrets absent
// from every reply and every log line (the logger here has no redaction, so nothing may rely on it).
import { Buffer } from 'node:buffer';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { AuthenticationRequiredError, connect, type Controller } from '../../initiator/index.js';
import { generateDhchapKey } from '../../protocol/auth/index.js';
import { parseTargetConfig } from '../../target/config/schema.js';
import { TargetService, type TargetConfig } from '../../target/index.js';
import { startApi, type ApiHandle } from '../../target/mgmt/index.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const SUBNQN = 'nqn.2024-01.io.test:mgmt-host-auth';
const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-4908-8706-0504030201aa';
const KEY = generateDhchapKey({ hmac: 1, hostnqn: HOSTNQN }).format();
const CKEY = generateDhchapKey({ hmac: 2, hostnqn: SUBNQN }).format();
const KEY2 = generateDhchapKey({ hmac: 3, hostnqn: HOSTNQN }).format();
/** The part of a secret that is key material (after "DHHC-1:hh:"). */
const body = (k: string): string => k.slice(10, -1);

const cleanups = cleanupAfterEach();

interface Setup {
  t: TargetService;
  api: ApiHandle;
  port: number;
  path: string;
  logs: string[];
}

async function setup(): Promise<Setup> {
  const dir = await mkdtemp(join(tmpdir(), 'mgmt-host-auth-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'target.json');
  const initial: TargetConfig = {
    ports: [{ id: 1, addr: '127.0.0.1', port: 0 }],
    subsystems: [{ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] }],
  };
  await writeFile(path, JSON.stringify(initial));
  const logs: string[] = [];
  const logger = pino({ level: 'trace' }, new Writable({ write: (c: Buffer, _e, cb) => (logs.push(c.toString()), cb()) }));
  const t = new TargetService({ logger });
  cleanups.push(() => t.stop());
  await t.apply(initial);
  const api = await startApi(t, { listen: '127.0.0.1:0', configPath: path, writeBack: true, logger });
  cleanups.push(() => api.close());
  return { t, api, port: (t.boundPorts()[0] as { port: number }).port, path, logs };
}

async function call(api: ApiHandle, method: string, path: string, reqBody?: unknown): Promise<{ status: number; json: unknown; text: string }> {
  const res = await fetch(`${api.url}${path}`, {
    method,
    ...(reqBody !== undefined ? { headers: { 'content-type': 'application/json' }, body: typeof reqBody === 'string' ? reqBody : JSON.stringify(reqBody) } : {}),
  });
  const text = await res.text();
  return { status: res.status, json: text === '' ? undefined : (JSON.parse(text) as unknown), text };
}

async function host(port: number, extra: Record<string, unknown> = {}): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: SUBNQN, hostnqn: HOSTNQN, nr_io_queues: 1, duplicate_connect: true, ...extra });
  cleanups.push(() => c.disconnect());
  return c;
}

const seg = encodeURIComponent;

describe('management API: host DH-HMAC-CHAP keys', () => {
  it('PUT sets keys (201, redacted reply), hosts must then authenticate, GET lists them redacted, write-back saves the real keys', async () => {
    const s = await setup();
    const put = await call(s.api, 'PUT', `/hosts/${seg(HOSTNQN)}`, { dhchapKey: KEY, dhchapCtrlKey: CKEY, dhchapHash: ['hmac(sha384)'], dhchapDhgroup: ['ffdhe2048'] });
    expect(put.status).toBe(201);
    expect(put.json).toEqual({ hostnqn: HOSTNQN, hostKey: '<redacted>', ctrlKey: '<redacted>', hashes: ['hmac(sha384)'], dhGroups: ['ffdhe2048'] });
    expect((await call(s.api, 'GET', '/hosts')).json).toEqual([put.json]);
    expect((await call(s.api, 'GET', `/hosts/${seg(HOSTNQN)}`)).json).toEqual(put.json);
    expect((await call(s.api, 'GET', '/config')).json).toMatchObject({ hosts: [{ nqn: HOSTNQN, dhchapKey: '<redacted>', dhchapCtrlKey: '<redacted>' }] });

    // The file is the only copy of the keys: it has them for real, loads back, and is owner-only.
    const saved = parseTargetConfig(JSON.parse(await readFile(s.path, 'utf8')));
    expect(saved.hosts).toEqual([{ nqn: HOSTNQN, dhchapKey: KEY, dhchapCtrlKey: CKEY, dhchapHash: ['hmac(sha384)'], dhchapDhgroup: ['ffdhe2048'] }]);
    expect((await stat(s.path)).mode & 0o077).toBe(0);

    await expect(host(s.port)).rejects.toBeInstanceOf(AuthenticationRequiredError);
    const c = await host(s.port, { dhchap_secret: KEY, dhchap_ctrl_secret: CKEY });
    expect(c.authInfo).toEqual({ hash: 'hmac(sha384)', dhgroup: 'ffdhe2048', bidirectional: true });
    expect(s.t.listControllers().find((x) => !x.discovery)?.queues.every((q) => q.auth?.authenticated === true)).toBe(true);
    await c.disconnect();

    // A second PUT replaces the keys (200); the old key is refused from then on.
    const again = await call(s.api, 'PUT', `/hosts/${seg(HOSTNQN)}`, { nqn: HOSTNQN, dhchapKey: KEY2 });
    expect(again.status).toBe(200);
    expect(again.json).toEqual({ hostnqn: HOSTNQN, hostKey: '<redacted>' });
    await expect(host(s.port, { dhchap_secret: KEY })).rejects.toMatchObject({ code: 'NVMEOF_ERR_DHCHAP_AUTH' });
    const c2 = await host(s.port, { dhchap_secret: KEY2 });
    expect(c2.authenticatedQueues).toBeGreaterThan(0);
    expect(JSON.parse(await readFile(s.path, 'utf8')).hosts).toEqual([{ nqn: HOSTNQN, dhchapKey: KEY2 }]);

    const all = s.logs.join('') + put.text + again.text;
    expect(s.logs.join('')).toContain('host authentication keys set');
    for (const k of [KEY, CKEY, KEY2]) expect(all).not.toContain(body(k));
  });

  it('DELETE clears the keys (204, then 404): the host connects without authenticating, and the file drops them', async () => {
    const s = await setup();
    expect((await call(s.api, 'PUT', `/hosts/${seg(HOSTNQN)}`, { dhchapKey: KEY })).status).toBe(201);
    expect((await call(s.api, 'DELETE', `/hosts/${seg(HOSTNQN)}`)).status).toBe(204);
    expect((await call(s.api, 'GET', '/hosts')).json).toEqual([]);
    expect((await call(s.api, 'GET', `/hosts/${seg(HOSTNQN)}`)).status).toBe(404);
    expect((await call(s.api, 'DELETE', `/hosts/${seg(HOSTNQN)}`)).status).toBe(404);
    const c = await host(s.port);
    expect(c.authenticatedQueues).toBe(0);
    expect(JSON.parse(await readFile(s.path, 'utf8')).hosts).toBeUndefined();
  });

  it('refuses bad bodies with 400 naming the field, never quoting a secret, and changes nothing', async () => {
    const s = await setup();
    const corrupt = KEY.replace(/[A-Za-z](?=[^:]*:$)/, (ch) => (ch === 'A' ? 'B' : 'A'));
    const cases: Array<[unknown, string, RegExp]> = [
      [{ dhchapKey: corrupt }, 'dhchapKey', /^body: dhchapKey: is not a usable DH-HMAC-CHAP host key \(DH-HMAC-CHAP secret CRC-32 mismatch/],
      [{ dhchapKey: KEY, dhchapCtrlKey: 'DHHC-1:00:c2VjcmV0:' }, 'dhchapCtrlKey', /^body: dhchapCtrlKey: is not a usable DH-HMAC-CHAP controller key/],
      [{ dhchapKey: KEY, dhchapDhgroup: ['ffdhe1024'] }, 'dhchapDhgroup[0]', /"ffdhe1024" is not a DH-HMAC-CHAP DH group/],
      [{ dhchapKey: KEY, dhchapHsh: ['hmac(sha256)'] }, '', /unknown key "dhchapHsh"; did you mean "dhchapHash"\?/],
      [{ dhchapCtrlKey: CKEY }, 'dhchapKey', /a controller key \(dhchapCtrlKey\) needs the host key/],
      [{ dhchapHash: ['hmac(sha256)'] }, 'dhchapKey', /^body: dhchapKey: is missing/],
      [{ nqn: 'nqn.2024-01.io.test:other', dhchapKey: KEY }, 'nqn', /differs from the host in the path/],
      [`{"dhchapKey": ${KEY}}`, '', /^body: not JSON \(Unexpected token 'D' \(invalid JSON\)\)$/],
    ];
    for (const [reqBody, path, message] of cases) {
      const r = await call(s.api, 'PUT', `/hosts/${seg(HOSTNQN)}`, reqBody);
      expect(r.status, JSON.stringify(reqBody)).toBe(400);
      expect((r.json as { path?: string }).path ?? '').toBe(path);
      expect((r.json as { error: string }).error).toMatch(message);
      for (const k of [KEY, CKEY, corrupt]) expect(r.text).not.toContain(body(k).slice(0, 24));
    }
    expect((await call(s.api, 'PUT', `/hosts/${'h'.repeat(224)}`, { dhchapKey: KEY })).status).toBe(400);
    expect((await call(s.api, 'GET', '/hosts')).json).toEqual([]);
    expect(JSON.parse(await readFile(s.path, 'utf8')).hosts).toBeUndefined();
    for (const k of [KEY, CKEY, corrupt]) expect(s.logs.join('')).not.toContain(body(k).slice(0, 24));
  });
});
