// TcpCommand: the transport record around a core Request (pool reuse, data digest error flag).
import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { NO_ERROR_LOCATION, ReqStateId } from '../../core/index.js';
import { TcpCommand } from './command.js';

describe('TcpCommand', () => {
  it('finds itself from the Request it owns', () => {
    const c = new TcpCommand();
    expect(TcpCommand.of(c.req)).toBe(c);
  });

  it('a data digest error is a flag of the record; the core error location stays "none"', () => {
    const c = new TcpCommand();
    c.dataDigestError = true;
    expect(c.req.errorLoc).toBe(NO_ERROR_LOCATION);
  });

  it('reset clears the transport fields and the Request', () => {
    const c = new TcpCommand();
    c.ttag = 7;
    c.received = 4096;
    c.pendingRead = 512;
    c.buf = Buffer.alloc(1);
    c.sqe = Buffer.alloc(64);
    c.dataDigestError = true;
    c.req.status = 1;
    c.req.errorLoc = 24;
    c.reset();
    expect([c.ttag, c.received, c.pendingRead, c.buf.length, c.sqe.length, c.dataDigestError]).toEqual([0, 0, 0, 0, 0, false]);
    expect([c.req.status, c.req.errorLoc]).toEqual([0, NO_ERROR_LOCATION]);
    expect(TcpCommand.of(c.req)).toBe(c);
  });

  it('release drops buffer references so a pooled record pins no data', () => {
    const c = new TcpCommand();
    c.req.out = [Buffer.alloc(1)];
    c.req.data = [Buffer.alloc(1)];
    c.req.inCapsule = [Buffer.alloc(1)];
    c.buf = Buffer.alloc(1);
    c.sqe = Buffer.alloc(64);
    expect(c.req.setState(ReqStateId.EXEC) && c.req.setState(ReqStateId.DONE)).toBe(true);
    c.release();
    expect([c.req.out, c.req.data, c.req.inCapsule, c.buf.length, c.sqe.length, c.req.state]).toEqual([undefined, undefined, undefined, 0, 0, 'free']);
  });
});
