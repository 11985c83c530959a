// Reservations (NVMe Base 2.0 §8.19) and namespace host masks shared by the gateways of a group through etcd
// (docs/gateway-groups.md, "Reservations and masking across the group"). nvmet keeps both per node; here a host that
// registers and reserves through one gateway is registered and reserved on all of them, and every conflict is decided
// the same way everywhere, because every change is decided on the one copy in etcd:
//
//   resv/<nqn>/<nsid>   { v: 1, replica, seq, notices, by }: the namespace's reservation state (ReservationState.replica(),
//                       preempt-and-abort generations included), the count of changes written, the notices the latest
//                       changes raised (host key, log page type §8.19.4, the change's seq) and the gateway that wrote it.
//   masks/<nqn>/<nsid>  { hosts }: the namespace's host mask once changed at runtime (null = every allowed host).
//
// A state-changing command reads the key, runs the same ReservationState code a single target runs on that copy,
// and writes the result by compare-and-swap (GatewayGroup.updateShared: key unchanged since the read, this gateway's
// lease still live); a lost compare re-reads and decides again. The host is answered only once the write committed
// and this gateway applied it. Every gateway applies each revision once, from the watch (or at once, the writer):
// applyReplica on its local copy, then the notices for its own controllers of the named hosts. Reads (Report, the
// I/O path's access checks) use the local copy: no etcd round trip on the data path.
import { Status } from '../../protocol/index.js';
import { ReservationState, type ResvReplica } from '../core/reservation.js';
import { EtcdUnreachableError, GatewayFencedError } from './errors.js';
import type { GatewayGroup, SharedKv } from './group.js';

/** Notices kept in a resv/ key: a gateway cut off for longer than this many of them misses the older ones. */
export const NOTICE_LOG = 64;

/** The value of a resv/ key. */
export interface SharedResv {
  v: 1;
  replica: ResvReplica;
  /** Changes written to the key so far (0: none yet, a seeded state). */
  seq?: number;
  /**
   * [host key, ResvNotifType, seq of the change that raised it] for the latest NOTICE_LOG notifications, oldest first:
   * each gateway raises, for its controllers of that host, those with a later seq than it applied, so one that missed
   * revisions while cut off replays their notices when it catches up.
   */
  notices: Array<[string, number, number?]>;
  /** The gateway that decided it (GET /group-style diagnostics). */
  by: string;
}

/** Where a gateway applies what the group decided (target/service/gateway.ts: the subsystems, AENs, workers). */
export interface SharedSink {
  /** `notify`: raise `value.notices` (those not raised here yet; false for a key loaded at start: raised before). */
  resv(nqn: string, nsid: number, value: SharedResv, notify: boolean): void;
  mask(nqn: string, nsid: number, hosts: string[] | null): void;
}

export const resvKey = (nqn: string, nsid: number): string => `resv/${nqn}/${nsid}`;
export const maskKey = (nqn: string, nsid: number): string => `masks/${nqn}/${nsid}`;

/** The kind, subsystem NQN and NSID of a shared key (NQNs hold no '/', NVMe Base 2.0 §4.5: the NSID is last anyway). */
function parseKey(key: string): { kind: 'resv' | 'masks'; nqn: string; nsid: number } | undefined {
  const kind = key.startsWith('resv/') ? 'resv' : key.startsWith('masks/') ? 'masks' : undefined;
  const slash = key.lastIndexOf('/');
  if (kind === undefined || slash <= kind.length) return undefined;
  const nsid = Number(key.slice(slash + 1));
  return Number.isInteger(nsid) && nsid > 0 ? { kind, nqn: key.slice(kind.length + 1, slash), nsid } : undefined;
}

export class GroupSharedState {
  /**
   * Per shared key, the mod revision applied here (each revision is applied once, in order, whoever reports it) and
   * the seq of the latest change whose notices were raised here.
   */
  readonly #applied = new Map<string, { rev: bigint; seq: number }>();
  readonly #onShared = (key: string, value: string, modRev: string): void => this.#apply({ key, value, modRev }, true);
  /**
   * After a rejoin the watch is new: what changed while this gateway was cut off is read again and applied by
   * revision (the latest state of each key); the key's notice log holds the notices of the changes in between.
   */
  readonly #onRejoined = (): void => {
    void Promise.all([this.group.readShared('resv/'), this.group.readShared('masks/')])
      .then(([resv, masks]) => {
        for (const kv of [...resv, ...masks]) this.#apply(kv, true);
      })
      .catch((err: unknown) => this.log('gateway group: shared keys not re-read after rejoin', err));
  };

  constructor(
    private readonly group: GatewayGroup,
    private readonly sink: SharedSink,
    private readonly log: (msg: string, err: unknown) => void = () => undefined,
  ) {}

  /**
   * Follow the watch, then load every key (before the gateway listens): a change between the two is seen by the
   * watch and applied once by revision. `seed` gives, per namespace this gateway serves, the local state restored
   * from its PTPL file: written only where the group has no key yet (a target becoming a gateway keeps its PTPL
   * registrations); otherwise the group's state replaces it.
   */
  async start(seed: Array<{ nqn: string; nsid: number; replica: ResvReplica }> = []): Promise<void> {
    this.group.on('shared', this.#onShared);
    this.group.on('rejoined', this.#onRejoined);
    for (const kv of [...(await this.group.readShared('resv/')), ...(await this.group.readShared('masks/'))]) this.#apply(kv, false);
    for (const s of seed) {
      if (this.#applied.has(resvKey(s.nqn, s.nsid))) continue;
      const value: SharedResv = { v: 1, replica: s.replica, seq: 0, notices: [], by: this.group.opts.id };
      const { written } = await this.group.updateShared(resvKey(s.nqn, s.nsid), (cur) => ({ result: 0, ...(cur === undefined ? { value: JSON.stringify(value) } : {}) }));
      if (written !== undefined) this.#apply(written, false);
    }
  }

  stop(): void {
    this.group.off('shared', this.#onShared);
    this.group.off('rejoined', this.#onRejoined);
  }

  /**
   * Run a state-changing reservation operation (Register / Acquire / Release, Set Features PTPL) on the group's state
   * of the namespace: `mutate` gets a ReservationState holding the group's copy and returns the NVMe status, exactly
   * as on a single target. Resolves to that status once the change committed in etcd and was applied here. A fenced
   * gateway (or one that cannot reach etcd) changes nothing and answers Asymmetric Access Inaccessible (302h, NVMe
   * Base 2.0 §8.1.2), the status its I/O gets when fenced, so the host retries through another gateway.
   */
  async resvCommand(nqn: string, nsid: number, mutate: (rs: ReservationState) => number): Promise<number> {
    try {
      const { result, written } = await this.group.updateShared(resvKey(nqn, nsid), (cur) => this.#decide(nsid, cur, mutate));
      if (written !== undefined) this.#apply(written, true);
      return result;
    } catch (err) {
      if (err instanceof GatewayFencedError || err instanceof EtcdUnreachableError) return Status.ANA_INACCESSIBLE;
      this.log('gateway group: reservation change failed', err);
      return Status.INTERNAL;
    }
  }

  #decide(nsid: number, cur: string | undefined, mutate: (rs: ReservationState) => number): { value?: string; result: number } {
    const prev = cur === undefined ? undefined : (JSON.parse(cur) as SharedResv);
    const seq = (prev?.seq ?? 0) + 1;
    const notices: SharedResv['notices'] = [...(prev?.notices ?? [])];
    const rs = new ReservationState(nsid, { notify: (host, type) => notices.push([host, type, seq]), changed: () => undefined });
    if (prev !== undefined) rs.applyReplica(prev.replica);
    const before = JSON.stringify(rs.replica());
    const status = mutate(rs);
    const replica = rs.replica();
    // A refused command, or one that changed nothing (acquiring what one holds), writes nothing.
    if (status !== 0 || JSON.stringify(replica) === before) return { result: status };
    const value: SharedResv = { v: 1, replica, seq, notices: notices.slice(-NOTICE_LOG), by: this.group.opts.id };
    return { result: status, value: JSON.stringify(value) };
  }

  /**
   * Change the namespace's host mask: `edit` gets the group's mask (undefined: never changed at runtime, the
   * configured one applies) and returns the new one, or throws (nothing written). Resolves once committed and applied
   * here; throws GatewayFencedError / EtcdUnreachableError.
   */
  async setMask(nqn: string, nsid: number, edit: (cur: string[] | null | undefined) => string[] | null): Promise<void> {
    const { written } = await this.group.updateShared(maskKey(nqn, nsid), (cur) => {
      const hosts = edit(cur === undefined ? undefined : (JSON.parse(cur) as { hosts: string[] | null }).hosts);
      return { result: undefined, value: JSON.stringify({ hosts: hosts === null ? null : [...hosts].sort() }) };
    });
    if (written !== undefined) this.#apply(written, true);
  }

  #apply(kv: SharedKv, notify: boolean): void {
    const at = parseKey(kv.key);
    if (at === undefined) return;
    const rev = BigInt(kv.modRev);
    const last = this.#applied.get(kv.key);
    if (rev <= (last?.rev ?? 0n)) return;
    try {
      if (at.kind === 'resv') {
        const v = JSON.parse(kv.value) as SharedResv;
        const seq = v.seq ?? 0;
        this.#applied.set(kv.key, { rev, seq });
        const raised = last?.seq ?? 0;
        this.sink.resv(at.nqn, at.nsid, { ...v, notices: v.notices.filter((n) => (n[2] ?? seq) > raised) }, notify);
      } else {
        this.#applied.set(kv.key, { rev, seq: 0 });
        this.sink.mask(at.nqn, at.nsid, (JSON.parse(kv.value) as { hosts: string[] | null }).hosts);
      }
    } catch (err) {
      this.log(`gateway group: shared key ${kv.key} not applied`, err);
    }
  }
}
