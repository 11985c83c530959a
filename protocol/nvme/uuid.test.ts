import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { formatUuid, parseUuid } from './uuid.js';
import { ANA_STATE_CODE, ANA_STATE_NAMES, anaStateName } from './log-pages.js';

describe('UUID text form', () => {
  const bytes = Buffer.from([0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]);
  it('formats 8-4-4-4-12 lower case', () => {
    expect(formatUuid(bytes)).toBe('12345678-9abc-def0-0123-456789abcdef');
  });
  it('parses with or without hyphens and rejects other text', () => {
    expect(parseUuid('12345678-9ABC-def0-0123-456789abcdef')).toEqual(bytes);
    expect(parseUuid('123456789abcdef00123456789abcdef')).toEqual(bytes);
    expect(() => parseUuid('1234')).toThrow(/invalid UUID/);
    expect(() => parseUuid('g2345678-9abc-def0-0123-456789abcdef')).toThrow(/invalid UUID/);
  });
});

describe('ANA state names', () => {
  it('map to the NVMe Base 2.0 §8.1.3 codes and back', () => {
    expect(ANA_STATE_CODE).toEqual({ optimized: 1, 'non-optimized': 2, inaccessible: 3, 'persistent-loss': 4, change: 0x0f });
    for (const n of ANA_STATE_NAMES) expect(anaStateName(ANA_STATE_CODE[n])).toBe(n);
  });
  it('read reserved codes as change and ignore the upper nibble', () => {
    expect(anaStateName(0x05)).toBe('change');
    expect(anaStateName(0x00)).toBe('change');
    expect(anaStateName(0xf2)).toBe('non-optimized');
  });
});
