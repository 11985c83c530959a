// The benches that run their target as a child of themselves (`<bench> --serve ...`): both pinned to CPU 0 when
// taskset exists (docs/performance.md: unpinned runs on this 2-vCPU machine are bimodal).
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface ServeChild<T> {
  child: ChildProcess;
  /** The first line the child printed, parsed as JSON (its ports). */
  hello: T;
  /** How the two processes were placed, for the report's title. */
  pinned: string;
}

/** Pins this process to CPU 0, starts `selfUrl --serve ...args` on the same CPU and waits for its first JSON line. */
export async function startServeChild<T>(selfUrl: string, args: readonly string[] = []): Promise<ServeChild<T>> {
  let pinned = 'unpinned';
  try {
    execFileSync('taskset', ['-cp', '0', String(process.pid)], { stdio: 'ignore' });
    pinned = 'both pinned to CPU 0';
  } catch {
    // taskset missing: the title says so
  }
  const tsx = fileURLToPath(new URL('../node_modules/.bin/tsx', import.meta.url));
  const argv = [fileURLToPath(selfUrl), '--serve', ...args];
  const child = pinned === 'unpinned' ? spawn(tsx, argv, { stdio: ['pipe', 'pipe', 'inherit'] }) : spawn('taskset', ['-c', '0', tsx, ...argv], { stdio: ['pipe', 'pipe', 'inherit'] });
  const hello = await new Promise<T>((resolve, reject) => {
    let buf = '';
    child.stdout?.on('data', (d: Buffer) => {
      buf += d.toString();
      const nl = buf.indexOf('\n');
      if (nl >= 0) resolve(JSON.parse(buf.slice(0, nl)) as T);
    });
    child.once('exit', (c) => reject(new Error(`target exited ${c}`)));
  });
  return { child, hello, pinned };
}
