/**
 * Decodes the Fabrics commands, Connect data, properties and the discovery log in the captured
 * Linux host ↔ nvmet sessions (test/fixtures/captures, README there).
 */
import { parsedCaptures } from '../../test/fixtures/load.js';
import { describe, expect, it } from 'vitest';
import {
  Adrfam,
  CcShn,
  CstsShst,
  DISCOVERY_NQN,
  DiscSubtype,
  FabricsType,
  PropertyOffset,
  Treq,
  Trtype,
  bytesToUuid,
  decodeCap,
  decodeCc,
  decodeConnectCmd,
  decodeConnectData,
  decodeConnectResult,
  decodeCsts,
  decodeDiscLogHeader,
  decodeDiscoveryLog,
  decodeFctype,
  decodePropertyCmd,
  decodeVs,
  encodeConnectCmd,
  encodeConnectData,
  encodeDiscoveryLog,
  encodePropertyGetCmd,
  encodePropertySetCmd,
  makeHostNqn,
  uuidFromNqn,
  validateNqn,
} from './index.js';
import { AenConfig, cqeResult64, decodeCqe, decodeFeatureCmd, decodeGetLogPageCmd, decodeIdentifyController, decodeSqe, sliceLogPage } from '../nvme/index.js';
import type { FixtureConnection, FixturePdu } from '../testing/fixture-builder.js';
import { c2hDataFor, capsuleData, capsuleSqe, findCommands, respCqe, responseFor } from '../testing/fixture-builder.js';

const { io, ioDigest, discover } = parsedCaptures();

const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000001';
const HOSTID = '6c61622d-6e76-6d65-7463-700000000001';
const SUBNQN = 'nqn.2024-01.io.nvme-lab:kernel-target';

function only<T>(xs: T[], what: string): T {
  const x = xs[0];
  if (x === undefined) throw new Error(`no ${what}`);
  return x;
}

function allConnections(): FixtureConnection[] {
  return [...io, ...ioDigest, ...discover];
}

function resp(c: FixtureConnection, cmd: FixturePdu): ReturnType<typeof decodeCqe> {
  const r = responseFor(c, cmd);
  if (r === undefined) throw new Error('no response');
  return decodeCqe(respCqe(r));
}

const hexNum = (v: unknown): number => (typeof v === 'string' ? parseInt(v, 16) : typeof v === 'number' ? v : NaN);

describe('captured fixtures: Fabrics', () => {
  it('every Connect (admin, I/O, discovery; with and without digests) decodes and re-encodes', () => {
    let n = 0;
    for (const c of allConnections()) {
      const cmd = only(findCommands(c, 'Fabrics/Connect'), 'connect');
      const sqeBytes = capsuleSqe(cmd);
      expect(decodeFctype(sqeBytes)).toBe(FabricsType.CONNECT);
      const cc = decodeConnectCmd(sqeBytes);
      expect(cc).toEqual({
        cid: cmd.info['cid'], recfmt: 0, qid: c.qid, sqsize: cmd.info['sqsize'], cattr: 0, kato: cmd.info['kato'],
        sgl: { address: 0n, length: 1024, type: 0x01 },
      });
      expect(cc.sqsize).toBe(c.qid === 0 ? 31 : 127);
      expect(cc.kato).toBe(c.role === 'admin' ? 5000 : 0);
      expect(encodeConnectCmd(cc)).toEqual(sqeBytes);
      expect(cmd.pdo).toBe(c.hdgst ? 76 : 72);

      const data = capsuleData(c, cmd);
      expect(data.length).toBe(1024);
      const d = decodeConnectData(data);
      expect(d.hostid.toString('hex')).toBe(cmd.info['hostid']);
      expect(bytesToUuid(d.hostid)).toBe(HOSTID);
      expect(d.cntlid).toBe(hexNum(cmd.info['cntlid']));
      expect(d.cntlid).toBe(c.qid === 0 ? 0xffff : 1);
      expect(d.subnqn).toBe(c.role === 'discovery' ? DISCOVERY_NQN : SUBNQN);
      expect(d.hostnqn).toBe(HOSTNQN);
      expect(makeHostNqn(d.hostid)).toBe(d.hostnqn);
      expect(uuidFromNqn(d.hostnqn)).toBe(HOSTID);
      expect(validateNqn(d.subnqn)).toEqual({ ok: true });
      expect(validateNqn(d.hostnqn)).toEqual({ ok: true });
      expect(encodeConnectData(d).equals(data)).toBe(true);

      const r = resp(c, cmd);
      expect(r.status).toBe(0);
      expect(decodeConnectResult(r.dw0)).toEqual({ cntlid: 1, atr: false, ascr: false });
      n++;
    }
    expect(n).toBe(5);
  });

  it('Property Get/Set commands decode to the summary and re-encode', () => {
    const names: Record<string, number> = { CAP: PropertyOffset.CAP, CC: PropertyOffset.CC, CSTS: PropertyOffset.CSTS, VS: PropertyOffset.VS };
    let n = 0;
    for (const c of allConnections()) {
      for (const cmd of [...findCommands(c, 'Fabrics/PropertyGet'), ...findCommands(c, 'Fabrics/PropertySet')]) {
        const raw = capsuleSqe(cmd);
        const p = decodePropertyCmd(raw);
        const prop = names[cmd.info['prop'] as string];
        expect(prop).toBeDefined();
        expect(p.offset).toBe(prop);
        expect(p.size8).toBe(cmd.info['size'] === 8);
        expect(p.cid).toBe(cmd.info['cid']);
        if (cmd.info['op'] === 'Fabrics/PropertySet') {
          expect(p.fctype).toBe(FabricsType.PROPERTY_SET);
          expect(p.value).toBe(BigInt(hexNum(cmd.info['value'])));
          expect(encodePropertySetCmd({ cid: p.cid, offset: p.offset, value: p.value, size8: p.size8 })).toEqual(raw);
        } else {
          expect(p.fctype).toBe(FabricsType.PROPERTY_GET);
          expect(encodePropertyGetCmd({ cid: p.cid, offset: p.offset, size8: p.size8 })).toEqual(raw);
        }
        n++;
      }
    }
    expect(n).toBe(3 * 9);
  });

  it('property values: nvmet CAP, CC enable/shutdown, CSTS ready/shutdown complete, VS 1.3', () => {
    const admin = only(io.filter((c) => c.role === 'admin'), 'admin');
    const capCmd = only(findCommands(admin, 'Fabrics/PropertyGet', { prop: 'CAP' }), 'cap');
    const cap = decodeCap(cqeResult64(resp(admin, capCmd)));
    expect(cap).toMatchObject({ mqes: 1023, cqr: false, to: 15, dstrd: 0, css: 0x41, mpsmin: 0, mpsmax: 0, crms: 0 });

    const sets = findCommands(admin, 'Fabrics/PropertySet').map((p) => decodeCc(Number(decodePropertyCmd(capsuleSqe(p)).value)));
    expect(sets).toEqual([
      { en: false, css: 6, mps: 0, ams: 0, shn: CcShn.NONE, iosqes: 6, iocqes: 4, crime: false },
      { en: true, css: 6, mps: 0, ams: 0, shn: CcShn.NONE, iosqes: 6, iocqes: 4, crime: false },
      { en: true, css: 6, mps: 0, ams: 0, shn: CcShn.NORMAL, iosqes: 6, iocqes: 4, crime: false },
    ]);

    const csts = findCommands(admin, 'Fabrics/PropertyGet', { prop: 'CSTS' }).map((p) => decodeCsts(resp(admin, p).dw0));
    expect(csts.map((s) => [s.rdy, s.shst])).toEqual([[true, CstsShst.NORMAL], [false, CstsShst.COMPLETE]]);

    const vs = only(findCommands(admin, 'Fabrics/PropertyGet', { prop: 'VS' }), 'vs');
    expect(decodeVs(resp(admin, vs).dw0)).toEqual({ mjr: 1, mnr: 3, ter: 0 });
  });

  describe('discovery session', () => {
    const disc = (): FixtureConnection => only(discover.filter((c) => c.role === 'discovery'), 'discovery');

    it('Identify reports a discovery controller for the discovery NQN', () => {
      for (const cmd of findCommands(disc(), 'Identify', { cns: '0x01' })) {
        const c = decodeIdentifyController(c2hDataFor(disc(), cmd));
        expect(c).toMatchObject({ cntrltype: 2, subnqn: DISCOVERY_NQN, oaes: AenConfig.DISC, lpa: 0x04, nn: 0, kas: 0, cntlid: 1, maxcmd: 1024, sgls: 0x00100001 });
      }
    });

    it('Set Features 0x0B enables the discovery log change notice', () => {
      const cmd = only(findCommands(disc(), 'SetFeatures', { fid: '0x0b' }), 'aen');
      expect(decodeFeatureCmd(decodeSqe(capsuleSqe(cmd))).cdw11).toBe(AenConfig.DISC);
      expect(resp(disc(), cmd).dw0).toBe(0x80000000);
    });

    it('the discovery log: header read, then 2 records (current discovery subsystem first)', () => {
      const [headerCmd, fullCmd] = findCommands(disc(), 'GetLogPage', { lid: '0x70' });
      if (headerCmd === undefined || fullCmd === undefined) throw new Error('log reads missing');
      expect(decodeGetLogPageCmd(decodeSqe(capsuleSqe(headerCmd)))).toMatchObject({ lid: 0x70, length: 1024, lpo: 0n });
      expect(decodeGetLogPageCmd(decodeSqe(capsuleSqe(fullCmd)))).toMatchObject({ lid: 0x70, length: 3072, lpo: 0n });

      const header = c2hDataFor(disc(), headerCmd);
      const h = decodeDiscLogHeader(header);
      expect(h.numrec).toBe(2);
      expect(h.recfmt).toBe(0);

      const full = c2hDataFor(disc(), fullCmd);
      const log = decodeDiscoveryLog(full);
      expect(log.genctr).toBe(h.genctr);
      expect(log.truncated).toBe(false);
      const common = {
        trtype: Trtype.TCP, adrfam: Adrfam.IPV4, treq: Treq.DISABLE_SQFLOW, portid: 1, cntlid: 0xffff, asqsz: 32, eflags: 0,
        trsvcid: '4420', traddr: '10.0.2.15', tsas: { sectype: 0 },
      };
      expect(log.entries).toEqual([
        { ...common, subtype: DiscSubtype.CURRENT, subnqn: DISCOVERY_NQN },
        { ...common, subtype: DiscSubtype.NVME, subnqn: SUBNQN },
      ]);

      // a target rebuilding the same log serves both windows byte for byte
      const rebuilt = encodeDiscoveryLog({ genctr: log.genctr, entries: log.entries });
      expect(rebuilt.equals(full)).toBe(true);
      expect(sliceLogPage(rebuilt, 0n, 1024).equals(header)).toBe(true);
    });
  });
});
