// Write Uncorrectable and Namespace Write Protection Config (FID 84h) change state the namespace holds in this process:
// where the namespace spans processes (target workers, gateway groups) nothing carries that state between them, so
// neither is offered there (Subsystem.mediaStateLocal); Verify, which changes nothing, still is.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { AdminOpcode, DNR, NvmOpcode, Status, decodeIdentifyController, encodeSqe } from '../../protocol/index.js';
import { RamBackend } from '../backend/index.js';
import { TargetNamespace } from './index.js';
import { HostQueue, SUBNQN, makeTarget } from './testing/fake-transport.js';

const NS_BYTES = 1 << 20;

function queues(span: 'workers' | 'gateway' | 'worker' | undefined) {
  const t = makeTarget();
  if (span === 'workers') t.subsys.resvCommit = () => Promise.resolve();
  if (span === 'worker') t.subsys.resvForward = () => undefined;
  if (span === 'gateway') t.subsys.resvShared = () => Promise.resolve(0);
  t.subsys.addNamespace(new TargetNamespace(SUBNQN, { nsid: 1, backend: { type: 'ram', size: NS_BYTES } }, new RamBackend(NS_BYTES)));
  const admin = new HostQueue(t.target, t.port);
  const cntlid = admin.connectAndEnable();
  const io = new HostQueue(t.target, t.port);
  expect(io.connect({ qid: 1, cntlid }).status).toBe(0);
  return { admin, io };
}

describe('Subsystem.mediaStateLocal', () => {
  for (const span of ['workers', 'worker', 'gateway'] as const) {
    it(`${span}: Write Uncorrectable is Invalid Opcode, FID 84h Invalid Field, ONCS bit 1 and NWPC clear`, () => {
      const { admin, io } = queues(span);
      expect(io.exec(encodeSqe({ opcode: NvmOpcode.WRITE_UNCOR, cid: 1, nsid: 1 })).status).toBe(Status.INVALID_OPCODE | DNR);
      expect(io.exec(encodeSqe({ opcode: NvmOpcode.VERIFY, cid: 2, nsid: 1 })).status).toBe(0);
      expect(admin.exec(encodeSqe({ opcode: AdminOpcode.SET_FEATURES, cid: 3, nsid: 1, cdw10: 0x84, cdw11: 1 })).status).toBe(Status.INVALID_FIELD | DNR);
      expect(admin.exec(encodeSqe({ opcode: AdminOpcode.GET_FEATURES, cid: 4, nsid: 1, cdw10: 0x84 })).status).toBe(Status.INVALID_FIELD | DNR);
      const id = decodeIdentifyController(admin.identify(1).data ?? Buffer.alloc(0));
      expect(id.oncs & 0x82).toBe(0x80);
      expect(id.nwpc).toBe(0);
      // Format NVM needs Subsystem.formatNs, which only TargetService sets: here Invalid Opcode, OACS bit 1 clear.
      expect(admin.exec(encodeSqe({ opcode: AdminOpcode.FORMAT_NVM, cid: 5, nsid: 1, cdw10: 1 })).status).toBe(Status.INVALID_OPCODE | DNR);
      expect(id.oacs & 0x2).toBe(0);
    });
  }

  it('one process: both offered', () => {
    const { admin, io } = queues(undefined);
    expect(io.exec(encodeSqe({ opcode: NvmOpcode.WRITE_UNCOR, cid: 1, nsid: 1 })).status).toBe(0);
    expect(io.exec(encodeSqe({ opcode: NvmOpcode.VERIFY, cid: 2, nsid: 1 })).status).toBe(Status.READ_ERROR | DNR);
    expect(admin.exec(encodeSqe({ opcode: AdminOpcode.SET_FEATURES, cid: 3, nsid: 1, cdw10: 0x84, cdw11: 0 })).status).toBe(0);
    const id = decodeIdentifyController(admin.identify(1).data ?? Buffer.alloc(0));
    expect(id.oncs & 0x82).toBe(0x82);
    expect(id.nwpc).toBe(3);
  });
});
