// `nvme-tcp resv-register|resv-acquire|resv-release|resv-report` (nvme-cli flag names) and
// `target ctl namespace attach|detach|hosts|reservation` against a live in-process target and API.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
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
    // nvme-cli's long names here; its short letters in the test below.
    const as = (h: typeof H1, cmd: string, ...argv: string[]): Promise<number> => runInitiatorCli(cmd, ['--traddr', '127.0.0.1', '-s', String(port), '--nqn', NQN, '-q', h.nqn, '-I', h.id, '--namespace-id', '1', ...argv], io);

    expect(await as(H1, 'resv-register', '--nrkey', '0xa1', '--cptpl', '3')).toBe(0);
    expect(await as(H2, 'resv-register', '--nrkey', '178')).toBe(0);
    expect(await as(H1, 'resv-acquire', '--crkey', '0xa1', '--rtype', '2')).toBe(0);
    expect(await as(H2, 'resv-acquire', '--crkey', '0xb2', '--rtype', '2')).toBe(1);
    // H2's ID came from -I: the hint names it and points at the other registrant or the key.
    expect(err).toMatch(new RegExp(`^nvme-tcp resv-acquire: NVMe status RESERVATION_CONFLICT.*\\[NVMEOF_ERR_STATUS\\]; the target knows this host by host ID ${H2.id} \\(-I\\); another registrant holds the reservation, or the key given is not this host's \\(resv-report lists them\\)\\n$`));
    err = '';
    out = '';
    expect(await as(H2, 'resv-report', '--eds', '--output-format', 'json')).toBe(0);
    const rep = JSON.parse(out) as { gen: number; rtype: number; regctl: number; ptpls: number; regctlext: Array<{ rkey: string; rcsts: number; hostid: string }> };
    expect(rep).toMatchObject({ gen: 2, rtype: 2, regctl: 2, ptpls: 1 });
    expect(rep.regctlext.map((r) => [r.hostid, r.rkey, r.rcsts])).toEqual([
      [H1.id.replace(/-/g, ''), '0xa1', 1],
      [H2.id.replace(/-/g, ''), '0xb2', 0],
    ]);
    // Without --eds the report still works: the controller reports 128-bit host IDs (CTRATT), so EDS is set as
    // nvme-cli sets it.
    out = '';
    expect(await as(H2, 'resv-report', '-o', 'json')).toBe(0);
    expect(JSON.parse(out)).toEqual(rep);
    expect(err).toBe('');
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

  it("nvme-cli's short letters; -q without -I under a hostid file: a warning, and a conflict hint naming the shared ID", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'nvme-tcp-resv-cli-'));
    const saved = process.env.NVME_TCP_ETC_NVME;
    cleanups.push(async () => {
      if (saved === undefined) delete process.env.NVME_TCP_ETC_NVME;
      else process.env.NVME_TCP_ETC_NVME = saved;
      await rm(dir, { recursive: true, force: true });
    });
    const etc = path.join(dir, 'etc-nvme');
    await mkdir(etc);
    const fileId = '0f0e0d0c-0b0a-4908-8706-050403020100';
    await writeFile(path.join(etc, 'hostid'), `${fileId}\n`);
    process.env.NVME_TCP_ETC_NVME = etc;
    const t = new TargetService();
    cleanups.push(() => t.stop());
    const port = (await t.addPort({ id: 1, addr: '127.0.0.1', port: 0 })).port;
    await t.addSubsystem({ nqn: NQN, allowAnyHost: true, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1M' } }, { nsid: 2, backend: { type: 'ram', size: '1M' } }] });
    let out = '';
    let err = '';
    const io = { stdout: (s: string) => (out += s), stderr: (s: string) => (err += s) };
    const run = (cmd: string, ...argv: string[]): Promise<number> => runInitiatorCli(cmd, ['--traddr', '127.0.0.1', '-s', String(port), '--nqn', NQN, ...argv], io);

    // -n is the namespace, -k the new key, -p CPTPL, -c the current key, -t the type, -a the action, -e EDS.
    expect(await run('resv-register', '-q', 'nqn.x:host-a', '-n', '2', '-k', '0xa1', '-p', '3')).toBe(0);
    const warning = `nvme-tcp resv-register: warning: -q nqn.x:host-a keeps the host ID in ${path.join(etc, 'hostid')} (${fileId}), so every -q NQN is one host to the target's reservations; give -I UUID for a host of its own\n`;
    expect(err).toBe(warning);
    err = '';
    expect(await run('resv-acquire', '-q', 'nqn.x:host-a', '-n', '2', '-c', '0xa1', '-t', '1', '-a', '0')).toBe(0);
    expect(t.reservationStatus(NQN, 2)).toMatchObject({ rtype: 1, ptpl: true, holder: fileId.replace(/-/g, ''), registrants: [{ hostid: fileId.replace(/-/g, ''), rkey: String(0xa1) }] });
    expect(t.reservationStatus(NQN, 1).registrants).toEqual([]);
    err = '';

    // A second "host" by NQN alone is the same registrant: registering another key conflicts, with the hint.
    expect(await run('resv-register', '-q', 'nqn.x:host-b', '-n', '2', '-k', '0xb2')).toBe(1);
    const lines = err.split('\n').filter(Boolean);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe(warning.trim().replace('resv-register: warning: -q nqn.x:host-a', 'resv-register: warning: -q nqn.x:host-b'));
    expect(lines[1]).toMatch(new RegExp(`^nvme-tcp resv-register: NVMe status RESERVATION_CONFLICT.*; the target knows this host by host ID ${fileId} \\(${path.join(etc, 'hostid').replace(/[.]/g, '\\.')}\\); host NQNs that share a host ID are one registrant, so give each host its own with -I UUID$`));
    err = '';
    // With its own -I it is a second registrant: no warning, success.
    expect(await run('resv-register', '-q', 'nqn.x:host-b', '-I', '0f0e0d0c-0b0a-4908-8706-0504030201ff', '-n', '2', '-k', '0xb2')).toBe(0);
    expect(err).toBe('');
    out = '';
    expect(await run('resv-report', '-q', 'nqn.x:host-b', '-I', '0f0e0d0c-0b0a-4908-8706-0504030201ff', '-n', '2', '-e', '-d', '255', '-o', 'json')).toBe(0);
    expect((JSON.parse(out) as { regctl: number; rtype: number }) ).toMatchObject({ regctl: 2, rtype: 1 });
    // The connect letters that clash are long-only here: -a is the action, so an address is not a number.
    err = '';
    expect(await runInitiatorCli('resv-acquire', ['-a', '127.0.0.1', '-s', String(port), '--nqn', NQN], io)).toBe(2);
    expect(err).toMatch(/^nvme-tcp resv-acquire: --racqa 127\.0\.0\.1: not an integer/);
    err = '';
    expect(await runInitiatorCli('resv-report', ['-s', String(port), '--nqn', NQN], io)).toBe(2);
    expect(err).toBe('nvme-tcp resv-report: --traddr is required; use e.g. --traddr 127.0.0.1\n');
    err = '';
    // A range error names the flag as this verb spells it (no -k: that is --nrkey here).
    expect(await run('resv-report', '--keep-alive-tmo', '4294968')).toBe(2);
    expect(err).toBe('nvme-tcp resv-report: --keep-alive-tmo 4294968 outside 0..4294967\n');
  });
});
