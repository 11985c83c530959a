// The commands the SPDK v26.05 host (lib/nvme/nvme_tcp.c, nvme_ctrlr.c) sends at controller set-up, built byte by byte
// from the NVMe Base 2.0 SQE layout (Figure 88) with the independent builder, never with our encoders. SPDK puts an
// in-capsule Data Block / Offset descriptor (SGL type byte 0x01) on every opcode whose bits 1:0 are 01b, of the
// payload's length, 0 when there is none (Set Features 07h / 0Bh); the Linux host sends a Transport Data Block (0x5A)
// of length 0 instead. A zero-length SGL describes no data (NVMe Base 2.0 §4.3.2); nvmet_tcp_map_data returns early
// on it and SPDK's target treats any zero-length SGL as "no data" (docs/peers.md).
import { Buffer } from 'node:buffer';
import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { Bytes } from '../../protocol/testing/fixture-builder.js';
import { RamBackend } from '../backend/index.js';
import { CorePort, TargetNamespace, Subsystem, TargetCore } from './index.js';
import { HOSTID, HostQueue, SUBNQN, controllerOf } from './testing/fake-transport.js';

// NVMe Base 2.0 Figure 88 / 98 and the status codes of Figures 101 / 105, written out here.
const OPC = { SET_FEATURES: 0x09, GET_FEATURES: 0x0a, IDENTIFY: 0x06, KEEP_ALIVE: 0x18, FLUSH: 0x00, WRITE: 0x01, READ: 0x02, FABRICS: 0x7f } as const;
const SGL_TYPE = { DATA_BLOCK_OFFSET: 0x01, TRANSPORT: 0x5a, KEYED: 0x40, BIT_BUCKET: 0x10, SEGMENT: 0x20, LAST_SEGMENT: 0x30 } as const;
const SC = { SUCCESS: 0, INVALID_FIELD: 0x002, SGL_INVALID_DATA: 0x00f, SGL_INVALID_TYPE: 0x011, CONNECT_INVALID_HOST: 0x184 } as const;
const DNR = 0x4000;
const DISCOVERY_NQN = 'nqn.2014-08.org.nvmexpress.discovery';

interface SqeFields {
  opcode: number;
  cid: number;
  nsid?: number;
  sglType: number;
  sglLen?: number;
  sglAddr?: bigint;
  cdw10?: number;
  cdw11?: number;
}

/** An SQE as the SPDK host lays it out: PSDT 01b (flags 0x40), SGL1 at bytes 24-39 (address, length, type byte 39). */
function spdkSqe(f: SqeFields): Buffer {
  return new Bytes(64)
    .u8(0, f.opcode)
    .u8(1, 0x40)
    .u16(2, f.cid)
    .u32(4, f.nsid ?? 0)
    .u64(24, f.sglAddr ?? 0n)
    .u32(32, f.sglLen ?? 0)
    .u8(39, f.sglType)
    .u32(40, f.cdw10 ?? 0)
    .u32(44, f.cdw11 ?? 0).buf;
}

/** Fabrics Connect (NVMe-oF 1.1 §3.3): fctype 01h at byte 4, RECFMT 40, QID 42, SQSIZE 44, KATO 48; data in capsule. */
function spdkConnect(cid: number, qid: number, sqsize: number, kato: number): Buffer {
  return new Bytes(64).u8(0, OPC.FABRICS).u8(1, 0x40).u16(2, cid).u8(4, 0x01).u32(32, 1024).u8(39, SGL_TYPE.DATA_BLOCK_OFFSET).u16(42, qid).u16(44, sqsize).u32(48, kato).buf;
}

/** Connect data (NVMe-oF 1.1 Figure 20): HOSTID 0-15, CNTLID 16-17, SUBNQN 256, HOSTNQN 512 (empty: all zero). */
function connectData(subnqn: string, hostnqn: string, cntlid = 0xffff): Buffer {
  return new Bytes(1024).u128(0, BigInt(`0x${HOSTID.toString('hex')}`)).u16(16, cntlid).ascii(256, subnqn).ascii(512, hostnqn).buf;
}

function setup(o: { allowAnyHost?: boolean; hosts?: string[] } = {}) {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n')) if (l !== '') lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  const target = new TargetCore(pino({ level: 'info' }, sink));
  const port = new CorePort({ id: 1, addr: '192.0.2.1', port: 4420, inlineDataSize: 8192 });
  target.ports.set(port.id, port);
  const subsys = new Subsystem({ nqn: SUBNQN, allowAnyHost: o.allowAnyHost ?? true, ...(o.hosts !== undefined ? { hosts: o.hosts } : {}) });
  target.subsystems.set(subsys.nqn, subsys);
  subsys.addNamespace(new TargetNamespace(SUBNQN, { nsid: 1, backend: { type: 'ram', size: 1 << 20 } }, new RamBackend(1 << 20)));
  return { target, port, subsys, lines };
}

/** Admin Connect + CC.EN as SPDK does it (its Connect capsule), returning the admin queue and cntlid. */
function spdkAdmin(t: ReturnType<typeof setup>, subnqn = SUBNQN, hostnqn = '') {
  const admin = new HostQueue(t.target, t.port);
  const c = admin.exec(spdkConnect(0x1, 0, 31, 30000), connectData(subnqn, hostnqn));
  expect(c.status).toBe(0);
  expect(admin.propertySet(0x14, 0x00460001).status).toBe(0);
  return { admin, cntlid: c.dw0 & 0xffff };
}

describe('the SPDK host at controller set-up', () => {
  it('Set Features Number of Queues (07h, CDW11 0x03FF03FF) with a zero-length in-capsule SGL is granted', () => {
    const t = setup();
    const { admin } = spdkAdmin(t, SUBNQN, 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100');
    const maxq = t.subsys.maxIoQueues;
    const c = admin.exec(spdkSqe({ opcode: OPC.SET_FEATURES, cid: 2, sglType: SGL_TYPE.DATA_BLOCK_OFFSET, cdw10: 0x07, cdw11: 0x03ff03ff }));
    expect(c.status).toBe(SC.SUCCESS);
    // NSQA/NCQA, 0's based: the subsystem's limit, since the host asked for 1024.
    expect(c.dw0).toBe(((maxq - 1) | ((maxq - 1) << 16)) >>> 0);
    const g = admin.exec(spdkSqe({ opcode: OPC.GET_FEATURES, cid: 3, sglType: SGL_TYPE.TRANSPORT, cdw10: 0x07 }));
    expect(g.dw0).toBe(c.dw0);
  });

  it('Set Features Number of Queues asking for 4 is granted 4, and Get Features then reports 4', () => {
    const t = setup();
    const { admin } = spdkAdmin(t, SUBNQN, 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100');
    expect(admin.exec(spdkSqe({ opcode: OPC.SET_FEATURES, cid: 2, sglType: SGL_TYPE.DATA_BLOCK_OFFSET, cdw10: 0x07, cdw11: 0x00030003 })).dw0).toBe(0x00030003);
    expect(admin.exec(spdkSqe({ opcode: OPC.GET_FEATURES, cid: 3, sglType: SGL_TYPE.DATA_BLOCK_OFFSET, cdw10: 0x07 })).dw0).toBe(0x00030003);
  });

  it('Asynchronous Event Configuration 0x091F (SMART critical warnings 4:0, NS attribute, ANA) is accepted and kept', () => {
    const t = setup();
    const { admin, cntlid } = spdkAdmin(t, SUBNQN, 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100');
    const c = admin.exec(spdkSqe({ opcode: OPC.SET_FEATURES, cid: 2, sglType: SGL_TYPE.DATA_BLOCK_OFFSET, cdw10: 0x0b, cdw11: 0x091f }));
    expect(c.status).toBe(SC.SUCCESS);
    expect(controllerOf(t.subsys, cntlid).aenEnabled).toBe(0x091f);
    expect(admin.exec(spdkSqe({ opcode: OPC.GET_FEATURES, cid: 3, sglType: SGL_TYPE.TRANSPORT, cdw10: 0x0b })).dw0).toBe(0x091f);
  });

  it('an AEN configuration bit the controller cannot send (firmware activation, bit 9) is refused at CDW11, with a log line', () => {
    const t = setup();
    const { admin, cntlid } = spdkAdmin(t, SUBNQN, 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100');
    const c = admin.exec(spdkSqe({ opcode: OPC.SET_FEATURES, cid: 2, sglType: SGL_TYPE.DATA_BLOCK_OFFSET, cdw10: 0x0b, cdw11: 0x0200 }));
    expect(c.status).toBe(SC.INVALID_FIELD | DNR);
    expect(controllerOf(t.subsys, cntlid).errors[0]?.paramErrorLocation).toBe(44);
    const line = t.lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith('Set Features refused'));
    expect(line).toMatchObject({ fid: '0x0b', cdw11: '0x00000200', status: '0x4002' });
    expect(line?.msg).toContain('CDW11');
  });

  it('the discovery controller accepts Discovery Log Change (0x80000000) with the same SGL', () => {
    const t = setup();
    const { admin } = spdkAdmin(t, DISCOVERY_NQN, '');
    const c = admin.exec(spdkSqe({ opcode: OPC.SET_FEATURES, cid: 2, sglType: SGL_TYPE.DATA_BLOCK_OFFSET, cdw10: 0x0b, cdw11: 0x80000000 }));
    expect(c.status).toBe(SC.SUCCESS);
    // SMART warnings are not a discovery controller's to send.
    expect(admin.exec(spdkSqe({ opcode: OPC.SET_FEATURES, cid: 3, sglType: SGL_TYPE.DATA_BLOCK_OFFSET, cdw10: 0x0b, cdw11: 0x8000001f })).status).toBe(SC.INVALID_FIELD | DNR);
  });
});

describe('an empty HOSTNQN in Connect (the SPDK host without hostnqn:)', () => {
  it('is admitted where any host is allowed, with a warning, and its I/O queues connect', () => {
    const t = setup();
    const { cntlid } = spdkAdmin(t, SUBNQN, '');
    expect(controllerOf(t.subsys, cntlid).hostnqn).toBe('');
    expect(t.lines.some((l) => l.level === 40 && String(l.msg).startsWith('empty host NQN admitted'))).toBe(true);
    const io = new HostQueue(t.target, t.port);
    expect(io.exec(spdkConnect(1, 1, 127, 0), connectData(SUBNQN, '', cntlid)).status).toBe(0);
  });

  it('is refused as Connect Invalid Host where the subsystem lists its hosts, and the log says why', () => {
    const t = setup({ allowAnyHost: false, hosts: ['nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100'] });
    const admin = new HostQueue(t.target, t.port);
    const c = admin.exec(spdkConnect(1, 0, 31, 30000), connectData(SUBNQN, ''));
    expect(c.status).toBe(SC.CONNECT_INVALID_HOST | DNR);
    expect(t.lines.some((l) => String(l.msg).includes('empty host NQN, and the subsystem admits listed hosts only'))).toBe(true);
  });
});

describe('zero-length SGLs of every type mean no data', () => {
  const noData = [
    ['Data Block / Offset (SPDK)', SGL_TYPE.DATA_BLOCK_OFFSET],
    ['Transport Data Block (Linux)', SGL_TYPE.TRANSPORT],
    ['Keyed Data Block', SGL_TYPE.KEYED],
    ['Bit Bucket', SGL_TYPE.BIT_BUCKET],
    ['Segment', SGL_TYPE.SEGMENT],
    ['Last Segment', SGL_TYPE.LAST_SEGMENT],
  ] as const;

  it.each(noData)('%s on Keep Alive and Flush: success', (_name, sglType) => {
    const t = setup();
    const { admin, cntlid } = spdkAdmin(t, SUBNQN, 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100');
    expect(admin.exec(spdkSqe({ opcode: OPC.KEEP_ALIVE, cid: 9, sglType, sglAddr: 0x1000n })).status).toBe(SC.SUCCESS);
    const io = new HostQueue(t.target, t.port);
    expect(io.exec(spdkConnect(1, 1, 127, 0), connectData(SUBNQN, 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100', cntlid)).status).toBe(0);
    expect(io.exec(spdkSqe({ opcode: OPC.FLUSH, cid: 10, nsid: 1, sglType })).status).toBe(SC.SUCCESS);
  });

  it('a Keyed descriptor of length 0 with a key is still no data (its length is bytes 10:08; Figure 117)', () => {
    const t = setup();
    const { admin } = spdkAdmin(t, SUBNQN, 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100');
    // Bytes 35..38 are the key: 0x11223344 puts 0x44 in byte 35, which a 4-byte length read would count.
    const sqe = spdkSqe({ opcode: OPC.KEEP_ALIVE, cid: 14, sglType: SGL_TYPE.KEYED });
    sqe.writeUInt32LE(0x11223344, 35);
    expect(admin.exec(sqe).status).toBe(SC.SUCCESS);
  });

  it('a zero-length SGL on a command that moves data (Identify, 4 KiB) is SGL Data Block Invalid at the length', () => {
    const t = setup();
    const { admin, cntlid } = spdkAdmin(t, SUBNQN, 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100');
    expect(admin.exec(spdkSqe({ opcode: OPC.IDENTIFY, cid: 11, sglType: SGL_TYPE.TRANSPORT, cdw10: 1 })).status).toBe(SC.SGL_INVALID_DATA | DNR);
    expect(controllerOf(t.subsys, cntlid).errors[0]?.paramErrorLocation).toBe(32);
  });

  it('a zero-length in-capsule SGL whose capsule still carries data is SGL Data Block Invalid', () => {
    const t = setup();
    const { admin } = spdkAdmin(t, SUBNQN, 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100');
    expect(admin.exec(spdkSqe({ opcode: OPC.SET_FEATURES, cid: 12, sglType: SGL_TYPE.DATA_BLOCK_OFFSET, cdw10: 0x07, cdw11: 0 }), Buffer.alloc(16)).status).toBe(SC.SGL_INVALID_DATA | DNR);
  });

  it('a Keyed SGL that does describe data (RDMA only) is SGL Descriptor Type Invalid at byte 39', () => {
    const t = setup();
    const { cntlid } = spdkAdmin(t, SUBNQN, 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100');
    const io = new HostQueue(t.target, t.port);
    expect(io.exec(spdkConnect(1, 1, 127, 0), connectData(SUBNQN, 'nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100', cntlid)).status).toBe(0);
    // Read 1 block of 512 (CDW12 NLB 0): keyed descriptor, 512 bytes.
    expect(io.exec(spdkSqe({ opcode: OPC.READ, cid: 13, nsid: 1, sglType: SGL_TYPE.KEYED, sglLen: 512 })).status).toBe(SC.SGL_INVALID_TYPE | DNR);
    expect(controllerOf(t.subsys, cntlid).errors[0]?.paramErrorLocation).toBe(39);
  });
});
