// Routes of ports: add, list with the bound TCP port, show, remove, and each port's discovery referrals.
import { z } from 'zod';
import { parseWith, portSchema, referralSchema } from '../../config/schema.js';
import { created, intParam, noContent, ok, portOf, type RouteEntry } from './route.js';

/** `{addr, port}`: the referral DELETE /ports/:id/referrals removes. */
const referralKeySchema = z.strictObject({ addr: z.string(), port: z.number().int() });

export const portRoutes: readonly RouteEntry[] = [
  {
    method: 'GET',
    path: '/ports',
    handler: ({ service }) => {
      const bound = service.boundPorts();
      return ok(service.getConfig().ports.map((p) => ({ ...p, bound: bound.find((b) => b.id === p.id) ?? null })));
    },
  },
  {
    method: 'POST',
    path: '/ports',
    handler: async ({ service, body }) => {
      const p = parseWith(portSchema, await body(), 'body');
      return created(await service.addPort(p));
    },
  },
  { method: 'GET', path: '/ports/:id', handler: ({ service, params }) => ok(portOf(service, params.id)) },
  {
    method: 'DELETE',
    path: '/ports/:id',
    handler: async ({ service, params }) => {
      await service.removePort(portOf(service, params.id).id);
      return noContent;
    },
  },
  { method: 'GET', path: '/ports/:id/referrals', handler: ({ service, params }) => ok(portOf(service, params.id).referrals ?? []) },
  {
    method: 'POST',
    path: '/ports/:id/referrals',
    handler: async ({ service, params, body }) => {
      const id = portOf(service, params.id).id;
      const r = parseWith(referralSchema, await body(), 'body');
      service.addReferral(id, r);
      return created(r);
    },
  },
  {
    method: 'DELETE',
    path: '/ports/:id/referrals',
    handler: async ({ service, params, body }) => {
      const id = portOf(service, params.id).id;
      const r = parseWith(referralKeySchema, await body(), 'body');
      service.removeReferral(id, r.addr, r.port);
      return noContent;
    },
  },
  {
    method: 'DELETE',
    path: '/ports/:id/referrals/:addr/:port',
    handler: ({ service, params }) => {
      const id = portOf(service, params.id).id;
      service.removeReferral(id, params.addr ?? '', intParam(params.port, 'referral port'));
      return noContent;
    },
  },
];
