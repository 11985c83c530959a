// Where the target's processes log: stderr, so stdout carries only the start-up lines (cli/target.ts). The primary and
// its worker processes share that stderr (forked with it inherited), so both format alike: pino-pretty when it is a
// terminal, JSON lines otherwise.
import { createRequire } from 'node:module';
import type { DestinationStream } from 'pino';
import { pino } from 'pino';
import type PinoPretty from 'pino-pretty';

/**
 * The log stream on stderr. Synchronous writes: logs are rare (never per I/O at info), and a record written just
 * before an exit must not be lost. pino-pretty is loaded only for a terminal (require: a worker builds its logger
 * synchronously on 'init').
 */
export function stderrLogStream(): DestinationStream {
  if (process.stderr.isTTY) {
    const pretty = createRequire(import.meta.url)('pino-pretty') as typeof PinoPretty;
    return pretty({ destination: 2, sync: true, singleLine: true, translateTime: 'SYS:HH:MM:ss.l' });
  }
  return pino.destination({ dest: 2, sync: true });
}
