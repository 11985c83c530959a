#!/usr/bin/env node
// Package bin: runs the TypeScript CLI through tsx, so a checkout needs no build step.
import { register } from 'tsx/esm/api';
register();
await import('../cli/main.ts');
