// Size strings for backend config ("512M", "1G"): K/M/G/T are powers of 1024, like nvmetcli and truncate(1).
import { InvalidArgumentError } from '../errors.js';

/** Sizes accept bytes or strings with K/M/G/T suffixes meaning powers of 1024 ("1G" = 1073741824). */
export type SizeSpec = number | string;

const UNITS: Readonly<Record<string, number>> = { '': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4 };

/** Bytes for a size spec; throws InvalidArgumentError naming `field` for anything not a whole, non-negative byte count. */
export function parseSize(spec: SizeSpec, field = 'size'): number {
  let n: number;
  if (typeof spec === 'number') {
    n = spec;
  } else {
    const m = /^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$/i.exec(spec);
    if (m === null) throw new InvalidArgumentError(field, `cannot parse size "${spec}" (use bytes or K/M/G/T suffixes)`);
    const unit = UNITS[(m[2] ?? '').toUpperCase()] ?? 1;
    n = Number(m[1]) * unit;
  }
  if (!Number.isFinite(n) || n < 0 || !Number.isInteger(n) || n > Number.MAX_SAFE_INTEGER) {
    throw new InvalidArgumentError(field, `size ${String(spec)} is not a whole number of bytes`);
  }
  return n;
}
