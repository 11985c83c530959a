import { describe, expect, it } from 'vitest';
import { anaGroupIds, describeDifference, descriptionDigest, keysDigest, type GroupDescription } from './description.js';
import { DescriptionMismatchError } from './errors.js';

const ns = (nsid: number) => ({
  nsid,
  size: '1073741824',
  blockSize: 512,
  anagrpid: nsid,
  uuid: `${nsid}`.repeat(32),
  nguid: `${nsid}a`.repeat(16),
  readOnly: false,
  hosts: null,
});
const base: GroupDescription = {
  subsystems: [
    {
      nqn: 'nqn.2024-01.io.example:s1',
      serial: 'SN1',
      model: 'nvme-tcp-ts',
      allowAnyHost: false,
      hosts: ['nqn.h1', 'nqn.h2'],
      namespaces: [ns(1), ns(2)],
    },
  ],
  keys: '',
};
const DHCHAP = 'DHHC-1:00:ia8Kb9K3TqHB8qTDTJmzoB1ns6W5kH5bVv6G5KyHCZ0lTqKa:';

describe('gateway description', () => {
  it('is order-insensitive', () => {
    const shuffled = { subsystems: [{ ...base.subsystems[0]!, namespaces: [...base.subsystems[0]!.namespaces].reverse() }] };
    expect(describeDifference(shuffled, base)).toBeUndefined();
    expect(descriptionDigest(shuffled)).toBe(descriptionDigest(base));
    expect(anaGroupIds(base)).toEqual([1, 2]);
  });

  it('names the difference in one line', () => {
    const bs = structuredClone(base);
    bs.subsystems[0]!.namespaces[1]!.blockSize = 4096;
    expect(describeDifference(bs, base)).toBe(
      "subsystem nqn.2024-01.io.example:s1 namespace 2: block size 4096 here, 512 in the group's record",
    );
    const fewer = structuredClone(base);
    fewer.subsystems[0]!.namespaces.pop();
    expect(describeDifference(fewer, base)).toMatch(/namespace 2 is in the group's record but not served here/);
    const other = { subsystems: [{ nqn: 'nqn.2024-01.io.example:s2', namespaces: [] }] };
    expect(describeDifference(other, base)).toMatch(/subsystem nqn.2024-01.io.example:s2 is served here/);
    const err = new DescriptionMismatchError('g1', describeDifference(bs, base)!);
    expect(err.code).toBe('NVMEOF_ERR_GATEWAY_DESCRIPTION');
    expect(err.message).toMatch(/^gateway group 'g1': subsystem/);
  });

  it('names a differing serial, model, host list, UUID, NGUID, read-only or host mask', () => {
    const cases: [(d: GroupDescription) => void, string][] = [
      [(d) => (d.subsystems[0]!.serial = 'SN2'), "subsystem nqn.2024-01.io.example:s1: serial SN2 here, SN1 in the group's record"],
      [(d) => (d.subsystems[0]!.model = 'other'), 'subsystem nqn.2024-01.io.example:s1: model other here, nvme-tcp-ts in'],
      [(d) => (d.subsystems[0]!.allowAnyHost = true), 'allowAnyHost true here, false in'],
      [(d) => (d.subsystems[0]!.hosts = ['nqn.h1']), "allowed hosts [nqn.h1] here, [nqn.h1,nqn.h2] in the group's record"],
      [(d) => (d.subsystems[0]!.namespaces[0]!.uuid = 'f'.repeat(32)), `namespace 1: UUID ${'f'.repeat(32)} here, ${'1'.repeat(32)} in`],
      [(d) => (d.subsystems[0]!.namespaces[1]!.nguid = '0'.repeat(32)), 'namespace 2: NGUID 0000'],
      [(d) => (d.subsystems[0]!.namespaces[0]!.readOnly = true), 'namespace 1: read-only true here, false in'],
      [(d) => (d.subsystems[0]!.namespaces[1]!.hosts = ['nqn.h2']), "namespace 2: host mask [nqn.h2] here, unset in the group's record"],
    ];
    for (const [change, line] of cases) {
      const d = structuredClone(base);
      change(d);
      const diff = describeDifference(d, base);
      expect(diff).toContain(line);
      expect(diff).not.toContain('\n');
      expect(descriptionDigest(d)).not.toBe(descriptionDigest(base));
    }
    // Host lists and masks are sets: order does not matter.
    const reordered = structuredClone(base);
    reordered.subsystems[0]!.hosts = ['nqn.h2', 'nqn.h1'];
    expect(describeDifference(reordered, base)).toBeUndefined();
  });

  it('compares the host keys by digest only, and never prints them', () => {
    const hosts = [{ nqn: 'nqn.h1', dhchapKey: DHCHAP, dhchapHash: ['hmac(sha256)'] }];
    const k = keysDigest(hosts);
    expect(k).toMatch(/^[0-9a-f]{64}$/);
    expect(keysDigest([{ dhchapHash: ['hmac(sha256)'], dhchapKey: DHCHAP, nqn: 'nqn.h1' }])).toBe(k); // field order
    expect(keysDigest(undefined)).toBe('');
    expect(keysDigest([{ nqn: 'nqn.h1', dhchapKey: DHCHAP, dhchapHash: ['hmac(sha384)'] }])).not.toBe(k);
    expect(keysDigest([{ nqn: 'nqn.h1', tlsKey: 'NVMeTLSkey-1:01:x:' }])).not.toBe(keysDigest([{ nqn: 'nqn.h1', tlsKey: 'NVMeTLSkey-1:01:y:' }]));
    const diff = describeDifference({ ...base, keys: k }, base);
    expect(diff).toBe("host key configuration (DH-HMAC-CHAP/TLS) differs from the group's record (digest mismatch)");
    expect(JSON.stringify({ ...base, keys: k })).not.toContain('DHHC-1');
    expect(describeDifference({ ...base, keys: k }, { ...base, keys: k })).toBeUndefined();
  });
});
