// The target receives into one reused buffer (connection/user-buffer-socket.ts): every byte a command keeps
// past the read that delivered it must be copied. Writes (in-capsule and R2T/H2CData, with and without data digest,
// RAM and file namespaces) arrive split across many tiny TCP writes, pipelined and interleaved with reads; reading
// everything back must return exactly what was written.
import { Buffer } from 'node:buffer';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setImmediate as tick } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { PduType, encodePdu, type Pdu } from '../../../protocol/index.js';
import type { NamespaceConfig } from '../../../target/model/config.js';
import { bringUpAdmin, connectIo, defaultSubsystem, expectOk, readCmd, startTarget, writeCmd, type Harness, type RawPeer } from './fixture.js';

let h: Harness | undefined;
let tmp: string | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
  if (tmp !== undefined) await fs.rm(tmp, { recursive: true, force: true });
  tmp = undefined;
});

/** Region i: LBAs i*32 .. i*32+31 (16 KiB of 512-byte blocks). */
const REGION_LBAS = 32;
const REGION = REGION_LBAS * 512;

function pattern(seed: number, len: number): Buffer {
  const b = Buffer.alloc(len);
  let x = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < len; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x & 0xff;
  }
  return b;
}

/** Send `bufs` in pieces of 1..61 bytes, yielding to the event loop every few pieces so the target sees many reads. */
async function sendTiny(io: RawPeer, bufs: readonly Buffer[], rnd: () => number): Promise<void> {
  const all = Buffer.concat(bufs);
  let off = 0;
  let n = 0;
  while (off < all.length) {
    const len = Math.min(all.length - off, 1 + Math.floor(rnd() * 61));
    io.sendRaw(Buffer.from(all.subarray(off, off + len)));
    off += len;
    if (++n % 4 === 0) await tick();
  }
}

interface Pending {
  kind: 'read' | 'write';
  data: Buffer;
  got: Buffer[];
}

async function scenario(ns: NamespaceConfig, ddgst: boolean): Promise<void> {
  h = await startTarget({ subsystems: [defaultSubsystem({ namespaces: [ns] })] });
  const admin = await h.peer();
  const cntlid = await bringUpAdmin(admin);
  const io = await h.peer();
  await io.ic({ ddgst });
  expectOk(await connectIo(io, cntlid, 1, { digests: { ddgst } }));
  let seed = 12345;
  const rnd = (): number => {
    seed = (seed * 1103515245 + 12345) >>> 0;
    return seed / 0x1_0000_0000;
  };
  // Regions 0..7 written plainly first: the reads in the mixed phase read them while regions 8..31 are written.
  const expected = new Map<number, Buffer>();
  for (let r = 0; r < 8; r++) {
    const d = pattern(r + 1000, REGION);
    expectOk(await io.command(writeCmd(1, BigInt(r * REGION_LBAS), REGION_LBAS), { data: d }));
    expected.set(r, d);
  }
  const pending = new Map<number, Pending>();
  for (let batch = 0; batch < 4; batch++) {
    // Six writes (alternating in-capsule 4 KiB / 8 KiB and R2T 16 KiB) and two reads per batch, all outstanding.
    for (let k = 0; k < 8; k++) {
      const region = 8 + batch * 6 + k;
      let sqe: Buffer;
      let p: Pending;
      let inCapsule: Buffer[] = [];
      if (k >= 6) {
        const r = (batch * 2 + k) % 8;
        sqe = readCmd(1, BigInt(r * REGION_LBAS), REGION_LBAS);
        p = { kind: 'read', data: expected.get(r) as Buffer, got: [] };
      } else if (k % 2 === 0) {
        const len = k === 2 ? 8192 : 4096;
        const d = pattern(region, len);
        sqe = writeCmd(1, BigInt(region * REGION_LBAS), len / 512, { inCapsule: true });
        inCapsule = [d];
        p = { kind: 'write', data: d, got: [] };
        expected.set(region, Buffer.concat([d, Buffer.alloc(REGION - len)]));
      } else {
        const d = pattern(region, REGION);
        sqe = writeCmd(1, BigInt(region * REGION_LBAS), REGION_LBAS);
        p = { kind: 'write', data: d, got: [] };
        expected.set(region, d);
      }
      pending.set(sqe.readUInt16LE(2), p);
      await sendTiny(io, encodePdu({ type: PduType.CAPSULE_CMD, sqe, data: inCapsule }, io.framing), rnd);
    }
    while (pending.size > 0) {
      const pdu: Pdu = await io.nextPdu();
      if (pdu.type === PduType.R2T) {
        const p = pending.get(pdu.cccid);
        expect(p?.kind).toBe('write');
        const d = (p as Pending).data;
        // Three H2CData PDUs of uneven sizes for the one R2T.
        const cuts = [pdu.r2to, pdu.r2to + 5000, pdu.r2to + 11111, pdu.r2to + pdu.r2tl];
        const out: Buffer[] = [];
        for (let i = 0; i < 3; i++) {
          const a = cuts[i] as number;
          const b = cuts[i + 1] as number;
          out.push(...encodePdu({ type: PduType.H2C_DATA, cccid: pdu.cccid, ttag: pdu.ttag, datao: a, last: i === 2, data: [d.subarray(a, b)] }, io.framing));
        }
        await sendTiny(io, out, rnd);
      } else if (pdu.type === PduType.C2H_DATA) {
        pending.get(pdu.cccid)?.got.push(...pdu.data.map((b) => Buffer.from(b)));
      } else if (pdu.type === PduType.CAPSULE_RESP) {
        const cid = pdu.cqe.readUInt16LE(12);
        expect(pdu.cqe.readUInt16LE(14) >> 1).toBe(0);
        const p = pending.get(cid);
        expect(p).toBeDefined();
        if (p?.kind === 'read') expect(Buffer.concat(p.got).equals(p.data)).toBe(true);
        pending.delete(cid);
      } else {
        throw new Error(`unexpected PDU type ${pdu.type}`);
      }
    }
  }
  expect(io.readerFatal).toBeUndefined();
  for (const [r, d] of expected) {
    const got = expectOk(await io.command(readCmd(1, BigInt(r * REGION_LBAS), REGION_LBAS)));
    expect(got.data.equals(d), `region ${r}`).toBe(true);
  }
}

describe('writes split across many tiny TCP segments (reused receive buffer)', () => {
  for (const ddgst of [false, true]) {
    it(`RAM namespace, data digest ${ddgst ? 'on' : 'off'}`, async () => {
      await scenario({ nsid: 1, backend: { type: 'ram', size: '4M' } }, ddgst);
    });
    it(`file namespace, data digest ${ddgst ? 'on' : 'off'}`, async () => {
      tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'nvme-ts-frag-'));
      await scenario({ nsid: 1, backend: { type: 'file', path: path.join(tmp, 'ns1.img'), size: '4M' } }, ddgst);
    });
  }
});
