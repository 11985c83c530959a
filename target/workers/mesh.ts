// Direct links between worker processes for read-cache invalidation. A write in a worker's shared RAM namespace may
// complete only once every other worker dropped its cached copy of the range (ShmBackend's ReadCache); relayed
// through the primary that is four IPC hops per batch (~110 µs added to a 4 KiB QD1 write here), over a direct link
// two (docs/performance.md, "Target workers, fifth pass"). The primary makes the links (a connected Unix socket pair
// per two workers, one end handed to each over IPC) before a worker gets any queue, so a worker that can cache
// anything has a link to every other live worker. Where a link is missing or broke while its peer may still be
// alive, the batch goes through the primary's relay instead, which reaches every live worker: never a write that
// completes while a live worker may hold the old bytes.
//
// Holds. A worker caches a 1 MiB piece of a namespace only after every peer recorded that it may ('hold'), so a write
// to pieces no peer holds completes without asking anyone: with `controller` or `host` placement a namespace read by
// one worker costs its writes nothing. Why that is safe: a peer's write checks the holds after its pwrite; if it has
// not yet seen the hold, its pwrite landed before the hold was answered, hence before the holder's first pread of that
// piece. A link made later starts with each side's holds ('sync', answered before the primary hears 'peer' answered).
// Holds are never dropped while the holder lives (an extra invalidation is harmless, a missing one is not); while a
// link is missing every piece counts as held and no new hold is granted.
import type net from 'node:net';
import type { InvRange } from './coherence.js';

/**
 * One frame per line, JSON: an invalidation batch `{ i, r: ranges }`, a hold `{ h, k: namespace key, p: piece }`, a
 * link's first frame with the sender's holds `{ s, h: [[key, pieces]] }`; each answered by `{ a: seq }`.
 */
type Frame = { i: number; r: InvRange[] } | { h: number; k: string; p: number } | { s: number; h: Array<[string, number[]]> } | { a: number };

interface Batch {
  /** Invalidation ranges; undefined for a hold or a sync. */
  ranges: InvRange[] | undefined;
  /** Peers whose answer is outstanding. */
  waiting: Set<number>;
  /** Relayed copies outstanding (sent through the primary after a link broke). */
  relays: number;
  /** false: a link broke first (a hold is then refused; a sync still completes). */
  done: (ok: boolean) => void;
}

export class PeerMesh {
  /** Peers the primary linked this worker to and has not yet reported gone. */
  readonly #members = new Set<number>();
  readonly #links = new Map<number, net.Socket>();
  readonly #batches = new Map<number, Batch>();
  #seq = 1;
  #direct = 0;
  #relayed = 0;
  /** Pieces this worker holds or asked to (namespace key → pieces), sent to every new link. */
  readonly #own = new Map<string, Set<number>>();
  /** Pieces peers hold: namespace key → piece → number of peers. */
  readonly #peerHolds = new Map<string, Map<number, number>>();
  /** What each peer holds, to forget when it is gone. */
  readonly #heldBy = new Map<number, Array<[string, number]>>();

  constructor(
    /** Drop these ranges here (a peer wrote them). */
    private readonly onInvalidate: (ranges: InvRange[]) => void,
    /** The primary's relay to every other live worker; `done` once each answered. */
    private readonly relay: (ranges: InvRange[], done: () => void) => void,
  ) {}

  /** Batches sent over links, and through the relay (a link missing or broken). */
  get counts(): { direct: number; relayed: number } {
    return { direct: this.#direct, relayed: this.#relayed };
  }

  /**
   * Worker `peer` is live, linked over `socket` (a restarted peer replaces its old link); without a socket (the
   * primary could not make one) every batch goes through the relay while `peer` is a member. `synced` runs once the
   * peer recorded this worker's holds (or the link broke, or there is none).
   */
  add(peer: number, socket: net.Socket | undefined, synced: () => void = () => undefined): void {
    this.#links.get(peer)?.destroy();
    this.#links.delete(peer);
    this.#members.add(peer);
    if (socket === undefined) return synced();
    this.#links.set(peer, socket);
    const seq = this.#seq++;
    this.#batches.set(seq, { ranges: undefined, waiting: new Set([peer]), relays: 0, done: () => synced() });
    const h: Array<[string, number[]]> = [...this.#own].map(([k, ps]) => [k, [...ps]]);
    socket.write(`${JSON.stringify({ s: seq, h })}\n`);
    let buf = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        let f: Frame;
        try {
          f = JSON.parse(line) as Frame;
        } catch {
          // Not a frame: this link cannot be trusted; closing it sends what waits on it through the relay.
          socket.destroy();
          return;
        }
        this.#onFrame(peer, socket, f);
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => this.#lost(peer, socket));
    socket.resume();
  }

  /** The primary saw worker `peer` exit: its cache went with it, so nothing waits for its answer any more. */
  gone(peer: number): void {
    this.#members.delete(peer);
    const s = this.#links.get(peer);
    this.#links.delete(peer);
    s?.destroy();
    for (const [key, piece] of this.#heldBy.get(peer) ?? []) {
      const m = this.#peerHolds.get(key);
      const n = (m?.get(piece) ?? 0) - 1;
      if (n > 0) m?.set(piece, n);
      else m?.delete(piece);
    }
    this.#heldBy.delete(peer);
    for (const [seq, b] of this.#batches) if (b.waiting.delete(peer)) this.#settle(seq, b);
  }

  /** Have every other worker drop `ranges`, then `done`. */
  send(ranges: InvRange[], done: () => void): void {
    if (this.#links.size < this.#members.size) {
      this.#relayed++;
      return this.relay(ranges, done);
    }
    this.#direct++;
    if (this.#members.size === 0) return done();
    this.#ask((i) => ({ i, r: ranges }), ranges, () => done());
  }

  /** Whether a peer may cache bytes of pieces `first`..`last` of namespace `key` (false: a write there asks no one). */
  peersHold(key: string, first: number, last: number): boolean {
    if (this.#links.size < this.#members.size) return true;
    const m = this.#peerHolds.get(key);
    if (m === undefined || m.size === 0) return false;
    for (let p = first; p <= last; p++) if (m.has(p)) return true;
    return false;
  }

  /**
   * May this worker cache piece `piece` of namespace `key`? true: yes, now; false: no (a link is missing: read the
   * file); undefined: asked, `then` says once every peer answered.
   */
  hold(key: string, piece: number, then: (ok: boolean) => void): boolean | undefined {
    if (this.#links.size < this.#members.size) return false;
    let own = this.#own.get(key);
    if (own === undefined) this.#own.set(key, (own = new Set()));
    // Recorded before the answers: a link made meanwhile learns of it in its sync.
    own.add(piece);
    if (this.#members.size === 0) return true;
    this.#ask((h) => ({ h, k: key, p: piece }), undefined, then);
    return undefined;
  }

  /** Send the frame `make` builds for the next seq on every link; `done` once each peer answered. */
  #ask(make: (seq: number) => Frame, ranges: InvRange[] | undefined, done: (ok: boolean) => void): void {
    const seq = this.#seq++;
    this.#batches.set(seq, { ranges, waiting: new Set(this.#members), relays: 0, done });
    const line = `${JSON.stringify(make(seq))}\n`;
    for (const s of this.#links.values()) s.write(line);
  }

  close(): void {
    for (const s of this.#links.values()) s.destroy();
    this.#links.clear();
  }

  #onFrame(peer: number, socket: net.Socket, f: Frame): void {
    if ('a' in f) {
      const b = this.#batches.get(f.a);
      if (b !== undefined && b.waiting.delete(peer)) this.#settle(f.a, b);
      return;
    }
    let seq: number;
    if ('i' in f) {
      this.onInvalidate(f.r);
      seq = f.i;
    } else if ('p' in f) {
      this.#peerHeld(peer, f.k, f.p);
      seq = f.h;
    } else {
      for (const [k, ps] of f.h) for (const p of ps) this.#peerHeld(peer, k, p);
      seq = f.s;
    }
    socket.write(`{"a":${seq}}\n`);
  }

  #peerHeld(peer: number, key: string, piece: number): void {
    let m = this.#peerHolds.get(key);
    if (m === undefined) this.#peerHolds.set(key, (m = new Map()));
    m.set(piece, (m.get(piece) ?? 0) + 1);
    let l = this.#heldBy.get(peer);
    if (l === undefined) this.#heldBy.set(peer, (l = []));
    l.push([key, piece]);
  }

  /**
   * A link closed while its peer is still a member (it may be alive): its outstanding answers are asked for through
   * the relay, and so is every batch until the primary reports the peer gone or links it again.
   */
  #lost(peer: number, socket: net.Socket): void {
    if (this.#links.get(peer) !== socket) return;
    this.#links.delete(peer);
    for (const [seq, b] of this.#batches) {
      if (!b.waiting.delete(peer)) continue;
      const ranges = b.ranges;
      if (ranges === undefined) {
        // A hold the peer may not have recorded is refused; a sync ends (the peer stays linkless, so relayed).
        this.#batches.delete(seq);
        b.done(false);
        continue;
      }
      b.relays++;
      this.#relayed++;
      this.relay(ranges, () => {
        b.relays--;
        this.#settle(seq, b);
      });
    }
  }

  #settle(seq: number, b: Batch): void {
    if (b.waiting.size > 0 || b.relays > 0 || !this.#batches.has(seq)) return;
    this.#batches.delete(seq);
    b.done(true);
  }
}
