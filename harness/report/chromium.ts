// Headless Chromium (Debian's `chromium` package) for checking HTML reports: --dump-dom and --screenshot, fresh profile.
import { execFile } from 'node:child_process';
import { access, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

/** Path of a Chromium binary, or undefined (CHROMIUM env overrides). */
export async function findChromium(): Promise<string | undefined> {
  const env = process.env['CHROMIUM'];
  for (const p of env === undefined ? CANDIDATES : [env, ...CANDIDATES]) {
    try {
      await access(p);
      return p;
    } catch {
      /* next */
    }
  }
  return undefined;
}

export interface HeadlessResult {
  stdout: string;
  stderr: string;
  /** Console messages the page produced (Chromium logs them as INFO:CONSOLE lines with --enable-logging=stderr). */
  consoleLines: string[];
}

function run(bin: string, args: string[], timeoutMs: number): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(bin, args, { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err !== null && stdout === '') reject(new Error(`${path.basename(bin)} failed: ${err.message}\n${stderr.slice(-2000)}`));
      else resolve({ stdout, stderr });
    });
  });
}

/** Runs Chromium headless on a local HTML file with a throwaway profile; `mode` adds --dump-dom or --screenshot=PNG. */
export async function headless(bin: string, file: string, mode: { dumpDom: true } | { screenshot: string }, size = { width: 1360, height: 2400 }, timeoutMs = 30_000): Promise<HeadlessResult> {
  const profile = await mkdtemp(path.join(os.tmpdir(), 'nvme-tcp-chromium-'));
  try {
    const args = [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--hide-scrollbars',
      `--user-data-dir=${profile}`,
      '--enable-logging=stderr',
      '--v=0',
      `--window-size=${size.width},${size.height}`,
      'dumpDom' in mode ? '--dump-dom' : `--screenshot=${mode.screenshot}`,
      pathToFileURL(file).href,
    ];
    const { stdout, stderr } = await run(bin, args, timeoutMs);
    const consoleLines = stderr.split('\n').filter((l) => /:CONSOLE[:(]/.test(l));
    return { stdout, stderr, consoleLines };
  } finally {
    await rm(profile, { recursive: true, force: true });
  }
}

export async function screenshotPng(bin: string, file: string, size?: { width: number; height: number }): Promise<{ png: Buffer; consoleLines: string[] }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'nvme-tcp-shot-'));
  try {
    const out = path.join(dir, 'shot.png');
    const r = await headless(bin, file, { screenshot: out }, size);
    return { png: await readFile(out), consoleLines: r.consoleLines };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
