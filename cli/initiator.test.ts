// The initiator CLI against a scripted controller: flags, output, exit codes.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runInitiatorCli, type CliIo } from './initiator.js';
import { FakeController } from '../harness/peers/fake-controller.js';

let f: FakeController;
let out = '';
let err = '';
const io: CliIo = { stdout: (s) => void (out += s), stderr: (s) => void (err += s) };

beforeEach(async () => {
  out = '';
  err = '';
  f = new FakeController();
  f.addNamespace(1, 8192);
  await f.listen();
});
afterEach(async () => {
  await f.close();
});

describe('nvme-tcp initiator CLI', () => {
  it('connect prints the controller and its queues, then disconnects', async () => {
    const rc = await runInitiatorCli('connect', ['-a', '127.0.0.1', '-s', String(f.port), '-n', f.subnqn, '-i', '2', '--queues-per-hctx', '2', '-Q', '32', '-D'], io);
    expect(err).toBe('');
    expect(rc).toBe(0);
    expect(out).toMatch(/controller 1 subsystem nqn\.2024-01\.io\.test:fake/);
    expect(out).toMatch(/I\/O queues 4 \(granted 4\) in 2 hctx/);
    expect(out.split('\n').filter((l) => /^\d+\s+\d\s+default/.test(l)).length).toBe(4);
    await new Promise((r) => setTimeout(r, 30));
    expect(f.conns.size).toBe(0);
  });

  it('io verify writes a stamped pattern, reads it back and reports 0 mismatches', async () => {
    const rc = await runInitiatorCli('io', ['verify', '-a', '127.0.0.1', '-s', String(f.port), '-n', f.subnqn, '--size', '1M', '--bs', '8k', '-i', '2', '-D'], io);
    expect(err).toBe('');
    expect(out).toMatch(/verified 128 × 8192 B .* 0 mismatches/);
    expect(rc).toBe(0);
  });

  it('io verify exits non-zero when the target returns wrong data', async () => {
    f.opts.onIo = (sqe) => {
      if (sqe.opcode === 0x01 && sqe.cdw10 === 16) return 0; // pretend success, drop the data
      return undefined;
    };
    const rc = await runInitiatorCli('io', ['verify', '-a', '127.0.0.1', '-s', String(f.port), '-n', f.subnqn, '--size', '64k', '--bs', '4k', '-i', '1', '-D'], io);
    expect(rc).toBe(1);
    expect(out).toMatch(/mismatch at lba 16/);
    expect(out).toMatch(/1 mismatches/);
  });

  it('a bad flag prints one line naming it and exits 2', async () => {
    const rc = await runInitiatorCli('connect', ['-a', '127.0.0.1', '--nr-io-queus', '4'], io);
    expect(rc).toBe(2);
    expect(err.trim().split('\n').length).toBe(1);
    expect(err).toMatch(/nr-io-queus/);
  });

  it('an invalid option value exits 2 naming the option', async () => {
    const rc = await runInitiatorCli('connect', ['-a', '127.0.0.1', '-s', String(f.port), '-n', f.subnqn, '-Q', '8'], io);
    expect(rc).toBe(2);
    expect(err).toMatch(/queue_size/);
  });

  it('queues reports no held connection when none is running', async () => {
    const rc = await runInitiatorCli('queues', [], io);
    expect(rc).toBe(0);
    expect(out).toMatch(/held connection|pid \d+/);
  });

  it('check-host reports CPUs and the interface routing to an address', async () => {
    const rc = await runInitiatorCli('check-host', ['-a', '127.0.0.1'], io);
    expect(rc).toBe(0);
    expect(out).toMatch(/CPUs: \d+/);
    expect(out).toMatch(/interface to 127\.0\.0\.1: lo/);
  });
});
