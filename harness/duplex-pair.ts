// An in-memory connected pair of Duplex streams: Node 20 lacks stream.duplexPair (added in v22.6).
import { Duplex } from 'node:stream';

/** One end of a duplex pair; what one side writes, the other side reads. */
class PairEnd extends Duplex {
  #peer: PairEnd | undefined;
  #pendingCallback: ((err?: Error | null) => void) | undefined;

  setPeer(peer: PairEnd): void {
    this.#peer = peer;
  }

  override _read(): void {
    // The peer paused its writes because our readable buffer was full; let it continue.
    const peer = this.#peer;
    const cb = peer === undefined ? undefined : peer.#pendingCallback;
    if (peer !== undefined && cb !== undefined) {
      peer.#pendingCallback = undefined;
      cb();
    }
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    const peer = this.#peer;
    if (peer === undefined || peer.destroyed) {
      callback(new Error('duplex pair: peer is closed'));
      return;
    }
    if (peer.push(chunk)) callback();
    else this.#pendingCallback = callback;
  }

  override _final(callback: (err?: Error | null) => void): void {
    this.#peer?.push(null);
    callback();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    const cb = this.#pendingCallback;
    this.#pendingCallback = undefined;
    cb?.(err ?? new Error('duplex pair: destroyed'));
    const peer = this.#peer;
    if (peer !== undefined && !peer.destroyed && !peer.readableEnded) peer.push(null);
    callback(err);
  }
}

/** Two connected Duplex streams, like `stream.duplexPair()` in Node >= 22.6. */
export function duplexPair(options?: { highWaterMark?: number }): [Duplex, Duplex] {
  const hwm = options?.highWaterMark;
  const opts = hwm === undefined ? {} : { highWaterMark: hwm };
  const a = new PairEnd(opts);
  const b = new PairEnd(opts);
  a.setPeer(b);
  b.setPeer(a);
  return [a, b];
}
