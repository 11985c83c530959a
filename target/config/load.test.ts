import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_SUBSYSTEM_NQN, defaultConfig, loadConfig, parseConfigText, saveConfig } from './load.js';
import { ConfigError, parseTargetConfig } from './schema.js';
import type { TargetConfig } from '../model/config.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'nvme-tcp-config-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('defaultConfig', () => {
  it('is valid and serves one 1 GiB RAM namespace on 127.0.0.1:4420 to any host', () => {
    const c = defaultConfig();
    expect(parseTargetConfig(c)).toEqual(c);
    expect(c.ports).toEqual([{ id: 1, addr: '127.0.0.1', port: 4420 }]);
    expect(c.subsystems).toHaveLength(1);
    expect(c.subsystems[0]?.nqn).toBe(DEFAULT_SUBSYSTEM_NQN);
    expect(c.subsystems[0]?.allowAnyHost).toBe(true);
    expect(c.subsystems[0]?.namespaces).toEqual([{ nsid: 1, backend: { type: 'ram', size: '1G' } }]);
  });

  it('returns a fresh copy each time', () => {
    const a = defaultConfig();
    a.ports.push({ id: 2, addr: '::1', port: 1 });
    expect(defaultConfig().ports).toHaveLength(1);
  });
});

describe('loadConfig / saveConfig', () => {
  const sample: TargetConfig = {
    ports: [{ id: 1, addr: '0.0.0.0', port: 4420, advertiseAddr: '10.0.2.100' }],
    subsystems: [{ nqn: 'nqn.2024-01.io.example:a', hosts: ['nqn.2024-01.io.example:h'], namespaces: [{ nsid: 1, backend: { type: 'file', path: '/srv/a.img', size: '1G' } }] }],
  };

  it('round-trips a config through a file', async () => {
    const path = join(dir, 'target.json');
    await saveConfig(path, sample);
    expect(await loadConfig(path)).toEqual(sample);
    const text = await readFile(path, 'utf8');
    expect(text.endsWith('\n')).toBe(true);
    expect(JSON.parse(text)).toEqual(sample);
    // the temp file of the atomic replace is gone
    expect(await readdir(dir)).toEqual(['target.json']);
  });

  it('refuses to save an invalid config and leaves the old file alone', async () => {
    const path = join(dir, 'target.json');
    await saveConfig(path, sample);
    const bad = structuredClone(sample);
    bad.ports[0] = { id: 1, addr: '0.0.0.0', port: 70000 };
    await expect(saveConfig(path, bad)).rejects.toThrow('config: ports[0].port: 70000 is too large; use a TCP port in 0..65535');
    expect(await loadConfig(path)).toEqual(sample);
  });

  it('names the file and the field when validation fails', async () => {
    const path = join(dir, 'bad.json');
    await writeFile(path, JSON.stringify({ ports: [], subsystems: [{ nqn: 'nqn.2024-01.io.example:a', namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1X' } }] }] }));
    await expect(loadConfig(path)).rejects.toThrow(`config ${path}: subsystems[0].namespaces[0].backend.size: "1X" is not a size; use bytes or a K/M/G/T suffix (e.g. 1G)`);
  });

  it('reports JSON syntax errors and missing files as ConfigErrors', async () => {
    const path = join(dir, 'broken.json');
    await writeFile(path, '{ "ports": [ }');
    const err = await loadConfig(path).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(new RegExp(`^config ${path}: not valid JSON \\(.+\\); fix the syntax$`));
    await expect(loadConfig(join(dir, 'nope.json'))).rejects.toThrow(`config: cannot read ${join(dir, 'nope.json')} (no such file or directory); check the path`);
  });

  it('parseConfigText uses the given prefix', () => {
    expect(() => parseConfigText('[]', 'body')).toThrow('body: expected object, got a list');
  });
});
