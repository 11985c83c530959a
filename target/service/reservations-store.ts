// The reservations of namespaces with Persist Through Power Loss on (NVMe Base 2.0 §8.19.3), kept in step with a
// file (target/resv-state.ts) and brought back when their namespace is added.
import type { Logger } from 'pino';
import type { Subsystem } from '../core/index.js';
import type { PersistedResv } from '../core/reservation.js';
import { loadResvState, resvStateKey, saveResvState } from '../resv-state.js';

export class ReservationStore {
  readonly #path: string | undefined;
  readonly #log: Logger;
  /** By resvStateKey: what is on disk (PTPL on), plus entries for namespaces not yet added. */
  readonly #state: Map<string, PersistedResv>;

  /** `path` omitted: PTPL can be set but nothing survives a restart. */
  constructor(path: string | undefined, log: Logger) {
    this.#path = path;
    this.#log = log;
    this.#state = path === undefined ? new Map() : loadResvState(path);
  }

  /** A namespace's reservation state changed: keep the file in step when PTPL is (or was) on. */
  changed(sub: Subsystem, nsid: number): void {
    const key = resvStateKey(sub.nqn, nsid);
    const rs = sub.reservations.get(nsid);
    if (rs !== undefined && rs.ptpl) this.#state.set(key, rs.snapshot());
    else if (!this.#state.delete(key)) return;
    if (this.#path === undefined) return;
    try {
      saveResvState(this.#path, this.#state);
    } catch (err) {
      this.#log.error({ err, file: this.#path, subnqn: sub.nqn, nsid }, 'saving reservation state failed; it will not survive a restart');
    }
  }

  /** Bring back a namespace's persisted reservations (target start, or the namespace added again). */
  restore(sub: Subsystem, nsid: number): void {
    const p = this.#state.get(resvStateKey(sub.nqn, nsid));
    if (p === undefined || !p.ptpl) return;
    try {
      sub.reservation(nsid).restore(p);
      this.#log.info({ subnqn: sub.nqn, nsid, rtype: p.rtype, registrants: p.registrants.length }, 'reservations restored (PTPL)');
    } catch (err) {
      this.#log.error({ err, subnqn: sub.nqn, nsid }, 'persisted reservation state is malformed; starting without it');
    }
  }
}
