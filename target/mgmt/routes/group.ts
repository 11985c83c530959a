// Routes of a gateway group (docs/gateway-groups.md): GET /group, every gateway's view of the group, and the
// operator's moves. Moves are not configuration changes (mutated: false).
import { z } from 'zod';
import { parseWith } from '../../config/schema.js';
import { ok, type RouteEntry } from './route.js';

const failoverBody = z.strictObject({ to: z.string().min(1).optional() });
const drainBody = z.strictObject({ draining: z.boolean(), id: z.string().min(1).optional() });

/** The `:grpid` path parameter: an ANA group id 1..128 (ANAGRPMAX). */
function grpidParam(v: string | undefined): number {
  const n = Number(v);
  if (v === undefined || !/^\d+$/.test(v) || n < 1 || n > 128) throw Object.assign(new Error(`ANA group ${JSON.stringify(v ?? '')} is not 1..128`), { code: 'NVMEOF_ERR_INVALID_ARG', field: 'grpid' });
  return n;
}

/** A target outside a gateway group lacks these methods: 409 with the fix. */
function need<T>(f: T | undefined): T {
  if (f === undefined) throw new Error('this target is not in a gateway group; start it with --gateway-group NAME --etcd URL');
  return f;
}

export const groupRoutes: readonly RouteEntry[] = [
  { method: 'GET', path: '/group', handler: async ({ service }) => ok(await need(service.groupView?.bind(service))()) },
  {
    method: 'POST',
    path: '/group/ana-groups/:grpid/failover',
    handler: async ({ service, params, body }) => {
      const { to } = parseWith(failoverBody, await body(), 'body');
      return ok(await need(service.groupFailover?.bind(service))(grpidParam(params.grpid), to));
    },
  },
  { method: 'POST', path: '/group/ana-groups/:grpid/failback', handler: async ({ service, params }) => ok(await need(service.groupFailback?.bind(service))(grpidParam(params.grpid))) },
  {
    method: 'POST',
    path: '/group/drain',
    handler: async ({ service, body }) => {
      const { draining, id } = parseWith(drainBody, await body(), 'body');
      return ok(await need(service.setGatewayDraining?.bind(service))(draining, id));
    },
  },
];
