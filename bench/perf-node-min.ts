// The "best trivial Node server" (docs/performance.md, Fifth pass) as a second yardstick for bench/perf-target.ts: the same subset of
// NVMe/TCP the C target speaks (ICReq, any capsule → success, Read → C2HData + CapsuleResp from RAM), no controller
// model at all. It uses every Node technique docs/performance.md measured (no Nagle, reused receive buffer via onread,
// incremental framing that copies only a PDU split across reads, one write per received chunk with headers and 4 KiB
// payloads gathered into one slab, the payloads copied at the end of the read after one load from each source page as
// PduBatch does, written straight to the descriptor when the stream holds nothing as the target's connections do
// (NODE_MIN_WRITE=stream: through socket.write only); header fields through protocol/le.ts like the target), so the
// gap between it and the real target is the price of being a controller.
//   npx tsx bench/perf-node-min.ts [ram-MiB]     prints "PORT <n>", stops on "quit"
import { Buffer } from 'node:buffer';
import net from 'node:net';
import { PduFlag, PduType, crc32c, rd16, rd32, wr16, wr32 } from '../protocol/index.js';
import { adoptWithUserBuffer, writeToDescriptor } from '../connection/index.js';

const DIRECT = process.env.NODE_MIN_WRITE !== 'stream';
const RAM = Buffer.allocUnsafeSlow(Number(process.argv[2] ?? 256) * 1024 * 1024);
for (let i = 0; i < RAM.length; i += 4) wr32(RAM, i, (i * 2654435761) >>> 0);

const { IC_REQ, IC_RESP, CAPSULE_CMD: CMD, CAPSULE_RESP: RESP, C2H_DATA: C2H } = PduType;
const { DATA_LAST: LAST, DDGSTF: DDGST } = PduFlag;

function serve(sock: net.Socket): void {
  let ddgst = false;
  let split: Buffer | undefined; // a PDU split across reads (copied)
  let slab = Buffer.allocUnsafeSlow(256 * 1024);
  let pos = 0;
  let seg = 0; // start of the slab segment not yet in `out`
  let out: Buffer[] = [];
  const pend: Buffer[] = [];
  const pendAt: number[] = [];
  let touched = 0;
  const copyPending = (): void => {
    let t = 0;
    for (const d of pend) t ^= (d[0] as number) ^ (d[d.length - 1] as number);
    touched ^= t;
    for (let i = 0; i < pend.length; i++) slab.set(pend[i] as Buffer, pendAt[i] as number);
    pend.length = 0;
    pendAt.length = 0;
  };
  const cut = (): void => {
    if (pos > seg) out.push(slab.subarray(seg, pos));
    seg = pos;
  };
  const room = (n: number): void => {
    if (pos + n <= slab.length) return;
    copyPending();
    cut();
    slab = Buffer.allocUnsafeSlow(256 * 1024);
    pos = seg = 0;
  };
  const resp = (cid: number, dw0: number): void => {
    room(24);
    slab.fill(0, pos, pos + 24);
    slab[pos] = RESP;
    slab[pos + 2] = 24;
    wr32(slab, pos + 4, 24);
    wr32(slab, pos + 8, dw0);
    wr16(slab, pos + 16, 0xffff);
    wr16(slab, pos + 20, cid);
    pos += 24;
  };
  const pdu = (b: Buffer, o: number): void => {
    const type = b[o];
    if (type === IC_REQ) {
      ddgst = ((b[o + 11] as number) & 2) !== 0;
      room(128);
      slab.fill(0, pos, pos + 128);
      slab[pos] = IC_RESP;
      slab[pos + 2] = 128;
      wr32(slab, pos + 4, 128);
      slab[pos + 11] = (b[o + 11] as number) & 3;
      wr32(slab, pos + 12, 131072);
      pos += 128;
      return;
    }
    if (type !== CMD) return;
    const cid = rd16(b, o + 10);
    const opc = b[o + 8];
    if (opc === 0x7f) return resp(cid, b[o + 12] === 0x01 ? 1 : 0);
    if (opc !== 0x02) return resp(cid, 0);
    const slba = rd32(b, o + 48) + rd32(b, o + 52) * 0x1_0000_0000;
    const len = (rd16(b, o + 56) + 1) * 512;
    const off = (slba * 512) % (RAM.length - len);
    room(24 + 4 + (len <= 4096 ? len : 0));
    slab.fill(0, pos, pos + 24);
    slab[pos] = C2H;
    slab[pos + 1] = LAST | (ddgst ? DDGST : 0);
    slab[pos + 2] = 24;
    slab[pos + 3] = 24;
    wr32(slab, pos + 4, 24 + len + (ddgst ? 4 : 0));
    wr16(slab, pos + 8, cid);
    wr32(slab, pos + 16, len);
    pos += 24;
    const data = RAM.subarray(off, off + len);
    if (len <= 4096) {
      // Copied at the end of the read, after touching every source (PduBatch's deferred copies: the cold misses overlap).
      pend.push(data);
      pendAt.push(pos);
      pos += len;
    } else {
      cut();
      out.push(data);
    }
    if (ddgst) {
      room(4);
      wr32(slab, pos, crc32c(data));
      pos += 4;
    }
    resp(cid, 0);
  };
  const onread = (n: number, buf: Buffer): boolean => {
    let b = buf.subarray(0, n);
    if (split !== undefined) {
      b = Buffer.concat([split, b]);
      split = undefined;
    }
    let o = 0;
    while (b.length - o >= 8) {
      const plen = rd32(b, o + 4);
      if (b.length - o < plen) break;
      pdu(b, o);
      o += plen;
    }
    if (o < b.length) split = Buffer.from(b.subarray(o));
    copyPending();
    cut();
    if (DIRECT && out.length > 0 && s.writableLength === 0) {
      let bytes = 0;
      for (const c of out) bytes += c.length;
      if (writeToDescriptor(s, out, bytes)) out.length = 0;
    }
    if (out.length === 1) s.write(out[0] as Buffer);
    else if (out.length > 1) {
      s.cork();
      for (const c of out) s.write(c);
      s.uncork();
    }
    out = [];
    // The kernel took everything: the slab is free again; otherwise the stream still holds views of it.
    if (s.writableLength === 0) pos = seg = 0;
    else {
      slab = Buffer.allocUnsafeSlow(256 * 1024);
      pos = seg = 0;
    }
    return true;
  };
  const s = adoptWithUserBuffer(sock, Buffer.allocUnsafeSlow(256 * 1024), onread);
  s.setNoDelay(true);
  s.on('error', () => s.destroy());
  s.resume();
}

const server = net.createServer({ pauseOnConnect: true, noDelay: true }, serve);
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`PORT ${(server.address() as net.AddressInfo).port}\n`);
});
process.stdin.setEncoding('utf8');
process.stdin.on('data', (l: string) => {
  if (l.includes('quit')) process.exit(0);
});
