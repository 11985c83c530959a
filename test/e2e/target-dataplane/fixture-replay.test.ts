// Replays the host side of the captured Linux ↔ nvmet session (test/fixtures/captures/io.json) against the TS target and
// checks every answer has the shape nvmet gave (PDU type, CID, status) and that read data equals what was written.
import { Buffer } from 'node:buffer';
import { afterEach, describe, expect, it } from 'vitest';
import { PduType, decodeCqe } from '../../../protocol/index.js';
import { RawPeer, startTarget, type Harness } from './fixture.js';
import { readFixtureJson } from '../../fixtures/load.js';

interface FxPdu {
  dir: 'h2c' | 'c2h';
  type: number;
  hex: string;
  t_ms: number;
  pdo: number;
}
interface FxConn {
  conn: number;
  qid_guess: number;
  pdus: FxPdu[];
}

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('nvmet capture replay', () => {
  it('io.json: connect, identify, 4 KiB/128 KiB write+read, flush, keep-alive, shutdown', async () => {
    const fx = readFixtureJson('io.json') as { connections: FxConn[] };
    h = await startTarget({
      subsystems: [{ nqn: 'nqn.2024-01.io.nvme-lab:kernel-target', namespaces: [{ nsid: 1, blockSize: 4096, backend: { type: 'ram', size: '1G' } }] }],
    });
    const peers = new Map<number, RawPeer>();
    for (const c of fx.connections) peers.set(c.conn, await h.peer());
    // t_ms is per connection, so replay each connection on its own, with the causal gates the kernel obeys:
    // I/O queue Connect after Set Features Number of Queues; controller shutdown after the I/O queue is done.
    let queuesGranted: () => void = () => undefined;
    const granted = new Promise<void>((r) => (queuesGranted = r));
    let ioDone: () => void = () => undefined;
    const ioFinished = new Promise<void>((r) => (ioDone = r));
    let compared = 0;
    let dataChecks = 0;
    const adminConn = fx.connections[0]?.conn;
    // The CID of the Asynchronous Event Request (opcode 0Ch) the host posts on the admin queue.
    const aerCid = fx.connections[0]?.pdus.map((p) => Buffer.from(p.hex, 'hex')).find((b) => b[0] === PduType.CAPSULE_CMD && b[8] === 0x0c)?.readUInt16LE(10);
    const replay = async (c: FxConn): Promise<void> => {
      const peer = peers.get(c.conn) as RawPeer;
      const isAdmin = c.conn === adminConn;
      if (!isAdmin) await granted;
      let ttag = 0;
      const stash: ReturnType<typeof decodeCqe>[] = [];
      for (const [i, p] of c.pdus.entries()) {
        const bytes = Buffer.from(p.hex, 'hex');
        if (p.dir === 'h2c') {
          if (isAdmin && p.type === PduType.CAPSULE_CMD && bytes[8] === 0x7f && bytes[12] === 0x00 && (bytes.readUInt32LE(56) & 0xc000) !== 0) await ioFinished;
          if (p.type === PduType.H2C_DATA) bytes.writeUInt16LE(ttag, 10);
          peer.sendRaw(bytes);
          continue;
        }
        // nvmet fails the held AER (Internal Error) when it destroys the admin SQ, after the host has closed the
        // connection at the end of the session; it reaches no host. We forget it at CC.SHN instead (the SPDK host
        // aborts it locally and fails on a completion for its CID; docs/peers.md): nothing more may arrive.
        if (isAdmin && i === c.pdus.length - 1 && p.type === PduType.CAPSULE_RESP && decodeCqe(bytes, 8).cid === aerCid) {
          await expect(peer.nextPdu(300)).rejects.toThrow(/no PDU/);
          compared++;
          continue;
        }
        // Match completions by CID, everything else in order.
        if (p.type === PduType.CAPSULE_RESP) {
          const wantCid = decodeCqe(bytes, 8).cid;
          const early = stash.findIndex((x) => x.cid === wantCid);
          if (early >= 0) {
            const cqe = stash.splice(early, 1)[0];
            expect(cqe?.status, `conn ${c.conn} pdu ${i}`).toBe(decodeCqe(bytes, 8).status);
            compared++;
            continue;
          }
        }
        let got = await peer.nextPdu(5000);
        while (got.type === PduType.CAPSULE_RESP && p.type === PduType.CAPSULE_RESP && decodeCqe(got.cqe).cid !== decodeCqe(bytes, 8).cid) {
          stash.push(decodeCqe(got.cqe));
          got = await peer.nextPdu(5000);
        }
        expect(got.type, `conn ${c.conn} pdu ${i}`).toBe(p.type);
        if (got.type === PduType.R2T) {
          ttag = got.ttag;
          expect(got.r2tl).toBe(bytes.readUInt32LE(16));
        } else if (got.type === PduType.CAPSULE_RESP) {
          const want = decodeCqe(bytes, 8);
          const cqe = decodeCqe(got.cqe);
          expect([cqe.cid, cqe.status], `conn ${c.conn} pdu ${i}`).toEqual([want.cid, want.status]);
          if (isAdmin && want.dw0 === 0x7f007f) queuesGranted();
        } else if (got.type === PduType.C2H_DATA) {
          const data = Buffer.concat(got.data);
          expect(data.length).toBe(bytes.length - p.pdo);
          if (!isAdmin) {
            // Reads of LBAs 0/1/3 are zeros in both (fresh backing); LBAs 16 and 256 hold the written pattern.
            expect(data.equals(bytes.subarray(p.pdo)), `read data conn ${c.conn} pdu ${i}`).toBe(true);
            dataChecks++;
          }
        }
        compared++;
      }
      expect(stash).toEqual([]);
      if (!isAdmin) ioDone();
    };
    await Promise.all(fx.connections.map((c) => replay(c)));
    expect(compared).toBeGreaterThan(60);
    expect(dataChecks).toBe(5);
  });
});
