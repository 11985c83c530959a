// Data digests from the RAM backend's block-CRC cache, end to end: every C2HData digest matches its bytes (the raw
// peer's reader checks them and fails on a mismatch), including when a write to the same blocks arrives in the same
// TCP segment right behind the read (copy-on-write keeps the queued read data as it was).
import { Buffer } from 'node:buffer';
import { afterEach, describe, expect, it } from 'vitest';
import { PduType, encodePdu, type Pdu } from '../../../protocol/index.js';
import { bringUpAdmin, connectIo, expectOk, readCmd, startTarget, writeCmd, type Harness } from './fixture.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('data digests with the RAM block-CRC cache', () => {
  it('aligned and unaligned reads carry correct digests; a write queued behind a read does not change its data', async () => {
    h = await startTarget();
    const admin = await h.peer();
    const cntlid = await bringUpAdmin(admin);
    const io = await h.peer();
    await io.ic({ ddgst: true });
    expectOk(await connectIo(io, cntlid, 1, { digests: { ddgst: true } }));
    const old = Buffer.alloc(64 * 1024);
    for (let i = 0; i < old.length; i++) old[i] = (i * 7) & 0xff;
    expectOk(await io.command(writeCmd(1, 0n, 128), { data: old, inCapsule: false }));
    // Aligned 4 KiB multiples (cached CRCs), then an unaligned 512-byte-LBA range (direct CRC).
    for (const [slba, nlb] of [[0, 8], [8, 120], [1, 3], [5, 100]] as const) {
      const r = expectOk(await io.command(readCmd(1, BigInt(slba), nlb)));
      expect(r.data.equals(old.subarray(slba * 512, (slba + nlb) * 512))).toBe(true);
    }
    // Read of blocks 0..127 and, in the same segment, an in-capsule write of new bytes over blocks 8..15.
    const fresh = Buffer.alloc(4096, 0xee);
    const rd = readCmd(1, 0n, 128);
    const wr = writeCmd(1, 8n, 8, { inCapsule: true });
    const rdCid = rd.readUInt16LE(2);
    io.sendRaw(Buffer.concat([...encodePdu({ type: PduType.CAPSULE_CMD, sqe: rd, data: [] }, io.framing), ...encodePdu({ type: PduType.CAPSULE_CMD, sqe: wr, data: [fresh] }, io.framing)]));
    const got: Buffer[] = [];
    let resps = 0;
    while (resps < 2) {
      const p: Pdu = await io.nextPdu();
      if (p.type === PduType.C2H_DATA && p.cccid === rdCid) got.push(Buffer.concat(p.data));
      if (p.type === PduType.CAPSULE_RESP) {
        expect(p.cqe.readUInt16LE(14) >> 1).toBe(0);
        resps++;
      }
    }
    // The read executed before the write: it returns the old bytes, with a digest that matched (no reader fatal).
    expect(Buffer.concat(got).equals(old)).toBe(true);
    expect(io.readerFatal).toBeUndefined();
    const after = expectOk(await io.command(readCmd(1, 8n, 8)));
    expect(after.data.equals(fresh)).toBe(true);
  });
});
