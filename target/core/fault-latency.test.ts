// The latency fault knobs (faults.connectLatencyMs, faults.commandLatencyUs) delay a completion by exactly what they
// say, at any length TargetService.setFaults takes: the config caps them (target/config/schema.test.ts), the library
// API does not, and Node's setTimeout turns a delay of 2^31 ms or more into 1 ms (issue 48). The fake clock clamps the
// same way.
import { performance } from 'node:perf_hooks';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { NvmOpcode, encodeSqe } from '../../protocol/index.js';
import { RamBackend } from '../backend/index.js';
import { TargetNamespace } from './index.js';
import { HostQueue, SUBNQN, makeTarget } from './testing/fake-transport.js';

beforeEach(() => {
  vi.useFakeTimers();
  // The command knob waits out the remainder by node:perf_hooks' performance.now() (target/core/cmd/io.ts deliver),
  // which the fake clock does not replace: read the fake Date instead.
  vi.spyOn(performance, 'now').mockImplementation(() => Date.now());
});
afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});

const EDGES = [2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1];

describe('latency knobs past 2^31−1 ms', () => {
  it.each(EDGES)('connectLatencyMs %d: the Connect completes after exactly that long', (ms) => {
    const t = makeTarget();
    t.subsys.setFaults({ connectLatencyMs: ms });
    const admin = new HostQueue(t.target, t.port);
    const { sqe, data } = admin.connectCapsule({ qid: 0 });
    const req = admin.submit(sqe, data);
    vi.advanceTimersByTime(ms - 1);
    expect(admin.transport.completionsFor(req.cid)).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(admin.completionOf(req).status).toBe(0);
  });

  it.each([...EDGES.map((ms) => ms * 1000)])('commandLatencyUs %d: a command completes after exactly that long', (us) => {
    const t = makeTarget();
    t.subsys.addNamespace(new TargetNamespace(SUBNQN, { nsid: 1, backend: { type: 'ram', size: 1 << 20 } }, new RamBackend(1 << 20)));
    const admin = new HostQueue(t.target, t.port);
    const cntlid = admin.connectAndEnable();
    const io = new HostQueue(t.target, t.port);
    expect(io.connect({ qid: 1, cntlid }).status).toBe(0);
    t.subsys.setFaults({ commandLatencyUs: us });
    const req = io.submit(encodeSqe({ opcode: NvmOpcode.FLUSH, cid: 7, nsid: 1 }));
    vi.advanceTimersByTime(us / 1000 - 1);
    expect(io.transport.completionsFor(req.cid)).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(io.transport.completionsFor(req.cid)).toHaveLength(1);
  });
});
