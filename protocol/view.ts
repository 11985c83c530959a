// Views of part of a buffer for the per-command paths. Node 20's Buffer.prototype.subarray reads `this.buffer` (a C++
// getter that optimized code reaches through a generic load IC and a runtime call), clamps both ends, then constructs
// the view: about 60 ns a view here, of which construction alone is about 25 (docs/performance.md, seventh pass).
// Node's own Buffers are instances of an internal Uint8Array subclass (FastBuffer) whose prototype is Buffer.prototype;
// BufferView is the same shape reachable from outside, so its instances are Buffers to Buffer.isBuffer, instanceof
// and every Buffer method.
import { Buffer } from 'node:buffer';

// An anonymous class from a factory: tsx (esbuild keepNames) gives a named class a static block that redefines its
// `name`, and V8 then aborts every optimization of `new` on it ("dependency change"): 300 ns a view instead of 25.
function subclass(): typeof Uint8Array {
  return class extends Uint8Array {};
}
const BufferView = subclass();
Object.setPrototypeOf(BufferView.prototype, Buffer.prototype);

/**
 * `length` bytes at `byteOffset` of `ab` as a Buffer sharing that memory. The caller has bounded the range (a range
 * outside `ab` throws RangeError, as the Uint8Array constructor does).
 */
export function bufferView(ab: ArrayBufferLike, byteOffset: number, length: number): Buffer {
  return new BufferView(ab as ArrayBuffer, byteOffset, length) as unknown as Buffer;
}
