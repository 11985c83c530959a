// namespaces[].hosts (namespace masking) in the config schema: accepted when the subsystem lets the
// host in, one line naming the field otherwise.
import { describe, expect, it } from 'vitest';
import { ConfigError, formatConfigError, parseTargetConfig } from './schema.js';

const H1 = 'nqn.2024-01.io.test:h1';
const H2 = 'nqn.2024-01.io.test:h2';
function cfg(subHosts: string[] | undefined, nsHosts: string[], allowAnyHost?: boolean): unknown {
  return {
    ports: [{ id: 1, addr: '127.0.0.1', port: 0 }],
    subsystems: [{ nqn: 'nqn.2024-01.io.test:m', ...(subHosts ? { hosts: subHosts } : {}), ...(allowAnyHost !== undefined ? { allowAnyHost } : {}), namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' }, hosts: nsHosts }] }],
  };
}

describe('namespaces[].hosts', () => {
  it('accepts hosts of the subsystem, and any host when the subsystem allows any', () => {
    expect(parseTargetConfig(cfg([H1, H2], [H2])).subsystems[0]?.namespaces?.[0]?.hosts).toEqual([H2]);
    expect(parseTargetConfig(cfg(undefined, [H2])).subsystems[0]?.namespaces?.[0]?.hosts).toEqual([H2]);
    expect(parseTargetConfig(cfg([H1], [H2], true)).subsystems[0]?.namespaces?.[0]?.hosts).toEqual([H2]);
  });
  it('a host the subsystem does not let in: one line naming the field and the fix', () => {
    let msg = '';
    try {
      parseTargetConfig(cfg([H1], [H2]));
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      msg = formatConfigError(e);
    }
    expect(msg).toMatch(/^config: subsystems\[0\]\.namespaces\[0\]\.hosts\[0\]: "nqn\.2024-01\.io\.test:h2" is not a host of this subsystem; add it/);
    expect(msg.split('\n')).toHaveLength(1);
  });
});
