// tls / tls_key / tls_identity_version / tls_hkdf validation and the credentials a queue handshakes with.
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { deriveTlsPsk, formatTlsKey, parseTlsKey } from '../protocol/tls/index.js';
import { resolveOptions } from './options.js';
import { resolveTls, tlsCredentials } from './tls.js';

const KEY = formatTlsKey(1, Buffer.alloc(32, 9));
const base = { traddr: '127.0.0.1', nqn: 'nqn.2024-01.io.test:s' };

describe('TLS options', () => {
  it('tls_key turns TLS on; defaults: identity version 0, rfc8446', () => {
    const o = resolveOptions({ ...base, tls_key: KEY });
    expect(o.tls).toMatchObject({ identityVersion: 0, hkdf: 'rfc8446' });
    expect(String(o.tls?.key)).toContain('<redacted>');
    expect(resolveOptions(base).tls).toBeUndefined();
  });

  it.each([
    [{ tls: true }, 'tls', /needs tls_key/],
    [{ tls: false, tls_key: KEY }, 'tls_key', /tls: false/],
    [{ tls_key: KEY.replace(':01:', ':07:') }, 'tls_key', /hash id 07/],
    [{ tls_key: formatTlsKey(2, Buffer.alloc(48, 1)) }, 'tls_key', /SHA-384.*Node 20/],
    [{ tls_key: KEY, tls_identity_version: 2 }, 'tls_identity_version', /0 or 1/],
    [{ tls_key: KEY, tls_hkdf: 'x' }, 'tls_hkdf', /rfc8446/],
    [{ tls_identity_version: 1 }, 'tls_identity_version', /needs tls_key/],
    [{ tls_key: KEY, io_workers: 1 }, 'io_workers', /tls/],
  ])('%j is refused naming %s', (extra, field, why) => {
    let err: unknown;
    try {
      resolveOptions({ ...base, ...extra });
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'NVMEOF_ERR_INVALID_ARG' });
    expect(String((err as Error).message)).toContain(field);
    expect(String((err as Error).message)).toMatch(why);
    expect(String((err as Error).message)).not.toContain(KEY.slice(16, 30));
  });

  it('credentials: the retained identity of this host/subsystem pair, version 1 when asked', () => {
    const t = resolveTls({ tls_key: KEY, tls_identity_version: 1 });
    if (t === undefined) throw new Error('no tls');
    const c = tlsCredentials(t, 'nqn.h', 'nqn.s');
    const want = deriveTlsPsk(parseTlsKey(KEY), 'nqn.h', 'nqn.s', 1);
    expect(c.identity).toBe(want.identity);
    expect(c.identity.startsWith('NVMe1R01 nqn.h nqn.s ')).toBe(true);
    expect(c.psk.equals(want.psk)).toBe(true);
  });
});
