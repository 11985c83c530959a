// Keeps README.md and docs/ true to the tree: the layout section names exactly the folders the repository has, every
// relative link (and its #anchor) lands, the dependency table matches package.json, and the quick start prints what
// the README says it prints.
import { spawn } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const read = (rel: string): string => readFileSync(path.join(repoRoot, rel), 'utf8');

/** Files git knows (tracked, or new and not ignored) that are still in the working tree. */
function repoFiles(): string[] {
  const out = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], { cwd: repoRoot, encoding: 'utf8' });
  return [...new Set(out.split('\0').filter((f) => f !== '' && existsSync(path.join(repoRoot, f))))];
}

/** True when `rel` is a file git knows or a folder holding one. */
function inRepo(files: readonly string[], rel: string): boolean {
  const p = rel.replace(/\/+$/, '');
  return files.some((f) => f === p || f.startsWith(`${p}/`));
}

/** The body of the section under `## title` (to the next `## ` heading). */
function section(md: string, title: string): string {
  const lines = md.split('\n');
  const start = lines.findIndex((l) => l.trim() === `## ${title}`);
  if (start < 0) throw new Error(`README.md has no "## ${title}" section`);
  const end = lines.findIndex((l, i) => i > start && /^## /.test(l));
  return lines.slice(start + 1, end < 0 ? undefined : end).join('\n');
}

/** The first fenced block of a section. */
function firstFence(body: string): string {
  const m = /^```[^\n]*\n([\s\S]*?)^```/m.exec(body);
  if (!m?.[1]) throw new Error('no fenced block');
  return m[1];
}

/**
 * The layout block's entries as repository paths. Each line is `NAME  description`; NAME at column 0 is a top-level
 * path, NAME indented by 2 k spaces sits inside the last entry of depth k − 1.
 */
export function layoutPaths(block: string): { paths: string[]; topLevel: string[] } {
  const paths: string[] = [];
  const topLevel: string[] = [];
  const stack: string[] = [];
  for (const line of block.split('\n')) {
    if (line.trim() === '') continue;
    const m = /^( *)(\S+)/.exec(line);
    if (!m?.[2]) continue;
    const indent = m[1]?.length ?? 0;
    if (indent % 2 !== 0) throw new Error(`layout line indented by an odd number of spaces: "${line}"`);
    const depth = indent / 2;
    if (depth > stack.length) throw new Error(`layout line nested under nothing: "${line}"`);
    stack.length = depth;
    const parent = stack.join('');
    const name = m[2];
    const full = parent + name;
    stack.push(name.endsWith('/') ? name : `${name}/`);
    paths.push(full);
    if (depth === 0) topLevel.push(full.replace(/\/+$/, ''));
  }
  return { paths, topLevel };
}

/** GitHub's heading anchors for a Markdown file: lower case, punctuation dropped, spaces to '-', repeats numbered. */
export function anchors(md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of stripFences(md).split('\n')) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m?.[1]) continue;
    const text = m[1].replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const base = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

function stripFences(md: string): string {
  return md.replace(/^```[\s\S]*?^```/gm, '');
}

/** Relative Markdown links `[text](target)` outside code: fenced blocks and inline code spans are skipped. */
export function relativeLinks(md: string): string[] {
  const text = stripFences(md).replace(/`[^`\n]*`/g, '');
  const links: string[] = [];
  for (const m of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    const target = m[1];
    if (!target || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
    links.push(target);
  }
  return links;
}

describe('README.md and docs/', () => {
  const files = repoFiles();
  const readme = read('README.md');

  it('the layout section names only paths that exist, and every top-level folder', () => {
    const { paths, topLevel } = layoutPaths(firstFence(section(readme, 'Layout')));
    expect(paths.length).toBeGreaterThan(10);
    const missing = paths.filter((p) => !inRepo(files, p));
    expect(missing, 'named in the README layout but not in git ls-files').toEqual([]);
    const folders = [...new Set(files.filter((f) => f.includes('/')).map((f) => f.slice(0, f.indexOf('/'))))].sort();
    const unnamed = folders.filter((f) => !topLevel.includes(f));
    expect(unnamed, 'top-level folders in git ls-files that the README layout does not name').toEqual([]);
  });

  const mdFiles = ['README.md', ...readdirSync(path.join(repoRoot, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  it.each(mdFiles)('every relative link in %s points to an existing file and heading', (rel) => {
    const md = read(rel);
    const broken: string[] = [];
    for (const link of relativeLinks(md)) {
      const [target = '', anchor] = link.split('#', 2);
      const file = target === '' ? rel : path.posix.normalize(path.posix.join(path.posix.dirname(rel), decodeURI(target)));
      if (file.startsWith('../') || !inRepo(files, file)) {
        broken.push(`${link} (no such file: ${file})`);
        continue;
      }
      if (anchor !== undefined && file.endsWith('.md') && !anchors(file === rel ? md : read(file)).has(decodeURIComponent(anchor))) {
        broken.push(`${link} (no heading #${anchor} in ${file})`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('the dependency table lists exactly the dependencies of package.json', () => {
    const pkg = JSON.parse(read('package.json')) as { dependencies?: Record<string, string>; devDependencies?: Record<string, string> };
    const declared = [...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.devDependencies ?? {})].sort();
    const table = section(readme, 'Dependencies, and why each is here');
    // The packages are the backticked names of each row's first cell.
    const firstCells = table.split('\n').filter((l) => l.startsWith('|') && !/^\|\s*(package|-+)\s*\|/.test(l)).map((l) => l.split('|')[1] ?? '');
    const named = [...new Set(firstCells.flatMap((c) => [...c.matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? '')))].filter((n) => n !== '').sort();
    expect(named).toEqual(declared);
  });

  it('@types/node and the README follow the Node that engines names', () => {
    const pkg = JSON.parse(read('package.json')) as { engines?: { node?: string }; devDependencies?: Record<string, string> };
    const min = Number(/^>=\s*(\d+)/.exec(pkg.engines?.node ?? '')?.[1]);
    expect(min).toBeGreaterThanOrEqual(22);
    expect(pkg.devDependencies?.['@types/node'], 'the Node typings are those of the oldest Node engines allows').toMatch(new RegExp(`^\\^${min}\\.`));
    // "Node 20+" states a dependency's own range; any other "Node NN" below the minimum is stale text.
    const stale = [...readme.matchAll(/Node (\d+)(?![\d+])/g)].filter((m) => Number(m[1]) < min).map((m) => m[0]);
    expect(stale).toEqual([]);
  });

  it('the quick start prints the lines the README shows, and its connect command works', async () => {
    const shown = firstFence(section(readme, 'Quick start with the Linux host'))
      .split('\n')
      .filter((l) => l.startsWith('# '))
      .map((l) => l.slice(2));
    expect(shown.length).toBeGreaterThanOrEqual(3);
    // `npm start` is `node bin/nvme-tcp.mjs target` (dist/ when built, else the sources through tsx); the sources here,
    // so the test needs no build; port 0 instead of 4420 so the test never collides with a real target.
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'cli', 'main.ts'), 'target', '--listen', '127.0.0.1:0', '--log-level', 'silent'], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      const lastShown = shown[shown.length - 1] ?? '';
      const lastPrefix = lastShown.replace(/ -s 4420 .*/, '');
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no start-up lines in 20 s: ${out}`)), 20_000);
        child.stdout.on('data', () => {
          if (out.split('\n').some((l) => l.startsWith(lastPrefix) && l.includes(' -n '))) {
            clearTimeout(t);
            resolve();
          }
        });
        child.once('exit', (code) => reject(new Error(`target exited ${code}: ${out}`)));
      });
      const port = /listening on 127\.0\.0\.1:(\d+)/.exec(out)?.[1];
      expect(port).toBeDefined();
      const printed = out.split('\n').map((l) => l.replaceAll(`127.0.0.1:${port}`, '127.0.0.1:4420').replaceAll(`-s ${port}`, '-s 4420'));
      for (const line of shown) expect(printed).toContain(line);

      // "Our own host does the same": the README's `npx nvme-tcp connect ...` against this target.
      const ours = /`npx nvme-tcp (connect [^`]+)`/.exec(section(readme, 'Quick start with the Linux host'))?.[1];
      expect(ours).toBeDefined();
      const args = (ours ?? '').replace('-s 4420', `-s ${port}`).split(/\s+/);
      const conn = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'cli', 'main.ts'), ...args], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
      let connOut = '';
      conn.stdout.on('data', (d: Buffer) => (connOut += d.toString()));
      conn.stderr.on('data', (d: Buffer) => (connOut += d.toString()));
      const code = await new Promise<number | null>((resolve) => conn.once('exit', resolve));
      expect(connOut).toMatch(/state live/);
      expect(code).toBe(0);
    } finally {
      child.kill('SIGTERM');
    }
  });

  it("the quick start's remote-host example starts a target that tells hosts the advertised address", async () => {
    const example = /`npx nvme-tcp (target --listen \S+ --advertise \S+)`/.exec(section(readme, 'Quick start with the Linux host'))?.[1];
    expect(example).toBeDefined();
    const args = (example ?? '').split(/\s+/);
    const advertised = args[args.indexOf('--advertise') + 1] ?? '';
    // The README listens on 0.0.0.0:4420; the test on 127.0.0.1 port 0, so it never collides with a real target.
    args[args.indexOf('--listen') + 1] = '127.0.0.1:0';
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'cli', 'main.ts'), ...args, '--log-level', 'silent'], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no connect line in 20 s: ${out}`)), 20_000);
        child.stdout.on('data', () => {
          if (/^nvme connect /m.test(out)) {
            clearTimeout(t);
            resolve();
          }
        });
        child.once('exit', (code) => reject(new Error(`target exited ${code}: ${out}`)));
      });
      const port = /listening on 127\.0\.0\.1:(\d+)/.exec(out)?.[1];
      expect(out).toContain(`(advertised as ${advertised}:${port})`);
      expect(out).toMatch(new RegExp(`^nvme discover -t tcp -a ${advertised.replaceAll('.', '\\.')} -s ${port}$`, 'm'));
      expect(out).toMatch(new RegExp(`^nvme connect -t tcp -a ${advertised.replaceAll('.', '\\.')} -s ${port} -n `, 'm'));
    } finally {
      child.kill('SIGTERM');
    }
  });
});
