// Every route of the management API, one table per concern; the router (../router.ts) reads them in this order.
import { anaRoutes } from './ana.js';
import { faultRoutes } from './faults.js';
import { groupRoutes } from './group.js';
import { hostKeyRoutes } from './host-keys.js';
import { namespaceRoutes } from './namespaces.js';
import { portRoutes } from './ports.js';
import { reservationRoutes } from './reservations.js';
import type { RouteEntry } from './route.js';
import { statusRoutes } from './status.js';
import { subsystemRoutes } from './subsystems.js';
import { workerRoutes } from './workers.js';

export const ROUTE_TABLES: readonly (readonly RouteEntry[])[] = [
  statusRoutes,
  workerRoutes,
  hostKeyRoutes,
  subsystemRoutes,
  namespaceRoutes,
  reservationRoutes,
  portRoutes,
  anaRoutes,
  faultRoutes,
  groupRoutes,
];

export { type GroupService, type MgmtService, type RouteContext, type RouteEntry, type RouteService, type Reply, type Params } from './route.js';
