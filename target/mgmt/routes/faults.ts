// Routes of the fault engine (docs/faults.md): list the rules with their hit counts, add one, remove one or all.
import { parseFaultRule } from '../../config/fault-rules.js';
import { HttpError } from '../http.js';
import { created, noContent, ok, type RouteEntry } from './route.js';

export const faultRoutes: readonly RouteEntry[] = [
  { method: 'GET', path: '/faults', handler: ({ service }) => ok(service.listFaultRules()) },
  {
    method: 'POST',
    path: '/faults',
    handler: async ({ service, body }) => created(service.addFaultRule(parseFaultRule(await body(), 'body'))),
  },
  {
    method: 'DELETE',
    path: '/faults',
    handler: ({ service }) => ok({ removed: service.clearFaultRules() }, true),
  },
  {
    method: 'DELETE',
    path: '/faults/:id',
    handler: ({ service, params }) => {
      if (!service.removeFaultRule(params.id ?? '')) throw new HttpError(404, `no fault rule ${params.id ?? ''}`);
      return noContent;
    },
  },
];
