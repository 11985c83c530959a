// What every verb of the `nvme-tcp` bin shares: the command-line library set up one way (one error line, exit 2,
// help and version on stdout, exit 0), the one UsageError, and one parser per kind of value, so the same text
// means the same thing in every verb.
import { createRequire } from 'node:module';
import { isIP } from 'node:net';
import { Command, CommanderError, Option } from 'commander';
import { validateNvmetName } from '../protocol/index.js';
import { parseDuration, parseHostPort, parseSize } from '../protocol/values/index.js';

/** A command line that cannot be turned into a request: one line on stderr, exit status 2. */
export class UsageError extends Error {
  readonly code = 'NVMEOF_ERR_USAGE';
}

export interface CliIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
}

export const defaultIo: CliIo = { stdout: (s) => void process.stdout.write(s), stderr: (s) => void process.stderr.write(s) };

/**
 * The package version (`nvme-tcp --version`), from package.json one level up from cli/ in a checkout and two from
 * dist/cli/ in the compiled package.
 */
export const VERSION: string = packageVersion();

function packageVersion(): string {
  const require = createRequire(import.meta.url);
  for (const p of ['../package.json', '../../package.json']) {
    try {
      const pkg = require(p) as { name?: string; version?: string };
      if (pkg.name === 'nvme-tcp-ts' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // not at this level: try the next
    }
  }
  return 'unknown';
}

/** A commander Command that writes through `io` and throws instead of exiting (runParsed turns that into a status). */
export function newCommand(name: string, io: CliIo, description?: string): Command {
  const c = new Command(name);
  configure(c, io);
  if (description !== undefined) c.description(description);
  return c;
}

/** The settings every command and subcommand gets (commander copies some to subcommands, not all). */
export function configure(c: Command, io: CliIo): Command {
  return c
    .exitOverride()
    // Errors become one line (parseFailure); commander's help-on-error dump is dropped with them.
    .configureOutput({ writeOut: io.stdout, writeErr: () => undefined, outputError: () => undefined })
    .showSuggestionAfterError(true)
    .allowExcessArguments(false)
    .helpOption('-h, --help', 'this text');
}

/** Adds `sub` under `parent` with the shared settings. */
export function subcommand(parent: Command, name: string, description: string, io: CliIo): Command {
  const c = parent.command(name).description(description);
  configure(c, io);
  return c;
}

/** The one line for a CommanderError or UsageError, without commander's "error: " and line breaks. */
export function usageLine(err: unknown): string {
  const m = err instanceof Error ? err.message : String(err);
  return m
    .replace(/^error: /, '')
    .replace(/\n\(Did you mean (.*)\?\)/, ' (did you mean $1?)')
    .replace(/\s*\n\s*/g, '; ')
    .trim();
}

/**
 * Parses `argv` (the words after the verb) with `cmd`. Resolves to undefined when the caller should go on, or to the
 * exit status: 0 after --help/--version, 2 after one line on stderr for bad input.
 */
export function runParsed(cmd: Command, argv: readonly string[], io: CliIo, prefix: string): number | undefined {
  try {
    cmd.parse([...argv], { from: 'user' });
    return undefined;
  } catch (err) {
    return parseFailure(err, io, prefix);
  }
}

/** The exit status for an error out of parsing (writes the line); rethrows anything that is not about usage. */
export function parseFailure(err: unknown, io: CliIo, prefix: string): number {
  if (err instanceof CommanderError) {
    if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return 0;
    if (err.code === 'commander.help') {
      // A command that needs a subcommand, given none.
      io.stderr(`${prefix}: missing command; add --help to list them\n`);
      return 2;
    }
    io.stderr(`${prefix}: ${usageLine(err)}\n`);
    return 2;
  }
  if (err instanceof UsageError) {
    io.stderr(`${prefix}: ${err.message}\n`);
    return 2;
  }
  throw err;
}

// ---------------------------------------------------------------------------------------------- one parser per kind

/** Bytes for "4096", "64M", "1.5G", "1.5T" (K/M/G/T powers of 1024, as nvmetcli and the target config take them). */
export function sizeArg(flag: string, v: string): number {
  try {
    return parseSize(v, flag);
  } catch {
    throw new UsageError(`--${flag} ${v}: not a size; use bytes or a K/M/G/T suffix (e.g. 1G)`);
  }
}

/**
 * A number of `unit` (seconds or ms, the flag's own unit as nvme-cli reads it) from "30", "5s", "500ms", "2m": the
 * duration parser fio job files use (protocol/values/duration.ts); a whole number unless `whole` is false. Negative
 * where min allows (-1: "never").
 */
export function durationArg(flag: string, v: string, unit: 's' | 'ms', min = 0, max = Number.MAX_SAFE_INTEGER, whole = true): number {
  let n: number;
  try {
    n = parseDuration(v, unit);
  } catch {
    throw new UsageError(`--${flag} ${v}: not a duration; use a number of ${unit === 's' ? 'seconds' : 'milliseconds'} or a ms/s/m/h suffix (e.g. 5s)`);
  }
  if (whole && !Number.isSafeInteger(n)) throw new UsageError(`--${flag} ${v}: not a whole number of ${unit === 's' ? 'seconds' : 'milliseconds'}`);
  if (n < min || n > max) throw new UsageError(`--${flag} ${v}: out of range; use ${min}..${max} (${unit})`);
  return n;
}

/** An integer in [min, max], decimal or 0x-hex; negative where min allows (e.g. -1 for "off"). */
export function intArg(flag: string, v: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  return integer(`--${flag}`, v, min, max);
}

/** intArg for a value named `label` as it is (a positional: "nsid", "port id"). */
export function integer(label: string, v: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const t = v.trim();
  const n = /^-?\d+$/.test(t) ? Number(t) : /^0x[0-9a-f]+$/i.test(t) ? Number.parseInt(t.slice(2), 16) : Number.NaN;
  if (!Number.isSafeInteger(n)) throw new UsageError(`${label} ${v}: not an integer; use e.g. ${Math.max(min, 1)}`);
  if (n < min || n > max) throw new UsageError(`${label} ${v}: out of range; use ${min}..${max}`);
  return n;
}

/** A 64-bit key (reservation keys) as nvme-cli takes it: decimal or 0x-hex. */
export function u64Arg(flag: string, v: string): bigint {
  if (!/^(0x[0-9a-fA-F]{1,16}|\d{1,20})$/.test(v.trim())) throw new UsageError(`--${flag} ${v}: not a 64-bit number; use decimal or 0x-hex`);
  const n = BigInt(v.trim());
  if (n > 0xffff_ffff_ffff_ffffn) throw new UsageError(`--${flag} ${v}: does not fit in 64 bits`);
  return n;
}

/** A TCP port, 1..65535 (0 where `allowZero`: "pick a free one"). */
export function portArg(flag: string, v: string, allowZero = false): number {
  return intArg(flag, v, allowZero ? 0 : 1, 65535);
}

/** A subsystem or host name by the target's own rule (nvmet's; protocol's validateNvmetName). */
export function nqnArg(flag: string, v: string): string {
  const r = validateNvmetName(v);
  if (!r.ok) throw new UsageError(`--${flag} ${JSON.stringify(v)}: cannot name a subsystem or host (${r.reason}); use 1..223 bytes, e.g. nqn.2024-01.io.example:disk1`);
  return v;
}

/** An IPv4 or IPv6 address. */
export function addrArg(flag: string, v: string): string {
  if (isIP(v) === 0) throw new UsageError(`--${flag} ${v}: not an IP address; use e.g. 127.0.0.1 or ::1`);
  return v;
}

/** ADDR:PORT with IPv6 in brackets ([::1]:8080), by the config schema's own parser (protocol/values/host-port.ts). */
export function hostPortArg(flag: string, v: string, examples = '127.0.0.1:8080 or [::1]:8080'): { addr: string; port: number; family: 'ipv4' | 'ipv6' } {
  const hp = parseHostPort(v);
  if (hp === undefined) throw new UsageError(`--${flag} ${v}: not ADDR:PORT; use e.g. ${examples}`);
  return hp;
}

/** `-o, --output-format normal|json` (nvme-cli's flag). */
export function outputFormatOption(): Option {
  return new Option('-o, --output-format <fmt>', 'output format').choices(['normal', 'json']).default('normal');
}

/** Rows as aligned columns (two spaces apart), header first. */
export function table(head: readonly string[], rows: readonly (readonly string[])[]): string {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: readonly string[]): string => r.map((c, i) => c.padEnd(w[i] ?? 0)).join('  ').trimEnd();
  return [line(head), ...rows.map(line)].join('\n') + '\n';
}
