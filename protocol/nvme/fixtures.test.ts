/**
 * Decodes the NVMe structures in the captured Linux host ↔ nvmet sessions
 * (test/fixtures/captures, README there) and checks them against the documented values.
 */
import { Buffer } from 'node:buffer';
import { parsedCaptures } from '../../test/fixtures/load.js';
import { describe, expect, it } from 'vitest';
import {
  AenConfig,
  CmdEffects,
  Cns,
  NidType,
  PSDT_SGL,
  Status,
  anaLogMaxSize,
  decodeActiveNsList,
  decodeAnaLog,
  decodeCmdEffectsLog,
  decodeCqe,
  decodeFeatureCmd,
  decodeGetLogPageCmd,
  decodeIdentifyCmd,
  decodeIdentifyController,
  decodeIdentifyNamespace,
  decodeIdentifyNvmController,
  decodeNsDescList,
  decodeRwFields,
  decodeSmartLog,
  decodeSqe,
  encodeCqe,
  encodeIdentifyController,
  encodeIdentifyNamespace,
  encodeNsDescList,
  encodeSqe,
  statusName,
} from './index.js';
import type { FixtureConnection } from '../testing/fixture-builder.js';
import { FixturePduType, c2hDataFor, capsuleData, capsuleSqe, findCommands, respCqe } from '../testing/fixture-builder.js';

const { io, ioDigest, discover } = parsedCaptures();

function conn(f: FixtureConnection[], role: string): FixtureConnection {
  const c = f.find((x) => x.role === role);
  if (c === undefined) throw new Error(`no ${role} connection`);
  return c;
}

function only<T>(xs: T[], what: string): T {
  const x = xs[0];
  if (x === undefined) throw new Error(`no ${what}`);
  return x;
}

const hexNum = (v: unknown): number => (typeof v === 'string' ? parseInt(v, 16) : typeof v === 'number' ? v : NaN);

describe('captured fixtures: NVMe structures', () => {
  const sessions = { io, 'io-digest': ioDigest, discover };

  describe('every CapsuleCmd SQE', () => {
    for (const [name, f] of Object.entries(sessions)) {
      it(`${name}: decodes to the summary and re-encodes byte for byte`, () => {
        let n = 0;
        for (const c of f) {
          for (const p of c.pdus.filter((x) => x.type === FixturePduType.CapsuleCmd)) {
            const raw = capsuleSqe(p);
            const sqe = decodeSqe(raw);
            expect(sqe.opcode).toBe(hexNum(p.info['opcode']));
            expect(sqe.cid).toBe(p.info['cid']);
            expect(sqe.psdt).toBe(PSDT_SGL);
            expect(sqe.fuse).toBe(0);
            const sgl = p.info['sgl'] as { addr: number; len: number; type: string };
            expect(sgl).toBeDefined();
            expect(sqe.sgl).toEqual({ address: BigInt(sgl.addr), length: sgl.len, type: hexNum(sgl.type) });
            expect(encodeSqe(sqe)).toEqual(raw);
            n++;
          }
        }
        expect(n).toBe(name === 'discover' ? 16 : 44);
      });
    }
  });

  describe('every CapsuleResp CQE', () => {
    for (const [name, f] of Object.entries(sessions)) {
      it(`${name}: decodes to the summary and re-encodes byte for byte`, () => {
        let n = 0;
        for (const c of f) {
          for (const p of c.pdus.filter((x) => x.type === FixturePduType.CapsuleResp)) {
            const raw = respCqe(p);
            const cqe = decodeCqe(raw);
            expect(cqe.cid).toBe(p.info['cid']);
            expect(cqe.sqhd).toBe(p.info['sqhd']);
            expect(cqe.sqid).toBe(p.info['sqid']);
            expect(cqe.status).toBe(hexNum(p.info['status']));
            expect(cqe.dw0).toBe(hexNum(p.info['dw0']));
            if (p.info['dw1'] !== undefined) expect(cqe.dw1).toBe(hexNum(p.info['dw1']));
            expect(encodeCqe(cqe)).toEqual(raw);
            n++;
          }
        }
        expect(n).toBe(name === 'discover' ? 16 : 44);
      });
    }

    it('the AER completed at shutdown is INTERNAL|DNR (wire 0x800c)', () => {
      const admin = conn(io, 'admin');
      const aer = only(findCommands(admin, 'AsyncEventRequest'), 'AER');
      expect(decodeSqe(capsuleSqe(aer)).cid).toBe(31);
      const resp = only(admin.pdus.filter((p) => p.type === FixturePduType.CapsuleResp && p.info['cid'] === 31), 'AER resp');
      expect(respCqe(resp).readUInt16LE(14)).toBe(0x800c);
      const cqe = decodeCqe(respCqe(resp));
      expect(cqe.status).toBe(Status.INTERNAL | 0x4000);
      expect(statusName(cqe.status, 'admin')).toBe('INTERNAL|DNR');
    });
  });

  describe('io admin queue', () => {
    const admin = conn(io, 'admin');

    it('Identify Controller (CNS 0x01) has the nvmet 6.1 values', () => {
      const cmd = only(findCommands(admin, 'Identify', { cns: '0x01' }), 'identify ctrl');
      expect(decodeIdentifyCmd(decodeSqe(capsuleSqe(cmd)))).toEqual({ cns: Cns.CTRL, cntid: 0, cnsSpecificId: 0, csi: 0, nsid: 0 });
      const data = c2hDataFor(admin, cmd);
      expect(data.length).toBe(4096);
      const c = decodeIdentifyController(data);
      expect(c.sn).toMatch(/^[0-9a-f]{20}$/);
      expect(c).toMatchObject({
        vid: 0, ssvid: 0, mn: 'Linux', fr: '6.1.0-57', rab: 6, ieee: 0, cmic: 0x0b, mdts: 0, cntlid: 1, ver: 0x10300,
        rtd3r: 0, rtd3e: 0, oaes: AenConfig.NS_ATTR | AenConfig.ANA, ctratt: 0x41, cntrltype: 1, crdt1: 0, oacs: 0,
        acl: 3, aerl: 3, frmw: 3, lpa: 7, elpe: 127, npss: 0, apsta: 0, kas: 10, anatt: 10, anacap: 0x1f,
        anagrpmax: 128, nanagrpid: 128, sqes: 0x66, cqes: 0x44, maxcmd: 1024, nn: 1024, oncs: 0x0c, fuses: 0, vwc: 1,
        nwpc: 1, sgls: 0x00100001, mnan: 1024, subnqn: 'nqn.2024-01.io.nvme-lab:kernel-target', ioccsz: 1028,
        iorcsz: 1, icdoff: 0, fcatt: 0, msdbd: 1, ofcs: 0, dctype: 0,
      });
      expect(c.psd0).toMatchObject({ maxPower: 0x9c4, entryLatency: 0x10, exitLatency: 0x4 });
      expect(c.fguid).toEqual(Buffer.alloc(16));
      // the in-capsule data limit the Linux host derives: ioccsz*16 - 64 = 16 KiB
      expect(c.ioccsz * 16 - 64).toBe(16384);
      expect(anaLogMaxSize(c.nanagrpid, c.mnan)).toBe(8208);
    });

    it('Identify Controller re-encodes byte for byte', () => {
      for (const cmd of findCommands(admin, 'Identify', { cns: '0x01' })) {
        const data = c2hDataFor(admin, cmd);
        expect(encodeIdentifyController(decodeIdentifyController(data)).equals(data)).toBe(true);
      }
    });

    it('Identify Namespace (CNS 0x00): 1 GiB of 4 KiB blocks, shared, ANA group 1', () => {
      const cmds = findCommands(admin, 'Identify', { cns: '0x00' });
      expect(cmds.length).toBe(8);
      for (const cmd of cmds) {
        expect(decodeIdentifyCmd(decodeSqe(capsuleSqe(cmd)))).toMatchObject({ cns: 0, nsid: 1 });
        const data = c2hDataFor(admin, cmd);
        const ns = decodeIdentifyNamespace(data);
        expect(ns).toMatchObject({ nsze: 0x40000n, ncap: 0x40000n, nuse: 0x40000n, nsfeat: 0, nlbaf: 0, flbas: 0, nmic: 1, anagrpid: 1, nsattr: 0 });
        expect(ns.lbaf).toEqual([{ ms: 0, lbads: 12, rp: 0 }]);
        expect(ns.nguid).toEqual(Buffer.alloc(16));
        expect(Number(ns.nsze) << ns.lbaf[0]!.lbads).toBe(1 << 30);
        expect(encodeIdentifyNamespace(ns).equals(data)).toBe(true);
      }
    });

    it('NS identification descriptors (CNS 0x03): UUID then CSI NVM', () => {
      const cmds = findCommands(admin, 'Identify', { cns: '0x03' });
      expect(cmds.length).toBe(2);
      for (const cmd of cmds) {
        const data = c2hDataFor(admin, cmd);
        const descs = decodeNsDescList(data);
        expect(descs.map((d) => [d.nidt, d.nid.length])).toEqual([[NidType.UUID, 16], [NidType.CSI, 1]]);
        expect(descs[1]?.nid[0]).toBe(0);
        expect(encodeNsDescList(descs).equals(data)).toBe(true);
      }
    });

    it('active NS list (CNS 0x02) is [1]; CNS 0x06 reports no limits', () => {
      const list = only(findCommands(admin, 'Identify', { cns: '0x02' }), 'cns 2');
      expect(decodeActiveNsList(c2hDataFor(admin, list))).toEqual([1]);
      const nvm = only(findCommands(admin, 'Identify', { cns: '0x06' }), 'cns 6');
      expect(decodeIdentifyNvmController(c2hDataFor(admin, nvm))).toEqual({ vsl: 0, wzsl: 0, wusl: 0, dmrl: 0, dmrsl: 0, dmsl: 0n });
    });

    it('Get Log Page ANA (0x0C): 8208 bytes, one optimized group with NSID 1', () => {
      const cmds = findCommands(admin, 'GetLogPage', { lid: '0x0c' });
      expect(cmds.length).toBe(2);
      for (const cmd of cmds) {
        const glp = decodeGetLogPageCmd(decodeSqe(capsuleSqe(cmd)));
        expect(glp).toMatchObject({ lid: 0x0c, numd: 2051, length: 8208, lpo: 0n, rae: false, lsp: 0 });
        expect(glp.numd + 1).toBe(cmd.info['numd']);
        const data = c2hDataFor(admin, cmd);
        expect(data.length).toBe(glp.length);
        expect(decodeAnaLog(data)).toEqual({ chgcnt: 0n, groups: [{ grpid: 1, chgcnt: 0n, state: 1, nsids: [1] }], truncated: false });
      }
    });

    it('Get Log Page SMART (0x02): 512 zero bytes for NSID 0xFFFFFFFF', () => {
      const cmd = only(findCommands(admin, 'GetLogPage', { lid: '0x02' }), 'smart');
      expect(decodeSqe(capsuleSqe(cmd)).nsid).toBe(0xffffffff);
      expect(decodeGetLogPageCmd(decodeSqe(capsuleSqe(cmd))).length).toBe(512);
      const s = decodeSmartLog(c2hDataFor(admin, cmd));
      expect(s.criticalWarning).toBe(0);
      expect(s.dataUnitsRead).toBe(0n);
      expect(s.numErrLogEntries).toBe(0n);
    });

    it('Get Log Page effects (0x05): the admin and NVM commands nvmet supports', () => {
      const cmd = only(findCommands(admin, 'GetLogPage', { lid: '0x05' }), 'effects');
      const e = decodeCmdEffectsLog(c2hDataFor(admin, cmd));
      const supported = (t: number[]): number[] => t.flatMap((v, i) => ((v & CmdEffects.CSUPP) !== 0 ? [i] : []));
      expect(supported(e.acs)).toEqual([0x02, 0x06, 0x08, 0x09, 0x0a, 0x0c, 0x18]);
      expect(supported(e.iocs)).toEqual([0x00, 0x01, 0x02, 0x08, 0x09]);
    });

    it('Set Features: Number of Queues and Async Event Configuration', () => {
      const nq = only(findCommands(admin, 'SetFeatures', { fid: '0x07' }), 'nq');
      expect(decodeFeatureCmd(decodeSqe(capsuleSqe(nq)))).toMatchObject({ fid: 7, cdw11: 0, sv: false });
      const aen = only(findCommands(admin, 'SetFeatures', { fid: '0x0b' }), 'aen');
      expect(decodeFeatureCmd(decodeSqe(capsuleSqe(aen))).cdw11).toBe(AenConfig.NS_ATTR | AenConfig.ANA);
    });
  });

  describe('io I/O queue', () => {
    it('Read/Write SLBA and NLB match the summary', () => {
      for (const f of [io, ioDigest]) {
        const q = conn(f, 'io');
        const rw = [...findCommands(q, 'Read'), ...findCommands(q, 'Write')];
        expect(rw.length).toBe(7);
        for (const cmd of rw) {
          const sqe = decodeSqe(capsuleSqe(cmd));
          const fields = decodeRwFields(sqe);
          expect(fields.slba).toBe(BigInt(cmd.info['slba'] as number));
          expect(fields.nlb).toBe(cmd.info['nlb']);
          expect(sqe.sgl.length).toBe(fields.nlb * 4096);
          expect(sqe.nsid).toBe(1);
        }
      }
    });

    it('the 4 KiB write carries its data in-capsule (SGL 0x01) at PDO 72 / 76', () => {
      for (const f of [io, ioDigest]) {
        const q = conn(f, 'io');
        const w = only(findCommands(q, 'Write', { slba: 16 }), 'write 4k');
        const sqe = decodeSqe(capsuleSqe(w));
        expect(sqe.sgl).toEqual({ address: 0n, length: 4096, type: 0x01 });
        expect(w.pdo).toBe(q.hdgst ? 76 : 72);
        const data = capsuleData(q, w);
        expect(data.length).toBe(4096);
        expect(data.subarray(0, 19).toString('latin1')).toBe('nvme-tcp fixture 4k');
      }
    });
  });
});
