// The queue's common command path, before any handler runs: fused commands and PRPs refused (NVMe-oF 1.1 §2.1:
// fabrics capsules use SGLs), the SGL checked against the command's transfer (NVMe-TCP 1.0 §3.3.3: 0x01 in-capsule
// at offset 0, or 0x5A moved by R2T/C2HData), host data fetched through the transport, and the error log entry
// each refusal leaves (NVMe Base 2.0 §5.16.1.2, parameter error location).
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { DNR, NvmOpcode, Status, encodeRwCmd, encodeSqe, sglInCapsule, sglTransport, type SglDescriptor } from '../../protocol/index.js';
import { RamBackend } from '../backend/index.js';
import { TargetNamespace } from './index.js';
import { HostQueue, SUBNQN, controllerOf, makeTarget } from './testing/fake-transport.js';

const NS_BYTES = 1 << 20;
const INLINE = 4096;

function ioQueue() {
  const t = makeTarget({}, { inlineDataSize: INLINE });
  t.subsys.addNamespace(new TargetNamespace(SUBNQN, { nsid: 1, backend: { type: 'ram', size: NS_BYTES } }, new RamBackend(NS_BYTES)));
  const admin = new HostQueue(t.target, t.port);
  const cntlid = admin.connectAndEnable();
  const io = new HostQueue(t.target, t.port);
  expect(io.connect({ qid: 1, cntlid }).status).toBe(0);
  const ctrl = controllerOf(t.subsys, cntlid);
  return { ...t, admin, io, ctrl };
}

function rw(op: number, cid: number, nlb: number, sgl: SglDescriptor, slba = 0n): Buffer {
  return encodeRwCmd({ opcode: op, cid, nsid: 1, slba, nlb, sgl });
}

describe('common checks', () => {
  it('a fused command: Invalid Field, error location byte 1', () => {
    const { io, ctrl } = ioQueue();
    const c = io.exec(encodeSqe({ opcode: NvmOpcode.FLUSH, cid: 40, nsid: 1, fuse: 1 }));
    expect(c.status).toBe(Status.INVALID_FIELD | DNR);
    expect(ctrl.errors[0]).toMatchObject({ sqid: 1, cmdid: 40, status: Status.INVALID_FIELD | DNR, paramErrorLocation: 1, nsid: 1 });
  });

  it('PSDT selecting PRPs: Invalid Field, error location byte 1', () => {
    const { io, ctrl } = ioQueue();
    expect(io.exec(encodeSqe({ opcode: NvmOpcode.FLUSH, cid: 41, nsid: 1, psdt: 0 })).status).toBe(Status.INVALID_FIELD | DNR);
    expect(ctrl.errors[0]?.paramErrorLocation).toBe(1);
  });

  it('an unknown I/O opcode: Invalid Opcode', () => {
    const { io } = ioQueue();
    expect(io.exec(encodeSqe({ opcode: 0x7e, cid: 42, nsid: 1 })).status).toBe(Status.INVALID_OPCODE | DNR);
  });
});

describe('SGL mapping', () => {
  // errorLoc: the error log entry's parameter error location, where the case checks it.
  const refusals: { name: string; sqe: Buffer; data?: Buffer; status: number; errorLoc?: number }[] = [
    {
      name: 'in-capsule SGL on a read (controller → host): Invalid Field at byte 24',
      sqe: rw(NvmOpcode.READ, 50, 1, sglInCapsule(512)),
      status: Status.INVALID_FIELD,
      errorLoc: 24,
    },
    {
      name: 'in-capsule SGL with a non-zero offset: SGL Offset Invalid',
      sqe: rw(NvmOpcode.WRITE, 51, 1, { address: 16n, length: 512, type: 0x01 }),
      data: Buffer.alloc(512),
      status: Status.SGL_INVALID_OFFSET,
    },
    {
      name: 'in-capsule data beyond the port inline size on an I/O queue: SGL Offset Invalid at byte 32',
      sqe: rw(NvmOpcode.WRITE, 52, INLINE / 512 + 1, sglInCapsule(INLINE + 512)),
      data: Buffer.alloc(INLINE + 512),
      status: Status.SGL_INVALID_OFFSET,
      errorLoc: 32,
    },
    {
      name: 'in-capsule data shorter than the SGL says: SGL Data Block Invalid',
      sqe: rw(NvmOpcode.WRITE, 53, 2, sglInCapsule(1024)),
      data: Buffer.alloc(512),
      status: Status.SGL_INVALID_DATA,
    },
    {
      name: 'transport SGL with in-capsule data: SGL Data Block Invalid at byte 39',
      sqe: rw(NvmOpcode.WRITE, 54, 1, sglTransport(512)),
      data: Buffer.alloc(512),
      status: Status.SGL_INVALID_DATA,
      errorLoc: 39,
    },
    {
      name: 'an SGL type other than 0x01 / 0x5A: SGL Descriptor Type Invalid',
      sqe: rw(NvmOpcode.READ, 55, 1, { address: 0n, length: 512, type: 0x00 }),
      status: Status.SGL_INVALID_TYPE,
    },
    {
      name: 'SGL length different from the command transfer: SGL Data Block Invalid at byte 32',
      sqe: rw(NvmOpcode.READ, 56, 2, sglTransport(512)),
      status: Status.SGL_INVALID_DATA,
      errorLoc: 32,
    },
  ];

  it.each(refusals.map((r) => [r.name, r] as const))('%s', (_name, { sqe, data, status, errorLoc }) => {
    const { io, ctrl } = ioQueue();
    expect(io.exec(sqe, data).status).toBe(status | DNR);
    if (errorLoc !== undefined) expect(ctrl.errors[0]?.paramErrorLocation).toBe(errorLoc);
  });

  it('refusals asked for no data from the transport', () => {
    const { io } = ioQueue();
    io.exec(rw(NvmOpcode.WRITE, 57, 2, sglTransport(512)));
    expect(io.transport.dataRequests).toEqual([]);
  });
});

describe('data movement', () => {
  it('write through requestData, then read back the same bytes', () => {
    const { io } = ioQueue();
    const payload = Buffer.alloc(1024);
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 7) & 0xff;
    const wr = io.submit(rw(NvmOpcode.WRITE, 60, 2, sglTransport(1024), 8n));
    expect(io.transport.dataRequests.map((d) => [d.cid, d.length])).toEqual([[60, 1024]]);
    expect(io.transport.completionsFor(60)).toEqual([]);
    expect(io.core.inFlight).toBe(1);
    io.sendData(wr, payload);
    expect(io.completionOf(wr).status).toBe(0);
    expect(io.core.inFlight).toBe(0);
    const rd = io.exec(rw(NvmOpcode.READ, 61, 2, sglTransport(1024), 8n));
    expect(rd.status).toBe(0);
    expect(rd.data?.equals(payload)).toBe(true);
  });

  it('a write whose gateway was fenced while it waited for its data is refused with ANA Inaccessible, not written', () => {
    const { io, port, subsys } = ioQueue();
    const old = Buffer.alloc(512, 0x11);
    expect(io.exec(rw(NvmOpcode.WRITE, 64, 1, sglInCapsule(512), 5n), old).status).toBe(0);
    port.anaValidUntil = Date.now() + 60_000;
    const wr = io.submit(rw(NvmOpcode.WRITE, 65, 1, sglTransport(512), 5n));
    expect(io.transport.dataRequests.map((d) => d.cid)).toEqual([65]);
    // The lease lapsed before the data came (a stalled or stopped gateway): the host may have retried elsewhere.
    port.anaValidUntil = Date.now() - 1;
    io.sendData(wr, Buffer.alloc(512, 0x22));
    expect(io.completionOf(wr).status).toBe(Status.ANA_INACCESSIBLE);
    expect(subsys.namespaces.get(1)?.counters).toMatchObject({ fenced: 1, errors: 0 });
    port.anaValidUntil = Infinity;
    expect(io.exec(rw(NvmOpcode.READ, 66, 1, sglTransport(512), 5n)).data?.equals(old)).toBe(true);
  });

  it('in-capsule write executes without a data request', () => {
    const { io } = ioQueue();
    const payload = Buffer.alloc(512, 0xa5);
    expect(io.exec(rw(NvmOpcode.WRITE, 62, 1, sglInCapsule(512), 3n), payload).status).toBe(0);
    expect(io.transport.dataRequests).toEqual([]);
    expect(io.exec(rw(NvmOpcode.READ, 63, 1, sglTransport(512), 3n)).data?.equals(payload)).toBe(true);
  });

  it('a read with SQ flow control off would carry SUCCESS instead of a response capsule', () => {
    const t = makeTarget();
    t.subsys.addNamespace(new TargetNamespace(SUBNQN, { nsid: 1, backend: { type: 'ram', size: NS_BYTES } }, new RamBackend(NS_BYTES)));
    const admin = new HostQueue(t.target, t.port);
    const cntlid = admin.connectAndEnable();
    const io = new HostQueue(t.target, t.port);
    expect(io.connect({ qid: 1, cntlid, cattr: 0x04 }).status).toBe(0);
    const rd = io.exec(rw(NvmOpcode.READ, 64, 1, sglTransport(512)));
    expect(rd.successFlag).toBe(true);
    expect(rd.sqhd).toBe(0xffff);
  });

  it('counts commands, errors and in-flight per queue', () => {
    const { io } = ioQueue();
    io.exec(rw(NvmOpcode.READ, 70, 1, sglTransport(512)));
    io.exec(rw(NvmOpcode.READ, 71, 2, sglTransport(512)));
    io.submit(rw(NvmOpcode.WRITE, 72, 1, sglTransport(512)));
    // The Connect is the queue's first command.
    expect(io.core.info()).toMatchObject({ qid: 1, peer: io.transport.peer, state: 'live', commands: 4, errors: 1, inFlight: 1, sqsize: 31 });
  });

  it('reject() completes an unparsed command with the given status and advances SQHD', () => {
    const { io } = ioQueue();
    const before = io.exec(rw(NvmOpcode.READ, 80, 1, sglTransport(512))).sqhd;
    const sqe = rw(NvmOpcode.WRITE, 81, 1, sglInCapsule(512));
    const r = io.reject(sqe, Status.TRANSIENT_TRANSPORT);
    const c = io.completionOf(r);
    expect(c.status).toBe(Status.TRANSIENT_TRANSPORT);
    expect(c.sqhd).toBe((before + 1) % 32);
    expect(io.core.inFlight).toBe(0);
  });

  it('no completion reaches a closed transport', () => {
    const { io } = ioQueue();
    const wr = io.submit(rw(NvmOpcode.WRITE, 90, 1, sglTransport(512)));
    io.transport.hostClose();
    io.sendData(wr, Buffer.alloc(512));
    expect(io.transport.completionsFor(90)).toEqual([]);
    expect(io.core.state).toBe('closed');
  });
});
