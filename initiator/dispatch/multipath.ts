// Native-multipath-like namespace head over controllers of one subsystem (Linux drivers/nvme/host/multipath.c):
// paths matched by NSID + NGUID/UUID, iopolicy numa / round-robin / queue-depth, ANA-aware, failover of I/O whose path
// failed (transport error or SCT 3 path status). Each attempt is a new command that completes exactly once; a failed
// attempt is never completed to the caller, only retried elsewhere.
import type { Buffer } from 'node:buffer';
import { InvalidArgumentError, NoPathError, isPathStatus, isTransportError } from '../errors.js';
import type { DeallocateRange, IoOptions, Namespace } from '../namespace.js';
import type { PathController } from './path.js';

export type IoPolicy = 'numa' | 'round-robin' | 'queue-depth';

export interface MultipathOptions {
  iopolicy?: IoPolicy;
  /** How long I/O waits for some path to come back before failing with NoPathError (queue_if_no_path, bounded). */
  noPathTimeoutMs?: number;
}

interface Path {
  ctrl: PathController;
  nsid: number;
}

export class MultipathNamespace {
  readonly nsid: number;
  readonly #paths: Path[];
  readonly #policy: IoPolicy;
  readonly #noPathTimeoutMs: number;
  #rr = 0;
  /** Attempts that failed over to another path (for tests and reports). */
  failovers = 0;

  constructor(paths: Path[], opts: MultipathOptions = {}) {
    const first = paths[0];
    if (first === undefined) throw new InvalidArgumentError('paths', 'at least one path');
    this.nsid = first.nsid;
    this.#paths = paths;
    this.#policy = opts.iopolicy ?? 'numa';
    this.#noPathTimeoutMs = opts.noPathTimeoutMs ?? 30_000;
  }

  get iopolicy(): IoPolicy {
    return this.#policy;
  }

  get controllers(): PathController[] {
    return this.#paths.map((p) => p.ctrl);
  }

  #ns(p: Path): Namespace | undefined {
    try {
      return p.ctrl.namespace(p.nsid);
    } catch {
      return undefined;
    }
  }

  get blockSize(): number {
    for (const p of this.#paths) {
      const ns = this.#ns(p);
      if (ns !== undefined) return ns.blockSize;
    }
    throw new NoPathError(`namespace ${this.nsid}: no path`);
  }

  /** Usable paths by ANA preference: optimized first, then non-optimized; inaccessible/loss/change never. */
  #candidates(exclude: ReadonlySet<Path>): { optimized: Path[]; nonOptimized: Path[] } {
    const optimized: Path[] = [];
    const nonOptimized: Path[] = [];
    for (const p of this.#paths) {
      if (exclude.has(p) || p.ctrl.state !== 'live') continue;
      const ns = this.#ns(p);
      if (ns === undefined) continue;
      if (ns.anaState === 'optimized') optimized.push(p);
      else if (ns.anaState === 'non-optimized') nonOptimized.push(p);
    }
    return { optimized, nonOptimized };
  }

  /** The path the policy picks now (undefined when none is usable). */
  select(exclude: ReadonlySet<Path> = new Set()): Path | undefined {
    const c = this.#candidates(exclude);
    const set = c.optimized.length > 0 ? c.optimized : c.nonOptimized;
    if (set.length === 0) return undefined;
    switch (this.#policy) {
      case 'numa':
        // One NUMA node in a Node.js process: the first optimized path in path order, as Linux's per-node cache keeps.
        return set[0];
      case 'round-robin': {
        const p = set[this.#rr % set.length];
        this.#rr = (this.#rr + 1) % Math.max(1, set.length);
        return p;
      }
      case 'queue-depth': {
        let best = set[0] as Path;
        let bestDepth = Infinity;
        for (const p of set) {
          const d = p.ctrl.inFlight;
          if (d < bestDepth) {
            best = p;
            bestDepth = d;
          }
        }
        return best;
      }
    }
  }

  async #waitForPath(deadline: number): Promise<void> {
    const left = deadline - Date.now();
    if (left <= 0) throw new NoPathError(`namespace ${this.nsid}: no usable path`);
    // Some path may come back only if a controller is still reconnecting.
    if (!this.#paths.some((p) => p.ctrl.state === 'connecting' || p.ctrl.state === 'resetting' || p.ctrl.state === 'live')) {
      throw new NoPathError(`namespace ${this.nsid}: every path is gone`);
    }
    await new Promise<void>((resolve) => {
      const t = setTimeout(done, Math.min(left, 200));
      function done(): void {
        clearTimeout(t);
        resolve();
      }
    });
  }

  async #exec<T>(fn: (ns: Namespace, opts: IoOptions) => Promise<T>, opts: IoOptions): Promise<T> {
    const tried = new Set<Path>();
    const deadline = Date.now() + this.#noPathTimeoutMs;
    for (;;) {
      const p = this.select(tried);
      const ns = p === undefined ? undefined : this.#ns(p);
      if (p === undefined || ns === undefined) {
        await this.#waitForPath(deadline);
        tried.clear();
        continue;
      }
      try {
        return await fn(ns, { ...opts, failfast: true });
      } catch (e) {
        if (!isTransportError(e) && !isPathStatus(e)) throw e;
        this.failovers++;
        tried.add(p);
        if (isPathStatus(e)) void p.ctrl.refreshAna().catch(() => undefined);
      }
    }
  }

  read(lba: number, blocks: number, buf?: Buffer, opts: IoOptions = {}): Promise<Buffer> {
    return this.#exec((ns, o) => ns.read(lba, blocks, buf, o), opts);
  }

  write(lba: number, data: Buffer, opts: IoOptions = {}): Promise<void> {
    return this.#exec((ns, o) => ns.write(lba, data, o), opts);
  }

  compare(lba: number, data: Buffer, opts: IoOptions = {}): Promise<void> {
    return this.#exec((ns, o) => ns.compare(lba, data, o), opts);
  }

  flush(opts: IoOptions = {}): Promise<void> {
    return this.#exec((ns, o) => ns.flush(o), opts);
  }

  writeZeroes(lba: number, blocks: number, flags: { deac?: boolean } = {}, opts: IoOptions = {}): Promise<void> {
    return this.#exec((ns, o) => ns.writeZeroes(lba, blocks, flags, o), opts);
  }

  deallocate(ranges: readonly DeallocateRange[], opts: IoOptions = {}): Promise<void> {
    return this.#exec((ns, o) => ns.deallocate(ranges, o), opts);
  }
}

/**
 * Build a namespace head over controllers of the same subsystem: every controller must expose `nsid` with the same
 * NGUID/UUID (Linux nvme_ns_ids_equal; "IDs don't match" otherwise).
 */
export function createMultipath(controllers: readonly PathController[], nsid: number, opts: MultipathOptions = {}): MultipathNamespace {
  if (controllers.length === 0) throw new InvalidArgumentError('controllers', 'at least one controller');
  const first = controllers[0] as PathController;
  const ref = first.namespace(nsid).info;
  for (const c of controllers) {
    if (c.opts.nqn !== first.opts.nqn) throw new InvalidArgumentError('controllers', `${c.opts.nqn} is not subsystem ${first.opts.nqn}`);
    const info = c.namespace(nsid).info;
    if (info.nguid !== ref.nguid || info.uuid !== ref.uuid) throw new InvalidArgumentError('controllers', `namespace ${nsid} identifiers differ between paths`);
  }
  return new MultipathNamespace(
    controllers.map((ctrl) => ({ ctrl, nsid })),
    opts,
  );
}
