// HTTP plumbing of the management API: the typed error a route throws, reading a JSON body, writing a reply,
// and errorReply, the one place a thrown error becomes an HTTP status and body.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ConfigError } from '../config/schema.js';
import { jsonErrorWithoutInput } from './client.js';

/** An HTTP-level failure with the status it maps to; `path` names the body field for 400s; `headers` go with it. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly path?: string,
    readonly headers?: Readonly<Record<string, string>>,
  ) {
    super(message);
  }
}

export interface ErrorReply {
  status: number;
  error: string;
  path?: string;
  headers?: Readonly<Record<string, string>>;
}

/**
 * Maps a thrown error to a status: HttpError → its own, schema → 400 (with the field path), service refusals
 * → 400/404/409.
 */
export function errorReply(err: unknown): ErrorReply {
  if (err instanceof HttpError) {
    return { status: err.status, error: err.message, ...(err.path !== undefined ? { path: err.path } : {}), ...(err.headers !== undefined ? { headers: err.headers } : {}) };
  }
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

export function send(res: ServerResponse, status: number, body: string, contentType: string, extra: Readonly<Record<string, string>> = {}): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store', ...extra });
  res.end(body);
}

export function sendJson(res: ServerResponse, status: number, json: unknown, extra: Readonly<Record<string, string>> = {}): void {
  send(res, status, status === 204 ? '' : `${JSON.stringify(json, null, 2)}\n`, 'application/json; charset=utf-8', extra);
}

/** Writes an ErrorReply: `{error}`, plus `path` when it names a body field. */
export function sendError(res: ServerResponse, r: ErrorReply): void {
  sendJson(res, r.status, r.path !== undefined ? { error: r.error, path: r.path } : { error: r.error }, r.headers);
}

/** Reads a JSON request body of at most `limit` bytes. */
export function readBody(req: IncomingMessage, limit: number): Promise<unknown> {
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
