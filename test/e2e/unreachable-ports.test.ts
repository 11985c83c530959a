// The global setup's scan: a port with a listener and a port that refuses are both reachable, so neither is held.
import net from 'node:net';
import { expect, it } from 'vitest';
import { findUnreachablePorts } from '../fixtures/unreachable-ports.js';

it('reports neither a listening port nor a refusing one', async () => {
  const srv = net.createServer((c) => c.destroy());
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const open = (srv.address() as net.AddressInfo).port;
  const closed = net.createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
  const refused = (closed.address() as net.AddressInfo).port;
  await new Promise<void>((r) => closed.close(() => r()));
  try {
    expect(await findUnreachablePorts(open, open)).toEqual([]);
    expect(await findUnreachablePorts(refused, refused)).toEqual([]);
  } finally {
    await new Promise<void>((r) => srv.close(() => r()));
  }
});
