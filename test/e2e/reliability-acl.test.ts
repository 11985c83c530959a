// Host ACL and per-host discovery filtering, end to end with our initiator (issue 6 item 6, ACL part): allowed hosts
// connect, others get CONNECT_INVALID_HOST with DNR and no retry, each host's discovery log lists only what it may
// see, and runtime addAllowedHost/removeAllowedHost change that log with a discovery-change AEN (NVMe-oF 1.1 §5.3).
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { connect, discover, NvmeStatusError, type Controller } from '../../initiator/index.js';
import { AdminOpcode, AenDw0, DNR, PduType, Status, decodeCqe, encodeSqe } from '../../protocol/index.js';
import { TargetService } from '../../target/service/index.js';
import { RawPeer, bringUpAdmin, expectOk, getLog } from './target-dataplane/fixture.js';
import { cleanupAfterEach } from '../fixtures/cleanups.js';

const host = (n: number): string => `nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-7000000a${String(n).padStart(4, '0')}`;
const H1 = host(1);
const H2 = host(2);
const H3 = host(3);
const SUB_A = 'nqn.2024-01.io.nvme-ts:acl-a';
const SUB_B = 'nqn.2024-01.io.nvme-ts:acl-b';
const SUB_OPEN = 'nqn.2024-01.io.nvme-ts:acl-open';
const DISC = 'nqn.2014-08.org.nvmexpress.discovery';

const cleanups = cleanupAfterEach();

async function target(): Promise<{ svc: TargetService; port: number }> {
  const svc = new TargetService();
  cleanups.push(() => svc.stop());
  await svc.apply({
    ports: [{ id: 1, addr: '127.0.0.1', port: 0 }],
    subsystems: [
      { nqn: SUB_A, hosts: [H1], namespaces: [{ nsid: 1, backend: { type: 'ram', size: '4M' } }] },
      { nqn: SUB_B, hosts: [H2], namespaces: [{ nsid: 1, backend: { type: 'ram', size: '4M' } }] },
      { nqn: SUB_OPEN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '4M' } }] },
    ],
  });
  return { svc, port: (svc.boundPorts()[0] as { port: number }).port };
}

async function open(port: number, nqn: string, hostnqn: string, extra: Record<string, unknown> = {}): Promise<Controller> {
  const c = await connect({ traddr: '127.0.0.1', trsvcid: port, nqn, hostnqn, nr_io_queues: 1, duplicate_connect: true, reconnect_delay: 0.05, ...extra });
  cleanups.push(() => c.disconnect());
  return c;
}

async function nvmSubsystems(port: number, hostnqn: string): Promise<string[]> {
  const entries = await discover({ traddr: '127.0.0.1', trsvcid: port, hostnqn });
  return entries.filter((e) => e.subtype === 2).map((e) => e.subnqn).sort();
}

describe('host ACL (initiator ↔ target)', () => {
  it('lets an allowed host in and does I/O', async () => {
    const { svc, port } = await target();
    const c = await open(port, SUB_A, H1);
    const data = Buffer.alloc(4096, 0x5a);
    await c.namespace(1).write(8, data);
    expect((await c.namespace(1).read(8, 8)).equals(data)).toBe(true);
    expect(svc.listControllers().filter((x) => x.subnqn === SUB_A).map((x) => x.hostnqn)).toEqual([H1]);
  });

  it('refuses a host not on the list with CONNECT_INVALID_HOST|DNR, surfaced as NvmeStatusError, never retried', async () => {
    const { svc, port } = await target();
    const before = svc.stats().connects;
    const err = await open(port, SUB_A, H2).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NvmeStatusError);
    const e = err as NvmeStatusError;
    expect(e.status & 0x7ff).toBe(Status.CONNECT_INVALID_HOST);
    expect(e.dnr).toBe(true);
    expect(e.status).toBe(Status.CONNECT_INVALID_HOST | DNR);
    // A host that retried would produce more refused Connects within a few reconnect_delay periods (0.05 s).
    await new Promise((r) => setTimeout(r, 400));
    const after = svc.stats().connects;
    expect(after.failed - before.failed).toBe(1);
    expect(after.ok - before.ok).toBe(0);
    expect(svc.listControllers().filter((x) => x.subnqn === SUB_A)).toEqual([]);
    expect(svc.debugCounts()).toMatchObject({ controllers: 0, connections: 0 });
  });

  it('filters the discovery log per host', async () => {
    const { port } = await target();
    expect(await nvmSubsystems(port, H1)).toEqual([SUB_A, SUB_OPEN].sort());
    expect(await nvmSubsystems(port, H2)).toEqual([SUB_B, SUB_OPEN].sort());
    expect(await nvmSubsystems(port, H3)).toEqual([SUB_OPEN]);
  });

  it('addAllowedHost/removeAllowedHost at runtime change discovery (with the discovery-change AEN) and Connect', async () => {
    const { svc, port } = await target();
    // A persistent discovery controller for H3 with an AER posted (the initiator's discover() is one-shot).
    const p = await RawPeer.connect({ port });
    cleanups.push(async () => p.close());
    await bringUpAdmin(p, { subnqn: DISC, hostnqn: H3, kato: 0 });
    const postAer = (cid: number): void => p.send({ type: PduType.CAPSULE_CMD, sqe: encodeSqe({ opcode: AdminOpcode.ASYNC_EVENT, cid }), data: [] });
    const aer = async (cid: number): Promise<number> => {
      const pdu = await p.nextPdu(2000);
      if (pdu.type !== PduType.CAPSULE_RESP) throw new Error(`expected an AER completion, got PDU type ${pdu.type}`);
      const cqe = decodeCqe(pdu.cqe);
      expect(cqe.cid).toBe(cid);
      expect(cqe.status).toBe(0);
      return cqe.dw0;
    };
    postAer(0x31);
    expect(await nvmSubsystems(port, H3)).toEqual([SUB_OPEN]);

    svc.addAllowedHost(SUB_A, H3);
    expect(await aer(0x31)).toBe(AenDw0.DISC_CHANGE);
    expect(await nvmSubsystems(port, H3)).toEqual([SUB_A, SUB_OPEN].sort());
    const c = await open(port, SUB_A, H3);
    expect((await c.namespace(1).read(0, 1)).length).toBe(512);
    // Reading the log without RAE unmasks the notice (NVMe Base 2.0 §5.2), so the next change raises a new AEN.
    expectOk(await p.command(getLog(0x70, 1024)));
    postAer(0x32);

    svc.removeAllowedHost(SUB_A, H3);
    expect(await aer(0x32)).toBe(AenDw0.DISC_CHANGE);
    expect(await nvmSubsystems(port, H3)).toEqual([SUB_OPEN]);
    const refused = await open(port, SUB_A, host(4)).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(NvmeStatusError);
    expect((refused as NvmeStatusError).dnr).toBe(true);
    // H3's existing controller is not torn down by the ACL change (nvmet checks the ACL at Connect only),
    // but a new Connect from H3 is refused.
    expect(c.state).toBe('live');
    const again = await open(port, SUB_A, H3).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(NvmeStatusError);
    expect((again as NvmeStatusError).status).toBe(Status.CONNECT_INVALID_HOST | DNR);
  });

  it('setAllowAnyHost(false) on an open subsystem hides it from hosts not listed', async () => {
    const { svc, port } = await target();
    svc.setAllowAnyHost(SUB_OPEN, false);
    svc.addAllowedHost(SUB_OPEN, H2);
    expect(await nvmSubsystems(port, H1)).toEqual([SUB_A]);
    expect(await nvmSubsystems(port, H2)).toEqual([SUB_B, SUB_OPEN].sort());
    await expect(open(port, SUB_OPEN, H1)).rejects.toBeInstanceOf(NvmeStatusError);
  });
});
