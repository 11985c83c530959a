// Host-side helpers for the container suites: podman and podman-compose with the suite's containers.conf, health
// waits (podman-compose 1.0.3 ignores `condition: service_healthy`, and without systemd podman runs no healthcheck
// timers, so the suite runs the image's HEALTHCHECK itself), and a teardown that removes every container, volume
// and network of a compose project even when the project was left half-up.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, '..', '..');
export const DOCKER = path.join(REPO, 'docker');
export const TOKEN = 'nvme-lab-token';

export const ENV: NodeJS.ProcessEnv = { ...process.env, CONTAINERS_CONF: path.join(HERE, 'containers.conf') };

export interface Run {
  code: number;
  out: string;
  err: string;
}

export function run(cmd: string, args: readonly string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 120_000): Promise<Run> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env: { ...ENV, ...env }, timeout: timeoutMs, maxBuffer: 64 << 20, cwd: REPO }, (err, out, errOut) => {
      const code = err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : 1;
      resolve({ code, out: out.toString(), err: errOut.toString() });
    });
  });
}

export async function podman(args: readonly string[], timeoutMs?: number): Promise<Run> {
  return run('podman', args, {}, timeoutMs);
}

/** podman-compose for one project (its own name, so a user's `docker compose` project of the same file is untouched). */
export function compose(project: string, file: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return run('podman-compose', ['-p', project, '-f', file, ...args], env, 300_000);
}

/** podman-compose 1.0.3's container name for a service. */
export const ctr = (project: string, service: string): string => `${project}_${service}_1`;

export async function state(name: string): Promise<{ status: string; exitCode: number; restarts: number } | undefined> {
  const r = await podman(['inspect', '--format', '{{.State.Status}} {{.State.ExitCode}} {{.RestartCount}}', name]);
  if (r.code !== 0) return undefined;
  const [status = '', exitCode = '0', restarts = '0'] = r.out.trim().split(' ');
  return { status, exitCode: Number(exitCode), restarts: Number(restarts) };
}

/** Runs the container's HEALTHCHECK until it passes; throws with the log tail when the container exits first. */
export async function waitHealthy(name: string, timeoutMs = 60_000): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    if ((await podman(['healthcheck', 'run', name])).code === 0) return Date.now() - t0;
    const s = await state(name);
    if (s === undefined || s.status === 'exited') {
      throw new Error(`${name} exited (${s?.exitCode ?? '?'}) before it became healthy:\n${(await logs(name)).slice(-2000)}`);
    }
    if (Date.now() - t0 > timeoutMs) throw new Error(`${name} not healthy after ${timeoutMs} ms:\n${(await logs(name)).slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

export async function logs(name: string): Promise<string> {
  const r = await podman(['logs', name]);
  return r.out + r.err;
}

/** What is left of a project: containers (any state), volumes and networks carrying its compose label or name. */
export async function residue(project: string): Promise<string[]> {
  const label = `label=io.podman.compose.project=${project}`;
  const c = await podman(['ps', '-a', '--filter', label, '--format', '{{.Names}}']);
  const v = await podman(['volume', 'ls', '--filter', label, '--format', '{{.Name}}']);
  const n = await podman(['network', 'ls', '--format', '{{.Name}}']);
  const vols = (await podman(['volume', 'ls', '--format', '{{.Name}}'])).out.split('\n').filter((x) => x.startsWith(`${project}_`));
  return [
    ...c.out.split('\n').filter(Boolean).map((x) => `container ${x}`),
    ...new Set([...v.out.split('\n').filter(Boolean), ...vols].map((x) => `volume ${x}`)),
    ...n.out.split('\n').filter((x) => x.startsWith(`${project}_`)).map((x) => `network ${x}`),
  ];
}

/** `compose down -v`, then removes by force whatever it left (a failed up can leave containers compose does not know). */
export async function teardown(project: string, file: string, env: NodeJS.ProcessEnv = {}): Promise<void> {
  await compose(project, file, ['down', '-v', '-t', '2'], env);
  for (const item of await residue(project)) {
    const [kind = '', name = ''] = item.split(' ');
    if (kind === 'container') await podman(['rm', '-f', '-t', '0', name]);
    else if (kind === 'volume') await podman(['volume', 'rm', '-f', name]);
    else if (kind === 'network') await podman(['network', 'rm', '-f', name]);
  }
}

/** Sum of one counter over all its label sets in a Prometheus text page. */
export function counter(page: string, name: string): number {
  let sum = 0;
  for (const line of page.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== ' ' && rest[0] !== '{') continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

export async function metrics(apiPort: number): Promise<string> {
  const r = await fetch(`http://127.0.0.1:${apiPort}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  if (!r.ok) throw new Error(`/metrics: HTTP ${r.status}`);
  return r.text();
}
