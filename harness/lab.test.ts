// byLine: whole lines out of stdout chunks cut anywhere (a guest's @@ markers arrive split across reads).
import { describe, expect, it } from 'vitest';
import { byLine } from './lab.js';

describe('byLine', () => {
  it('gives each whole line once, trimmed, however the chunks cut it; keeps a partial line for later', () => {
    const text = '@@ZONES a {"x":1}\r\n  @@HOST attach 2 h\nplain\n@@STEP s PASS';
    for (let cut = 0; cut <= text.length; cut++) {
      const lines: string[] = [];
      const feed = byLine((l) => lines.push(l));
      feed(text.slice(0, cut));
      feed(text.slice(cut));
      expect(lines).toEqual(['@@ZONES a {"x":1}', '@@HOST attach 2 h', 'plain']);
      feed('\n');
      expect(lines.at(-1)).toBe('@@STEP s PASS');
    }
  });
});
