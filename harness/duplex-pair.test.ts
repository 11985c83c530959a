import { describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { duplexPair } from './duplex-pair.js';

describe('duplexPair', () => {
  it('delivers writes of each end to the other end, in order', async () => {
    const [a, b] = duplexPair();
    const got: Buffer[] = [];
    b.on('data', (c: Buffer) => got.push(c));
    a.write(Buffer.from('one '));
    a.write(Buffer.from('two'));
    a.end();
    await once(b, 'end');
    expect(Buffer.concat(got).toString()).toBe('one two');
    const back = once(a, 'data');
    b.write('pong');
    expect(String((await back)[0])).toBe('pong');
    b.destroy();
    a.destroy();
  });

  it('applies backpressure: a writer waits until the reader consumes', async () => {
    const [a, b] = duplexPair({ highWaterMark: 1024 });
    const big = Buffer.alloc(64 * 1024, 7);
    let writes = 0;
    while (a.write(big.subarray(0, 4096))) writes++;
    expect(writes).toBeLessThan(16);
    let total = 0;
    b.on('data', (c: Buffer) => (total += c.length));
    await once(a, 'drain');
    expect(total).toBeGreaterThan(0);
    a.destroy();
    b.destroy();
  });

  it('ends the peer when one side is destroyed', async () => {
    const [a, b] = duplexPair();
    b.resume();
    const ended = once(b, 'end');
    a.destroy();
    await ended;
  });
});
