// Core view of a port: id, data-plane limits, ANA states per group and discovery referrals (nvmet_port).
import type { AnaStateName, PortConfig, ReferralConfig } from '../model/config.js';

/** ANA state codes of the ANA log (NVMe Base 2.0 §8.1.3): protocol's table, re-exported for the core's users. */
export { ANA_STATE_CODE } from '../../protocol/index.js';

export const PORT_DEFAULTS = {
  inlineDataSize: 16384,
  maxH2CData: 131072,
  c2hDataSize: 131072,
  sqFlowDisable: true,
  maxConnections: 4096,
  maxInFlightBytes: 8 * 1024 * 1024,
} as const;

/**
 * Fabrics and admin commands are accepted in-capsule up to 8 KiB on every queue, whatever the port's I/O in-capsule
 * size (nvmet NVMET_TCP_DEF_INLINE_DATA_SIZE for admin; the Linux host sends Connect data in-capsule, NVMe-TCP 1.0 §3.3.3).
 */
export const FABRICS_IN_CAPSULE_MAX = 8192;

export class CorePort {
  readonly anaStates = new Map<number, AnaStateName>();
  readonly referrals: ReferralConfig[] = [];
  /** Bumped on every ANA state change of this port (ANA log CHGCNT). */
  anaChangeCount = 0n;
  /**
   * Gateway groups (target/gateway): the instant (ms since the epoch) after which this port's ANA states are no longer
   * backed by an etcd lease, so another gateway may own the groups; from then every group reads `inaccessible` until
   * the lease is renewed. This is the fence a process resumed after a stall meets before its timers run (I/O that
   * waited in its sockets is handled first). Infinity: no gateway group, states are what the config says.
   */
  anaValidUntil = Infinity;
  /** This port's worker placement (target/workers), changeable at runtime; undefined: the target-wide one. */
  placement: PortConfig['placement'];

  constructor(readonly config: PortConfig) {
    this.placement = config.placement;
    for (const [g, s] of Object.entries(config.anaStates ?? {})) this.anaStates.set(Number(g), s);
    for (const r of config.referrals ?? []) this.referrals.push({ ...r });
  }

  get id(): number {
    return this.config.id;
  }
  get inlineDataSize(): number {
    return this.config.inlineDataSize ?? PORT_DEFAULTS.inlineDataSize;
  }
  get maxH2CData(): number {
    return this.config.maxH2CData ?? PORT_DEFAULTS.maxH2CData;
  }
  get c2hDataSize(): number {
    return this.config.c2hDataSize ?? PORT_DEFAULTS.c2hDataSize;
  }
  get maxConnections(): number {
    return this.config.maxConnections ?? PORT_DEFAULTS.maxConnections;
  }
  get maxInFlightBytes(): number {
    return this.config.maxInFlightBytes ?? PORT_DEFAULTS.maxInFlightBytes;
  }
  get sqFlowDisable(): boolean {
    return this.config.sqFlowDisable ?? PORT_DEFAULTS.sqFlowDisable;
  }

  anaState(group: number): AnaStateName {
    if (this.anaValidUntil !== Infinity && Date.now() >= this.anaValidUntil) return 'inaccessible';
    return this.anaStates.get(group) ?? 'optimized';
  }

  /** Config snapshot with the live ANA states and referrals (getConfig round-trips through apply). */
  snapshot(): PortConfig {
    const out: PortConfig = { ...this.config };
    if (this.anaStates.size > 0) out.anaStates = Object.fromEntries([...this.anaStates].map(([g, s]) => [String(g), s]));
    else delete out.anaStates;
    if (this.referrals.length > 0) out.referrals = this.referrals.map((r) => ({ ...r }));
    else delete out.referrals;
    if (this.placement !== undefined) out.placement = this.placement;
    else delete out.placement;
    return out;
  }
}
