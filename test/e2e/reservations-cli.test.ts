// `nvme-tcp resv-register|resv-acquire|resv-release|resv-report` (nvme-cli flag names) and
// `target ctl namespace attach|detach|hosts|reservation` against a live in-process target and API.
import { describe, expect, it } from 'vitest';
import { runCtlCli } from '../../cli/ctl.js';
import { runInitiatorCli } from '../../cli/initiator.js';
import { TargetService } from '../../target/index.js';
import { startApi } from '../../target/mgmt/index.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const NQN = 'nqn.2024-01.io.test:resv-cli';
const H1 = { nqn: 'nqn.2014-08.org.nvmexpress:uuid:11111111-2222-4000-8000-000000000001', id: '11111111-2222-4000-8000-000000000001' };
const H2 = { nqn: 'nqn.2014-08.org.nvmexpress:uuid:11111111-2222-4000-8000-000000000002', id: '11111111-2222-4000-8000-000000000002' };
const cleanups = cleanupAfterEach();

describe('reservation and masking CLI verbs', () => {
  it('register, acquire, report, release with nvme-cli flags; attach/detach through ctl', async () => {
    const t = new TargetService();
    cleanups.push(() => t.stop());
    const port = (await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 })).port;
    await t.addSubsystem({ nqn: NQN, hosts: [H1.nqn, H2.nqn], namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }] });
    const api = await startApi(t, { listen: '127.0.0.1:0' });
    cleanups.push(() => api.close());
    let out = '';
    let err = '';
    const io = { stdout: (s: string) => (out += s), stderr: (s: string) => (err += s) };
    const as = (h: typeof H1, cmd: string, ...argv: string[]): Promise<number> => runInitiatorCli(cmd, ['-a', '127.0.0.1', '-s', String(port), '-n', NQN, '-q', h.nqn, '-I', h.id, '--namespace-id', '1', ...argv], io);

    expect(await as(H1, 'resv-register', '--nrkey', '0xa1', '--cptpl', '3')).toBe(0);
    expect(await as(H2, 'resv-register', '--nrkey', '178')).toBe(0);
    expect(await as(H1, 'resv-acquire', '--crkey', '0xa1', '--rtype', '2')).toBe(0);
    expect(await as(H2, 'resv-acquire', '--crkey', '0xb2', '--rtype', '2')).toBe(1);
    expect(err).toMatch(/RESERVATION_CONFLICT/);
    err = '';
    out = '';
    expect(await as(H2, 'resv-report', '--eds', '--output-format', 'json')).toBe(0);
    const rep = JSON.parse(out) as { gen: number; rtype: number; regctl: number; ptpls: number; regctlext: Array<{ rkey: string; rcsts: number; hostid: string }> };
    expect(rep).toMatchObject({ gen: 2, rtype: 2, regctl: 2, ptpls: 1 });
    expect(rep.regctlext.map((r) => [r.hostid, r.rkey, r.rcsts])).toEqual([
      [H1.id.replace(/-/g, ''), '0xa1', 1],
      [H2.id.replace(/-/g, ''), '0xb2', 0],
    ]);
    out = '';
    expect(await as(H2, 'resv-report')).toBe(1);
    expect(err).toMatch(/HOST_ID_INCONSIST/);
    err = '';
    expect(await as(H1, 'resv-release', '--crkey', '0xa1', '--rtype', '2')).toBe(0);
    expect(await as(H1, 'resv-register', '--rrega', '1', '--crkey', '0xa1')).toBe(0);
    expect(await as(H1, 'resv-register', '--nrkey', 'zz')).toBe(2);
    expect(err).toMatch(/--nrkey zz: not a 64-bit number/);
    expect(t.reservationStatus(NQN, 1).registrants).toHaveLength(1);

    err = '';
    out = '';
    const ctl = (...argv: string[]): Promise<number> => runCtlCli(['--api', api.url, '-o', 'json', ...argv], { stdout: io.stdout, stderr: io.stderr, env: {} });
    expect(await ctl('namespace', 'attach', NQN, '1', H1.nqn)).toBe(0);
    expect(t.namespaceHosts(NQN, 1)).toEqual([H1.nqn]);
    out = '';
    expect(await ctl('namespace', 'hosts', NQN, '1')).toBe(0);
    expect(JSON.parse(out)).toEqual({ hosts: [H1.nqn] });
    expect(await as(H2, 'resv-report', '--eds')).toBe(1);
    expect(err).toMatch(/no active namespace 1/);
    err = '';
    expect(await ctl('namespace', 'detach', NQN, '1', H1.nqn)).toBe(0);
    expect(t.namespaceHosts(NQN, 1)).toEqual([]);
    expect(await ctl('namespace', 'attach', NQN, '1', 'nqn.2024-01.io.test:stranger')).not.toBe(0);
    expect(err).toMatch(/not a host of/);
    out = '';
    expect(await ctl('namespace', 'reservation', NQN, '1')).toBe(0);
    expect(JSON.parse(out)).toMatchObject({ rtype: 0, ptpl: true });
  });
});
