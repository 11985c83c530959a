// Keeps README.md and docs/ true to the tree: the layout section names exactly the folders the repository has, every
// relative link (and its #anchor) lands, every repository path a doc cites as code exists, the code names that
// style.md and architecture.md cite are in the files they cite, architecture.md's folder table names every source
// folder, target.md's VS is the one the controller reports, the dependency table matches package.json, and the quick
// start prints what the README says it prints.
import { spawn } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { NVME_VS } from '../../target/core/controller.js';

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

/** Inline code spans outside fenced blocks, in order. */
export function codeSpans(md: string): string[] {
  return [...stripFences(md).matchAll(/`([^`\n]+)`/g)].map((m) => m[1] ?? '');
}

/**
 * The units a doc makes one claim in: a paragraph, a list item or a table row. A code name is read against the paths
 * cited in the same unit ("`#wholeHeader` ... (`protocol/tcp/reader.ts`)").
 */
export function claimUnits(md: string): string[] {
  const units: string[] = [];
  let cur: string[] = [];
  const flush = (): void => {
    if (cur.length > 0) units.push(cur.join('\n'));
    cur = [];
  };
  for (const line of stripFences(md).split('\n')) {
    if (line.trim() === '' || /^#{1,6}\s/.test(line)) {
      flush();
      continue;
    }
    if (/^\s*(?:[-*]|\d+\.)\s/.test(line) || line.startsWith('|')) flush();
    cur.push(line);
    if (line.startsWith('|')) flush();
  }
  flush();
  return units;
}

/** `a/{b,c}/d` as `a/b/d` and `a/c/d` (the one shell brace form docs use). */
function expandBraces(p: string): string[] {
  const m = /^(.*?)\{([^{}]*)\}(.*)$/.exec(p);
  if (!m) return [p];
  return (m[2] ?? '').split(',').flatMap((alt) => expandBraces(`${m[1] ?? ''}${alt}${m[3] ?? ''}`));
}

/**
 * A code span read as repository paths, or [] when it is not one. A repository path starts with a top-level entry git
 * knows (`harness/lab.ts`, `package.json`); anything else is no claim about this tree: commands (a space),
 * absolute paths (`/etc/nvme/hostnqn`, `/var/tmp/...`), paths beside the clone (`../shared/...`), names relative to
 * a folder the sentence gave (`queue.ts`) and build output (`dist/`, not in git). `{a,b}` is expanded; a `:line`
 * suffix and an `#anchor` are dropped.
 */
export function citedPaths(span: string, topLevel: ReadonlySet<string>): string[] {
  if (/\s/.test(span) || /^[a-z][a-z0-9+.-]*:/i.test(span)) return [];
  const p = span.replace(/#.*$/, '').replace(/:\d+(?:-\d+)?$/, '');
  const first = p.split('/')[0] ?? '';
  if (!topLevel.has(first) || (!p.includes('/') && !/\.\w+$/.test(p))) return [];
  return expandBraces(p);
}

/** True when `rel` (a path, or a glob with `*`) names a file git knows or a folder holding one; `x.js` may be `x.ts`. */
function citedExists(files: readonly string[], rel: string): boolean {
  if (rel.includes('*')) {
    const re = new RegExp(`^${rel.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}(?:/|$)`);
    return files.some((f) => re.test(f));
  }
  return inRepo(files, rel) || (rel.endsWith('.js') && inRepo(files, rel.replace(/\.js$/, '.ts')));
}

/**
 * The code names a span cites: `#private`, a compound camelCase or PascalCase name, a CONST_CASE name; `X.y(args)`
 * and `X<T>` give their parts. Not checked: single plain words (`state`, `Request`, `strict`: too common to check
 * this way), the platform's globals (`setTimeout`, `Buffer`: not ours), and a pattern's X (`encodeX`, `parseXCmd`).
 */
export function citedNames(span: string): string[] {
  const s = span.replace(/\(.*\)$/, '').replace(/<.*>$/, '');
  if (!/^#?[A-Za-z_$][\w$]*(?:\.#?[A-Za-z_$][\w$]*)*$/.test(s)) return [];
  return s
    .split('.')
    .filter((n) => /^#[A-Za-z_$]/.test(n) || /[a-z][A-Z]/.test(n) || /^[A-Z][A-Z0-9]*_[A-Z0-9_]+$/.test(n))
    .filter((n) => !(n in globalThis) && !/[a-z]X(?:[A-Z]|$)/.test(n));
}

/** Files under the given repository paths (a file, or a folder); `x.js` is read as `x.ts` when only that exists. */
function filesUnder(files: readonly string[], paths: readonly string[]): string[] {
  return files.filter((f) =>
    paths.some((p) => {
      const q = p.replace(/\/+$/, '');
      return f === q || f === q.replace(/\.js$/, '.ts') || f.startsWith(`${q}/`);
    }),
  );
}

const fileText = new Map<string, string>();
function textOf(rel: string): string {
  let t = fileText.get(rel);
  if (t === undefined) {
    t = readFileSync(path.join(repoRoot, rel), 'utf8');
    fileText.set(rel, t);
  }
  return t;
}

/** `name` as a whole identifier in `text` (`#x` literally, `x` not inside a longer name). */
function hasName(text: string, name: string): boolean {
  const escaped = name.replace(/[$]/g, '\\$');
  return new RegExp(`${name.startsWith('#') ? '' : '(?<![\\w$#])'}${escaped}(?![\\w$])`).test(text);
}

/** Top-level folders and files git knows. */
function topLevelOf(files: readonly string[]): Set<string> {
  return new Set(files.map((f) => f.split('/')[0] ?? ''));
}

/** The cited paths git does not know, less those git ignores (output a doc says a command writes: `reports/`). */
function missingCited(files: readonly string[], cited: readonly string[]): string[] {
  const missing = [...new Set(cited.filter((p) => !citedExists(files, p)))];
  if (missing.length === 0) return [];
  let ignored = '';
  try {
    ignored = execFileSync('git', ['check-ignore', '--no-index', '--', ...missing.filter((p) => !p.includes('*'))], { cwd: repoRoot, encoding: 'utf8' });
  } catch {
    // exit 1: none of them is ignored
  }
  const ig = new Set(ignored.split('\n').filter((l) => l !== ''));
  return missing.filter((p) => !ig.has(p));
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

  const topLevel = topLevelOf(files);
  it.each(mdFiles)('every repository path %s cites as code exists', (rel) => {
    const cited = codeSpans(read(rel)).flatMap((s) => citedPaths(s, topLevel));
    expect(missingCited(files, cited), `cited in ${rel} as code but not in git ls-files`).toEqual([]);
  });

  // The two pages that explain the code by its names: each name must be in a file its sentence cites (or, where the
  // sentence cites none, somewhere in the tree), so a renamed or removed function shows here.
  const sourceFiles = files.filter((f) => /\.(?:ts|mjs|cjs|json|sh)$/.test(f) && !f.startsWith('docs/'));
  it.each(['docs/style.md', 'docs/architecture.md'])('every code name %s cites is in the file it is attributed to', (rel) => {
    const wrong: string[] = [];
    for (const unit of claimUnits(read(rel))) {
      const spans = [...unit.matchAll(/`([^`\n]+)`/g)].map((m) => m[1] ?? '');
      const cited = spans.flatMap((s) => citedPaths(s, topLevel)).filter((p) => citedExists(files, p));
      const where = cited.length > 0 ? filesUnder(files, cited) : sourceFiles;
      for (const name of spans.flatMap(citedNames)) {
        if (where.some((f) => hasName(textOf(f), name))) continue;
        const elsewhere = sourceFiles.filter((f) => hasName(textOf(f), name));
        wrong.push(`${name}: not in ${cited.length > 0 ? cited.join(', ') : 'the source'}${elsewhere.length > 0 ? ` (it is in ${elsewhere.slice(0, 3).join(', ')})` : ''}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it("target.md's controller model states the version the controller reports (NVME_VS)", () => {
    const stated = [...read('docs/target.md').matchAll(/\bVS (\d+)\.(\d+)(?:\.(\d+))?/g)];
    expect(stated.length, 'docs/target.md names no "VS x.y"').toBeGreaterThan(0);
    // VS: MJR bits 31:16, MNR 15:8, TER 7:0 (NVMe Base 2.0 §3.1.4.2).
    const reported = `${NVME_VS >>> 16}.${(NVME_VS >>> 8) & 0xff}.${NVME_VS & 0xff}`;
    for (const m of stated) expect(`${m[1]}.${m[2]}.${m[3] ?? 0}`).toBe(reported);
  });

  it("architecture.md's folder table names every source folder and each of its subfolders", () => {
    const table = section(read('docs/architecture.md'), 'Folders and their public faces')
      .split('\n')
      .filter((l) => l.startsWith('|') && !/^\|\s*(folder|-+)\s*\|/.test(l));
    const rows = table.map((l) => {
      const cells = l.split('|');
      const names = [...(cells[1] ?? '').matchAll(/`([^`]+)`/g)].map((m) => (m[1] ?? '').replace(/\/+$/, ''));
      return { names, spans: [...(cells[2] ?? '').matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? '') };
    });
    // docs/ and the dot folders (.ci/) are not code; README's layout names them.
    const folders = [...new Set(files.filter((f) => f.includes('/')).map((f) => f.slice(0, f.indexOf('/'))))].filter((f) => f !== 'docs' && !f.startsWith('.'));
    const unnamed: string[] = [];
    for (const top of folders) {
      const row = rows.find((r) => r.names.includes(top));
      if (!row) {
        unnamed.push(`${top}/`);
        continue;
      }
      const subs = [...new Set(files.filter((f) => f.startsWith(`${top}/`) && f.split('/').length > 2).map((f) => f.split('/')[1] ?? ''))];
      for (const sub of subs) {
        if (!row.spans.some((s) => s.startsWith(`${sub}/`) || s.startsWith(`${top}/${sub}/`) || s === `${top}/${sub}`)) unnamed.push(`${top}/${sub}/`);
      }
    }
    expect(unnamed, 'folders git knows that the table does not name').toEqual([]);
  });

  it("architecture.md's error table lists every exported error class with the code its file gives it", () => {
    const rows = section(read('docs/architecture.md'), 'Errors')
      .split('\n')
      .filter((l) => l.startsWith('| `'))
      .map((l) => l.split('|').map((c) => [...c.matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? '')));
    const listed = new Map(rows.map((r) => [`${r[3]?.[0] ?? ''}:${r[1]?.[0] ?? ''}`, r[2] ?? []]));
    const wrong: string[] = [];
    const found = new Set<string>();
    for (const f of sourceFiles.filter((x) => x.endsWith('.ts') && !x.endsWith('.test.ts'))) {
      const text = textOf(f);
      for (const m of text.matchAll(/^export (?:abstract )?class (\w+) extends (\w*Error)\b/gm)) {
        const key = `${f}:${m[1] ?? ''}`;
        found.add(key);
        const codes = listed.get(key);
        if (codes === undefined) {
          wrong.push(`${m[1]} (${f}) is not in the table`);
          continue;
        }
        // The class body: to the next top-level declaration.
        const body = text.slice(m.index, text.indexOf('\n}', m.index));
        for (const c of codes.filter((x) => /^[A-Z][A-Z0-9_]+$/.test(x))) {
          const named = body.includes(`'${c}'`) || new RegExp(`\\bcode = (\\w+)`).exec(body)?.[1] === c || text.includes(`const ${c} = '${c}'`);
          if (!named) wrong.push(`${m[1]} (${f}) has no code ${c}`);
        }
      }
    }
    for (const key of listed.keys()) if (!found.has(key)) wrong.push(`${key.replace(':', ': ')} is listed but no exported error class of that name is there`);
    expect(wrong).toEqual([]);
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

  it('@types/node, the README and the pages on the tree follow the Node that engines names', () => {
    const pkg = JSON.parse(read('package.json')) as { engines?: { node?: string }; devDependencies?: Record<string, string> };
    const min = Number(/^>=\s*(\d+)/.exec(pkg.engines?.node ?? '')?.[1]);
    expect(min).toBeGreaterThanOrEqual(22);
    expect(pkg.devDependencies?.['@types/node'], 'the Node typings are those of the oldest Node engines allows').toMatch(new RegExp(`^\\^${min}\\.`));
    // "Node 20+" states a dependency's own range; any other "Node NN" below the minimum is stale text, in the README and
    // in the pages that describe the tree as it is (the journal and the measurement pages keep the Node they ran on).
    for (const rel of ['README.md', 'docs/architecture.md', 'docs/style.md', 'docs/target.md', 'docs/harness.md', 'docs/peers.md']) {
      const stale = [...read(rel).matchAll(/Node (\d+)(?![\d+])/g)].filter((m) => Number(m[1]) < min).map((m) => m[0]);
      expect(stale, rel).toEqual([]);
    }
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
