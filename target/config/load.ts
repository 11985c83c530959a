// Reading, writing and the built-in default of the target's JSON config; validation is ./schema.ts.
import { open, readFile, rename, rm } from 'node:fs/promises';
import { ConfigError, parseTargetConfig } from './schema.js';
import type { TargetConfig } from '../model/config.js';

export const DEFAULT_SUBSYSTEM_NQN = 'nqn.2024-01.io.nvme-tcp-ts:default';
const DEFAULT_LISTEN = { addr: '127.0.0.1', port: 4420 } as const;

/** What `nvme-tcp target` serves with no flags: 127.0.0.1:4420, one subsystem, one 1 GiB RAM namespace, any host. */
export function defaultConfig(): TargetConfig {
  return {
    ports: [{ id: 1, addr: DEFAULT_LISTEN.addr, port: DEFAULT_LISTEN.port }],
    subsystems: [
      {
        nqn: DEFAULT_SUBSYSTEM_NQN,
        allowAnyHost: true,
        namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1G' } }],
      },
    ],
  };
}

/** Parses JSON text and validates it; every failure is a one-line ConfigError prefixed with `where`. */
export function parseConfigText(text: string, where = 'config'): TargetConfig {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`${where}: not valid JSON (${err instanceof Error ? err.message : String(err)}); fix the syntax`, '', { cause: err });
  }
  return parseTargetConfig(json, where);
}

/** Reads and validates a JSON config file. */
export async function loadConfig(path: string): Promise<TargetConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`config: cannot read ${path} (${errnoText(err)}); check the path`, '', { cause: err });
  }
  return parseConfigText(text, `config ${path}`);
}

/**
 * Validates and writes `config` as pretty JSON. The file is replaced atomically (write + fsync a temp
 * file, then rename), so a crash never leaves a half-written config behind.
 */
export async function saveConfig(path: string, config: TargetConfig): Promise<void> {
  const valid = parseTargetConfig(config);
  const tmp = `${path}.tmp-${process.pid}`;
  const fh = await open(tmp, 'w', 0o644);
  try {
    await fh.writeFile(`${JSON.stringify(valid, null, 2)}\n`, 'utf8');
    await fh.sync();
  } catch (err) {
    await fh.close();
    await rm(tmp, { force: true });
    throw err;
  }
  await fh.close();
  await rename(tmp, path);
}

export function errnoText(err: unknown): string {
  if (err && typeof err === 'object' && 'code' in err && typeof err.code === 'string') {
    // Node words fs errors as "ENOENT: no such file or directory, open '/x'": keep the middle part.
    const m = /^[A-Z]+: ([^,]+)/.exec(err instanceof Error ? err.message : '');
    return m?.[1] ?? err.code;
  }
  return err instanceof Error ? err.message : String(err);
}
