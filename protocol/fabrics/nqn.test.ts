import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Buffer } from 'node:buffer';
import { NQN_MAX_LENGTH, makeHostNqn, uuidFromNqn, validateNqn } from './nqn.js';

describe('validateNqn (NVMe Base 2.0 §4.5)', () => {
  it.each([
    'nqn.2014-08.org.nvmexpress.discovery',
    'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000001',
    'nqn.2014-08.org.nvmexpress:uuid:A96E2341-848A-47E8-9A60-8BBC57A89236',
    'nqn.2024-01.io.nvme-lab:kernel-target',
    'nqn.2016-06.io.spdk:cnode1',
    'nqn.2024-12.com.example',
    'nqn.1999-01.com.163:storage:with:colons',
    'nqn.2024-01.io.example:ünïcode-name',
  ])('accepts %s', (nqn) => {
    expect(validateNqn(nqn)).toEqual({ ok: true });
  });

  it.each([
    ['', 'empty'],
    ['iqn.2024-01.io.example:x', 'nqn.'],
    ['nqn.', 'date code'],
    ['nqn.24-01.io.example:x', 'date code'],
    ['nqn.2024-13.io.example:x', 'month'],
    ['nqn.2024-00.io.example:x', 'month'],
    ['nqn.2024-01.:x', 'reverse domain'],
    ['nqn.2024-01.io..example:x', 'empty domain label'],
    ['nqn.2024-01.-io.example:x', 'label'],
    ['nqn.2024-01.io_x.example', 'label'],
    ['nqn.2024-01.io.example:', 'after ":"'],
    ['nqn.2014-08.org.nvmexpress:uuid:not-a-uuid', 'UUID'],
    ['nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-70000000000', 'UUID'],
    [`nqn.2024-01.io.example:${'x'.repeat(201)}`, 'too long'],
    ['nqn.2024-01.io.example:a\0b', 'NUL'],
    [`nqn.2024-01.${'a'.repeat(64)}.io`, 'longer than 63'],
  ])('rejects %j (%s)', (nqn, why) => {
    const r = validateNqn(nqn);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toContain(why);
  });

  it('counts UTF-8 bytes, not characters, against the 223-byte limit', () => {
    expect(NQN_MAX_LENGTH).toBe(223);
    const base = 'nqn.2024-01.io.example:';
    expect(validateNqn(base + 'x'.repeat(223 - base.length)).ok).toBe(true);
    expect(validateNqn(base + 'x'.repeat(224 - base.length)).ok).toBe(false);
    expect(validateNqn(base + 'é'.repeat(100)).ok).toBe(true);
    expect(validateNqn(base + 'é'.repeat(101)).ok).toBe(false);
  });
});

describe('host NQNs', () => {
  it('builds the UUID form from a string or bytes', () => {
    const want = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000001';
    expect(makeHostNqn('6C61622D-6E76-6D65-7463-700000000001')).toBe(want);
    expect(makeHostNqn(Buffer.from('6c61622d6e766d657463700000000001', 'hex'))).toBe(want);
    expect(uuidFromNqn(want)).toBe('6c61622d-6e76-6d65-7463-700000000001');
    expect(uuidFromNqn('nqn.2024-01.io.example:x')).toBeUndefined();
  });
  it('always produces valid NQNs', () => {
    fc.assert(
      fc.property(fc.uuid(), (u) => {
        expect(validateNqn(makeHostNqn(u))).toEqual({ ok: true });
      }),
    );
  });
  it('never throws on arbitrary strings', () => {
    fc.assert(fc.property(fc.string({ maxLength: 300 }), (s) => void validateNqn(s)), { numRuns: 300 });
  });
});
