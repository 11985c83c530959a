// What can be checked of docker/ without a Docker engine (npm test starts none, test/containers runs them under podman; the docker client has no compose
// plugin): compose.yaml parses (a strict YAML subset), the files, ports, NQN and job file it references exist
// and match the sample config and the Dockerfile; and the image's entrypoint command, run directly against the
// sample config with port-0 overrides, serves /healthz (the HEALTHCHECK command passes) and the API.
import { spawn, type ChildProcess } from 'node:child_process';
import { access, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { parseJobFile } from '../../harness/load/job-file.js';
import { parseHostPort, parseTargetConfig } from '../../target/config/schema.js';
import type { TargetConfig } from '../../target/index.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DOCKER = join(ROOT, 'docker');

type Yaml = string | Yaml[] | { [k: string]: Yaml };

/**
 * Parses the YAML subset compose.yaml is written in: block mappings and sequences by 2-space indentation,
 * `# comments`, plain or double-quoted scalars, and JSON-style flow sequences. Anything else (tabs, anchors,
 * multi-line strings, flow mappings) throws, so the file stays within what this check understands.
 */
function parseYamlSubset(text: string): Yaml {
  const lines: Array<{ indent: number; body: string; no: number }> = [];
  text.split('\n').forEach((raw, i) => {
    if (raw.includes('\t')) throw new Error(`line ${i + 1}: tab`);
    const stripped = stripComment(raw).trimEnd();
    if (stripped.trim() === '') return;
    if (/^\s*(---|\.\.\.)\s*$/.test(stripped)) throw new Error(`line ${i + 1}: multiple documents`);
    const indent = stripped.length - stripped.trimStart().length;
    if (indent % 2 !== 0) throw new Error(`line ${i + 1}: odd indentation`);
    lines.push({ indent, body: stripped.trimStart(), no: i + 1 });
  });
  let pos = 0;
  const scalar = (s: string, no: number): Yaml => {
    if (/^[&*!|>{]/.test(s)) throw new Error(`line ${no}: unsupported YAML construct ${JSON.stringify(s)}`);
    if (s.startsWith('[')) {
      const v: unknown = JSON.parse(s);
      if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw new Error(`line ${no}: flow sequence must hold strings`);
      return v as string[];
    }
    if (s.startsWith('"')) return JSON.parse(s) as string;
    if (s.startsWith("'")) {
      if (!s.endsWith("'")) throw new Error(`line ${no}: unterminated quote`);
      return s.slice(1, -1).replace(/''/g, "'");
    }
    return s;
  };
  const block = (indent: number): Yaml => {
    const first = lines[pos];
    if (first === undefined || first.indent !== indent) throw new Error(`line ${first?.no ?? 'EOF'}: expected indentation ${indent}`);
    if (first.body.startsWith('- ')) {
      const out: Yaml[] = [];
      while (pos < lines.length && (lines[pos]?.indent ?? -1) === indent && lines[pos]?.body.startsWith('- ')) {
        const l = lines[pos++] as { body: string; no: number };
        const item = l.body.slice(2).trim();
        if (/^[A-Za-z0-9_.-]+:(\s|$)/.test(item)) throw new Error(`line ${l.no}: mappings inside sequences are not in the subset`);
        out.push(scalar(item, l.no));
      }
      return out;
    }
    const out: { [k: string]: Yaml } = {};
    while (pos < lines.length && (lines[pos]?.indent ?? -1) === indent) {
      const l = lines[pos++] as { body: string; no: number };
      const m = /^([A-Za-z0-9_.-]+|"[^"]*"):(?:\s+(.*))?$/.exec(l.body);
      if (!m) throw new Error(`line ${l.no}: expected "key: value", got ${JSON.stringify(l.body)}`);
      const key = (m[1] as string).startsWith('"') ? (JSON.parse(m[1] as string) as string) : (m[1] as string);
      if (key in out) throw new Error(`line ${l.no}: duplicate key ${key}`);
      if (m[2] !== undefined && m[2] !== '') out[key] = scalar(m[2], l.no);
      else if ((lines[pos]?.indent ?? -1) > indent) out[key] = block(indent + 2);
      else throw new Error(`line ${l.no}: key ${key} has no value`);
    }
    return out;
  };
  const doc = block(0);
  if (pos !== lines.length) throw new Error(`line ${lines[pos]?.no ?? '?'}: unexpected indentation`);
  return doc;
}

function stripComment(line: string): string {
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote !== undefined) {
      if (c === '\\' && quote === '"') i++;
      else if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(line[i - 1] ?? ''))) return line.slice(0, i);
  }
  return line;
}

function map(v: Yaml | undefined, what: string): { [k: string]: Yaml } {
  if (v === undefined || typeof v === 'string' || Array.isArray(v)) throw new Error(`${what} is not a mapping`);
  return v;
}
function list(v: Yaml | undefined, what: string): string[] {
  if (!Array.isArray(v) || !v.every((x): x is string => typeof x === 'string')) throw new Error(`${what} is not a list of strings`);
  return v;
}
function str(v: Yaml | undefined, what: string): string {
  if (typeof v !== 'string') throw new Error(`${what} is not a string`);
  return v;
}

interface DockerInstr {
  op: string;
  args: string;
}

/** Dockerfile instructions with line continuations joined and comments dropped. */
function parseDockerfile(text: string): DockerInstr[] {
  const out: DockerInstr[] = [];
  let cur = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (cur === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.endsWith('\\')) {
      cur += `${line.slice(0, -1)} `;
      continue;
    }
    cur += line;
    const m = /^([A-Z]+)\s+(.*)$/s.exec(cur);
    if (!m) throw new Error(`bad Dockerfile line: ${cur}`);
    out.push({ op: m[1] as string, args: (m[2] as string).trim() });
    cur = '';
  }
  return out;
}

const exists = (p: string): Promise<boolean> =>
  access(p).then(
    () => true,
    () => false,
  );

async function loadAll() {
  const compose = map(parseYamlSubset(await readFile(join(DOCKER, 'compose.yaml'), 'utf8')), 'compose.yaml');
  const dockerfile = parseDockerfile(await readFile(join(DOCKER, 'Dockerfile'), 'utf8'));
  const sample = parseTargetConfig(JSON.parse(await readFile(join(DOCKER, 'target.json'), 'utf8')), 'docker/target.json');
  return { compose, dockerfile, sample };
}

function instr(df: DockerInstr[], op: string): DockerInstr[] {
  return df.filter((i) => i.op === op);
}

function jsonArray(df: DockerInstr[], op: string): string[] {
  const i = instr(df, op);
  expect(i, `${op} appears once`).toHaveLength(1);
  const v: unknown = JSON.parse((i[0] as DockerInstr).args);
  expect(Array.isArray(v) && v.every((x) => typeof x === 'string'), `${op} is exec form`).toBe(true);
  return v as string[];
}

describe('docker/ files (static checks; no Docker engine here)', () => {
  it('the YAML subset parser accepts what it should and rejects what it cannot check', () => {
    expect(parseYamlSubset('a:\n  b: "x # y" # c\n  c: [ "1", "2" ]\n  d:\n    - e\n    - "f"\n')).toEqual({ a: { b: 'x # y', c: ['1', '2'], d: ['e', 'f'] } });
    for (const bad of ['a:\n\tb: 1', 'a: &x 1', 'a: |\n  t', 'a:\n   b: 1', 'a: 1\na: 2', 'a:\n  - b: 1', 'a: {b: 1}', 'a:']) {
      expect(() => parseYamlSubset(bad), bad).toThrow();
    }
  });

  it('compose.yaml parses and references files, ports, NQN and job file that exist and match the sample config', async () => {
    const { compose, dockerfile, sample } = await loadAll();
    const services = map(compose.services, 'services');
    expect(Object.keys(services).sort()).toEqual(['harness', 'target']);
    const target = map(services.target, 'services.target');
    const harness = map(services.harness, 'services.harness');

    for (const [name, svc] of [['target', target], ['harness', harness]] as const) {
      const build = map(svc.build, `${name}.build`);
      const ctx = resolve(DOCKER, str(build.context, `${name}.build.context`));
      expect(ctx, `${name} build context is the repository root`).toBe(ROOT);
      expect(await exists(join(ctx, str(build.dockerfile, `${name}.build.dockerfile`)))).toBe(true);
      expect(svc.image).toBe(target.image);
    }
    // Every path the Dockerfile copies from the build context exists there (COPY --from takes a stage's output).
    for (const c of instr(dockerfile, 'COPY').filter((c) => !/(^|\s)--from=/.test(c.args))) {
      const parts = c.args.split(/\s+/).filter((p) => !p.startsWith('--'));
      for (const src of parts.slice(0, -1)) expect(await exists(join(ROOT, src)), `COPY ${src}`).toBe(true);
    }

    // Volumes: host files exist; the target's config mount is the path the image's CMD reads.
    const mounts = new Map<string, string>();
    for (const svc of [target, harness]) {
      for (const v of list(svc.volumes, 'volumes')) {
        const [host, ctr] = v.split(':');
        expect(await exists(resolve(DOCKER, host as string)), `volume ${v}`).toBe(true);
        mounts.set(ctr as string, resolve(DOCKER, host as string));
      }
    }
    const cmd = list(target.command, 'target.command');
    expect(cmd).toEqual(jsonArray(dockerfile, 'CMD'));
    const cfgPath = cmd[cmd.indexOf('--config') + 1] as string;
    expect(mounts.get(cfgPath)).toBe(join(DOCKER, 'target.json'));

    // Published container ports are exactly the sample config's NVMe ports plus its API port, and EXPOSEd.
    const api = parseHostPort(sample.api?.listen ?? '');
    expect(api, 'sample config has api.listen').toBeDefined();
    const published = list(target.ports, 'target.ports').map((p) => Number(p.split(':').at(-1)));
    expect(published.sort()).toEqual([...sample.ports.map((p) => p.port), api?.port ?? -1].sort());
    const exposed = instr(dockerfile, 'EXPOSE').flatMap((e) => e.args.split(/\s+/).map(Number));
    expect(exposed.sort()).toEqual([...published].sort());
    // The API listens on a wildcard in the container, so the compose file must supply a token.
    expect(api?.addr).toBe('0.0.0.0');
    expect(str(map(target.environment, 'target.environment').NVME_TCP_API_TOKEN, 'token')).not.toBe('');

    // HEALTHCHECK probes the API port of the sample config; the harness waits for it.
    const hc = instr(dockerfile, 'HEALTHCHECK');
    expect(hc).toHaveLength(1);
    expect((hc[0] as DockerInstr).args).toContain(`http://127.0.0.1:${api?.port ?? -1}/healthz`);
    expect(map(map(harness.depends_on, 'depends_on').target, 'depends_on.target').condition).toBe('service_healthy');

    // The harness connects to the target service on a port and NQN the sample config serves, with a job file that parses.
    const hcmd = [...list(harness.entrypoint, 'harness.entrypoint'), ...list(harness.command, 'harness.command')];
    const flag = (f: string): string => hcmd[hcmd.indexOf(f) + 1] as string;
    expect(flag('-a')).toBe('target');
    const nqn = flag('-n');
    const sub = sample.subsystems.find((s) => s.nqn === nqn);
    expect(sub, `subsystem ${nqn} in target.json`).toBeDefined();
    const served = sample.ports.filter((p) => sub?.ports === undefined || sub.ports.includes(p.id)).map((p) => p.port);
    expect(served).toContain(Number(flag('-s')));
    const jobPath = hcmd[hcmd.indexOf('bench') + 1] as string;
    const jobHost = mounts.get(jobPath);
    expect(jobHost, `${jobPath} is mounted`).toBeDefined();
    expect(parseJobFile(await readFile(jobHost as string, 'utf8')).jobs.length).toBeGreaterThan(0);
  });

  it('the Dockerfile builds dist/ on node:24-slim and runs it there as a non-root user, without the dev tree', async () => {
    const { dockerfile } = await loadAll();
    expect(instr(dockerfile, 'FROM').map((f) => f.args)).toEqual(['node:24-slim AS build', 'node:24-slim']);
    const user = instr(dockerfile, 'USER');
    expect(user).toHaveLength(1);
    expect((user[0] as DockerInstr).args).not.toMatch(/^(root|0)(:|$)/);
    const runs = instr(dockerfile, 'RUN').map((r) => r.args);
    expect(runs.some((r) => r.includes('npm run build'))).toBe(true);
    // The runtime stage: no dev tree and no `prepare` (it would need typescript); dist/ from the build stage.
    expect(runs.some((r) => /npm ci --omit=dev --ignore-scripts/.test(r))).toBe(true);
    expect(instr(dockerfile, 'COPY').map((c) => c.args)).toContain('--from=build /src/dist ./dist');
    expect(jsonArray(dockerfile, 'ENTRYPOINT')).toEqual(['node', 'bin/nvme-tcp.mjs', 'target']);
  });
});

describe('docker/compose.ha.yaml (static checks)', () => {
  it('two gateways: one subsystem identity, disjoint cntlid ranges, gw1 optimized / gw2 non-optimized, a shared volume, loopback ports', async () => {
    const ha = map(parseYamlSubset(await readFile(join(DOCKER, 'compose.ha.yaml'), 'utf8')), 'compose.ha.yaml');
    const services = map(ha.services, 'services');
    expect(Object.keys(services).sort()).toEqual(['gw1', 'gw2']);
    const shared = Object.keys(map(ha.volumes, 'volumes'));
    expect(shared).toHaveLength(1);
    const gws = await Promise.all(
      (['gw1', 'gw2'] as const).map(async (name) => {
        const svc = map(services[name], name);
        expect(svc.image, `${name} uses the lab image`).toBe('nvme-tcp-ts:latest');
        expect(svc.restart).toBe('no');
        const vols = list(svc.volumes, `${name}.volumes`);
        const cfgMount = vols.find((v) => v.split(':')[1] === '/etc/nvme-tcp/target.json') ?? '';
        expect(vols).toContain(`${shared[0] ?? '?'}:/data`);
        for (const p of list(svc.ports, `${name}.ports`)) expect(p, `${name} publishes on loopback`).toMatch(/^127\.0\.0\.1:/);
        const cfg = parseTargetConfig(JSON.parse(await readFile(resolve(DOCKER, cfgMount.split(':')[0] as string), 'utf8')), cfgMount);
        return { cfg, hostPorts: list(svc.ports, 'ports').map((p) => /^127\.0\.0\.1:(.+):\d+$/.exec(p)?.[1]) };
      }),
    );
    const [a, b] = gws.map((g) => g.cfg) as [TargetConfig, TargetConfig];
    const sa = a.subsystems[0];
    const sb = b.subsystems[0];
    expect(sa?.nqn).toBe(sb?.nqn);
    expect(sa?.serial).toBe(sb?.serial);
    expect(sa?.ana).toBe(true);
    expect(sb?.ana).toBe(true);
    const na = sa?.namespaces?.[0];
    const nb = sb?.namespaces?.[0];
    expect(na).toEqual(nb);
    expect(na?.uuid).toBeDefined();
    expect(na?.nguid).toBeDefined();
    expect(na?.backend).toMatchObject({ type: 'file' });
    expect(String((na?.backend as { path?: string }).path)).toMatch(/^\/data\//);
    // Controller IDs never collide between the gateways (a host rejects a duplicate cntlid in one subsystem).
    const [la, ha2, lb, hb] = [sa?.cntlidMin ?? 1, sa?.cntlidMax ?? 0xffef, sb?.cntlidMin ?? 1, sb?.cntlidMax ?? 0xffef];
    expect(ha2 < lb || hb < la, `ranges ${la}-${ha2} and ${lb}-${hb}`).toBe(true);
    const grp = String(na?.anaGroup ?? 1);
    expect(a.ports[0]?.anaStates?.[grp]).toBe('optimized');
    expect(b.ports[0]?.anaStates?.[grp]).toBe('non-optimized');
    // Each gateway has its own host ports.
    expect(new Set([...(gws[0]?.hostPorts ?? []), ...(gws[1]?.hostPorts ?? [])]).size).toBe(4);
  });
});

describe("the image's entrypoint, run directly", () => {
  const children: ChildProcess[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    for (const c of children.splice(0)) {
      if (c.exitCode === null && c.signalCode === null) {
        const done = new Promise((r) => c.once('exit', r));
        c.kill('SIGTERM');
        const t = setTimeout(() => c.kill('SIGKILL'), 5000);
        await done;
        clearTimeout(t);
      }
    }
    for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
  });

  /** ENTRYPOINT + CMD from the Dockerfile (the bin: dist/ when built, as in the image), with the config path replaced. */
  async function entrypoint(config: TargetConfig, env: Record<string, string>): Promise<{ child: ChildProcess; out: () => string; err: () => string; exit: Promise<number | null> }> {
    const df = parseDockerfile(await readFile(join(DOCKER, 'Dockerfile'), 'utf8'));
    const dir = await mkdtemp(join(tmpdir(), 'mgmt-docker-'));
    dirs.push(dir);
    const cfgPath = join(dir, 'target.json');
    await writeFile(cfgPath, JSON.stringify(config));
    const [exe, ...args] = [...jsonArray(df, 'ENTRYPOINT'), ...jsonArray(df, 'CMD').map((a) => (a === '/etc/nvme-tcp/target.json' ? cfgPath : a))];
    expect(exe).toBe('node');
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      env: { ...process.env, ...env, NODE_ENV: 'production' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let out = '';
    let err = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    return { child, out: () => out, err: () => err, exit };
  }

  async function sampleWithPort0(apiListen: string): Promise<TargetConfig> {
    const sample = parseTargetConfig(JSON.parse(await readFile(join(DOCKER, 'target.json'), 'utf8')));
    return { ...sample, ports: sample.ports.map((p) => ({ ...p, addr: '127.0.0.1', port: 0 })), api: { listen: apiListen } };
  }

  it('serves the sample config: /healthz passes the HEALTHCHECK command, the API needs the token from the environment', async () => {
    const sample = await sampleWithPort0('127.0.0.1:0');
    const run = await entrypoint(sample, { NVME_TCP_API_TOKEN: 'docker-test-token' });
    const url = await new Promise<string>((res, rej) => {
      const timer = setInterval(() => {
        const m = /management API on (http:\/\/[^\s]+)/.exec(run.out());
        if (m) {
          clearInterval(timer);
          res(m[1] as string);
        }
      }, 50);
      void run.exit.then((code) => {
        clearInterval(timer);
        rej(new Error(`target exited with ${code}: ${run.err()}`));
      });
    });
    const port = new URL(url).port;

    // The HEALTHCHECK command itself, aimed at this port.
    const df = parseDockerfile(await readFile(join(DOCKER, 'Dockerfile'), 'utf8'));
    const hc = (instr(df, 'HEALTHCHECK')[0] as DockerInstr).args;
    const probe = JSON.parse(hc.slice(hc.indexOf('CMD') + 3).trim()) as string[];
    expect(probe[0]).toBe('node');
    const probeArgs = probe.slice(1).map((a) => a.replace(/127\.0\.0\.1:\d+/, `127.0.0.1:${port}`));
    const code = await new Promise<number | null>((r) => spawn(process.execPath, probeArgs, { stdio: 'ignore' }).once('exit', r));
    expect(code).toBe(0);

    expect((await fetch(`${url}/config`)).status).toBe(401);
    const cfg = await fetch(`${url}/config`, { headers: { authorization: 'Bearer docker-test-token' } });
    expect(cfg.status).toBe(200);
    const live = (await cfg.json()) as TargetConfig;
    expect(live.subsystems.map((s) => s.nqn)).toEqual(sample.subsystems.map((s) => s.nqn));
    expect(live.subsystems[0]?.namespaces?.length).toBe(sample.subsystems[0]?.namespaces?.length);

    run.child.kill('SIGTERM');
    expect(await run.exit).toBe(0);
  });

  it('refuses to start when the API would listen on a wildcard without a token', async () => {
    const run = await entrypoint(await sampleWithPort0('0.0.0.0:0'), { NVME_TCP_API_TOKEN: '' });
    const code = await run.exit;
    expect(code).not.toBe(0);
    expect(run.err()).toMatch(/without a token/);
  });
});
