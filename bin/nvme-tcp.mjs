#!/usr/bin/env node
// Package bin: runs the compiled CLI (dist/, built by `npm run build`, which `npm ci` runs through `prepare`), so a
// start costs no TypeScript compilation. A checkout without dist/ falls back to the sources through tsx.
import { existsSync } from 'node:fs';
import module from 'node:module';

// Node >= 22.1 keeps V8's compiled code of every module on disk (in the OS temp directory): a later start skips
// parsing and compiling the ~300 modules the target and its dependencies load.
module.enableCompileCache?.();

const compiled = new URL('../dist/cli/main.js', import.meta.url);
if (existsSync(compiled)) {
  await import(compiled.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../cli/main.ts');
}
