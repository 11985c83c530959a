// PduBatch must produce exactly encodePdu's bytes (one encoder), whatever the batching, and reuse its memory only
// once the writer is done with it.
import { Buffer } from 'node:buffer';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Lent, PDU_MAX_HEADER_BYTES, PduType, encodePdu, encodePduInto, type Pdu, type PduFraming } from '../protocol/index.js';
import { CASES, FR } from '../protocol/testing/pdu-cases.js';
import { PduBatch, type Completion } from './pdu-batch.js';

/** c2hMax that never splits. */
const ONE_PDU = 1 << 30;
const completion = (cid: number, status: number, dw0: number, dw1: number, sqhd: number, out?: Buffer[], outLent: Lent = Lent.TASK): Completion => ({ cid, status, dw0, dw1, sqhd, out, outLent, outCrc: undefined });
/** A CapsuleResp row's CQE as a completion record without data (phase bit 0) and its SQID. */
const cqeCompletion = (c: Buffer): [Completion, number] => [completion(c.readUInt16LE(12), c.readUInt16LE(14) >> 1, c.readUInt32LE(0), c.readUInt32LE(4), c.readUInt16LE(8)), c.readUInt16LE(10)];

const framingArb: fc.Arbitrary<PduFraming> = fc.record({ hdgst: fc.boolean(), ddgst: fc.boolean(), pda: fc.constantFrom(0, 0, 1, 7) });
const dataArb = fc.array(fc.uint8Array({ minLength: 0, maxLength: 3000 }).map((a) => Buffer.from(a)), { maxLength: 3 });

const pduArb: fc.Arbitrary<Pdu> = fc.oneof(
  fc.record({ cccid: fc.integer({ min: 0, max: 0xffff }), datao: fc.nat(), last: fc.boolean(), success: fc.boolean(), data: dataArb }).map((p): Pdu => ({ type: PduType.C2H_DATA, ...p, success: p.success && p.last })),
  fc.uint8Array({ minLength: 16, maxLength: 16 }).map((cqe): Pdu => ({ type: PduType.CAPSULE_RESP, cqe: Buffer.from(cqe) })),
  fc.record({ cccid: fc.integer({ min: 0, max: 0xffff }), ttag: fc.integer({ min: 0, max: 0xffff }), r2to: fc.nat(), r2tl: fc.integer({ min: 1, max: 1 << 20 }) }).map((p): Pdu => ({ type: PduType.R2T, ...p })),
  fc.record({ cpda: fc.integer({ min: 0, max: 31 }), dgst: fc.integer({ min: 0, max: 3 }), maxh2cdata: fc.integer({ min: 4096, max: 1 << 20 }) }).map((p): Pdu => ({ type: PduType.IC_RESP, pfv: 0, ...p })),
  fc.record({ fes: fc.integer({ min: 1, max: 6 }), fei: fc.nat(), e: fc.uint8Array({ maxLength: 200 }) }).map((p): Pdu => ({ type: PduType.C2H_TERM_REQ, fes: p.fes, fei: p.fei, errorData: Buffer.from(p.e) })),
);

const expected = (pdus: Pdu[], framing: PduFraming): Buffer => Buffer.concat(pdus.flatMap((p) => encodePdu(p, framing)));

describe('PduBatch', () => {
  it('emits the bytes of encodePdu for any PDU sequence, copy threshold and payload lifetime', () => {
    fc.assert(
      fc.property(fc.array(pduArb, { minLength: 1, maxLength: 12 }), framingArb, fc.constantFrom(0, 512, 4096), fc.constantFrom(Lent.STABLE, Lent.TASK, Lent.CALL), fc.constantFrom(512, 4096, 65536), (pdus, framing, copyMax, payload, slab) => {
        const b = new PduBatch(slab, copyMax, 8192);
        for (const p of pdus) {
          if (p.type === PduType.CAPSULE_RESP) {
            // The field-wise writer cannot express a set phase bit (always 0 on NVMe/TCP): those go through add().
            const c = p.cqe;
            if ((c[14] as number) & 1) b.add(p, framing);
            else b.addCompletion(...cqeCompletion(c), false, framing, ONE_PDU);
          } else b.add(p, framing, payload);
        }
        const out = Buffer.concat(b.take());
        expect(out.equals(expected(pdus, framing))).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('does not overwrite chunks the writer still holds, and reuses the slab once released', () => {
    const framing: PduFraming = { hdgst: false, ddgst: true, pda: 0 };
    const resp = (n: number): Pdu => ({ type: PduType.CAPSULE_RESP, cqe: Buffer.alloc(16, n) });
    const b = new PduBatch(1024);
    b.add(resp(1), framing);
    const first = b.take().map((c) => c);
    const firstBytes = Buffer.concat(first);
    expect(b.recycle(true)).toBeUndefined();
    for (let i = 2; i < 200; i++) b.add(resp(i), framing);
    const second = Buffer.concat(b.take());
    // Still-referenced bytes survive: new PDUs went after them or into a fresh slab.
    expect(Buffer.concat(first).equals(firstBytes)).toBe(true);
    expect(second.length).toBe(198 * 24);
    const release = b.recycle(true);
    expect(typeof release).toBe('function');
    release?.();
    b.recycle(false);
    b.add(resp(9), framing);
    const third = b.take();
    expect(Buffer.concat(third).equals(Buffer.concat(encodePdu(resp(9), framing)))).toBe(true);
  });

  it('snapshots C2HData payloads: the digest and bytes sent do not change when the source buffer does', () => {
    const framing: PduFraming = { hdgst: false, ddgst: true, pda: 0 };
    for (const size of [4096, 65536]) {
      const src = Buffer.alloc(size, 0xaa);
      const want = Buffer.concat(encodePdu({ type: PduType.C2H_DATA, cccid: 1, datao: 0, last: true, success: false, data: [Buffer.from(src)] }, framing));
      const b = new PduBatch(64 * 1024, 0, 128 * 1024);
      b.add({ type: PduType.C2H_DATA, cccid: 1, datao: 0, last: true, success: false, data: [src] }, framing, Lent.CALL);
      src.fill(0x55);
      expect(Buffer.concat(b.take()).equals(want)).toBe(true);
    }
  });
  it('copies a payload lent TASK at take() (the source is lent until then) and one lent CALL at the call', () => {
    const framing: PduFraming = { hdgst: false, ddgst: false, pda: 0 };
    const c2h = (cccid: number, src: Buffer): Pdu & { type: typeof PduType.C2H_DATA } => ({ type: PduType.C2H_DATA, cccid, datao: 0, last: true, success: false, data: [src] });
    // 4 KiB sources at odd offsets (spanning two pages, as RAM namespace blocks do).
    const mem = Buffer.alloc(64 * 1024);
    const srcs = [0, 1, 2].map((i) => mem.subarray(100 + i * 9000, 100 + i * 9000 + 4096).fill(i + 1));
    const b = new PduBatch(256 * 1024, 4096);
    b.add(c2h(0, srcs[0] as Buffer), framing, Lent.TASK);
    b.add(c2h(1, srcs[1] as Buffer), framing, Lent.CALL);
    b.add(c2h(2, srcs[2] as Buffer), framing, Lent.TASK);
    const atCall = srcs.map((s) => Buffer.from(s));
    for (const s of srcs) s.fill(0xee);
    const chunks = b.take();
    // One contiguous chunk: all three payloads went into the slab.
    expect(chunks.length).toBe(1);
    const want = [c2h(0, srcs[0] as Buffer), c2h(1, atCall[1] as Buffer), c2h(2, srcs[2] as Buffer)];
    expect(Buffer.concat(chunks).equals(Buffer.concat(want.flatMap((p) => encodePdu(p, framing))))).toBe(true);
    b.recycle(false);
  });

  it('writes completions (addCompletion) as the C2HData and CapsuleResp bytes of the spec', () => {
    const b = new PduBatch(4096, 4096);
    const data = Buffer.from([1, 2, 3, 4, 5, 6, 7, 8]);
    const plain: PduFraming = { hdgst: false, ddgst: false, pda: 0 };
    b.addCompletion(completion(0x1234, 0, 0x11223344, 0x55667788, 5, [data]), 2, true, plain, ONE_PDU);
    b.addCompletion(completion(0xbeef, 0, 0, 0, 0xffff, [data.subarray(0, 4)]), 2, true, plain, ONE_PDU);
    // An error status: the CapsuleResp alone, whatever data the command had.
    b.addCompletion(completion(0x0102, 0x4002, 0, 0, 6, [data]), 2, true, plain, ONE_PDU);
    // Built by hand from NVMe-TCP 1.0 §3.6.2.9 (C2HData: LAST 04h, SUCCESS 08h, HLEN = PDO = 24) and §3.6.2.7:
    // SUCCESS only where Dwords 0 and 1 are 0 (and SQ flow control is disabled), replacing the CapsuleResp.
    const want = Buffer.from([
      0x07, 0x04, 24, 24, 32, 0, 0, 0, 0x34, 0x12, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0,
      1, 2, 3, 4, 5, 6, 7, 8,
      0x05, 0x00, 24, 0, 24, 0, 0, 0, 0x44, 0x33, 0x22, 0x11, 0x88, 0x77, 0x66, 0x55, 5, 0, 2, 0, 0x34, 0x12, 0, 0,
      0x07, 0x0c, 24, 24, 28, 0, 0, 0, 0xef, 0xbe, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0,
      1, 2, 3, 4,
      0x05, 0x00, 24, 0, 24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 2, 0, 0x02, 0x01, 0x04, 0x80,
    ]);
    expect(b.bytes).toBe(want.length);
    expect(b.copied).toBe(12);
    expect(Buffer.concat(b.take()).equals(want)).toBe(true);
    b.recycle(false);
  });

  it('splits a completion larger than c2hMax into C2HData PDUs at increasing DATAO, SUCCESS on the last only', () => {
    fc.assert(
      fc.property(
        framingArb,
        fc.array(fc.uint8Array({ minLength: 1, maxLength: 3000 }).map((a) => Buffer.from(a)), { minLength: 1, maxLength: 4 }),
        fc.constantFrom(512, 1000, 4096),
        fc.constantFrom(Lent.STABLE, Lent.TASK, Lent.CALL),
        fc.boolean(),
        (framing, out, max, lent, sqflowDisabled) => {
          const b = new PduBatch(4096, 2048);
          b.addCompletion(completion(9, 0, 0, 0, 3, out, lent), 1, sqflowDisabled, framing, max);
          const all = Buffer.concat(out);
          const want: Buffer[] = [];
          for (let o = 0; o < all.length; o += max) {
            const last = o + max >= all.length;
            want.push(...encodePdu({ type: PduType.C2H_DATA, cccid: 9, datao: o, last, success: last && sqflowDisabled, data: [all.subarray(o, Math.min(all.length, o + max))] }, framing));
          }
          const cqe = Buffer.alloc(16);
          cqe.writeUInt16LE(3, 8);
          cqe.writeUInt16LE(1, 10);
          cqe.writeUInt16LE(9, 12);
          if (!sqflowDisabled) want.push(...encodePdu({ type: PduType.CAPSULE_RESP, cqe }, framing));
          expect(b.bytes).toBe(Buffer.concat(want).length);
          expect(Buffer.concat(b.take()).equals(Buffer.concat(want))).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('emits add() + CapsuleResp bytes for completions lent TASK in any batch, the payload copied at take() or at a rollover', () => {
    const reply = fc.record({
      data: fc.uint8Array({ minLength: 1, maxLength: 5000 }).map((a) => Buffer.from(a)),
      success: fc.boolean(),
      dw0: fc.constantFrom(0, 0, 7, 0xffffffff),
      dw1: fc.constantFrom(0, 0, 9),
      sqhd: fc.integer({ min: 0, max: 0xffff }),
      sqid: fc.integer({ min: 0, max: 0xffff }),
      cid: fc.integer({ min: 0, max: 0xffff }),
      status: fc.constantFrom(0, 0, 0, 1, 0x7fff),
    });
    const plain: PduFraming = { hdgst: false, ddgst: false, pda: 0 };
    fc.assert(
      fc.property(fc.array(reply, { minLength: 1, maxLength: 10 }), fc.constantFrom(512, 4096, 65536), (replies, slab) => {
        const b = new PduBatch(slab, 8192);
        const want: Buffer[] = [];
        for (const r of replies) {
          b.addCompletion(completion(r.cid, r.status, r.dw0, r.dw1, r.sqhd, [r.data]), r.sqid, r.success, plain, ONE_PDU);
          const cqe = Buffer.alloc(16);
          cqe.writeUInt32LE(r.dw0, 0);
          cqe.writeUInt32LE(r.dw1, 4);
          cqe.writeUInt16LE(r.sqhd, 8);
          cqe.writeUInt16LE(r.sqid, 10);
          cqe.writeUInt16LE(r.cid, 12);
          cqe.writeUInt16LE(r.status << 1, 14);
          const success = r.success && r.status === 0 && r.dw0 === 0 && r.dw1 === 0;
          if (r.status === 0) want.push(...encodePdu({ type: PduType.C2H_DATA, cccid: r.cid, datao: 0, last: true, success, data: [Buffer.from(r.data)] }, plain));
          if (!success) want.push(...encodePdu({ type: PduType.CAPSULE_RESP, cqe }, plain));
        }
        // Lent until take(): what the sources hold then is what goes out.
        for (const r of replies) r.data[0] = (r.data[0] as number) ^ 0xff;
        const got = Buffer.concat(b.take());
        for (const r of replies) r.data[0] = (r.data[0] as number) ^ 0xff;
        // A reply is copied at take(), or earlier when a later reply rolled the slab over (#room copies what is
        // pending then): so the replies that went out with the changed byte are those after the last rollover, a
        // suffix that always holds the last reply with data.
        let o = 0;
        const atTake: boolean[] = [];
        for (const r of replies) {
          if (r.status !== 0) {
            o += 24;
            continue;
          }
          const at = o + 24;
          const orig = r.data[0] as number;
          expect([orig, orig ^ 0xff]).toContain(got[at]);
          atTake.push(got[at] !== orig);
          got[at] = orig;
          o = at + r.data.length + (r.success && r.dw0 === 0 && r.dw1 === 0 ? 0 : 24);
        }
        if (atTake.length > 0) {
          expect(atTake[atTake.length - 1]).toBe(true);
          expect(atTake.slice(atTake.indexOf(true)).every((x) => x)).toBe(true);
        }
        expect(got.equals(Buffer.concat(want))).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('a read reply that rolls the slab over copies the replies pending before it then, and itself at take()', () => {
    // The case fast-check found: ten small replies, 513 bytes, in a batch of 512-byte slabs.
    const sizes = [1, 1, 1, 1, 1, 5, 12, 2, 7, 2];
    const b = new PduBatch(512, 4096);
    const data = sizes.map((n) => Buffer.alloc(n));
    for (const d of data) b.addCompletion(completion(0, 0, 0, 0, 0, [d]), 0, false, { hdgst: false, ddgst: false, pda: 0 }, ONE_PDU);
    for (const d of data) d[0] = 0xff;
    const got = Buffer.concat(b.take());
    expect(got.length).toBe(sizes.reduce((t, n) => t + 48 + n, 0));
    let o = 0;
    const first: number[] = [];
    for (const n of sizes) {
      first.push(got[o + 24] as number);
      o += 48 + n;
    }
    expect(first).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff]);
    b.recycle(false);
  });

  it('writes a completion under any framing as encodePdu writes its C2HData and CapsuleResp', () => {
    fc.assert(
      fc.property(
        framingArb,
        fc.uint8Array({ minLength: 1, maxLength: 5000 }).map((a) => Buffer.from(a)),
        fc.boolean(),
        fc.integer({ min: 0, max: 0xffff }),
        fc.constantFrom(0, 0, 1, 0x7fff),
        fc.constantFrom(0, 7),
        fc.constantFrom(512, 4096, 65536),
        (framing, data, sqflowDisabled, cid, status, dw, slab) => {
          const b = new PduBatch(slab, 4096);
          b.addCompletion(completion(cid, status, dw, dw, 3, [data]), 1, sqflowDisabled, framing, ONE_PDU);
          const cqe = Buffer.alloc(16);
          cqe.writeUInt32LE(dw, 0);
          cqe.writeUInt32LE(dw, 4);
          cqe.writeUInt16LE(3, 8);
          cqe.writeUInt16LE(1, 10);
          cqe.writeUInt16LE(cid, 12);
          cqe.writeUInt16LE(status << 1, 14);
          const success = sqflowDisabled && status === 0 && dw === 0;
          const want = status === 0 ? [...encodePdu({ type: PduType.C2H_DATA, cccid: cid, datao: 0, last: true, success, data: [data] }, framing)] : [];
          if (!success) want.push(...encodePdu({ type: PduType.CAPSULE_RESP, cqe }, framing));
          expect(b.bytes).toBe(Buffer.concat(want).length);
          expect(Buffer.concat(b.take()).equals(Buffer.concat(want))).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('counts the payload bytes copied into the slab (adaptive copy budget), not views, and resets on take', () => {
    const framing: PduFraming = { hdgst: false, ddgst: false, pda: 0 };
    const c2h = (n: number): Pdu & { type: typeof PduType.C2H_DATA } => ({ type: PduType.C2H_DATA, cccid: 1, datao: 0, last: true, success: false, data: [Buffer.alloc(n, 1)] });
    const b = new PduBatch(256 * 1024);
    b.add(c2h(4096), framing, Lent.CALL);
    b.add(c2h(512), framing, Lent.STABLE);
    b.add(c2h(1000), framing, Lent.TASK);
    expect(b.copied).toBe(5096);
    // One copied payload after another stays one contiguous chunk; the view in between cuts it.
    expect(b.take().length).toBe(3);
    expect(b.copied).toBe(0);
    b.recycle(false);
  });
});

describe('encodePduInto', () => {
  it('writes the same header encodePdu returns first', () => {
    fc.assert(
      fc.property(pduArb, framingArb, fc.nat({ max: 64 }), (pdu, framing, off) => {
        const dst = Buffer.alloc(off + PDU_MAX_HEADER_BYTES, 0xee);
        const n = encodePduInto(dst, off, pdu, framing);
        const head = encodePdu(pdu, framing)[0] as Buffer;
        expect(dst.subarray(off, off + n).equals(head)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});

describe('PduBatch over the codec table (protocol/testing/pdu-cases.ts)', () => {
  it.each([0, 64, 1 << 20])('PduBatch.add of every table row, copyMax %i, one take()', (copyMax) => {
    const batch = new PduBatch(4096, copyMax);
    for (const c of CASES) batch.add(c.fields, c.framing);
    const want = Buffer.concat(CASES.map((c) => c.bytes));
    expect(batch.bytes).toBe(want.length);
    expect(Buffer.concat(batch.take()).toString('hex')).toBe(want.toString('hex'));
  });

  it('PduBatch.add writes every byte of every row over a reused slab full of garbage (reserved bytes, padding)', () => {
    // Fill the slab with 0xee through a copied payload, then recycle it: the next batch starts at the same bytes.
    const junk: Pdu = { type: PduType.H2C_DATA, cccid: 1, ttag: 1, datao: 0, last: true, data: [Buffer.alloc(32 * 1024, 0xee)] };
    const copying = new PduBatch(64 * 1024, 1 << 20);
    copying.add(junk, FR.plain);
    copying.take();
    copying.recycle(false);
    for (const c of CASES) copying.add(c.fields, c.framing);
    expect(Buffer.concat(copying.take()).toString('hex')).toBe(Buffer.concat(CASES.map((c) => c.bytes)).toString('hex'));
  });

  it.each([Lent.STABLE, Lent.TASK, Lent.CALL])('PduBatch.add of C2HData (lent %i) and addCompletion match the table', (payload) => {
    const rows = CASES.filter((c) => c.fields.type === PduType.C2H_DATA || c.fields.type === PduType.CAPSULE_RESP);
    expect(rows.length).toBeGreaterThan(10);
    for (const copyMax of [0, 1 << 20]) {
      const batch = new PduBatch(8192, copyMax);
      for (const c of rows) {
        if (c.fields.type === PduType.C2H_DATA) batch.add(c.fields, c.framing, payload);
        else if (c.fields.type === PduType.CAPSULE_RESP) {
          const q = c.fields.cqe;
          // The field-wise writer sends the phase bit as 0 (NVMe/TCP); a row with it set goes through add().
          if ((q[14] as number) & 1) batch.add(c.fields, c.framing);
          else batch.addCompletion(...cqeCompletion(q), false, c.framing, ONE_PDU);
        }
      }
      expect(Buffer.concat(batch.take()).toString('hex')).toBe(Buffer.concat(rows.map((c) => c.bytes)).toString('hex'));
    }
  });

  it('PduBatch reuses its slab only after recycle(false), never under bytes still being written', () => {
    const batch = new PduBatch(4096, 1 << 20);
    const a = CASES.find((c) => c.name === 'CapsuleResp [both]');
    const b = CASES.find((c) => c.name === 'R2T [hd]');
    if (a === undefined || b === undefined) throw new Error('table rows missing');
    batch.add(a.fields, a.framing);
    // take() returns the batch's own array (valid until the next add), so keep a copy of the chunk list.
    const first = [...batch.take()];
    const firstHex = Buffer.concat(first).toString('hex');
    batch.recycle(true);
    batch.add(b.fields, b.framing);
    expect(Buffer.concat(first).toString('hex')).toBe(firstHex);
    expect(Buffer.concat(batch.take()).toString('hex')).toBe(b.bytes.toString('hex'));
    batch.recycle(false);
    batch.add(a.fields, a.framing);
    expect(Buffer.concat(batch.take()).toString('hex')).toBe(a.bytes.toString('hex'));
  });

});
