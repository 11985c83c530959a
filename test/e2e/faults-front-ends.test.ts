// The fault engine's front ends (docs/faults.md): the HTTP API (400 with the field path), `target ctl faults`
// (exit 2 and one line for a bad rule, -o json), `nvme-tcp target --faults FILE` and /metrics, against a real
// TargetService; the rules they arm act on a raw peer's commands.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { runCtlCli } from '../../cli/ctl.js';
import { buildTargetConfig, parseTargetArgs, runTargetCli } from '../../cli/target.js';
import { NvmOpcode, Status, encodeSqe } from '../../protocol/index.js';
import { TargetService } from '../../target/index.js';
import { startApi, type ApiHandle } from '../../target/mgmt/index.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';
import { bringUpAdmin, connectIo, expectOk, nextCid, setFeatures, SUBNQN, type RawPeer } from './target-dataplane/fixture.js';
import { RawPeer as Peer } from '../../harness/peers/raw-peer.js';

const cleanups = cleanupAfterEach();

async function setup(): Promise<{ t: TargetService; api: ApiHandle; port: number }> {
  const t = new TargetService();
  cleanups.push(() => t.stop());
  const bound = await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 });
  await t.addSubsystem({ nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] });
  const api = await startApi(t, { listen: '127.0.0.1:0' });
  cleanups.push(() => api.close());
  return { t, api, port: bound.port };
}

async function call(api: ApiHandle, method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown }> {
  const res = await fetch(`${api.url}${path}`, { method, ...(body !== undefined ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  return { status: res.status, json: text === '' ? undefined : (JSON.parse(text) as unknown) };
}

async function ioPeer(port: number): Promise<RawPeer> {
  const admin = await Peer.connect({ port });
  cleanups.push(() => admin.close());
  const cntlid = await bringUpAdmin(admin);
  expectOk(await admin.command(setFeatures(0x07, 0)));
  const io = await Peer.connect({ port });
  cleanups.push(() => io.close());
  expectOk(await connectIo(io, cntlid, 1));
  return io;
}

const flush = (): Buffer => encodeSqe({ opcode: NvmOpcode.FLUSH, cid: nextCid(), nsid: 1 });

describe('HTTP API /faults', () => {
  it('adds, lists with hit counts, removes one and clears; the rule acts in between', async () => {
    const { api, port } = await setup();
    const io = await ioPeer(port);
    const add = await call(api, 'POST', '/faults', { id: 'nr', match: { set: 'io' }, schedule: { nth: 1 }, action: { kind: 'status', status: 'NS_NOT_READY' } });
    expect(add).toMatchObject({ status: 201, json: { id: 'nr', matches: 0, hits: 0 } });
    expect((await io.command(flush())).cqe?.status).toBe(Status.NS_NOT_READY);
    expect((await io.command(flush())).cqe?.status).toBe(0);
    expect(await call(api, 'GET', '/faults')).toMatchObject({ status: 200, json: [{ id: 'nr', matches: 2, hits: 1 }] });
    expect((await call(api, 'POST', '/faults', { id: 'nr', action: { kind: 'drop' } })).status).toBe(409);
    expect((await call(api, 'POST', '/faults', { action: { kind: 'drop' }, match: { qid: 7 } })).json).toMatchObject({ id: 'r1' });
    expect((await call(api, 'DELETE', '/faults/nr')).status).toBe(204);
    expect((await call(api, 'DELETE', '/faults/nr')).status).toBe(404);
    expect(await call(api, 'DELETE', '/faults')).toMatchObject({ status: 200, json: { removed: 1 } });
    expect((await call(api, 'GET', '/faults')).json).toEqual([]);
  });

  it.each([
    [{ action: { kind: 'status', status: 0x800 } }, 'action.status'],
    [{ action: { kind: 'c2h-split', size: 0 } }, 'action.size'],
    [{ action: { kind: 'c2h-term-req', fes: 256 } }, 'action.fes'],
    [{ match: { qid: 'some' }, action: { kind: 'drop' } }, 'match.qid'],
    [{ match: { nsid: 0 }, action: { kind: 'drop' } }, 'match.nsid'],
    [{ match: { nsid: 2 ** 32 }, action: { kind: 'drop' } }, 'match.nsid'],
    [{ schedule: { nth: 0 }, action: { kind: 'drop' } }, 'schedule.nth'],
    [{ schedule: { probability: 1.5 }, action: { kind: 'drop' } }, 'schedule.probability'],
    [{ schedule: { seed: 2 ** 32 }, action: { kind: 'drop' } }, 'schedule.seed'],
    [{ action: { kind: 'icresp', never: true } }, 'match.event'],
    [{ match: { nsid: 1 }, action: { kind: 'media-error' } }, 'match.lba'],
    [{ action: { kind: 'drop' }, matc: {} }, '', /did you mean "match"/],
  ])('400 naming the field for %j', async (rule, path, message?: RegExp) => {
    const { api } = await setup();
    const r = await call(api, 'POST', '/faults', rule);
    expect(r.status).toBe(400);
    expect((r.json as { path: string }).path).toBe(path);
    if (message !== undefined) expect((r.json as { error: string }).error).toMatch(message);
  });

  it('/metrics counts each rule\'s firings', async () => {
    const { api, port } = await setup();
    const io = await ioPeer(port);
    await call(api, 'POST', '/faults', { id: 'slow', match: { set: 'io' }, schedule: { every: 2 }, action: { kind: 'delay', us: 1000 } });
    for (let i = 0; i < 5; i++) expectOk(await io.command(flush()));
    const res = await fetch(`${api.url}/metrics`);
    expect(await res.text()).toMatch(/^nvme_tcp_fault_firings_total\{rule="slow",action="delay"\} 2$/m);
  });
});

describe('target ctl faults', () => {
  it('add (JSON and @FILE), list -o json, clear one and all', async () => {
    const { api } = await setup();
    const dir = await mkdtemp(join(tmpdir(), 'faults-ctl-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    let out = '';
    let err = '';
    const ctl = (...argv: string[]) => runCtlCli(['--api', api.url, ...argv], { stdout: (s) => (out += s), stderr: (s) => (err += s), env: {} });
    expect(await ctl('faults', 'add', '{"id":"a","action":{"kind":"drop"}}')).toBe(0);
    const file = join(dir, 'rules.json');
    await writeFile(file, JSON.stringify({ rules: [{ id: 'b', match: { event: 'keep-alive' }, action: { kind: 'drop' } }, { id: 'c', action: { kind: 'fatal' }, schedule: { nth: 3 } }] }));
    expect(await ctl('faults', 'add', `@${file}`)).toBe(0);
    out = '';
    expect(await ctl('-o', 'json', 'faults', 'list')).toBe(0);
    expect((JSON.parse(out) as { id: string }[]).map((r) => r.id)).toEqual(['a', 'b', 'c']);
    out = '';
    expect(await ctl('faults', 'list')).toBe(0);
    expect(out).toMatch(/^id +action +match +schedule +matches +hits\n/);
    expect(await ctl('faults', 'clear', 'b')).toBe(0);
    expect(await ctl('faults', 'clear')).toBe(0);
    out = '';
    expect(await ctl('-o', 'json', 'faults', 'list')).toBe(0);
    expect(JSON.parse(out)).toEqual([]);
    expect(err).toBe('');
  });

  it('a bad rule: exit 2 and one line naming the field, nothing sent', async () => {
    const { api, t } = await setup();
    let err = '';
    const ctl = (...argv: string[]) => runCtlCli(['--api', api.url, ...argv], { stdout: () => undefined, stderr: (s) => (err += s), env: {} });
    expect(await ctl('faults', 'add', '{"match":{"opcode":256},"action":{"kind":"drop"}}')).toBe(2);
    expect(err.split('\n').filter((l) => l !== '')).toHaveLength(1);
    expect(err).toMatch(/^nvme-tcp target ctl: rule: match\.opcode: .*256.*/);
    err = '';
    expect(await ctl('faults', 'add', '{"action":{"kind":"drip","bytes":0}}')).toBe(2);
    expect(err).toMatch(/^nvme-tcp target ctl: rule: action\.bytes: .*0.*/);
    expect(t.listFaultRules()).toEqual([]);
  });
});

describe('nvme-tcp target --faults FILE', () => {
  it('reads the rules; a bad one is exit 2 and one line naming the field', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'faults-cli-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const good = join(dir, 'good.json');
    await writeFile(good, JSON.stringify([{ id: 'x', match: { event: 'icreq' }, action: { kind: 'icresp', maxh2cdata: 4096 } }]));
    const built = await buildTargetConfig(parseTargetArgs(['--faults', good]));
    expect(built.faultRules.map((r) => r.id)).toEqual(['x']);
    const bad = join(dir, 'bad.json');
    await writeFile(bad, JSON.stringify([{ action: { kind: 'drop' } }, { action: { kind: 'delay', minUs: 5, maxUs: 1 } }]));
    const err: string[] = [];
    const io = { stdout: () => undefined, stderr: (s: string) => void err.push(s), logger: pino({ level: 'silent' }), processHandlers: false as const };
    expect(await runTargetCli(['--listen', '127.0.0.1:0', '--faults', bad], io)).toBe(2);
    expect(err).toEqual([`nvme-tcp target: --faults ${bad}: [1].action.minUs: 5 is above maxUs 1\n`]);
    err.length = 0;
    expect(await runTargetCli(['--faults', join(dir, 'none.json')], io)).toBe(2);
    expect(err).toHaveLength(1);
    expect(err[0]).toMatch(/--faults: cannot read .*none\.json/);
  });
});
