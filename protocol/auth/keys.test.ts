import { execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { crc32Ieee } from './crc32.js';
import { DhchapKeyError } from './errors.js';
import { DhchapKey, formatDhchapSecret, generateDhchapKey, parseDhchapSecret, transformKey } from './keys.js';

/** The example secret of NVMe Base 2.0 §8.13.5.8, as quoted in the Linux patch "nvme-auth: allow mixing of secret and hash lengths". */
const SPEC_EXAMPLE = 'DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:';
/** blktests nvme/045 "invalid ctrl key": a secret whose CRC does not match. */
const BLKTESTS_INVALID = 'DHHC-1:00:Jc/My1o0qtLCWRp+sHhAVafdfaS7YQOMYhk9zSmlatobqB8C:';
const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:22207d09-d8af-4ed2-84ec-a6d80b0cf7fc';

/** Independent bitwise CRC-32 (no table) to check the table-driven one. */
function crcBitwise(buf: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of buf) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0xedb88320 : c >>> 1;
  }
  return (c ^ 0xffffffff) >>> 0;
}

describe('crc32Ieee', () => {
  it('matches the standard check value and a bitwise implementation', () => {
    expect(crc32Ieee(Buffer.from('123456789'))).toBe(0xcbf43926);
    expect(crc32Ieee(Buffer.alloc(0))).toBe(0);
    for (let n = 0; n < 70; n += 7) {
      const b = Buffer.from(Array.from({ length: n }, (_, i) => (i * 37 + n) & 0xff));
      expect(crc32Ieee(b)).toBe(crcBitwise(b));
    }
  });
});

describe('parseDhchapSecret', () => {
  it('accepts the NVMe spec example secret and formats it back identically', () => {
    const k = parseDhchapSecret(SPEC_EXAMPLE);
    expect(k.transform).toBe(0);
    expect(k.length).toBe(32);
    expect(k.format()).toBe(SPEC_EXAMPLE);
  });

  it('accepts a missing trailing colon and surrounding whitespace (nvmet strim)', () => {
    expect(parseDhchapSecret(` ${SPEC_EXAMPLE.slice(0, -1)}\n`).format()).toBe(SPEC_EXAMPLE);
  });

  it('rejects a bad CRC with a clear error that does not contain the secret', () => {
    let err: unknown;
    try {
      parseDhchapSecret(BLKTESTS_INVALID);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DhchapKeyError);
    const e = err as DhchapKeyError;
    expect(e.code).toBe('NVMEOF_ERR_DHCHAP_KEY');
    expect(e.message).toMatch(/CRC-32 mismatch/);
    expect(e.message).not.toContain('Jc/My1o0');
    expect(inspect(e)).not.toContain('Jc/My1o0');
  });

  it('rejects a flipped bit in an otherwise valid secret', () => {
    const raw = Buffer.from(SPEC_EXAMPLE.split(':')[2] as string, 'base64');
    raw[3] = (raw[3] as number) ^ 1;
    expect(() => parseDhchapSecret(`DHHC-1:00:${raw.toString('base64')}:`)).toThrow(/CRC-32 mismatch/);
  });

  it.each([
    ['wrong prefix', 'DHHC-2:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:', /form DHHC-1/],
    ['hh out of range', 'DHHC-1:04:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:', /hh=04/],
    ['bad base64 padding', 'DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2:', /base64/],
    ['wrong length', `DHHC-1:00:${Buffer.alloc(20).toString('base64')}:`, /expected 36, 52 or 68/],
    ['garbage', 'hello', /form DHHC-1/],
  ])('rejects %s', (_name, s, re) => {
    expect(() => parseDhchapSecret(s)).toThrow(re);
  });

  it('round-trips every key length and transform', () => {
    for (const len of [32, 48, 64]) {
      for (const hh of [0, 1, 2, 3] as const) {
        const bytes = Buffer.from(Array.from({ length: len }, (_, i) => (i * 13 + hh) & 0xff));
        const s = formatDhchapSecret(hh, bytes);
        expect(s.startsWith(`DHHC-1:0${hh}:`)).toBe(true);
        const k = parseDhchapSecret(s);
        expect(k.equals(new DhchapKey(hh, bytes))).toBe(true);
        // Independent construction of the representation: base64(key || crc32 LE).
        const crc = Buffer.alloc(4);
        crc.writeUInt32LE(crcBitwise(bytes));
        expect(s).toBe(`DHHC-1:0${hh}:${Buffer.concat([bytes, crc]).toString('base64')}:`);
      }
    }
  });
});

describe('key transform', () => {
  it('is HMAC(hash(hh), key, nqn || "NVMe-over-Fabrics") and identity for hh 00', () => {
    const k0 = parseDhchapSecret(SPEC_EXAMPLE);
    const raw = Buffer.from(SPEC_EXAMPLE.split(':')[2] as string, 'base64').subarray(0, 32);
    expect(k0.transformedFor(HOSTNQN).equals(raw)).toBe(true);
    for (const [hh, alg] of [
      [1, 'sha256'],
      [2, 'sha384'],
      [3, 'sha512'],
    ] as const) {
      const k = new DhchapKey(hh, raw);
      const expected = createHmac(alg, raw).update(`${HOSTNQN}NVMe-over-Fabrics`).digest();
      expect(k.transformedFor(HOSTNQN).equals(expected)).toBe(true);
      expect(transformKey(hh, raw, HOSTNQN).equals(expected)).toBe(true);
    }
  });
});

describe('generateDhchapKey (nvme gen-dhchap-key)', () => {
  it('defaults to a random 32-byte untransformed key', () => {
    const a = generateDhchapKey();
    const b = generateDhchapKey();
    expect(a.transform).toBe(0);
    expect(a.length).toBe(32);
    expect(a.equals(b)).toBe(false);
    expect(parseDhchapSecret(a.format()).equals(a)).toBe(true);
  });

  it('for --hmac N stores HMAC(raw, nqn || "NVMe-over-Fabrics") with the hash length, like libnvme', () => {
    const raw = Buffer.alloc(48, 7);
    const k = generateDhchapKey({ hmac: 2, hostnqn: HOSTNQN, secret: raw });
    expect(k.length).toBe(48);
    const expected = createHmac('sha384', raw).update(`${HOSTNQN}NVMe-over-Fabrics`).digest();
    expect(k.equals(new DhchapKey(2, expected))).toBe(true);
    expect(generateDhchapKey({ hmac: 3, hostnqn: HOSTNQN }).length).toBe(64);
  });

  it('uses the injected random source and rejects lengths nvme-cli rejects', () => {
    const k = generateDhchapKey({ length: 64, randomBytes: (n) => Buffer.alloc(n, 0xab) });
    expect(k.equals(new DhchapKey(0, Buffer.alloc(64, 0xab)))).toBe(true);
    expect(() => generateDhchapKey({ length: 40 })).toThrow(DhchapKeyError);
    expect(() => generateDhchapKey({ hmac: 1, length: 48, hostnqn: HOSTNQN })).toThrow(/does not match/);
    expect(() => generateDhchapKey({ hmac: 1 })).toThrow(/hostnqn is required/);
  });
});

describe('secret redaction', () => {
  it('never prints key material through inspect, toString, JSON or template strings', () => {
    const k = parseDhchapSecret(SPEC_EXAMPLE);
    const b64 = SPEC_EXAMPLE.split(':')[2] as string;
    const hex = Buffer.from(b64, 'base64').subarray(0, 32).toString('hex');
    const outputs = [inspect(k), inspect({ nested: { k } }, { depth: 5 }), String(k), `${k}`, JSON.stringify({ k })];
    for (const out of outputs) {
      expect(out).toContain('redacted');
      expect(out).not.toContain(b64.slice(0, 12));
      expect(out).not.toContain(hex.slice(0, 12));
    }
  });
});

/**
 * Captured from nvme-cli 2.3 / libnvme 1.3 on the lab host:
 * `nvme gen-dhchap-key --hmac=M --key-length=L --nqn=nqn.2014-08.org.nvmexpress:uuid:test --secret=5a5a...`
 */
const NVME_CLI_VECTORS = [
  [0, 32, 'DHHC-1:00:WlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWloj0TmR:'],
  [1, 32, 'DHHC-1:01:gaKAq0gm/l/bpNajl7VvQlEm0G0xX57cO0hah2qr7uFDayc0:'],
  [2, 48, 'DHHC-1:02:U3nCI9h6TFAaP5XiP6nAcnKgi5T77T7tOj1uSALikVVjDQnVMN3p9xaGOnIHeVqQfvq5mg==:'],
  [3, 64, 'DHHC-1:03:S47QVek2WlbkZE5iIY8kmVWCgiwdjNQuDFKUa2/RI23JqRdwVpskeIG4HXnVprnoesKT9PXzYHhDg164QluoIeqaVqg=:'],
] as const;

describe('interop with nvme-cli', () => {
  it.each(NVME_CLI_VECTORS)('generateDhchapKey matches `nvme gen-dhchap-key --hmac=%i` output', (hmac, len, expected) => {
    const k = generateDhchapKey({ hmac, length: len, hostnqn: 'nqn.2014-08.org.nvmexpress:uuid:test', secret: Buffer.alloc(len, 0x5a) });
    expect(k.format()).toBe(expected);
    expect(parseDhchapSecret(expected).equals(k)).toBe(true);
  });

  let nvmeCli = false;
  try {
    execFileSync('nvme', ['version'], { stdio: 'ignore' });
    nvmeCli = true;
  } catch {
    nvmeCli = false;
  }
  it.skipIf(!nvmeCli)('live: nvme check-dhchap-key accepts our keys and we parse nvme-cli keys', () => {
    for (const hmac of [0, 1, 2, 3] as const) {
      const ours = generateDhchapKey({ hmac, hostnqn: 'nqn.2014-08.org.nvmexpress:uuid:live' }).format();
      const out = execFileSync('nvme', ['check-dhchap-key', `--key=${ours}`], { encoding: 'utf8' });
      expect(out).toMatch(/Key is valid/);
      const theirs = execFileSync('nvme', ['gen-dhchap-key', `--hmac=${hmac}`, '--nqn=nqn.2014-08.org.nvmexpress:uuid:live'], {
        encoding: 'utf8',
      }).trim();
      expect(parseDhchapSecret(theirs).transform).toBe(hmac);
    }
  });
});
