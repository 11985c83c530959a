// Keeps two rules of docs/style.md true: no function outside bench/ and the tests is over 80 lines, so a long
// operation reads as named steps or a table of named entries (routes, metrics) rather than one body to scroll; and
// library code takes options, never process.env (the bin reads the environment).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const MAX_LINES = 80;

/** Every function-like node with a body in `text` that spans more than `max` lines, as `name (N lines) at line L`. */
export function longFunctions(fileName: string, text: string, max: number): string[] {
  const src = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (n: ts.Node): void => {
    if (ts.isFunctionLike(n) && 'body' in n && n.body !== undefined) {
      const first = src.getLineAndCharacterOfPosition(n.getStart(src)).line;
      const last = src.getLineAndCharacterOfPosition(n.getEnd()).line;
      const lines = last - first + 1;
      if (lines > max) {
        const name = n.name?.getText(src) ?? (ts.isVariableDeclaration(n.parent) ? n.parent.name.getText(src) : '(anonymous)');
        found.push(`${name} (${lines} lines) at line ${first + 1}`);
      }
    }
    ts.forEachChild(n, visit);
  };
  visit(src);
  return found;
}

describe('function size', () => {
  it('finds a long function, an arrow and a method, and passes a short one', () => {
    const body = (n: number): string => Array.from({ length: n }, (_, i) => `  x += ${i};`).join('\n');
    const text = [
      `function long() {\n  let x = 0;\n${body(79)}\n}`,
      `const arrow = () => {\n  let x = 0;\n${body(79)}\n};`,
      `class C {\n  method() {\n    let x = 0;\n${body(79)}\n  }\n}`,
      `function short() {\n  let x = 0;\n${body(77)}\n}`,
    ].join('\n');
    expect(longFunctions('t.ts', text, MAX_LINES)).toEqual([
      'long (82 lines) at line 1',
      'arrow (82 lines) at line 83',
      'method (82 lines) at line 166',
    ]);
  });

  it(`no function outside bench/ and the tests is over ${MAX_LINES} lines`, () => {
    const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.ts'], { cwd: repoRoot, encoding: 'utf8' })
      .split('\n')
      .filter((f) => f !== '' && !f.endsWith('.test.ts') && !f.endsWith('.d.ts') && !f.startsWith('bench/') && !f.startsWith('test/'));
    expect(files.length).toBeGreaterThan(100);
    const long = files.flatMap((f) => longFunctions(f, readFileSync(path.join(repoRoot, f), 'utf8'), MAX_LINES).map((l) => `${f}: ${l}`));
    expect(long).toEqual([]);
  });
});

/** Every read of `process.env` (or `process['env']`) in `text`, as `line L`. */
export function envReads(fileName: string, text: string): string[] {
  const src = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (n: ts.Node): void => {
    const env =
      (ts.isPropertyAccessExpression(n) && n.name.text === 'env') || (ts.isElementAccessExpression(n) && ts.isStringLiteral(n.argumentExpression) && n.argumentExpression.text === 'env');
    if (env && ts.isIdentifier(n.expression) && n.expression.text === 'process') found.push(`line ${src.getLineAndCharacterOfPosition(n.getStart(src)).line + 1}`);
    ts.forEachChild(n, visit);
  };
  visit(src);
  return found;
}

describe('library code takes options; the bin reads the environment (docs/target.md "Environment")', () => {
  it('finds process.env and process["env"], and not a comment or another object', () => {
    const text = ["const a = process.env.X;", "const b = process['env'];", '// process.env in a comment', 'const c = other.env;'].join('\n');
    expect(envReads('t.ts', text)).toEqual(['line 1', 'line 2']);
  });

  it('no process.env under protocol/, connection/, target/ or initiator/', () => {
    const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', 'protocol', 'connection', 'target', 'initiator'], { cwd: repoRoot, encoding: 'utf8' })
      .split('\n')
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'));
    expect(files.length).toBeGreaterThan(100);
    const reads = files.flatMap((f) => envReads(f, readFileSync(path.join(repoRoot, f), 'utf8')).map((l) => `${f}: ${l}`));
    expect(reads).toEqual([]);
  });
});
