/**
 * CRC-32 (IEEE 802.3 / zlib polynomial 0xEDB88320, reflected, init and final XOR 0xFFFFFFFF) for the
 * DHHC-1 secret representation (NVMe Base 2.0 §8.13.5.8; Linux uses ~crc32(~0, ...)). Node 20's
 * node:zlib has no crc32 (added in 22.2), and crc32c is a different polynomial.
 */

const TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32Ieee(buf: Uint8Array): number {
  let crc = 0xffffffff;
  for (let i = 0; i < buf.length; i++) {
    crc = (TABLE[(crc ^ (buf[i] as number)) & 0xff] as number) ^ (crc >>> 8);
  }
  return (crc ^ 0xffffffff) >>> 0;
}
