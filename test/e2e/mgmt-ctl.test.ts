// `nvme-tcp target ctl` against a real API and TargetService (no mocks): the commands change the live target.
import { describe, expect, it } from 'vitest';
import { runCtlCli } from '../../cli/ctl.js';
import { connect } from '../../initiator/index.js';
import { TargetService } from '../../target/index.js';
import { startApi } from '../../target/mgmt/index.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const NQN = 'nqn.2024-01.io.test:mgmt-ctl';
const cleanups = cleanupAfterEach();

describe('target ctl over a live API', () => {
  it('health prints what its help promises: ports, subsystems, controllers (and uptime)', async () => {
    const t = new TargetService();
    cleanups.push(() => t.stop());
    const { port } = await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 });
    await t.addSubsystem({ nqn: NQN, allowAnyHost: true, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] });
    await t.addSubsystem({ nqn: `${NQN}-2`, allowAnyHost: true });
    const api = await startApi(t, { listen: '127.0.0.1:0' });
    cleanups.push(() => api.close());
    const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn: NQN, hostnqn: 'nqn.2024-01.io.test:health', nr_io_queues: 1 });
    cleanups.push(() => c.disconnect());
    let out = '';
    const ctl = (...argv: string[]) => runCtlCli(['--api', api.url, ...argv], { stdout: (s) => (out += s), stderr: () => undefined, env: {} });
    expect(await ctl('health', '--help')).toBe(0);
    expect(out).toMatch(/ports, subsystems, controllers/);
    out = '';
    expect(await ctl('health')).toBe(0);
    expect(out).toMatch(/^status +ok\nports +1\nsubsystems +2\ncontrollers +1\nuptimeS +\d+\n$/);
    out = '';
    expect(await ctl('-o', 'json', 'health')).toBe(0);
    expect(JSON.parse(out)).toEqual({ status: 'ok', ports: 1, subsystems: 2, controllers: 1, uptimeS: expect.any(Number) });
  });

  it('adds and removes a port, subsystem, namespace, host, referral, ANA state and faults', async () => {
    const t = new TargetService();
    cleanups.push(() => t.stop());
    const api = await startApi(t, { listen: '127.0.0.1:0', token: 'tkn' });
    cleanups.push(() => api.close());
    let out = '';
    let err = '';
    const ctl = (...argv: string[]) => runCtlCli(['--api', api.url, '--token', 'tkn', ...argv], { stdout: (s) => (out += s), stderr: (s) => (err += s), env: {} });

    expect(await ctl('port', 'add', '1', '127.0.0.1', '0')).toBe(0);
    expect(await ctl('subsystem', 'add', NQN, '--serial', 'CTL1')).toBe(0);
    expect(await ctl('namespace', 'add', NQN, '1', '--ram', '1M')).toBe(0);
    expect(await ctl('namespace', 'add', NQN, '2', '--null', '8M', '--block-size', '4096')).toBe(0);
    expect(await ctl('host', 'add', NQN, 'nqn.2024-01.io.test:h1')).toBe(0);
    expect(await ctl('referral', 'add', '1', '10.1.2.3', '8009')).toBe(0);
    expect(await ctl('ana', 'set', '1', '1', 'non-optimized')).toBe(0);
    expect(await ctl('faults', 'set', NQN, '--connect-latency-ms', '1')).toBe(0);
    expect(err).toBe('');
    expect(t.getConfig()).toEqual({
      ports: [{ id: 1, addr: '127.0.0.1', port: 0, anaStates: { '1': 'non-optimized' }, referrals: [{ addr: '10.1.2.3', port: 8009 }] }],
      subsystems: [
        {
          nqn: NQN,
          serial: 'CTL1',
          allowAnyHost: false,
          hosts: ['nqn.2024-01.io.test:h1'],
          faults: { connectLatencyMs: 1 },
          namespaces: [
            { nsid: 1, backend: { type: 'ram', size: '1M' } },
            { nsid: 2, backend: { type: 'null', size: '8M' }, blockSize: 4096 },
          ],
        },
      ],
    });

    out = '';
    expect(await ctl('config')).toBe(0);
    expect(JSON.parse(out)).toEqual(t.getConfig());

    // A refused change: exit 1, the API's message with the field path, nothing applied.
    expect(await ctl('namespace', 'add', NQN, '3', '--ram', '1000')).toBe(1);
    expect(err).toMatch(/HTTP 400: .*backend\.size.*\(at backend\.size\)/);

    expect(await ctl('referral', 'remove', '1', '10.1.2.3', '8009')).toBe(0);
    expect(await ctl('namespace', 'remove', NQN, '2')).toBe(0);
    expect(await ctl('subsystem', 'remove', NQN)).toBe(0);
    expect(await ctl('port', 'remove', '1')).toBe(0);
    expect(t.getConfig()).toEqual({ ports: [], subsystems: [] });
  });
});
