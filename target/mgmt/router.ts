// Reads the route tables (./routes/) once into segment patterns and finds the entry a request names; a path that
// no table has is a 404, a path some table has under other methods a 405 with the Allow header.
import { HttpError } from './http.js';
import type { Params, RouteEntry } from './routes/index.js';

export interface CompiledRoute {
  readonly entry: RouteEntry;
  readonly pattern: readonly string[];
}

export interface RouteMatch {
  readonly entry: RouteEntry;
  readonly params: Params;
}

export function compileRoutes(tables: readonly (readonly RouteEntry[])[]): CompiledRoute[] {
  return tables.flat().map((entry) => ({ entry, pattern: entry.path.split('/').filter(Boolean) }));
}

/** The URL path as decoded segments; a bad %-escape is a 400. */
export function pathSegments(pathname: string): string[] {
  try {
    return pathname.split('/').filter(Boolean).map(decodeURIComponent);
  } catch {
    throw new HttpError(400, `malformed path ${pathname}`);
  }
}

function matchPattern(pattern: readonly string[], segs: readonly string[]): Params | undefined {
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

/** True when the path is a public route's (served without a token, whatever the method). */
export function isPublicPath(routes: readonly CompiledRoute[], segs: readonly string[]): boolean {
  return routes.some((r) => r.entry.public === true && matchPattern(r.pattern, segs) !== undefined);
}

/** The entry for `method` on `segs` (HEAD is served as GET); throws the 404 or 405. */
export function findRoute(routes: readonly CompiledRoute[], method: string, segs: readonly string[], pathname: string): RouteMatch {
  const allowed: string[] = [];
  for (const r of routes) {
    const params = matchPattern(r.pattern, segs);
    if (params === undefined) continue;
    allowed.push(r.entry.method);
    if (r.entry.method === method || (method === 'HEAD' && r.entry.method === 'GET')) return { entry: r.entry, params };
  }
  if (allowed.length > 0) throw new HttpError(405, `${method} not allowed on ${pathname}; use ${allowed.join(', ')}`, undefined, { allow: allowed.join(', ') });
  throw new HttpError(404, `no resource ${pathname}`);
}
