// Every edge of the Controller and CoreQueue state tables: the listed ones succeed, all others are refused.
import { Buffer } from 'node:buffer';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import {
  CONTROLLER_TRANSITIONS,
  TargetController,
  CorePort,
  CoreQueue,
  QUEUE_TRANSITIONS,
  REQUEST_TRANSITIONS,
  REQ_STATE_NAMES,
  ReqStateId,
  Request,
  Subsystem,
  TargetCore,
  type ControllerState,
  type QueueState,
  type ReqState,
  type QueueTransportOps,
} from './index.js';

import { itChecksEveryEdge } from '../../test/fixtures/state-table.js';

const logger = pino({ level: 'silent' });

function newController(): TargetController {
  const target = new TargetCore(logger);
  const subsys = new Subsystem({ nqn: 'nqn.2024-01.io.test:sub' });
  const port = new CorePort({ id: 1, addr: '127.0.0.1', port: 0 });
  return new TargetController(target, subsys, 1, 'nqn.2024-01.io.test:host', Buffer.alloc(16), port, 0);
}

class FakeOps implements QueueTransportOps {
  readonly peer = '127.0.0.1:1';
  readonly localAddress = '127.0.0.1';
  readonly localPort = 4420;
  readonly dataDigest = false;
  live = 0;
  queueResponse(_req: Request): void {}
  requestData(_req: Request): void {}
  queueLive(): void {
    this.live++;
  }
  close(_reason: string): void {}
}

function newQueue(ops = new FakeOps()): CoreQueue {
  return new CoreQueue(new TargetCore(logger), new CorePort({ id: 1, addr: '127.0.0.1', port: 0 }), ops);
}

describe('Controller state table', () => {
  it('starts live', () => {
    expect(newController().state).toBe('live');
  });

  itChecksEveryEdge<ControllerState>(CONTROLLER_TRANSITIONS, 'live', newController);

  it('teardown goes dead once; a second teardown is refused by the table and does nothing', () => {
    const c = newController();
    c.subsys.controllers.set(c.cntlid, c);
    c.teardown('test');
    expect(c.state).toBe('dead');
    expect(c.subsys.controllers.size).toBe(0);
    c.subsys.controllers.set(c.cntlid, c);
    c.teardown('again');
    expect(c.subsys.controllers.size).toBe(1);
  });

  it('CC.SHN moves live -> shutdown and clearing it moves back; a dead controller stays dead', () => {
    const c = newController();
    c.writeCc(1 << 14);
    expect(c.state).toBe('shutdown');
    c.writeCc(0);
    expect(c.state).toBe('live');
    c.setState('dead');
    c.writeCc(1 << 14);
    expect(c.state).toBe('dead');
  });
});

describe('CoreQueue state table', () => {
  it('starts connecting', () => {
    expect(newQueue().state).toBe('connecting');
  });

  itChecksEveryEdge<QueueState>(QUEUE_TRANSITIONS, 'connecting', () => newQueue());

  it('tells the transport once when it goes live, and not on a refused edge', () => {
    const ops = new FakeOps();
    const q = newQueue(ops);
    q.setState('live');
    q.setState('live');
    expect(ops.live).toBe(1);
  });

  it('transport close ends the queue once', () => {
    const q = newQueue();
    q.onTransportClosed();
    expect(q.state).toBe('closed');
    q.onTransportClosed();
    expect(q.state).toBe('closed');
  });
});

describe('Request lifecycle table', () => {
  it('has exactly the documented edges', () => {
    expect(REQUEST_TRANSITIONS).toEqual({ free: ['exec'], exec: ['need-data', 'done', 'free'], 'need-data': ['exec', 'done', 'free'], done: ['free'] });
  });

  // setState takes the state's small-integer id (REQ_STATE_NAMES order); the walker speaks names.
  itChecksEveryEdge<ReqState>(REQUEST_TRANSITIONS, 'free', () => {
    const r = new Request();
    return {
      get state(): ReqState {
        return r.state;
      },
      setState: (next: ReqState): boolean => r.setState(REQ_STATE_NAMES.indexOf(next) as ReqStateId),
    };
  });

  it('REQ_STATE_NAMES lists every state of the table once, in ReqStateId order', () => {
    expect([...REQ_STATE_NAMES].sort()).toEqual(Object.keys(REQUEST_TRANSITIONS).sort());
    expect(REQ_STATE_NAMES.map((n) => n.toUpperCase().replace('-', '_'))).toEqual(Object.keys(ReqStateId));
    expect(REQ_STATE_NAMES.map((_, i) => i)).toEqual(Object.values(ReqStateId));
  });

  it('complete() is once: a second completion of the same command is refused by the table', () => {
    const sent: Request[] = [];
    const ops = new FakeOps();
    ops.queueResponse = (r: Request): void => void sent.push(r);
    const q = newQueue(ops);
    const req = new Request();
    q.reject(req, 0x6);
    q.complete(req, 0);
    expect(sent).toHaveLength(1);
    expect([req.state, req.status]).toEqual(['done', 0x6]);
  });
});
