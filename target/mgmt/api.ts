// HTTP management API (issue 5): JSON resources over node:http, each route one TargetService call.
// Bodies pass through the config schema (target/config/schema.ts), so a body is valid exactly when the
// same object would be valid in the config file; /metrics serves the Prometheus registry of ./metrics.ts.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { z } from 'zod';
import { ConfigError, anaStateSchema, faultSchema, hostSchema, namespaceSchema, nvmetNameSchema, parseHostPort, parseWith, portSchema, referralSchema, subsystemSchema, subsystemUpdateSchema } from '../config/schema.js';
import type { SubsystemConfig, TargetConfig } from '../config/types.js';
import type { TargetService } from '../service.js';
import { jsonErrorWithoutInput } from './client.js';
import { createMetrics, type TargetMetrics } from './metrics.js';

/** The TargetService surface the API uses (tests may pass a stand-in). */
export type MgmtService = Pick<
  TargetService,
  | 'addPort'
  | 'removePort'
  | 'boundPorts'
  | 'addSubsystem'
  | 'removeSubsystem'
  | 'addNamespace'
  | 'removeNamespace'
  | 'updateNamespace'
  | 'updateSubsystem'
  | 'addAllowedHost'
  | 'removeAllowedHost'
  | 'setAnaState'
  | 'addReferral'
  | 'removeReferral'
  | 'setFaults'
  | 'setHostAuth'
  | 'clearHostAuth'
  | 'listHostAuth'
  | 'getConfig'
  | 'listControllers'
  | 'stats'
  | 'attachNamespaceHost'
  | 'detachNamespaceHost'
  | 'namespaceHosts'
  | 'reservationStatus'
>;
// Worker pool views (target/workers); optional so a service without workers still fits.

type WorkerService = Partial<Pick<TargetService, 'workers' | 'setPlacement' | 'setPortPlacement' | 'portPlacements'>> & { readonly placement?: string };

export interface ApiOptions {
  /** "ADDR:PORT" ("127.0.0.1:8080", "[::1]:0"); port 0 picks a free port. */
  listen: string;
  /** Bearer token every request except GET /healthz must carry; required unless ADDR is loopback. */
  token?: string;
  /** Config file the target was started from; with `writeBack` every change is saved to it. */
  configPath?: string;
  writeBack?: boolean;
  logger?: Logger;
  /** Largest accepted request body (bytes); default 1 MiB. */
  maxBodyBytes?: number;
}

export interface ApiHandle {
  address: string;
  port: number;
  /** Base URL for clients ("http://127.0.0.1:8080", IPv6 in brackets). */
  url: string;
  close(): Promise<void>;
}

/** The API cannot start with these options (non-loopback without a token, bad listen spec). */
export class ApiConfigError extends Error {
  readonly code = 'NVMEOF_ERR_API_CONFIG';
  constructor(message: string) {
    super(message);
    this.name = 'ApiConfigError';
  }
}

/** An HTTP-level failure with the status it maps to; `path` names the body field for 400s. */
class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly path?: string,
  ) {
    super(message);
  }
}

/** True for addresses only this machine can reach: 127.0.0.0/8, ::1 and their IPv4-mapped forms. */
export function isLoopback(addr: string): boolean {
  const a = addr.toLowerCase().replace(/^::ffff:/, '');
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(a) || a === '::1' || a === '0:0:0:0:0:0:0:1';
}

const hostBodySchema = z.strictObject({ nqn: nvmetNameSchema });
const anaBodySchema = z.strictObject({ state: anaStateSchema });
const referralKeySchema = z.strictObject({ addr: z.string(), port: z.number().int() });

type Params = Record<string, string>;
type Handler = (ctx: { params: Params; body: () => Promise<unknown> }) => Promise<Reply> | Reply;
interface Reply {
  status: number;
  json?: unknown;
  text?: string;
  contentType?: string;
  /** The target's configuration changed (write-back applies). */
  mutated?: boolean;
}
interface Route {
  method: string;
  pattern: string[];
  handler: Handler;
}

const ok = (json: unknown, mutated = false): Reply => ({ status: 200, json, mutated });
const created = (json: unknown): Reply => ({ status: 201, json, mutated: true });
const noContent: Reply = { status: 204, mutated: true };

function intParam(v: string | undefined, name: string): number {
  if (v === undefined || !/^\d+$/.test(v)) throw new HttpError(404, `${name} ${JSON.stringify(v ?? '')} is not a number`);
  return Number(v);
}

function buildRoutes(service: MgmtService & WorkerService, metrics: TargetMetrics): Route[] {
  const sub = (nqn: string | undefined): SubsystemConfig => {
    const s = service.getConfig().subsystems.find((x) => x.nqn === nqn);
    if (s === undefined) throw new HttpError(404, `no subsystem ${nqn ?? ''}`);
    return s;
  };
  const portCfg = (id: number) => {
    const p = service.getConfig().ports.find((x) => x.id === id);
    if (p === undefined) throw new HttpError(404, `no port ${id}`);
    return p;
  };
  const routes: Array<[string, string, Handler]> = [
    ['GET', '/healthz', () => ok({ status: 'ok', ports: service.boundPorts().length, uptimeS: Math.round(process.uptime()) })],
    ['GET', '/config', () => ok(service.getConfig())],
    ['GET', '/controllers', () => ok(service.listControllers())],
    // Worker processes (target/workers): count, placement policy, and each worker's state, queues, CPU, I/Os, lag.
    ['GET', '/workers', () => ok({ placement: service.placement ?? 'queue', workers: service.workers?.() ?? [], ports: service.portPlacements?.() ?? [] })],
    [
      'PUT',
      '/workers/placement',
      async ({ body }) => {
        const raw = (await body()) as { placement?: unknown } | null;
        const p = raw !== null && typeof raw === 'object' ? raw.placement : undefined;
        if (typeof p !== 'string') throw new HttpError(400, 'body: placement: is missing; give one of single, controller, queue, host', 'placement');
        try {
          if (service.setPlacement === undefined) throw new Error('this target has no worker pool');
          service.setPlacement(p);
        } catch (err) {
          throw new HttpError(400, `body: placement: ${(err as Error).message}`, 'placement');
        }
        return ok({ placement: service.placement });
      },
    ],

    // DH-HMAC-CHAP keys per host (nvmet hosts/<nqn>/dhchap_*). Replies never carry a secret: listHostAuth and
    // getConfig() redact them, and the PUT body is validated by hostSchema, whose errors never quote a secret.
    ['GET', '/hosts', () => ok(service.listHostAuth())],
    [
      'GET',
      '/hosts/:nqn',
      ({ params }) => {
        const h = service.listHostAuth().find((x) => x.hostnqn === params.nqn);
        if (h === undefined) throw new HttpError(404, `no authentication keys for host ${params.nqn ?? ''}`);
        return ok(h);
      },
    ],
    [
      'PUT',
      '/hosts/:nqn',
      async ({ params, body }) => {
        const raw = await body();
        // The NQN is in the path; a body may repeat it, but not name another host.
        const withNqn = raw !== null && typeof raw === 'object' && !Array.isArray(raw) ? { nqn: params.nqn, ...raw } : raw;
        const h = parseWith(hostSchema, withNqn, 'body');
        if (h.nqn !== params.nqn) throw new HttpError(400, `body: nqn: ${JSON.stringify(h.nqn)} differs from the host in the path (${params.nqn ?? ''}); drop it or make them equal`, 'nqn');
        if (h.dhchapKey === undefined) throw new HttpError(400, 'body: dhchapKey: is missing; give the host key (DELETE /hosts/<nqn> removes the keys)', 'dhchapKey');
        const existed = service.listHostAuth().some((x) => x.hostnqn === h.nqn);
        service.setHostAuth(h);
        const view = service.listHostAuth().find((x) => x.hostnqn === h.nqn);
        return existed ? ok(view, true) : created(view);
      },
    ],
    [
      'DELETE',
      '/hosts/:nqn',
      ({ params }) => {
        const nqn = params.nqn ?? '';
        if (!service.listHostAuth().some((x) => x.hostnqn === nqn)) throw new HttpError(404, `no authentication keys for host ${nqn}`);
        service.clearHostAuth(nqn);
        return noContent;
      },
    ],
    ['GET', '/metrics', async () => ({ status: 200, text: await metrics.render(), contentType: metrics.contentType })],

    ['GET', '/subsystems', () => ok(service.getConfig().subsystems)],
    [
      'POST',
      '/subsystems',
      async ({ body }) => {
        const s = parseWith(subsystemSchema, await body(), 'body');
        await service.addSubsystem(s);
        return created(sub(s.nqn));
      },
    ],
    ['GET', '/subsystems/:nqn', ({ params }) => ok(sub(params.nqn))],
    [
      'PUT',
      '/subsystems/:nqn',
      async ({ params, body }) => {
        const nqn = sub(params.nqn).nqn;
        service.updateSubsystem(nqn, parseWith(subsystemUpdateSchema, await body(), 'body'));
        return ok(sub(nqn), true);
      },
    ],
    [
      'DELETE',
      '/subsystems/:nqn',
      async ({ params }) => {
        await service.removeSubsystem(sub(params.nqn).nqn);
        return noContent;
      },
    ],
    ['GET', '/subsystems/:nqn/namespaces', ({ params }) => ok(sub(params.nqn).namespaces ?? [])],
    [
      'POST',
      '/subsystems/:nqn/namespaces',
      async ({ params, body }) => {
        const nqn = sub(params.nqn).nqn;
        const ns = parseWith(namespaceSchema, await body(), 'body');
        await service.addNamespace(nqn, ns);
        return created((sub(nqn).namespaces ?? []).find((n) => n.nsid === ns.nsid) ?? ns);
      },
    ],
    [
      'GET',
      '/subsystems/:nqn/namespaces/:nsid',
      ({ params }) => {
        const nsid = intParam(params.nsid, 'nsid');
        const ns = (sub(params.nqn).namespaces ?? []).find((n) => n.nsid === nsid);
        if (ns === undefined) throw new HttpError(404, `no namespace ${nsid} in ${params.nqn ?? ''}`);
        return ok(ns);
      },
    ],
    [
      // Enable/disable ({"enabled": false}) or re-map ({"backend": ..., "uuid": ...}): the body's fields replace the
      // namespace's, the others stay; the result must be a valid namespace config.
      'PUT',
      '/subsystems/:nqn/namespaces/:nsid',
      async ({ params, body }) => {
        const s = sub(params.nqn);
        const nsid = intParam(params.nsid, 'nsid');
        const cur = (s.namespaces ?? []).find((n) => n.nsid === nsid);
        if (cur === undefined) throw new HttpError(404, `no namespace ${nsid} in ${s.nqn}`);
        const raw = await body();
        if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new HttpError(400, 'body: expected a JSON object of namespace fields, e.g. {"enabled": false}', '');
        if ('nsid' in raw && (raw as { nsid?: unknown }).nsid !== nsid) throw new HttpError(400, `body: nsid: differs from the namespace in the path (${nsid}); drop it or make them equal`, 'nsid');
        const next = parseWith(namespaceSchema, { ...cur, ...raw, nsid }, 'body');
        await service.updateNamespace(s.nqn, next);
        return ok((sub(s.nqn).namespaces ?? []).find((n) => n.nsid === nsid) ?? next, true);
      },
    ],
    [
      'DELETE',
      '/subsystems/:nqn/namespaces/:nsid',
      async ({ params }) => {
        const s = sub(params.nqn);
        const nsid = intParam(params.nsid, 'nsid');
        if (!(s.namespaces ?? []).some((n) => n.nsid === nsid)) throw new HttpError(404, `no namespace ${nsid} in ${s.nqn}`);
        await service.removeNamespace(s.nqn, nsid);
        return noContent;
      },
    ],
    [
      // Namespace masking: the hosts a namespace is attached to (null: every allowed host).
      'GET',
      '/subsystems/:nqn/namespaces/:nsid/hosts',
      ({ params }) => ok({ hosts: service.namespaceHosts(sub(params.nqn).nqn, intParam(params.nsid, 'nsid')) ?? null }),
    ],
    [
      'POST',
      '/subsystems/:nqn/namespaces/:nsid/hosts',
      async ({ params, body }) => {
        const s = sub(params.nqn);
        const nsid = intParam(params.nsid, 'nsid');
        const { nqn } = parseWith(hostBodySchema, await body(), 'body');
        if ((service.namespaceHosts(s.nqn, nsid) ?? []).includes(nqn)) throw new HttpError(409, `namespace ${nsid} is already attached to ${nqn}`);
        service.attachNamespaceHost(s.nqn, nsid, nqn);
        return created({ hosts: service.namespaceHosts(s.nqn, nsid) ?? null });
      },
    ],
    [
      'DELETE',
      '/subsystems/:nqn/namespaces/:nsid/hosts/:hostnqn',
      ({ params }) => {
        const s = sub(params.nqn);
        const nsid = intParam(params.nsid, 'nsid');
        const h = params.hostnqn ?? '';
        const cur = service.namespaceHosts(s.nqn, nsid);
        if (cur !== undefined && !cur.includes(h)) throw new HttpError(404, `namespace ${nsid} is not attached to ${h}`);
        service.detachNamespaceHost(s.nqn, nsid, h);
        return noContent;
      },
    ],
    [
      // Reservation state of a namespace (registrants by host identifier, keys, type, PTPL): read-only.
      'GET',
      '/subsystems/:nqn/namespaces/:nsid/reservation',
      ({ params }) => ok(service.reservationStatus(sub(params.nqn).nqn, intParam(params.nsid, 'nsid'))),
    ],
    [
      'GET',
      '/subsystems/:nqn/hosts',
      ({ params }) => {
        const s = sub(params.nqn);
        return ok({ allowAnyHost: s.allowAnyHost ?? (s.hosts ?? []).length === 0, hosts: s.hosts ?? [] });
      },
    ],
    [
      'POST',
      '/subsystems/:nqn/hosts',
      async ({ params, body }) => {
        const s = sub(params.nqn);
        const { nqn } = parseWith(hostBodySchema, await body(), 'body');
        if ((s.hosts ?? []).includes(nqn)) throw new HttpError(409, `host ${nqn} is already allowed on ${s.nqn}`);
        service.addAllowedHost(s.nqn, nqn);
        return created({ nqn });
      },
    ],
    [
      'DELETE',
      '/subsystems/:nqn/hosts/:hostnqn',
      ({ params }) => {
        const s = sub(params.nqn);
        const h = params.hostnqn ?? '';
        if (!(s.hosts ?? []).includes(h)) throw new HttpError(404, `host ${h} is not in the allow list of ${s.nqn}`);
        service.removeAllowedHost(s.nqn, h);
        return noContent;
      },
    ],
    [
      'PUT',
      '/subsystems/:nqn/faults',
      async ({ params, body }) => {
        const s = sub(params.nqn);
        const f = parseWith(faultSchema, await body(), 'body');
        service.setFaults(s.nqn, f);
        return ok(sub(s.nqn).faults ?? {}, true);
      },
    ],

    [
      'GET',
      '/ports',
      () => {
        const bound = service.boundPorts();
        return ok(service.getConfig().ports.map((p) => ({ ...p, bound: bound.find((b) => b.id === p.id) ?? null })));
      },
    ],
    [
      'POST',
      '/ports',
      async ({ body }) => {
        const p = parseWith(portSchema, await body(), 'body');
        return created(await service.addPort(p));
      },
    ],
    ['GET', '/ports/:id', ({ params }) => ok(portCfg(intParam(params.id, 'port id')))],
    [
      'DELETE',
      '/ports/:id',
      async ({ params }) => {
        await service.removePort(portCfg(intParam(params.id, 'port id')).id);
        return noContent;
      },
    ],
    [
      'GET',
      '/ports/:id/ana',
      ({ params }) => ok(portCfg(intParam(params.id, 'port id')).anaStates ?? {}),
    ],
    [
      'PUT',
      '/ports/:id/ana/:grpid',
      async ({ params, body }) => {
        const id = portCfg(intParam(params.id, 'port id')).id;
        const grp = intParam(params.grpid, 'ANA group id');
        if (grp < 1 || grp > 128) throw new HttpError(400, `ANA group ${grp} is out of range; use 1..128`, 'grpid');
        const { state } = parseWith(anaBodySchema, await body(), 'body');
        service.setAnaState(id, grp, state);
        return ok({ portId: id, anaGroup: grp, state }, true);
      },
    ],
    // Per-port placement (ports[].placement) for queues arriving on that port from now on; null: the target-wide one.
    [
      'PUT',
      '/ports/:id/placement',
      async ({ params, body }) => {
        const id = portCfg(intParam(params.id, 'port id')).id;
        const raw = (await body()) as { placement?: unknown } | null;
        const p = raw !== null && typeof raw === 'object' ? raw.placement : undefined;
        if (typeof p !== 'string' && p !== null) throw new HttpError(400, 'body: placement: is missing; give one of single, controller, queue, host, or null for the target-wide one', 'placement');
        if (service.setPortPlacement === undefined) throw new HttpError(400, 'body: placement: this target has no worker placement', 'placement');
        try {
          service.setPortPlacement(id, p);
        } catch (err) {
          // The service names the config field (ports.placement); the API names the body's.
          const msg = (err as Error).message.replace(/^ports\.placement: /, '');
          throw new HttpError(400, `body: placement: ${msg}`, 'placement');
        }
        return ok(service.portPlacements?.().find((x) => x.portId === id) ?? { portId: id }, true);
      },
    ],
    ['GET', '/ports/:id/referrals', ({ params }) => ok(portCfg(intParam(params.id, 'port id')).referrals ?? [])],
    [
      'POST',
      '/ports/:id/referrals',
      async ({ params, body }) => {
        const id = portCfg(intParam(params.id, 'port id')).id;
        const r = parseWith(referralSchema, await body(), 'body');
        service.addReferral(id, r);
        return created(r);
      },
    ],
    [
      'DELETE',
      '/ports/:id/referrals',
      async ({ params, body }) => {
        const id = portCfg(intParam(params.id, 'port id')).id;
        const r = parseWith(referralKeySchema, await body(), 'body');
        service.removeReferral(id, r.addr, r.port);
        return noContent;
      },
    ],
    [
      'DELETE',
      '/ports/:id/referrals/:addr/:port',
      ({ params }) => {
        const id = portCfg(intParam(params.id, 'port id')).id;
        service.removeReferral(id, params.addr ?? '', intParam(params.port, 'referral port'));
        return noContent;
      },
    ],
  ];
  return routes.map(([method, path, handler]) => ({ method, pattern: path.split('/').filter(Boolean), handler }));
}

function matchRoute(pattern: string[], segs: string[]): Params | undefined {
  if (pattern.length !== segs.length) return undefined;
  const params: Params = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i] ?? '';
    const s = segs[i] ?? '';
    if (p.startsWith(':')) params[p.slice(1)] = s;
    else if (p !== s) return undefined;
  }
  return params;
}

/** Maps a thrown error to a status: schema → 400 (with the field path), service refusals → 400/404/409. */
function errorReply(err: unknown): { status: number; error: string; path?: string } {
  if (err instanceof HttpError) return { status: err.status, error: err.message, ...(err.path !== undefined ? { path: err.path } : {}) };
  if (err instanceof ConfigError) return { status: 400, error: err.message, path: err.path };
  const e = err as { code?: unknown; field?: unknown; message?: unknown };
  const message = typeof e.message === 'string' ? e.message : String(err);
  if (e.code === 'NVMEOF_ERR_INVALID_ARG') {
    // TargetService refuses with InvalidArgumentError: a duplicate is a conflict, anything else a bad request.
    const conflict = /already exists|collides|in use/i.test(message);
    return { status: conflict ? 409 : 400, error: message, ...(typeof e.field === 'string' ? { path: e.field } : {}) };
  }
  // Anything else the service threw while applying the change (EADDRINUSE, a missing backing file, ...):
  // the request conflicts with the state of the target or the machine; the message says which.
  return { status: 409, error: message };
}

function tokenDigest(t: string): Buffer {
  return createHash('sha256').update(t).digest();
}

function send(res: ServerResponse, status: number, body: string, contentType: string, extra: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store', ...extra });
  res.end(body);
}

function sendJson(res: ServerResponse, status: number, json: unknown, extra: Record<string, string> = {}): void {
  send(res, status, status === 204 ? '' : `${JSON.stringify(json, null, 2)}\n`, 'application/json; charset=utf-8', extra);
}

function readBody(req: IncomingMessage, limit: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        // Stop buffering but keep draining, so the 413 reaches the client before the connection closes.
        req.removeAllListeners('data');
        req.removeAllListeners('end');
        req.resume();
        reject(new HttpError(413, `body larger than ${limit} bytes`));
        return;
      }
      chunks.push(c);
    });
    req.on('error', reject);
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      if (text.trim() === '') {
        reject(new HttpError(400, 'body: missing; send a JSON object', ''));
        return;
      }
      try {
        resolve(JSON.parse(text) as unknown);
      } catch (err) {
        reject(new HttpError(400, `body: not JSON (${jsonErrorWithoutInput(err)})`, ''));
      }
    });
  });
}

/** Serialised write-back of the live config; keeps the file's own `api` section (the service does not know it). */
function makeWriter(service: MgmtService, path: string, log: Logger | undefined): () => Promise<void> {
  let chain: Promise<void> = Promise.resolve();
  return () => {
    const run = async (): Promise<void> => {
      let api: TargetConfig['api'];
      try {
        const old = JSON.parse(await readFile(path, 'utf8')) as { api?: TargetConfig['api'] };
        api = old.api;
      } catch {
        api = undefined;
      }
      // The file is the only copy of the host keys: save them, not the "<redacted>" the API shows.
      const cfg: TargetConfig = { ...service.getConfig({ includeSecrets: true }), ...(api !== undefined ? { api } : {}) };
      const tmp = `${path}.${process.pid}.tmp`;
      // Owner-only (as nvmetcli saves) once the file holds DH-HMAC-CHAP secrets.
      const secret = (cfg.hosts ?? []).some((h) => h.dhchapKey !== undefined);
      await writeFile(tmp, `${JSON.stringify(cfg, null, 2)}\n`, secret ? { mode: 0o600 } : {});
      await rename(tmp, path);
      log?.debug({ path }, 'config written back');
    };
    const p = chain.then(run);
    chain = p.catch(() => undefined);
    return p;
  };
}

/**
 * Starts the management API. Refuses (ApiConfigError) to listen on a non-loopback address without a token,
 * since anyone who reaches it can remove namespaces and read the configuration.
 */
export async function startApi(service: MgmtService, opts: ApiOptions): Promise<ApiHandle> {
  const hp = parseHostPort(opts.listen);
  if (hp === undefined) throw new ApiConfigError(`api listen ${JSON.stringify(opts.listen)} is not ADDR:PORT; use e.g. 127.0.0.1:8080 or [::1]:8080`);
  const token = opts.token !== undefined && opts.token !== '' ? opts.token : undefined;
  if (!isLoopback(hp.addr) && token === undefined) {
    throw new ApiConfigError(
      `refusing to serve the management API on ${opts.listen} without a token: it is reachable from other machines; set a token (config api.token or NVME_TCP_API_TOKEN) or listen on 127.0.0.1`,
    );
  }
  if (opts.writeBack === true && opts.configPath === undefined) throw new ApiConfigError('api write-back needs the config file path');
  const log = opts.logger;
  const limit = opts.maxBodyBytes ?? 1 << 20;
  const expected = token !== undefined ? tokenDigest(token) : undefined;
  const metrics = createMetrics(service);
  const routes = buildRoutes(service, metrics);
  const writeBack = opts.writeBack === true && opts.configPath !== undefined ? makeWriter(service, opts.configPath, log) : undefined;

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const method = req.method ?? 'GET';
    const url = new URL(req.url ?? '/', 'http://api');
    let segs: string[];
    try {
      segs = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    } catch {
      sendJson(res, 400, { error: `malformed path ${url.pathname}` });
      return;
    }
    const isHealth = segs.length === 1 && segs[0] === 'healthz';
    if (expected !== undefined && !isHealth) {
      const m = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
      if (m?.[1] === undefined || !timingSafeEqual(tokenDigest(m[1].trim()), expected)) {
        sendJson(res, 401, { error: 'missing or wrong bearer token' }, { 'www-authenticate': 'Bearer realm="nvme-tcp"' });
        return;
      }
    }
    let params: Params | undefined;
    let route: Route | undefined;
    const allowed: string[] = [];
    for (const r of routes) {
      const p = matchRoute(r.pattern, segs);
      if (p === undefined) continue;
      allowed.push(r.method);
      if (r.method === method || (method === 'HEAD' && r.method === 'GET')) {
        route = r;
        params = p;
        break;
      }
    }
    if (route === undefined || params === undefined) {
      if (allowed.length > 0) sendJson(res, 405, { error: `${method} not allowed on ${url.pathname}; use ${allowed.join(', ')}` }, { allow: allowed.join(', ') });
      else sendJson(res, 404, { error: `no resource ${url.pathname}` });
      return;
    }
    try {
      const reply = await route.handler({ params, body: () => readBody(req, limit) });
      if (reply.mutated === true && writeBack !== undefined) {
        try {
          await writeBack();
        } catch (err) {
          log?.error({ err, path: opts.configPath }, 'config write-back failed');
          sendJson(res, 500, { error: `change applied, but writing ${opts.configPath ?? ''} failed: ${(err as Error).message}` });
          return;
        }
      }
      if (reply.text !== undefined) send(res, reply.status, reply.text, reply.contentType ?? 'text/plain; charset=utf-8');
      else sendJson(res, reply.status, reply.json);
      if (reply.mutated === true) log?.info({ method, path: url.pathname, status: reply.status }, 'management change');
    } catch (err) {
      const r = errorReply(err);
      if (r.status === 413) res.setHeader('connection', 'close');
      if (r.status === 409) log?.warn({ err, method, path: url.pathname }, 'management request refused');
      sendJson(res, r.status, r.path !== undefined ? { error: r.error, path: r.path } : { error: r.error });
    }
  };

  const server: Server = createServer((req, res) => {
    res.on('error', () => undefined);
    handle(req, res).catch((err: unknown) => {
      log?.error({ err }, 'management API handler crashed');
      if (!res.headersSent) sendJson(res, 500, { error: 'internal error' });
      else res.destroy();
    });
  });
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
    else socket.destroy();
  });
  server.keepAliveTimeout = 5_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: hp.addr, port: hp.port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (err) => log?.error({ err }, 'management API server error'));
  const a = server.address() as AddressInfo;
  const hostPart = a.family === 'IPv6' ? `[${a.address}]` : a.address;
  log?.info({ address: a.address, port: a.port, auth: token !== undefined, writeBack: writeBack !== undefined }, 'management API listening');
  let closing: Promise<void> | undefined;
  return {
    address: a.address,
    port: a.port,
    url: `http://${hostPart}:${a.port}`,
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        metrics.close();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

export interface TargetApiOptions {
  /** `--api ADDR:PORT` from the command line; wins over the config file's api.listen. */
  listen?: string;
  /** The loaded config (its `api` section supplies listen and token). */
  config?: TargetConfig;
  configPath?: string;
  writeBack?: boolean;
  logger?: Logger;
  /** Environment for NVME_TCP_API_TOKEN (default process.env). */
  env?: NodeJS.ProcessEnv;
}

/**
 * What `nvme-tcp target` calls after service.apply(): starts the API when `--api` or config `api.listen`
 * asks for it (undefined otherwise). The token comes from config `api.token`, else $NVME_TCP_API_TOKEN.
 */
export async function startTargetApi(service: MgmtService, opts: TargetApiOptions): Promise<ApiHandle | undefined> {
  const listen = opts.listen ?? opts.config?.api?.listen;
  if (listen === undefined) return undefined;
  const token = opts.config?.api?.token ?? (opts.env ?? process.env).NVME_TCP_API_TOKEN;
  return startApi(service, {
    listen,
    ...(token !== undefined && token !== '' ? { token } : {}),
    ...(opts.configPath !== undefined ? { configPath: opts.configPath } : {}),
    ...(opts.writeBack !== undefined ? { writeBack: opts.writeBack } : {}),
    ...(opts.logger !== undefined ? { logger: opts.logger } : {}),
  });
}
