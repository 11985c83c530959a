// A legal KATO past setTimeout's 2^31−1 ms (issue 48): KATO is a 32-bit ms count (NVMe-oF 1.1 §3.3 Connect CDW12;
// NVMe Base 2.0 §5.27.1.12 Set Features FID 0Fh), and Node clamps a longer timer to 1 ms, which tore the controller
// down at the first idle millisecond. Two hosts on real sockets, one connected with KATO 3,448,883,000 ms and one
// that sets it by Set Features, then a minute of commands, Keep Alives and idle gaps: both controllers stay, no
// expiry is counted and every queue answers. The warning check in test/fixtures/process-warnings.ts fails the file on
// a TimeoutOverflowWarning as well.
import { Buffer } from 'node:buffer';
import { afterEach, describe, expect, it } from 'vitest';
import { AdminOpcode, FeatureId } from '../../../protocol/index.js';
import { adminCmd, bringUpAdmin, connectIo, expectOk, readCmd, setFeatures, startTarget, writeCmd, type Harness, type RawPeer } from './fixture.js';

const LONG_KATO_MS = 3_448_883_000;
/** How long the hosts keep going: the "a minute of commands and keep-alives". */
const RUN_MS = 60_000;

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function getKato(admin: RawPeer): Promise<number> {
  const r = expectOk(await admin.command(adminCmd(AdminOpcode.GET_FEATURES, { cdw10: FeatureId.KATO })));
  return r.cqe?.dw0 ?? -1;
}

/** One round of traffic: a Keep Alive on the admin queue, a write and its read back on the I/O queue. */
async function round(admin: RawPeer, io: RawPeer, lba: number, tag: number): Promise<void> {
  expectOk(await admin.command(adminCmd(AdminOpcode.KEEP_ALIVE)));
  const data = Buffer.alloc(512, tag & 0xff);
  expectOk(await io.command(writeCmd(1, BigInt(lba), 1), { data }));
  const r = expectOk(await io.command(readCmd(1, BigInt(lba), 1)));
  expect(r.data.equals(data)).toBe(true);
}

describe('KATO past 2^31−1 ms on real sockets', () => {
  it(
    `a controller with KATO ${LONG_KATO_MS} ms (from Connect and from Set Features) lives through a minute of traffic and idle`,
    async () => {
      h = await startTarget();
      const viaConnect = await h.peer();
      const cntlidA = await bringUpAdmin(viaConnect, { kato: LONG_KATO_MS });
      const ioA = await h.peer();
      expectOk(await connectIo(ioA, cntlidA, 1));

      const viaSet = await h.peer();
      const cntlidB = await bringUpAdmin(viaSet, { kato: 5000 });
      const ioB = await h.peer();
      expectOk(await connectIo(ioB, cntlidB, 1));
      expectOk(await viaSet.command(setFeatures(FeatureId.KATO, LONG_KATO_MS)));

      // A whole number of seconds already: kept as sent.
      expect(await getKato(viaConnect)).toBe(LONG_KATO_MS);
      expect(await getKato(viaSet)).toBe(LONG_KATO_MS);

      const end = Date.now() + RUN_MS;
      let rounds = 0;
      while (Date.now() < end) {
        await Promise.all([round(viaConnect, ioA, rounds % 1024, rounds), round(viaSet, ioB, 1024 + (rounds % 1024), rounds)]);
        rounds++;
        // Idle gaps of up to 2 s: with the clamped timer a controller went at the first idle millisecond.
        await new Promise((r) => setTimeout(r, 250 + (rounds % 8) * 250));
      }
      expect(rounds).toBeGreaterThan(20);
      expect(h.svc.stats().katoExpiries).toBe(0);
      const live = h.svc.listControllers().filter((c) => !c.discovery);
      expect(live.map((c) => c.cntlid).sort()).toEqual([cntlidA, cntlidB].sort());
      for (const c of live) expect(c.queues.map((q) => q.qid).sort()).toEqual([0, 1]);
    },
    RUN_MS + 30_000,
  );
});
