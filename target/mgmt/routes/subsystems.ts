// Routes of subsystems: add, show, change runtime attributes, remove; the host allow list; the fault knobs.
import { faultSchema, parseWith, subsystemSchema, subsystemUpdateSchema } from '../../config/schema.js';
import { HttpError } from '../http.js';
import { created, hostBodySchema, noContent, ok, subsystemOf, type RouteEntry } from './route.js';

export const subsystemRoutes: readonly RouteEntry[] = [
  { method: 'GET', path: '/subsystems', handler: ({ service }) => ok(service.getConfig().subsystems) },
  {
    method: 'POST',
    path: '/subsystems',
    handler: async ({ service, body }) => {
      const s = parseWith(subsystemSchema, await body(), 'body');
      await service.addSubsystem(s);
      return created(subsystemOf(service, s.nqn));
    },
  },
  { method: 'GET', path: '/subsystems/:nqn', handler: ({ service, params }) => ok(subsystemOf(service, params.nqn)) },
  {
    method: 'PUT',
    path: '/subsystems/:nqn',
    handler: async ({ service, params, body }) => {
      const nqn = subsystemOf(service, params.nqn).nqn;
      service.updateSubsystem(nqn, parseWith(subsystemUpdateSchema, await body(), 'body'));
      return ok(subsystemOf(service, nqn), true);
    },
  },
  {
    method: 'DELETE',
    path: '/subsystems/:nqn',
    handler: async ({ service, params }) => {
      await service.removeSubsystem(subsystemOf(service, params.nqn).nqn);
      return noContent;
    },
  },
  {
    method: 'GET',
    path: '/subsystems/:nqn/hosts',
    handler: ({ service, params }) => {
      const s = subsystemOf(service, params.nqn);
      return ok({ allowAnyHost: s.allowAnyHost ?? (s.hosts ?? []).length === 0, hosts: s.hosts ?? [] });
    },
  },
  {
    method: 'POST',
    path: '/subsystems/:nqn/hosts',
    handler: async ({ service, params, body }) => {
      const s = subsystemOf(service, params.nqn);
      const { nqn } = parseWith(hostBodySchema, await body(), 'body');
      if ((s.hosts ?? []).includes(nqn)) throw new HttpError(409, `host ${nqn} is already allowed on ${s.nqn}`);
      service.addAllowedHost(s.nqn, nqn);
      return created({ nqn });
    },
  },
  {
    method: 'DELETE',
    path: '/subsystems/:nqn/hosts/:hostnqn',
    handler: ({ service, params }) => {
      const s = subsystemOf(service, params.nqn);
      const h = params.hostnqn ?? '';
      if (!(s.hosts ?? []).includes(h)) throw new HttpError(404, `host ${h} is not in the allow list of ${s.nqn}`);
      service.removeAllowedHost(s.nqn, h);
      return noContent;
    },
  },
  {
    method: 'PUT',
    path: '/subsystems/:nqn/faults',
    handler: async ({ service, params, body }) => {
      const s = subsystemOf(service, params.nqn);
      const f = parseWith(faultSchema, await body(), 'body');
      service.setFaults(s.nqn, f);
      return ok(subsystemOf(service, s.nqn).faults ?? {}, true);
    },
  },
];
