// Routes of a subsystem's namespaces: add, show, enable/disable or re-map, remove, host masking, and the zones of a
// zoned one.
import { z } from 'zod';
import { namespaceSchema, parseWith } from '../../config/schema.js';
import { HttpError } from '../http.js';
import { created, hostBodySchema, intParam, namespaceOf, noContent, nsidParam, ok, subsystemOf, type RouteEntry } from './route.js';

/** `{condition}`: the medium condition to give a zone (TargetService.setZoneCondition). */
const zoneConditionSchema = z.strictObject({ condition: z.enum(['read-only', 'offline'], { error: (iss) => `${JSON.stringify(iss.input)} is not a zone condition; use "read-only" or "offline"` }) });

export const namespaceRoutes: readonly RouteEntry[] = [
  { method: 'GET', path: '/subsystems/:nqn/namespaces', handler: ({ service, params }) => ok(subsystemOf(service, params.nqn).namespaces ?? []) },
  {
    method: 'POST',
    path: '/subsystems/:nqn/namespaces',
    handler: async ({ service, params, body }) => {
      const nqn = subsystemOf(service, params.nqn).nqn;
      const ns = parseWith(namespaceSchema, await body(), 'body');
      await service.addNamespace(nqn, ns);
      return created((subsystemOf(service, nqn).namespaces ?? []).find((n) => n.nsid === ns.nsid) ?? ns);
    },
  },
  {
    method: 'GET',
    path: '/subsystems/:nqn/namespaces/:nsid',
    handler: ({ service, params }) => {
      const nsid = nsidParam(params);
      return ok(namespaceOf(subsystemOf(service, params.nqn), nsid));
    },
  },
  // Enable/disable ({"enabled": false}) or re-map ({"backend": ..., "uuid": ...}): the body's fields replace the
  // namespace's, the others stay; the result must be a valid namespace config.
  {
    method: 'PUT',
    path: '/subsystems/:nqn/namespaces/:nsid',
    handler: async ({ service, params, body }) => {
      const s = subsystemOf(service, params.nqn);
      const nsid = nsidParam(params);
      const cur = namespaceOf(s, nsid);
      const raw = await body();
      if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new HttpError(400, 'body: expected a JSON object of namespace fields, e.g. {"enabled": false}', '');
      if ('nsid' in raw && (raw as { nsid?: unknown }).nsid !== nsid) throw new HttpError(400, `body: nsid: differs from the namespace in the path (${nsid}); drop it or make them equal`, 'nsid');
      const next = parseWith(namespaceSchema, { ...cur, ...raw, nsid }, 'body');
      await service.updateNamespace(s.nqn, next);
      return ok((subsystemOf(service, s.nqn).namespaces ?? []).find((n) => n.nsid === nsid) ?? next, true);
    },
  },
  {
    method: 'DELETE',
    path: '/subsystems/:nqn/namespaces/:nsid',
    handler: async ({ service, params }) => {
      const s = subsystemOf(service, params.nqn);
      const nsid = namespaceOf(s, nsidParam(params)).nsid;
      await service.removeNamespace(s.nqn, nsid);
      return noContent;
    },
  },
  // Namespace masking: the hosts a namespace is attached to (null: every allowed host).
  {
    method: 'GET',
    path: '/subsystems/:nqn/namespaces/:nsid/hosts',
    handler: ({ service, params }) => ok({ hosts: service.namespaceHosts(subsystemOf(service, params.nqn).nqn, nsidParam(params)) ?? null }),
  },
  {
    method: 'POST',
    path: '/subsystems/:nqn/namespaces/:nsid/hosts',
    handler: async ({ service, params, body }) => {
      const s = subsystemOf(service, params.nqn);
      const nsid = nsidParam(params);
      const { nqn } = parseWith(hostBodySchema, await body(), 'body');
      if ((service.namespaceHosts(s.nqn, nsid) ?? []).includes(nqn)) throw new HttpError(409, `namespace ${nsid} is already attached to ${nqn}`);
      await service.attachNamespaceHost(s.nqn, nsid, nqn);
      return created({ hosts: service.namespaceHosts(s.nqn, nsid) ?? null });
    },
  },
  {
    method: 'DELETE',
    path: '/subsystems/:nqn/namespaces/:nsid/hosts/:hostnqn',
    handler: async ({ service, params }) => {
      const s = subsystemOf(service, params.nqn);
      const nsid = nsidParam(params);
      const h = params.hostnqn ?? '';
      const cur = service.namespaceHosts(s.nqn, nsid);
      if (cur !== undefined && !cur.includes(h)) throw new HttpError(404, `namespace ${nsid} is not attached to ${h}`);
      await service.detachNamespaceHost(s.nqn, nsid, h);
      return noContent;
    },
  },
  // Zoned namespaces (docs/target.md, zoned namespaces): every zone's start, capacity, write pointer and state.
  {
    method: 'GET',
    path: '/subsystems/:nqn/namespaces/:nsid/zones',
    handler: ({ service, params }) => {
      const s = subsystemOf(service, params.nqn);
      const nsid = namespaceOf(s, nsidParam(params)).nsid;
      const zones = service.zones?.(s.nqn, nsid);
      if (zones === undefined) throw new HttpError(404, `namespace ${nsid} of ${s.nqn} is not zoned`);
      return ok(zones);
    },
  },
  {
    method: 'PUT',
    path: '/subsystems/:nqn/namespaces/:nsid/zones/:zone',
    handler: async ({ service, params, body }) => {
      const s = subsystemOf(service, params.nqn);
      const nsid = namespaceOf(s, nsidParam(params)).nsid;
      const zone = intParam(params.zone, 'zone');
      const { condition } = parseWith(zoneConditionSchema, await body(), 'body');
      if (service.setZoneCondition === undefined || service.zones?.(s.nqn, nsid) === undefined) throw new HttpError(404, `namespace ${nsid} of ${s.nqn} is not zoned`);
      service.setZoneCondition(s.nqn, nsid, zone, condition);
      return ok(service.zones?.(s.nqn, nsid)?.[zone]);
    },
  },
];
