// Reservation state that persists through power loss (PTPL, NVMe Base 2.0 §8.19.3): one JSON file per target holding
// every namespace whose PTPL is on. Every change replaces the file atomically (temp file, fsync, rename, fsync of the
// directory), so a crash at any moment leaves either the previous or the new state on disk, never a torn one.
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import type { PersistedResv } from './core/reservation.js';

export const RESV_STATE_VERSION = 1;

export interface ResvStateFile {
  version: number;
  /** Keyed by `${subnqn} ${nsid}` (an NQN has no spaces). */
  namespaces: Record<string, PersistedResv>;
}

export class ResvStateError extends Error {
  readonly code = 'NVMEOF_ERR_RESV_STATE';
  constructor(
    readonly file: string,
    message: string,
  ) {
    super(`${file}: ${message}`);
    this.name = 'ResvStateError';
  }
}

export function resvStateKey(subnqn: string, nsid: number): string {
  return `${subnqn} ${nsid}`;
}

/** The file's contents; a missing file is an empty state, anything unreadable is an error naming the file. */
export function loadResvState(file: string): Map<string, PersistedResv> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Map();
    throw new ResvStateError(file, `cannot read the reservation state (${(err as Error).message}); fix its permissions or remove it`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ResvStateError(file, 'is not JSON; it is written atomically, so it was edited by hand: restore or remove it');
  }
  const p = parsed as Partial<ResvStateFile>;
  if (typeof p !== 'object' || p === null || p.version !== RESV_STATE_VERSION || typeof p.namespaces !== 'object' || p.namespaces === null) {
    throw new ResvStateError(file, `is not a version ${RESV_STATE_VERSION} reservation state file; remove it to start without persisted reservations`);
  }
  return new Map(Object.entries(p.namespaces));
}

/** Replace the file with `state`, atomically and durably. */
export function saveResvState(file: string, state: ReadonlyMap<string, PersistedResv>): void {
  const body: ResvStateFile = { version: RESV_STATE_VERSION, namespaces: Object.fromEntries(state) };
  const tmp = `${file}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, `${JSON.stringify(body, null, 2)}\n`);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    unlinkSync(tmp);
    throw err;
  }
  closeSync(fd);
  renameSync(tmp, file);
  // The rename itself is durable only once the directory entry is on disk.
  const dfd = openSync(path.dirname(file), 'r');
  try {
    fsyncSync(dfd);
  } finally {
    closeSync(dfd);
  }
}
