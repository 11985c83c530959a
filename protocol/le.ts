// Little-endian field access for the per-command paths. Buffer's readUInt32LE/writeUInt32LE validate the offset (and
// the value) through helper calls that V8 often leaves out of line; these compile to plain byte loads and stores with
// the typed array's own bounds checks. Callers pass offsets they have already bounded (header and SQE layouts).

/** Unsigned 16-bit little-endian value at `o`. */
export function rd16(b: Uint8Array, o: number): number {
  return (b[o] as number) | ((b[o + 1] as number) << 8);
}

/** Unsigned 32-bit little-endian value at `o`. */
export function rd32(b: Uint8Array, o: number): number {
  return ((b[o] as number) | ((b[o + 1] as number) << 8) | ((b[o + 2] as number) << 16)) + (b[o + 3] as number) * 0x100_0000;
}

/** Low 16 bits of `v`, little-endian at `o`. */
export function wr16(b: Uint8Array, o: number, v: number): void {
  b[o] = v;
  b[o + 1] = v >>> 8;
}

/** Low 32 bits of `v`, little-endian at `o`. */
export function wr32(b: Uint8Array, o: number, v: number): void {
  b[o] = v;
  b[o + 1] = v >>> 8;
  b[o + 2] = v >>> 16;
  b[o + 3] = v >>> 24;
}
