// The JSON-RPC reader of harness/peers/spdk.ts: SPDK writes its responses back to back on the socket, without a
// delimiter, and a read may end anywhere inside one.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { coreList, findSpdk, spdkSkipReason, takeJsonValues, transportId } from './spdk.js';

describe('takeJsonValues', () => {
  it('splits concatenated responses and keeps an unfinished one for the next read', () => {
    const a = '{"jsonrpc":"2.0","id":1,"result":true}';
    const b = '{"jsonrpc":"2.0","id":2,"result":[{"name":"Malloc0","x":"}{"}]}';
    const c = '{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"a \\"quoted\\" }"}}';
    const all = a + '\n' + b + c;
    const cut = all.length - 7;
    const first = takeJsonValues(all.slice(0, cut));
    expect(first.values).toEqual([JSON.parse(a), JSON.parse(b)]);
    const second = takeJsonValues(first.rest + all.slice(cut));
    expect(second.values).toEqual([JSON.parse(c)]);
    expect(second.rest.trim()).toBe('');
  });

  it('splits at every byte boundary the same way', () => {
    const text = '{"id":1,"result":{"a":[1,2,{"b":"]"}]}}{"id":2,"result":"\\\\"}';
    for (let i = 0; i <= text.length; i++) {
      const p = takeJsonValues(text.slice(0, i));
      const q = takeJsonValues(p.rest + text.slice(i));
      expect([...p.values, ...q.values]).toEqual([{ id: 1, result: { a: [1, 2, { b: ']' }] } }, { id: 2, result: '\\' }]);
    }
  });
});

describe('SPDK argument strings', () => {
  it('transport ID: IPv4 / IPv6 family, hostnqn only when given', () => {
    expect(transportId({ traddr: '127.0.0.1', trsvcid: 4420, subnqn: 'nqn.x:y' })).toBe('trtype:TCP adrfam:IPv4 traddr:127.0.0.1 trsvcid:4420 subnqn:nqn.x:y');
    expect(transportId({ traddr: '::1', trsvcid: '4421', subnqn: 'nqn.x:y', hostnqn: 'nqn.h:1' })).toBe('trtype:TCP adrfam:IPv6 traddr:::1 trsvcid:4421 subnqn:nqn.x:y hostnqn:nqn.h:1');
  });

  it('core list', () => {
    expect(coreList([0, 2])).toBe('[0,2]');
  });
});

describe('finding SPDK: a build (SPDK_DIR), else its source (SPDK_SRC)', () => {
  const dirs: string[] = [];
  const tmp = (): string => {
    const d = mkdtempSync(path.join(os.tmpdir(), 'nvme-tcp-spdk-find-'));
    dirs.push(d);
    return d;
  };
  afterEach(() => {
    vi.unstubAllEnvs();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('without a build or a source: skip, with one line naming SPDK_SRC and SPDK_DIR', () => {
    vi.stubEnv('SPDK_DIR', tmp());
    vi.stubEnv('SPDK_SRC', tmp());
    const why = spdkSkipReason();
    expect(why).toMatch(/^SPDK not provided \(.*build\/bin\/nvmf_tgt is missing\): set SPDK_SRC to a directory holding build.sh .* or SPDK_DIR to an SPDK build/);
    expect(why).not.toContain('\n');
  });

  it('with the source but no build: no skip; findSpdk fails with the build command', () => {
    const src = tmp();
    writeFileSync(path.join(src, 'build.sh'), '');
    vi.stubEnv('SPDK_DIR', tmp());
    vi.stubEnv('SPDK_SRC', src);
    expect(spdkSkipReason()).toBeUndefined();
    expect(() => findSpdk()).toThrow(expect.objectContaining({ code: 'HARNESS_ERR_SPDK_MISSING', message: expect.stringContaining(`run "bash ${path.join(src, 'build.sh')}"`) }));
  });

  it('with a build: found, whatever SPDK_SRC says', () => {
    const dir = tmp();
    for (const f of ['bin/nvmf_tgt', 'bin/spdk_nvme_perf', 'bin/spdk_nvme_identify', 'examples/bdevperf']) {
      mkdirSync(path.dirname(path.join(dir, 'build', f)), { recursive: true });
      writeFileSync(path.join(dir, 'build', f), '');
    }
    vi.stubEnv('SPDK_DIR', dir);
    vi.stubEnv('SPDK_SRC', tmp());
    expect(spdkSkipReason()).toBeUndefined();
    expect(findSpdk().nvmfTgt).toBe(path.join(dir, 'build', 'bin', 'nvmf_tgt'));
  });
});
