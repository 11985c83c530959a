// HTTP management API (issue 5): JSON resources over node:http, each route one TargetService call. The routes are
// tables by concern (./routes/), read by ./router.ts; ./http.ts turns every thrown error into a status. Bodies pass
// through the config schema (target/config/schema.ts), so a body is valid exactly when the same object would be
// valid in the config file; /metrics serves the Prometheus registry of ./metrics.ts.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { parseHostPort } from '../config/schema.js';
import type { TargetConfig } from '../model/config.js';
import { HttpError, errorReply, readBody, send, sendError, sendJson } from './http.js';
import { createMetrics, type TargetMetrics } from './metrics.js';
import { compileRoutes, findRoute, isPublicPath, pathSegments, type CompiledRoute } from './router.js';
import { ROUTE_TABLES, type MgmtService, type RouteService } from './routes/index.js';

export type { MgmtService } from './routes/index.js';

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

/** True for addresses only this machine can reach: 127.0.0.0/8, ::1 and their IPv4-mapped forms. */
export function isLoopback(addr: string): boolean {
  const a = addr.toLowerCase().replace(/^::ffff:/, '');
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(a) || a === '::1' || a === '0:0:0:0:0:0:0:1';
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

/** ApiOptions checked: where to listen, the token (if any), the body limit. */
interface ApiSettings {
  addr: string;
  port: number;
  token: string | undefined;
  maxBodyBytes: number;
}

/**
 * Refuses (ApiConfigError) a bad listen spec, write-back without a file, and a non-loopback address without a
 * token, since anyone who reaches the API can remove namespaces and read the configuration.
 */
function checkOptions(opts: ApiOptions): ApiSettings {
  const hp = parseHostPort(opts.listen);
  if (hp === undefined) throw new ApiConfigError(`api listen ${JSON.stringify(opts.listen)} is not ADDR:PORT; use e.g. 127.0.0.1:8080 or [::1]:8080`);
  const token = opts.token !== undefined && opts.token !== '' ? opts.token : undefined;
  if (!isLoopback(hp.addr) && token === undefined) {
    throw new ApiConfigError(
      `refusing to serve the management API on ${opts.listen} without a token: it is reachable from other machines; set a token (config api.token or NVME_TCP_API_TOKEN) or listen on 127.0.0.1`,
    );
  }
  if (opts.writeBack === true && opts.configPath === undefined) throw new ApiConfigError('api write-back needs the config file path');
  return { addr: hp.addr, port: hp.port, token, maxBodyBytes: opts.maxBodyBytes ?? 1 << 20 };
}

function tokenDigest(t: string): Buffer {
  return createHash('sha256').update(t).digest();
}

/** A bearer-token check comparing digests in constant time; throws the 401. */
function bearerCheck(token: string): (req: IncomingMessage) => void {
  const expected = tokenDigest(token);
  return (req) => {
    const m = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
    if (m?.[1] === undefined || !timingSafeEqual(tokenDigest(m[1].trim()), expected)) {
      throw new HttpError(401, 'missing or wrong bearer token', undefined, { 'www-authenticate': 'Bearer realm="nvme-tcp"' });
    }
  };
}

/** What one request needs besides itself. */
interface Dispatcher {
  service: RouteService;
  metrics: TargetMetrics;
  routes: readonly CompiledRoute[];
  /** Throws the 401 when the request lacks the token; undefined: no token set. */
  checkToken: ((req: IncomingMessage) => void) | undefined;
  maxBodyBytes: number;
  writeBack: (() => Promise<void>) | undefined;
  configPath: string | undefined;
  log: Logger | undefined;
}

/** Serves one request: path, token, route, handler, write-back, reply; every refusal is a thrown error. */
async function dispatch(d: Dispatcher, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const method = req.method ?? 'GET';
  const url = new URL(req.url ?? '/', 'http://api');
  try {
    const segs = pathSegments(url.pathname);
    if (d.checkToken !== undefined && !isPublicPath(d.routes, segs)) d.checkToken(req);
    const { entry, params } = findRoute(d.routes, method, segs, url.pathname);
    const reply = await entry.handler({ service: d.service, metrics: d.metrics, params, body: () => readBody(req, d.maxBodyBytes) });
    if (reply.mutated === true && d.writeBack !== undefined) {
      try {
        await d.writeBack();
      } catch (err) {
        d.log?.error({ err, path: d.configPath }, 'config write-back failed');
        throw new HttpError(500, `change applied, but writing ${d.configPath ?? ''} failed: ${(err as Error).message}`);
      }
    }
    if (reply.text !== undefined) send(res, reply.status, reply.text, reply.contentType ?? 'text/plain; charset=utf-8');
    else sendJson(res, reply.status, reply.json);
    if (reply.mutated === true) d.log?.info({ method, path: url.pathname, status: reply.status }, 'management change');
  } catch (err) {
    const r = errorReply(err);
    if (r.status === 413) res.setHeader('connection', 'close');
    // A refusal (4xx) is the caller's input meeting the target's rules: one info line with the status and the reason,
    // no stack. A 5xx is the target's own failure and keeps its stack.
    if (r.status >= 500) d.log?.error({ err, method, path: url.pathname, status: r.status }, 'management request failed');
    else d.log?.info({ method, path: url.pathname, status: r.status, reason: r.error }, 'management request refused');
    sendError(res, r);
  }
}

function createApiServer(d: Dispatcher): Server {
  const server = createServer((req, res) => {
    res.on('error', () => undefined);
    dispatch(d, req, res).catch((err: unknown) => {
      d.log?.error({ err }, 'management API handler crashed');
      if (!res.headersSent) sendJson(res, 500, { error: 'internal error' });
      else res.destroy();
    });
  });
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
    else socket.destroy();
  });
  server.keepAliveTimeout = 5_000;
  return server;
}

async function listen(server: Server, addr: string, port: number, log: Logger | undefined): Promise<AddressInfo> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: addr, port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (err) => log?.error({ err }, 'management API server error'));
  return server.address() as AddressInfo;
}

/**
 * Starts the management API. Refuses (ApiConfigError) to listen on a non-loopback address without a token,
 * since anyone who reaches it can remove namespaces and read the configuration.
 */
export async function startApi(service: MgmtService, opts: ApiOptions): Promise<ApiHandle> {
  const settings = checkOptions(opts);
  const log = opts.logger;
  const metrics = createMetrics(service);
  const writeBack = opts.writeBack === true && opts.configPath !== undefined ? makeWriter(service, opts.configPath, log) : undefined;
  const server = createApiServer({
    service,
    metrics,
    routes: compileRoutes(ROUTE_TABLES),
    checkToken: settings.token !== undefined ? bearerCheck(settings.token) : undefined,
    maxBodyBytes: settings.maxBodyBytes,
    writeBack,
    configPath: opts.configPath,
    log,
  });
  const a = await listen(server, settings.addr, settings.port, log);
  const hostPart = a.family === 'IPv6' ? `[${a.address}]` : a.address;
  log?.info({ address: a.address, port: a.port, auth: settings.token !== undefined, writeBack: writeBack !== undefined }, 'management API listening');
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
  /** The token when the config has none ('' for none); the bin passes $NVME_TCP_API_TOKEN. */
  token?: string;
}

/**
 * What `nvme-tcp target` calls after service.apply(): starts the API when `--api` or config `api.listen`
 * asks for it (undefined otherwise). The token comes from config `api.token`, else `opts.token`.
 */
export async function startTargetApi(service: MgmtService, opts: TargetApiOptions): Promise<ApiHandle | undefined> {
  const listen = opts.listen ?? opts.config?.api?.listen;
  if (listen === undefined) return undefined;
  const token = opts.config?.api?.token ?? opts.token;
  return startApi(service, {
    listen,
    ...(token !== undefined && token !== '' ? { token } : {}),
    ...(opts.configPath !== undefined ? { configPath: opts.configPath } : {}),
    ...(opts.writeBack !== undefined ? { writeBack: opts.writeBack } : {}),
    ...(opts.logger !== undefined ? { logger: opts.logger } : {}),
  });
}
