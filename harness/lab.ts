// Host-side helpers for the qemu lab (../shared/lab) shared by the kernel-interop scenario and the interop suites.
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { REPO_ROOT } from './nvme.js';

/** ../shared/lab next to the repository (CI layout), else the shared lab of this machine. */
export function labDir(): string {
  const candidates = [path.resolve(REPO_ROOT, '..', 'shared', 'lab'), '/work/shared/lab'];
  const found = candidates.find((d) => existsSync(path.join(d, 'run.sh')));
  if (found === undefined) throw new Error(`kernel lab not found: no run.sh in ${candidates.join(' or ')}; CI must provide ../shared/lab next to the repository`);
  return found;
}

/** A TCP port free on 127.0.0.1 right now (for qemu hostfwd, which needs a number up front). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a !== null ? a.port : 0));
    });
  });
}
