import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '../errors.js';
import { parseSize } from './size.js';

describe('parseSize', () => {
  it.each([
    [512, 512],
    ['4096', 4096],
    ['1K', 1024],
    ['64M', 64 * 1024 ** 2],
    ['1G', 1024 ** 3],
    ['2t', 2 * 1024 ** 4],
    ['1.5K', 1536],
    ['8MiB', 8 * 1024 ** 2],
  ])('%s → %d', (spec, want) => expect(parseSize(spec)).toBe(want));

  it.each([['abc'], ['-1'], [-5], ['1.3'], [1.5], ['1X']])('rejects %s naming the field', (spec) => {
    expect(() => parseSize(spec, 'backend.size')).toThrow(InvalidArgumentError);
    expect(() => parseSize(spec, 'backend.size')).toThrow(/backend\.size/);
  });
});
