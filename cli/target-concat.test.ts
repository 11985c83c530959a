// `nvme-tcp target --concat` (secure channel concatenation, TP 8018): the flag sets ports[].tlsConcat on the --listen
// ports, needs --tls allowed|required (one line naming the flag and the fix otherwise), and shows in the start-up lines.
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../target/config/index.js';
import { buildTargetConfig, parseTargetArgs, startupLines } from './target.js';

const build = async (argv: string[]) => (await buildTargetConfig(parseTargetArgs(argv))).config;

describe('--concat', () => {
  it('sets tlsConcat on the --listen ports together with --tls, and says so at start-up', async () => {
    const c = await build(['--listen', '127.0.0.1:0', '--tls', 'required', '--concat']);
    expect(c.ports[0]).toMatchObject({ tls: 'required', tlsConcat: true });
    const lines = startupLines(c, [{ id: c.ports[0]?.id ?? 1, addr: '127.0.0.1', port: 4420 }]);
    expect(lines.some((l) => /secure channel concatenation/.test(l))).toBe(true);
  });

  it('without --tls: one line naming --concat and the fix', async () => {
    const err = await build(['--listen', '127.0.0.1:0', '--concat']).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/^--concat: port \d+ has no TLS; add --tls allowed/);
    expect((err as Error).message).not.toContain('\n');
  });
});
