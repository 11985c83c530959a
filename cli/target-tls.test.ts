// `nvme-tcp target --tls MODE --tls-key HOSTNQN=KEY|@FILE` and the initiator's --tls-key: flags into config, one-line
// refusals that never print the key, redaction in the logger.
import { Buffer } from 'node:buffer';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatTlsKey } from '../protocol/tls/index.js';
import { buildTargetConfig, parseTargetArgs, startupLines, targetLoggerOptions } from './target.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'nvme-tcp-tls-cli-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const H1 = 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000011';
const K1 = formatTlsKey(1, Buffer.alloc(32, 5));
const build = async (argv: string[]) => (await buildTargetConfig(parseTargetArgs(argv))).config;

describe('--tls / --tls-key', () => {
  it('sets the mode on the --listen ports and the key on the host entry; @FILE reads the key', async () => {
    const f = join(dir, 'key.txt');
    await writeFile(f, `${K1}\n`, { mode: 0o600 });
    const c = await build(['--listen', '127.0.0.1:0', '--listen', '127.0.0.1:0', '--tls', 'allowed', '--tls-key', `${H1}=@${f}`]);
    expect(c.ports.map((p) => p.tls)).toEqual(['allowed', 'allowed']);
    expect(c.hosts).toEqual([{ nqn: H1, tlsKey: K1 }]);
    const lines = startupLines(c, c.ports.map((p) => ({ id: p.id, addr: p.addr, port: 4420 }))).join('\n');
    expect(lines).toContain(`host ${H1} has a TLS key`);
    expect(lines).toContain('port 1: TLS allowed');
    expect(lines).not.toContain(K1.slice(16, 30));
  });

  it.each([
    [['--tls', 'maybe'], '--tls maybe: unknown mode'],
    [['--tls-key', K1], '--tls-key: expected HOSTNQN=KEY'],
    [['--tls-key', `${H1}=${K1.replace(':01:', ':05:')}`], `--tls-key ${H1}=<key>: TLS PSK has hash id 05`],
    [['--tls-key', `${H1}=${K1.slice(0, -5)}AAAA:`], `--tls-key ${H1}=<key>: TLS PSK CRC-32 mismatch`],
    [['--tls-key', `${H1}=${formatTlsKey(2, Buffer.alloc(48, 1))}`], `--tls-key ${H1}=<key>: SHA-384 TLS PSKs`],
    [['--tls-key', `${H1}=@/nonexistent/key`], `--tls-key ${H1}=@/nonexistent/key: cannot read the file (ENOENT)`],
    [['--tls-key', `${H1}=${K1}`, '--tls-key', `${H1}=${K1}`], `--tls-key ${H1}=<key>: given twice`],
  ])('rejects %j with one line, never the key', (argv, start) => {
    let message = '';
    try {
      parseTargetArgs(argv);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message.startsWith(start), message).toBe(true);
    expect(message).not.toContain(K1.slice(16, 30));
  });

  it('the logger redacts tlsKey and tls_key', () => {
    const out: string[] = [];
    const log = pino(targetLoggerOptions('info'), new Writable({ write: (c: Buffer, _e, cb) => (out.push(c.toString()), cb()) }));
    log.info({ hosts: [{ nqn: H1, tlsKey: K1 }], tls_key: K1, body: { tlsKey: K1 } }, 'x');
    expect(out.join('')).not.toContain(K1.slice(16, 30));
    expect(out.join('')).toContain('<redacted>');
  });
});
