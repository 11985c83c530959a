// The target CLI restarts itself under target/transport/tcp/openssl-no-tickets.cnf when it serves TLS without an
// OpenSSL configuration: OpenSSL reads num_tickets from its configuration once, at process start, and Node 20 has no
// per-context setting, while the Linux host fails a queue on the NewSessionTicket a default server sends (docs/tls.md,
// "NewSessionTicket"). The child inherits stdio; signals are passed on and its exit status is returned.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { TargetConfig } from '../target/index.js';

export const NO_TICKETS_CNF = fileURLToPath(new URL('../target/transport/tcp/openssl-no-tickets.cnf', import.meta.url));

/** Set in the child (and settable by a user: "0" keeps the process as started, with the start-up warning). */
export const REEXEC_ENV = 'NVME_TCP_OPENSSL_REEXEC';

/** This process was started with an OpenSSL configuration (OPENSSL_CONF, --openssl-config, NODE_OPTIONS). */
export function hasOpensslConfig(env: NodeJS.ProcessEnv = process.env, execArgv: readonly string[] = process.execArgv): boolean {
  return env['OPENSSL_CONF'] !== undefined || [...execArgv, env['NODE_OPTIONS'] ?? ''].some((a) => a.includes('--openssl-config'));
}

/** Whether the target should restart itself with the no-tickets configuration before serving `config`. */
export function needsOpensslReexec(config: TargetConfig, env: NodeJS.ProcessEnv = process.env, execArgv: readonly string[] = process.execArgv): boolean {
  if (env[REEXEC_ENV] !== undefined) return false;
  if (!config.ports.some((p) => p.tls !== undefined && p.tls !== 'none')) return false;
  return !hasOpensslConfig(env, execArgv) && existsSync(NO_TICKETS_CNF);
}

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
const SIGNAL_NUMBER: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };

/**
 * Run `node [execArgv] --openssl-config=NO_TICKETS_CNF <script> [args]` (`scriptAndArgs` = process.argv.slice(1)) and
 * resolve with its exit status (128 + signal number when it died of one, as a shell reports it).
 */
export function reexecWithNoTickets(scriptAndArgs: readonly string[], execArgv: readonly string[] = process.execArgv): Promise<number> {
  const child = spawn(process.execPath, [...execArgv, `--openssl-config=${NO_TICKETS_CNF}`, ...scriptAndArgs], {
    stdio: 'inherit',
    env: { ...process.env, [REEXEC_ENV]: '1' },
  });
  const forward = (sig: NodeJS.Signals): void => {
    child.kill(sig);
  };
  for (const s of SIGNALS) process.on(s, forward);
  return new Promise<number>((resolve) => {
    const done = (code: number): void => {
      for (const s of SIGNALS) process.off(s, forward);
      resolve(code);
    };
    child.once('error', () => done(1));
    child.once('exit', (code, signal) => done(code ?? 128 + (signal !== null ? (SIGNAL_NUMBER[signal] ?? 0) : 0)));
  });
}
