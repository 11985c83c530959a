// Interchange format, identities and HKDF derivations of protocol/tls against published vectors (libnvme
// test/psk.c, Linux drivers/nvme/common/tests/auth_kunit.c) and hand-built HkdfLabel bytes.
import { Buffer } from 'node:buffer';
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  TlsConfiguredKey,
  TlsIdentityError,
  TlsKeyError,
  assertSupportedHash,
  deriveConcatTlsPsk,
  deriveGeneratedPsk,
  derivePskDigest,
  deriveRetainedPsk,
  deriveTlsPsk,
  deriveTlsPskFrom,
  formatTlsIdentity,
  formatTlsKey,
  hkdfLabel,
  parseTlsIdentity,
  parseTlsKey,
} from './index.js';

// libnvme test/psk.c: this configured PSK with hh 01 exports as this string.
const LIBNVME_KEY = Buffer.from('5512DBB6737D0106F65975B773DFB011FFC344BCF442E2DD6D8BC4870B5D5B03', 'hex');
const LIBNVME_TEXT = 'NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:';

function errOf(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error('did not throw');
}

describe('interchange format', () => {
  it('parses the libnvme vector and formats it back byte for byte', () => {
    const k = parseTlsKey(LIBNVME_TEXT);
    expect(k.hmac).toBe(1);
    expect(k.hash).toBe(1);
    expect(k.bytes().equals(LIBNVME_KEY)).toBe(true);
    expect(formatTlsKey(1, LIBNVME_KEY)).toBe(LIBNVME_TEXT);
    expect(k.format()).toBe(LIBNVME_TEXT);
  });

  it('accepts surrounding whitespace and a missing trailing colon', () => {
    expect(parseTlsKey(`  ${LIBNVME_TEXT.slice(0, -1)}\n`).equals(parseTlsKey(LIBNVME_TEXT))).toBe(true);
  });

  it('hh 00 picks the hash from the length: 32 bytes SHA-256, 48 bytes SHA-384', () => {
    expect(new TlsConfiguredKey(0, Buffer.alloc(32, 1)).hash).toBe(1);
    expect(new TlsConfiguredKey(0, Buffer.alloc(48, 1)).hash).toBe(2);
  });

  const cases: [string, string, string][] = [
    ['wrong CRC', LIBNVME_TEXT.replace('LrZ:', 'LrY:'), 'crc'],
    ['bad hash id', LIBNVME_TEXT.replace(':01:', ':03:'), 'hash'],
    ['bad length', `NVMeTLSkey-1:00:${Buffer.alloc(20).toString('base64')}:`, 'length'],
    ['hh 01 with a 48-byte key', formatTlsKey(0, Buffer.alloc(48, 7)).replace(':00:', ':01:'), 'length'],
    ['wrong prefix', LIBNVME_TEXT.replace('NVMeTLSkey-1', 'DHHC-1'), 'format'],
    ['malformed base64', 'NVMeTLSkey-1:01:abc:', 'base64'],
  ];
  it.each(cases)('refuses %s with a typed error that does not contain the key', (_name, text, problem) => {
    const e = errOf(() => parseTlsKey(text));
    expect(e).toBeInstanceOf(TlsKeyError);
    expect((e as TlsKeyError).code).toBe('NVMEOF_ERR_TLS_KEY');
    expect((e as TlsKeyError).problem).toBe(problem);
    expect((e as Error).message).not.toContain('VRLbtnN9');
  });

  it('never shows the key bytes when logged', () => {
    const k = parseTlsKey(LIBNVME_TEXT);
    const shown = `${String(k)} ${JSON.stringify(k)} ${JSON.stringify({ k })}`;
    expect(shown).toContain('<redacted>');
    expect(shown).not.toContain('VRLb');
    expect(shown).not.toContain(LIBNVME_KEY.toString('hex').slice(0, 8));
  });
});

describe('identities', () => {
  const H = 'nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6';
  const S = 'nqn.2024-01.io.nvme-tcp-ts:default';
  it('round-trips version 0 and version 1', () => {
    const v0 = `NVMe0R01 ${H} ${S}`;
    expect(parseTlsIdentity(v0)).toEqual({ version: 0, type: 'R', hash: 1, hostnqn: H, subnqn: S });
    expect(formatTlsIdentity(parseTlsIdentity(v0))).toBe(v0);
    const v1 = `NVMe1G02 ${H} ${S} cffMWk8TSS7HOQebjgYEIkrPrjWPV4JE5cdPB8WhEvY4JBW5YynKyv66XscN4A9n`;
    const p = parseTlsIdentity(v1);
    expect(p).toMatchObject({ version: 1, type: 'G', hash: 2, digest: 'cffMWk8TSS7HOQebjgYEIkrPrjWPV4JE5cdPB8WhEvY4JBW5YynKyv66XscN4A9n' });
    expect(formatTlsIdentity(p)).toBe(v1);
  });
  it.each([
    ['NVMe0X01 a b', 'format'],
    ['NVMe2R01 a b', 'version'],
    ['NVMe0R03 a b', 'hash'],
    ['NVMe0R01 a b digest', 'format'],
    ['NVMe1R01 a b', 'format'],
    ['client', 'format'],
  ])('refuses %s', (text, problem) => {
    const e = errOf(() => parseTlsIdentity(text));
    expect(e).toBeInstanceOf(TlsIdentityError);
    expect((e as TlsIdentityError).problem).toBe(problem);
  });
  it('refuses SHA-384 with the reason', () => {
    const e = errOf(() => assertSupportedHash(2)) as TlsIdentityError;
    expect(e.problem).toBe('unsupported-hash');
    expect(e.message).toMatch(/Node 20.*SHA-256 suites only/);
    expect(() => assertSupportedHash(1)).not.toThrow();
  });
});

describe('HkdfLabel encodings', () => {
  it('rfc8446: u16 BE length, length-prefixed "tls13 "+label and context', () => {
    const want = Buffer.concat([Buffer.from([0x00, 0x20, 13]), Buffer.from('tls13 HostNQN'), Buffer.from([3]), Buffer.from('abc')]);
    expect(hkdfLabel('rfc8446', 32, 'HostNQN', 'abc').equals(want)).toBe(true);
  });
  it('pre-2025: u16 LE length, label and context without length bytes', () => {
    const want = Buffer.concat([Buffer.from([0x30, 0x00]), Buffer.from('tls13 HostNQNabc')]);
    expect(hkdfLabel('pre-2025', 48, 'HostNQN', 'abc').equals(want)).toBe(true);
  });
});

// Linux drivers/nvme/common/tests (nvme-auth kunit): skey[i] = 'A'+i, c1[i] = i, c2[i] = 0xff-i, hostnqn "hostnqn",
// subsysnqn "subsysnqn"; generated PSK, digest and TLS PSK (RFC 8446 HkdfLabel, as the kernel and fixed libnvme).
describe('kernel vectors (generated PSK, digest, TLS PSK)', () => {
  const fill = (n: number, f: (i: number) => number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => f(i)));
  const vectors = [
    {
      hash: 1 as const,
      psk: '1733c59fa7f48fcf37f5f26fc4ff0268ad4f78e030f4f3b0bfd1d47e7bb1447a',
      digest: 'OldoKuTfKddMuyCznAZojkWD7P4D9/AtzDzLimtOxqI=',
      tls: '3c17da628474a04d2247c4cab47968c915388193f7c071bd9489cc3666cd7cc8',
    },
    {
      hash: 2 as const,
      psk: 'f14b2dd3234c459694d3bc63f8968bd6b37c2c6de849e22e118749001ce4bbe8640b9e3a748cb11ce4b1d71d359cce39',
      digest: 'cffMWk8TSS7HOQebjgYEIkrPrjWPV4JE5cdPB8WhEvY4JBW5YynKyv66XscN4A9n',
      tls: '277475323353' + '7b3fa50eb7d16a8e4345' + '7d85f4906c005b2236616c5d80939d08' + '98fff15bb8b77119d2be0aac423e7590',
    },
  ];
  it.each(vectors)('hash $hash', (v) => {
    const n = v.hash === 1 ? 32 : 48;
    const psk = deriveGeneratedPsk(v.hash, fill(n, (i) => 0x41 + i), fill(n, (i) => i), fill(n, (i) => 0xff - i));
    expect(psk.toString('hex')).toBe(v.psk);
    expect(derivePskDigest(v.hash, psk, 'hostnqn', 'subsysnqn')).toBe(v.digest);
    expect(deriveTlsPskFrom(v.hash, psk, `0${v.hash} ${v.digest}`, 'rfc8446').toString('hex')).toBe(v.tls);
    expect(deriveTlsPskFrom(v.hash, psk, `0${v.hash} ${v.digest}`, 'pre-2025').toString('hex')).not.toBe(v.tls);
  });
});

describe('configured key → identity and TLS PSK', () => {
  const key = parseTlsKey(LIBNVME_TEXT);
  const H = 'nqn.2014-08.org.nvmexpress:uuid:0c468c4d-a385-47e0-8299-6e95051277db';
  const S = 'nqn.2024-01.io.nvme-tcp-ts:default';

  it('hh 00 uses the configured PSK as the retained PSK', () => {
    const k0 = new TlsConfiguredKey(0, LIBNVME_KEY);
    expect(deriveRetainedPsk(k0, H).equals(LIBNVME_KEY)).toBe(true);
  });

  it('version 0: identity NVMe0R01, TLS PSK keyed by the identity', () => {
    const d = deriveTlsPsk(key, H, S, 0);
    expect(d.identity).toBe(`NVMe0R01 ${H} ${S}`);
    const retained = deriveRetainedPsk(key, H);
    expect(d.psk.equals(deriveTlsPskFrom(1, retained, d.identity))).toBe(true);
    expect(d.psk.length).toBe(32);
  });

  it('version 1: identity carries the digest of the retained PSK', () => {
    const d = deriveTlsPsk(key, H, S, 1);
    const retained = deriveRetainedPsk(key, H);
    const digest = createHmac('sha256', retained).update(`${H} ${S} NVMe-over-Fabrics`).digest('base64');
    expect(d.identity).toBe(`NVMe1R01 ${H} ${S} ${digest}`);
    expect(d.psk.equals(deriveTlsPskFrom(1, retained, `01 ${digest}`))).toBe(true);
  });

  it('the two encodings give different keys, and rfc8446 is the default', () => {
    const a = deriveTlsPsk(key, H, S, 0);
    expect(a.psk.equals(deriveTlsPsk(key, H, S, 0, 'rfc8446').psk)).toBe(true);
    expect(a.psk.equals(deriveTlsPsk(key, H, S, 0, 'pre-2025').psk)).toBe(false);
  });
});

// Computed by nvme-cli 2.13 / libnvme 1.13 (Debian trixie, the pre-2025 HkdfLabel encoding) from the libnvme test key:
// `nvme check-tls-key --keydata=<key> --hostnqn=nqn.h --subsysnqn=nqn.s --identity=N --keytype=user --insert`, the
// inserted key's description and payload read back with keyctl.
describe('nvme-cli 2.13 vectors (pre-2025 encoding)', () => {
  const key = parseTlsKey(LIBNVME_TEXT);
  it('version 0: identity and TLS PSK', () => {
    const d = deriveTlsPsk(key, 'nqn.h', 'nqn.s', 0, 'pre-2025');
    expect(d.identity).toBe('NVMe0R01 nqn.h nqn.s');
    expect(d.psk.toString('hex')).toBe('8b761a761ecbe2eb6f334fbafbd9ac7003a516f6a9ea15c4f10243ad865c4793');
  });
  it('version 1: identity with the PSK digest, and TLS PSK', () => {
    const d = deriveTlsPsk(key, 'nqn.h', 'nqn.s', 1, 'pre-2025');
    expect(d.identity).toBe('NVMe1R01 nqn.h nqn.s CnwZCTRKd3WwLDu+6HDgabbPeOYlfazRY1xXTdeg/I0=');
    expect(d.psk.toString('hex')).toBe('23251dd4c8b7f60325bbfd88a968ef5064fd47b2f8b4f241bcc618322cf48408');
  });
});

// Secure channel concatenation: Linux nvme_tls_psk_refresh names the generated PSK "NVMe1G%02d <host> <sub> <digest>";
// with the kunit inputs above the digest and TLS PSK are the published ones.
describe('generated PSK → identity NVMe1G01 and TLS PSK (deriveConcatTlsPsk)', () => {
  it('kernel vector, hash 01', () => {
    const fill = (n: number, f: (i: number) => number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => f(i)));
    const psk = deriveGeneratedPsk(1, fill(32, (i) => 0x41 + i), fill(32, (i) => i), fill(32, (i) => 0xff - i));
    const d = deriveConcatTlsPsk(1, psk, 'hostnqn', 'subsysnqn');
    expect(d.identity).toBe('NVMe1G01 hostnqn subsysnqn OldoKuTfKddMuyCznAZojkWD7P4D9/AtzDzLimtOxqI=');
    expect(d.psk.toString('hex')).toBe('3c17da628474a04d2247c4cab47968c915388193f7c071bd9489cc3666cd7cc8');
  });
});
