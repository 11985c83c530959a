// Null backend: reads return zeros, writes are discarded (like nvmet's null_blk-backed namespaces for transport tests).
import { Buffer } from 'node:buffer';
import type { BackendSharing, IoCallback, NamespaceBackend, ReadCallback } from './types.js';

const ZEROS = Buffer.alloc(128 * 1024);

export class NullBackend implements NamespaceBackend {
  readonly kind = 'null';
  constructor(readonly size: number) {}

  read(_offset: number, length: number, cb: ReadCallback): void {
    const out: Buffer[] = [];
    for (let left = length; left > 0; left -= ZEROS.length) out.push(ZEROS.subarray(0, Math.min(left, ZEROS.length)));
    cb(null, out);
  }

  write(_offset: number, _data: readonly Buffer[], _fua: boolean, cb: IoCallback): void {
    cb(null);
  }

  flush(cb: IoCallback): void {
    cb(null);
  }

  writeZeroes(_offset: number, _length: number, _deallocate: boolean, cb: IoCallback): void {
    cb(null);
  }

  sharing(): BackendSharing {
    return { kind: 'null', size: this.size };
  }

  async close(): Promise<void> {}
}
