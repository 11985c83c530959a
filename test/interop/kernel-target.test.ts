// Interop: our TypeScript initiator against the Linux 6.1 kernel nvmet target running in the qemu lab
// (harness/lab). Host 127.0.0.1:<free port> → qemu hostfwd → guest 10.0.2.15:4420.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkLabReady, freePort, labDir, labKernel, startWaitingLab, type WaitingLab } from '../../harness/lab.js';
import { connect, discover, type Controller } from '../../initiator/index.js';
import { pattern } from '../fixtures/data-pattern.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const NQN = 'nqn.2024-01.io.nvme-lab:kernel-target';

let lab: WaitingLab | undefined;
let dataPort = 0;
let ctlPort = 0;

describe(`initiator ↔ Linux ${labKernel()} kernel nvmet (qemu lab)`, () => {
  beforeAll(async () => {
    const dir = labDir();
    // run.sh boots vmlinux when build.sh could extract it, else vmlinuz (the 7.x lab has only vmlinuz)
    checkLabReady(dir);
    dataPort = await freePort();
    ctlPort = await freePort();
    lab = await startWaitingLab(
      [path.join(dir, 'run.sh'), '--timeout', '900', '--hostfwd', `${dataPort}:4420`, '--hostfwd', `${ctlPort}:5999`, '--guestfwd', 'none', '--env', 'WAIT_S=800', path.join(here, 'guest-target', 'kernel-target.sh')],
      { ctlPort },
    );
  });

  afterAll(async () => {
    await lab?.release();
  });

  it('discovers the kernel target: current discovery entry first, then the subsystem', async () => {
    const entries = await discover({ traddr: '127.0.0.1', trsvcid: dataPort });
    expect(entries[0]?.subtype).toBe(3);
    const sub = entries.find((e) => e.subtype === 2);
    expect(sub?.subnqn).toBe(NQN);
    expect(sub?.trsvcid).toBe('4420');
  });

  for (const digests of [false, true]) {
    it(`connects with 2 I/O queues (digests ${digests ? 'on' : 'off'}), identifies, verifies 4 KiB..1 MiB, disconnects`, async () => {
      let c: Controller | undefined;
      try {
        c = await connect({ traddr: '127.0.0.1', trsvcid: dataPort, nqn: NQN, nr_io_queues: 2, hdr_digest: digests, data_digest: digests });
        expect(c.state).toBe('live');
        expect(c.identify.cntlid).toBe(c.cntlid);
        expect(c.identify.subnqn).toBe(NQN);
        expect(c.identify.kas).toBeGreaterThan(0);
        expect(c.queueInfo().map((q) => q.qid)).toEqual([1, 2]);
        const ns = c.namespaces[0];
        expect(ns).toBeDefined();
        if (ns === undefined) return;
        let lba = 0;
        for (const size of [4096, 8192, 16384, 65536, 131072, 524288, 1 << 20]) {
          const data = pattern(size, size ^ (digests ? 0x5a5a : 0));
          const blocks = size / ns.blockSize;
          await ns.write(lba, data, { hctx: size % 2 });
          const back = await ns.read(lba, blocks, undefined, { hctx: 1 });
          expect(back.equals(data), `${size} bytes at lba ${lba}`).toBe(true);
          lba += blocks;
        }
        const info = c.queueInfo();
        expect(info.every((q) => q.errors === 0 && q.inFlight === 0)).toBe(true);
        expect(info.reduce((n, q) => n + q.completed, 0)).toBeGreaterThan(14);
      } finally {
        await c?.disconnect();
      }
      expect(c?.state).toBe('deleted');
    });
  }
});
