// Routes of reservations (NVMe Base 2.0 §8.19): a namespace's state, read-only; hosts change it with commands.
import { nsidParam, ok, subsystemOf, type RouteEntry } from './route.js';

export const reservationRoutes: readonly RouteEntry[] = [
  // Registrants by host identifier, keys, type, PTPL.
  {
    method: 'GET',
    path: '/subsystems/:nqn/namespaces/:nsid/reservation',
    handler: ({ service, params }) => ok(service.reservationStatus(subsystemOf(service, params.nqn).nqn, nsidParam(params))),
  },
];
