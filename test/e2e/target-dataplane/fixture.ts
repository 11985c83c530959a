// Shared test setup for target suites: a TargetService on 127.0.0.1:0 plus raw-peer helpers for the Linux host's sequence.
import { Buffer } from 'node:buffer';
import {
  AdminOpcode,
  FabricsType,
  NvmOpcode,
  encodeGetLogPageCmd,
  encodeRwCmd,
  encodeSqe,
  sglInCapsule,
  sglTransport,
} from '../../../protocol/index.js';
import { RawPeer, type CommandResult } from '../../../harness/peers/raw-peer.js';
import type { SubsystemConfig, TargetConfig } from '../../../target/model/config.js';
import { TargetService } from '../../../target/service/index.js';

export const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000001';
export const SUBNQN = 'nqn.2024-01.io.nvme-ts:test';

export interface Harness {
  svc: TargetService;
  port: number;
  peers: RawPeer[];
  peer(): Promise<RawPeer>;
  close(): Promise<void>;
}

export function defaultSubsystem(extra: Partial<SubsystemConfig> = {}): SubsystemConfig {
  return { nqn: SUBNQN, namespaces: [{ nsid: 1, backend: { type: 'ram', size: '64M' } }], ...extra };
}

export async function startTarget(cfg: Partial<TargetConfig> = {}, opts: { icReqTimeoutS?: number } = {}): Promise<Harness> {
  const svc = new TargetService(opts.icReqTimeoutS !== undefined ? { icReqTimeoutS: opts.icReqTimeoutS } : {});
  await svc.apply({ ports: cfg.ports ?? [{ id: 1, addr: '127.0.0.1', port: 0 }], subsystems: cfg.subsystems ?? [defaultSubsystem()] });
  const port = (svc.boundPorts()[0] as { port: number }).port;
  const peers: RawPeer[] = [];
  return {
    svc,
    port,
    peers,
    async peer() {
      const p = await RawPeer.connect({ port });
      peers.push(p);
      return p;
    },
    async close() {
      for (const p of peers) p.close();
      await svc.stop();
    },
  };
}

let cidCounter = 1;
export function nextCid(): number {
  cidCounter = (cidCounter + 1) & 0xffff;
  return cidCounter;
}

export function propGet(offset: number, size8 = false): Buffer {
  const b = encodeSqe({ opcode: 0x7f, cid: nextCid(), nsid: FabricsType.PROPERTY_GET });
  b[40] = size8 ? 1 : 0;
  b.writeUInt32LE(offset, 44);
  return b;
}

export function propSet(offset: number, value: number): Buffer {
  const b = encodeSqe({ opcode: 0x7f, cid: nextCid(), nsid: FabricsType.PROPERTY_SET });
  b.writeUInt32LE(offset, 44);
  b.writeUInt32LE(value, 48);
  return b;
}

export function identify(cns: number, nsid = 0, cdw11 = 0): Buffer {
  return encodeSqe({ opcode: AdminOpcode.IDENTIFY, cid: nextCid(), nsid, cdw10: cns, cdw11, sgl: sglTransport(4096) });
}

export function setFeatures(fid: number, cdw11: number): Buffer {
  return encodeSqe({ opcode: AdminOpcode.SET_FEATURES, cid: nextCid(), cdw10: fid, cdw11 });
}

export function getLog(lid: number, length: number, o: { lpo?: bigint; rae?: boolean; nsid?: number; lsp?: number } = {}): Buffer {
  return encodeGetLogPageCmd({ cid: nextCid(), lid, length, nsid: o.nsid ?? 0xffffffff, lpo: o.lpo ?? 0n, rae: o.rae ?? false, lsp: o.lsp ?? 0 });
}

export function adminCmd(opcode: number, extra: Parameters<typeof encodeSqe>[0] extends infer T ? Partial<T> : never = {}): Buffer {
  return encodeSqe({ opcode, cid: nextCid(), ...extra });
}

export function readCmd(nsid: number, slba: bigint, nlb: number, bs = 512): Buffer {
  return encodeRwCmd({ opcode: NvmOpcode.READ, cid: nextCid(), nsid, slba, nlb, sgl: sglTransport(nlb * bs) });
}

export function writeCmd(nsid: number, slba: bigint, nlb: number, opts: { bs?: number; inCapsule?: boolean; fua?: boolean } = {}): Buffer {
  const len = nlb * (opts.bs ?? 512);
  return encodeRwCmd({ opcode: NvmOpcode.WRITE, cid: nextCid(), nsid, slba, nlb, fua: opts.fua ?? false, sgl: opts.inCapsule === true ? sglInCapsule(len) : sglTransport(len) });
}

export function expectOk(r: CommandResult): CommandResult {
  if (r.cqe !== undefined && r.cqe.status !== 0) throw new Error(`command failed with status 0x${r.cqe.status.toString(16)}`);
  return r;
}

/** The Linux host's admin bring-up (ICReq, Connect, Property Get CAP/VS, CC.EN, CSTS.RDY poll, Identify Controller, as drivers/nvme/host does it): returns the cntlid. */
export async function bringUpAdmin(p: RawPeer, o: { subnqn?: string; hostnqn?: string; kato?: number; cattr?: number; digests?: { hdgst?: boolean; ddgst?: boolean } } = {}): Promise<number> {
  const c = await p.connect({ subnqn: o.subnqn ?? SUBNQN, hostnqn: o.hostnqn ?? HOSTNQN, kato: o.kato ?? 5000, cattr: o.cattr ?? 0, ...(o.digests !== undefined ? { digests: o.digests } : {}) });
  if (c.cqe === undefined || c.cqe.status !== 0) throw new Error(`connect failed 0x${c.cqe?.status.toString(16)}`);
  const cntlid = c.cqe.dw0 & 0xffff;
  expectOk(await p.command(propGet(0, true)));
  expectOk(await p.command(propSet(0x14, 0x460000)));
  expectOk(await p.command(propSet(0x14, 0x460001)));
  const csts = await p.command(propGet(0x1c));
  if (((csts.cqe?.dw0 ?? 0) & 1) !== 1) throw new Error('CSTS.RDY not set');
  return cntlid;
}

export async function connectIo(p: RawPeer, cntlid: number, qid: number, o: { cattr?: number; sqsize?: number; hostnqn?: string; digests?: { hdgst?: boolean; ddgst?: boolean } } = {}): Promise<CommandResult> {
  return p.connect({ subnqn: SUBNQN, hostnqn: o.hostnqn ?? HOSTNQN, qid, cntlid, sqsize: o.sqsize ?? 127, cattr: o.cattr ?? 0, ...(o.digests !== undefined ? { digests: o.digests } : {}) });
}

export { RawPeer };
