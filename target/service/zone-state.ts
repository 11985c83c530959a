// The zone-state file of a zoned file namespace (`<backend path>.zones`): each zone's state and write pointer, so a
// restarted target reports and enforces the zones it left (docs/target.md, zoned namespaces).
import fs from 'node:fs';
import { InvalidArgumentError } from '../../protocol/index.js';
import { saveZones } from '../core/cmd/zns.js';
import type { TargetNamespace } from '../core/namespace.js';
import type { ZoneSnapshot, ZoneState, ZoneStore } from '../core/zoned.js';

/** The file beside a file namespace's backing file. */
export function zoneStatePath(backingPath: string): string {
  return `${backingPath}.zones`;
}

/**
 * Saved on every Zone Management Send, Flush and FUA write, and at stop: the zones are as durable as the data a
 * Flush makes durable (the controller has a volatile write cache, VWC 1), so after a crash a write pointer may be
 * behind writes that were never flushed, never ahead of flushed ones. Each save writes a temporary file, syncs it and
 * renames it over the old one: a crash leaves the old state or the new one. Saves are serialized; one that arrives
 * while another runs waits and writes the newest snapshot once for every waiter.
 */
export class ZoneStateFile implements ZoneStore {
  #busy = false;
  #next: { snap: ZoneSnapshot; cbs: ((err: Error | null) => void)[] } | undefined;

  constructor(readonly path: string) {}

  /** The saved zones, or undefined when there is no file yet; a file that is not ours is an error naming it. */
  async load(): Promise<ZoneSnapshot | undefined> {
    let text: string;
    try {
      text = await fs.promises.readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    try {
      const v = JSON.parse(text) as Partial<ZoneSnapshot>;
      if (typeof v.zoneSize === 'number' && typeof v.zoneCap === 'number' && Array.isArray(v.zones) && v.zones.every((z) => Array.isArray(z) && z.length === 2 && z.every((n) => typeof n === 'number'))) return v as ZoneSnapshot;
    } catch {
      // falls through to the error below
    }
    throw new InvalidArgumentError('namespaces.zoned', `${this.path} is not a zone-state file; move it away or remove it to start with empty zones`);
  }

  save(snap: ZoneSnapshot, cb: (err: Error | null) => void): void {
    if (this.#busy) {
      if (this.#next === undefined) this.#next = { snap, cbs: [cb] };
      else {
        this.#next.snap = snap;
        this.#next.cbs.push(cb);
      }
      return;
    }
    this.#busy = true;
    this.#write(snap).then(
      () => this.#done([cb], null),
      (err: Error) => this.#done([cb], err),
    );
  }

  #done(cbs: ((err: Error | null) => void)[], err: Error | null): void {
    this.#busy = false;
    const next = this.#next;
    this.#next = undefined;
    for (const cb of cbs) cb(err);
    if (next === undefined) return;
    const [first, ...rest] = next.cbs;
    this.save(next.snap, (e) => {
      first?.(e);
      for (const cb of rest) cb(e);
    });
  }

  async #write(snap: ZoneSnapshot): Promise<void> {
    const tmp = `${this.path}.tmp`;
    const fh = await fs.promises.open(tmp, 'w');
    try {
      await fh.writeFile(JSON.stringify(snap));
      await fh.sync();
    } finally {
      await fh.close();
    }
    await fs.promises.rename(tmp, this.path);
  }
}

/** One zone as the management surface shows it (TargetService.zones). */
export interface ZoneView {
  zslba: number;
  zcap: number;
  wp: number;
  state: ZoneState;
}

export function zoneView(ns: TargetNamespace): ZoneView[] | undefined {
  const z = ns.zones;
  if (z === undefined) return undefined;
  const out: ZoneView[] = [];
  for (let i = 0; i < z.nrZones; i++) out.push({ zslba: i * z.zoneSize, zcap: z.zoneCap, wp: z.wp(i), state: z.state(i) });
  return out;
}

/** TargetService.setZoneCondition: one-line errors for a conventional namespace, a zone past the last, an edge the table refuses. */
export function setZoneCondition(ns: TargetNamespace, zone: number, cond: 'read-only' | 'offline'): void {
  const z = ns.zones;
  if (z === undefined) throw new InvalidArgumentError('nsid', `namespace ${ns.nsid} is not zoned`);
  if (!Number.isInteger(zone) || zone < 0 || zone >= z.nrZones) throw new InvalidArgumentError('zone', `${zone} is not a zone of namespace ${ns.nsid}; use 0..${z.nrZones - 1}`);
  if (z.state(zone) === cond) return;
  if (!z.setState(zone, cond)) throw new InvalidArgumentError('zone', `zone ${zone} is ${z.state(zone)} and cannot become ${cond}`);
  saveZones(ns, () => undefined);
}
