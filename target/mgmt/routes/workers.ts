// Routes of the worker pool (target/workers): its state, and the placement policy target-wide and per port.
import { PLACEMENT_LIST } from '../../config/index.js';
import { HttpError } from '../http.js';
import { ok, portOf, type RouteEntry } from './route.js';

/** The `placement` field of a body, or undefined when the body is not an object or lacks it. */
function placementField(raw: unknown): unknown {
  return raw !== null && typeof raw === 'object' ? (raw as { placement?: unknown }).placement : undefined;
}

export const workerRoutes: readonly RouteEntry[] = [
  // Count, placement policy, and each worker's state, queues, CPU, I/Os, lag.
  {
    method: 'GET',
    path: '/workers',
    handler: ({ service }) => ok({ placement: service.placement ?? 'queue', workers: service.workers?.() ?? [], ports: service.portPlacements?.() ?? [] }),
  },
  {
    method: 'PUT',
    path: '/workers/placement',
    handler: async ({ service, body }) => {
      const p = placementField(await body());
      if (typeof p !== 'string') throw new HttpError(400, `body: placement: is missing; give one of ${PLACEMENT_LIST}`, 'placement');
      try {
        if (service.setPlacement === undefined) throw new Error('this target has no worker pool');
        service.setPlacement(p);
      } catch (err) {
        throw new HttpError(400, `body: placement: ${(err as Error).message}`, 'placement');
      }
      return ok({ placement: service.placement });
    },
  },
  // Per-port placement (ports[].placement) for queues arriving on that port from now on; null: the target-wide one.
  {
    method: 'PUT',
    path: '/ports/:id/placement',
    handler: async ({ service, params, body }) => {
      const id = portOf(service, params.id).id;
      const p = placementField(await body());
      if (typeof p !== 'string' && p !== null) throw new HttpError(400, `body: placement: is missing; give one of ${PLACEMENT_LIST}, or null for the target-wide one`, 'placement');
      if (service.setPortPlacement === undefined) throw new HttpError(400, 'body: placement: this target has no worker placement', 'placement');
      try {
        service.setPortPlacement(id, p);
      } catch (err) {
        // The service names the config field (ports.placement); the API names the body's.
        const msg = (err as Error).message.replace(/^ports\.placement: /, '');
        throw new HttpError(400, `body: placement: ${msg}`, 'placement');
      }
      return ok(service.portPlacements?.().find((x) => x.portId === id) ?? { portId: id }, true);
    },
  },
];
