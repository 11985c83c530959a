// The JSON-RPC reader of harness/peers/spdk.ts: SPDK writes its responses back to back on the socket, without a
// delimiter, and a read may end anywhere inside one.
import { describe, expect, it } from 'vitest';
import { coreList, takeJsonValues, transportId } from './spdk.js';

describe('takeJsonValues', () => {
  it('splits concatenated responses and keeps an unfinished one for the next read', () => {
    const a = '{"jsonrpc":"2.0","id":1,"result":true}';
    const b = '{"jsonrpc":"2.0","id":2,"result":[{"name":"Malloc0","x":"}{"}]}';
    const c = '{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"a \\"quoted\\" }"}}';
    const all = a + '\n' + b + c;
    const cut = all.length - 7;
    const first = takeJsonValues(all.slice(0, cut));
    expect(first.values).toEqual([JSON.parse(a), JSON.parse(b)]);
    const second = takeJsonValues(first.rest + all.slice(cut));
    expect(second.values).toEqual([JSON.parse(c)]);
    expect(second.rest.trim()).toBe('');
  });

  it('splits at every byte boundary the same way', () => {
    const text = '{"id":1,"result":{"a":[1,2,{"b":"]"}]}}{"id":2,"result":"\\\\"}';
    for (let i = 0; i <= text.length; i++) {
      const p = takeJsonValues(text.slice(0, i));
      const q = takeJsonValues(p.rest + text.slice(i));
      expect([...p.values, ...q.values]).toEqual([{ id: 1, result: { a: [1, 2, { b: ']' }] } }, { id: 2, result: '\\' }]);
    }
  });
});

describe('SPDK argument strings', () => {
  it('transport ID: IPv4 / IPv6 family, hostnqn only when given', () => {
    expect(transportId({ traddr: '127.0.0.1', trsvcid: 4420, subnqn: 'nqn.x:y' })).toBe('trtype:TCP adrfam:IPv4 traddr:127.0.0.1 trsvcid:4420 subnqn:nqn.x:y');
    expect(transportId({ traddr: '::1', trsvcid: '4421', subnqn: 'nqn.x:y', hostnqn: 'nqn.h:1' })).toBe('trtype:TCP adrfam:IPv6 traddr:::1 trsvcid:4421 subnqn:nqn.x:y hostnqn:nqn.h:1');
  });

  it('core list', () => {
    expect(coreList([0, 2])).toBe('[0,2]');
  });
});
