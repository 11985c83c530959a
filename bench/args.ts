// Command-line flags of the benches: `--name value`.

/** The value after `--name`, if the flag is given. */
export function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
