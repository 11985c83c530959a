// Durations: the one parser for fio job files (runtime=1s, ramp_time=500ms) and every bin flag that takes a time
// (connect -k/-c/-l/-F, --io-timeout, --admin-timeout: seconds, as nvme-cli). A plain number is in the caller's unit, as
// nvme-cli and fio read them; us/ms/s/m/h suffixes are fio's. A leaf module beside size.ts, so the bin can import it
// without loading the target.
import { InvalidArgumentError } from '../errors.js';

const MS_PER: Readonly<Record<TimeUnit, number>> = { us: 0.001, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

export type TimeUnit = 'us' | 'ms' | 's' | 'm' | 'h';

/**
 * `spec` in `unit`: "30" is 30 `unit`s, "5s", "500ms", "2m", "1h", "250us" are converted (a leading "-" is kept, for
 * flags where -1 means "never"); throws InvalidArgumentError naming `field` for anything else.
 */
export function parseDuration(spec: string, unit: TimeUnit, field = 'duration'): number {
  const m = /^\s*(-?\d+(?:\.\d+)?)\s*(us|ms|s|m|h)?\s*$/i.exec(spec);
  if (m === null) throw new InvalidArgumentError(field, `cannot parse time "${spec}" (use a number of ${unit} or a us/ms/s/m/h suffix)`);
  const from = (m[2]?.toLowerCase() ?? unit) as TimeUnit;
  // Rounded to a millionth of the unit, so 1.1s is 1100 ms and not 1100.0000000000002.
  return Math.round(((Number(m[1]) * MS_PER[from]) / MS_PER[unit]) * 1e6) / 1e6;
}
