// The command-level fuzzer briefly (the long runs are bench/fuzz-commands.ts): seeded admin, fabrics and I/O commands
// with the edge values of every field over real admin and I/O queues, against a one-process target and one with
// workers 2. Every command answered with a status, no teardown the host did not cause, keep-alives answered, the
// target alive, a verified pass clean afterwards; the host-caused log lines bounded by the per-controller limit.
import { describe, expect, it } from 'vitest';
import { CommandGenerator, commandFuzzVerdict, runCommandFuzz, type CommandFuzzResult } from '../../harness/fuzz/commands.js';
import { HOST_LOG_LIMIT } from '../../target/core/index.js';

function expectClean(r: CommandFuzzResult): void {
  expect(commandFuzzVerdict(r)).toEqual([]);
  expect(r.sent).toBeGreaterThan(1000);
  // Each command got its completion, but the AERs the target keeps posted until an event.
  expect(r.answered + r.aersOutstanding).toBe(r.sent);
  expect(r.aersOutstanding).toBeLessThanOrEqual(4 * r.controllersMade);
  expect(r.unexpected).toBe(0);
  // The commands reached the parsers: successes and many kinds of refusal came back.
  expect(r.statuses['0x0'] ?? 0).toBeGreaterThan(0);
  expect(Object.keys(r.statuses).length).toBeGreaterThan(5);
  expect(r.keepAlives.answered).toBeGreaterThan(0);
  // Log volume: per controller (and per port) at most `burst` lines and one summary per 10 s interval, however many
  // refusals the host caused; the count of each is in /metrics.
  const intervals = Math.ceil(r.elapsedS / (HOST_LOG_LIMIT.intervalMs / 1000)) + 1;
  expect(r.warnLines).toBeLessThanOrEqual((r.controllersMade + 1) * (HOST_LOG_LIMIT.burst + 1) * intervals);
  const refusals = Object.values(r.hostRefusals?.byReason ?? {}).reduce((a, b) => a + b, 0);
  expect(refusals).toBeGreaterThan(r.warnLines);
}

describe('command-level fuzzing of a live target', () => {
  it('the same seed gives the same command sequence', () => {
    const seq = (seed: number): string[] => {
      const g = new CommandGenerator(seed, 1);
      return Array.from({ length: 300 }, (_, i) => (i % 2 === 0 ? g.admin() : g.io())).map((c) => c.sqe.toString('hex') + c.data.toString('hex'));
    };
    expect(seq(7)).toEqual(seq(7));
    expect(seq(7)).not.toEqual(seq(8));
  });

  it('one process: every command answered, nothing torn down unasked, a verified pass clean', async () => {
    expectClean(await runCommandFuzz({ seconds: 3, seed: 0x48 }));
  }, 60_000);

  it('workers 2: the same verdict with the I/O queues in worker processes', async () => {
    expectClean(await runCommandFuzz({ seconds: 3, seed: 0x49, target: { workers: 2 } }));
  }, 60_000);
});
