// The zones of a zoned namespace (ZNS 1.1 §2.1): each zone's state and write pointer, the open and active resource
// counts, and the write-pointer rules every write, Zone Append and Zone Management command meets. One owner: the
// process that serves the namespace's I/O queues (docs/target.md, zoned namespaces).
import { DNR, Status, ZoneReportFilter, ZoneSendAction, ZoneStateCode, type ZoneDescriptor } from '../../protocol/index.js';
import { parseSize } from '../../protocol/values/index.js';
import type { ZonedConfig } from '../model/config.js';
import type { Transitions } from './types.js';

/** Zone states by the spec's names (ZNS 1.1 §2.1.1: ZSE, ZSIO, ZSEO, ZSC, ZSF, ZSRO, ZSO). */
export type ZoneState = 'empty' | 'imp-open' | 'exp-open' | 'closed' | 'full' | 'read-only' | 'offline';

/**
 * The zone state machine (ZNS 1.1 Figure 5). Read Only and Offline are conditions of the medium: any zone not offline
 * may become read only and any zone offline (here through TargetService.setZoneCondition), and Zone Management Send's
 * Offline takes a read-only zone offline. Exp-open → empty is a Close of a zone never written (as null_blk's
 * null_close_zone: a closed zone holds written data).
 */
export const ZONE_TRANSITIONS: Transitions<ZoneState> = {
  empty: ['imp-open', 'exp-open', 'full', 'read-only', 'offline'],
  'imp-open': ['exp-open', 'closed', 'full', 'empty', 'read-only', 'offline'],
  'exp-open': ['closed', 'full', 'empty', 'read-only', 'offline'],
  closed: ['imp-open', 'exp-open', 'full', 'empty', 'read-only', 'offline'],
  full: ['empty', 'read-only', 'offline'],
  'read-only': ['offline'],
  offline: [],
};

const STATES: readonly ZoneState[] = ['empty', 'imp-open', 'exp-open', 'closed', 'full', 'read-only', 'offline'];
const CODE: Readonly<Record<ZoneState, number>> = {
  empty: ZoneStateCode.EMPTY,
  'imp-open': ZoneStateCode.IMP_OPEN,
  'exp-open': ZoneStateCode.EXP_OPEN,
  closed: ZoneStateCode.CLOSED,
  full: ZoneStateCode.FULL,
  'read-only': ZoneStateCode.READ_ONLY,
  offline: ZoneStateCode.OFFLINE,
};
/** A zone's state is kept as its index in STATES, one byte per zone. */
const [EMPTY, IMP_OPEN, EXP_OPEN, CLOSED, FULL, READ_ONLY, OFFLINE] = [0, 1, 2, 3, 4, 5, 6] as const;
const isOpen = (s: number): boolean => s === IMP_OPEN || s === EXP_OPEN;
const isActive = (s: number): boolean => s === IMP_OPEN || s === EXP_OPEN || s === CLOSED;

/** Which states a report filter lists (ZNS 1.1 Figure 36, ZRASF), by state index. */
const FILTER_STATES: Readonly<Record<number, number | undefined>> = {
  [ZoneReportFilter.EMPTY]: EMPTY,
  [ZoneReportFilter.IMP_OPEN]: IMP_OPEN,
  [ZoneReportFilter.EXP_OPEN]: EXP_OPEN,
  [ZoneReportFilter.CLOSED]: CLOSED,
  [ZoneReportFilter.FULL]: FULL,
  [ZoneReportFilter.READ_ONLY]: READ_ONLY,
  [ZoneReportFilter.OFFLINE]: OFFLINE,
};

/**
 * The zones Select All acts on, per action (ZNS 1.1 §3.4.3: Close the open ones, Finish the open and closed, Open
 * the closed, Reset the open, closed and full, Offline the read-only).
 */
const SELECT_ALL: Readonly<Record<number, readonly number[]>> = {
  [ZoneSendAction.CLOSE]: [IMP_OPEN, EXP_OPEN],
  [ZoneSendAction.FINISH]: [IMP_OPEN, EXP_OPEN, CLOSED],
  [ZoneSendAction.OPEN]: [CLOSED],
  [ZoneSendAction.RESET]: [IMP_OPEN, EXP_OPEN, CLOSED, FULL],
  [ZoneSendAction.OFFLINE]: [READ_ONLY],
};

/** Zone geometry and resources, in LBAs; 0 for maxOpen / maxActive: no limit. */
export interface ZoneGeometry {
  zoneSize: number;
  zoneCap: number;
  nrZones: number;
  maxOpen: number;
  maxActive: number;
}

/** What persists of the zones (a file namespace's zone-state file, target/zone-state.ts). */
export interface ZoneSnapshot {
  zoneSize: number;
  zoneCap: number;
  /** Per zone: [ZoneStateCode, write pointer]. */
  zones: [number, number][];
}

/** Where a namespace keeps its zone state across restarts (a file namespace: target/zone-state.ts). */
export interface ZoneStore {
  /** Writes the snapshot durably, then calls back. */
  save(s: ZoneSnapshot, cb: (err: Error | null) => void): void;
}

export class ZoneSet {
  readonly zoneSize: number;
  readonly zoneCap: number;
  readonly nrZones: number;
  readonly maxOpen: number;
  readonly maxActive: number;
  readonly #state: Uint8Array;
  readonly #wp: Float64Array;
  #open = 0;
  #active = 0;
  /** Changes since the last save; the owner persists when it says so (ZoneSet.takeDirty). */
  #dirty = false;

  constructor(g: ZoneGeometry) {
    this.zoneSize = g.zoneSize;
    this.zoneCap = g.zoneCap;
    this.nrZones = g.nrZones;
    this.maxOpen = g.maxOpen;
    this.maxActive = g.maxActive;
    this.#state = new Uint8Array(g.nrZones);
    this.#wp = new Float64Array(g.nrZones);
    for (let z = 0; z < g.nrZones; z++) this.#wp[z] = z * g.zoneSize;
  }

  /** Restores states and write pointers saved by snapshot(); false (nothing changed) when the geometry differs. */
  restore(s: ZoneSnapshot): boolean {
    if (s.zoneSize !== this.zoneSize || s.zoneCap !== this.zoneCap || s.zones.length !== this.nrZones) return false;
    // A write pointer outside its zone's writable range is not a state this set could have saved.
    if (s.zones.some(([, wp], z) => !Number.isInteger(wp) || wp < z * this.zoneSize || wp > z * this.zoneSize + this.zoneCap)) return false;
    s.zones.forEach(([code, wp], z) => {
      const i = STATES.findIndex((n) => CODE[n] === code);
      // An open zone comes back closed: opening is a controller's state, and a restart is a new controller (as a
      // drive's power cycle closes its open zones, ZNS 1.1 §2.1.1.4).
      const st = i < 0 ? OFFLINE : isOpen(i) ? (wp === z * this.zoneSize ? EMPTY : CLOSED) : i;
      this.#state[z] = st;
      this.#wp[z] = st === EMPTY ? z * this.zoneSize : wp;
    });
    this.#open = 0;
    this.#active = 0;
    for (let z = 0; z < this.nrZones; z++) if (isActive(this.#state[z] as number)) this.#active++;
    return true;
  }

  snapshot(): ZoneSnapshot {
    const zones: [number, number][] = [];
    for (let z = 0; z < this.nrZones; z++) zones.push([CODE[STATES[this.#state[z] as number] as ZoneState], this.#wp[z] as number]);
    return { zoneSize: this.zoneSize, zoneCap: this.zoneCap, zones };
  }

  /** Whether anything changed since the last call. */
  takeDirty(): boolean {
    const d = this.#dirty;
    this.#dirty = false;
    return d;
  }

  zoneOf(lba: number): number {
    return Math.floor(lba / this.zoneSize);
  }

  state(z: number): ZoneState {
    return STATES[this.#state[z] as number] as ZoneState;
  }

  wp(z: number): number {
    return this.#wp[z] as number;
  }

  get openCount(): number {
    return this.#open;
  }

  get activeCount(): number {
    return this.#active;
  }

  /** The one place a zone's state changes: refuses (false) an edge not in ZONE_TRANSITIONS; keeps the resource counts. */
  setState(z: number, next: ZoneState): boolean {
    const from = this.#state[z] as number;
    const to = STATES.indexOf(next);
    if (!ZONE_TRANSITIONS[STATES[from] as ZoneState].includes(next)) return false;
    this.#open += (isOpen(to) ? 1 : 0) - (isOpen(from) ? 1 : 0);
    this.#active += (isActive(to) ? 1 : 0) - (isActive(from) ? 1 : 0);
    this.#state[z] = to;
    const start = z * this.zoneSize;
    if (next === 'empty') this.#wp[z] = start;
    else if (next === 'full') this.#wp[z] = start + this.zoneCap;
    this.#dirty = true;
    return true;
  }

  /**
   * Room to open one more zone, closing an implicitly opened one if need be (ZNS 1.1 §2.1.1.4.1: the controller may
   * close a ZSIO zone to free an open resource; null_blk's null_close_imp_open_zone does). `activating`: the zone is
   * empty, so it takes an active resource too. 0 or the status that refuses it.
   */
  #makeRoom(activating: boolean): number {
    if (activating && this.maxActive > 0 && this.#active >= this.maxActive) return Status.ZONE_TOO_MANY_ACTIVE | DNR;
    if (this.maxOpen === 0 || this.#open < this.maxOpen) return 0;
    for (let z = 0; z < this.nrZones; z++) {
      if (this.#state[z] === IMP_OPEN) {
        this.setState(z, 'closed');
        return 0;
      }
    }
    return Status.ZONE_TOO_MANY_OPEN | DNR;
  }

  /** Status of an unwritable zone, 0 when it may be written (ZNS 1.1 §5.2: Full, Read Only, Offline). */
  #writable(z: number): number {
    const s = this.#state[z];
    if (s === FULL) return Status.ZONE_FULL | DNR;
    if (s === READ_ONLY) return Status.ZONE_READ_ONLY | DNR;
    if (s === OFFLINE) return Status.ZONE_OFFLINE | DNR;
    return 0;
  }

  /** Opens zone `z` for a write if it is empty or closed (implicitly, ZNS 1.1 §2.1.1.4.1); 0 or the refusal. */
  #openForWrite(z: number): number {
    const s = this.#state[z];
    if (s === IMP_OPEN || s === EXP_OPEN) return 0;
    const st = this.#makeRoom(s === EMPTY);
    if (st !== 0) return st;
    this.setState(z, 'imp-open');
    return 0;
  }

  /** Moves the write pointer past `nlb` blocks; the zone is full at its capacity. */
  #advance(z: number, nlb: number): void {
    const wp = (this.#wp[z] as number) + nlb;
    this.#wp[z] = wp;
    this.#dirty = true;
    if (wp === z * this.zoneSize + this.zoneCap) this.setState(z, 'full');
  }

  /**
   * A Write or Write Zeroes of `nlb` blocks at `slba` (ZNS 1.1 §5.2, writing in a sequential write required zone):
   * within one zone, the zone writable, at its write pointer, within its capacity; then the zone opens and the
   * pointer moves. 0 or the status (no state changes on a refusal).
   */
  write(slba: number, nlb: number): number {
    const z = this.zoneOf(slba);
    if (this.zoneOf(slba + nlb - 1) !== z) return Status.ZONE_BOUNDARY_ERROR | DNR;
    const bad = this.#writable(z);
    if (bad !== 0) return bad;
    if (slba !== this.#wp[z]) return Status.ZONE_INVALID_WRITE | DNR;
    if (slba + nlb > z * this.zoneSize + this.zoneCap) return Status.ZONE_BOUNDARY_ERROR | DNR;
    const st = this.#openForWrite(z);
    if (st !== 0) return st;
    this.#advance(z, nlb);
    return 0;
  }

  /**
   * A Zone Append of `nlb` blocks to the zone starting at `zslba` (ZNS 1.1 §3.4.1): returns the LBA the data goes to,
   * or a negative status. The caller checked that `zslba` starts a zone.
   */
  append(zslba: number, nlb: number): number {
    const z = this.zoneOf(zslba);
    const bad = this.#writable(z);
    if (bad !== 0) return -bad;
    const lba = this.#wp[z] as number;
    if (lba + nlb > zslba + this.zoneCap) return -(Status.ZONE_BOUNDARY_ERROR | DNR);
    const st = this.#openForWrite(z);
    if (st !== 0) return -st;
    this.#advance(z, nlb);
    return lba;
  }

  /** A read of `nlb` blocks at `slba`: Zone Is Offline when any zone of the range is (ZNS 1.1 §5.1); reads may cross zones (OZCS.RAZB). */
  read(slba: number, nlb: number): number {
    const last = this.zoneOf(slba + nlb - 1);
    for (let z = this.zoneOf(slba); z <= last; z++) if (this.#state[z] === OFFLINE) return Status.ZONE_OFFLINE | DNR;
    return 0;
  }

  /** The zones a Zone Management Send acts on: `z` alone, or with Select All every zone in the states it selects. */
  targets(zsa: number, z: number, selectAll: boolean): number[] {
    if (!selectAll) return [z];
    const sel = SELECT_ALL[zsa] ?? [];
    const out: number[] = [];
    for (let i = 0; i < this.nrZones; i++) if (sel.includes(this.#state[i] as number)) out.push(i);
    return out;
  }

  /**
   * Checks Zone Management Send action `zsa` on `zones` before anything changes (ZNS 1.1 §3.4.3): 0, or Invalid
   * Zone State Transition for a zone the action does not apply to, or the resource status when opening them would
   * pass MOR/MAR. Reset needs the data zeroed first: the caller does that, then calls apply().
   */
  check(zsa: number, zones: readonly number[]): number {
    let opening = 0;
    let activating = 0;
    for (const z of zones) {
      const s = this.#state[z] as number;
      if (!sendAllowed(zsa, s)) return Status.ZONE_INVALID_TRANSITION | DNR;
      if (zsa === ZoneSendAction.OPEN && s !== EXP_OPEN && s !== IMP_OPEN) opening++;
      if ((zsa === ZoneSendAction.OPEN || zsa === ZoneSendAction.FINISH) && s === EMPTY) activating++;
    }
    if (this.maxActive > 0 && this.#active + activating > this.maxActive && zsa === ZoneSendAction.OPEN) return Status.ZONE_TOO_MANY_ACTIVE | DNR;
    if (zsa === ZoneSendAction.FINISH && activating > 0 && this.maxActive > 0 && this.#active >= this.maxActive) return Status.ZONE_TOO_MANY_ACTIVE | DNR;
    if (zsa === ZoneSendAction.OPEN && this.maxOpen > 0 && this.#open + opening > this.maxOpen) {
      // Implicitly opened zones may be closed to make room for explicit opens (ZNS 1.1 §2.1.1.4.1).
      let imp = 0;
      for (let i = 0; i < this.nrZones; i++) if (this.#state[i] === IMP_OPEN && !zones.includes(i)) imp++;
      if (this.#open + opening - imp > this.maxOpen) return Status.ZONE_TOO_MANY_OPEN | DNR;
    }
    return 0;
  }

  /** Applies an action check() accepted. */
  apply(zsa: number, zones: readonly number[]): void {
    for (const z of zones) {
      const s = this.#state[z] as number;
      switch (zsa) {
        case ZoneSendAction.CLOSE:
          if (s === CLOSED) break;
          this.setState(z, this.#wp[z] === z * this.zoneSize ? 'empty' : 'closed');
          break;
        case ZoneSendAction.FINISH:
          if (s !== FULL) this.setState(z, 'full');
          break;
        case ZoneSendAction.OPEN:
          if (s === EXP_OPEN) break;
          if (s !== IMP_OPEN) this.#makeRoom(false);
          this.setState(z, 'exp-open');
          break;
        case ZoneSendAction.RESET:
          if (s !== EMPTY) this.setState(z, 'empty');
          break;
        case ZoneSendAction.OFFLINE:
          if (s !== OFFLINE) this.setState(z, 'offline');
          break;
        default:
          break;
      }
    }
  }

  /** Zones a report lists from the zone holding `slba` on, by filter (ZNS 1.1 §3.4.2.2); at most `max` descriptors, and the count of all that match. */
  report(slba: number, filter: number, max: number): { total: number; descs: ZoneDescriptor[] } {
    const want = FILTER_STATES[filter];
    const descs: ZoneDescriptor[] = [];
    let total = 0;
    for (let z = this.zoneOf(slba); z < this.nrZones; z++) {
      const s = this.#state[z] as number;
      if (want !== undefined && s !== want) continue;
      total++;
      if (descs.length < max) descs.push({ zs: CODE[STATES[s] as ZoneState], za: 0, zcap: this.zoneCap, zslba: z * this.zoneSize, wp: this.#wp[z] as number });
    }
    return { total, descs };
  }
}

/** Whether a Zone Management Send action applies to a zone in state `s` (ZNS 1.1 §3.4.3.1–5); others are Invalid Zone State Transition. */
function sendAllowed(zsa: number, s: number): boolean {
  switch (zsa) {
    case ZoneSendAction.CLOSE:
      return s === IMP_OPEN || s === EXP_OPEN || s === CLOSED;
    case ZoneSendAction.FINISH:
      return s === EMPTY || s === IMP_OPEN || s === EXP_OPEN || s === CLOSED || s === FULL;
    case ZoneSendAction.OPEN:
      return s === EMPTY || s === IMP_OPEN || s === EXP_OPEN || s === CLOSED;
    case ZoneSendAction.RESET:
      return s === EMPTY || s === IMP_OPEN || s === EXP_OPEN || s === CLOSED || s === FULL;
    case ZoneSendAction.OFFLINE:
      return s === READ_ONLY || s === OFFLINE;
    default:
      return false;
  }
}

/** Default zone size when a zoned namespace names none: 16 MiB, a power of two that divides the usual test sizes. */
export const DEFAULT_ZONE_SIZE = 16 * 1024 * 1024;

/**
 * The geometry of a zoned namespace of `bytes` bytes in `blockSize` blocks, or the one-line reason it cannot be
 * (the field and the fix). Sizes in bytes, as parsed from the config.
 */
export function zoneGeometry(z: { zoneSize: number; zoneCapacity?: number; maxOpen?: number; maxActive?: number }, blockSize: number, bytes: number): ZoneGeometry | { field: string; problem: string } {
  const zs = z.zoneSize;
  // The Linux host refuses a zone size that is not a power of two (nvme_query_zone_info: "invalid zone size").
  if (zs < blockSize || !Number.isSafeInteger(zs) || !Number.isInteger(Math.log2(zs))) return { field: 'zoned.zoneSize', problem: `${zs} bytes is not a power of two of at least one ${blockSize}-byte block; use e.g. 16M` };
  if (bytes % zs !== 0 || bytes < zs) return { field: 'zoned.zoneSize', problem: `the namespace's ${bytes} bytes are not a whole number of ${zs}-byte zones; make the size a multiple of the zone size` };
  const cap = z.zoneCapacity ?? zs;
  if (cap < blockSize || cap > zs || cap % blockSize !== 0) return { field: 'zoned.zoneCapacity', problem: `${cap} bytes is not a whole number of blocks between one block and the zone size ${zs}` };
  const nrZones = bytes / zs;
  const maxActive = z.maxActive ?? 0;
  const maxOpen = z.maxOpen ?? 0;
  if (maxOpen > 0 && maxActive > 0 && maxOpen > maxActive) return { field: 'zoned.maxOpen', problem: `${maxOpen} is more than maxActive ${maxActive}; an open zone is active, so use at most ${maxActive}` };
  return { zoneSize: zs / blockSize, zoneCap: cap / blockSize, nrZones, maxOpen, maxActive };
}

/** A zoned config's sizes in bytes (parseSize throws InvalidArgumentError naming the field). */
export function zonedBytes(z: ZonedConfig): { zoneSize: number; zoneCapacity?: number; maxOpen?: number; maxActive?: number } {
  const out: { zoneSize: number; zoneCapacity?: number; maxOpen?: number; maxActive?: number } = { zoneSize: z.zoneSize === undefined ? DEFAULT_ZONE_SIZE : parseSize(z.zoneSize, 'zoned.zoneSize') };
  if (z.zoneCapacity !== undefined) out.zoneCapacity = parseSize(z.zoneCapacity, 'zoned.zoneCapacity');
  if (z.maxOpen !== undefined) out.maxOpen = z.maxOpen;
  if (z.maxActive !== undefined) out.maxActive = z.maxActive;
  return out;
}
