// NamespaceBackend: what a namespace stores its blocks in. Backends see byte offsets and buffers, never PDUs
// (Linux nvmet io-cmd-file.c / io-cmd-bdev.c play this role).
import type { Lent as ReadLent } from '../../protocol/tcp/lent.js';

/** Completion of a write-type operation; `err` set when the medium failed. */
export type IoCallback = (err: Error | null) => void;
/**
 * Completion of a read: the bytes as views the caller must not modify. `crc`, given only when the read asked for it
 * (`wantCrc`), is the CRC32C of all of `data`, and then the backend also guarantees `data` never changes afterwards
 * (copy-on-write), so a digest computed now still matches whenever the bytes are sent.
 */
export type ReadCallback = (err: Error | null, data: Buffer[], crc?: number, lent?: ReadLent) => void;

/**
 * How long the buffers of a read stay as they are (ReadCallback's `lent`; a backend that does not say defaults to
 * CALL with transientReads, STABLE otherwise): the send path's one lifetime type (protocol Lent), under the name the
 * backends and the core use. A read's CALL lasts until the read callback returns.
 */
export { Lent as ReadLent } from '../../protocol/tcp/lent.js';

/**
 * Told of every write and Write Zeroes a cached opener made (after the file has it), with the callback that completes
 * the command: it calls `done` once every other opener dropped its cached copy of those bytes (WorkerRuntime asks the
 * primary to relay the range to the other workers, and waits for their answers).
 */
export type CoherenceHook = (offset: number, length: number, done: () => void) => void;

/**
 * How another process reaches the same blocks (target workers, docs/target.md "Target workers"): the file it opens
 * (`fenced`: through its own write fence, as a gateway's; docs/gateway-groups.md "Fencing at the storage call"),
 * the shared RAM file it maps, or nothing stored (null: each process answers zeros itself).
 */
export type BackendSharing = { kind: 'file'; path: string; fenced?: boolean } | { kind: 'shm'; path: string; size: number } | { kind: 'null'; size: number };

/**
 * Callback style on purpose: the RAM backend completes synchronously, which keeps a 4 KiB read free of
 * promise and microtask overhead on the hot path (docs/performance.md). Callers must tolerate both sync and async calls.
 */
export interface NamespaceBackend {
  readonly kind: 'ram' | 'file' | 'null';
  /** Capacity in bytes. */
  readonly size: number;
  /**
   * Read data are valid only until the read callback returns (the backend reuses one buffer for every read), unless a
   * read says otherwise (ReadCallback's `lent`): whoever keeps them longer copies them first. The shared-RAM backend
   * of target workers says so, because a fresh buffer per read costs page faults that dwarf the copy (docs/target.md,
   * "Target workers").
   */
  readonly transientReads?: boolean;
  /** Read `length` bytes at `offset` (in range, checked by the caller). Returned buffers may be shared: never write into them. */
  read(offset: number, length: number, cb: ReadCallback, wantCrc?: boolean): void;
  /** Write the concatenation of `data` at `offset`; with `fua` the data is durable before `cb`. The backend copies or consumes `data` before `cb`. */
  write(offset: number, data: readonly Buffer[], fua: boolean, cb: IoCallback): void;
  /** Make every completed write durable (file: fsync). */
  flush(cb: IoCallback): void;
  /** Zero `length` bytes at `offset`; `deallocate` lets the backend free the space instead (reads must still return zeros). */
  writeZeroes(offset: number, length: number, deallocate: boolean, cb: IoCallback): void;
  /** Flush and release resources; no calls after this. */
  close(): Promise<void>;
  /** How other processes share these blocks; absent: they live in this process only (RamBackend). */
  sharing?(): BackendSharing;
  /**
   * Writes made here must reach other processes' read caches: `hook` runs for each before it completes (shared RAM
   * only; see CoherenceHook).
   */
  setCoherence?(hook: CoherenceHook | undefined): void;
}
