// Routes of Asymmetric Namespace Access Reporting (NVMe Base 2.0 §8.1): each port's ANA group states; a change
// sends the ANA Change AEN.
import { z } from 'zod';
import { anaStateSchema, parseWith } from '../../config/schema.js';
import { HttpError } from '../http.js';
import { intParam, ok, portOf, type RouteEntry } from './route.js';

const anaBodySchema = z.strictObject({ state: anaStateSchema });

export const anaRoutes: readonly RouteEntry[] = [
  { method: 'GET', path: '/ports/:id/ana', handler: ({ service, params }) => ok(portOf(service, params.id).anaStates ?? {}) },
  {
    method: 'PUT',
    path: '/ports/:id/ana/:grpid',
    handler: async ({ service, params, body }) => {
      const id = portOf(service, params.id).id;
      const grp = intParam(params.grpid, 'ANA group id');
      if (grp < 1 || grp > 128) throw new HttpError(400, `ANA group ${grp} is out of range; use 1..128`, 'grpid');
      const { state } = parseWith(anaBodySchema, await body(), 'body');
      service.setAnaState(id, grp, state);
      return ok({ portId: id, anaGroup: grp, state }, true);
    },
  },
];
