// A C2HData with LAST|SUCCESS that ends short of the command's buffer, as SPDK v26.05's nvmf_tgt sends it for an
// Authentication Receive (AL 4096, an AUTH_Challenge of 1104 bytes: 16-byte header, SHA-512 C1, ffdhe8192 public
// value). The host completes the command with the bytes that came (Linux nvme_tcp_recv_data and SPDK's own host only
// require SUCCESS ⇒ LAST, TCP 1.0 §3.6.2.9), over both receive paths: the direct copy (no digests) and the PDU path.
import { Buffer } from 'node:buffer';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { PduType, crc32c, encodePdu } from '../../protocol/index.js';
import { HostTcpQueue, type HostCommand } from './tcp-queue.js';

const CID = 0x3000;
const AL = 4096;
const MSG = 1104;

/**
 * The C2HData header nvmf_tgt wrote (lib/nvmf/tcp.c _nvmf_tcp_send_c2h_data): type 7, flags LAST|SUCCESS (0x0c)
 * plus HDGSTF|DDGSTF when negotiated, hlen 24, pdo 24 (+4 with a header digest), plen, cccid, ttag 0, datao 0, datal.
 */
function spdkC2H(payload: Buffer, digests: boolean): Buffer {
  const h = Buffer.alloc(24);
  h[0] = PduType.C2H_DATA;
  h[1] = 0x0c | (digests ? 0x03 : 0);
  h[2] = 24;
  h[3] = digests ? 28 : 24;
  h.writeUInt32LE(24 + payload.length + (digests ? 8 : 0), 4);
  h.writeUInt16LE(CID, 8);
  h.writeUInt32LE(0, 12);
  h.writeUInt32LE(payload.length, 16);
  if (!digests) return Buffer.concat([h, payload]);
  const d = (v: number): Buffer => {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v >>> 0);
    return b;
  };
  return Buffer.concat([h, d(crc32c(h)), payload, d(crc32c(payload))]);
}

const servers: net.Server[] = [];
const queues: HostTcpQueue[] = [];
afterEach(async () => {
  for (const q of queues.splice(0)) q.close();
  for (const s of servers.splice(0)) await new Promise((r) => s.close(() => r(undefined)));
});

/** A target that answers ICReq and, when the 72-byte CapsuleCmd (+ digest) arrives, the C2HData above. */
async function target(payload: Buffer, digests: boolean): Promise<number> {
  const srv = net.createServer((s) => {
    let got = 0;
    s.on('data', (d: Buffer) => {
      const before = got;
      got += d.length;
      if (before < 128 && got >= 128) s.write(Buffer.concat(encodePdu({ type: PduType.IC_RESP, pfv: 0, cpda: 0, dgst: digests ? 3 : 0, maxh2cdata: 131072 })));
      if (got >= 128 + 72 && before < 128 + 72) s.write(spdkC2H(payload, digests));
    });
    s.on('error', () => undefined);
  });
  servers.push(srv);
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return (srv.address() as net.AddressInfo).port;
}

describe('HostTcpQueue: C2HData SUCCESS with a transfer shorter than the buffer (SPDK Authentication Receive)', () => {
  for (const digests of [false, true]) {
    it(`completes the command with the ${MSG} bytes sent (${digests ? 'PDU path, digests on' : 'direct copy, no digests'})`, async () => {
      const payload = Buffer.alloc(MSG);
      for (let i = 0; i < MSG; i++) payload[i] = (i * 7 + 3) & 0xff;
      const port = await target(payload, digests);
      const q = new HostTcpQueue({ host: '127.0.0.1', port, hdgst: digests, ddgst: digests, label: 'q0' });
      queues.push(q);
      const cmd: HostCommand = { cid: CID, h2c: undefined, c2h: Buffer.alloc(AL), h2cSent: 0, c2hReceived: 0, transportStatus: 0 };
      const done = new Promise<{ buf: Buffer | undefined; cid: number }>((resolve, reject) => {
        q.setHandlers({
          command: (cid) => (cid === CID ? cmd : undefined),
          onResponse: (buf, _off, _cmd, cid) => resolve({ buf, cid }),
          onClose: reject,
        });
      });
      await q.connect();
      const sqe = Buffer.alloc(64);
      sqe.writeUInt16LE(CID, 2);
      q.sendCapsule(sqe);
      const r = await done;
      // Completed by SUCCESS (no CapsuleResp: buf undefined), with the data in place and nothing more received.
      expect(r).toEqual({ buf: undefined, cid: CID });
      expect(cmd.c2hReceived).toBe(MSG);
      expect(cmd.c2h?.subarray(0, MSG).equals(payload)).toBe(true);
      expect(cmd.transportStatus).toBe(0);
      expect(q.closed).toBe(false);
    });
  }
});
