// runLabScript boots through harness/lab-boot.sh: a guest whose kernel died before its script began (run.sh exit 125,
// no ===LAB-SCRIPT-BEGIN) is booted again; a script that began is never re-run. Stand-in run.sh scripts count their
// runs in a file, so what is checked is how often the wrapper really ran them.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runLabScript } from '../../harness/lab.js';

const dir = mkdtempSync(path.join(tmpdir(), 'lab-boot-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A run.sh stand-in: run N (1-based) does what `body` says for it; every run is counted in DIR/NAME.count. */
function fakeRun(name: string, body: string): { script: string; runs: () => number } {
  const count = path.join(dir, `${name}.count`);
  const script = path.join(dir, `${name}.sh`);
  writeFileSync(count, '');
  writeFileSync(script, `echo x >> '${count}'\nn=$(wc -l < '${count}')\n${body}\n`);
  return { script, runs: () => readFileSync(count, 'utf8').split('\n').filter(Boolean).length };
}

describe('harness/lab-boot.sh', () => {
  it('boots again after a kernel that died before the script began, and streams the run that worked', async () => {
    const f = fakeRun('panic-once', `if [ "$n" = 1 ]; then echo '[ 2.05] Kernel panic - not syncing' >&2; exit 125; fi\necho '===LAB-SCRIPT-BEGIN uptime=1==='\necho '@@STEP a PASS'\necho '===LAB-SCRIPT-END rc=0'\nexit 0`);
    const seen: string[] = [];
    const r = await runLabScript([f.script], (c) => seen.push(c)).done;
    expect(r.code).toBe(0);
    expect(f.runs()).toBe(2);
    expect(r.out).toMatch(/Kernel panic[\s\S]*lab-boot: the guest died before its script began \(boot 1 of 3\)[\s\S]*@@STEP a PASS/);
    expect(seen.join('')).toContain('@@STEP a PASS');
  });

  it('never re-runs a script that began, whatever it exited with', async () => {
    const f = fakeRun('began', `echo '===LAB-SCRIPT-BEGIN uptime=1==='\nexit 125`);
    const r = await runLabScript([f.script]).done;
    expect(r.code).toBe(125);
    expect(f.runs()).toBe(1);
    const t = fakeRun('timeout', 'exit 124');
    expect((await runLabScript([t.script]).done).code).toBe(124);
    expect(t.runs()).toBe(1);
  });

  it('gives up after LAB_BOOT_TRIES boots with run.sh exit status', async () => {
    const f = fakeRun('always', 'exit 125');
    const r = await runLabScript([f.script], undefined, { LAB_BOOT_TRIES: '2' }).done;
    expect(r.code).toBe(125);
    expect(f.runs()).toBe(2);
  });
});
