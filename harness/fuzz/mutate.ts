// PDU mutation engine for the target fuzzer: a seeded PRNG, seed PDUs from the Linux captures (test/fixtures/captures),
// "structured" mutations that keep the common header valid so the bytes reach the command parsers, and "raw"
// mutations/garbage that attack the framing itself (NVMe/TCP 1.0 §3.6.2: CH, PSH, HDGST, PAD, DATA, DDGST).
import { Buffer } from 'node:buffer';
import { CH_SIZE, PduFlag, PduType, SglOffset, SqeOffset, crc32c } from '../../protocol/index.js';
import { loadAllConnections } from '../../test/fixtures/load.js';

/** mulberry32: small, fast, reproducible from a 32-bit seed. */
export class Rng {
  #s: number;
  constructor(seed: number) {
    this.#s = seed >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    let t = (this.#s = (this.#s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** Integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(a: readonly T[]): T {
    if (a.length === 0) throw new Error('pick from empty list');
    return a[this.int(a.length)] as T;
  }
  bytes(n: number): Buffer {
    const b = Buffer.allocUnsafe(n);
    for (let i = 0; i < n; i++) b[i] = this.int(256);
    return b;
  }
  u32(): number {
    return (this.int(0x10000) * 0x10000 + this.int(0x10000)) >>> 0;
  }
}

/** Values that sit on boundaries of length, index and count fields. */
const INTERESTING_8 = [0x00, 0x01, 0x7f, 0x80, 0xff, 0x02, 0x18, 0x48] as const;
const INTERESTING_16 = [0x0000, 0x0001, 0x00ff, 0x0100, 0x7fff, 0x8000, 0xfffe, 0xffff, 0x0018, 0x0048] as const;
const INTERESTING_32 = [0, 1, 8, 24, 72, 128, 4095, 4096, 4097, 8192, 131072, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff] as const;

export type SeedRole = 'admin' | 'io' | 'discovery' | 'connect';

/** One captured host→controller PDU without digests, split into header (CH + PSH) and data. */
export interface SeedPdu {
  role: SeedRole;
  type: number;
  header: Buffer;
  data: Buffer;
}

export interface Corpus {
  admin: SeedPdu[];
  io: SeedPdu[];
  discovery: SeedPdu[];
  connect: SeedPdu[];
  all: SeedPdu[];
}

/** Seed PDUs: every h2c PDU of the digest-free captures except ICReq (the fuzzer builds its own prefixes). */
export async function loadCorpus(): Promise<Corpus> {
  const conns = await loadAllConnections();
  const c: Corpus = { admin: [], io: [], discovery: [], connect: [], all: [] };
  for (const conn of conns) {
    if (conn.digests.hdgst || conn.digests.ddgst) continue;
    for (const p of conn.h2c.pdus) {
      if (p.type === PduType.IC_REQ) continue;
      const b = p.bytes;
      const hlen = b[2] as number;
      const pdo = b[3] as number;
      const plen = b.readUInt32LE(4);
      const header = Buffer.from(b.subarray(0, hlen));
      const data = plen > hlen ? Buffer.from(b.subarray(pdo === 0 ? hlen : pdo, plen)) : Buffer.alloc(0);
      const isConnect = p.type === PduType.CAPSULE_CMD && header[8] === 0x7f && header[12] === 0x01;
      const role: SeedRole = isConnect ? 'connect' : conn.role;
      const seed: SeedPdu = { role, type: p.type, header, data };
      c[role].push(seed);
      c.all.push(seed);
    }
  }
  if (c.io.length === 0 || c.admin.length === 0) throw new Error('fuzz corpus: fixtures hold no admin/io PDUs');
  return c;
}

/** Frame a header + data as a valid PDU with the connection's digests (what encodePdu would write; mutations come after). */
export function frame(header: Buffer, data: Buffer, hdgst: boolean, ddgst: boolean): Buffer {
  const hlen = header.length;
  const hd = hdgst ? 4 : 0;
  const hasData = data.length > 0;
  const dd = ddgst && hasData ? 4 : 0;
  const pdo = hasData ? hlen + hd : 0;
  const plen = hlen + hd + data.length + dd;
  const out = Buffer.alloc(plen);
  header.copy(out, 0);
  let flags = (header[1] as number) & ~(PduFlag.HDGSTF | PduFlag.DDGSTF);
  if (hdgst) flags |= PduFlag.HDGSTF;
  if (dd > 0) flags |= PduFlag.DDGSTF;
  out[1] = flags;
  out[2] = hlen;
  out[3] = pdo;
  out.writeUInt32LE(plen, 4);
  if (hdgst && hlen >= 8) out.writeUInt32LE(crc32c(out.subarray(0, hlen)), hlen);
  if (hasData) {
    data.copy(out, pdo);
    if (dd > 0) out.writeUInt32LE(crc32c(data), pdo + data.length);
  }
  return out;
}

/** Mutate bytes of a buffer in place (returns it): flips, interesting values, random runs. */
function scribble(rng: Rng, b: Buffer, from: number, to: number, rounds: number): Buffer {
  if (to <= from) return b;
  for (let r = 0; r < rounds; r++) {
    const at = from + rng.int(to - from);
    switch (rng.int(6)) {
      case 0:
        b[at] = (b[at] as number) ^ (1 << rng.int(8));
        break;
      case 1:
        b[at] = rng.pick(INTERESTING_8);
        break;
      case 2:
        if (at + 2 <= to) b.writeUInt16LE(rng.pick(INTERESTING_16), at);
        break;
      case 3:
        if (at + 4 <= to) b.writeUInt32LE(rng.pick(INTERESTING_32), at);
        break;
      case 4:
        b[at] = rng.int(256);
        break;
      default: {
        const n = Math.min(to - at, 1 + rng.int(8));
        rng.bytes(n).copy(b, at);
      }
    }
  }
  return b;
}

/** SQE field offsets inside a CapsuleCmd PDU (CH is 8 bytes, SQE 64: NVMe Base 2.0 Figure 88). */
const SQE = CH_SIZE;
const SGL = SQE + SqeOffset.dptr;
const CAPSULE_FIELDS = [
  { off: SQE + SqeOffset.opcode, size: 1 },
  { off: SQE + SqeOffset.flags, size: 1 }, // FUSE, PSDT
  { off: SQE + SqeOffset.cid, size: 2 },
  { off: SQE + SqeOffset.nsid, size: 4 },
  { off: SGL + SglOffset.address, size: 4 }, // low half
  { off: SGL + SglOffset.length, size: 4 },
  { off: SGL + SglOffset.type, size: 1 },
  { off: SQE + SqeOffset.cdw10, size: 4 }, // SLBA lo, fctype args, CNS, LID/NUMDL, FID
  { off: SQE + SqeOffset.cdw11, size: 4 },
  { off: SQE + SqeOffset.cdw12, size: 4 }, // NLB, FUA
  { off: SQE + SqeOffset.cdw13, size: 4 },
] as const;
/** H2CData PSH fields: CCCID, TTAG, DATAO, DATAL (TCP 1.0 Figure 27). */
const H2C_FIELDS = [
  { off: 8, size: 2 },
  { off: 10, size: 2 },
  { off: 12, size: 4 },
  { off: 16, size: 4 },
] as const;

/** Opcodes worth aiming at: admin, NVM and Fabrics ones the target implements, plus a few it must refuse. */
const OPCODES = [0x00, 0x01, 0x02, 0x04, 0x05, 0x06, 0x08, 0x09, 0x0a, 0x0c, 0x0d, 0x10, 0x11, 0x18, 0x7c, 0x7f, 0x80, 0x81, 0x84, 0xc0, 0xff] as const;
/** Namespaces of the fuzz target (1 RAM, 2 null, 3 file), none, broadcast and absent ones. */
const NSIDS = [1, 2, 3, 3, 0, 4, 1024, 0xffffffff, 0xfffffffe] as const;
const FCTYPES = [0x00, 0x01, 0x04, 0x05, 0x06, 0x08, 0x09, 0x0c, 0x7f, 0xff] as const;

function setField(rng: Rng, b: Buffer, off: number, size: 1 | 2 | 4): void {
  if (off + size > b.length) return;
  if (size === 1) b[off] = rng.chance(0.5) ? rng.pick(INTERESTING_8) : rng.int(256);
  else if (size === 2) b.writeUInt16LE(rng.chance(0.5) ? rng.pick(INTERESTING_16) : rng.int(0x10000), off);
  else b.writeUInt32LE(rng.chance(0.5) ? rng.pick(INTERESTING_32) : rng.u32(), off);
}

/** A mutated copy of a seed's header and data, common header left for frame() to fix up. */
export function mutateStructured(rng: Rng, seed: SeedPdu): { header: Buffer; data: Buffer } {
  const header = Buffer.from(seed.header);
  let data = Buffer.from(seed.data);
  const rounds = 1 + rng.int(3);
  for (let r = 0; r < rounds; r++) {
    const what = rng.int(10);
    if (seed.type === PduType.CAPSULE_CMD && what < 5) {
      if (what === 0) header[SQE] = rng.pick(OPCODES);
      else if (what === 1 && header[SQE] === 0x7f) header[SQE + 4] = rng.pick(FCTYPES);
      else if (what === 1) header.writeUInt32LE(rng.pick(NSIDS), SQE + 4);
      else {
        const f = rng.pick(CAPSULE_FIELDS);
        setField(rng, header, f.off, f.size as 1 | 2 | 4);
      }
    } else if (seed.type === PduType.H2C_DATA && what < 5) {
      const f = rng.pick(H2C_FIELDS);
      setField(rng, header, f.off, f.size as 1 | 2 | 4);
    } else if (what < 7) {
      scribble(rng, header, 8, header.length, 1 + rng.int(3));
    } else if (what === 7 && data.length > 0) {
      scribble(rng, data, 0, data.length, 1 + rng.int(4));
    } else if (what === 8) {
      // Resize the data: in-capsule length no longer matches the SGL, or data appears where none belongs.
      const n = rng.pick([0, 1, 4, 511, 512, 1023, 1024, 4096, 4097, 8192, 8193, 16384, 16385]);
      data = n <= data.length ? data.subarray(0, n) : Buffer.concat([data, rng.bytes(n - data.length)]);
    } else if (seed.type !== PduType.CAPSULE_CMD || rng.chance(0.1)) {
      // Flip PDU-specific flags: LAST_PDU/SUCCESS (H2CData), digest or reserved bits (fatal on a capsule).
      header[1] = (header[1] as number) ^ (rng.chance(0.8) ? rng.pick([0x04, 0x08]) : 1 << rng.int(8));
    } else {
      scribble(rng, header, SQE, header.length, 1);
    }
  }
  return { header, data };
}

/** Framing attacks on an already framed PDU: CH fields, truncation, garbage tails, splices. */
function mutateRaw(rng: Rng, pdu: Buffer, other: Buffer): Buffer {
  switch (rng.int(9)) {
    case 0:
      return scribble(rng, Buffer.from(pdu), 0, Math.min(8, pdu.length), 1 + rng.int(2));
    case 1: {
      const b = Buffer.from(pdu);
      if (b.length >= 8) b.writeUInt32LE(rng.pick(INTERESTING_32), 4);
      return b;
    }
    case 2: {
      const b = Buffer.from(pdu);
      b[rng.int(4)] = rng.pick(INTERESTING_8);
      return b;
    }
    case 3:
      return pdu.subarray(0, rng.int(pdu.length));
    case 4:
      return Buffer.concat([pdu, rng.bytes(1 + rng.int(64))]);
    case 5:
      return Buffer.concat([pdu.subarray(0, rng.int(pdu.length + 1)), other.subarray(rng.int(other.length + 1))]);
    case 6:
      return scribble(rng, Buffer.from(pdu), 0, pdu.length, 1 + rng.int(8));
    case 7: {
      // A PDU type the controller must never receive (C2H types, reserved values).
      const b = Buffer.from(pdu);
      b[0] = rng.pick([0x01, 0x03, 0x05, 0x07, 0x09, 0x0a, 0x0b, 0x0c, 0x7f, 0xff]);
      return b;
    }
    default:
      return Buffer.concat([pdu, pdu]);
  }
}

/** Random bytes, sometimes starting with a plausible CH so the reader goes deeper before refusing. */
export function garbage(rng: Rng): Buffer {
  const b = rng.bytes(1 + rng.int(rng.chance(0.9) ? 256 : 4096));
  if (rng.chance(0.5) && b.length >= 8) {
    b[0] = rng.pick([0x00, 0x02, 0x04, 0x06]);
    b[2] = rng.pick([0x80, 0x48, 0x18, 0x08, b[2] as number]);
    b.writeUInt32LE(rng.chance(0.5) ? b.length : rng.pick(INTERESTING_32), 4);
  }
  return b;
}

/**
 * One fuzz case for a connection in the given framing. `rawRate` is the share of framing attacks and garbage, which
 * usually end the connection; the rest are valid seeds (1 in 7) and structured mutations that reach the parsers.
 */
export function makeCase(rng: Rng, seeds: readonly SeedPdu[], all: readonly SeedPdu[], hdgst: boolean, ddgst: boolean, rawRate = 0.25): Buffer {
  const seed = rng.pick(seeds);
  if (!rng.chance(rawRate)) {
    if (rng.chance(1 / 7)) return frame(seed.header, seed.data, hdgst, ddgst);
    const m = mutateStructured(rng, seed);
    return frame(m.header, m.data, hdgst, ddgst);
  }
  if (rng.chance(0.8)) {
    const other = rng.pick(all);
    return mutateRaw(rng, frame(seed.header, seed.data, hdgst, ddgst), frame(other.header, other.data, hdgst, ddgst));
  }
  return garbage(rng);
}
