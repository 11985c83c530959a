// Per-port placement (ports[].placement) with workers 2 over 127.0.0.1: the target-wide policy is `queue`, port 2
// says `single`, so a controller's I/O queues spread over both workers on port 1 and all sit on worker 0 on port 2.
// The port's policy is read back from GET /ports and GET /workers, changed through PUT /ports/:id/placement and
// `ctl placement set ... --portid` for queues connected afterwards, and a bad value is refused naming the field.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCtlCli } from '../../cli/ctl.js';
import { connect, type Controller } from '../../initiator/index.js';
import { TargetService, type ControllerInfo } from '../../target/index.js';
import { startApi, type ApiHandle } from '../../target/mgmt/index.js';
import { pattern } from '../fixtures/data-pattern.js';

const NQN = 'nqn.2024-01.io.test:workers-ports';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('target workers: per-port placement', () => {
  let t: TargetService;
  let api: ApiHandle;
  const tcp: number[] = [];
  beforeAll(async () => {
    t = new TargetService({ workers: 2, placement: 'queue' });
    await t.apply({
      ports: [
        { id: 1, addr: '127.0.0.1', port: 0 },
        { id: 2, addr: '127.0.0.1', port: 0, placement: 'single' },
      ],
      subsystems: [{ nqn: NQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '4M' } }] }],
    });
    for (const b of t.boundPorts().sort((a, b) => a.id - b.id)) tcp.push(b.port);
    api = await startApi(t, { listen: '127.0.0.1:0' });
  }, 60_000);
  afterAll(async () => {
    await api?.close();
    await t?.stop();
  });

  const get = async (p: string): Promise<unknown> => (await fetch(`${api.url}${p}`)).json();
  const put = (p: string, body: unknown): Promise<Response> => fetch(`${api.url}${p}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  /** Connect on port `portId`, check verified I/O, and return where its two I/O queues were placed. */
  async function placed(portId: 1 | 2): Promise<number[]> {
    let c: Controller | undefined;
    try {
      c = await connect({ traddr: '127.0.0.1', trsvcid: tcp[portId - 1] as number, nqn: NQN, nr_io_queues: 2 });
      const ns = c.namespace(1);
      for (let q = 0; q < 2; q++) await ns.write(q * 8, pattern(4096, portId * 10 + q), { hctx: q });
      for (let q = 0; q < 2; q++) expect((await ns.read(q * 8, 8, undefined, { hctx: 1 - q })).equals(pattern(4096, portId * 10 + q))).toBe(true);
      const cntlid = c.cntlid;
      const info = t.listControllers().find((x) => x.subnqn === NQN && x.cntlid === cntlid) as ControllerInfo;
      return info.queues.filter((q) => q.qid > 0).map((q) => q.worker as number);
    } finally {
      await c?.disconnect().catch(() => undefined);
      const end = Date.now() + 5000;
      while (t.listControllers().some((x) => x.subnqn === NQN) && Date.now() < end) await sleep(20);
    }
  }

  it("a port's placement overrides the target-wide one for queues arriving on it; GET /ports and /workers show it", async () => {
    expect([...(await placed(1))].sort()).toEqual([0, 1]);
    expect(await placed(2)).toEqual([0, 0]);
    const ports = (await get('/ports')) as Array<{ id: number; placement?: string }>;
    expect(ports.map((p) => [p.id, p.placement])).toEqual([
      [1, undefined],
      [2, 'single'],
    ]);
    expect(((await get('/workers')) as { ports: unknown }).ports).toEqual([
      { portId: 1, placement: null, effective: 'queue' },
      { portId: 2, placement: 'single', effective: 'single' },
    ]);
    expect(t.getConfig().ports.find((p) => p.id === 2)?.placement).toBe('single');
  }, 60_000);

  it('PUT /ports/:id/placement and ctl change it for new queues; a bad value is a 400 naming the field', async () => {
    // Port 1 goes single, port 2 back to the target-wide queue policy.
    const r1 = await put('/ports/1/placement', { placement: 'single' });
    expect(r1.status).toBe(200);
    expect(await r1.json()).toEqual({ portId: 1, placement: 'single', effective: 'single' });
    let out = '';
    const code = await runCtlCli(['--api', api.url, 'placement', 'set', 'default', '--portid', '2'], { stdout: (s) => (out += s), stderr: (s) => (out += s), env: {} });
    expect(code, out).toBe(0);
    expect(await placed(1)).toEqual([0, 0]);
    expect([...(await placed(2))].sort()).toEqual([0, 1]);
    expect(((await get('/workers')) as { ports: unknown }).ports).toEqual([
      { portId: 1, placement: 'single', effective: 'single' },
      { portId: 2, placement: null, effective: 'queue' },
    ]);

    const bad = await put('/ports/1/placement', { placement: 'spread' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toBe('body: placement: unknown placement "spread"; use one of single, controller, queue, host, or null for the target-wide one');
    expect((await put('/ports/1/placement', {})).status).toBe(400);
    expect((await put('/ports/9/placement', { placement: 'queue' })).status).toBe(404);
    expect(t.portPlacements().find((p) => p.portId === 1)?.placement).toBe('single');
  }, 60_000);
});
