// The `nvme-tcp` bin: one subcommand per role. The target CLI is imported eagerly; the initiator and harness
// CLIs load on demand, so `nvme-tcp target` does not load the initiator and harness modules.
import { runTargetCli } from './target.js';

export const USAGE = `usage: nvme-tcp <command> [options]

commands:
  target        run an NVMe/TCP target (controller); "target ctl" manages a running one over HTTP
  discover      read a discovery log page from a target
  connect       connect to a subsystem and print what it exposes
  disconnect    disconnect a controller
  io            run reads/writes against a namespace
  queues        show the I/O queue layout a connect would use
  check-host    check this machine's NIC/CPU layout for queue settings
  resv-register | resv-acquire | resv-release | resv-report
                reservation commands on a namespace (nvme-cli's --crkey --nrkey --prkey --rtype --racqa
                --rrega --rrela --iekey --cptpl --eds), over a connection made with the connect flags
  bench         run a harness scenario or workload and write a report

"nvme-tcp <command> --help" describes each command's options.
`;

const INITIATOR_COMMANDS = new Set(['discover', 'connect', 'disconnect', 'io', 'queues', 'check-host', 'resv-register', 'resv-acquire', 'resv-release', 'resv-report']);

interface Io {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
}

const defaultIo: Io = { stdout: (s) => process.stdout.write(s), stderr: (s) => process.stderr.write(s) };

/** Dispatches `nvme-tcp <command> ...`; resolves to the exit status. */
export async function main(argv: readonly string[], io: Io = defaultIo, entry = false): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === undefined || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    io.stdout(USAGE);
    return 0;
  }
  // As the process entry the target may restart itself under an OpenSSL configuration (cli/openssl-reexec.ts).
  if (cmd === 'target') return runTargetCli(rest, entry ? { reexec: process.argv.slice(1) } : {});
  if (INITIATOR_COMMANDS.has(cmd)) return (await import('./initiator.js')).runInitiatorCli(cmd, rest);
  if (cmd === 'bench') return (await import('./harness.js')).runBenchCli(rest);
  io.stderr(`nvme-tcp: unknown command ${JSON.stringify(cmd)}; run "nvme-tcp --help" for the list\n`);
  return 2;
}

const isEntry = process.argv[1] !== undefined && /(^|[\\/])(cli[\\/]main\.[cm]?[jt]s|nvme-tcp(\.mjs)?)$/.test(process.argv[1]);
if (isEntry) {
  main(process.argv.slice(2), defaultIo, true).then(
    (code) => {
      process.exitCode = code;
      // Whatever a subcommand leaves open (a stray handle) must not keep a finished CLI alive.
      setTimeout(() => process.exit(code), 3000).unref();
    },
    (err: unknown) => {
      process.stderr.write(`nvme-tcp: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = 1;
      setTimeout(() => process.exit(1), 3000).unref();
    },
  );
}
