// Routes of DH-HMAC-CHAP keys per host (nvmet hosts/<nqn>/dhchap_*). Replies never carry a secret: listHostAuth
// and getConfig() redact them, and the PUT body is validated by hostSchema, whose errors never quote a secret.
import { hostSchema, parseWith } from '../../config/schema.js';
import { HttpError } from '../http.js';
import { created, noContent, ok, type RouteEntry } from './route.js';

const noKeys = (nqn: string): HttpError => new HttpError(404, `no authentication keys for host ${nqn}`);

export const hostKeyRoutes: readonly RouteEntry[] = [
  { method: 'GET', path: '/hosts', handler: ({ service }) => ok(service.listHostAuth()) },
  {
    method: 'GET',
    path: '/hosts/:nqn',
    handler: ({ service, params }) => {
      const h = service.listHostAuth().find((x) => x.hostnqn === params.nqn);
      if (h === undefined) throw noKeys(params.nqn ?? '');
      return ok(h);
    },
  },
  {
    method: 'PUT',
    path: '/hosts/:nqn',
    handler: async ({ service, params, body }) => {
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
  },
  {
    method: 'DELETE',
    path: '/hosts/:nqn',
    handler: ({ service, params }) => {
      const nqn = params.nqn ?? '';
      if (!service.listHostAuth().some((x) => x.hostnqn === nqn)) throw noKeys(nqn);
      service.clearHostAuth(nqn);
      return noContent;
    },
  },
];
