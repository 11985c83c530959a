// `nvme-tcp target ctl` and its API client against msw's request interception: every command's method, path,
// body and auth header, and how errors become exit codes.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { http, HttpResponse } from 'msw';
import { setupServer } from 'msw/node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runCtlCli } from './ctl.js';
import { MgmtApiError, MgmtClient } from '../target/mgmt/index.js';

const BASE = 'http://mgmt.test:8080';
const NQN = 'nqn.2024-01.io.test:ctl';
const HOST = 'nqn.2024-01.io.test:host';

interface Seen {
  method: string;
  path: string;
  body: unknown;
  auth: string | null;
}
const seen: Seen[] = [];

const server = setupServer(
  http.all(`${BASE}/*`, async ({ request }) => {
    const url = new URL(request.url);
    const text = await request.text();
    seen.push({ method: request.method, path: url.pathname, body: text === '' ? undefined : (JSON.parse(text) as unknown), auth: request.headers.get('authorization') });
    if (url.pathname === '/metrics') return new HttpResponse('# HELP x y\n# TYPE x counter\nx 1\n', { headers: { 'content-type': 'text/plain; version=0.0.4' } });
    if (url.pathname === '/subsystems/bad') return HttpResponse.json({ error: 'body: backend.size: "huge" is not a size', path: 'backend.size' }, { status: 400 });
    if (url.pathname === '/html') return new HttpResponse('<h1>proxy error</h1>', { status: 502, headers: { 'content-type': 'text/html' } });
    if (request.method === 'DELETE') return new HttpResponse(null, { status: 204 });
    return HttpResponse.json({ ok: true, echo: url.pathname }, { status: request.method === 'POST' ? 201 : 200 });
  }),
);

beforeAll(() => server.listen({ onUnhandledRequest: 'error' }));
afterEach(() => {
  server.resetHandlers();
  seen.length = 0;
});
afterAll(() => server.close());

async function ctl(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCtlCli(['--api', BASE, ...argv], { stdout: (s) => (out += s), stderr: (s) => (err += s), env: {} });
  return { code, out, err };
}

const enc = encodeURIComponent;
// Syntactically valid secrets; ctl does not check them (the API does), it only carries them.
const KEY = 'DHHC-1:01:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQGvpLJ2:';
const CKEY = 'DHHC-1:00:AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgJk89+V:';

describe('target ctl → HTTP requests', () => {
  const cases: Array<[string, string[], string, string, unknown]> = [
    ['health', ['health'], 'GET', '/healthz', undefined],
    ['subsystem list', ['subsystem', 'list'], 'GET', '/subsystems', undefined],
    ['subsystem show', ['subsystem', 'show', NQN], 'GET', `/subsystems/${enc(NQN)}`, undefined],
    [
      'subsystem add from flags',
      ['subsystem', 'add', NQN, '--host', HOST, '--port', '1', '--port', '2', '--serial', 'S1', '--max-io-queues', '4', '--no-ana'],
      'POST',
      '/subsystems',
      { nqn: NQN, hosts: [HOST], ports: [1, 2], serial: 'S1', maxIoQueues: 4, ana: false },
    ],
    ['subsystem add --body', ['subsystem', 'add', '--body', `{"nqn":"${NQN}","model":"m"}`], 'POST', '/subsystems', { nqn: NQN, model: 'm' }],
    ['subsystem remove', ['subsystem', 'remove', NQN], 'DELETE', `/subsystems/${enc(NQN)}`, undefined],
    ['namespace list', ['namespace', 'list', NQN], 'GET', `/subsystems/${enc(NQN)}/namespaces`, undefined],
    [
      'namespace add ram',
      ['namespace', 'add', NQN, '2', '--ram', '64M', '--block-size', '4096', '--ana-group', '2'],
      'POST',
      `/subsystems/${enc(NQN)}/namespaces`,
      { nsid: 2, backend: { type: 'ram', size: '64M' }, blockSize: 4096, anaGroup: 2 },
    ],
    [
      'namespace add file',
      ['namespace', 'add', NQN, '3', '--file', '/tmp/x.img', '--size', '1048576', '--read-only'],
      'POST',
      `/subsystems/${enc(NQN)}/namespaces`,
      { nsid: 3, backend: { type: 'file', path: '/tmp/x.img', size: 1048576 }, readOnly: true },
    ],
    ['namespace add null', ['namespace', 'add', NQN, '4', '--null', '1G'], 'POST', `/subsystems/${enc(NQN)}/namespaces`, { nsid: 4, backend: { type: 'null', size: '1G' } }],
    ['namespace remove', ['namespace', 'remove', NQN, '2'], 'DELETE', `/subsystems/${enc(NQN)}/namespaces/2`, undefined],
    ['host list', ['host', 'list', NQN], 'GET', `/subsystems/${enc(NQN)}/hosts`, undefined],
    ['host add', ['host', 'add', NQN, HOST], 'POST', `/subsystems/${enc(NQN)}/hosts`, { nqn: HOST }],
    ['host remove', ['host', 'remove', NQN, HOST], 'DELETE', `/subsystems/${enc(NQN)}/hosts/${enc(HOST)}`, undefined],
    ['host-auth list', ['host-auth', 'list'], 'GET', '/hosts', undefined],
    [
      'host-auth set from flags',
      ['host-auth', 'set', HOST, '--dhchap-key', KEY, '--dhchap-ctrl-key', CKEY, '--dhchap-hash', 'hmac(sha384)', '--dhchap-hash', 'hmac(sha256)', '--dhchap-dhgroup', 'ffdhe2048'],
      'PUT',
      `/hosts/${enc(HOST)}`,
      { nqn: HOST, dhchapKey: KEY, dhchapCtrlKey: CKEY, dhchapHash: ['hmac(sha384)', 'hmac(sha256)'], dhchapDhgroup: ['ffdhe2048'] },
    ],
    ['host-auth set --body', ['host-auth', 'set', HOST, '--body', JSON.stringify({ dhchapKey: KEY })], 'PUT', `/hosts/${enc(HOST)}`, { nqn: HOST, dhchapKey: KEY }],
    ['host-auth clear', ['host-auth', 'clear', HOST], 'DELETE', `/hosts/${enc(HOST)}`, undefined],
    ['port list', ['port', 'list'], 'GET', '/ports', undefined],
    [
      'port add',
      ['port', 'add', '2', '::1', '4421', '--family', 'ipv6', '--inline-data-size', '8192', '--max-h2c-data', '65536'],
      'POST',
      '/ports',
      { id: 2, addr: '::1', port: 4421, family: 'ipv6', inlineDataSize: 8192, maxH2CData: 65536 },
    ],
    ['port remove', ['port', 'remove', '2'], 'DELETE', '/ports/2', undefined],
    ['referral list', ['referral', 'list', '1'], 'GET', '/ports/1/referrals', undefined],
    ['referral add', ['referral', 'add', '1', '10.0.0.2', '8009', '--portid', '7'], 'POST', '/ports/1/referrals', { addr: '10.0.0.2', port: 8009, portId: 7 }],
    ['referral remove', ['referral', 'remove', '1', '10.0.0.2', '8009'], 'DELETE', '/ports/1/referrals/10.0.0.2/8009', undefined],
    ['ana set', ['ana', 'set', '1', '2', 'inaccessible'], 'PUT', '/ports/1/ana/2', { state: 'inaccessible' }],
    [
      'faults set',
      ['faults', 'set', NQN, '--command-latency-us', '500', '--fail-next', '3:0x4002'],
      'PUT',
      `/subsystems/${enc(NQN)}/faults`,
      { commandLatencyUs: 500, failNext: { count: 3, status: 0x4002 } },
    ],
    ['faults clear', ['faults', 'set', NQN, '--clear'], 'PUT', `/subsystems/${enc(NQN)}/faults`, {}],
    ['controllers', ['controllers'], 'GET', '/controllers', undefined],
    ['config', ['config'], 'GET', '/config', undefined],
    ['metrics', ['metrics'], 'GET', '/metrics', undefined],
  ];

  it.each(cases)('%s', async (_name, argv, method, path, body) => {
    const r = await ctl(...argv);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toEqual({ method, path, body, auth: null });
  });

  it('prints JSON replies as JSON and text replies as text', async () => {
    expect(JSON.parse((await ctl('-o', 'json', 'port', 'list')).out)).toEqual({ ok: true, echo: '/ports' });
    expect((await ctl('port', 'list', '-o', 'json')).out).toBe(`${JSON.stringify({ ok: true, echo: '/ports' }, null, 2)}\n`);
    expect((await ctl('port', 'list')).out).toBe('ok    true\necho  /ports\n');
    expect((await ctl('metrics')).out).toBe('# HELP x y\n# TYPE x counter\nx 1\n');
    expect((await ctl('port', 'remove', '3')).out).toBe('');
  });

  it('sends the bearer token from --token or $NVME_TCP_API_TOKEN', async () => {
    await ctl('--token', 'tok1', 'health');
    let err = '';
    await runCtlCli(['controllers'], { stdout: () => undefined, stderr: (s) => (err += s), env: { NVME_TCP_API: BASE, NVME_TCP_API_TOKEN: 'tok2' } });
    expect(err).toBe('');
    expect(seen.map((s) => s.auth)).toEqual(['Bearer tok1', 'Bearer tok2']);
  });
});

describe('target ctl host-auth', () => {
  it('reads secrets from @FILE or stdin (first line), so they stay out of argv, and prints only the reply', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ctl-auth-'));
    try {
      await writeFile(join(dir, 'key'), `${KEY}\n`, { mode: 0o600 });
      let out = '';
      let err = '';
      const code = await runCtlCli(['--api', BASE, 'host-auth', 'set', HOST, '--dhchap-key', `@${join(dir, 'key')}`, '--dhchap-ctrl-key', '-'], {
        stdout: (x) => (out += x),
        stderr: (x) => (err += x),
        env: {},
        readStdin: async () => `${CKEY}\r\nignored\n`,
      });
      expect({ code, err }).toEqual({ code: 0, err: '' });
      expect(seen[0]?.body).toEqual({ nqn: HOST, dhchapKey: KEY, dhchapCtrlKey: CKEY });
      expect(out).not.toContain(KEY.slice(10, 40));
      expect(out).not.toContain(CKEY.slice(10, 40));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('usage errors never print a secret', async () => {
    const noKey = await ctl('host-auth', 'set', HOST, '--dhchap-ctrl-key', CKEY);
    expect(noKey.code).toBe(2);
    expect(noKey.err).toMatch(/^nvme-tcp target ctl: host-auth set needs --dhchap-key SECRET/);
    const badBody = await ctl('host-auth', 'set', HOST, '--body', `{"dhchapKey": ${KEY}}`);
    expect(badBody.code).toBe(2);
    expect(badBody.err).toMatch(/^nvme-tcp target ctl: --body is not JSON: /);
    for (const r of [noKey, badBody]) expect(r.err + r.out).not.toContain(KEY.slice(10, 40));
    expect(noKey.err).not.toContain(CKEY.slice(10, 40));
    expect(seen).toEqual([]);
  });
});

describe('target ctl errors', () => {
  it('exits 1 with the API error and the field path on a 4xx', async () => {
    const r = await ctl('subsystem', 'show', 'bad');
    expect(r.code).toBe(1);
    expect(r.err).toBe('nvme-tcp target ctl: HTTP 400: body: backend.size: "huge" is not a size (at backend.size)\n');
  });

  it('exits 2 on a usage error without sending anything', async () => {
    const cases: [string[], RegExp][] = [
      [[], /missing command/],
      [['frobnicate'], /unknown command 'frobnicate'/],
      [['namespce', 'list', NQN], /unknown command 'namespce' \(did you mean namespace\?\)/],
      [['namespace', 'add', NQN, 'x', '--ram', '1M'], /nsid x: not an integer/],
      [['namespace', 'add', NQN, '1'], /needs exactly one of --ram SIZE/],
      [['ana', 'set', '1', '1', 'sideways'], /state sideways: not an ANA state/],
      [['faults', 'set', NQN], /needs at least one fault flag/],
      [['--bogus'], /unknown option '--bogus'/],
      // Extra words are refused, not dropped (issue #32: this created "bad", exit 0).
      [['subsystem', 'add', 'bad', 'nqn', 'with', 'spaces'], /too many arguments/],
      [['-o', 'yaml', 'health'], /argument 'yaml' is invalid/],
      [['--api', 'localhost:x', 'health'], /--api localhost:x: not ADDR:PORT/],
    ];
    for (const [argv, re] of cases) {
      const r = await ctl(...argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.err, argv.join(' ')).toMatch(re);
      expect(r.err.split('\n').filter(Boolean), argv.join(' ')).toHaveLength(1);
      expect(r.out).toBe('');
    }
    expect(seen).toEqual([]);
  });

  it('exits 1 when the API cannot be reached', async () => {
    server.use(http.all(`${BASE}/*`, () => HttpResponse.error()));
    const r = await ctl('health');
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^nvme-tcp target ctl: request failed: /);
  });

  it('the client reports non-JSON error pages with their status', async () => {
    const c = new MgmtClient({ baseUrl: BASE });
    const e = await c.call('GET', '/html').catch((x: unknown) => x);
    expect(e).toBeInstanceOf(MgmtApiError);
    expect(e).toMatchObject({ status: 502, message: 'HTTP 502: <h1>proxy error</h1>' });
  });

  it('--help prints the usage and exits 0', async () => {
    const r = await ctl('--help');
    expect(r.code).toBe(0);
    for (const noun of ['subsystem', 'namespace', 'host', 'host-auth', 'port', 'referral', 'ana', 'faults', 'controllers', 'workers', 'placement', 'config', 'metrics']) expect(r.out).toMatch(new RegExp(`^  ${noun} `, 'm'));
    const a = await ctl('ana', 'set', '-h');
    expect(a.code).toBe(0);
    expect(a.out).toMatch(/^Usage: nvme-tcp target ctl ana set \[options\] <portid> <grpid> <state>/);
    const ns = await ctl('namespace', 'add', '--help');
    expect(ns.out).toMatch(/--ram <size>/);
    expect(ns.out).toMatch(/-h, --help/);
    expect(seen).toEqual([]);
  });

  it('--api takes ADDR:PORT like "target --api", or a URL', async () => {
    const urls: string[] = [];
    const fetch = async (input: string | URL | Request): Promise<Response> => {
      urls.push(input instanceof Request ? input.url : String(input));
      return new Response('{"status":"ok"}', { headers: { 'content-type': 'application/json' } });
    };
    for (const api of ['127.0.0.1:9', '[::1]:9', 'http://127.0.0.1:9']) {
      let err = '';
      const code = await runCtlCli(['--api', api, 'health'], { stdout: () => undefined, stderr: (s) => (err += s), env: {}, fetch: fetch as typeof globalThis.fetch });
      expect({ code, err }).toEqual({ code: 0, err: '' });
    }
    expect(urls).toEqual(['http://127.0.0.1:9/healthz', 'http://[::1]:9/healthz', 'http://127.0.0.1:9/healthz']);
  });

});
