// The host-behaviour catalogue (issue 45 item 2, docs/faults.md): each case is fault rules, a workload and what a
// correct host does, with the spec section that says so. Every host runs the same data; harness/catalogue/hosts/*
// map the workload onto each host's tools.
import { NvmOpcode } from '../../protocol/index.js';
import type { CatalogueCase } from './types.js';

/** The catalogue target's two ports (docs/faults.md): path 1 and path 2 of one subsystem. */
export const CATALOGUE_PORTS = [1, 2] as const;
export const CATALOGUE_NQN = 'nqn.2024-01.io.nvme-tcp-ts:catalogue';
/** ANA group of namespace 1 (the target's default group). */
const GROUP = 1;

const RANGE = { start: 0, count: 32 };

export const CATALOGUE: readonly CatalogueCase[] = [
  {
    id: 'io-timeout',
    title: 'A read that never completes',
    spec: 'NVMe Base 2.0 §3.4.4 (command timeout, Abort / controller reset); NVMe-oF 1.1 §3.6 (association teardown)',
    rules: [{ id: 'lost-read', match: { qid: 'io', opcode: NvmOpcode.READ }, schedule: { nth: 1 }, action: { kind: 'drop' } }],
    workload: { armAt: 'after-write', range: RANGE, connect: { ioTimeoutS: 3, reconnectDelayS: 1, ctrlLossTmoS: 30 } },
    correct: 'the I/O timeout fires, the host aborts or resets the association, retries the read and returns the written data',
    expect: 'recovered',
  },
  {
    id: 'path-error-multipath',
    title: 'A path error on one path of a multipath set',
    spec: 'NVMe Base 2.0 §4.2.3.2.7 (Path Related Status), §8.1.3 (multipath, ANA)',
    rules: [{ id: 'path1-error', match: { port: 1, qid: 'io', opcode: NvmOpcode.READ }, action: { kind: 'status', status: 'INTERNAL_PATH_ERROR' } }],
    workload: { armAt: 'after-write', range: RANGE, multipath: true, connect: { ioTimeoutS: 5, ctrlLossTmoS: 30 } },
    correct: 'reads that fail with a path error on path 1 are retried on path 2; every read returns the written data',
    expect: 'recovered',
  },
  {
    id: 'ana-inaccessible-aen',
    title: 'ANA inaccessible on one path, with the AEN',
    spec: 'NVMe Base 2.0 §8.1.3 (ANA), §5.2 (Asynchronous Event Request, ANA change notice), §5.16.1.12 (ANA log)',
    rules: [{ id: 'ana-aen', match: { port: 1, event: 'keep-alive' }, schedule: { nth: 1 }, action: { kind: 'ana', group: GROUP, state: 'inaccessible' } }],
    workload: { armAt: 'after-write', range: RANGE, idleS: 4, multipath: true, connect: { keepAliveTmoS: 2, ctrlLossTmoS: 30 } },
    correct: 'the host reads the ANA log after the notice and sends I/O to path 2 only; every read returns the written data',
    expect: 'recovered',
  },
  {
    id: 'ana-inaccessible-no-aen',
    title: 'ANA inaccessible on one path, without the AEN',
    spec: 'NVMe Base 2.0 §8.1.3 (ANA), §4.2.3.2.7 (Asymmetric Access Inaccessible, 302h)',
    rules: [{ id: 'ana-silent', match: { port: 1, event: 'keep-alive' }, schedule: { nth: 1 }, action: { kind: 'ana', group: GROUP, state: 'inaccessible', aen: false } }],
    workload: { armAt: 'after-write', range: RANGE, idleS: 4, multipath: true, connect: { keepAliveTmoS: 2, ctrlLossTmoS: 30 } },
    correct: 'I/O on path 1 fails with ANA Inaccessible; the host re-reads the ANA log and retries on path 2; every read returns the written data',
    expect: 'recovered',
  },
  {
    id: 'connect-refused-nth',
    title: 'The 2nd I/O-queue Connect refused during queue setup',
    spec: 'NVMe-oF 1.1 §3.3 (Connect response), §3.6 (association); NVMe Base 2.0 §4.2.3 (DNR)',
    rules: [{ id: 'refuse-connect', match: { event: 'connect', qid: 'io' }, schedule: { nth: 2, times: 1 }, action: { kind: 'status', status: 'CONNECT_INVALID_PARAM', dnr: true } }],
    workload: { armAt: 'before-connect', range: RANGE, connect: { nrIoQueues: 2, ctrlLossTmoS: 0 } },
    correct: 'the connect fails with the Connect status, no controller or queue is left on the target, and a second connect comes up cleanly',
    expect: 'error-surfaced',
  },
  {
    id: 'icresp-never',
    title: 'ICResp never sent for an I/O queue',
    spec: 'NVMe-TCP 1.0 §3.6.2.2 (ICReq / ICResp), §3.3 (connection establishment)',
    rules: [{ id: 'no-icresp', match: { event: 'icreq' }, schedule: { nth: 2, times: 1 }, action: { kind: 'icresp', never: true } }],
    workload: { armAt: 'before-connect', range: RANGE, connect: { nrIoQueues: 1, ctrlLossTmoS: 0 } },
    correct: 'the host times the ICResp out, fails the connect (or retries it), leaves no controller or queue on the target, and a second connect comes up cleanly',
    expect: 'error-surfaced',
  },
  {
    id: 'fewer-queues',
    title: 'Fewer I/O queues granted than asked',
    spec: 'NVMe Base 2.0 §5.27.1.5 (Number of Queues: NSQA / NCQA)',
    rules: [{ id: 'grant-1', action: { kind: 'grant-queues', count: 1 } }],
    workload: { armAt: 'before-connect', range: RANGE, connect: { nrIoQueues: 4 } },
    correct: 'the host creates only the queues granted (1) and runs I/O on them',
    expect: 'recovered',
  },
  {
    id: 'termreq',
    title: 'A C2HTermReq from the controller mid-stream',
    spec: 'NVMe-TCP 1.0 §3.6.2.4 (H2C/C2H Termination Request), §3.7 (error handling)',
    // FES 01h (Invalid Header Field) with no header in error: the controller ends the connection mid-read.
    rules: [{ id: 'termreq', match: { qid: 'io', opcode: NvmOpcode.READ }, schedule: { nth: 1 }, action: { kind: 'c2h-term-req', fes: 1 } }],
    workload: { armAt: 'after-write', range: RANGE, connect: { reconnectDelayS: 1, ctrlLossTmoS: 30 } },
    correct: 'the host tears the connection down, reconnects and retries; the read returns the written data',
    expect: 'recovered',
  },
  {
    id: 'digest-error',
    title: 'A data digest error on a C2HData PDU',
    spec: 'NVMe-TCP 1.0 §3.6.1.7 (data digest), §3.7 (error handling)',
    rules: [{ id: 'ddgst', match: { qid: 'io', opcode: NvmOpcode.READ }, schedule: { nth: 1 }, action: { kind: 'data-digest-error' } }],
    workload: { armAt: 'after-write', range: RANGE, connect: { reconnectDelayS: 1, ctrlLossTmoS: 30, digests: true } },
    correct: 'the host detects the digest error, tears the connection down (or fails the command), never returns the corrupt data',
    expect: 'recovered',
  },
  {
    id: 'keep-alive-silence',
    title: 'Keep Alive never answered while TCP stays up',
    spec: 'NVMe Base 2.0 §3.9 (Keep Alive), §5.25.1 (KATO); NVMe-oF 1.1 §3.6',
    rules: [{ id: 'ka-silence', match: { event: 'keep-alive' }, schedule: { times: 1 }, action: { kind: 'drop' } }],
    workload: { armAt: 'after-write', range: RANGE, idleS: 8, connect: { keepAliveTmoS: 2, reconnectDelayS: 1, ctrlLossTmoS: 30 } },
    correct: 'the host\'s keep-alive times out, it resets the association and reconnects; the read returns the written data',
    expect: 'recovered',
  },
  {
    id: 'reauth-failure',
    title: 'A failed re-authentication (the new key never reached the target)',
    spec: 'NVMe Base 2.0 §8.13.5 (DH-HMAC-CHAP), §5.3.2 (AUTH_Failure1); NVMe-oF 1.1 §3.6',
    rules: [],
    workload: { armAt: 'after-write', range: RANGE, reauth: true, connect: { reconnectDelayS: 2, ctrlLossTmoS: 10 } },
    correct: 'the re-authentication fails within a bounded time (AUTH_Failure1 from the target), the host reports it, tears the association down and fails I/O once ctrl_loss_tmo runs out; no task hangs',
    expect: 'error-surfaced',
  },
  {
    id: 'reauth-failure-bidir',
    title: 'A failed bidirectional re-authentication: new host and controller secrets the target never got',
    spec: 'NVMe Base 2.0 §8.13.5 (DH-HMAC-CHAP, controller authentication), §5.3.2 (AUTH_Failure1); NVMe-oF 1.1 §3.6',
    rules: [],
    workload: { armAt: 'after-write', range: RANGE, reauth: true, reauthCtrl: true, connect: { reconnectDelayS: 2, ctrlLossTmoS: 10 } },
    correct: 'as reauth-failure, with a controller secret too (blktests nvme/045\'s order: host secret, then controller secret): the writes return, the re-authentication fails, the host tears down and fails I/O; no task hangs',
    expect: 'error-surfaced',
  },
  {
    id: 'duplicate-cqe',
    title: 'The same completion sent twice',
    spec: 'NVMe Base 2.0 §4.2 (CID unique among outstanding commands); NVMe-TCP 1.0 §3.7',
    rules: [{ id: 'dup-cqe', match: { qid: 'io', opcode: NvmOpcode.READ }, schedule: { nth: 1 }, action: { kind: 'duplicate' } }],
    workload: { armAt: 'after-write', range: RANGE, connect: { ioTimeoutS: 3, reconnectDelayS: 1, ctrlLossTmoS: 30 } },
    correct: 'the host drops or rejects the second completion (it may tear the queue down), never completes another command with it, and returns the written data',
    expect: 'recovered',
  },
  {
    id: 'stale-cid',
    title: 'A completion with a stale CID',
    spec: 'NVMe Base 2.0 §4.2 (Command Identifier); NVMe-TCP 1.0 §3.7',
    rules: [{ id: 'stale', match: { qid: 'io', opcode: NvmOpcode.READ }, schedule: { nth: 1 }, action: { kind: 'cid', cid: 'unknown' } }],
    workload: { armAt: 'after-write', range: RANGE, connect: { ioTimeoutS: 3, reconnectDelayS: 1, ctrlLossTmoS: 30 } },
    correct: 'the host finds no command for the CID, tears the queue down, retries the read on a new association, and returns the written data (no crash, no silent corruption)',
    expect: 'recovered',
  },
  {
    id: 'media-error',
    title: 'An unrecovered read error on 4 blocks',
    spec: 'NVMe Base 2.0 §4.2.3.2.6 (Media and Data Integrity Errors: Unrecovered Read Error 02h/81h)',
    rules: [{ id: 'ure', match: { nsid: 1, lba: { start: 16, count: 4 } }, action: { kind: 'media-error' } }],
    workload: { armAt: 'after-write', range: RANGE, badRange: { start: 16, count: 4 } },
    correct: 'reads touching blocks 16..19 fail with EIO (Unrecovered Read Error, DNR: no retry); every other block reads back intact',
    expect: 'error-surfaced',
  },
  {
    id: 'retryable-status',
    title: 'A read failed once with a status without DNR',
    spec: 'NVMe Base 2.0 §4.2.3 (DNR), §4.2.3.1 (Namespace Not Ready)',
    rules: [{ id: 'not-ready', match: { qid: 'io', opcode: NvmOpcode.READ }, schedule: { nth: 1 }, action: { kind: 'status', status: 'NS_NOT_READY' } }],
    workload: { armAt: 'after-write', range: RANGE },
    correct: 'the host retries the read and returns the written data',
    expect: 'recovered',
  },
];

export function findCase(id: string): CatalogueCase | undefined {
  return CATALOGUE.find((c) => c.id === id);
}
