// Progress line for long runs: elapsed, current IOPS, ETA on stderr, only on a TTY and never in CI.
import type { ProgressInfo } from '../load/types.js';

export interface ProgressSink {
  isTTY?: boolean;
  write(s: string): boolean;
}

/** True when progress should be shown: an interactive stderr and no CI=true in the environment. */
export function progressEnabled(stream: ProgressSink = process.stderr, env: NodeJS.ProcessEnv = process.env): boolean {
  const ci = (env['CI'] ?? '').toLowerCase();
  return stream.isTTY === true && ci !== 'true' && ci !== '1';
}

const secs = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;

export function formatProgress(label: string, p: ProgressInfo): string {
  const eta = p.totalMs === undefined ? '' : ` eta ${secs(Math.max(0, p.totalMs - p.elapsedMs))}`;
  return `${label} ${secs(p.elapsedMs)} ${Math.round(p.iops).toLocaleString('en-US')} IOPS ${p.mbps.toFixed(1)} MB/s${eta}`;
}

/** A progress reporter that rewrites one stderr line; `done()` clears it. No-op when not enabled. */
export function progressLine(label: string, stream: ProgressSink = process.stderr, env: NodeJS.ProcessEnv = process.env): { update: (p: ProgressInfo) => void; done: () => void } {
  if (!progressEnabled(stream, env)) return { update: () => undefined, done: () => undefined };
  let shown = false;
  return {
    update: (p) => {
      shown = true;
      stream.write(`\r\x1b[2K${formatProgress(label, p)}`);
    },
    done: () => {
      if (shown) stream.write('\r\x1b[2K');
    },
  };
}
