// The `nvme-tcp` bin: one subcommand per role. Each verb's module loads when that verb runs (a dynamic import), so
// `--version`, `--help` and the initiator verbs do not load the target (~800 ms of module loading) and
// `nvme-tcp target` does not load the initiator or the harness. cli/main.test.ts checks that --version loads no
// target module.
import { CommanderError, type Command } from 'commander';
import { defaultIo, newCommand, usageLine, VERSION, type CliIo } from './args.js';
import { INITIATOR_VERBS, VERBS } from './verbs.js';

/** The top-level command: the verb list (stubs; each verb parses its own words), --help and --version. */
function topCommand(io: CliIo): Command {
  const p = newCommand('nvme-tcp', io).usage('<command> [options]').version(VERSION, '-V, --version', 'print the version');
  for (const [name, description] of Object.entries(VERBS)) {
    const c = p.command(name).description(description);
    if (name === 'list-subsys') c.alias('list');
  }
  return p;
}

/** The top-level help text. */
export const USAGE = topCommand(defaultIo).helpInformation() + '\n"nvme-tcp <command> --help" describes each command\'s options.\n';

/** Dispatches `nvme-tcp <command> ...`; resolves to the exit status. */
export async function main(argv: readonly string[], io: CliIo = defaultIo, entry = false): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === 'help' && rest[0] !== undefined) return main([rest[0], '--help'], io, entry);
  if (cmd === undefined || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    io.stdout(USAGE);
    return 0;
  }
  // As the process entry the target may restart itself under an OpenSSL configuration (cli/openssl-reexec.ts).
  if (cmd === 'target') return (await import('./target.js')).runTargetCli(rest, entry ? { reexec: process.argv.slice(1) } : { stdout: io.stdout, stderr: io.stderr });
  if (cmd in INITIATOR_VERBS || cmd === 'list') return (await import('./initiator.js')).runInitiatorCli(cmd, rest, io);
  if (cmd === 'bench') return (await import('./harness.js')).runBenchCli(rest, ...(io === defaultIo ? [] : [io]));
  // Not a verb: --version, or an unknown word (commander suggests the nearest verb).
  try {
    topCommand(io).parse([...argv], { from: 'user' });
    return 0;
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    if (err.code === 'commander.version' || err.code === 'commander.helpDisplayed') return 0;
    const line = err.code === 'commander.unknownCommand' ? usageLine(err).replace(/^unknown command '([^']*)'/, 'unknown command "$1"') : usageLine(err);
    io.stderr(`nvme-tcp: ${line}; run "nvme-tcp --help" for the list\n`);
    return 2;
  }
}

const isEntry = process.argv[1] !== undefined && /(^|[\\/])(cli[\\/]main\.[cm]?[jt]s|nvme-tcp(\.mjs)?)$/.test(process.argv[1]);
if (isEntry) {
  // `nvme-tcp connect ... | head -1`: a reader that went away is the end of the output, not an error.
  for (const s of [process.stdout, process.stderr]) {
    s.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
      throw err;
    });
  }
  main(process.argv.slice(2), defaultIo, true).then(
    (code) => {
      process.exitCode = code;
      // Whatever a subcommand leaves open (a stray handle) must not keep a finished CLI alive.
      setTimeout(() => process.exit(code), 3000).unref();
    },
    (err: unknown) => {
      // One line: the message, with the code when there is one; stacks are for bugs (NODE_DEBUG=nvme-tcp shows it).
      const e = err as Error & { code?: string };
      const detail = process.env.NODE_DEBUG?.includes('nvme-tcp') === true ? (e.stack ?? e.message) : (e.message ?? String(err));
      process.stderr.write(`nvme-tcp: ${detail}${e.code !== undefined ? ` [${e.code}]` : ''}\n`);
      process.exitCode = 1;
      setTimeout(() => process.exit(1), 3000).unref();
    },
  );
}
