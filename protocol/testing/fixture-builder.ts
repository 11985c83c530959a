/**
 * Test-only helpers: a byte builder that sets little-endian values at explicit offsets (so expected
 * bytes never come from the encoders under test), and a reader for the captured PDU fixtures of
 * test/fixtures/captures (parsed JSON in, typed PDUs out). Not exported from index.ts.
 */
import { Buffer } from 'node:buffer';

/** Builds a buffer byte by byte; every write names its offset, straight from the spec tables. */
export class Bytes {
  readonly buf: Buffer;

  constructor(size: number) {
    this.buf = Buffer.alloc(size);
  }

  /** Unsigned little-endian integer of `width` bytes, one byte at a time. */
  uint(off: number, width: number, v: number | bigint): this {
    let x = BigInt(v);
    for (let i = 0; i < width; i++) {
      this.buf[off + i] = Number(x & 0xffn);
      x >>= 8n;
    }
    return this;
  }

  u8(off: number, v: number): this {
    return this.uint(off, 1, v);
  }

  u16(off: number, v: number): this {
    return this.uint(off, 2, v);
  }

  u24(off: number, v: number): this {
    return this.uint(off, 3, v);
  }

  u32(off: number, v: number): this {
    return this.uint(off, 4, v);
  }

  u64(off: number, v: bigint | number): this {
    return this.uint(off, 8, v);
  }

  u128(off: number, v: bigint): this {
    return this.uint(off, 16, v);
  }

  /** Character codes of `s` (ASCII) from `off`. */
  ascii(off: number, s: string): this {
    for (let i = 0; i < s.length; i++) this.buf[off + i] = s.charCodeAt(i) & 0xff;
    return this;
  }

  /** `s` then spaces up to `len` bytes. */
  spacePadded(off: number, len: number, s: string): this {
    this.fill(off, len, 0x20);
    return this.ascii(off, s);
  }

  fill(off: number, len: number, byte: number): this {
    for (let i = 0; i < len; i++) this.buf[off + i] = byte;
    return this;
  }

  bytes(off: number, src: Uint8Array | readonly number[]): this {
    for (let i = 0; i < src.length; i++) this.buf[off + i] = src[i] ?? 0;
    return this;
  }

  hex(off: number, hex: string): this {
    for (let i = 0; i + 1 < hex.length; i += 2) this.buf[off + i / 2] = parseInt(hex.slice(i, i + 2), 16);
    return this;
  }

  build(): Buffer {
    return Buffer.from(this.buf);
  }
}

/** A new builder of `size` zero bytes. */
export function bytes(size: number): Bytes {
  return new Bytes(size);
}

// ---------------------------------------------------------------------------------------------
// Captured fixtures (see test/fixtures/captures/README.md)

/** PDU type numbers used in the fixtures (NVMe/TCP 1.0 §3.6.1). */
export const FixturePduType = { CapsuleCmd: 4, CapsuleResp: 5, H2CData: 6, C2HData: 7, R2T: 9 } as const;

/** One captured PDU. */
export interface FixturePdu {
  dir: 'h2c' | 'c2h';
  type: number;
  typeName: string;
  hlen: number;
  pdo: number;
  plen: number;
  flags: number;
  info: Readonly<Record<string, unknown>>;
  /** The whole PDU. */
  raw: Buffer;
}

/** One captured connection. */
export interface FixtureConnection {
  role: string;
  qid: number;
  hdgst: boolean;
  ddgst: boolean;
  pdus: FixturePdu[];
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function num(v: unknown, what: string): number {
  if (typeof v !== 'number') throw new TypeError(`fixture: ${what} is not a number`);
  return v;
}

function str(v: unknown, what: string): string {
  if (typeof v !== 'string') throw new TypeError(`fixture: ${what} is not a string`);
  return v;
}

/** Validates a parsed fixture file and returns its connections. */
export function parseFixture(json: unknown): FixtureConnection[] {
  if (!isRecord(json) || !Array.isArray(json['connections'])) throw new TypeError('fixture: no connections');
  return json['connections'].map((c: unknown, ci): FixtureConnection => {
    if (!isRecord(c) || !Array.isArray(c['pdus']) || !isRecord(c['digests'])) throw new TypeError(`fixture: bad connection ${ci}`);
    const pdus = c['pdus'].map((p: unknown, pi): FixturePdu => {
      if (!isRecord(p)) throw new TypeError(`fixture: bad pdu ${ci}/${pi}`);
      const dir = str(p['dir'], 'dir');
      if (dir !== 'h2c' && dir !== 'c2h') throw new TypeError(`fixture: bad dir ${dir}`);
      const info = p['info'];
      return {
        dir,
        type: num(p['type'], 'type'),
        typeName: str(p['typeName'], 'typeName'),
        hlen: num(p['hlen'], 'hlen'),
        pdo: num(p['pdo'], 'pdo'),
        plen: num(p['plen'], 'plen'),
        flags: num(p['flags'], 'flags'),
        info: isRecord(info) ? info : {},
        raw: Buffer.from(str(p['hex'], 'hex'), 'hex'),
      };
    });
    return {
      role: str(c['role'], 'role'),
      qid: num(c['qid_guess'], 'qid_guess'),
      hdgst: c['digests']['hdgst'] === true,
      ddgst: c['digests']['ddgst'] === true,
      pdus,
    };
  });
}

/** The 64-byte SQE of a CapsuleCmd (bytes 8..72, NVMe/TCP 1.0 Figure 29). */
export function capsuleSqe(pdu: FixturePdu): Buffer {
  return pdu.raw.subarray(8, 72);
}

/** The in-capsule data of a CapsuleCmd (from PDO, without DDGST). */
export function capsuleData(conn: FixtureConnection, pdu: FixturePdu): Buffer {
  if (pdu.pdo === 0) return Buffer.alloc(0);
  return pdu.raw.subarray(pdu.pdo, pdu.plen - (conn.ddgst ? 4 : 0));
}

/** The 16-byte CQE of a CapsuleResp (bytes 8..24). */
export function respCqe(pdu: FixturePdu): Buffer {
  return pdu.raw.subarray(8, 24);
}

/** CID of a CapsuleCmd (SQE bytes 2..3). */
function capsuleCid(pdu: FixturePdu): number {
  return pdu.raw.readUInt16LE(8 + 2);
}

/** Commands of a connection whose `info.op` equals `op` and whose info matches `match`. */
export function findCommands(conn: FixtureConnection, op: string, match: Readonly<Record<string, unknown>> = {}): FixturePdu[] {
  return conn.pdus.filter(
    (p) => p.type === FixturePduType.CapsuleCmd && p.info['op'] === op && Object.entries(match).every(([k, v]) => p.info[k] === v),
  );
}

/**
 * Data the controller returned for `cmd`: the C2HData PDUs after it whose CCCID (u16 at 8) equals
 * its CID, each contributing DATAL (u32 at 16) bytes from PDO, until one with DATA_LAST (0x04).
 */
export function c2hDataFor(conn: FixtureConnection, cmd: FixturePdu): Buffer {
  const cid = capsuleCid(cmd);
  const start = conn.pdus.indexOf(cmd);
  const parts: Buffer[] = [];
  for (const p of conn.pdus.slice(start + 1)) {
    if (p.type !== FixturePduType.C2HData || p.raw.readUInt16LE(8) !== cid) continue;
    const datal = p.raw.readUInt32LE(16);
    parts.push(p.raw.subarray(p.pdo, p.pdo + datal));
    if ((p.flags & 0x04) !== 0) break;
  }
  return Buffer.concat(parts);
}

/** The CapsuleResp after `cmd` with the same CID. */
export function responseFor(conn: FixtureConnection, cmd: FixturePdu): FixturePdu | undefined {
  const cid = capsuleCid(cmd);
  const start = conn.pdus.indexOf(cmd);
  return conn.pdus.slice(start + 1).find((p) => p.type === FixturePduType.CapsuleResp && p.raw.readUInt16LE(8 + 12) === cid);
}
