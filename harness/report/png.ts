// Minimal PNG decoder (8-bit RGB/RGBA, non-interlaced: what headless Chromium writes) for screenshot checks in tests.
import { inflateSync } from 'node:zlib';

export interface Image {
  width: number;
  height: number;
  /** RGBA, 4 bytes per pixel, row-major. */
  rgba: Uint8Array;
}

export function decodePng(png: Buffer): Image {
  if (png.length < 8 || png.readUInt32BE(0) !== 0x89504e47 || png.readUInt32BE(4) !== 0x0d0a1a0a) throw new Error('not a PNG');
  let off = 8;
  let width = 0;
  let height = 0;
  let colorType = -1;
  const idat: Buffer[] = [];
  while (off + 8 <= png.length) {
    const len = png.readUInt32BE(off);
    const type = png.toString('latin1', off + 4, off + 8);
    const data = png.subarray(off + 8, off + 8 + len);
    off += 12 + len;
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      const depth = data[8];
      colorType = data[9] ?? -1;
      if (depth !== 8 || (colorType !== 2 && colorType !== 6) || data[12] !== 0) throw new Error(`unsupported PNG (depth ${depth}, color type ${colorType}, interlace ${data[12]})`);
    } else if (type === 'IDAT') idat.push(data);
    else if (type === 'IEND') break;
  }
  const bpp = colorType === 6 ? 4 : 3;
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * bpp;
  const cur = Buffer.alloc(stride);
  let prev = Buffer.alloc(stride);
  const rgba = new Uint8Array(width * height * 4);
  for (let y = 0; y < height; y++) {
    const base = y * (stride + 1);
    const filter = raw[base];
    for (let x = 0; x < stride; x++) {
      const v = raw[base + 1 + x] as number;
      const a = x >= bpp ? (cur[x - bpp] as number) : 0;
      const b = prev[x] as number;
      const c = x >= bpp ? (prev[x - bpp] as number) : 0;
      let out: number;
      switch (filter) {
        case 0:
          out = v;
          break;
        case 1:
          out = v + a;
          break;
        case 2:
          out = v + b;
          break;
        case 3:
          out = v + ((a + b) >> 1);
          break;
        case 4: {
          const p = a + b - c;
          const pa = Math.abs(p - a);
          const pb = Math.abs(p - b);
          const pc = Math.abs(p - c);
          out = v + (pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
          break;
        }
        default:
          throw new Error(`bad PNG filter ${filter} on row ${y}`);
      }
      cur[x] = out & 0xff;
    }
    for (let x = 0; x < width; x++) {
      const o = (y * width + x) * 4;
      rgba[o] = cur[x * bpp] as number;
      rgba[o + 1] = cur[x * bpp + 1] as number;
      rgba[o + 2] = cur[x * bpp + 2] as number;
      rgba[o + 3] = bpp === 4 ? (cur[x * bpp + 3] as number) : 255;
    }
    prev = Buffer.from(cur);
  }
  return { width, height, rgba };
}

/** Pixels inside a rectangle whose colour is saturated (chart series and bars), not white/grey text or grid. */
export function countColoredPixels(img: Image, x: number, y: number, w: number, h: number, minSaturation = 60): number {
  let n = 0;
  for (let yy = Math.max(0, y); yy < Math.min(img.height, y + h); yy++) {
    for (let xx = Math.max(0, x); xx < Math.min(img.width, x + w); xx++) {
      const o = (yy * img.width + xx) * 4;
      const r = img.rgba[o] as number;
      const g = img.rgba[o + 1] as number;
      const b = img.rgba[o + 2] as number;
      if (Math.max(r, g, b) - Math.min(r, g, b) >= minSaturation) n++;
    }
  }
  return n;
}
