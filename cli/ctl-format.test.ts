// `target ctl -o normal`: what a person reads. Nested lists and records are laid out, never dumped as inline JSON.
import { describe, expect, it } from 'vitest';
import { formatNormal } from './ctl-format.js';

describe('formatNormal', () => {
  it('a controller list: queues as a count in the table and a sub-table per controller; times in ISO 8601', () => {
    const out = formatNormal([
      { cntlid: 1, subnqn: 'nqn.2024-01.io.example:a', lastKeepAlive: Date.UTC(2026, 0, 2, 3, 4, 5), queues: [{ qid: 0, sqsize: 32 }, { qid: 1, sqsize: 128 }] },
      { cntlid: 2, subnqn: 'nqn.2024-01.io.example:b', lastKeepAlive: null, queues: [] },
    ]);
    expect(out).toBe(
      [
        'cntlid  subnqn                    lastKeepAlive             queues',
        '1       nqn.2024-01.io.example:a  2026-01-02T03:04:05.000Z  2',
        '2       nqn.2024-01.io.example:b  -                         -',
        '',
        'cntlid 1, queues:',
        '  qid  sqsize',
        '  0    32',
        '  1    128',
        '',
      ].join('\n'),
    );
  });

  it('a port: its bound address as key=value pairs; a subsystem: namespaces as a sub-table, backends inline', () => {
    expect(formatNormal([{ id: 1, addr: '0.0.0.0', port: 0, bound: { addr: '0.0.0.0', port: 4420 } }])).toBe('id  addr     port  bound\n1   0.0.0.0  0     addr=0.0.0.0 port=4420\n');
    const sub = formatNormal({ nqn: 'nqn.2024-01.io.example:a', hosts: ['h1', 'h2'], namespaces: [{ nsid: 1, backend: { type: 'ram', size: '1G' } }] });
    expect(sub).toBe('nqn         nqn.2024-01.io.example:a\nhosts       h1,h2\nnamespaces:\n  nsid  backend\n  1     type=ram size=1G\n');
  });

  it('reservation keys in hex; no reply shape leaves JSON in a cell', () => {
    expect(formatNormal({ rkey: 255, holder: { cntlid: 3, rkey: '4096' } })).toBe('rkey    0xff\nholder:\n  cntlid  3\n  rkey    0x1000\n');
    const deep = formatNormal([{ nqn: 'a', namespaces: [{ nsid: 1, backend: { type: 'file', opts: { direct: true } } }], ana: { groups: [{ id: 1 }] } }]);
    expect(deep).not.toMatch(/[{[]"/);
    expect(deep).toContain('  1     type=file opts={direct=true}');
  });

  it('an empty list is "(none)"; scalars print as they are', () => {
    expect(formatNormal([])).toBe('(none)\n');
    expect(formatNormal('ok')).toBe('ok\n');
    expect(formatNormal(['a', 'b'])).toBe('a\nb\n');
  });
});
