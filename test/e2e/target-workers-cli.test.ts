// `nvme-tcp target --workers/--placement` and the config fields: bad values are one line naming the field and the
// fix, exit 2, before anything starts; good values reach the config.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildTargetConfig, parseTargetArgs, runTargetCli } from '../../cli/target.js';

async function run(argv: string[]): Promise<{ code: number; err: string }> {
  let err = '';
  const code = await runTargetCli(argv, { stdout: () => undefined, stderr: (s) => (err += s), processHandlers: false });
  return { code, err };
}

describe('target --workers / --placement', () => {
  for (const [argv, msg] of [
    [['--workers', '0'], /^nvme-tcp target: --workers 0: not a worker count; use an integer >= 1 or auto\n$/],
    [['--workers', 'two'], /^nvme-tcp target: --workers two: not a worker count/],
    [['--workers', '1.5'], /^nvme-tcp target: --workers 1\.5: not a worker count/],
    [['--placement', 'spread'], /^nvme-tcp target: --placement spread: unknown policy; use single, controller, queue or host\n$/],
    [['--port-placement', '1=spread'], /^nvme-tcp target: --port-placement 1=spread: unknown policy "spread"; use single, controller, queue or host\n$/],
    [['--port-placement', 'single'], /^nvme-tcp target: --port-placement single: not ID=POLICY; use e\.g\. 2=single\n$/],
    [['--port-placement', '1=single', '--port-placement', '1=queue'], /^nvme-tcp target: --port-placement 1=queue: port 1 given twice; give one policy per port\n$/],
    [['--listen', '127.0.0.1:0', '--port-placement', '9=single'], /^nvme-tcp target: --port-placement 9=single: no port 9; the ports are 1\n$/],
  ] as const) {
    it(`${argv.join(' ')}: one line, exit 2`, async () => {
      const r = await run([...argv]);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(msg);
      expect(r.err.trim().split('\n')).toHaveLength(1);
    });
  }

  it('config fields: workers 0, "lots" and placement "x" name the field; good values pass through', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'nvt-wcli-'));
    try {
      for (const [field, value, msg] of [
        ['workers', 0, /workers/],
        ['workers', 'lots', /workers/],
        ['placement', 'x', /placement: must be one of single, controller, queue, host/],
      ] as const) {
        const f = path.join(dir, `${field}.json`);
        await writeFile(f, JSON.stringify({ ports: [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: [], [field]: value }));
        const r = await run(['--config', f]);
        expect(r.code, `${field} ${String(value)}`).toBe(2);
        expect(r.err).toMatch(msg);
        expect(r.err.trim().split('\n')).toHaveLength(1);
      }
      // ports[].placement: the field path and the fix.
      const f = path.join(dir, 'port-placement.json');
      await writeFile(f, JSON.stringify({ ports: [{ id: 1, addr: '127.0.0.1', port: 0, placement: 'spread' }], subsystems: [] }));
      const r = await run(['--config', f]);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(/ports\[0\]\.placement: "spread" is not a placement; use single, controller, queue or host/);
      expect(r.err.trim().split('\n')).toHaveLength(1);
      const two = (await buildTargetConfig(parseTargetArgs(['--listen', '127.0.0.1:0', '--listen', '127.0.0.1:0', '--port-placement', '2=single']))).config;
      expect(two.ports.map((p) => p.placement)).toEqual([undefined, 'single']);
      const cfg = (await buildTargetConfig(parseTargetArgs(['--workers', 'auto', '--placement', 'controller']))).config;
      expect(cfg.workers).toBe('auto');
      expect(cfg.placement).toBe('controller');
      expect((await buildTargetConfig(parseTargetArgs(['--workers', '3']))).config.workers).toBe(3);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
