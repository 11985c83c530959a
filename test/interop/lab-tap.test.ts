// The lab's tap data path (harness/lab/run.sh --tap): a real multiqueue tap with an address on this machine, the
// guest's second NIC on it with its queues, a TCP exchange over it, the tap gone when the run ends, and the
// user-mode fallback said in one line. Skipped without the 6.1 lab, root or /dev/net/tun.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { labDir, runLabScript } from '../../harness/lab.js';
import { LAB_KERNELS, labPrerequisites, parseLabNet } from '../../harness/kernel-host/runner.js';

const missing = labPrerequisites('6.1') ?? (process.getuid?.() !== 0 ? 'a tap needs root' : existsSync('/dev/net/tun') ? undefined : 'no /dev/net/tun');
const dir = mkdtempSync(path.join(tmpdir(), 'lab-tap-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const links = (): string => execFileSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8' });
const RUN_SH = path.join(labDir(), 'run.sh');

describe.skipIf(missing !== undefined)(`lab tap data path${missing === undefined ? '' : ` — skipped: ${missing}`}`, () => {
  it('run.sh --tap 2: eth1 with 2 queues reaches this machine over the tap; the tap is removed at the end', async () => {
    const script = path.join(dir, 'tap.sh');
    writeFileSync(
      script,
      'echo "@@ net=$LAB_NET guest=$LAB_TAP_IP host=$LAB_TAP_HOST_IP queues=$LAB_TAP_QUEUES rx=$(ls -d /sys/class/net/eth1/queues/rx-* | wc -l)"\n' +
        'for i in $(seq 1 30); do wget -q -O - "http://$LAB_TAP_HOST_IP:$LAB_TAP_TEST_PORT/" && break; sleep 1; done\n',
    );
    let server: http.Server | undefined;
    let err = '';
    let peer = '';
    const port = 18000 + (process.pid % 1000);
    const run = runLabScript([RUN_SH, '--tap', '2', '--smp', '2', '--timeout', '300', '--guestfwd', 'none', '--env', `LAB_TAP_TEST_PORT=${port}`, script], undefined, { LAB_OUT: LAB_KERNELS['6.1'].out() }, (c) => {
      err += c;
      const net = parseLabNet(err);
      if (server === undefined && net?.kind === 'tap') {
        // The host side of the tap exists once run.sh said so, before the guest boots.
        server = http.createServer((req, res) => {
          peer = req.socket.remoteAddress ?? '';
          res.end('@@ fetched over the tap\n');
        });
        server.listen(port, net.hostIp);
      }
    });
    try {
      const r = await run.done;
      expect(r.code, r.out).toBe(0);
      const net = parseLabNet(r.out);
      expect(net).toMatchObject({ kind: 'tap', queues: 2, hostIp: expect.stringMatching(/^10\.201\.\d+\.1$/), guestIp: expect.stringMatching(/^10\.201\.\d+\.2$/) });
      if (net?.kind !== 'tap') return;
      expect(r.out).toContain(`@@ net=tap guest=${net.guestIp} host=${net.hostIp} queues=2 rx=2`);
      expect(r.out).toContain('@@ fetched over the tap');
      // The guest's own address, not a user-mode network's: what a target on the tap address sees.
      expect(peer).toBe(net.guestIp);
      expect(r.out).toMatch(/run\.sh: accel=\w+ smp=2 mem=1024M net=tap /);
      expect(links()).not.toContain(`${net.dev}:`);
    } finally {
      server?.close();
    }
  }, 360_000);

  it('without --tap the run says net=user; a bad queue count is one line', async () => {
    const script = path.join(dir, 'user.sh');
    writeFileSync(script, 'echo "@@ net=$LAB_NET eth1=$(ls /sys/class/net | grep -c eth1)"\n');
    const r = await runLabScript([RUN_SH, '--smp', '1', '--timeout', '300', '--guestfwd', 'none', script], undefined, { LAB_OUT: LAB_KERNELS['6.1'].out() }).done;
    expect(r.code, r.out).toBe(0);
    expect(parseLabNet(r.out)).toEqual({ kind: 'user' });
    expect(r.out).toContain('@@ net=user eth1=0');
    const bad = spawnSync('bash', [RUN_SH, '--tap', 'two', script], { encoding: 'utf8', env: { ...process.env, LAB_OUT: LAB_KERNELS['6.1'].out() } });
    expect(bad.status).toBe(125);
    expect(bad.stderr).toBe('run.sh: --tap is a queue count, not two\n');
  }, 360_000);
});
