// Direct links between worker processes for read-cache invalidation. A write in a worker's shared RAM namespace may
// complete only once every other worker dropped its cached copy of the range (ShmBackend's ReadCache); relayed
// through the primary that is four IPC hops per batch (~110 µs added to a 4 KiB QD1 write here), over a direct link
// two (docs/performance.md, "Target workers, fifth pass"). The primary makes the links (a connected Unix socket pair
// per two workers, one end handed to each over IPC) before a worker gets any queue, so a worker that can cache
// anything has a link to every other live worker. Where a link is missing or broke while its peer may still be
// alive, the batch goes through the primary's relay instead, which reaches every live worker: never a write that
// completes while a live worker may hold the old bytes.
import type net from 'node:net';
import type { InvRange } from './coherence.js';

/** One frame per line, JSON: an invalidation batch `{ i: seq, r: ranges }` or its answer `{ a: seq }`. */
type Frame = { i: number; r: InvRange[] } | { a: number };

interface Batch {
  ranges: InvRange[];
  /** Peers whose answer is outstanding. */
  waiting: Set<number>;
  /** Relayed copies outstanding (sent through the primary after a link broke). */
  relays: number;
  done: () => void;
}

export class PeerMesh {
  /** Peers the primary linked this worker to and has not yet reported gone. */
  readonly #members = new Set<number>();
  readonly #links = new Map<number, net.Socket>();
  readonly #batches = new Map<number, Batch>();
  #seq = 1;
  #direct = 0;
  #relayed = 0;

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
   * primary could not make one) every batch goes through the relay while `peer` is a member.
   */
  add(peer: number, socket: net.Socket | undefined): void {
    this.#links.get(peer)?.destroy();
    this.#links.delete(peer);
    this.#members.add(peer);
    if (socket === undefined) return;
    this.#links.set(peer, socket);
    let buf = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        this.#onFrame(peer, socket, JSON.parse(line) as Frame);
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
    const seq = this.#seq++;
    const b: Batch = { ranges, waiting: new Set(this.#members), relays: 0, done };
    this.#batches.set(seq, b);
    const line = `${JSON.stringify({ i: seq, r: ranges })}\n`;
    for (const s of this.#links.values()) s.write(line);
  }

  close(): void {
    for (const s of this.#links.values()) s.destroy();
    this.#links.clear();
  }

  #onFrame(peer: number, socket: net.Socket, f: Frame): void {
    if ('i' in f) {
      this.onInvalidate(f.r);
      socket.write(`{"a":${f.i}}\n`);
      return;
    }
    const b = this.#batches.get(f.a);
    if (b !== undefined && b.waiting.delete(peer)) this.#settle(f.a, b);
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
      b.relays++;
      this.#relayed++;
      this.relay(b.ranges, () => {
        b.relays--;
        this.#settle(seq, b);
      });
    }
  }

  #settle(seq: number, b: Batch): void {
    if (b.waiting.size > 0 || b.relays > 0 || !this.#batches.has(seq)) return;
    this.#batches.delete(seq);
    b.done();
  }
}
